"""export's block conversion (pipeline/arrow_block.py) against the per-record reference
(tasks.export_rows): the same rows, on real-broker, generated and tricky stores."""

from __future__ import annotations

import pytest

from rmqstore_cli.pipeline.export_tasks import export_batches, export_rows
from rmqstore_cli.pipeline.schema import COLUMN_NAMES, arrow_schema
from rmqstore_cli.pipeline.stores import StoreSpec, file_tasks
from tests.helpers import fixture_dir

pytestmark = pytest.mark.slow  # export blocks against the per-record reference, every store

pa = pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")


def _rows_of(batches) -> list[tuple]:
    """The batches' rows, timestamps as the epoch milliseconds they hold (the reference's)."""
    out = []
    for b in batches:
        cols = [_millis(b.column(i)).to_pylist() for i in range(b.num_columns)]
        out.extend(zip(*cols, strict=True))
    return out


def _batch(b):
    """The RecordBatch of an item of export_batches (a Parted one's own)."""
    return getattr(b, "batch", b)


def _runs(b):
    """The partition runs an item of export_batches hands with its batch (None: none)."""
    return (b.keys, b.cuts) if hasattr(b, "batch") else None


def _millis(col):
    return col.cast(pa.int64()) if pa.types.is_timestamp(col.type) else col


def _reference(task, body: bool) -> list[tuple]:
    props = COLUMN_NAMES.index("properties")
    rows = []
    for r in export_rows(task, body):
        r = list(r)
        r[props] = list(r[props].items())
        rows.append(tuple(r))
    return rows


@pytest.mark.parametrize("body", [False, True])
def test_block_batches_are_the_reference_rows(tricky_store, small_store, body):
    for root in (fixture_dir("4.9.7") / "store", fixture_dir("5.3.3") / "store", tricky_store, small_store):
        for task in file_tasks([StoreSpec(str(root), "s1")], body=body):
            stops_a: list = []
            batches = list(export_batches(task, stops_a))
            assert all(b.schema == arrow_schema() for b in batches)
            got = _rows_of(batches)
            want = _reference(task, body)
            assert len(got) == len(want) and got == want, (root, task.file_name)


def test_plain_records_skip_the_reference(tricky_store, monkeypatch):
    """Most records of the tricky store convert without message_dict."""
    import rmqstore_cli.pipeline.arrow_block as ab

    calls = []
    real = ab.message_dict
    monkeypatch.setattr(ab, "message_dict", lambda m, *a: calls.append(m) or real(m, *a))
    rows = _rows_of(b for t in file_tasks([StoreSpec(str(tricky_store), "s")]) for b in export_batches(t))
    assert len(rows) > 300 and 5 <= len(calls) < 60


@pytest.mark.parametrize("by_partition", [False, True])
def test_block_batches_same_with_the_reference_joins(tricky_store, small_store, monkeypatch, by_partition):
    """arrow_block.ranges joins byte ranges with the C loop (kernels.join_ranges) or, on the
    reference path (RMQSTORE_PURE), a numpy gather: the same batches, equal to the rows of
    export_rows either way."""
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    for root in (fixture_dir("5.3.3") / "store", tricky_store, small_store):
        for task in file_tasks([StoreSpec(str(root), "s1")]):
            got = {}
            for pure in (False, True):
                monkeypatch.setattr(FAST_PATHS, "pure", pure)
                got[pure] = list(export_batches(task, by_partition=by_partition))
            assert len(got[False]) == len(got[True])
            assert [_runs(a) for a in got[False]] == [_runs(b) for b in got[True]], (root, task.file_name)
            got = {k: [_batch(b) for b in v] for k, v in got.items()}
            assert all(a.equals(b) for a, b in zip(got[False], got[True], strict=True)), (root, task.file_name)
            if not by_partition:
                assert _rows_of(got[True]) == _reference(task, False)


def test_hosts_of_a_block_the_loop_leaves_are_the_reference_rows(small_store, monkeypatch):
    """A block holding an IPv4-mapped IPv6 address (host_texts returns -1: Python's text of
    it differs by version) gets its hosts record by record from the record layer: the
    reference rows still."""
    import rmqstore_cli.pipeline.arrow_block as ab

    real = ab._loop
    left: list = []
    monkeypatch.setattr(
        ab, "_loop", lambda name: (lambda *a: left.append(1) or -1) if name == "host_texts" else real(name)
    )
    for task in file_tasks([StoreSpec(str(small_store), "s1")]):
        assert _rows_of(export_batches(task)) == _reference(task, False)
    assert left


def test_writer_files_same_from_known_runs(tricky_store, small_store, tmp_path, monkeypatch):
    """The partition runs block_parts hands the Parquet writer (by topic id) cut the same row
    groups as the writer's own split of the bare batches: every file byte for byte. Topics
    that share a partition directory hand no runs (the writer's split merges them)."""
    from rmqstore_cli.pipeline import schema
    from rmqstore_cli.pipeline.parquet_out import write_batches

    for k, root in enumerate((fixture_dir("5.3.3") / "store", tricky_store, small_store)):
        got = [b for t in file_tasks([StoreSpec(str(root), "s1")]) for b in export_batches(t, by_partition=True)]
        assert any(_runs(b) for b in got) and all(r[1][-1] == b.num_rows for b in got if (r := _runs(b)))
        runs, split = tmp_path / f"runs{k}", tmp_path / f"split{k}"
        write_batches(got, str(runs))
        write_batches([_batch(b) for b in got], str(split))
        files = sorted(p.relative_to(runs) for p in runs.rglob("*.parquet"))
        assert files and files == sorted(p.relative_to(split) for p in split.rglob("*.parquet"))
        for f in files:
            assert (runs / f).read_bytes() == (split / f).read_bytes(), (root, f)
    monkeypatch.setattr(schema, "topic_dir", lambda t, b: "one")
    tasks = file_tasks([StoreSpec(str(small_store), "s1")])
    assert not any(_runs(b) for t in tasks for b in export_batches(t, by_partition=True))
