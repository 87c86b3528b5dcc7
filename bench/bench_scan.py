"""Engine speed: generate, and a full decode of every field and property (and CRC).

Usage: python bench/bench_scan.py [--messages N] [--body BYTES] [--dir DIR]
Prints messages/s and MB/s for generate and for scans; peak RSS. Single process (one core).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.commitlog.columns import MessageBlock
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.producer import Workload, WorkloadOptions
from rmqstore_cli.store.write.writer import StoreWriter


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--body", type=int, default=256)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    root = a.dir or Path(tempfile.mkdtemp(prefix="rmqbench-"))
    store = root / f"store-{a.messages}-{a.body}"
    cfg = StoreConfig.load(store, None)
    if not store.exists():
        t = time.perf_counter()
        w = StoreWriter(cfg)
        w.append_blocks(
            Workload(
                WorkloadOptions(
                    messages=a.messages, body_min=a.body, body_max=a.body, delay_ratio=0, transaction_ratio=0
                )
            ).blocks()
        )
        w.close()
        dt = time.perf_counter() - t
        size = w.commitlog.write_offset
        print(f"generate: {w.messages} msgs in {dt:.2f}s = {w.messages / dt:,.0f} msg/s, {size / dt / 1e6:.1f} MB/s")
    cl = CommitLog(cfg)
    for label, kw, full in (
        ("scan (header decode)", {}, False),
        ("scan + CRC", {"check_crc": True}, False),
        ("full decode (all fields + properties)", {}, True),
        ("full decode + CRC", {"check_crc": True}, True),
    ):
        t = time.perf_counter()
        n = 0
        nbytes = 0
        for m in cl.scan(**kw):
            n += 1
            nbytes += m.total_size
            if full:
                _ = (m.properties, m.topic, m.msg_id, m.born_host, m.store_host, m.keys, m.tags, m.uniq_key)
        dt = time.perf_counter() - t
        print(f"{label}: {n} msgs in {dt:.2f}s = {n / dt:,.0f} msg/s, {nbytes / dt / 1e9:.2f} GB/s")
    for label, kw in (
        ("columnar full decode (MessageBlock.decode: every field, properties pairs)", {}),
        ("columnar full decode + CRC", {"check_crc": True}),
    ):
        t = time.perf_counter()
        c = time.process_time()
        n = nbytes = 0
        for x in cl.scan_blocks(**kw):
            if isinstance(x, MessageBlock):
                x.decode()
                n += x.n
                nbytes += int(x.rb.total.sum())
            else:
                n += 1
        dt, cpu = time.perf_counter() - t, time.process_time() - c
        print(
            f"{label}: {n} msgs in {dt:.2f}s wall, {cpu:.2f}s CPU = {n / cpu:,.0f} msg/s CPU, "
            f"{nbytes / cpu / 1e9:.2f} GB/s CPU"
        )
    cl.close()
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if not a.keep and a.dir is None:
        shutil.rmtree(root)


if __name__ == "__main__":
    sys.exit(main())
