"""Peak RSS of ``rmqstore verify`` and ``rmqstore rebuild-index --output`` against store size (issue 22).

Usage (from the project root):

    .venv/bin/python bench/bench_rss_scale.py [--sizes 1000000 3000000 10000000] [--dir /tmp/rmq-rss-scale]
        [--commands verify rebuild] [--pythonpath OLD_TREE] [--label after] [--generate-only] [--clean]

Stores of small messages (16-byte bodies, 2 KEYS plus the UNIQ_KEY: 3 index entries a
message, no delayed or transactional sends, 4 topics x 4 queues, default file sizes) are
made once with ``rmqstore generate`` (about 22 000 messages/s: 10 M take ~8 min) into
--dir and reused. Each command runs as a fresh process (the CLI, local engine, pinned to
one core); its peak RSS is the child's own ``ru_maxrss`` (``os.wait4``), with wall and CPU
time and the load average before the run. Verify must find the stores clean (exit 0).
``--pythonpath`` runs another checkout of the package (e.g. ``git archive`` of an older
commit) for a before/after comparison. Results: stdout and
bench/results/rss_scale[_<label>].json. ``--clean`` deletes the stores afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchstore

ROOT = Path(__file__).resolve().parent.parent


def ensure_store(base: Path, n: int) -> Path:
    store = base / f"m{n}"
    options = ["--body-size", "16", "--keys-per-message", "2", "--delay-ratio", "0", "--transaction-ratio", "0"]
    took = benchstore.ensure_store(store, n, *options, "--seed", "22", "--tz", "UTC")
    if took is not None:
        print(f"generated {store} ({n} messages) in {took:.0f}s", file=sys.stderr)
    return store


def run_measured(argv: list[str], env: dict) -> dict:
    """Run ``argv`` pinned to one core; its own peak RSS, wall and CPU time, exit code."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    load = os.getloadavg()
    t = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(["taskset", "-c", str(cpu), *argv], cwd="/", env=env, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    return {
        "exit": p.returncode,
        "peak_rss_mib": round(ru.ru_maxrss / 1024, 1),
        "wall_s": round(wall, 2),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
        "load_before": [round(x, 2) for x in load],
        "stdout": stdout,
        "stderr": stderr,
    }


def measure_verify(store: Path, env: dict) -> dict:
    r = run_measured([sys.executable, "-m", "rmqstore_cli", "verify", "--store", str(store), "--format", "json"], env)
    if r["exit"] != 0:
        raise SystemExit(f"verify {store}: exit {r['exit']}\n{r['stderr'][-2000:]}\n{r['stdout'][-2000:]}")
    summary = json.loads(r.pop("stdout"))
    summary = summary.get("summary", summary)
    r.pop("stderr")
    r["messages"] = summary.get("messages")
    r["errors"] = summary.get("errors")
    return r


def measure_rebuild(store: Path, env: dict) -> dict:
    out = Path(tempfile.mkdtemp(prefix="rss-rebuild-", dir=store.parent))
    try:
        r = run_measured(
            [
                sys.executable,
                "-m",
                "rmqstore_cli",
                "rebuild-index",
                "--store",
                str(store),
                "--output",
                str(out / "o"),
                "--tz",
                "UTC",
                "--format",
                "json",
            ],
            env,
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if r["exit"] != 0:
        raise SystemExit(f"rebuild-index {store}: exit {r['exit']}\n{r['stderr'][-2000:]}")
    summary = json.loads(r.pop("stdout"))
    r.pop("stderr")
    r["messages"] = summary.get("messages")
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-rss-scale"))
    ap.add_argument("--commands", nargs="+", default=["verify", "rebuild"], choices=["verify", "rebuild"])
    ap.add_argument("--pythonpath", help="run this checkout of the package instead")
    ap.add_argument("--label", default="", help="suffix of the results file (e.g. before, after)")
    ap.add_argument("--generate-only", action="store_true")
    ap.add_argument("--clean", action="store_true", help="delete the stores at the end")
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    stores = {n: ensure_store(a.dir, n) for n in a.sizes}
    if a.generate_only:
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = a.pythonpath or str(ROOT)
    runs: dict[str, dict] = {}
    print(f"{'command':8} {'messages':>10} {'peak RSS MiB':>13} {'wall s':>8} {'cpu s':>7}  load before")
    for n, store in stores.items():
        for c in a.commands:
            m = (measure_verify if c == "verify" else measure_rebuild)(store, env)
            runs[f"{c} {n}"] = m
            print(
                f"{c:8} {n:>10} {m['peak_rss_mib']:>13.1f} {m['wall_s']:>8} {m['cpu_s']:>7}  "
                f"{' '.join(str(x) for x in m['load_before'])}",
                flush=True,
            )
    res = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB RAM",
        "pythonpath": a.pythonpath,
        "time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs": runs,
    }
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"rss_scale{'_' + a.label if a.label else ''}.json").write_text(json.dumps(res, indent=2) + "\n")
    if a.clean:
        for s in stores.values():
            shutil.rmtree(s, ignore_errors=True)


if __name__ == "__main__":
    main()
