"""rebuild-index throughput (messages/s, one core) and peak memory.

    .venv/bin/python bench/bench_rebuild.py                       # 300k messages
    .venv/bin/python bench/bench_rebuild.py --messages 1500000    # a store several times the RSS
    .venv/bin/python bench/bench_rebuild.py --profile             # cProfile top 25
    .venv/bin/python bench/bench_rebuild.py --engine both --store /tmp/many   # the engine beside the reference

Stores are generated once (256-byte bodies, 2 KEYS per message plus the UNIQ_KEY, no delayed
or transactional sends, default file sizes) under --cache and reused (--store: an existing
store instead). Each measurement runs in a fresh process so ``ru_maxrss`` is the rebuild's own
peak. ``--engine``: ``tasks`` (the default) is the command's engine, the plan, tasks and join
of pipeline/rebuild_tasks.py in one process (``local.rebuild_build``, jobs 1); ``whole`` the
whole-store build the tests hold it against (tests/helpers/rebuild_reference.py); ``both``
runs them interleaved. Results are appended to bench/results_rebuild.txt.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchstore

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import cProfile, datetime, json, pstats, resource, shutil, sys, tempfile, time
from pathlib import Path
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.rebuild import RebuildOptions
store, profile, engine = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
if engine == "whole":
    from tests.helpers.rebuild_reference import build_set
else:
    from rmqstore_cli.pipeline.local import rebuild_build as build_set  # jobs=1: this process
cfg = StoreConfig.load(store)
cfg.infer_sizes()
out = Path(tempfile.mkdtemp(prefix="rebuild-bench-"))
opts = RebuildOptions(tz=datetime.timezone.utc)
cpu0 = time.process_time()
try:
    if profile:
        prof = cProfile.Profile()
        rep = prof.runcall(build_set, cfg, out, opts)
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    else:
        rep = build_set(cfg, out, opts)
finally:
    shutil.rmtree(out, ignore_errors=True)
cpu = time.process_time() - cpu0
print(json.dumps({"messages": rep.messages, "seconds": rep.seconds, "cpu_seconds": cpu, "bytes": rep.bytes,
                  "index_keys": rep.index_keys, "queues": rep.queues,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def ensure_store(cache: Path, messages: int) -> Path:
    store = cache / f"store-{messages}"
    options = ["--body-size", "256", "--keys-per-message", "2", "--delay-ratio", "0", "--transaction-ratio", "0"]
    benchstore.ensure_store(store, messages, *options, "--tz", "UTC")
    return store


def run_once(store: Path, profile: bool, engine: str) -> dict:
    """One rebuild in a fresh process pinned to one core (taskset, as the report asks)."""
    cmd = ["taskset", "-c", "0", sys.executable, "-c", CHILD, str(store), "1" if profile else "0", engine]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode:
        sys.exit(r.stderr)
    if profile:
        print(r.stderr)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["msgs_per_s"] = res["messages"] / res["seconds"]
    res["msgs_per_cpu_s"] = res["messages"] / res["cpu_seconds"]
    print(
        f"  {engine:5} {res['messages']} messages in {res['seconds']:.2f}s = {res['msgs_per_s']:,.0f} msg/s, "
        f"{res['bytes'] / res['seconds'] / 1e6:.0f} MB/s, cpu {res['cpu_seconds']:.2f}s = "
        f"{res['msgs_per_cpu_s']:,.0f} msg/cpu-s, maxrss {res['maxrss_mb']:.0f} MB"
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=300_000)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rmqstore-bench")
    ap.add_argument("--store", type=Path, help="an existing store (instead of one generated under --cache)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--engine", choices=["tasks", "whole", "both"], default="tasks")
    args = ap.parse_args()
    store = args.store or ensure_store(args.cache, args.messages)
    size = sum(p.stat().st_blocks * 512 for p in (store / "commitlog").iterdir())
    engines = ["tasks", "whole"] if args.engine == "both" else [args.engine]
    best: dict[str, dict] = {}
    for _ in range(1 if args.profile else args.runs):
        for engine in engines:  # interleaved: both see the same moments of the machine's load
            res = run_once(store, args.profile, engine)
            if engine not in best or res["cpu_seconds"] < best[engine]["cpu_seconds"]:
                best[engine] = res
    for engine, b in best.items():
        line = (
            f"{time.strftime('%Y-%m-%d %H:%M')} {platform.node()} cores={os.cpu_count()} engine={engine} "
            f"store={store.name} messages={b['messages']} queues={b['queues']} "
            f"commitlog_on_disk_mb={size / 1e6:.0f} best={b['msgs_per_s']:,.0f} msg/s "
            f"cpu={b['cpu_seconds']:.2f}s ({b['msgs_per_cpu_s']:,.0f} msg/cpu-s) load={os.getloadavg()[0]:.1f} "
            f"maxrss_mb={b['maxrss_mb']:.0f} keys={b['index_keys']}"
        )
        print(line)
        if not args.profile:
            with open(HERE / "results_rebuild.txt", "a", encoding="utf-8") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()
