"""Peak RSS of ``rmqstore index-lookup --max 0`` on a key shared by ~25 000 messages.

Issue 22: every hit's record was read through the commit log's mapping, and the pages
faulted around each one stayed resident, so a shared key's look-up grew to 2.3 GB RSS.
Builds a store once (``--workdir``, default a temp dir): ``generate`` with 16 keys a
message drawn from 16 shared keys (so ``shared-0`` is on ~60 % of the messages) and
bodies of 4-8 KB, in the default 1 GiB (sparse) commit-log file; then runs the look-up
in fresh processes and reports each one's peak RSS (``wait4``'s ``ru_maxrss``):

    .venv/bin/python bench/bench_index_lookup_rss.py [--messages 40000] [--runs 3]

Not a test: prints a table; nothing is asserted. Results in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchstore


def build(root: Path, messages: int) -> None:
    options = ["--seed", "5", "--keys-per-message", "16", "--shared-key-ratio", "1.0", "--body-size", "4000-8000"]
    benchstore.generate(root, messages, *options, "--delay-ratio", "0", "--transaction-ratio", "0")


def run_once(root: Path, key: str) -> tuple[float, int, int]:
    """(seconds, peak RSS in MB, hits) of one look-up in a fresh process."""
    t = time.perf_counter()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "index-lookup",
            key,
            "--store",
            str(root),
            "--max",
            "0",
            "--format",
            "jsonl",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    hits = sum(1 for _ in p.stdout)
    _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_maxrss // 1024, hits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=40_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--key", default="shared-0")
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="rmq-lookup-rss-"))
    root = work / "store"
    if not root.exists():
        build(root, a.messages)
    data = sum(p.stat().st_blocks * 512 for p in (root / "commitlog").iterdir())
    rows = [run_once(root, a.key) for _ in range(a.runs)]
    print(
        json.dumps(
            {
                "store": str(root),
                "commitlog_bytes_on_disk": data,
                "key": a.key,
                "hits": rows[0][2],
                "seconds": [round(r[0], 2) for r in rows],
                "peak_rss_mb": [r[1] for r in rows],
            }
        )
    )


if __name__ == "__main__":
    main()
