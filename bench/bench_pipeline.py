"""Local engine vs Spark local[N] on one multi-GB store: rebuild-index, verify and export.

Usage:
  python bench/bench_pipeline.py --dir /data/rmq-bench [--gb 3.5] [--body 2048] [--workers 2]
         [--commands rebuild-index,verify,export] [--engines local,spark] [--repeat 3] [--json out.json]

The store (1 GiB commit-log files, --body-byte messages) is generated once into --dir and
reused by later runs. Each command runs as its own process (Spark start-up included); a
sampler reads /proc every 0.2 s over the process tree and reports peak RSS of the driver
(the rmqstore process), of the Spark JVM and of the PySpark Python workers (largest single
worker and largest sum), and CPU time (user+sys, summed over the tree). The local engine is
pinned to one core (taskset -c 0) unless --no-pin.

Per-task figures: one commit-log file through each command's per-file task (the function a
Spark task runs), in a fresh process (CPU time, wall, peak RSS). Spark's fixed cost is a
run on a tiny store. From these, the estimate for N executors:
  wall(N) ~ start-up + ceil(files / N) * task + driver and second-stage time
and for a store much larger than N files, throughput ~ N * file size / task time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import benchstore

RMQ = [sys.executable, "-m", "rmqstore_cli"]
GIB = 1 << 30
TICK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ /proc sampling


def proc_table() -> dict[int, tuple[int, str, float]]:
    """pid → (parent pid, command name, user+sys seconds) of every process alive now."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    st = fh.read()
            except OSError:
                continue
            f = st[st.rindex(")") + 2 :].split()
            out[int(d)] = (int(f[1]), st[st.index("(") + 1 : st.rindex(")")], (int(f[11]) + int(f[12])) / TICK)
    return out


def descendants(table: dict[int, tuple[int, str, float]], roots: list[int]) -> list[int]:
    """Every process under ``roots`` in ``table`` (not the roots themselves)."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], list(roots)
    while todo:
        for pid in kids.get(todo.pop(), []):
            out.append(pid)
            todo.append(pid)
    return out


def _tree(root: int) -> list[int]:
    return [root, *descendants(proc_table(), [root])]


def _kind(pid: int, root: int) -> str:
    if pid == root:
        return "driver"
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return "other"
    exe = os.path.basename(cmd[0].decode(errors="replace")) if cmd and cmd[0] else ""
    if exe == "java":
        return "jvm"
    if {b"pyspark.daemon", b"pyspark.worker", b"rmqstore_cli.pipeline.daemon"} & set(cmd):
        return "worker"
    return "other"


def _rss_cpu(pid: int) -> tuple[int, float]:
    rss = 0
    try:
        with open(f"/proc/{pid}/status") as fh:
            for ln in fh:
                if ln.startswith("VmRSS:"):
                    rss = int(ln.split()[1]) * 1024
                    break
        with open(f"/proc/{pid}/stat") as fh:
            st = fh.read()
        f = st[st.rindex(")") + 2 :].split()
        cpu = (int(f[11]) + int(f[12])) / TICK
    except (OSError, IndexError, ValueError):
        return 0, 0.0
    return rss, cpu


class Sampler(threading.Thread):
    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root = root
        self.stop = threading.Event()
        self.peak = {"driver": 0, "jvm": 0, "worker_max": 0, "workers_sum": 0, "tree": 0}
        self.cpu: dict[int, float] = {}
        self.kinds: dict[int, str] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            total = wsum = 0
            for pid in _tree(self.root):
                k = _kind(pid, self.root)  # not cached: spark-submit's shell execs java under its pid
                rss, cpu = _rss_cpu(pid)
                if cpu:
                    self.cpu[pid] = cpu
                    self.kinds[pid] = k
                total += rss
                if k == "worker":
                    wsum += rss
                    self.peak["worker_max"] = max(self.peak["worker_max"], rss)
                elif k in ("driver", "jvm"):
                    self.peak[k] = max(self.peak[k], rss)
            self.peak["workers_sum"] = max(self.peak["workers_sum"], wsum)
            self.peak["tree"] = max(self.peak["tree"], total)
            self.stop.wait(0.2)


def warm_cache(*roots: Path) -> None:
    """Read every file under ``roots`` once, so that the next measured run finds them in the
    page cache. This VM runs DAMON's proactive reclaim (``kdamond``, action pageout: pages
    not accessed for ~60 s are paged out), and a run that reads evicted pages pays for new
    ones (zeroed, faulted in by the host) in its own CPU time: up to 1 s per GB, more than
    the differences measured."""
    buf = bytearray(4 << 20)
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for n in names:
                try:
                    with open(os.path.join(dirpath, n), "rb", buffering=0) as fh:
                        while fh.readinto(buf):
                            pass
                except OSError:
                    continue


def run(args: list[str], pin: bool) -> dict:
    cmd = (["taskset", "-c", "0"] if pin else []) + RMQ + args
    t0, c0 = time.perf_counter(), os.times()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    s = Sampler(p.pid)
    s.start()
    out, err = p.communicate()
    wall = time.perf_counter() - t0
    s.stop.set()
    s.join()
    c1 = os.times()
    if p.returncode not in (0, 1):  # verify exits 1 when it finds errors
        raise SystemExit(f"{' '.join(args)} failed ({p.returncode}): {err.decode()[-2000:]}")
    try:
        summary = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = {}
    waited = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    by_kind: dict[str, float] = {}
    for pid, c in s.cpu.items():
        by_kind[s.kinds[pid]] = by_kind.get(s.kinds[pid], 0.0) + c
    return {
        "wall": wall,
        "cpu_sampled": sum(s.cpu.values()),
        "cpu_by_kind": by_kind,
        "cpu_waited": waited,
        "peak": s.peak,
        "summary": summary,
        "stderr": err.decode(errors="replace")[-500:],
    }


# ------------------------------------------------------------------ per-task figures (one file, own process)

_TASK = r"""
import json, resource, sys, time
from rmqstore_cli.pipeline.stores import StoreSpec, FileTask
from rmqstore_cli.pipeline.export_tasks import export_batches
from rmqstore_cli.pipeline.rebuild_tasks import dispatch_file
from rmqstore_cli.store.layout.config import StoreConfig
kind, path, size, pos = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sizes = (("mapped_file_size_commit_log", size),)
spec = StoreSpec(path, path, None, sizes)
t0, c0 = time.perf_counter(), time.process_time()
if kind == "rebuild-index":  # what a Spark task of step 1 runs: dispatch, write its queues in place, spill
    import shutil, tempfile
    from rmqstore_cli.pipeline.rebuild_tasks import dispatch_and_spill
    cfg = StoreConfig.load(path, None, mapped_file_size_commit_log=size)
    out = tempfile.mkdtemp(prefix="rmq-task-")
    n = dispatch_and_spill(cfg, pos, False, True, True, None, out, True, False).messages
    shutil.rmtree(out)
elif kind == "export":  # what a Spark task runs: the file's batches written as Parquet with pyarrow
    import shutil, tempfile
    from rmqstore_cli.pipeline.local import write_parquet
    ms = spec.open(); f = ms.commitlog.files[pos]; ms.close()
    out = tempfile.mkdtemp(prefix="rmq-task-")
    n = write_parquet(FileTask(spec, f.name, f.file_from_offset, size), out, 0, [])
    shutil.rmtree(out)
else:
    from rmqstore_cli.pipeline.verify_tasks import plan_store, index_info_task, index_order, scan_task
    plan = plan_store(spec, True, False, 100)
    index_order(plan, [index_info_task(plan, k) for k in range(len(plan.index_paths))])
    t0, c0 = time.perf_counter(), time.process_time()
    n = scan_task(plan, 0, pos).messages
print(json.dumps({"messages": n, "wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def task_figures(kind: str, store: Path, size: int, pos: int, pin: bool) -> dict:
    cmd = (["taskset", "-c", "0"] if pin else []) + [sys.executable, "-c", _TASK, kind, str(store), str(size), str(pos)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"task {kind} failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ Spark stages of rebuild-index (in process)

_STAGES = r"""
import datetime as dt, json, resource, shutil, sys, time
from pathlib import Path
from rmqstore_cli.pipeline import spark as sp, rebuild_tasks as T
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.rebuild import RebuildOptions
store, size, master, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
t0 = time.perf_counter()
s = sp.session(master)
sc = s.sparkContext
res = {"session": time.perf_counter() - t0, "stages": []}
def timed(fn):
    def g(x):
        import os, resource, time
        t, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        out = fn(x)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        return out, (time.perf_counter() - t, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                     r1.ru_maxrss * 1024)
    return g
def run_map(fn, items):
    t = time.perf_counter()
    got = sc.parallelize(items, max(1, len(items))).map(timed(fn)).collect() if items else []
    res["stages"].append({"tasks": len(items), "wall": time.perf_counter() - t, "task_walls": [g[1][0] for g in got],
                          "task_cpus": [g[1][1] for g in got], "task_peak_rss": max([g[1][2] for g in got] or [0])})
    return [g[0] for g in got]
cfg = StoreConfig.load(store, None, mapped_file_size_commit_log=size)
shutil.rmtree(dest, ignore_errors=True)
t = time.perf_counter()
rep = T.rebuild_staged(cfg, dest, RebuildOptions(tz=dt.timezone.utc), run_map, t)
res["job"] = time.perf_counter() - t
res["messages"] = rep.messages
t = time.perf_counter()
s.stop()
res["stop"] = time.perf_counter() - t
shutil.rmtree(dest, ignore_errors=True)
print(json.dumps(res))
"""


def spark_stages(store: Path, size: int, master: str, dest: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", _STAGES, str(store), str(size), master, str(dest)], capture_output=True, text=True
    )
    if r.returncode:
        raise SystemExit(f"stages failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def one_run(a, name: str, engine: str, base: list[str], files: list[Path], master: str, pin: bool) -> dict:
    extra = ["--engine", engine] + (["--spark-master", master] if engine == "spark" else [])
    if name != "verify":
        out = a.dir / f"out-{name}-{engine}"
        shutil.rmtree(out, ignore_errors=True)
        extra += ["--output", str(out)]
    if a.warm:
        warm(files)
    load = os.getloadavg()[0]
    r = run(base + extra, pin and engine == "local")
    s = r["summary"]
    inner = s.get("summary", s)
    r["load"] = load
    r["messages"] = (
        s.get("messages")
        or s.get("rows")
        or inner.get("messages")
        or (inner.get("stores") or [{}])[0].get("messages")
        or 0
    )
    return r


def warm(files: list[Path]) -> float:
    """Read the commit log once so every engine starts from the page cache (not timed)."""
    t = time.perf_counter()
    for p in files:
        with open(p, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass
    return time.perf_counter() - t


# ------------------------------------------------------------------ main


def mib(b: int) -> str:
    return f"{b / 2**20:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-pipeline-bench"))
    ap.add_argument("--gb", type=float, default=3.5, help="commit-log data to generate (GB)")
    ap.add_argument("--body", type=int, default=2048)
    ap.add_argument("--file-size", type=int, default=GIB)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--commands", default="rebuild-index,verify,export")
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the local engine to core 0")
    ap.add_argument("--no-tasks", action="store_true", help="skip the per-task figures")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=1, help="runs per engine (alternating); ratios of medians")
    ap.add_argument("--warm", action="store_true", help="read the commit log before each run (page cache)")
    ap.add_argument(
        "--stages",
        action="store_true",
        help="also run rebuild-index on Spark in process: wall per stage, CPU and RSS per task",
    )
    a = ap.parse_args()
    pin = not a.no_pin and shutil.which("taskset") is not None
    a.dir.mkdir(parents=True, exist_ok=True)
    # the recorded results were measured with Spark's class-data archive (opt-in since #31)
    os.environ.setdefault("RMQSTORE_SPARK_CACHE", str(a.dir / "spark-cache"))
    store = a.dir / "store"
    sizes = ["--commitlog-file-size", str(a.file_size)]
    n = int(a.gb * 1e9 / (a.body + 190))
    options = ["--body-size", str(a.body), "--delay-ratio", "0", "--transaction-ratio", "0", *sizes]
    took = benchstore.ensure_store(store, n, *options)
    if took is not None:
        print(f"generated {n:,} messages in {took:.0f} s (kept in {store} for later runs)")
    tiny = a.dir / "tiny"
    benchstore.ensure_store(tiny, 200)
    files = sorted((store / "commitlog").iterdir())
    data = sum(p.stat().st_blocks * 512 for p in files)
    master = f"local[{a.workers}]"
    res: dict = {
        "store_bytes": data,
        "files": len(files),
        "file_size": a.file_size,
        "body": a.body,
        "master": master,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "runs": {},
        "tasks": {},
    }
    print(
        f"store: {data / 1e9:.2f} GB of commit log in {len(files)} files of {a.file_size / GIB:g} GiB; "
        f"master {master}; {os.cpu_count()} cpus; load {os.getloadavg()[0]:.2f}; local pinned: {pin}"
    )
    engines = a.engines.split(",")
    if "spark" in engines:  # Spark's fixed cost: a run on a tiny store
        r = run(["verify", "--store", str(tiny), "-f", "json", "--engine", "spark", "--spark-master", master], False)
        res["spark_startup"] = r["wall"]
        print(
            f"spark start-up (verify of a 200-message store): {r['wall']:.1f} s, JVM peak {mib(r['peak']['jvm'])} MiB"
        )
    for name in a.commands.split(","):
        base = {
            "rebuild-index": ["rebuild-index", "--store", str(store), *sizes, "-f", "json"],
            "verify": ["verify", "--store", str(store), *sizes, "-f", "json", "--max-findings", "100"],
            "export": ["export", "--store", str(store), *sizes, "-f", "json", "--overwrite"],
        }[name]
        walls: dict[str, list[float]] = {e: [] for e in engines}
        for rep in range(a.repeat):  # engines alternate, so slow spells of the VM hit both
            for engine in engines:
                r = one_run(a, name, engine, base, files, master, pin)
                walls[engine].append(r["wall"])
                res["runs"][f"{name}/{engine}" + (f"#{rep}" if rep else "")] = r
                pk = r["peak"]
                print(
                    f"{name:13s} {engine:5s} wall {r['wall']:6.1f} s  cpu ~{r['cpu_sampled']:6.1f} s  "
                    f"{r['messages'] / r['wall']:9,.0f} msg/s {data / r['wall'] / 1e6:6.1f} MB/s  peak RSS driver "
                    f"{mib(pk['driver'])} jvm {mib(pk['jvm'])} worker {mib(pk['worker_max'])} "
                    f"(sum {mib(pk['workers_sum'])}) MiB  load {r['load']:.1f}"
                )
                if engine == "spark":
                    print(
                        "    cpu by process: "
                        + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(r["cpu_by_kind"].items()))
                    )
        if "spark" in walls and "local" in walls:
            ls, ss = statistics.median(walls["local"]), statistics.median(walls["spark"])
            res.setdefault("medians", {})[name] = {"local": ls, "spark": ss, "runs": a.repeat}
            print(
                f"{name:13s} speed-up {master} / local: {ls / ss:.2f}x (median of {a.repeat}: local {ls:.1f} s, "
                f"spark {ss:.1f} s)"
            )
        if name == "rebuild-index" and a.stages and "spark" in engines:
            if a.warm:
                warm(files)
            st = spark_stages(store, a.file_size, master, a.dir / "out-stages")
            res["stages"] = st
            print(
                f"rebuild-index stages on {master}: session {st['session']:.1f} s, job {st['job']:.1f} s, "
                f"stop {st['stop']:.1f} s"
            )
            for k, g in enumerate(st["stages"]):
                print(
                    f"    stage {k + 1}: {g['tasks']:3d} tasks, wall {g['wall']:5.1f} s, task CPU sum "
                    f"{sum(g['task_cpus']):5.1f} s (max {max(g['task_cpus'] or [0]):.2f} s), task wall sum "
                    f"{sum(g['task_walls']):5.1f} s, peak task RSS {mib(g['task_peak_rss'])} MiB"
                )
        if not a.no_tasks:
            if a.warm:
                warm(files[:1])
            t = task_figures(name, store, a.file_size, 0, pin)
            res["tasks"][name] = t
            per = a.file_size / t["wall"]
            print(
                f"{name:13s} one task (file 0, own process): wall {t['wall']:.1f} s cpu {t['cpu']:.1f} s "
                f"{t['messages'] / t['wall']:,.0f} msg/s {per / 1e6:.0f} MB/s peak RSS {mib(t['peak_rss'])} MiB"
            )
            if "spark_startup" in res:
                # rebuild-index: a second per-file stage (index entries) and one task per index file
                # (taken from --stages when run); export and verify: the per-file task alone
                extra = 0.0
                if name == "rebuild-index" and "stages" in res:
                    st = res["stages"]["stages"]
                    extra = sum(st[1]["task_cpus"]) / max(1, st[1]["tasks"]) * len(files)
                for n in (1, 2, 4, 8, 16):
                    est = res["spark_startup"] + math.ceil(len(files) / n) * (t["wall"] + extra / len(files))
                    print(
                        f"    estimate N={n:2d}: this store ~{est:.0f} s; a large store "
                        f"~{n * a.file_size / (t['wall'] + extra / len(files)) / 1e6:,.0f} MB/s"
                    )
    res["load_after"] = os.getloadavg()
    if a.json:
        a.json.write_text(json.dumps(res, indent=1, default=str))


if __name__ == "__main__":
    main()
