"""Benchmark ``rmqstore stats`` and ``search-offset`` on a multi-GB store (issue #18's aim:
``stats`` under a second without ``--exact``).

Usage (from the project root; check ``df -h /tmp`` first: the store takes ~2.6 GB):

    .venv/bin/python bench/bench_stats.py [--messages 600000] [--body 4096] \
        [--dir /tmp/rmq-bench-stats] [--runs 3] [--keep]

A store of ``--messages`` sends of ``--body``-byte bodies (default file sizes: 1 GiB
commit-log files, 6 MB consume-queue files) is generated into --dir (reused if there).
Each command runs as a child process (``python -m rmqstore_cli``, so the interpreter's
start and the imports are in the time), output to /dev/null, best of --runs: ``stats``
(default, ``--by queue``, ``--by file``), ``stats --exact`` (once), and ``search-offset``
for a time in the middle of the store's span. Lines go to stdout and to
bench/results/stats.json; the store is deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import benchstore

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rmqstore_cli"]


def _store(base: Path, messages: int, body: int) -> tuple[Path, float | None]:
    store = base / f"store-{messages}-{body}"
    return store, benchstore.ensure_store(store, messages, "--body-size", str(body))


def _best(args: list[str], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(CLI + args, check=True, stdout=null)
        best = min(best, time.perf_counter() - t)
    return best


def _size(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=600_000)
    ap.add_argument("--body", type=int, default=4096)
    ap.add_argument("--dir", default="/tmp/rmq-bench-stats")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    base = Path(a.dir)
    base.mkdir(parents=True, exist_ok=True)
    store, gen = _store(base, a.messages, a.body)
    s = str(store)
    out: dict = {
        "messages": a.messages,
        "body": a.body,
        "store_bytes": _size(store),
        "generate_s": gen,
        "load_before": os.getloadavg(),
    }
    summary = json.loads(
        subprocess.run(CLI + ["stats", "--store", s, "--format", "json"], check=True, capture_output=True).stdout
    )["summary"]
    out["stats_messages"] = summary["messages"]
    out["stats_s"] = _best(["stats", "--store", s], a.runs)
    out["stats_by_queue_s"] = _best(["stats", "--store", s, "--by", "queue", "--format", "jsonl"], a.runs)
    out["stats_by_file_s"] = _best(["stats", "--store", s, "--by", "file", "--format", "jsonl"], a.runs)
    out["stats_exact_s"] = _best(["stats", "--store", s, "--exact", "--format", "jsonl"], 1)
    rows = json.loads(
        subprocess.run(CLI + ["stats", "--store", s, "--format", "json"], check=True, capture_output=True).stdout
    )["rows"]
    top = rows[0]
    mid = (top["first_store_timestamp"] + top["last_store_timestamp"]) // 2
    out["search_offset_topic"] = top["topic"]
    out["search_offset_s"] = _best(
        ["search-offset", "--store", s, "--topic", top["topic"], "--time", str(mid), "--format", "jsonl"], a.runs
    )
    out["startup_s"] = _best(["--version"], a.runs)
    out["load_after"] = os.getloadavg()
    for k, v in out.items():
        print(f"{k}: {v}")
    res = ROOT / "bench" / "results"
    res.mkdir(exist_ok=True)
    (res / "stats.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if not a.keep:
        shutil.rmtree(store)
        if not any(base.iterdir()):
            base.rmdir()


if __name__ == "__main__":
    main()
