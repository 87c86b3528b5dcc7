"""The Spark engine on a real standalone cluster (issue #21): how efficient it is, not how
fast (this machine has 2 cores).

Usage:
  python bench/bench_cluster.py --dir /tmp/rmq-cluster-bench [--mb 400] [--file-mb 64]
         [--commands verify,rebuild-index,export] [--repeat 2] [--json out.json]
  python bench/bench_cluster.py --dir /tmp/rmq-cluster-bench --connect [--repeat 3]

A master and two one-core workers (tests/helpers/standalone.py) are started once and kept
warm. Each command runs as its own process on a generated store (--file-mb commit-log
files) and on a 200-message store, with the local engine and on the cluster. Measured:

- executor CPU: user+sys of every process the workers started for the job (executor JVMs,
  Python daemons and workers), read from /proc every 0.1 s; per GB = (store − tiny) / GB,
  against the local engine's CPU per GB measured the same way;
- ``--executors N`` caps the job at N one-core executors (``spark.cores.max``). This machine
  has 2 cores: with both executors busy, the two Python workers, two executor JVMs, the
  driver and this sampler share them, and the same task code costs ~25 % more CPU than alone
  (cache and run-queue contention; a real cluster gives each executor its own cores).
  ``--executors 1`` runs one executor at a time, as the local engine runs one process;
- the store is read into the page cache before each run (``bench_pipeline.warm_cache``:
  this VM's DAMON reclaim pages out what was not touched for ~60 s, and refilling it costs
  the reading run up to 1 s of CPU per GB);
- each run's output is deleted after it, so that outputs do not fill the page cache (the
  kernel's reclaim then charges the next run's system time);
- the local engine's CPU is its process's rusage (exact; sampling /proc misses a run that
  ends within 0.1 s);
- fixed cost: wall of the job on the 200-message store (two commit-log files, so that both
  executors start a Python worker) on the warm cluster (the store's
  first run on the cluster is not measured: it starts the workers' Python daemons);
- driver: peak RSS of the rmqstore process and of its JVM;
- network: what Spark moved between driver and executors, from the event log (task
  results and shuffle bytes; closures are a few KB per task), per GB of commit log.

``--connect``: the fixed cost on a warm Spark Connect server instead (``standalone.
ConnectServer`` on the same cluster, one application whose executors stay up): each
command on the 200-message store, ``--repeat`` times after one warm-up run; wall and the
client's CPU (the rmqstore process, no JVM), and the server's CPU delta (the server JVM,
and the executor JVMs and Python workers under the workers: /proc before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# bench/ (bench_pipeline) is on the path as the script's directory; the project root is for tests.helpers
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchstore
from bench_pipeline import descendants, proc_table, run, warm_cache

from tests.helpers.standalone import Cluster, ConnectServer

TINY_FILE = 65536  # the 200-message store in two commit-log files


class ExecutorCpu(threading.Thread):
    """CPU of every descendant of the worker JVMs (executor JVMs, Python daemons and the
    workers they fork, which leave the process group), read every 0.1 s."""

    def __init__(self, cluster: Cluster):
        super().__init__(daemon=True)
        self.workers = [p.pid for p in cluster.procs[1:]]
        self.stop = threading.Event()
        self.cpu: dict[int, float] = {}
        self.jvm: set[int] = set()

    def run(self) -> None:
        while not self.stop.is_set():
            table = proc_table()
            for pid in descendants(table, self.workers):
                self.cpu[pid] = table[pid][2]
                if table[pid][1] == "java":
                    self.jvm.add(pid)
            self.stop.wait(0.1)


def event_bytes(folder: Path) -> dict:
    """Task result and shuffle bytes of the one application logged in ``folder``."""
    out = {"results": 0, "shuffle": 0, "tasks": 0}
    for log in (p for p in folder.rglob("*") if p.is_file()):
        for line in log.open(encoding="utf-8", errors="replace"):
            if '"SparkListenerTaskEnd"' not in line:
                continue
            m = json.loads(line).get("Task Metrics") or {}
            out["tasks"] += 1
            out["results"] += m.get("Result Size", 0)
            out["shuffle"] += (m.get("Shuffle Read Metrics") or {}).get("Remote Bytes Read", 0) + (
                m.get("Shuffle Read Metrics") or {}
            ).get("Local Bytes Read", 0)
    return out


def on_cluster(cluster: Cluster, args: list[str], events: Path, conf: list[str]) -> dict:
    events.mkdir(parents=True)
    cpu = ExecutorCpu(cluster)
    cpu.start()
    r = run(
        [
            *args,
            "--engine",
            "spark",
            "--spark-master",
            cluster.url,
            "--spark-conf",
            "spark.eventLog.enabled=true",
            "--spark-conf",
            "spark.eventLog.compress=false",
            "--spark-conf",
            "spark.eventLog.rolling.enabled=false",
            "--spark-conf",
            f"spark.eventLog.dir=file://{events}",
            *conf,
        ],
        False,
    )
    deadline = time.monotonic() + 30
    while cluster.executor_pids() and time.monotonic() < deadline:  # the executors stop after the job
        time.sleep(0.1)
    cpu.stop.set()
    cpu.join()
    r["executor_cpu"] = sum(cpu.cpu.values())
    r["executor_jvm_cpu"] = sum(c for p, c in cpu.cpu.items() if p in cpu.jvm)
    r["network"] = event_bytes(events)
    return r


def tree_cpu(roots: list[int]) -> float:
    """user+sys seconds of ``roots`` and every process under them, alive now."""
    table = proc_table()
    return sum(table[p][2] for p in [*roots, *descendants(table, roots)] if p in table)


def connect_fixed_cost(cluster: Cluster, tiny: Path, work: Path, commands: list[str], repeat: int) -> dict:
    """Each command on the tiny store against a warm Connect server (see the docstring)."""
    server = ConnectServer(cluster, sys.executable).start()
    roots = [server.pid(), *(p.pid for p in cluster.procs[1:])]
    out: dict = {}
    try:
        for cmd in commands:
            for k in range(repeat + 1):
                args = [
                    cmd,
                    "--store",
                    str(tiny),
                    "-f",
                    "json",
                    "--commitlog-file-size",
                    str(TINY_FILE),
                    "--engine",
                    "spark",
                    "--spark-master",
                    server.url,
                ]
                if cmd in ("rebuild-index", "export"):
                    args += ["--output", str(work / f"connect-{cmd}-{k}")]
                before = tree_cpu(roots)
                r = run(args, False)
                time.sleep(1.0)  # the server's bookkeeping after the session ends
                r["server_cpu"] = tree_cpu(roots) - before
                if k == 0:
                    continue  # warm-up: Python workers start
                out.setdefault(cmd, []).append(r)
                print(
                    f"connect {cmd:14} wall {r['wall']:5.2f} s, client {r['cpu_sampled']:5.2f} s CPU, server + "
                    f"executors {r['server_cpu']:5.2f} s CPU, client RSS {r['peak']['driver'] >> 20} MiB; load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    finally:
        server.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-cluster-bench"))
    ap.add_argument("--mb", type=int, default=400, help="commit-log data to generate (MB)")
    ap.add_argument("--file-mb", type=int, default=64)
    ap.add_argument("--commands", default="verify,rebuild-index,export")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--executors", type=int, default=0, help="at most N one-core executors (spark.cores.max)")
    ap.add_argument("--connect", action="store_true", help="the fixed cost on a Spark Connect server only")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the cluster is stopped in a finally
    store, tiny = a.dir / "store", a.dir / "tiny2"
    # the recorded results were measured with Spark's class-data archive (opt-in since #31)
    os.environ.setdefault("RMQSTORE_SPARK_CACHE", str(a.dir / "spark-cache"))
    sizes = ["--commitlog-file-size", str(a.file_mb << 20)]
    # two files: one task per executor, so every executor's worker start is in the fixed cost
    tiny_sizes = ["--commitlog-file-size", str(TINY_FILE)]
    if not a.connect:
        options = ["--body-size", "2048", "--delay-ratio", "0", "--transaction-ratio", "0", *sizes]
        benchstore.ensure_store(store, a.mb * 10**6 // 2240, *options)
    benchstore.ensure_store(tiny, 200, *tiny_sizes)
    work = Path(tempfile.mkdtemp(prefix="rmq-cluster-bench-"))
    if a.connect:
        cluster = Cluster(work / "cluster").start()
        try:
            res = {
                "load_before": os.getloadavg(),
                "connect": connect_fixed_cost(cluster, tiny, work, a.commands.split(","), a.repeat),
            }
        finally:
            cluster.stop()
            shutil.rmtree(work, ignore_errors=True)
        if a.json:
            a.json.write_text(json.dumps(res, indent=1, default=str))
        return
    gb = sum(p.stat().st_size for p in (store / "commitlog").iterdir()) / 1e9
    cluster = Cluster(work / "cluster").start()
    res: dict = {
        "gb": gb,
        "files": len(list((store / "commitlog").iterdir())),
        "load_before": os.getloadavg(),
        "runs": {},
    }
    print(f"store {gb:.2f} GB in {res['files']} files; cluster {cluster.url}; load {os.getloadavg()[0]:.2f}")
    conf = ["--spark-conf", f"spark.cores.max={a.executors}"] if a.executors else []
    res["executors"] = a.executors or cluster.n
    n = 0
    try:
        for cmd in a.commands.split(","):
            for which, path in (("tiny", tiny), ("store", store)):

                def args(k: int, cmd: str = cmd, path: Path = path, which: str = which) -> list[str]:
                    base = [cmd, "--store", str(path), "-f", "json"] + (sizes if which == "store" else tiny_sizes)
                    if cmd == "rebuild-index":
                        return base + ["--output", str(work / f"out{k}")]
                    return base + (["--output", str(work / f"out{k}")] if cmd == "export" else [])

                if which == "store":  # the first run starts each worker's Python daemon (warm cluster)
                    n += 1
                    on_cluster(cluster, args(n), work / f"events{n}", conf)
                    shutil.rmtree(work / f"out{n}", ignore_errors=True)
                for _ in range(a.repeat):
                    n += 1
                    warm_cache(path)
                    loc = run(args(n), False)
                    shutil.rmtree(work / f"out{n}", ignore_errors=True)  # no page cache filled by old outputs
                    n += 1
                    warm_cache(path)
                    cl = on_cluster(cluster, args(n), work / f"events{n}", conf)
                    shutil.rmtree(work / f"out{n}", ignore_errors=True)
                    res["runs"].setdefault(f"{cmd}/{which}", []).append({"local": loc, "cluster": cl})
                    print(
                        f"{cmd:14} {which:5} local {loc['wall']:6.2f} s {loc['cpu_waited']:6.2f} s CPU | cluster "
                        f"{cl['wall']:6.2f} s, executors {cl['executor_cpu']:6.2f} s CPU "
                        f"(JVM {cl['executor_jvm_cpu']:5.2f}), driver "
                        f"{cl['cpu_sampled']:5.2f} s CPU, RSS {cl['peak']['driver'] >> 20} + JVM "
                        f"{cl['peak']['jvm'] >> 20} MiB, results {cl['network']['results']:,} B, shuffle "
                        f"{cl['network']['shuffle']:,} B, {cl['network']['tasks']} tasks; load "
                        f"{os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
        summarize(res)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)  # outputs, event logs, the cluster's dirs
    if a.json:
        a.json.write_text(json.dumps(res, indent=1, default=str))


def summarize(res: dict) -> None:
    """Per GB (store − tiny, medians) and the fixed cost."""
    med = statistics.median
    res["summary"] = {}
    for cmd in sorted({k.split("/")[0] for k in res["runs"]}):
        big, small = res["runs"][f"{cmd}/store"], res["runs"][f"{cmd}/tiny"]
        loc = (med(r["local"]["cpu_waited"] for r in big) - med(r["local"]["cpu_waited"] for r in small)) / res["gb"]
        ex = (med(r["cluster"]["executor_cpu"] for r in big) - med(r["cluster"]["executor_cpu"] for r in small)) / res[
            "gb"
        ]
        py = [r["cluster"]["executor_cpu"] - r["cluster"]["executor_jvm_cpu"] for r in big]
        py0 = [r["cluster"]["executor_cpu"] - r["cluster"]["executor_jvm_cpu"] for r in small]
        s = {
            "local_cpu_s_per_gb": loc,
            "executor_cpu_s_per_gb": ex,
            "ratio": ex / loc,
            "executor_python_cpu_s_per_gb": (med(py) - med(py0)) / res["gb"],
            "fixed_wall_s": med(r["cluster"]["wall"] for r in small),
            "fixed_executor_cpu_s": med(r["cluster"]["executor_cpu"] for r in small),
            "driver_rss_mib": max(r["cluster"]["peak"]["driver"] for r in big) / 2**20,
            "driver_jvm_rss_mib": max(r["cluster"]["peak"]["jvm"] for r in big) / 2**20,
            "spark_bytes_per_gb": med(
                r["cluster"]["network"]["results"] + r["cluster"]["network"]["shuffle"] for r in big
            )
            / res["gb"],
            "cluster_wall_s": med(r["cluster"]["wall"] for r in big),
            "local_wall_s": med(r["local"]["wall"] for r in big),
        }
        res["summary"][cmd] = s
        print(
            f"{cmd}: executors {ex:.2f} s CPU/GB (Python {s['executor_python_cpu_s_per_gb']:.2f}) vs local "
            f"{loc:.2f} ({s['ratio']:.2f}x); fixed cost "
            f"{s['fixed_wall_s']:.1f} s wall ({s['fixed_executor_cpu_s']:.1f} s executor CPU); driver "
            f"{s['driver_rss_mib']:.0f} MiB + JVM {s['driver_jvm_rss_mib']:.0f} MiB; Spark traffic "
            f"{s['spark_bytes_per_gb'] / 1e3:.0f} kB/GB"
        )


if __name__ == "__main__":
    main()
