#!/usr/bin/env python
"""Truncate a store file at a random moment while a command reads it, many times (issue 31).

    .venv/bin/python fuzz/shrinkfuzz.py --iterations 200 [--seed 1] [--messages 40000]

A store copied while a broker or expire still runs, or an rsync in flight, shrinks under
the reader: before store/files/mapguard.py the reader died of SIGBUS (exit 135, no message). Each
iteration copies a multi-file store, starts one of dump-commitlog, verify, rebuild-index
(--output, --in-place) or export as a subprocess, and after a random delay (up to 1.2 times
the command's own run time) truncates one of its commit-log files (most runs), a
consume-queue or an index file to a random length (0, a page boundary, or any byte); in half
the runs the delay starts when the file shows in the command's mappings (``/proc/PID/maps``),
so the cut lands while it is being read. Then:

- the command ended by itself: never by a signal, never a traceback, at most one
  ``rmqstore: error:`` line, exit 0, 1 or 3 (dump-commitlog, export, rebuild-index 0 or 3);
- a "shrank while it was read" line names the truncated file at the length it was cut to
  (its first lost byte), with the documented hint;
- rebuild-index --output: exit 0 and a complete set (consumequeue/, index/, checkpoint), or
  no set and no staging directory at all; --in-place: exit 0 and no staging or journal
  left, or the old consumequeue/, index/ and checkpoint byte for byte and nothing left.

- exit 0 from dump-commitlog or rebuild-index --output: the same stdout, or the same consume
  queues and index, as a run on an untouched copy (the read was over before the cut).

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

SIZES = ["--commitlog-file-size", "8388608", "--cq-file-size", "60000", "--index-slots", "5000", "--index-max", "40000"]
HINT = (
    "the file was truncated while rmqstore read it (a broker, expire or a copy still writing the store?); "
    "read a stable copy (stop the broker or let the copy finish) and run again"
)
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
    r = _rmq(
        "generate",
        "--store",
        path,
        "--messages",
        messages,
        "--seed",
        31,
        *SIZES,
        "--body-size",
        "300",
        "--format",
        "json",
    )
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


def wait_mapped(p: subprocess.Popen, victim: Path) -> None:
    """Until ``victim`` shows in the process's mappings (``/proc/PID/maps``) or it ends."""
    want = os.path.realpath(victim)
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/maps") as m:
                if any(line.rstrip("\n").endswith(want) for line in m):
                    return
        except OSError:
            return
        time.sleep(0.001)


def judge(
    name: str, r_code: int, err: str, victim: Path, cut: int, work: Path, store: Path, old: dict[str, str]
) -> tuple[str, str | None]:
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
        outcome = (
            "other-3: " + re.sub(r"\(/[^)]*\)|\[[^]]*\]|\d+", "N", errors[0][len("rmqstore: error: ") :]).split(";")[0]
        )
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
        cut_by_us = str(victim.relative_to(store))  # the old file this fuzzer cut itself
        if r_code != 0 and {k: v for k, v in digest(store).items() if k != cut_by_us} != {
            k: v for k, v in old.items() if k != cut_by_us
        }:
            return outcome, "failed run changed the old consume queues, index or checkpoint"
    return outcome, None


def one(
    name: str, master: Path, work: Path, rng: random.Random, budget: float, expected: str | None
) -> tuple[str, float, str, str | None]:
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
    targeted = rng.random() < 0.5
    delay = rng.uniform(0.0, budget / 4 if targeted else budget)
    errf = work / "stderr"
    with open(errf, "wb") as e, open(work / "stdout", "wb") as o:
        p = subprocess.Popen(
            [sys.executable, "-m", "rmqstore_cli", *map(str, COMMANDS[name](store, work))], stdout=o, stderr=e
        )
        if targeted:  # the moment the victim is mapped, then a random part of its read
            wait_mapped(p, victim)
        time.sleep(delay)
        os.truncate(victim, cut)
        code = p.wait(timeout=600)
    err = errf.read_text(errors="replace")
    outcome, problem = judge(name, code, err, victim, cut, work, store, old)
    if problem is None and code == 0 and expected is not None and answer(name, work) != expected:
        problem = "exit 0, but the answer differs from an untouched run's"
    return victim.relative_to(store).parts[0], delay, outcome, problem


def answer(name: str, work: Path) -> str | None:
    """What a run answered, to compare with an untouched run's: dump-commitlog's stdout, the
    consume queues and index rebuild-index --output wrote (None for the other commands)."""
    if name == "dump-commitlog":
        return hashlib.sha256((work / "stdout").read_bytes()).hexdigest()
    if name == "rebuild-output":
        return str(sorted(digest(work / "out", ("consumequeue", "index")).items()))
    return None


def untouched(name: str, master: Path, work: Path) -> tuple[float, str | None]:
    """The command's run time on an untouched copy (the delays are drawn up to 1.2 times it),
    and its :func:`answer`."""
    store = work / "store"
    copy_store(master, store)
    t0 = time.monotonic()
    with open(work / "stdout", "wb") as out:
        r = subprocess.run(
            [sys.executable, "-m", "rmqstore_cli", *map(str, COMMANDS[name](store, work))],
            stdout=out,
            stderr=subprocess.PIPE,
            timeout=600,
        )
    t = time.monotonic() - t0
    if r.returncode not in (0, 1):
        raise SystemExit(f"{name} fails on the untouched store: {r.stderr.decode()[-500:]}")
    got = answer(name, work)
    for d in ("out", "parquet"):
        shutil.rmtree(work / d, ignore_errors=True)
    return t, got


def run_iterations(
    iterations: int, seed: int, work: Path, messages: int = 40000, names: list[str] | None = None
) -> list[tuple]:
    """[(command, victim kind, delay, outcome, problem)] for each iteration (commands in turn)."""
    names = names or list(COMMANDS)
    master = make_master(work / "master", messages)
    ref = {n: untouched(n, master, work) for n in names}
    rng = random.Random(seed)
    out = []
    for i in range(iterations):
        name = names[i % len(names)]
        out.append((name, *one(name, master, work, rng, 1.2 * ref[name][0], ref[name][1])))
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
