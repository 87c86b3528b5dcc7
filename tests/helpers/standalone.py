"""A Spark standalone cluster on 127.0.0.1 from the installed PySpark: one master and
workers of one core each, for the cluster tests (test_pipeline_cluster.py) and
bench/bench_cluster.py.

The workers (and so their executors and Python workers) run with their own HOME, working
directory, work and local dirs, caches and a minimal environment: nothing of the
driver's (cwd, HOME, env vars, ~/.cache) can leak into a task. Every process runs in its
own process group, which :meth:`Cluster.stop` kills whole (executors and Python daemons
included).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

WORKER_ENV_KEEP = ("PATH", "JAVA_HOME", "LANG", "TZ")  # all a worker inherits from the driver's env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    """The installed PySpark is the Spark installation of every node."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_class() -> Path:
    return spark_home() / "bin" / "spark-class"


class Cluster:
    """``Cluster(root, workers=2).start()``; ``url`` is the master (``spark://127.0.0.1:P``)."""

    def __init__(self, root: Path, workers: int = 2, memory: str = "1g"):
        self.root = Path(root)
        self.n = workers
        self.memory = memory
        self.procs: list[subprocess.Popen] = []
        self.port, self.ui = free_port(), free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.worker_dirs: list[Path] = []

    def _spawn(self, name: str, args: list[str], home: Path, env: dict) -> subprocess.Popen:
        home.mkdir(parents=True, exist_ok=True)
        log = open(self.root / f"{name}.log", "wb")
        p = subprocess.Popen(
            [str(spark_class()), *args],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs.append(p)
        return p

    def worker_env(self, home: Path) -> dict:
        env = {k: os.environ[k] for k in WORKER_ENV_KEEP if k in os.environ}
        env.update(
            HOME=str(home),
            XDG_CACHE_HOME=str(home / "cache"),
            TMPDIR=str(home / "tmp"),
            SPARK_LOCAL_DIRS=str(home / "local"),
            SPARK_LOG_DIR=str(home / "logs"),
            SPARK_WORKER_DIR=str(home / "work"),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_HOME=str(spark_home()),
        )
        for d in ("tmp", "local", "logs", "work", "cache"):
            (home / d).mkdir(parents=True, exist_ok=True)
        return env

    def start(self, timeout: float = 120.0) -> Cluster:
        self.root.mkdir(parents=True, exist_ok=True)
        home = self.root / "master"
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui),
            ],
            home,
            self.worker_env(home),
        )
        for i in range(self.n):
            home = self.root / f"worker{i}"
            self.worker_dirs.append(home)
            self._spawn(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(free_port()),
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    "1",
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(home / "work"),
                    self.url,
                ],
                home,
                self.worker_env(home),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum(w["state"] == "ALIVE" for w in self.state().get("workers", [])) == self.n:
                return self
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        self.stop()
        logs = "\n".join(
            (self.root / f"{n}.log").read_text(errors="replace")[-2000:]
            for n in ["master"] + [f"worker{i}" for i in range(self.n)]
            if (self.root / f"{n}.log").exists()
        )
        raise RuntimeError(f"the standalone cluster did not come up:\n{logs}")

    def state(self) -> dict:
        """The master's status page as JSON (workers, their cores used, applications)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return {}

    def executor_pids(self) -> list[int]:
        """The executor JVMs running now (children of the workers)."""
        out = []
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    cmd = (p / "cmdline").read_bytes()
                    if b"CoarseGrainedExecutorBackend" in cmd and os.readlink(p / "cwd").startswith(str(self.root)):
                        out.append(int(p.name))
                except OSError:
                    pass
        return out

    def stop(self) -> None:
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # executors and Python daemons left in the group
            except (ProcessLookupError, PermissionError):
                pass
        self.procs = []


class ConnectServer:
    """A Spark Connect server (``SparkConnectServer``, one long-running application) on
    ``cluster``, its Python workers from ``python``; ``url`` is ``sc://127.0.0.1:P``.

    Started by spark-submit in its own process group, with its own HOME, working, log and
    local dirs (as a worker's), so that :meth:`stop` kills it whole."""

    CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(self, cluster: Cluster, python: str, conf: dict | None = None):
        self.cluster = cluster
        self.root = cluster.root / "connect"
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.python = python
        self.conf = conf or {}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> ConnectServer:
        env = self.cluster.worker_env(self.root)
        env.update(SPARK_PID_DIR=str(self.root / "tmp"), PYSPARK_PYTHON=self.python)
        conf = {
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.pyspark.python": self.python,
            "spark.ui.enabled": "false",
            "spark.python.daemon.module": "rmqstore_cli.pipeline.daemon",
            "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1",
            **self.conf,
        }
        args = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            self.CLASS,
            "--name",
            "rmqstore-connect",
            "--master",
            self.cluster.url,
            *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
        ]
        log = open(self.cluster.root / "connect.log", "wb")
        self.proc = subprocess.Popen(
            args,
            cwd=self.root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            "the Spark Connect server did not come up:\n"
            + (self.cluster.root / "connect.log").read_text(errors="replace")[-3000:]
        )

    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def stop(self) -> None:
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                continue
        self.proc = None
