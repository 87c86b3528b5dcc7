"""Benchmark the default table against ``--format jsonl`` (issue 16, "Fast tables").

Usage (from the project root):

    .venv/bin/python bench/bench_table.py [--messages 200000] [--dir /tmp/rmq-bench-table] [--runs 5]
                                          [--before SRC] [--before-runs 1]

Two stores are generated once into --dir with the generator's default mix (5 % delayed,
5 % transactional sends, so every kind shows up; 256-byte bodies; 10 % IPv6 hosts): one
of 4 topics x 4 queues for ``dump-commitlog``, one of a single topic and queue for
``dump-cq`` (the queue then holds ~190 000 units). Each command runs in a child process
with stdout to a pipe that the parent drains (what ``| less`` or ``| grep`` sees), table
and jsonl alternating, ``--runs`` times; the medians and their ratio are printed, with the
load average (other jobs share this machine: compare figures of the same run only).

``--before SRC``: also time the same commands run from another source tree (e.g. a
``git archive`` of the commit before the change, with ``rmqstore_cli/commands`` and
``rmqstore_cli/formats`` linked to its ``commands/`` and ``formats/``), on PYTHONPATH.
Lines go to stdout and to bench/results/table.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchstore

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rmqstore_cli"]


def _store(base: Path, name: str, messages: int, *extra: str) -> Path:
    store = base / name
    benchstore.ensure_store(store, messages, "--body-size", "256", "--ipv6-ratio", "0.1", *extra)
    return store


def _time(args: list[str], env: dict) -> tuple[float, float, int]:
    """(wall, CPU of the child, bytes written) of one run, stdout drained through a pipe."""
    before = os.times()
    t = time.perf_counter()
    p = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, env=env, cwd="/")
    n = 0
    while chunk := p.stdout.read(1 << 20):
        n += len(chunk)
    if p.wait() != 0:
        raise SystemExit(f"failed: {' '.join(args)}")
    wall = time.perf_counter() - t
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system), n


def _bench(label: str, args: list[str], runs: int, env: dict) -> dict:
    got: dict[str, list] = {"table": [], "jsonl": []}
    for _ in range(runs):
        for fmt in ("table", "jsonl"):
            got[fmt].append(_time(args + ["--format", fmt], env))
    row = {"case": label, "runs": runs, "load": round(os.getloadavg()[0], 2)}
    for fmt, xs in got.items():
        row[f"{fmt}_wall_s"] = round(statistics.median(x[0] for x in xs), 3)
        row[f"{fmt}_cpu_s"] = round(statistics.median(x[1] for x in xs), 3)
        row[f"{fmt}_mb"] = round(xs[0][2] / 1e6, 1)
    row["ratio_wall"] = round(row["table_wall_s"] / row["jsonl_wall_s"], 2)
    row["ratio_cpu"] = round(row["table_cpu_s"] / row["jsonl_cpu_s"], 2)
    print(
        f"{label}: table {row['table_wall_s']:.2f} s wall / {row['table_cpu_s']:.2f} s CPU "
        f"({row['table_mb']} MB), jsonl {row['jsonl_wall_s']:.2f} / {row['jsonl_cpu_s']:.2f} s "
        f"({row['jsonl_mb']} MB): table/jsonl {row['ratio_wall']}x wall, {row['ratio_cpu']}x CPU "
        f"(medians of {runs}; load {row['load']})",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-table"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", type=Path, help="another source tree to time the same way (PYTHONPATH)")
    ap.add_argument("--before-runs", type=int, default=1)
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    log = _store(a.dir, f"log-{a.messages}", a.messages)
    cq = _store(a.dir, f"cq-{a.messages}", a.messages, "--topics", "1", "--queues", "1")
    topic = json.loads(
        subprocess.run(
            CLI + ["dump-cq", "--summary", "--store", str(cq), "--format", "jsonl"], check=True, capture_output=True
        ).stdout.splitlines()[0]
    )
    cases = [
        (f"dump-commitlog ({a.messages} sends)", ["dump-commitlog", "--store", str(log), "--tz", "UTC"]),
        (
            f"dump-cq {topic['topic']} 0 ({topic['max_offset']} units)",
            ["dump-cq", topic["topic"], "0", "--store", str(cq), "--tz", "UTC"],
        ),
    ]
    rows = []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for label, args in cases:
        rows.append(_bench(label, args, a.runs, env))
    if a.before:
        old = dict(env, PYTHONPATH=str(a.before.resolve()))
        for label, args in cases:
            rows.append(_bench(f"before: {label}", args, a.before_runs, old))
    out = ROOT / "bench" / "results" / "table.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"cpus": os.cpu_count(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
