"""Time `rmqstore expire` on a synthetic store with many files (not a test).

Builds a store of sparse commit-log files, many consume queues and index files whose
headers / last units put them below the new minimum, then times a --dry-run and a real
run (wall time of the whole CLI process, startup included).

    .venv/bin/python bench/bench_expire.py [--cl 2000] [--queues 1000] [--cq-files 10] [--index 500]
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CL_SIZE, CQ_SIZE, SLOTS, ENTRIES = 65536, 2000, 64, 400
INDEX_SIZE = 40 + SLOTS * 4 + ENTRIES * 20


def build(root: Path, n_cl: int, n_queues: int, cq_files: int, n_index: int, now_s: float) -> None:
    (root / "commitlog").mkdir(parents=True)
    for i in range(n_cl):
        p = root / "commitlog" / f"{i * CL_SIZE:020d}"
        with open(p, "wb") as fh:
            fh.truncate(CL_SIZE)
        t = now_s - (1000 if i < n_cl - 1 else 1) * 3600
        os.utime(p, (t, t))
    span = n_cl * CL_SIZE
    for q in range(n_queues):
        d = root / "consumequeue" / f"Topic{q // 8}" / str(q % 8)
        d.mkdir(parents=True)
        for j in range(cq_files):
            buf = bytearray(CQ_SIZE)
            last = span * (j + 1) // (cq_files + 1)
            struct.pack_into(">qiq", buf, CQ_SIZE - 20, last, 100, 0)
            (d / f"{j * CQ_SIZE:020d}").write_bytes(buf)
    (root / "index").mkdir()
    for k in range(n_index):
        buf = bytearray(INDEX_SIZE)
        struct.pack_into(">qqqqii", buf, 0, 1, 2, span * k // n_index, span * (k + 1) // n_index - 1, 1, 2)
        (root / "index" / f"20260101{k:09d}").write_bytes(buf)
    (root / "lock").write_bytes(b"lock")


def timed(args: list[str]) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "rmqstore_cli", *args], capture_output=True)
    if r.returncode != 0:
        sys.exit(r.stderr.decode())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cl", type=int, default=2000)
    ap.add_argument("--queues", type=int, default=1000)
    ap.add_argument("--cq-files", type=int, default=10)
    ap.add_argument("--index", type=int, default=500)
    a = ap.parse_args()
    now_s = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "store"
        build(root, a.cl, a.queues, a.cq_files, a.index, now_s)
        total = a.cl + a.queues * a.cq_files + a.index
        opts = [
            "expire",
            "--store",
            str(root),
            "--commitlog-file-size",
            str(CL_SIZE),
            "--cq-file-size",
            str(CQ_SIZE),
            "--index-slots",
            str(SLOTS),
            "--index-max",
            str(ENTRIES),
            "--reserved-hours",
            "72",
            "--format",
            "json",
        ]
        startup = timed(["--version"])
        dry = timed([*opts, "--dry-run"])
        real = timed(opts)
        left = sum(len(fs) for _, _, fs in os.walk(root))
        print(
            f"files={total} (commitlog {a.cl}, consume-queue {a.queues * a.cq_files}, index {a.index}); "
            f"left after the run: {left}"
        )
        print(
            f"python startup+import: {startup:.2f}s  dry-run: {dry:.2f}s  real run: {real:.2f}s  "
            f"(wall, whole CLI process)"
        )


if __name__ == "__main__":
    main()
