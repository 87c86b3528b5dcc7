"""export's Parquet writer (pipeline/parquet_out.py): the dataset pyarrow's write_dataset
wrote (hive partitions, same rows and schema), in row groups of whole partitions, with the
codec of --compression, without importing pandas."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import generate, run

pytestmark = pytest.mark.slow  # Spark local[2]

pq = pytest.importorskip("pyarrow.parquet", reason="needs the spark extra: pip install -e '.[spark]'")
pa_ds = pytest.importorskip("pyarrow.dataset", reason="needs the spark extra: pip install -e '.[spark]'")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("writer") / "s", messages=3000, seed=5)


def _table(path):
    return pa_ds.dataset(path, format="parquet", partitioning="hive").to_table().sort_by("physical_offset")


def _reference(tasks, out):
    """The dataset as pyarrow's own writer lays it out (what export wrote before)."""
    from rmqstore_cli.pipeline.export_tasks import export_batches
    from rmqstore_cli.pipeline.schema import PARTITION_COLUMNS, arrow_schema

    batches = [b for t in tasks for b in export_batches(t, [])]
    pa_ds.write_dataset(
        batches,
        out,
        schema=arrow_schema(),
        format="parquet",
        partitioning=PARTITION_COLUMNS,
        partitioning_flavor="hive",
    )


def _tasks(store):
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs

    return file_tasks(store_specs([str(store)], None, {}))


def test_same_dataset_as_write_dataset_one_row_group_per_partition(store, tmp_path):
    from rmqstore_cli.pipeline import local

    tasks = _tasks(store)
    got = local.export(tasks, tmp_path / "ours")
    _reference(tasks, tmp_path / "ref")
    ours, ref = _table(tmp_path / "ours"), _table(tmp_path / "ref")
    assert got["rows"] == ours.num_rows == ref.num_rows > 3000
    assert ours.schema == ref.schema and ours.equals(ref)
    assert sorted(p.parent.relative_to(tmp_path / "ours") for p in (tmp_path / "ours").rglob("*.parquet")) == sorted(
        p.parent.relative_to(tmp_path / "ref") for p in (tmp_path / "ref").rglob("*.parquet")
    )
    for f in (tmp_path / "ours").rglob("*.parquet"):
        pf = pq.ParquetFile(f)
        assert pf.metadata.num_row_groups == 1, f  # a few thousand rows: one group, not one per block slice
        offsets = pf.read(columns=["physical_offset"]).column(0).to_pylist()
        assert offsets == sorted(offsets)  # log order within the partition
        assert pf.metadata.row_group(0).column(0).compression == "SNAPPY"


@pytest.mark.parametrize("codec,name", [("zstd", "ZSTD"), ("none", "UNCOMPRESSED"), ("lz4", "LZ4")])
def test_compression_option(store, tmp_path, codec, name):
    r = run("export", "--store", store, "--output", tmp_path / codec, "--compression", codec, "--format", "json")
    assert r.returncode == 0, r.stderr
    files = list((tmp_path / codec).rglob("*.parquet"))
    assert files and all(pq.ParquetFile(f).metadata.row_group(0).column(0).compression == name for f in files)
    r = run("export", "--store", store, "--output", tmp_path / "snappy", "--format", "json")
    assert _table(tmp_path / codec).equals(_table(tmp_path / "snappy"))


def test_small_row_groups_and_a_full_buffer_keep_every_row(store, tmp_path, monkeypatch):
    """Row groups cut at ROW_GROUP_ROWS, partitions written early when BUFFER_BYTES is
    reached, batches whose partitions interleave (reordered with one take): same rows."""
    from rmqstore_cli.pipeline import parquet_out
    from rmqstore_cli.pipeline.export_tasks import export_batches

    tasks = _tasks(store)
    monkeypatch.setattr(parquet_out, "ROW_GROUP_ROWS", 100)
    monkeypatch.setattr(parquet_out, "BUFFER_BYTES", 50_000)
    batches = [b for t in tasks for b in export_batches(t, [])]
    shuffled = [b.take(list(range(0, b.num_rows, 2)) + list(range(1, b.num_rows, 2))) for b in batches]
    assert parquet_out.write_batches(shuffled, str(tmp_path / "small")) == sum(b.num_rows for b in batches)
    _reference(tasks, tmp_path / "ref")
    ours = pa_ds.dataset(tmp_path / "small", format="parquet", partitioning="hive").to_table()
    assert ours.sort_by("physical_offset").equals(_table(tmp_path / "ref"))
    groups = [pq.ParquetFile(f).metadata for f in (tmp_path / "small").rglob("*.parquet")]
    assert max(m.num_row_groups for m in groups) > 5 and all(
        m.row_group(i).num_rows <= 200 for m in groups for i in range(m.num_row_groups)
    )


def test_overwrite_empties_the_partitions_it_writes(store, tmp_path):
    out = tmp_path / "o"
    assert run("export", "--store", store, "--output", out).returncode == 0
    (stale,) = list(out.glob("store=*/topic_dir=*/part-0.parquet"))[:1]
    (stale.parent / "part-99.parquet").write_bytes(stale.read_bytes())
    r = run("export", "--store", store, "--output", out, "--overwrite", "--format", "json")
    assert r.returncode == 0 and not (stale.parent / "part-99.parquet").exists()
    assert _table(out).num_rows == json.loads(r.stdout)["rows"]


def test_export_imports_no_pandas(store, tmp_path):
    """pa.array, pa.scalar, to_numpy and pyarrow.dataset import pandas (~0.35 s CPU)."""
    code = (
        "import sys; sys.argv = ['rmqstore'] + sys.argv[1:]; from rmqstore_cli.app import main\n"
        "try:\n    main()\nfinally:\n    print('pandas' in sys.modules, file=sys.stderr)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "export", "--store", str(store), "--output", str(tmp_path / "x")],
        capture_output=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stderr.decode().strip().endswith("False"), r.stderr[-2000:]


def test_codec_choices_are_the_writers():
    from rmqstore_cli.commands.export import Codec

    from rmqstore_cli.pipeline.parquet_out import CODECS

    assert [c.value for c in Codec] == list(CODECS)


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_grouped_batches_hold_the_log_order_rows(version):
    """by_partition (each block's rows grouped by topic, for the writer) moves rows, never
    changes one: on the real brokers' stores, the rows sorted by offset are the log order's."""
    from rmqstore_cli.pipeline.export_tasks import export_batches
    from rmqstore_cli.pipeline.stores import StoreSpec, file_tasks
    from tests.helpers import fixture_dir

    plain, grouped = [], []
    for task in file_tasks([StoreSpec(str(fixture_dir(version) / "store"), "s1")], body=True):
        plain += [r for b in export_batches(task) for r in b.to_pylist()]
        grouped += [r for b in export_batches(task, by_partition=True) for r in getattr(b, "batch", b).to_pylist()]
    assert len(plain) > 10 and len({r["topic"] for r in plain}) > 1
    assert sorted(grouped, key=lambda r: r["physical_offset"]) == plain
    assert [r["topic"] for r in grouped] != [r["topic"] for r in plain]


def test_more_partitions_than_open_files(store, tmp_path, monkeypatch):
    """Past MAX_OPEN files the least recently written is closed and its partition goes on in
    a new file (a file descriptor per partition ran out at ~1 000 topics); with --overwrite's
    clearing, a partition's own earlier files stay."""
    from rmqstore_cli.pipeline import parquet_out
    from rmqstore_cli.pipeline.export_tasks import export_batches

    tasks = _tasks(store)
    monkeypatch.setattr(parquet_out, "MAX_OPEN", 2)
    monkeypatch.setattr(parquet_out, "ROW_GROUP_ROWS", 50)
    batches = [b for t in tasks for b in export_batches(t, [], by_partition=True)]
    n = parquet_out.write_batches(batches, str(tmp_path / "few"), clear=True)
    _reference(tasks, tmp_path / "ref")
    assert n == _table(tmp_path / "few").num_rows and _table(tmp_path / "few").equals(_table(tmp_path / "ref"))
    assert len(list((tmp_path / "few").rglob("*.parquet"))) > len(list((tmp_path / "ref").rglob("*.parquet")))


@pytest.mark.parametrize("codec,name", [("zstd", "ZSTD"), ("lz4", "LZ4")])
def test_spark_writers_take_the_codec(store, spark, tmp_path, codec, name):
    """--compression on Spark: the pyarrow tasks and Spark's own writer (lz4 as Spark's
    lz4_raw) write the codec asked for, and the local engine's rows."""
    from rmqstore_cli.pipeline import spark as sp

    tasks = _tasks(store)
    sp.export(spark, tasks, tmp_path / "arrow", codec)
    sp._export_jvm(spark, tasks, tmp_path / "jvm", codec)
    run("export", "--store", store, "--output", tmp_path / "local")
    for d in ("arrow", "jvm"):
        files = list((tmp_path / d).rglob("*.parquet"))
        assert files and {pq.ParquetFile(f).metadata.row_group(0).column(0).compression for f in files} == {name}, d
        got = _table(tmp_path / d)
        assert got.select(["physical_offset", "msg_id", "topic"]).equals(
            _table(tmp_path / "local").select(["physical_offset", "msg_id", "topic"])
        ), d
