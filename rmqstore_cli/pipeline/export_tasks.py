"""export's per-file work: one commit-log file as rows or pyarrow RecordBatches; no Spark in here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmqstore_cli.pipeline.stores import FileTask


def export_rows(task: FileTask, body: bool, stops: list | None = None) -> Iterator[tuple]:
    """The rows of one commit-log file, as dump-commitlog --format jsonl records (body as
    raw bytes), in :data:`~rmqstore_cli.pipeline.schema.COLUMN_NAMES` order, one record at a
    time: the reference for :func:`export_batches`. Where the file could not be read is
    appended to ``stops``."""
    ms = task.store.open()
    cl = ms.commitlog
    try:
        for m in cl.scan(*bounds(task), every_file=True):
            if task.flt is None or task.flt.matches(m):
                yield _row(m, task, body)
        _add_stops(stops, cl, task)
    finally:
        ms.close()


def bounds(task: FileTask) -> tuple[int, int]:
    """[start, stop) of the task's walk: its file, within the export's offset range."""
    lo, hi = task.file_from_offset, task.file_from_offset + task.file_size
    return (lo if task.start is None else max(lo, task.start)), (hi if task.stop is None else min(hi, task.stop))


def _row(m, task: FileTask, body: bool) -> tuple:
    from rmqstore_cli.pipeline.schema import COLUMN_NAMES, topic_dir
    from rmqstore_cli.store.records.message_view import message_dict

    d = message_dict(m, "none", True, task.file_name)
    d["body"] = m.body if body else None
    d["store"] = task.store.partition
    d["topic_dir"] = topic_dir(d.get("topic"), d.get("topic_base64"))
    return tuple(d.get(c) for c in COLUMN_NAMES)


def _add_stops(stops: list | None, cl, task: FileTask) -> None:
    if stops is not None:
        stops.extend(
            {"store": task.store.label, "file": x.file, "offset": x.offset, "detail": x.reason} for x in cl.stops
        )


#: Rows per RecordBatch of :func:`export_batches` for records read one by one.
BATCH_ROWS = 8192
BATCH_BODY_BYTES = 64 << 20


def _walk_blocks(flt: Any, cl: Any) -> bool:
    """Whether to read whole blocks: as Store._walk, a filter that needs PROPERTIES (or a DLedger
    log's records) goes record by record."""
    return flt is None or (flt.columnar() and not cl.is_dledger)


def _body_bytes(rec: Any, body: bool) -> int:
    """The bytes a row's body adds to its batch: none when bodies are not exported."""
    return len(rec.body) if body else 0


def _batch_full(rows: list[tuple], size: int) -> bool:
    """Whether the row-by-row batch is due: enough rows, or enough body bytes to bound its memory."""
    return len(rows) >= BATCH_ROWS or size >= BATCH_BODY_BYTES


def _rows_batch(rows: list[tuple], schema: Any, props_at: int) -> Any:
    """Rows converted one at a time (what is not a run of valid records) as one RecordBatch."""
    import pyarrow as pa

    cols = list(zip(*rows, strict=True))
    cols[props_at] = [list(d.items()) for d in cols[props_at]]  # arrow builds maps from pairs
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )


def _selected(blk: Any, flt: Any) -> Any:
    """A block's records that pass the (columnar) filter: the block itself when all do, None when none."""
    if flt is None:
        return blk
    take = flt.select(blk)
    if not take.size:
        return None
    return blk if take.size == blk.n else blk.take(take)


def export_batches(task: FileTask, stops: list | None = None, by_partition: bool = False) -> Iterator:
    """One commit-log file as pyarrow RecordBatches with the schema of
    :func:`~rmqstore_cli.pipeline.schema.arrow_schema`: the rows of :func:`export_rows`.

    The one per-file function of export: the local engine hands the batches to pyarrow's
    dataset writer, the Spark engine to the JVM through ``mapInArrow`` (no per-row
    serialisation). Runs of valid records are converted a block at a time
    (:func:`~rmqstore_cli.pipeline.arrow_block.block_batch`); anything else row by row.
    Where the file could not be read is appended to ``stops``. ``by_partition``: each
    block's rows grouped by topic (:func:`by_topic`), as the Parquet writer takes them, and
    handed with their runs (:class:`~rmqstore_cli.pipeline.arrow_block.Parted`) where known."""

    from rmqstore_cli.pipeline.arrow_block import block_batch, block_parts
    from rmqstore_cli.pipeline.schema import COLUMN_NAMES, arrow_schema
    from rmqstore_cli.store.commitlog.columns import MessageBlock

    schema = arrow_schema()
    props_at = COLUMN_NAMES.index("properties")

    def batch(rows: list[tuple]) -> Any:
        return _rows_batch(rows, schema, props_at)

    ms = task.store.open()
    cl = ms.commitlog
    flt = task.flt
    blocks = _walk_blocks(flt, cl)
    rows: list[tuple] = []
    size = 0
    try:
        for item in cl.scan_blocks(*bounds(task), every_file=True, blocks=blocks):
            if isinstance(item, MessageBlock):
                item = _selected(item, flt)
                if item is None:
                    continue
                if rows:
                    yield batch(rows)
                    rows, size = [], 0
                if by_partition:
                    yield block_parts(by_topic(item), task.store.partition, task.body)
                else:
                    yield block_batch(item, task.store.partition, task.body)
                continue
            if flt is not None and not flt.matches(item):
                continue
            rows.append(_row(item, task, task.body))
            size += _body_bytes(item, task.body)
            if _batch_full(rows, size):
                yield batch(rows)
                rows, size = [], 0
        if rows:
            yield batch(rows)
        _add_stops(stops, cl, task)
    finally:
        ms.close()


def by_topic(blk):
    """``blk`` with its records grouped by topic, in log order within each topic: the rows of
    one partition (store, topic_dir) come out contiguous, so the writer cuts the batch into
    slices (:func:`~rmqstore_cli.pipeline.parquet_out.PartitionedWriter.write`) instead of
    reordering every built column."""
    from rmqstore_cli.store.files.arrays import stable_argsort

    tid = blk.topics[1]
    if not tid.size or (tid == tid[0]).all():
        return blk
    return blk.take(stable_argsort(tid))
