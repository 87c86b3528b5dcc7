"""DLedger against the plain commit log on the same records: scan and rebuild-index throughput.

    .venv/bin/python bench/bench_dledger.py                    # 100k messages, 3 runs each
    .venv/bin/python bench/bench_dledger.py --messages 300000

Two stores are generated once under --cache from the same workload (same seed: the same
records), one plain and one with ``generate --dledger`` (each record inside a 48-byte DLedger
entry). Each measurement runs in a fresh process pinned to one core (taskset); the best CPU
time of --runs counts. "scan" is ``CommitLog.scan_blocks`` over the whole log (the columnar
walk every reader uses), "rebuild" is the command's engine in one process
(``local.rebuild_build``: consume queues and index).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import benchstore

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import datetime, json, shutil, sys, tempfile, time
from pathlib import Path
from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.pipeline.local import rebuild_build
from rmqstore_cli.store.write.rebuild import RebuildOptions
store, what = sys.argv[1], sys.argv[2]
cfg = StoreConfig.load(store)
cfg.infer_sizes()
cpu0 = time.process_time()
if what == "scan":
    cl = CommitLog(cfg)
    n = sum(getattr(b, "n", 1) for b in cl.scan_blocks())
    cl.close()
else:
    out = Path(tempfile.mkdtemp(prefix="dledger-bench-"))
    try:
        n = rebuild_build(cfg, out, RebuildOptions(tz=datetime.timezone.utc)).messages
    finally:
        shutil.rmtree(out, ignore_errors=True)
print(json.dumps({"messages": n, "cpu": time.process_time() - cpu0}))
"""


def ensure_store(cache: Path, messages: int, dledger: bool) -> Path:
    store = cache / f"{'dledger' if dledger else 'plain'}-{messages}"
    options = ["--body-size", "256", "--keys-per-message", "2", "--delay-ratio", "0", "--transaction-ratio", "0"]
    options += ["--commitlog-file-size", str(64 << 20), "--tz", "UTC", *(["--dledger"] if dledger else [])]
    benchstore.ensure_store(store, messages, *options)
    return store


def best(store: Path, what: str, runs: int) -> dict:
    out = None
    for _ in range(runs):
        r = subprocess.run(
            ["taskset", "-c", "0", sys.executable, "-c", CHILD, str(store), what],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        if r.returncode:
            sys.exit(r.stderr)
        res = json.loads(r.stdout.strip().splitlines()[-1])
        if out is None or res["cpu"] < out["cpu"]:
            out = res
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rmqstore-bench-dledger")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    stores = {k: ensure_store(args.cache, args.messages, k == "dledger") for k in ("plain", "dledger")}
    print("| what | plain msg/cpu-s | DLedger msg/cpu-s | DLedger / plain |")
    print("|---|---|---|---|")
    for what in ("scan", "rebuild"):
        r = {k: best(s, what, args.runs) for k, s in stores.items()}
        assert r["plain"]["messages"] == r["dledger"]["messages"], r
        rate = {k: v["messages"] / v["cpu"] for k, v in r.items()}
        print(f"| {what} | {rate['plain']:,.0f} | {rate['dledger']:,.0f} | {rate['dledger'] / rate['plain']:.2f} |")


if __name__ == "__main__":
    main()
