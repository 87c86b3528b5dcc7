"""The Spark engine: the same tasks, one Spark task per commit-log file.

The driver plans tasks and reads back only counts and capped findings; rows go from the
executors straight to Parquet.
"""

from __future__ import annotations

import os
import pickle
import sys
from dataclasses import replace
from pathlib import Path

from rmqstore_cli.pipeline import connect, executor, jvmstart
from rmqstore_cli.pipeline.executor import EXECUTOR_SAID, OnExecutor, shrunk_told, tell_shrunk
from rmqstore_cli.pipeline.export_tasks import export_batches
from rmqstore_cli.pipeline.schema import PARTITION_COLUMNS, spark_schema
from rmqstore_cli.pipeline.stores import FileTask, StoreSpec, hadoop_uri, local_path

MAX_FINDINGS = 1000


DEFAULT_MASTER = "local[*]"
#: How long a job on a cluster waits for its first executor (a cluster without free cores or
#: memory for it never gives one: Spark itself would wait for ever).
EXECUTOR_TIMEOUT = "spark.rmqstore.executorTimeout"
EXECUTOR_TIMEOUT_DEFAULT = 120.0
_start = jvmstart.Start([])  # how this process's JVM was started (one per process)


def under_spark_submit() -> bool:
    """Run by ``spark-submit``: its JVM is already up and told us its gateway port."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


class Session:
    """A SparkContext, and a SparkSession only for the job that needs Spark SQL (creating
    one costs ~0.7 s; rebuild-index, verify and export to a directory use RDDs only)."""

    def __init__(self, sc):
        self.sparkContext = sc
        self._sql = None

    def sql(self):
        if self._sql is None:
            from pyspark.sql import SparkSession

            self._sql = SparkSession.builder.getOrCreate()  # on this context
        return self._sql

    def stop(self) -> None:
        stop(self)


def session(master: str | None = None, conf: list[str] | None = None, verbose: bool = False):
    """Spark, embedded (``local[*]``: needs only the ``spark`` extra and a JDK) or not.

    Unless ``verbose``, Spark is quiet: its log4j output goes through our configuration
    (errors only), and what the JVM itself prints on stderr (launcher warnings) is dropped.
    Without a ``master``: spark-submit's when it runs us, else :data:`DEFAULT_MASTER`.
    The driver JVM this process starts gets :mod:`jvmstart`'s options, a cluster's executor
    JVMs its :data:`~jvmstart.EXECUTOR_OPTIONS` (a ``--spark-conf spark.driver.extraJavaOptions=…``
    or ``spark.executor.extraJavaOptions=…`` replaces them) and Python workers :mod:`daemon`.
    A Spark Connect URL (``sc://HOST:PORT``) gives a :class:`~connect.Remote` session instead:
    no JVM here, the server's warm executors."""
    global _start
    if connect.is_connect(master):
        return connect.session(master, conf, verbose)
    if master is None and not under_spark_submit():
        master = DEFAULT_MASTER
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    settings = [
        ("spark.app.name", "rmqstore"),
        ("spark.ui.enabled", "false"),
        ("spark.ui.showConsoleProgress", "false"),
        ("spark.sql.sources.partitionOverwriteMode", "static"),
    ]
    start = jvmstart.options(master) if SparkContext._gateway is None else _start
    settings += _java_options(master, start, verbose)
    settings.append(("spark.python.daemon.module", "rmqstore_cli.pipeline.daemon"))
    settings += _user_conf(conf)
    if master is not None:
        settings.append(("spark.master", master))
    if not verbose:
        _quiet_gateway(settings)
    sc = SparkContext.getOrCreate(SparkConf().setAll(settings))
    _start = start
    sc.setLogLevel("INFO" if verbose else "ERROR")
    return Session(sc)


def _java_options(master: str | None, start, verbose: bool) -> list[tuple[str, str]]:
    """The driver's and (on a cluster) the executors' JVM options: :mod:`jvmstart`'s, and
    unless ``verbose`` our log4j configuration (errors only)."""
    driver, executor = list(start.options), [] if jvmstart.embedded(master) else list(jvmstart.EXECUTOR_OPTIONS)
    if not verbose:
        quiet = f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}"
        driver.append(quiet)
        executor.append(quiet)
    settings = []
    if executor:
        settings.append(("spark.executor.extraJavaOptions", " ".join(executor)))
    if driver:
        settings.append(("spark.driver.extraJavaOptions", " ".join(driver)))
    return settings


def _user_conf(conf: list[str] | None) -> list[tuple[str, str]]:
    """``--spark-conf KEY=VALUE`` settings, in order; ``spark.pyspark.python`` also as
    PYSPARK_PYTHON (spark-submit turns it into that; PySpark reads only that)."""
    settings = []
    for kv in conf or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            from rmqstore_cli.errors import UsageError

            raise UsageError(f"⟦spark_conf⟧ {kv!r} is not KEY=VALUE")
        settings.append((k, v))
        if k == "spark.pyspark.python":
            os.environ["PYSPARK_PYTHON"] = v
    return settings


def stop(s) -> None:
    """Stop Spark. PySpark's accumulator server stops on its own (it waits for its polling
    loop, ~0.5–1 s, for nothing); a JVM that dumps its class archive (first run) is let
    exit, so that the archive is published and a later session starts a new JVM."""
    global _start
    import threading

    from pyspark import SparkContext

    if isinstance(s, connect.Remote):
        s.stop()
        return
    sc = s.sparkContext
    server, sc._accumulatorServer = getattr(sc, "_accumulatorServer", None), None
    sc.stop()
    if server is not None:
        threading.Thread(target=server.shutdown, name="spark-accumulators", daemon=True).start()
    gateway = SparkContext._gateway
    if _start.dump is not None and gateway is not None:
        jvmstart.finish(_start, getattr(gateway, "proc", None))
        SparkContext._gateway = SparkContext._jvm = None
    _start = jvmstart.Start([])


def _quiet_gateway(settings: list[tuple[str, str]]) -> None:
    """Start the JVM as PySpark would, with its stderr on a pipe that a thread drains (the JVM
    launcher's own warnings, e.g. about incubator modules, cannot be configured away)."""
    import threading

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or under_spark_submit():
        return
    c = SparkConf(loadDefaults=False).setAll(settings)
    r, w = os.pipe()
    try:
        gateway = launch_gateway(c, popen_kwargs={"stderr": w})
    except Exception as e:  # the JVM died: its own words say why (bad master URL, no JDK, …)
        os.close(w)
        with os.fdopen(r, "rb") as fh:
            said = fh.read().decode("utf-8", "replace").strip()
        raise RuntimeError(f"{e}\n{said}") from None
    os.close(w)

    def drain():
        with os.fdopen(r, "rb", buffering=0) as fh:
            while fh.read(65536):
                pass

    threading.Thread(target=drain, name="spark-stderr", daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway)


def export(spark, tasks: list[FileTask], output: str, compression: str = "snappy", overwrite: bool = False) -> dict:
    """One Spark task per commit-log file. To a directory (local or mounted on every
    executor) each task writes its own Parquet files with pyarrow, as the local engine does
    (:func:`~rmqstore_cli.pipeline.local.write_parquet`); nothing but counts goes through
    Spark. To a Hadoop file system (hdfs:, s3a:, …) the tasks hand their RecordBatches to the
    JVM with ``mapInArrow`` and Spark writes the dataset to ``output`` exactly as typed (a
    ``Path`` would fold ``s3a://bucket/`` into ``s3a:/bucket/``, losing the bucket).
    ``compression``: the Parquet codec (:data:`~rmqstore_cli.pipeline.parquet_out.CODECS`),
    the same for both writers. Spark's writer replaces an existing dataset only with
    ``overwrite`` (the command checks a local directory itself)."""
    tasks = [replace(t, store=absolute(t.store)) for t in tasks]
    if not hadoop_uri(str(output)):
        return _export_pyarrow(spark, tasks, Path(os.path.abspath(local_path(str(output)))), compression)
    return _export_jvm(spark, tasks, str(output), compression, overwrite)


def absolute(spec: StoreSpec) -> StoreSpec:
    """``spec`` with its paths absolute: an executor's working directory is not the
    driver's (labels, which name the store in rows and findings, stay as given)."""
    conf = spec.broker_conf and os.path.abspath(spec.broker_conf)
    return replace(spec, path=os.path.abspath(spec.path), broker_conf=conf)


def _export_pyarrow(spark, tasks: list[FileTask], output: Path, compression: str = "snappy") -> dict:
    import shutil

    from rmqstore_cli.pipeline.local import write_parquet

    out = output
    if out.exists():  # the command checked it is empty or --overwrite was given
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tasks = list(tasks)
    target = str(out)

    def run(i):
        stops: list = []
        return write_parquet(tasks[i], target, i, stops, compression), stops

    done = mapper(spark)(run, range(len(tasks)))
    stops = [s for _, st in done for s in st]
    return {"rows": sum(n for n, _ in done), "unreadable": stops[:MAX_FINDINGS]}


def _export_jvm(spark, tasks: list[FileTask], output: str, compression: str = "snappy", overwrite: bool = True) -> dict:
    """The tasks' batches through ``mapInArrow`` into Spark's Parquet writer; each task's
    unreadable ranges ride in one extra row (``UNREADABLE``, every other column null) that a
    ``Dataset#observe`` gathers and a filter drops before the write: no accumulator, so the
    same job runs on a SparkContext and on Spark Connect (a failed attempt's metrics are not
    merged; a retried one's findings are still made unique)."""
    from pyspark.sql import Observation, functions as F, types as T

    sql = spark.sql()
    obs = Observation("rmqstore-unreadable")
    schema = spark_schema().add(UNREADABLE, T.BinaryType(), True)
    df = sql.range(0, len(tasks), 1, max(1, len(tasks))).mapInArrow(_ExportRows(list(tasks), schema), schema)
    rows = df.observe(obs, F.collect_list(UNREADABLE).alias("u")).filter(F.col(UNREADABLE).isNull()).drop(UNREADABLE)
    codec = {"lz4": "lz4_raw"}.get(compression, compression)  # pyarrow's lz4 is Parquet's LZ4_RAW
    # the time columns as pyarrow writes them, TIMESTAMP(MILLIS, UTC): not INT96 nor micros
    sql.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
    mode = "overwrite" if overwrite else "errorifexists"

    def write() -> None:
        rows.write.mode(mode).partitionBy(*PARTITION_COLUMNS).option("compression", codec).parquet(str(output))

    try:
        connect.guarded(sql, write) if isinstance(spark, connect.Remote) else write()
    except Exception as e:  # AnalysisException (classic and Connect) before any task ran
        if "PATH_ALREADY_EXISTS" not in str(e):
            raise
        from rmqstore_cli.errors import UsageError

        raise UsageError(f"⟦output⟧ {output} already exists", hint="pass ⟦overwrite⟧ to replace it") from None
    count = sql.read.parquet(str(output)).count()  # from Parquet footers, not by collecting rows
    seen, stops = set(), []
    for blob in obs.get["u"]:
        for s in pickle.loads(blob):
            key = (s["store"], s["file"], s["offset"])
            if key not in seen and len(stops) < MAX_FINDINGS:
                seen.add(key)
                stops.append(s)
    return {"rows": count, "unreadable": stops}


UNREADABLE = "_rmqstore_unreadable"  # export_jvm's side column: a task's unreadable ranges, pickled


class _ExportRows:
    """``mapInArrow`` body of :func:`_export_jvm`: a task's record batches (with a null
    :data:`UNREADABLE` column), then one row of its unreadable ranges if it met any."""

    def __init__(self, tasks: list[FileTask], schema):
        self.tasks, self.schema = tasks, schema

    def __call__(self, batches):
        import pyarrow as pa

        from rmqstore_cli.store.files import mapguard

        arrow = _spark_arrow()
        for b in batches:  # one id per partition: the task's number
            for i in b.column(0).to_pylist():
                stops: list = []
                try:
                    for got in export_batches(self.tasks[i], stops):
                        yield _as_spark(got, arrow)
                    mapguard.check_all()
                except Exception as e:  # a store file shrank under the task: told to the driver
                    said = tell_shrunk(e)
                    if said is None:
                        raise
                    raise RuntimeError(said) from None
                if stops:
                    cols = [pa.nulls(1, f.type) for f in arrow][:-1] + [pa.array([pickle.dumps(stops[:MAX_FINDINGS])])]
                    yield pa.RecordBatch.from_arrays(cols, schema=arrow)


def _spark_arrow():
    """The Arrow schema ``mapInArrow`` takes for :func:`spark_schema` plus :data:`UNREADABLE`:
    the export's, its timestamps in Spark's microseconds (built here: pyspark's
    ``to_arrow_schema`` wants a time zone argument from 4.0 on, and has none before)."""
    import pyarrow as pa

    from rmqstore_cli.pipeline.schema import arrow_schema

    us = pa.timestamp("us", tz="UTC")
    fields = [pa.field(f.name, us) if pa.types.is_timestamp(f.type) else f for f in arrow_schema()]
    return pa.schema([*fields, pa.field(UNREADABLE, pa.binary())])


def _as_spark(batch, arrow):
    """A batch of the export schema in ``arrow`` (Spark's Arrow form of :func:`spark_schema`
    plus the null :data:`UNREADABLE`): the ms timestamps cast to Spark's microseconds (exact),
    which the JVM's writer stores as milliseconds again (``outputTimestampType``)."""
    import pyarrow as pa

    cols = [c if c.type == f.type else c.cast(f.type) for c, f in zip(batch.columns, arrow, strict=False)]
    return pa.RecordBatch.from_arrays([*cols, pa.nulls(batch.num_rows, pa.binary())], schema=arrow)


def mapper(spark):
    """``map(fn, items)``: ``fn`` over ``items``, one task each, results in order; RDDs on a
    SparkContext (:func:`_run_map`), DataFrames on Spark Connect (:func:`connect.run_map`)."""
    if isinstance(spark, connect.Remote):
        return lambda fn, items: connect.run_map(spark.remote, fn, items)
    return lambda fn, items: _run_map(spark.sparkContext, fn, items)


def run_job(job, master: str | None, conf: list[str] | None, verbose: bool, *args):
    """Start a session, run ``job(session, *args)``, stop; a failed job is one clean error."""
    from rmqstore_cli.errors import RmqstoreError, StoreError

    try:
        s = session(master, conf, verbose)
    except Exception as e:  # no JDK, bad master URL, no Connect server there, …
        raise StoreError(
            f"cannot start Spark ({master or 'master from spark-submit'}): {_first_line(e)}",
            hint=_start_hint(master, e),
        ) from None
    remote = isinstance(s, connect.Remote)
    try:
        if not remote:
            _wait_for_executors(s.sparkContext)
        return job(s, *args)
    except RmqstoreError:
        raise
    except Exception as e:  # Py4JJavaError, PythonException from an executor
        shrunk = shrunk_told(str(e))
        if shrunk is not None:  # a store file truncated under a task: the same line as locally
            raise shrunk from None
        if verbose:
            raise
        raise StoreError(f"the Spark job failed: {_first_line(e)}", hint=_job_hint(s, remote, e)) from None
    finally:
        stop(s)


def _start_hint(master: str | None, e: Exception) -> str:
    """What to do when no session starts: a JDK and the extra, or the Connect server."""
    if not connect.is_connect(master):
        return "the spark engine needs a JDK (JAVA_HOME) and the 'spark' extra"
    if isinstance(e, (ConnectionError, ImportError)):
        return "start the Spark Connect server first (README: Spark Connect); the client needs the 'spark' extra"
    return "⟦spark_conf⟧ sets only session settings on a Spark Connect server (the rest where it starts)"


def _job_hint(s, remote: bool, e: Exception) -> str:
    """What to do when a job fails: the executors' view of the paths, or their Python."""
    hint = "rerun with ⟦verbose⟧ for Spark's log"
    if EXECUTOR_SAID in str(e) and (remote or not s.sparkContext.master.startswith("local")):
        return "every executor must see the stores and the output at the same paths as the driver; " + hint
    if remote and "rmqstore_cli" in str(e):
        return (
            f"the Connect server's executors must import rmqstore_cli (start it with spark.pyspark.python "
            f"a Python that has it, README); {hint}"
        )
    return hint


def _wait_for_executors(sc) -> None:
    """On a cluster, wait (at most :data:`EXECUTOR_TIMEOUT` seconds) for an executor to
    join: a standalone master with no free core keeps the application waiting for ever,
    and so would every job. ``SparkStatusTracker#getExecutorInfos`` lists the driver too."""
    import time

    from rmqstore_cli.errors import StoreError, UsageError

    if sc.master.startswith("local"):
        return
    raw = sc.getConf().get(EXECUTOR_TIMEOUT, str(EXECUTOR_TIMEOUT_DEFAULT))
    try:
        timeout = float(raw.removesuffix("s"))
    except ValueError:
        raise UsageError(f"⟦spark_conf⟧ {EXECUTOR_TIMEOUT}={raw!r} is not a number of seconds") from None
    tracker = sc._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while len(tracker.getExecutorInfos()) < 2:
        if time.monotonic() > deadline:
            raise StoreError(
                f"no Spark executor started on {sc.master} within {timeout:g} s: the cluster has no "
                "free cores or memory for this application",
                hint=f"free some, ask for less (spark.executor.cores, spark.executor.memory, "
                f"spark.cores.max) or wait longer (⟦spark_conf⟧ {EXECUTOR_TIMEOUT}=SECONDS)",
            )
        time.sleep(0.2)


def _run_map(sc, fn, items) -> list:
    """``fn`` over ``items`` as one Spark job, one task per item, results in item order.

    When the job fails, its other tasks are cancelled and waited for before the error goes up:
    Spark kills them asynchronously, and a task still writing into a staging directory after
    the driver has moved on (the next run's roll-back included) would leave files behind."""
    import uuid

    items = list(items)
    if not items:
        return []
    group = f"rmqstore-{uuid.uuid4().hex}"
    sc.setJobGroup(group, "rmqstore task map", interruptOnCancel=True)
    try:
        return sc.parallelize(items, len(items)).map(OnExecutor(fn)).collect()
    except BaseException:
        sc.cancelJobGroup(group)
        _wait_for_tasks(sc, group)
        raise


def _wait_for_tasks(sc, group: str, timeout: float = 120.0) -> None:
    """Until no task of ``group``'s jobs runs (``SparkStatusTracker``), or ``timeout`` seconds."""
    import time

    tracker = sc.statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stages = [
            st
            for j in tracker.getJobIdsForGroup(group)
            for info in [tracker.getJobInfo(j)]
            if info is not None
            for st in info.stageIds
        ]
        active = [tracker.getStageInfo(st) for st in stages]
        if not any(a is not None and a.numActiveTasks > 0 for a in active):
            # a killed task's Python worker may run on for spark.python.task.killTimeout (2 s
            # by default, PythonRunner's MonitorThread) before the executor kills it
            time.sleep(2.5)
            return
        time.sleep(0.2)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:  # an executor's error, told by OnExecutor
        if EXECUTOR_SAID in ln:
            return ln.split(EXECUTOR_SAID, 1)[1][:500]
    for ln in reversed(lines):  # the Python error an executor raised, if any
        if "Error:" in ln or "Exception:" in ln:
            return ln[:300]
    return (lines[0] if lines else type(e).__name__)[:300]


def rebuild_build(spark, config, dest: Path, opts, progress=None):
    """``rebuild.build_set`` on Spark: one task per commit-log file dispatches it, writes the
    units it can straight into the consume-queue files and spills the rest beside the
    output; the driver plans from per-file summaries; then one task per index file (and per
    queue to rebuild, per file with units left) reads the spills. Nothing per message goes
    through Spark (see rebuild_tasks.py ``rebuild_staged``); ``dest`` must be reachable from every
    executor, as for any output."""
    import time

    from rmqstore_cli.pipeline import rebuild_tasks as T

    config = replace(
        config,
        store_path_root_dir=os.path.abspath(config.store_path_root_dir),
        store_path_commit_log=config.store_path_commit_log
        and ",".join(os.path.abspath(str(d)) for d in config.commitlog_dirs),
    )
    dest = Path(os.path.abspath(dest))
    return T.rebuild_staged(config, dest, opts, mapper(spark), time.perf_counter())


def verify(
    spark, stores: list, crc: bool, deep: bool, max_findings: int | None, broker_version: str | None = None
) -> list[dict]:
    """verify on Spark: one task per index file, per commit-log file, then per queue and per
    index file (pipeline/verify_tasks.py); the driver reads back only per-file summaries and
    capped findings. Results are the local engine's, store by store."""
    from rmqstore_cli.pipeline.verify_tasks import verify_stores

    engine = connect.VerifyOnConnect(spark) if isinstance(spark, connect.Remote) else _VerifyOnSpark(spark)
    return verify_stores([absolute(s) for s in stores], crc, deep, max_findings, engine, broker_version)


class _VerifyOnSpark:
    """The steps of ``verify_stores`` as Spark jobs: the file results stay on the executors
    (persisted); what the queue and index tasks need of them comes from the driver when it
    is small everywhere (:data:`executor.SHIP_MARKS`), else goes by shuffle."""

    def __init__(self, spark):
        self.sc = spark.sparkContext
        self.whole = None  # the scans, when every one came back whole (results)

    def map(self, fn, items):
        return _run_map(self.sc, lambda x: fn(*x), items)

    def scan(self, fn, items, side_fn, side_items):
        """One job: the side tasks (index files' structure checks) first, so that they run
        beside the file scans rather than before them; results tagged 0 (side) or 1."""
        from pyspark import StorageLevel

        tagged = [(0, side_fn, x) for x in side_items] + [(1, fn, x) for x in items]
        rdd = self.sc.parallelize(tagged, max(1, len(tagged))).map(OnExecutor(lambda t: (t[0], t[1](*t[2]))))
        return rdd.persist(StorageLevel.MEMORY_AND_DISK)

    def results(self, rdd):
        """(side results, scan summaries) from one job, which computes and keeps the scans.
        A scan with few marks comes back whole; when all do, the queue and index tasks get
        theirs from the driver and no shuffle is needed (a damaged store's scans stay on
        the executors and go by shuffle)."""
        ship = executor.SHIP_MARKS  # the driver's value, taken into the closure the executors run
        got = rdd.map(lambda t: (t[0], t[1] if t[0] == 0 or t[1].marks() <= ship else t[1].light())).collect()
        scans = [r for tag, r in got if tag == 1]
        self.whole = scans if all(r.matched is not None for r in scans) else None
        return [r for tag, r in got if tag == 0], [r.light() for r in scans]

    def finish(self, rdd, keys, ctxs):
        from rmqstore_cli.pipeline.verify_tasks import finish_task, grouped, shuffle_items

        bc = self.sc.broadcast(ctxs)
        n = max(1, min(len(keys), 4 * self.sc.defaultParallelism))
        if self.whole is not None:
            groups = list(grouped(self.whole, keys).items())
            return (
                self.sc.parallelize(groups, min(n, max(1, len(groups))))
                .map(OnExecutor(lambda kv: finish_task(bc.value, kv[0], kv[1])))
                .collect()
            )
        seeds = self.sc.parallelize([(k, None) for k in keys], max(1, min(len(keys), self.sc.defaultParallelism)))
        scans = rdd.filter(lambda t: t[0] == 1).map(lambda t: t[1])
        return (
            scans.flatMap(shuffle_items)
            .union(seeds)
            .groupByKey(n)
            .map(OnExecutor(lambda kv: finish_task(bc.value, kv[0], [x for x in kv[1] if x is not None])))
            .collect()
        )

    def release(self, rdd):
        rdd.unpersist()
