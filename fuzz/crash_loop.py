#!/usr/bin/env python
"""SIGKILL `rebuild-index --in-place` (with and without its backups) and `expire` at random
moments, many times (issues #8, #31).

    .venv/bin/python fuzz/crash_loop.py --iterations 50 [--seed 1]

Each iteration copies a generated store, starts the mutating command as a subprocess,
kills it after a random delay, then checks: `verify` reads the store (exit 0 or 1, never
3 or a traceback); a re-run of the same command exits 0; `verify` then exits 0 with no
unknown store-root entry, and the store holds exactly what an uninterrupted run produces;
kept backups lie in `rmqstore-backup/<id>/`, the first holding the replaced consume queues
whole (`--no-backup`: none left). `run_iterations` is what
tests/safety/test_hardening.py runs briefly with a fixed seed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = ["--commitlog-file-size", "16384", "--cq-file-size", "400", "--index-slots", "16", "--index-max", "100"]
NOW = "2030-01-01T00:00:00Z"


def _rmq(*args, env=None, check=False) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)],
        capture_output=True,
        env=dict(os.environ, **(env or {})),
        timeout=300,
    )
    if check and r.returncode != 0:
        raise AssertionError(f"{args[0]} exit {r.returncode}: {r.stderr.decode()[-500:]}")
    return r


BACKUP_DIR = "rmqstore-backup"  # store/layout/root_entries.py: where rebuild-index --in-place keeps the old sets
KINDS = ("rebuild", "expire", "rebuild-keep")  # rebuild-keep: rebuild-index --in-place keeping its backups


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and BACKUP_DIR not in p.relative_to(root).parts
        and not p.name.startswith(".rebuild")
        and p.name != "rmqstore-expire.jsonl"
    }  # runs' ids differ


def make_master(path: Path, messages: int = 1500) -> Path:
    _rmq(
        "generate",
        "--store",
        path,
        "--messages",
        messages,
        "--seed",
        5,
        *SIZES,
        "--span",
        "2h",
        "--format",
        "json",
        check=True,
    )
    return path


def commands(kind: str, store: Path) -> list:
    if kind.startswith("rebuild"):
        keep = [] if kind == "rebuild-keep" else ["--no-backup"]
        return ["rebuild-index", "--store", store, "--in-place", *keep, *SIZES[2:]]
    return ["expire", "--store", store, *SIZES, "--now", NOW, "--reserved-hours", "72", "--pause-ms", "2", "--quiet"]


def prepare(kind: str, store: Path) -> None:
    if kind.startswith("rebuild"):  # an old set that differs from the new one: zeroed queues, no index
        for f in (store / "consumequeue").rglob("0000*"):
            f.write_bytes(bytes(f.stat().st_size))
        shutil.rmtree(store / "index")
        (store / "index").mkdir()
    else:  # every commit-log file old
        old = time.time() - 30 * 86400
        for f in (store / "commitlog").iterdir():
            os.utime(f, (old, old))


def expected_result(kind: str, master: Path, work: Path) -> dict[str, str]:
    s = work / f"ref-{kind}"
    shutil.copytree(master, s)
    prepare(kind, s)
    _rmq(*commands(kind, s), env={"RMQSTORE_TEST_SWAP_DELAY": "0"}, check=True)
    out = digest(s)
    shutil.rmtree(s)
    return out


def one(kind: str, master: Path, work: Path, delay: float, ref: dict[str, str]) -> tuple[bool, str | None]:
    """One kill-and-recover cycle: (killed before it finished, None if all held else what broke)."""
    store = work / "store"
    if store.exists():
        shutil.rmtree(store)
    shutil.copytree(master, store)
    prepare(kind, store)
    env = dict(os.environ, RMQSTORE_TEST_SWAP_DELAY="0.02")
    p = subprocess.Popen(
        [sys.executable, "-m", "rmqstore_cli", *map(str, commands(kind, store))],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay)
    mid_run = p.poll() is None
    p.send_signal(signal.SIGKILL)
    p.wait()
    v = _rmq("verify", "--store", store, *SIZES, "--format", "json")
    if v.returncode not in (0, 1) or b"Traceback" in v.stderr:
        return mid_run, f"verify after kill: exit {v.returncode}: {v.stderr.decode()[-300:]}"
    r = _rmq(*commands(kind, store))
    if r.returncode != 0:
        return mid_run, f"re-run exit {r.returncode}: {r.stderr.decode()[-300:]}"
    v = _rmq("verify", "--store", store, *SIZES, "--format", "json")
    if v.returncode != 0:
        return (
            mid_run,
            f"verify after re-run: exit {v.returncode}: {v.stdout.decode()[-300:]} {v.stderr.decode()[-300:]}",
        )
    if "store.unknown-entry" in json.loads(v.stdout)["summary"]["findings"]:
        return mid_run, "verify after re-run: an unknown store-root entry (a backup or staging left behind)"
    got = digest(store)
    if got != ref:
        diff = sorted(k for k in set(got) | set(ref) if got.get(k) != ref.get(k))
        return mid_run, f"store differs from an uninterrupted run: {diff[:5]}"
    return mid_run, _backups_problem(kind, master, store)


def _backups_problem(kind: str, master: Path, store: Path) -> str | None:
    """rebuild-keep: the first run directory under rmqstore-backup/ holds the old consume
    queues whole (what prepare() made); the others (a re-run after a finished one) whole sets."""
    runs = sorted((store / BACKUP_DIR).iterdir()) if (store / BACKUP_DIR).is_dir() else []
    if kind != "rebuild-keep":
        return f"backups left by --no-backup: {runs}" if runs else None
    if not runs:
        return "no backup of the replaced sets"
    old = store.parent / "old"
    if old.exists():
        shutil.rmtree(old)
    shutil.copytree(master / "consumequeue", old / "consumequeue")
    for f in old.rglob("0000*"):  # as prepare() zeroed them
        f.write_bytes(bytes(f.stat().st_size))
    if digest(runs[0] / "consumequeue") != digest(old / "consumequeue"):
        return f"the backup {runs[0]} does not hold the replaced consume queues"
    missing = [r.name for r in runs if not (r / "checkpoint").is_file() or not (r / "consumequeue").is_dir()]
    return f"incomplete backups: {missing}" if missing else None


def run_iterations(iterations: int, seed: int, work: Path, max_delay: float = 2.5) -> list[tuple]:
    """[(kind, delay, killed_mid_run, problem)] for each iteration (kinds alternate)."""
    master = make_master(work / "master")
    refs = {k: expected_result(k, master, work) for k in KINDS}
    rng = random.Random(seed)
    out = []
    for i in range(iterations):
        kind = KINDS[i % len(KINDS)]
        delay = rng.uniform(0.05, max_delay)
        out.append((kind, round(delay, 3), *one(kind, master, work, delay, refs[kind])))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-delay", type=float, default=2.5)
    a = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rmqcrash-") as d:
        res = run_iterations(a.iterations, a.seed, Path(d), a.max_delay)
    bad = [r for r in res if r[3]]
    for kind, delay, _, problem in bad:
        print(f"FAIL {kind} killed at {delay}s: {problem}")
    n = {k: sum(1 for r in res if r[0] == k) for k in KINDS}
    mid = {k: sum(1 for r in res if r[0] == k and r[2]) for k in KINDS}
    print(
        f"{len(res)} kills ({n['rebuild']} rebuild-index --in-place --no-backup, {mid['rebuild']} of them "
        f"mid-run; {n['rebuild-keep']} keeping backups, {mid['rebuild-keep']} mid-run; {n['expire']} expire, "
        f"{mid['expire']} mid-run) in {time.time() - t0:.0f}s; {len(bad)} failures"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
