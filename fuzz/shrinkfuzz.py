#!/usr/bin/env python
"""Truncate a store file at a random moment while a command reads it, many times (issue 31).

    .venv/bin/python fuzz/shrinkfuzz.py --iterations 200 [--seed 1] [--messages 40000]

A store copied while a broker or expire still runs, or an rsync in flight, shrinks under
the reader: before store/mapguard.py the reader died of SIGBUS (exit 135, no message). Each
iteration copies a multi-file store, starts one of dump-commitlog, verify, rebuild-index
(--output, --in-place) or export as a subprocess, and after a random delay (up to 1.2 times
the command's own run time) truncates one of its commit-log files (most runs), a
consume-queue or an index file to a random length (0, a page boundary, or any byte). Then:

- the command ended by itself: never by a signal, never a traceback, at most one
  ``rmqstore: error:`` line, exit 0, 1 or 3 (dump-commitlog, export, rebuild-index 0 or 3);
- a "shrank while it was read" line names the truncated file at the length it was cut to
  (its first lost byte), with the documented hint;
- rebuild-index --output: exit 0 and a complete set (consumequeue/, index/, checkpoint), or
  no set and no staging directory at all; --in-place: exit 0 and no staging or journal
  left, or the old consumequeue/, index/ and checkpoint byte for byte and nothing left.

Outcomes are counted per command (the read was done before the cut: exit 0 or verify's 1;
the shrink line; another refusal, such as a size check that already saw the shorter file).
``run_iterations`` is what tests/safety/test_shrink.py runs briefly with a fixed seed.
"""
from __future__ import annotations

import argparse
import hashlib
import mmap
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

SIZES = ["--commitlog-file-size", "1048576", "--cq-file-size", "6000", "--index-slots", "512", "--index-max", "4000"]
HINT = ("the file was truncated while rmqstore read it (a broker, expire or a copy still writing the store?); "
        "read a stable copy (stop the broker or let the copy finish) and run again")
SHRUNK = re.compile(r"rmqstore: error: (.+) shrank while it was read \((.+):(\d+)\); (.*)")

COMMANDS = {
    "dump-commitlog": lambda s, w: ["dump-commitlog", "--store", s, "--format", "jsonl", "--body", "base64"],
    "verify": lambda s, w: ["verify", "--store", s, "--crc", "--format", "jsonl"],
    "rebuild-output": lambda s, w: ["rebuild-index", "--store", s, "--output", w / "out"],
    "rebuild-in-place": lambda s, w: ["rebuild-index", "--store", s, "--in-place", "--no-backup"],
    "export": lambda s, w: ["export", "--store", s, "--output", w / "parquet"],
}
EXITS = {"verify": (0, 1, 3)}


def _rmq(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqstore_cli", *map(str, args)], capture_output=True, timeout=600)


def make_master(path: Path, messages: int) -> Path:
    r = _rmq("generate", "--store", path, "--messages", messages, "--seed", 31, *SIZES, "--body-size", "300",
             "--format", "json")
    if r.returncode != 0:
        raise SystemExit(f"generate failed: {r.stderr.decode()[-500:]}")
    return path


def copy_store(master: Path, store: Path) -> None:
    """A private copy; commit-log files are hard links (a victim among them is copied before
    it is cut, so the master never changes)."""
    if store.exists():
        shutil.rmtree(store)
    shutil.copytree(master, store, ignore=shutil.ignore_patterns("commitlog"))
    (store / "commitlog").mkdir()
    for f in (master / "commitlog").iterdir():
        os.link(f, store / "commitlog" / f.name)


def own_copy(path: Path) -> None:
    """Break a hard link: ``path`` becomes a file of its own with the same bytes."""
    tmp = path.with_name(path.name + ".own")
    shutil.copyfile(path, tmp)
    os.replace(tmp, path)


def digest(root: Path, parts=("consumequeue", "index", "checkpoint")) -> dict[str, str]:
    out = {}
    for part in parts:
        p = root / part
        files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else []
        out.update({str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files})
    return out


def pick_victim(rng: random.Random, store: Path) -> Path:
    kind = rng.choices(["commitlog", "consumequeue", "index"], weights=[6, 2, 2])[0]
    if kind == "commitlog":
        files = sorted((store / "commitlog").iterdir())
    elif kind == "consumequeue":
        files = sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file())
    else:
        files = sorted((store / "index").iterdir())
    return rng.choice(files)


def cut_size(rng: random.Random, size: int) -> int:
    how = rng.choice(["zero", "page", "byte"])
    if how == "zero":
        return 0
    if how == "page":
        return rng.randrange(0, max(1, size // mmap.PAGESIZE)) * mmap.PAGESIZE
    return rng.randrange(0, size)


def judge(name: str, r_code: int, err: str, victim: Path, cut: int, work: Path, store: Path,
          old: dict[str, str]) -> tuple[str, str | None]:
    """(outcome, problem or None) of one run."""
    if r_code < 0:
        return "signal", f"killed by signal {-r_code}"
    if "Traceback" in err or "Fatal Python error" in err:
        return "traceback", err[-400:]
    errors = [ln for ln in err.splitlines() if ln.startswith("rmqstore: error:")]
    if len(errors) > 1:
        return "lines", f"{len(errors)} error lines: {errors[:3]}"
    if r_code not in EXITS.get(name, (0, 3)):
        return "exit", f"exit {r_code}: {err[-300:]}"
    outcome = "done" if r_code in (0, 1) else "other-3"
    if r_code == 3 and errors:  # the refusal, without its paths and numbers
        outcome = "other-3: " + re.sub(r"\(/[^)]*\)|\[[^]]*\]|\d+", "N", errors[0][len("rmqstore: error: "):]).split(";")[0]
    if r_code == 3:
        m = SHRUNK.fullmatch(errors[0]) if errors else None
        if m:
            outcome = "shrunk"
            if m.group(1) != os.path.realpath(victim) or m.group(2) != m.group(1) or m.group(4) != HINT:
                return outcome, f"shrink line names another file or hint: {errors[0]}"
            if int(m.group(3)) != cut:
                return outcome, f"shrink line at offset {m.group(3)}, the file was cut to {cut}"
        elif not errors:
            return outcome, f"exit 3 without an error line: {err[-300:]}"
    if name == "rebuild-output":
        out = work / "out"
        made = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        if r_code == 0 and not {"consumequeue", "index", "checkpoint"} <= set(made):
            return outcome, f"exit 0 but the output holds {made}"
        if r_code != 0 and made:
            return outcome, f"failed run left {made} in --output"
    if name == "rebuild-in-place":
        left = [p.name for p in store.iterdir() if p.name.startswith(".rebuild")]
        if left:
            return outcome, f"left {left} in the store"
        if r_code != 0 and digest(store) != old:
            return outcome, "failed run changed the old consume queues, index or checkpoint"
    return outcome, None


def one(name: str, master: Path, work: Path, rng: random.Random, budget: float) -> tuple[str, float, str, str | None]:
    """One run: (victim's kind, delay, outcome, problem)."""
    store = work / "store"
    copy_store(master, store)
    for d in ("out", "parquet"):
        shutil.rmtree(work / d, ignore_errors=True)
    victim = pick_victim(rng, store)
    if victim.parent.name == "commitlog":
        own_copy(victim)
    cut = cut_size(rng, victim.stat().st_size)
    old = digest(store) if name == "rebuild-in-place" else {}
    delay = rng.uniform(0.0, budget)
    errf = work / "stderr"
    with open(errf, "wb") as e:
        p = subprocess.Popen([sys.executable, "-m", "rmqstore_cli", *map(str, COMMANDS[name](store, work))],
                             stdout=subprocess.DEVNULL, stderr=e)
        time.sleep(delay)
        os.truncate(victim, cut)
        code = p.wait(timeout=600)
    err = errf.read_text(errors="replace")
    outcome, problem = judge(name, code, err, victim, cut, work, store, old)
    return victim.relative_to(store).parts[0], delay, outcome, problem


def timed(name: str, master: Path, work: Path) -> float:
    """The command's run time on an untouched copy (the delays are drawn up to 1.2 times it)."""
    store = work / "store"
    copy_store(master, store)
    t0 = time.monotonic()
    r = _rmq(*COMMANDS[name](store, work))
    t = time.monotonic() - t0
    for d in ("out", "parquet"):
        shutil.rmtree(work / d, ignore_errors=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{name} fails on the untouched store: {r.stderr.decode()[-500:]}")
    return t


def run_iterations(iterations: int, seed: int, work: Path, messages: int = 40000,
                   names: list[str] | None = None) -> list[tuple]:
    """[(command, victim kind, delay, outcome, problem)] for each iteration (commands in turn)."""
    names = names or list(COMMANDS)
    master = make_master(work / "master", messages)
    budget = {n: 1.2 * timed(n, master, work) for n in names}
    rng = random.Random(seed)
    out = []
    for i in range(iterations):
        name = names[i % len(names)]
        out.append((name, *one(name, master, work, rng, budget[name])))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--messages", type=int, default=40000)
    a = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rmqshrink-") as d:
        res = run_iterations(a.iterations, a.seed, Path(d), a.messages)
    table: dict[str, Counter] = defaultdict(Counter)
    for name, kind, _, outcome, problem in res:
        table[name][outcome] += 1
        table[name][f"victim {kind}"] += 1
        if problem:
            table[name]["FAILED"] += 1
            print(f"FAIL {name} ({kind}): {outcome}: {problem}")
    for name, c in table.items():
        print(f"{name}: {dict(sorted(c.items()))}")
    bad = sum(1 for r in res if r[4])
    print(f"{len(res)} runs in {time.time() - t0:.0f}s; {bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
