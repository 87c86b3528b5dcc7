"""Benchmark ``rmqstore dump-commitlog --format jsonl`` to /dev/null (issue #3's aim).

Usage (from the project root):

    .venv/bin/python bench/bench_dump.py [--messages 200000,1000000] [--body 256] [--dir /tmp/rmq-bench-dump] [--runs 3]

Stores of 256-byte messages (no delayed or transactional ones, 10 % IPv6 hosts) are
generated once into --dir. Each is dumped by the installed command in a child process
pinned to one core, best of --runs; wall and CPU (user + sys of the child) are printed.
The rate between two sizes (``marginal``: extra messages over extra time) is free of the fixed cost
— interpreter and imports — which is then estimated as
``wall - messages / marginal``. Lines go to stdout and to bench/results/dump.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import benchstore

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rmqstore_cli"]


def _core() -> str:
    return str(sorted(os.sched_getaffinity(0))[0])


def _store(base: Path, messages: int, body: int) -> Path:
    store = base / f"store-{messages}-{body}"
    options = ["--body-size", str(body), "--delay-ratio", "0", "--transaction-ratio", "0", "--ipv6-ratio", "0.1"]
    benchstore.ensure_store(store, messages, *options)
    return store


def _run(store: Path, runs: int) -> tuple[float, float]:
    """(best wall, best CPU) seconds of one dump to /dev/null on one core."""
    best_wall = best_cpu = float("inf")
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(
                ["taskset", "-c", _core(), *CLI, "dump-commitlog", "--store", str(store), "--format", "jsonl"],
                check=True,
                stdout=null,
            )
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", default="200000,1000000")
    ap.add_argument("--body", type=int, default=256)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-dump"))
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(x) for x in a.messages.split(",")):
        wall, cpu = _run(_store(a.dir, n, a.body), a.runs)
        rows.append(
            {
                "messages": n,
                "body": a.body,
                "wall_s": round(wall, 3),
                "cpu_s": round(cpu, 3),
                "msg_per_s_wall": round(n / wall),
                "msg_per_s_cpu": round(n / cpu),
                "load": round(os.getloadavg()[0], 2),
            }
        )
        print(
            f"{n:>9} msgs: {wall:.2f} s wall ({n / wall:,.0f} msg/s), {cpu:.2f} s CPU ({n / cpu:,.0f} msg/s); "
            f"load {os.getloadavg()[0]:.2f}"
        )
    for lo, hi in pairwise(rows):
        marginal = (hi["messages"] - lo["messages"]) / max(hi["wall_s"] - lo["wall_s"], 1e-9)
        hi["msg_per_s_marginal"] = round(marginal)
        hi["fixed_s"] = round(hi["wall_s"] - hi["messages"] / marginal, 3)
        print(f"marginal {lo['messages']}→{hi['messages']}: {marginal:,.0f} msg/s; fixed cost ≈ {hi['fixed_s']:.2f} s")
    out = ROOT / "bench" / "results" / "dump.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
