"""export on Spark, both writers: pyarrow in each task (local or mounted directories) and
Spark's own Parquet writer through mapInArrow (Hadoop file systems) give the local
engine's rows and unreadable ranges."""
from __future__ import annotations

import pytest

from test_pipeline import _rows, two_stores  # noqa: F401  (module fixture)

pytest.importorskip("pyarrow")


def test_both_spark_writers_give_the_local_rows(two_stores, spark, tmp_path):  # noqa: F811
    from rmqstore_cli.pipeline import local
    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.pipeline.stores import expand_stores, file_tasks

    tasks = file_tasks(expand_stores([str(s) for s in two_stores], None, {}), body=True)
    want = local.export(tasks, tmp_path / "local")
    (tmp_path / "arrow").mkdir()
    (tmp_path / "arrow" / "stale.parquet").write_bytes(b"x")  # --overwrite: replaced, not mixed in
    got = {"arrow": sp.export(spark, tasks, tmp_path / "arrow"), "jvm": sp._export_jvm(spark, tasks, tmp_path / "jvm")}
    rows = _rows(tmp_path / "local")
    assert len(rows) == want["rows"] > 0 and len(want["unreadable"]) == 1
    for name, r in got.items():
        assert r["rows"] == want["rows"], name
        assert r["unreadable"] == want["unreadable"], name
        assert _rows(tmp_path / name) == rows, name
    assert not (tmp_path / "arrow" / "stale.parquet").exists()
    assert {p.name.split("-")[1] for p in (tmp_path / "arrow").rglob("*.parquet")} == \
        {f"{i:05d}" for i in range(len(tasks))}  # one writer per commit-log file
