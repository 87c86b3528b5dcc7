"""The Spark engine on a Spark Connect server (issue #21's fixed cost): one
``SparkConnectServer`` (``standalone.ConnectServer``) on the tests' standalone cluster for
the module, its Python workers the venv's. verify (clean and damaged stores, the shuffle
too), rebuild-index (--output and --in-place) and export (pyarrow in the tasks, and
Spark's writer through ``mapInArrow``) with ``--spark-master sc://…`` give the local
engine's results; an unreachable server or an unseen store path is one clear error.

Selected with ``-m cluster``; part of the default run."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from tests.helpers import SMALL, standalone
from tests.helpers.pipeline import (
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
pytest.importorskip("grpc", reason="needs the spark extra's Spark Connect client: pip install -e '.[spark]'")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no JDK: a Spark cluster needs one", allow_module_level=True)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Generated multi-file stores: good, a second one, damaged (two broken records)."""
    return make_cluster_stores(tmp_path_factory.mktemp("cl-stores"))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A one-core-per-worker cluster and a Connect server on it, both stopped even when a
    test fails."""
    c = standalone.Cluster(tmp_path_factory.mktemp("connect-cluster")).start()
    try:
        s = standalone.ConnectServer(c, sys.executable).start()
    except BaseException:
        c.stop()
        raise
    yield s
    s.stop()
    c.stop()


def _on(server):
    return ("--engine", "spark", "--spark-master", server.url)


def _sorted_lines(text: str) -> list[str]:
    return sorted(json.dumps(json.loads(x), sort_keys=True) for x in text.splitlines())


def test_verify_rebuild_and_export_on_connect_equal_the_local_engine(server, stores, tmp_path):
    """SparkConnectServer + the CLI from another directory: the local engine's findings,
    consume-queue and index files, Parquet rows."""
    args = ["verify", "--store", "damaged", "--store", "good", "--store", "other", *SMALL, "-f", "jsonl"]
    local = driver(args, stores)
    remote = driver([*args, *_on(server)], stores)
    assert local.returncode == remote.returncode == 1, remote.stderr[-2000:]
    assert _sorted_lines(remote.stdout) == _sorted_lines(local.stdout) and len(local.stdout.splitlines()) > 3

    rebuild_and_export_equal(_on(server), stores, tmp_path, "connect-")


def test_rebuild_in_place_on_connect(server, stores, tmp_path):
    """rebuild-index --in-place through the server: the local engine's files, no staging left."""
    want = copy_store(stores, "damaged", tmp_path / "want")
    store = copy_store(stores, "damaged", tmp_path / "store")
    a = driver(["rebuild-index", "--store", want, *SMALL, "--in-place", "--tz", "UTC", "-f", "json"], tmp_path)
    b = driver(
        ["rebuild-index", "--store", store, *SMALL, "--in-place", "--tz", "UTC", "-f", "json", *_on(server)], tmp_path
    )
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    assert store_parts(store) == store_parts(want)
    assert not [p for p in store.iterdir() if p.name.startswith(".rebuild")]


def test_rebuild_in_place_of_batch_queues_on_connect(server, tmp_path):
    """A store with BatchCQ topics rebuilt in place through the server (``connect.run_map``):
    batchconsumequeue/ and the rest are the local engine's."""
    from tests.helpers import generate

    conf = tmp_path / "broker.conf"
    conf.write_text("mapperFileSizeBatchConsumeQueue=460\n")
    want = generate(
        tmp_path / "want",
        "--broker-conf",
        str(conf),
        "--broker-version",
        "5",
        "--bcq-topics",
        "2",
        messages=600,
        seed=3,
    )
    store = shutil.copytree(want, tmp_path / "store")
    args = ["rebuild-index", "--broker-conf", conf, *SMALL, "--in-place", "--no-backup", "--tz", "UTC"]
    a = driver([*args, "--store", want], tmp_path)
    b = driver([*args, "--store", store, *_on(server)], tmp_path)
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    assert store_parts(store) == store_parts(want)
    assert digest(store / "batchconsumequeue") == digest(want / "batchconsumequeue")
    assert digest(want / "batchconsumequeue")


@pytest.fixture()
def remote(server):
    """An in-process Connect session (PySpark marks the process as Connect's while it
    lives: the marker is taken back after, for the classic sessions of other modules)."""
    from rmqstore_cli.pipeline import spark as sp

    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    s = sp.session(server.url)
    yield s
    sp.stop(s)
    if before is None:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def test_verify_shuffle_and_spark_writer_export_in_process(remote, stores, tmp_path, monkeypatch):
    """SparkConnect's ``repartition(n, key)`` shuffle (every scan too big to come back whole)
    and ``_export_jvm`` (Spark's Parquet writer; the unreadable ranges by ``observe``, not an
    accumulator) give what the local engine gives."""

    from rmqstore_cli.pipeline import connect, executor, local, spark as sp
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs
    from rmqstore_cli.pipeline.verify_tasks import verify_stores

    assert isinstance(remote, connect.Remote) and remote.sparkContext is None
    specs = store_specs([str(stores / "damaged"), str(stores / "good")], None, SIZES)
    want = verify_stores(specs, True, False, None)
    monkeypatch.setattr(executor, "SHIP_MARKS", -1)
    engine = connect.VerifyOnConnect(remote)
    got = verify_stores(specs, True, False, None, engine)
    assert engine.whole is None  # went by shuffle
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(want, sort_keys=True, default=str)

    tasks = file_tasks(store_specs([str(stores / "damaged")], None, {}), body=True)
    lo = local.export(tasks, tmp_path / "local")
    jvm = sp._export_jvm(remote, tasks, tmp_path / "jvm")
    assert jvm == {"rows": lo["rows"], "unreadable": lo["unreadable"]} and len(lo["unreadable"]) == 2
    assert parquet_rows(tmp_path / "jvm") == parquet_rows(tmp_path / "local")


def test_a_store_the_server_cannot_see_is_one_error_naming_path_and_host(server, stores):
    """``/proc/self/cwd/good`` is the store for the client only: the executors' error, once."""
    import socket

    r = driver(["verify", "--store", "/proc/self/cwd/good", *SMALL, *_on(server)], stores)
    assert r.returncode == 3, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) <= 2 and lines[0].startswith("rmqstore: error: the Spark job failed: "), r.stderr
    assert f"on host {socket.gethostname()}" in lines[0] and "/proc/self/cwd/good" in lines[0]
    assert "every executor must see the stores" in lines[0] and "Traceback" not in r.stderr


def test_an_unreachable_connect_url_is_one_line_naming_it(stores):
    """No server at the URL: one line naming it, exit 3 as other Spark start failures, at
    once (not after the Connect client's ~10 minutes of retries)."""
    import time

    url = f"sc://127.0.0.1:{standalone.free_port()}"
    t0 = time.monotonic()
    r = driver(["verify", "--store", "good", *SMALL, "--engine", "spark", "--spark-master", url], stores)
    assert r.returncode == 3 and time.monotonic() - t0 < 60
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rmqstore: error: cannot start Spark ({url}): "), r.stderr
    assert "no Spark Connect server answers at 127.0.0.1:" in lines[0] and "Spark Connect server" in lines[0]
