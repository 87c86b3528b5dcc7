"""The Spark engine on a real standalone cluster (issue #21): a master and two one-core
workers on 127.0.0.1 (tests/helpers/standalone.py), whose executors run with their own
HOME, working directory, environment and caches. verify, rebuild-index (to an output and in place)
and export with ``--spark-master spark://…`` give the local engine's results; so does
spark-submit with a shipped (venv-pack) environment; an executor killed mid-job, a worker
that cannot see the store and a cluster without free cores each end as they should.

Selected with ``-m cluster``; part of the default run. One cluster for the module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, SMALL, generate, run, standalone
from tests.helpers.pipeline import (
    DRIVER_ONLY,
    SIZES,
    copy_store,
    digest,
    driver,
    make_cluster_stores,
    parquet_rows,
    rebuild_and_export_equal,
    store_parts,
)

pytestmark = pytest.mark.cluster
pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no JDK: a Spark cluster needs one", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = standalone.Cluster(tmp_path_factory.mktemp("cluster")).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Generated multi-file stores: good, a second one, damaged (two broken records)."""
    return make_cluster_stores(tmp_path_factory.mktemp("cl-stores"))


def _on(cluster):
    return ("--engine", "spark", "--spark-master", cluster.url)


@pytest.fixture(scope="class")
def session(cluster):
    """One in-process driver on the cluster (for the tests that look inside the tasks); it
    holds every core while it lives, so its tests are one class, done before the others."""
    from rmqstore_cli.pipeline import spark as sp

    os.environ[DRIVER_ONLY] = "1"
    s = sp.session(cluster.url, ["spark.task.maxFailures=4"])
    yield s
    s.stop()
    os.environ.pop(DRIVER_ONLY, None)


class TestOneDriverInProcess:
    """Tests that look inside the tasks: a driver in this process, on the cluster."""

    def test_executors_have_their_own_cwd_home_env_and_caches(self, session, cluster):
        """What the executors' Python workers see is the workers', not the driver's."""

        def look(_):
            import os as o
            import tempfile

            return (
                o.getcwd(),
                o.environ.get("HOME"),
                o.environ.get("RMQSTORE_TEST_DRIVER_ONLY"),
                o.environ.get("XDG_CACHE_HOME"),
                tempfile.gettempdir(),
                o.getppid(),
            )

        seen = session.sparkContext.parallelize(range(8), 8).map(look).collect()
        roots = [str(d) for d in cluster.worker_dirs]
        for cwd, home, driver_only, cache, tmp, _ in seen:
            assert cwd != os.getcwd() and any(cwd.startswith(r) for r in roots), cwd
            assert home in roots and home != os.environ.get("HOME")
            assert driver_only is None
            assert cache.startswith(home) and tmp.startswith(home)
        assert len({s[1] for s in seen}) == 2  # both workers ran tasks

    def test_executor_killed_mid_job_is_retried_and_in_place_stays_exact(
        self, session, cluster, stores, tmp_path, monkeypatch
    ):
        """The first task of rebuild-index --in-place kills its executor's JVM: Spark retries the
        task on another executor and the store ends exactly as the local engine rebuilds it."""
        import datetime as dt

        from rmqstore_cli.pipeline import spark as sp
        from rmqstore_cli.store.layout.config import StoreConfig
        from rmqstore_cli.store.write.rebuild import RebuildOptions
        from rmqstore_cli.store.write.rebuild_output import rebuild_in_place
        from tests.helpers.rebuild_reference import build_set

        want = copy_store(stores, "good", tmp_path / "want")
        rebuild_in_place(
            StoreConfig.load(want, None, **SIZES), RebuildOptions(tz=dt.timezone.utc), True, build=build_set
        )
        store = copy_store(stores, "good", tmp_path / "store")
        marker = str(tmp_path / "killed")
        real = sp._run_map

        def killing(sc, fn, items):
            def once(x):
                import os as o
                import signal
                import time as t

                try:
                    fd = o.open(marker, o.O_CREAT | o.O_EXCL | o.O_WRONLY)
                except FileExistsError:
                    return fn(x)
                daemon = o.getppid()  # worker <- pyspark.daemon <- executor JVM
                with open(f"/proc/{daemon}/stat") as fh:
                    jvm = int(fh.read().rsplit(")", 1)[1].split()[1])
                o.write(fd, str(jvm).encode())
                o.close(fd)
                o.kill(jvm, signal.SIGKILL)
                t.sleep(60)

            return real(sc, once, items)

        before = set(cluster.executor_pids())
        monkeypatch.setattr(sp, "_run_map", killing)
        rep, _ = _in_place(session, store)
        killed = int(Path(marker).read_text())
        assert killed in before and killed not in cluster.executor_pids()
        assert store_parts(store) == store_parts(want)
        assert not [p for p in store.iterdir() if p.name.startswith(".rebuild")]

    def test_a_job_that_fails_leaves_the_store_in_place_untouched(self, session, stores, tmp_path, monkeypatch):
        """Every attempt of a task fails (after other tasks wrote their files): the command fails,
        the store's queues, index and checkpoint are as they were, and the next run rolls the
        staging back and rebuilds."""
        from rmqstore_cli.pipeline import spark as sp

        store = copy_store(stores, "good", tmp_path / "store")
        before = store_parts(store)
        real = sp._run_map

        def failing(sc, fn, items):
            last = items[-1]

            def boom(x):
                if x == last:
                    raise OSError(5, "Input/output error", "/simulated/disk")
                return fn(x)

            return real(sc, boom, items)

        monkeypatch.setattr(sp, "_run_map", failing)
        with pytest.raises(Exception) as got:
            _in_place(session, store)
        assert "Input/output error: /simulated/disk" in sp._first_line(got.value)
        assert "on host " in sp._first_line(got.value)
        assert store_parts(store) == before
        monkeypatch.setattr(sp, "_run_map", real)
        _in_place(session, store)
        want = copy_store(stores, "good", tmp_path / "want")
        import datetime as dt

        from rmqstore_cli.store.layout.config import StoreConfig
        from rmqstore_cli.store.write.rebuild import RebuildOptions
        from rmqstore_cli.store.write.rebuild_output import rebuild_in_place
        from tests.helpers.rebuild_reference import build_set

        rebuild_in_place(
            StoreConfig.load(want, None, **SIZES), RebuildOptions(tz=dt.timezone.utc), True, build=build_set
        )
        assert store_parts(store) == store_parts(want)
        assert not [p for p in store.iterdir() if p.name.startswith(".rebuild")]


def test_verify_rebuild_and_export_on_the_cluster_equal_the_local_engine(cluster, stores, tmp_path):
    """The CLI from another directory, stores named relative to it: the same findings and
    summaries, the same consume-queue and index files, the same Parquet rows."""
    args = ["verify", "--store", "damaged", "--store", "good", "--store", "other", *SMALL, "-f", "jsonl"]
    local = driver(args, stores)
    remote = driver([*args, *_on(cluster)], stores)
    assert local.returncode == remote.returncode == 1, remote.stderr[-2000:]
    lo = [json.loads(x) for x in local.stdout.splitlines()]
    re = [json.loads(x) for x in remote.stdout.splitlines()]

    def key(r: dict) -> str:
        return json.dumps(r, sort_keys=True)

    assert sorted(map(key, re[:-1])) == sorted(map(key, lo[:-1])) and len(lo) > 3
    assert re[-1] == lo[-1]

    rebuild_and_export_equal(_on(cluster), stores, tmp_path, "")


def test_rebuild_of_batch_queues_on_the_cluster_equals_the_local_engine(cluster, tmp_path):
    """A store with BatchCQ topics (``generate --bcq-topics``): batchconsumequeue/, written by
    the executors from the file tasks' units, is the local engine's byte for byte."""
    conf = tmp_path / "broker.conf"
    conf.write_text("mapperFileSizeBatchConsumeQueue=460\n")
    store = generate(
        tmp_path / "bcq", "--broker-conf", str(conf), "--broker-version", "5", "--bcq-topics", "2", messages=600, seed=3
    )
    args = ["rebuild-index", "--store", store, "--broker-conf", conf, *SMALL, "--tz", "UTC"]
    a = driver([*args, "--output", tmp_path / "l"], tmp_path)
    b = driver([*args, "--output", tmp_path / "s", *_on(cluster)], tmp_path)
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    for part in ("batchconsumequeue", "consumequeue", "index"):
        want = digest(tmp_path / "l" / part)
        assert want and digest(tmp_path / "s" / part) == want, part


def test_export_to_a_hadoop_uri_on_the_cluster_keeps_its_authority(cluster, stores, tmp_path):
    """``--output viewfs://rmqmount/ds``: a Hadoop file system URI (as hdfs://nn/…, s3a://bucket/…,
    whose authority names the cluster or bucket), written by Spark's own writer on the
    executors through Hadoop's ViewFileSystem (its mount table links /ds to a directory beside
    the stores). The local engine's rows; a second run without --overwrite is refused and
    leaves the dataset as it was; nothing named after the scheme appears in the working
    directory (a path would have folded ``viewfs://rmqmount`` into ``viewfs:/rmqmount``)."""

    target = stores.parent / "via-viewfs"
    mount = ("--spark-conf", f"spark.hadoop.fs.viewfs.mounttable.rmqmount.link./ds=file://{target}")
    args = ["export", "--store", "damaged", "--store", "other", "-f", "json", "--output", "viewfs://rmqmount/ds/x"]
    first = driver([*args, *_on(cluster), *mount], stores)
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["output"] == "viewfs://rmqmount/ds/x"
    local = driver(
        ["export", "--store", "damaged", "--store", "other", "-f", "json", "--output", tmp_path / "x"], stores
    )
    assert json.loads(first.stdout)["rows"] == json.loads(local.stdout)["rows"] > 1000
    assert parquet_rows(target / "x") == parquet_rows(tmp_path / "x")
    before = digest(target)
    again = driver([*args, *_on(cluster), *mount], stores)
    assert (
        again.returncode == 2
        and again.stderr.strip()
        == "rmqstore: error: --output viewfs://rmqmount/ds/x already exists; pass --overwrite to replace it"
    )
    assert digest(target) == before
    assert not [p for p in stores.iterdir() if p.name.startswith("viewfs")]


def _in_place(session, store: Path):
    import datetime as dt

    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from rmqstore_cli.store.write.rebuild_output import rebuild_in_place

    cfg = StoreConfig.load(store, None, **SIZES)
    return rebuild_in_place(
        cfg, RebuildOptions(tz=dt.timezone.utc), True, build=lambda c, d, o, p: sp.rebuild_build(session, c, d, o, p)
    )


def test_a_worker_that_cannot_see_the_store_is_one_error_naming_path_and_host(cluster, stores):
    """``/proc/self/cwd/good`` is the store for the driver (run from the stores' directory)
    and nothing for an executor: as a store not mounted on the workers."""
    import socket

    r = driver(["verify", "--store", "/proc/self/cwd/good", *SMALL, *_on(cluster)], stores)
    assert r.returncode == 3, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) <= 2 and lines[0].startswith("rmqstore: error: the Spark job failed: "), r.stderr
    assert f"on host {socket.gethostname()}" in lines[0] and "/proc/self/cwd/good" in lines[0]
    assert "no such file or directory" in lines[0].lower() and "Traceback" not in r.stderr
    assert "every executor must see the stores" in lines[0]


def test_no_free_cores_times_out_with_a_message(cluster, stores):
    """Executors of two cores never fit one-core workers: the application would wait for ever."""
    t0 = time.monotonic()
    r = driver(
        [
            "verify",
            "--store",
            "good",
            *SMALL,
            *_on(cluster),
            "--spark-conf",
            "spark.executor.cores=2",
            "--spark-conf",
            "spark.rmqstore.executorTimeout=4",
        ],
        stores,
        timeout=120,
    )
    assert r.returncode == 3, r.stderr[-3000:]
    assert f"no Spark executor started on {cluster.url} within 4 s" in r.stderr
    assert "spark.rmqstore.executorTimeout" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 60


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> Path:
    """docs/spark.md's environment: a venv with rmqstore and pyarrow (PySpark comes with Spark on
    the executors' PYTHONPATH), packed with venv-pack; the venv itself is deleted, so the
    executors can only use what the archive holds."""
    pytest.importorskip("venv_pack", reason="needs venv-pack (the test extra): pip install -e '.[test]'")
    root = tmp_path_factory.mktemp("packed")
    env = root / "env"
    subprocess.run([sys.executable, "-m", "venv", env], check=True)
    pip = subprocess.run([env / "bin" / "pip", "install", "-q", str(ROOT), "pyarrow"], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    out = root / "rmqstore-env.tar.gz"
    subprocess.run([Path(sys.executable).with_name("venv-pack"), "-p", env, "-o", out, "-q"], check=True)
    shutil.rmtree(env)
    return out


def _same_export(got: subprocess.CompletedProcess, store: Path, output: Path, tmp_path: Path) -> None:

    assert got.returncode == 0, got.stderr[-3000:]
    local = run("export", "--store", store, "--output", tmp_path / "local", "-f", "json")

    def drop(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in ("output", "seconds", "engine")}

    assert drop(json.loads(got.stdout)) == drop(json.loads(local.stdout)) and json.loads(got.stdout)["rows"] > 900
    assert parquet_rows(output) == parquet_rows(tmp_path / "local")


def test_spark_submit_with_a_packed_environment(cluster, stores, packed, tmp_path):
    """spark-submit --archives env.tar.gz#env with PYSPARK_PYTHON=./env/bin/python; the
    package's __main__.py is the application."""
    app = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, rmqstore_cli; print(os.path.join(os.path.dirname(rmqstore_cli.__file__), '__main__.py'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    submit = standalone.spark_home() / "bin" / "spark-submit"
    r = subprocess.run(
        [
            submit,
            "--master",
            cluster.url,
            "--deploy-mode",
            "client",
            "--archives",
            f"{packed}#env",
            app,
            "export",
            "--store",
            stores / "other",
            "--output",
            tmp_path / "submitted",
            "--engine",
            "spark",
            "-f",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, PYSPARK_PYTHON="./env/bin/python", PYSPARK_DRIVER_PYTHON=sys.executable),
    )
    _same_export(r, stores / "other", tmp_path / "submitted", tmp_path)


def test_the_cli_ships_the_packed_environment_with_spark_conf(cluster, stores, packed, tmp_path):
    """Without spark-submit: --spark-conf spark.archives=…#env --spark-conf
    spark.pyspark.python=./env/bin/python (PySpark itself reads only PYSPARK_PYTHON)."""
    r = driver(
        [
            "export",
            "--store",
            stores / "other",
            "--output",
            tmp_path / "shipped",
            "-f",
            "json",
            *_on(cluster),
            "--spark-conf",
            f"spark.archives={packed}#env",
            "--spark-conf",
            "spark.pyspark.python=./env/bin/python",
        ],
        stores,
    )
    _same_export(r, stores / "other", tmp_path / "shipped", tmp_path)
