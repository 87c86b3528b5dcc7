"""What ``dump-cq`` reads: a consume queue's units from a queue offset on, each checked
against its message (``store/checks/unit_check.py``); the 46-byte units of a BatchCQ or
compaction queue (``store/queues/batch_queue.py``); one queue file read on its own; and each
queue's bounds for ``--summary``. Rows are the JSON objects; the table's cells are the
output layer's (rmqstore_cli/render_cq.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import NotFound, StoreError


@dataclass(frozen=True)
class UnitRead:
    """One 20-byte unit as read, and its check (None: not resolved)."""

    topic: str | None
    queue_id: int | None
    cq_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    file: str
    check: Any


def batch_queue_of(ms: Any, topic: str, queue_id: int, compaction: bool) -> tuple[Any, Any]:
    """The BatchCQ queue (batchconsumequeue/, when the queue is not in consumequeue/) or,
    with ``compaction``, the compaction store's queue, and the log its units point into;
    (None, None): an ordinary consume queue."""
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue
    from rmqstore_cli.store.queues.compaction import CompactionStore

    if compaction:
        cs = CompactionStore(ms.config)
        bq = cs.cq(topic, queue_id)
        if not bq.queue.files:
            raise NotFound(
                f"no compaction queue {topic}/{queue_id}",
                path=bq.dir,
                hint="rmqstore dump-cq --summary lists the compaction queues",
            )
        return bq, cs.log(topic, queue_id)
    d = ms.config.root / "batchconsumequeue" / topic / str(queue_id)
    if (ms.config.consumequeue_dir / topic / str(queue_id)).is_dir() or not d.is_dir():
        return None, None
    size = ms.config.mapper_file_size_batch_consume_queue or None
    return BatchConsumeQueue(d, topic, queue_id, size), ms.commitlog


def batch_rows(bq: Any, log: Any, delay: dict, window: tuple, resolve: bool) -> Iterator[dict]:
    """``BatchConsumeQueue`` units from the one holding queue offset ``from`` up to (not
    including) the first starting at ``to`` or later, at most ``limit`` (``window``: from,
    to, limit), each resolved against ``log`` (:func:`~rmqstore_cli.store.checks.unit_check.check_batch_unit`)
    with ``resolve``."""
    from_offset, to_offset, limit = window
    first = _first_batch_index(bq, from_offset)
    kind = "compaction" if bq.sparse else "BatchCQ"
    shown = 0
    for u in bq.units():
        if u.index < first:
            continue
        if to_offset is not None and u.msg_base_offset >= to_offset or limit is not None and shown >= limit:
            break
        shown += 1
        d = _batch_unit_row(bq, u, kind)
        if resolve:
            d.update(_batch_resolved(bq, u, log, delay))
        yield d


def _first_batch_index(bq: Any, from_offset: int | None) -> int:
    """The index of the unit holding queue offset ``from_offset`` (a compaction queue's: the next one
    there, its offsets having gaps); past the end when none does, 0 without a start."""
    if from_offset is None:
        return 0
    hit = bq.find(max(from_offset, bq.min_offset), or_next=bq.sparse)
    return hit.index if hit is not None else bq.unit_count


def _batch_unit_row(bq: Any, u: Any, kind: str) -> dict:
    """A batch (or compaction) queue unit's own fields, in the order dump-cq prints them."""
    return {
        "topic": bq.topic,
        "queue_id": bq.queue_id,
        "cq_type": kind,
        "unit_index": u.index,
        "msg_base_offset": u.msg_base_offset,
        "batch_size": u.batch_size,
        "commitlog_offset": u.commitlog_offset,
        "size": u.size,
        "tags_code": u.tags_code,
        "store_time_ms": u.store_time,
        "compacted_offset": u.compacted_offset,
        "file": u.file,
        "position": u.pos,
    }


def _batch_resolved(bq: Any, u: Any, log: Any, delay: dict) -> dict:
    """What the unit's record says of it (:func:`~rmqstore_cli.store.checks.unit_check.check_batch_unit`),
    with the record's keys, tags and uniq key (None where no valid record is there)."""
    from rmqstore_cli.store.checks.unit_check import check_batch_unit

    c = check_batch_unit(log, u, bq.topic, bq.queue_id, delay, bq.sparse)
    m = c.message
    return {
        "status": c.status,
        "agrees": c.agrees,
        "problems": c.problems,
        "keys": m.keys if m is not None else None,
        "tags": m.tags if m is not None else None,
        "uniq_key": m.uniq_key if m is not None else None,
    }


def batch_file_rows(path: Path, sparse: bool, ms: Any, window: tuple):
    """(the queue, its rows) of one file of batchconsumequeue/ or compaction/compactionCq/,
    resolved against the commit log (the compaction log) when ``ms`` is given; the caller
    closes the queue."""
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue

    bq = BatchConsumeQueue.of_file(path, sparse)
    log = None
    if ms is not None:
        from rmqstore_cli.store.queues.compaction import CompactionStore

        log = CompactionStore(ms.config).log(bq.topic, bq.queue_id) if sparse else ms.commitlog
    delay = ms.config.delay_level_table if ms is not None else {}
    return bq, batch_rows(bq, log, delay, window, log is not None)


def open_queue(ms: Any, topic: str, queue_id: int) -> Any:
    """The consume queue ``topic``/``queue_id``; :class:`NotFound` (naming the topic's
    queues) when it has no file. The caller first asks whether the topic exists at all."""
    cq = ms.consume_queue(topic, queue_id)
    if not cq.file_names():
        tdir = ms.config.consumequeue_dir / topic
        qids = sorted(int(p.name) for p in tdir.glob("*") if p.name.isdigit()) if tdir.is_dir() else []
        raise NotFound(
            f"no consume queue {topic}/{queue_id}",
            path=cq.dir,
            hint=f"queues of this topic: {', '.join(map(str, qids))}"
            if qids
            else "rmqstore dump-cq --summary lists the queues",
        )
    return cq


def topic_unknown(ms: Any, topic: str, queue_id: int) -> bool:
    """Whether the topic has neither this queue nor a consumequeue/ directory (then the
    store may not know it at all)."""
    return not ms.consume_queue(topic, queue_id).file_names() and not (ms.config.consumequeue_dir / topic).is_dir()


def queue_rows(
    cq: Any, ms: Any, topic: str | None, queue_id: int | None, window: tuple[int | None, int | None, int | None]
) -> Iterator[UnitRead]:
    """The units of ``cq`` from queue offset ``from`` (at least its first file's) up to
    ``to`` (exclusive; at most its max offset), at most ``limit`` of them (``window``: from,
    to, limit), each checked against its message when ``ms`` is given (the file name
    ``cq.name`` when it is one file read alone)."""
    from rmqstore_cli.store.checks.unit_check import check_unit

    from_offset, to_offset, limit = window
    base = cq.min_file_offset
    start = max(from_offset or 0, base)
    stop = cq.max_offset if to_offset is None else min(cq.max_offset, max(to_offset, start))
    stop = stop if limit is None else min(stop, start + limit)
    cfg = ms.config if ms is not None else None
    if cfg is not None:  # a property that parses the setting: read once, not once a unit
        delay, ext = cfg.delay_level_table, cfg.enable_consume_queue_ext
    for arr, first, fname in cq.unit_arrays(start, stop):
        for j, (off, size, tags) in enumerate(arr.tolist()):
            check = None
            if cfg is not None:
                check = check_unit(ms.commitlog, first + j, off, size, tags, topic, queue_id, delay, ext)
            yield UnitRead(topic, queue_id, first + j, off, size, tags, fname, check)


def no_queues(ms: Any, topic: str | None) -> NotFound:
    """--summary found no queue (of ``topic``)."""
    where = "no consume queue matched" if topic else "the store has no consume queues"
    return NotFound(where, path=ms.config.consumequeue_dir)


def batch_held(bq: Any) -> NotFound:
    """No unit of a BatchCQ or compaction queue in the range asked."""
    held = f"holds queue offsets {bq.min_offset}..{bq.max_offset - 1}" if bq.unit_count else "holds no unit"
    return NotFound("no unit in that range", hint=f"{bq.topic}/{bq.queue_id} {held}")


def queue_held(cq: Any, topic: str, queue_id: int) -> NotFound:
    """No unit in the range asked (the same answer for the exact end and anything past it)."""
    held = (
        f"holds units {cq.min_file_offset}..{cq.max_offset - 1}"
        if cq.max_offset > cq.min_file_offset
        else "holds no unit"
    )
    return NotFound("no unit in that range", hint=f"{topic}/{queue_id} {held}")


def file_kind(path: Path) -> str:
    """What a --file is, by where it lies: ``batchconsumequeue``, ``compactionCq`` (46-byte
    units) or anything else (20-byte consume-queue units). A FIFO is refused, not waited on."""
    from rmqstore_cli.store.files.safefs import open_read_only

    os.close(open_read_only(path))
    return path.parent.parent.parent.name


def open_file_queue(path: Path) -> Any:
    """One consume-queue file on its own (``ConsumeQueue#recover``'s end over this one file;
    its name gives the first queue offset); a size that is no whole number of units refused."""
    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

    from rmqstore_cli.store.files.safefs import open_read_only
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue

    fd = open_read_only(path)
    try:
        length = os.fstat(fd).st_size
    finally:
        os.close(fd)
    cq = ConsumeQueue.of_file(path, length)
    cq.queue.files[0].buffer()  # mapped first: a file the process cannot map is that error, whatever its size
    if length % CQ_STORE_UNIT_SIZE:
        cq.close()
        raise StoreError(
            f"file has {length} bytes, not a multiple of the {CQ_STORE_UNIT_SIZE}-byte unit",
            path=path,
            hint="is this a consume-queue file?",
        )
    return cq


def file_queue_id(path: Path, topic: str | None, queue_id: int | None) -> tuple[str | None, int | None]:
    """The topic and queue id of a --file, from its directories when not given."""
    if topic is None and path.parent.name.isdigit() and path.parent.parent.name:
        return path.parent.parent.name, int(path.parent.name) if queue_id is None else queue_id
    return topic, queue_id


def summary_rows(ms: Any, topic: str | None, queue_id: int | None) -> Iterator[dict]:
    """--summary: per consume queue (all, or those of ``topic``/``queue_id``) its min and max
    offset, the end of its last unit's record, its pre-blank units and files; then the
    BatchCQ and compaction queues' (:func:`batch_summaries`)."""
    import numpy as np

    from rmqstore_cli.store.queues.consume_queue import is_pre_blank

    clmin = ms.commitlog.min_offset
    for cq in ms.consume_queues():
        if topic is not None and cq.topic != topic or queue_id is not None and cq.queue_id != queue_id:
            continue
        end = cq.max_offset
        pre = 0
        max_phy = -1
        for arr, _, _ in cq.unit_arrays(cq.min_file_offset, end):
            pre += int(np.count_nonzero(is_pre_blank(arr["commitlog_offset"], arr["size"], arr["tags_code"])))
            last = arr[-1]
            max_phy = int(last["commitlog_offset"]) + int(last["size"])
        yield {
            "topic": cq.topic,
            "queue_id": cq.queue_id,
            "min_offset": cq.min_offset(clmin),
            "max_offset": end,
            "max_physic_offset": max_phy,
            "pre_blank_units": pre,
            "files": cq.file_names(),
        }
    yield from batch_summaries(ms, topic, queue_id)


def batch_summaries(ms: Any, topic: str | None, queue_id: int | None) -> Iterator[dict]:
    """--summary rows of the BatchCQ queues (batchconsumequeue/) and the compaction store's
    queues (``cq_type`` says which): bounds as ``#reviseMinOffsetInQueue`` and
    ``#reviseMaxOffsetInQueue`` give them, the end of the last unit's record."""
    from rmqstore_cli.store.queues.batch_queue import batch_queues
    from rmqstore_cli.store.queues.compaction import CompactionStore

    cfg = ms.config
    cs = CompactionStore(cfg)
    for kind, qs in (
        (
            "BatchCQ",
            batch_queues(cfg.root / "batchconsumequeue", False, cfg.mapper_file_size_batch_consume_queue or None),
        ),
        ("compaction", batch_queues(cs.cq_dir, True, cs.cq_file_size())),
    ):
        for bq in qs:
            if topic is not None and bq.topic != topic or queue_id is not None and bq.queue_id != queue_id:
                continue
            cols = bq.columns()
            end = int(cols[-1]["commitlog_offset"]) + int(cols[-1]["size"]) if cols.size else -1
            yield {
                "topic": bq.topic,
                "queue_id": bq.queue_id,
                "min_offset": bq.min_offset,
                "max_offset": bq.max_offset,
                "max_physic_offset": end,
                "pre_blank_units": 0,
                "files": [f.name for f in bq.queue.files],
                "cq_type": kind,
                "units": int(cols.size),
            }
            bq.close()
