"""Wall time of ``rmqstore index-lookup`` on full-size (420 000 040-byte) index files.

Builds a store once (``--workdir``, default a temp dir): ``generate`` with a small commit
log and the *default* index geometry (5 000 000 slots, 20 000 000 entries), then spreads
the index over ``--files`` full-size sparse index files through the engine's IndexFile
writer (each rolled file starts from the previous one's end, as IndexService does). Then
times whole CLI processes (interpreter start-up included):

    .venv/bin/python bench/bench_index_lookup.py [--files 4] [--messages 20000] [--runs 15]

Not a test: prints a table of timings and peak RSS; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchstore


def build(root: Path, messages: int, files: int) -> dict:
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.queues.index import IndexFile
    from rmqstore_cli.store.queues.index_service import index_file_name
    from rmqstore_cli.store.write.dispatch import dispatch_request

    options = ["--seed", "3", "--commitlog-file-size", str(4 << 20), "--cq-file-size", "6000000", "--span", "6h"]
    benchstore.generate(root, messages, *options)
    cfg = StoreConfig.load(root)
    cfg.infer_sizes()
    idx = cfg.index_dir
    shutil.rmtree(idx)
    idx.mkdir()
    cl = CommitLog(cfg)
    msgs = list(cl.scan())
    per = -(-len(msgs) // files)
    S, N = cfg.max_hash_slot_num, cfg.max_index_num
    cur = None
    sample = {}
    for i, m in enumerate(msgs):
        if i % per == 0:
            prev_phy = cur.header.end_phy_offset if cur else 0
            prev_ts = cur.header.end_timestamp if cur else 0
            if cur:
                cur.close()
            cur = IndexFile.create(idx / index_file_name(m.store_timestamp, None), S, N, prev_phy, prev_ts)
        req = dispatch_request(m, cfg.delay_level_table)
        for k in req.index_keys:
            cur.put_key(k, m.physical_offset, m.store_timestamp)
        if i == len(msgs) // 3:
            sample = {"key": m.keys[0], "topic": m.topic, "uniq": m.uniq_key}
    cur.close()
    cl.close()
    sample["index_files"] = sorted(p.name for p in idx.iterdir())
    sample["index_file_size"] = (idx / sample["index_files"][0]).stat().st_size
    sample["disk_blocks_kib"] = sum((idx / n).stat().st_blocks for n in sample["index_files"]) // 2
    (root / "bench.json").write_text(json.dumps(sample))
    return sample


def timed(args: list[str], runs: int) -> tuple[list[float], int, int]:
    times, rc, rss = [], 0, 0
    for _ in range(runs):
        t0 = time.perf_counter()
        p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
        rc = p.returncode
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return times, rc, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=15)
    a = ap.parse_args()
    work = a.workdir or Path(tempfile.mkdtemp(prefix="rmq-bench-index-"))
    root = work / "store"
    info = (
        json.loads((root / "bench.json").read_text())
        if (root / "bench.json").exists()
        else build(root, a.messages, a.files)
    )
    print(
        f"store {root}: {len(info['index_files'])} index files of {info['index_file_size']:,} bytes "
        f"({info['disk_blocks_kib']:,} KiB on disk, sparse)"
    )
    rmq = [sys.executable, "-m", "rmqstore_cli"]
    cases = [
        ("--help (start-up only)", [*rmq, "--help"]),
        (
            "key, one topic",
            [*rmq, "index-lookup", info["key"], "--topic", info["topic"], "--store", str(root), "--format", "jsonl"],
        ),
        ("key, all topics", [*rmq, "index-lookup", info["key"], "--store", str(root), "--format", "jsonl"]),
        ("UNIQ_KEY, all topics", [*rmq, "index-lookup", info["uniq"], "--store", str(root), "--format", "jsonl"]),
        (
            "key, --broker-window",
            [
                *rmq,
                "index-lookup",
                info["key"],
                "--topic",
                info["topic"],
                "--broker-window",
                "--store",
                str(root),
                "--format",
                "jsonl",
            ],
        ),
        ("key, table output", [*rmq, "index-lookup", info["key"], "--topic", info["topic"], "--store", str(root)]),
        (
            "decode-msgid UNIQ_KEY --store",
            [*rmq, "decode-msgid", info["uniq"], "--store", str(root), "--format", "jsonl"],
        ),
    ]
    print(f"{'case':32} {'median s':>9} {'min s':>7} {'max s':>7} {'rc':>3}")
    for name, args in cases:
        t, rc, rss = timed(args, a.runs)
        print(f"{name:32} {statistics.median(t):9.3f} {min(t):7.3f} {max(t):7.3f} {rc:3d}")
    print(
        f"peak RSS of any run: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f} MiB; "
        f"cpus: {os.cpu_count()}"
    )
    if a.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
