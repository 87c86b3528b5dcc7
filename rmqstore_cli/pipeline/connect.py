"""The Spark engine on a Spark Connect server (``--spark-master sc://HOST:PORT``).

A Connect server is one long-running Spark application whose executors stay up between
commands, so a command pays neither a driver JVM nor executor JVMs: it is a thin gRPC
client (issue #21's fixed cost). Connect has no SparkContext, RDDs, broadcasts or
accumulators, so the steps of :mod:`~rmqstore_cli.pipeline.spark` are DataFrames here: a
``range`` of task numbers, one per partition, ``mapInArrow`` running the same task
functions (pipeline/*_tasks.py) and returning each result pickled in a binary column, and
``collect()``. The verify shuffle is ``repartition(n, key)`` and a per-partition group step;
the kept file scans are a persisted DataFrame. Classic sessions keep their RDD jobs: a
SparkSession costs them ~0.7 s per command.

The server's executors run the tasks, so they must import rmqstore_cli (the server started
with ``spark.pyspark.python`` an environment that has it, README) and see the stores and
outputs at the driver's paths, as on any cluster.
"""

from __future__ import annotations

import pickle
import socket
import time
import uuid

from rmqstore_cli.pipeline import executor
from rmqstore_cli.pipeline.executor import OnExecutor

SCHEME = "sc://"
FINISH_TASKS = 8  # at most this many queue/index tasks (4 × a 2-core cluster) …
KILL_WAIT = 2.5  # s: a cancelled task's Python worker may run on for spark.python.task.killTimeout (2 s)
CONNECT_TIMEOUT = 10.0  # s: a server that does not accept a TCP connection in this time is unreachable


def is_connect(master: str | None) -> bool:
    """A Spark Connect URL (Spark's own ``sc://`` scheme)."""
    return master is not None and master.startswith(SCHEME)


class Remote:
    """A Spark Connect session in the shape the jobs expect of ``spark.Session``:
    ``remote`` is the SparkSession, ``sql()`` returns it, there is no SparkContext."""

    sparkContext = None

    def __init__(self, remote, url: str):
        self.remote = remote
        self.url = url

    def sql(self):
        return self.remote

    def stop(self) -> None:
        self.remote.stop()


def session(url: str, conf: list[str] | None, verbose: bool) -> Remote:
    """A new session on the server at ``url``; ``conf`` (KEY=VALUE) are session settings
    (the server's static ones, e.g. executor memory, are the server's own). A server that
    does not answer fails here, at once, instead of in the client's retries (~10 min)."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client import core

    from rmqstore_cli.errors import UsageError

    parse = getattr(core, "DefaultChannelBuilder", core.ChannelBuilder)  # PySpark 4 / 3.5
    endpoint = parse(url).endpoint  # validates the URL (host, port, parameters)
    host, _, port = endpoint.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        raise ConnectionError(f"no Spark Connect server answers at {endpoint}: {e.strerror or e}") from None
    builder = SparkSession.builder.remote(url)
    for kv in conf or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise UsageError(f"⟦spark_conf⟧ {kv!r} is not KEY=VALUE")
        if not k.startswith("spark.rmqstore."):  # ours: for classic masters only
            builder = builder.config(k, v)
    spark = builder.create()
    _ = spark.version  # the first call: the session exists on the server
    if not verbose:
        spark.conf.set("spark.sql.pyspark.jvmStacktrace.enabled", "false")
    return Remote(spark, url)


def _results_schema():
    from pyspark.sql import types as T

    return T.StructType([T.StructField("i", T.LongType(), False), T.StructField("blob", T.BinaryType(), False)])


def _keyed_schema():
    from pyspark.sql import types as T

    return T.StructType([T.StructField("key", T.StringType(), False), T.StructField("blob", T.BinaryType(), False)])


def _batch(names: list[str], *columns):
    """One Arrow batch of the given columns (Python lists)."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays([pa.array(c) for c in columns], names=names)


class _Each:
    """``mapInArrow`` body: for each task number in the partition, ``fn(items[i])`` pickled."""

    def __init__(self, fn, items: list):
        self.fn, self.items = fn, items

    def __call__(self, batches):
        for b in batches:
            for i in b.column(0).to_pylist():
                yield _batch(["i", "blob"], [i], [pickle.dumps(self.fn(self.items[i]), protocol=5)])


def tasks(spark, fn, items: list):
    """A DataFrame of one partition per item whose rows are ``(i, pickle(fn(items[i])))``."""
    n = len(items)
    return spark.range(0, n, 1, n).mapInArrow(_Each(OnExecutor(fn), items), _results_schema())


def collected(rows, n: int) -> list:
    """``(i, blob)`` rows back in task order, unpickled."""
    out: list = [None] * n
    for r in rows:
        out[r.i] = pickle.loads(r.blob)
    return out


def guarded(spark, action):
    """``action()`` under a tag of its own: when it fails, its other tasks are interrupted
    (``SparkSession#interruptTag``) and given time to stop before the error goes up, so that
    none still writes into a staging directory the caller is about to roll back (Connect
    has no status tracker to wait on, hence the fixed :data:`KILL_WAIT`)."""
    tag = f"rmqstore-{uuid.uuid4().hex}"
    spark.addTag(tag)
    try:
        return action()
    except BaseException:
        try:
            spark.interruptTag(tag)
        except Exception:  # the server is gone: nothing left to stop
            pass
        time.sleep(KILL_WAIT)
        raise
    finally:
        spark.removeTag(tag)


def run_map(spark, fn, items) -> list:
    """``fn`` over ``items`` as one job, one task per item, results in item order (the
    Connect form of ``spark._run_map``)."""
    items = list(items)
    if not items:
        return []
    return collected(guarded(spark, lambda: tasks(spark, fn, items).collect()), len(items))


class VerifyOnConnect:
    """``verify_stores``'s steps on Spark Connect, as ``spark._VerifyOnSpark`` does them on a
    SparkContext: the scans are a persisted DataFrame of pickled results; the queue and
    index tasks get what they need from the driver when every scan came back whole (the
    contexts travel in the task's closure instead of a broadcast), else by
    ``repartition(n, key)`` of the scans' items and the keys' seeds."""

    def __init__(self, remote: Remote):
        self.spark = remote.remote
        self.whole = None
        self.scans = 0

    def map(self, fn, items):
        return run_map(self.spark, _Star(fn), items)

    def scan(self, fn, items, side_fn, side_items):
        tagged = [(0, side_fn, x) for x in side_items] + [(1, fn, x) for x in items]
        return tasks(self.spark, _tagged, tagged).persist()

    def results(self, df):
        rows = guarded(self.spark, lambda: df.mapInArrow(_Light(executor.SHIP_MARKS), _results_schema()).collect())
        got = collected(rows, len(rows))
        scans = [r for tag, r in got if tag == 1]
        self.whole = scans if all(r.matched is not None for r in scans) else None
        self.scans = len(scans)
        return [r for tag, r in got if tag == 0], [r.light() for r in scans]

    def finish(self, df, keys, ctxs):
        from rmqstore_cli.pipeline.verify_tasks import grouped

        files = max(2, self.scans)  # … nor than commit-log files (2 at least): a task costs the server ~60 ms
        if self.whole is not None:
            groups = list(grouped(self.whole, keys).items())
            n = max(1, min(len(groups), FINISH_TASKS, files))
            chunks = [groups[i::n] for i in range(n)]
            return [r for part in run_map(self.spark, _Finish(ctxs), chunks) for r in part]
        n = max(1, min(len(keys), FINISH_TASKS, files))
        seeds = self.spark.createDataFrame(
            [(repr(k), pickle.dumps((k, None), protocol=5)) for k in keys], _keyed_schema()
        )  # every key gets a task, whatever the files sent it
        items = df.mapInArrow(_shuffle_items, _keyed_schema())
        out = items.union(seeds).repartition(n, "key").mapInArrow(_GroupFinish(ctxs), _results_schema())
        rows = guarded(self.spark, out.collect)
        return [pickle.loads(r.blob) for r in rows]

    def release(self, df):
        df.unpersist()


class _Star:
    """``fn(*x)``: a picklable star-call (the verify steps take their arguments as tuples)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(*x)


def _tagged(t):
    """A scan-job task: (its tag, its function's result)."""
    return t[0], t[1](*t[2])


class _Light:
    """The scans' results as the driver reads them: whole when small, else ``light()``."""

    def __init__(self, ship: int):
        self.ship = ship

    def __call__(self, batches):
        for b in batches:
            out = []
            for blob in b.column(1).to_pylist():
                tag, r = pickle.loads(blob)
                out.append(pickle.dumps((tag, r if tag == 0 or r.marks() <= self.ship else r.light()), protocol=5))
            yield _batch(["i", "blob"], b.column(0).to_pylist(), out)


def _shuffle_items(batches):
    """What each kept file scan gives the queue and index tasks, keyed by ``repr(key)``."""
    from rmqstore_cli.pipeline.verify_tasks import shuffle_items

    for b in batches:
        keys, blobs = [], []
        for blob in b.column(1).to_pylist():
            tag, r = pickle.loads(blob)
            if tag == 1:
                for k, item in shuffle_items(r):
                    keys.append(repr(k))
                    blobs.append(pickle.dumps((k, item), protocol=5))
        yield _batch(["key", "blob"], keys, blobs)


class _Finish:
    """One chunk of (key, items) groups through ``finish_task``."""

    def __init__(self, ctxs: dict):
        self.ctxs = ctxs

    def __call__(self, chunk: list) -> list:
        from rmqstore_cli.pipeline.verify_tasks import finish_task

        return [finish_task(self.ctxs, k, items) for k, items in chunk]


class _GroupFinish:
    """A shuffled partition's items grouped by key, each group through ``finish_task``."""

    def __init__(self, ctxs: dict):
        self.ctxs = ctxs

    def __call__(self, batches):
        groups: dict = {}
        for b in batches:
            for blob in b.column(1).to_pylist():
                k, item = pickle.loads(blob)
                got = groups.setdefault(k, [])
                if item is not None:
                    got.append(item)
        done = OnExecutor(_Finish(self.ctxs))(list(groups.items()))
        yield _batch(["i", "blob"], list(range(len(done))), [pickle.dumps(r, protocol=5) for r in done])
