"""export on Spark, both writers: pyarrow in each task (local or mounted directories) and
Spark's own Parquet writer through mapInArrow (Hadoop file systems) give the local
engine's rows and unreadable ranges."""

from __future__ import annotations

import pytest

from tests.helpers.pipeline import parquet_rows

pytestmark = pytest.mark.slow  # Spark local[2]

pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")


def test_both_spark_writers_give_the_local_rows(two_stores, spark, tmp_path):
    from rmqstore_cli.pipeline import local, spark as sp
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs

    tasks = file_tasks(store_specs([str(s) for s in two_stores], None, {}), body=True)
    want = local.export(tasks, tmp_path / "local")
    (tmp_path / "arrow").mkdir()
    (tmp_path / "arrow" / "stale.parquet").write_bytes(b"x")  # --overwrite: replaced, not mixed in
    got = {"arrow": sp.export(spark, tasks, tmp_path / "arrow"), "jvm": sp._export_jvm(spark, tasks, tmp_path / "jvm")}
    rows = parquet_rows(tmp_path / "local")
    assert len(rows) == want["rows"] > 0 and len(want["unreadable"]) == 1
    for name, r in got.items():
        assert r["rows"] == want["rows"], name
        assert r["unreadable"] == want["unreadable"], name
        assert parquet_rows(tmp_path / name) == rows, name
    assert not (tmp_path / "arrow" / "stale.parquet").exists()
    assert {p.name.split("-")[1] for p in (tmp_path / "arrow").rglob("*.parquet")} == {
        f"{i:05d}" for i in range(len(tasks))
    }  # one writer per commit-log file


@pytest.mark.parametrize(
    "text, uri",
    [
        ("hdfs:///rmq/out", True),
        ("hdfs://nn:8020/rmq", True),
        ("s3a://bucket/x", True),
        ("oss://b/x", True),
        ("viewfs://c/x", True),
        ("abfss://fs@acct.dfs.core.windows.net/x", True),
        ("hdfs:/rmq", True),
        ("file:///tmp/x", False),
        ("FILE:/tmp/x", False),
        ("/tmp/x", False),
        ("out", False),
        ("C:/x", False),
        ("backup:x", False),
        ("a/b:/c", False),
    ],
)
def test_hadoop_uri_is_a_scheme_of_two_or_more_characters_but_file(text, uri):
    from rmqstore_cli.pipeline.stores import hadoop_uri

    assert hadoop_uri(text) is uri


def test_local_path_of_a_file_uri_is_its_decoded_path():
    from pathlib import Path

    from rmqstore_cli.pipeline.stores import local_path

    assert local_path("file:///tmp/a%20b") == Path("/tmp/a b")
    assert local_path("file:/tmp/x") == Path("/tmp/x")
    assert local_path("rel/out") == Path("rel/out")


def test_a_hadoop_uri_needs_the_spark_engine_and_nothing_is_created(tmp_path, monkeypatch):
    """The local engine (pyarrow in this process) cannot reach a Hadoop file system: one
    line, exit 2, and no ``s3a:`` directory made where the command ran; rebuild-index (which
    writes a store's files) refuses any URI the same way."""
    from tests.helpers import SMALL, generate, run

    store = generate(tmp_path / "store", messages=20)
    monkeypatch.chdir(tmp_path)
    got = run("export", "--store", store, "--output", "s3a://bucket/rmq/out")
    assert got.returncode == 2 and got.stderr.decode().strip() == (
        "rmqstore: error: --output s3a://bucket/rmq/out is a Hadoop file system URI, which only --engine spark "
        "writes to; pass --engine spark, or a local (or mounted) directory"
    )
    got = run("rebuild-index", "--store", store, "--output", "hdfs://nn/rmq", *SMALL)
    assert (
        got.returncode == 2 and "is a URI; rebuild-index writes a store's files to a directory" in got.stderr.decode()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_both_spark_writers_apply_the_filters(two_stores, spark, tmp_path):
    """The tasks carry the filters and the offset range: each writer writes the local rows."""
    from rmqstore_cli.pipeline import local, spark as sp
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs
    from rmqstore_cli.store.records.filters import MessageFilter

    flt = MessageFilter(topic="OrderTopic", tag="TagA")  # TAGS: record by record
    tasks = file_tasks(store_specs([str(s) for s in two_stores], None, {}), True, flt, None, 150000)
    local.export(tasks, tmp_path / "local")
    sp.export(spark, tasks, tmp_path / "arrow")
    sp._export_jvm(spark, tasks, tmp_path / "jvm")
    rows = parquet_rows(tmp_path / "local")
    assert rows and all(r["topic"] == "OrderTopic" and r["tags"] == "TagA" for r in rows)
    assert all(r["physical_offset"] < 150000 for r in rows)
    for name in ("arrow", "jvm"):
        assert parquet_rows(tmp_path / name) == rows, name
