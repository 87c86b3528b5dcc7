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
