"""export on the local engine and on Spark (local mode): the same rows, the dump's records."""

from __future__ import annotations

import base64
import json

import pytest

from tests.helpers import cli, run
from tests.helpers.pipeline import ours_only, parquet_rows

pytestmark = pytest.mark.slow  # Spark local[2]

pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")


def _dump(store):
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "base64")
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_local_export_rows_are_the_dump_records(two_stores, tmp_path):
    a, b = two_stores
    r = run("export", "--store", a, "--store", b, "--output", tmp_path / "out", "--body", "--format", "json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["stores"] == 2 and summary["unreadable_ranges"] == 1
    assert b"the rest of that file was skipped" in r.stderr
    rows = parquet_rows(tmp_path / "out")
    assert summary["rows"] == len(rows)
    for store in (a, b):
        mine = [x for x in rows if x["store"] == store.name]
        dumped = _dump(store)
        assert len(mine) == len(dumped)
        for x, d in zip(mine, dumped, strict=True):
            body = base64.b64decode(d.pop("body"))
            d.pop("body_encoding")
            assert x["body"] == body
            for k, v in d.items():
                assert x[k] == v, k


def test_existing_output_is_not_overwritten_without_consent(two_stores, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    r = run("export", "--store", two_stores[0], "--output", out)
    assert r.returncode == 2 and b"--overwrite" in r.stderr
    assert (out / "keep.txt").read_text() == "x"


def test_store_globs(two_stores, tmp_path):
    """A fleet pattern is --store-glob's (#31); --store is a path, so a pattern there names
    a directory that is not there (exit 3), never the stores it would match."""
    pattern = str(two_stores[0].parent / "*")
    r = run("export", "--store-glob", pattern, "--output", tmp_path / "o", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stores"] == 2
    assert run("export", "--store-glob", str(tmp_path / "nothing-*"), "--output", tmp_path / "p").returncode == 2
    assert run("export", "--store", pattern, "--output", tmp_path / "q").returncode == 3


def test_spark_engine_writes_the_same_rows_as_local(two_stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    a, b = two_stores
    local = run("export", "--store", a, "--store", b, "--output", tmp_path / "local", "--body", "-f", "json")
    spark = run(
        "export",
        "--store",
        a,
        "--store",
        b,
        "--output",
        tmp_path / "spark",
        "--body",
        "-f",
        "json",
        "--engine",
        "spark",
        "--spark-master",
        "local[2]",
    )
    assert spark.returncode == 0, spark.stderr[-3000:]
    assert json.loads(spark.stdout)["rows"] == json.loads(local.stdout)["rows"]
    assert json.loads(spark.stdout)["unreadable_ranges"] == 1
    assert parquet_rows(tmp_path / "spark") == parquet_rows(tmp_path / "local")
    ours_only(spark.stderr)


def test_a_bad_spark_master_is_one_line_with_the_reason(two_stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    r = run("verify", "--store", two_stores[0], "--engine", "spark", "--spark-master", "bogus://x")
    assert r.returncode == 3
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqstore: error: cannot start Spark") and "Master" in lines[0]


def test_bad_spark_conf_is_a_usage_error(two_stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    r = run(
        "export", "--store", two_stores[0], "--output", tmp_path / "x", "--engine", "spark", "--spark-conf", "novalue"
    )
    assert r.returncode in (2, 3) and b"KEY=VALUE" in r.stderr and b"Traceback" not in r.stderr


def test_rebuild_index_of_several_stores_each_to_its_own_directory(two_stores, tmp_path):
    from tests.helpers import SMALL

    a, b = two_stores
    out = tmp_path / "out"
    r = run("rebuild-index", "--store-glob", str(a.parent / "*"), *SMALL, "--output", out, "--tz", "UTC", "-f", "jsonl")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(x["store"], x["output"]) for x in lines] == [(str(a), str(out / "a")), (str(b), str(out / "b"))]
    alone = run("rebuild-index", "--store", a, *SMALL, "--output", tmp_path / "alone", "--tz", "UTC", "-f", "json")
    assert json.loads(alone.stdout)["index_keys"] == lines[0]["index_keys"] > 0
    for sub in ("index", "consumequeue"):
        got = sorted(p.relative_to(out / "a" / sub) for p in (out / "a" / sub).rglob("*") if p.is_file())
        want = sorted(
            p.relative_to(tmp_path / "alone" / sub) for p in (tmp_path / "alone" / sub).rglob("*") if p.is_file()
        )
        assert got == want and got
        assert all((out / "a" / sub / g).read_bytes() == (tmp_path / "alone" / sub / g).read_bytes() for g in got)
    from tests.helpers import tree_digest

    before = tree_digest(b)
    dry = run("rebuild-index", "--store", a, "--store", b, *SMALL, "--in-place", "--dry-run", "-f", "json")
    assert dry.returncode == 0, dry.stderr
    assert tree_digest(b) == before
    assert [s["dry_run"] for s in json.loads(dry.stdout)["stores"]] == [True, True]
    nested = run("rebuild-index", "--store", a, "--store", a / "commitlog", "--output", tmp_path / "n")
    assert nested.returncode == 2 and b"inside another" in nested.stderr
