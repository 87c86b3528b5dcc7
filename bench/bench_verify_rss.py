"""Peak memory of ``rmqstore verify`` against the size of the index file (issue #6, aim c).

Usage (from the project root):

    .venv/bin/python bench/bench_verify_rss.py [--store DIR ...] [--pythonpath OLD_TREE]

Each store is verified (CRC on, default options) in a fresh process pinned to one core;
the child reports its peak RSS once the index files are opened (their structure check:
the phase whose memory used to grow with the index file, ~90 bytes an entry), its peak
over the whole run, wall and CPU time. ``--pythonpath`` runs another checkout of the
package (e.g. ``git archive`` of an older commit) for a before/after comparison.

The default store is a full-size default index file: 1 850 000 messages with 10 KEYS each
and 16-byte bodies give 20 350 000 index entries, so the first index file is full (5 M slots,
20 M entries, 420 MB); it is generated once (about 4-5 minutes) into
/tmp/rmq-bench-verify-rss/full20m. The smaller stores of bench_verify.py (611 k and 62 k
entries) show the same run on small index files. Results go to stdout and
bench/results/verify_rss.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FULL = Path("/tmp/rmq-bench-verify-rss/full20m")

CHILD = r"""
import json, resource, sys, time
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store import verify as V
cfg = V.open_for_verify(StoreConfig.load(sys.argv[1]))
v = V.Verifier(cfg, V.VerifyOptions(crc=True, max_findings=10))
marks = {}
real_open = v._open_index
def _open_index():
    real_open()
    marks["after_index_open_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
v._open_index = _open_index
t, c = time.perf_counter(), time.process_time()
findings = list(v.run())
out = dict(marks, wall_s=round(time.perf_counter() - t, 2), cpu_s=round(time.process_time() - c, 2),
           peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, messages=v.summary["messages"],
           index_entries=sum(f.entry_count if hasattr(f, "entry_count") else f.n - 1 for f in v.index_files),
           findings=len(findings), errors=v.summary["errors"], module=V.__file__)
print(json.dumps(out))
"""


def generate_full(path: Path) -> None:
    if (path / "checkpoint").exists():
        return
    t = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "generate",
            "--store",
            str(path),
            "--messages",
            "1850000",
            "--keys-per-message",
            "10",
            "--body-size",
            "16",
            "--delay-ratio",
            "0",
            "--transaction-ratio",
            "0",
            "--seed",
            "5",
            "--format",
            "json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode:
        raise SystemExit(r.stderr)
    print(f"generated {path} in {time.perf_counter() - t:.0f}s", file=sys.stderr)


def measure(store: Path, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cpu = sorted(os.sched_getaffinity(0))[-1]
    r = subprocess.run(
        ["taskset", "-c", str(cpu), sys.executable, "-c", CHILD, str(store)],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
    )
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--store",
        action="append",
        type=Path,
        help="stores to verify (default: the full-size one and bench_verify.py's two)",
    )
    ap.add_argument("--pythonpath", help="run this checkout of the package instead")
    a = ap.parse_args()
    stores = a.store or [FULL, Path("/tmp/rmq-bench-verify/b256-200000"), Path("/tmp/rmq-bench-verify/b16k-20000")]
    if FULL in stores:
        generate_full(FULL)
    load = os.getloadavg()
    rows = {}
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(
        f"{'store':40} {'entries':>10} {'msgs':>9} {'after index MiB':>16} {'peak MiB':>9} {'wall s':>7} {'cpu s':>6}"
    )
    for s in stores:
        if not (s / "commitlog").is_dir():
            print(f"{s}: missing, skipped", file=sys.stderr)
            continue
        m = measure(s, a.pythonpath)
        rows[str(s)] = m
        print(
            f"{str(s):40} {m['index_entries']:>10} {m['messages']:>9} {m['after_index_open_mib']:>16.0f} "
            f"{m['peak_mib']:>9.0f} {m['wall_s']:>7} {m['cpu_s']:>6}"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    name = "verify_rss.json" if not a.pythonpath else "verify_rss_other.json"
    (out / name).write_text(json.dumps({"load": load, "pythonpath": a.pythonpath, "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
