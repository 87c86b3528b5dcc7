"""A consume-queue unit checked against the record it points at (docs/format/consume-queue.md).

A unit agrees with its record when the record is valid and starts there, its size is the
unit's size, its topic/queueId/QUEUEOFFSET are the queue's and the unit's index, its
transaction type gets a unit at all (NOT or COMMIT), and the tagsCode is what dispatch
computes (docs/format/consume-queue.md#tags-code; ext addresses of ``enableConsumeQueueExt``
are not compared). Pre-blank units (``#fillPreBlank``) and units whose record has expired have
nothing to agree with.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqstore_cli.formats.commitlog import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE
from rmqstore_cli.formats.consume_queue import EXT_ADDR_MAX

from rmqstore_cli.store.commitlog import CommitLog, Status
from rmqstore_cli.store.queues.batch_queue import BatchUnit, dispatch_batch
from rmqstore_cli.store.queues.consume_queue import is_pre_blank
from rmqstore_cli.store.records.message import Message
from rmqstore_cli.store.write.dispatch import InvalidForDispatch, compute_tags_code
from rmqstore_cli.store.write.lmq import listed_offset

OK = "ok"
MISMATCH = "mismatch"
PRE_BLANK = "pre-blank"
EXPIRED = "expired"
MISSING = "missing"


@dataclass(slots=True)
class UnitCheck:
    """``status``: ok, mismatch, pre-blank, expired (before the commit log's first file)
    or missing (no valid record there). ``agrees`` is None when there is nothing to
    compare (pre-blank, expired)."""

    status: str
    agrees: bool | None
    message: Message | None = None
    problems: list[str] = field(default_factory=list)


def check_unit(
    commitlog: CommitLog,
    cq_offset: int,
    commitlog_offset: int,
    size: int,
    tags_code: int,
    topic: str | None,
    queue_id: int | None,
    delay_table: dict[int, int],
    ext_enabled: bool = False,
) -> UnitCheck:
    """A unit (its offset in the queue, the fields it holds) against the record it points at."""
    if is_pre_blank(commitlog_offset, size, tags_code):
        return UnitCheck(PRE_BLANK, None)
    if commitlog.files and commitlog_offset < commitlog.min_offset:
        return UnitCheck(EXPIRED, None, problems=[f"the commit log starts at {commitlog.min_offset}"])
    c = commitlog.check_at(commitlog_offset)
    if c is None:
        return UnitCheck(MISSING, False, problems=[f"no commit-log file holds offset {commitlog_offset}"])
    if c.message is None or c.status in (Status.INVALID, Status.BLANK):
        why = "a BLANK end-of-file record" if c.status is Status.BLANK else (c.reason or c.status.value)
        return UnitCheck(MISSING, False, c.message, [f"no valid record there: {why}"])
    m = c.message
    problems = _record_problems(c, size)
    problems += _queue_problems(m, cq_offset, topic, queue_id)
    problems += _dispatch_problems(m, tags_code, delay_table, ext_enabled)
    return UnitCheck(MISMATCH if problems else OK, not problems, m, problems)


def _record_problems(c, size: int) -> list[str]:
    """The record itself: its size check, its PHYSICALOFFSET field and the unit's size."""
    m = c.message
    problems: list[str] = []
    if c.status is Status.SIZE_MISMATCH:
        problems.append(c.reason)
    if m.physical_offset != m.offset:
        problems.append(f"record's PHYSICALOFFSET field is {m.physical_offset}")
    if size != m.total_size:
        problems.append(f"size {size}, record has {m.total_size}")
    return problems


def _queue_problems(m: Message, cq_offset: int, topic: str | None, queue_id: int | None) -> list[str]:
    """The record's topic, queue id and QUEUEOFFSET against the queue's and the unit's index;
    a record of another topic that lists this queue (``INNER_MULTI_DISPATCH``, store/write/lmq.py)
    is a multi-dispatch unit, compared with the offset it lists instead."""
    problems: list[str] = []
    listed = None
    if topic is not None and m.topic_bytes != topic.encode("utf-8", "surrogateescape"):
        listed = listed_offset(m.properties, topic, m.queue_id, queue_id)
        if listed is None:
            problems.append(f"record's topic is {m.topic!r}")
    if listed is not None:
        if listed != cq_offset:
            problems.append(f"the record lists {topic} at offset {listed}")
        return problems
    if queue_id is not None and m.queue_id != queue_id:
        problems.append(f"record's queue id is {m.queue_id}")
    if m.queue_offset != cq_offset:
        problems.append(f"record's queue offset is {m.queue_offset}")
    return problems


def _dispatch_problems(m: Message, tags_code: int, delay_table: dict[int, int], ext_enabled: bool) -> list[str]:
    """What ``CommitLog#checkMessageAndReturnSize`` + dispatch would do with the record: no unit
    for a PREPARED or ROLLBACK one, and the tagsCode it computes (not compared for an ext
    address of ``enableConsumeQueueExt``)."""
    problems: list[str] = []
    if m.transaction_type not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        problems.append("a PREPARED or ROLLBACK record gets no unit")
    if ext_enabled and tags_code <= EXT_ADDR_MAX:
        return problems
    try:
        want = compute_tags_code(m, delay_table)
    except InvalidForDispatch as e:
        problems.append(f"dispatch would reject the record: {e}")
    else:
        if want != tags_code:
            problems.append(f"tags code should be {want}")
    return problems


def check_batch_unit(
    log, u: BatchUnit, topic: str | None, queue_id: int | None, delay_table: dict[int, int], sparse: bool = False
):
    """A unit against the record it points at in ``log`` (the commit log; the compaction log
    for a ``sparse`` queue): :func:`check_unit` at the unit's
    msgBaseOffset, and the unit's store time, msgBaseOffset and batchSize are the record's
    (``BatchConsumeQueue#putBatchMessagePositionInfo`` of the dispatch request; the
    compaction log's units have batch size 1, ``CompactionAppendMessageCallback#doAppend``)."""
    c = check_unit(log, u.msg_base_offset, u.commitlog_offset, u.size, u.tags_code, topic, queue_id, delay_table)
    m = c.message
    if m is None or c.status not in ("ok", MISMATCH):
        return c
    c.problems = [p for p in c.problems if not p.startswith("record's queue offset")]
    base, batch = (m.queue_offset, 1) if sparse else dispatch_batch(m)
    if u.store_time != m.store_timestamp:
        c.problems.append(f"store time {u.store_time}, record's is {m.store_timestamp}")
    if u.msg_base_offset != base:
        c.problems.append(f"msgBaseOffset {u.msg_base_offset}, record's is {base}")
    if u.batch_size != batch:
        c.problems.append(f"batchSize {u.batch_size}, record's is {batch}")
    c.status, c.agrees = (MISMATCH, False) if c.problems else ("ok", True)
    return c
