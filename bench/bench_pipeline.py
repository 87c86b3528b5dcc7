"""Local engine vs Spark local[N] on one store: rebuild-index and export.

Usage: python bench/bench_pipeline.py [--messages N] [--body BYTES] [--workers 2] [--dir DIR]

Generates a store with 256 MiB commit-log files (so the work splits into several tasks),
then times each command as a whole process (Spark start-up included) and reports
throughput and the peak RSS of the command and its children (driver JVM, Python workers).
The Spark figure per task is the run time minus start-up over the number of tasks.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RMQ = [sys.executable, "-m", "rmqstore_cli"]


# Runs the command as its child and prints the largest RSS among the command and all its
# descendants (driver JVM, Python workers) on stderr's last line, so each run is measured alone.
_PEAK = ("import resource,subprocess,sys;r=subprocess.run(sys.argv[1:]);"
         "print('PEAK',resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,file=sys.stderr);sys.exit(r.returncode)")


def run(args: list[str]) -> tuple[float, float, dict]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", _PEAK, *RMQ, *args], capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {r.stderr[-2000:]}")
    peak = int(r.stderr.strip().splitlines()[-1].split()[1]) / 1024
    try:
        summary = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = {}
    return dt, peak, summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=400_000)
    ap.add_argument("--body", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=None)
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="rmq-pipeline-"))
    store = root / "store"
    sizes = ["--commitlog-file-size", str(256 << 20)]
    if not store.exists():
        dt, _, s = run(["generate", "--store", str(store), "--messages", str(a.messages), "--body-size",
                        str(a.body), "--delay-ratio", "0", "--transaction-ratio", "0", *sizes, "-f", "json"])
        print(f"generate: {s.get('messages')} msgs, {s.get('commitlog_max_offset', 0) / 1e9:.2f} GB in {dt:.1f}s")
    data = sum(p.stat().st_blocks * 512 for p in (store / "commitlog").iterdir())
    nfiles = len(list((store / "commitlog").iterdir()))
    master = f"local[{a.workers}]"
    print(f"store: {data / 1e9:.2f} GB of commit log in {nfiles} files; master {master}; cpus 2")
    for name, args in (
        ("rebuild-index", ["rebuild-index", "--store", str(store), *sizes, "-f", "json"]),
        ("export", ["export", "--store", str(store), *sizes, "-f", "json", "--overwrite"]),
    ):
        results = {}
        for engine in ("local", "spark"):
            extra = ["--engine", engine] + (["--spark-master", master] if engine == "spark" else [])
            out = root / f"out-{name}-{engine}"
            shutil.rmtree(out, ignore_errors=True)
            extra += ["--output", str(out)]
            dt, peak, s = run(args + extra)
            msgs = s.get("messages") or s.get("rows") or a.messages
            results[engine] = dt
            print(f"{name:14s} {engine:6s} {dt:7.1f}s {msgs / dt:10,.0f} msg/s {data / dt / 1e6:7.1f} MB/s "
                  f"peak RSS {peak:6.0f} MiB")
        print(f"{name:14s} speed-up local[{a.workers}] / local: {results['local'] / results['spark']:.2f}x")


if __name__ == "__main__":
    main()
