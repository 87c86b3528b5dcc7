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


def test_host_texts_are_address_colon_port():
    """arrow_block.host_texts (a table of port texts, two byte ranges per record) against
    f"{address}:{port}" (DESIGN.md's ip:port), with ports a corrupt record may hold too."""
    import numpy as np

    from rmqstore_cli.pipeline.arrow_block import host_texts

    table = ["127.0.0.1", "[::1]", "10.0.0.200"]
    rows = np.array([0, 1, 2, 0, 1, 2, 0, 0], np.int64)
    port = np.array([0, 9, 10, 65535, 65536, -1, -2147483648, 10911], np.int64)
    got = host_texts(table, rows, port).to_pylist()
    assert got == [f"{table[r]}:{p}" for r, p in zip(rows.tolist(), port.tolist(), strict=True)]
    assert host_texts([], np.zeros(0, np.int64), np.zeros(0, np.int64)).to_pylist() == []
