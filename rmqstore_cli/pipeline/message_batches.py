"""Messages as pyarrow RecordBatches for a script (``Store.batches``): the export dataset's
columns (:func:`~rmqstore_cli.pipeline.schema.arrow_schema`), a run of valid records a
block at a time (:func:`~rmqstore_cli.pipeline.arrow_block.block_batch`), any other record
row by row, as export converts them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rmqstore_cli.errors import UsageError

#: Rows per RecordBatch of records decoded one by one.
BATCH_ROWS = 8192


def require_pyarrow() -> None:
    """pyarrow is optional (the ``export`` extra): say which extra brings it, before any work."""
    import importlib

    try:
        importlib.import_module("pyarrow")
    except ImportError:
        raise UsageError(
            "RecordBatches need pyarrow, which the plain install does not include",
            hint="pip install 'rmqstore[export]'",
        ) from None


def row(rec: Any, file_name: str, label: str, body: bool) -> dict[str, Any]:
    """One record decoded alone, under the export columns."""
    from rmqstore_cli.pipeline.schema import topic_dir
    from rmqstore_cli.store.records.message_view import message_dict

    d = message_dict(rec, "none", True, file_name)
    d["body"] = rec.body if body else None
    d["store"] = label
    d["topic_dir"] = topic_dir(d.get("topic"), d.get("topic_base64"))
    return d


def rows_batch(rows: list[dict[str, Any]]) -> Any:
    """Rows (dicts under the export columns) as one RecordBatch."""
    import pyarrow as pa

    from rmqstore_cli.pipeline.schema import arrow_schema

    schema = arrow_schema()
    cols = []
    for f in schema:
        values = [r.get(f.name) for r in rows]
        if f.name == "properties":  # arrow builds maps from pairs
            values = [list(v.items()) for v in values]
        cols.append(pa.array(values, type=f.type))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def message_batches(
    picked: Iterable[tuple[Any, Any]], label: str, body: bool, file_of: Callable[[int], str]
) -> Iterator[Any]:
    """RecordBatches of ``picked``: (block, indices) for records taken from a block, (record,
    None) for a record decoded alone (``Store``'s walk), in that order."""
    from rmqstore_cli.pipeline.arrow_block import block_batch

    rows: list[dict[str, Any]] = []
    for item, take in picked:
        if take is None:
            rows.append(row(item, file_of(item.offset), label, body))
            if len(rows) >= BATCH_ROWS:
                yield rows_batch(rows)
                rows = []
            continue
        if rows:
            yield rows_batch(rows)
            rows = []
        yield block_batch(item if take.size == item.n else item.take(take), label, body)
    if rows:
        yield rows_batch(rows)
