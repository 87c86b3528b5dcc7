"""Delayed messages past their delivery time and still not delivered: ``dump-timer --overdue``,
``Store.overdue`` and verify's ``timer.overdue`` / ``delay.overdue``.

A message is *overdue at* ``now`` when its delivery time is earlier than ``now`` and the
broker's own progress marks say it has not been delivered:

- 5.x timer wheel (``TimerMessageStore``, 5.3.3). ``#dequeue`` reads only the slot of
  ``currReadTimeMs`` and moves on (``#moveReadTime``) when that slot is done; it returns
  without reading while ``currReadTimeMs >= currWriteTimeMs`` (now, formatted to the
  precision). ``#prepareTimerCheckPoint`` saves ``commitReadTimeMs`` as the checkpoint's
  ``lastReadTimeMs``. So a timer-log unit (not a delete mark, not a roll) whose slot time
  (``#formatTimeMs`` of enqueue time + delay) is at or after ``lastReadTimeMs`` and before
  ``now`` is ``behind``: due, not dequeued yet. A unit whose slot time is before
  ``lastReadTimeMs`` was dequeued; it is ``passed`` (overdue) only when the commit log holds
  no delivered copy (``REAL_TOPIC+UNIQ_KEY`` with ``TIMER_DEQUEUE_MS``, ``#convertMessage``)
  and no delete mark names it. An ``rmq_sys_wheel_timer`` message after the queue offset
  ``#recover`` restarts the enqueue from, whose ``TIMER_OUT_MS`` is before ``now``, is
  ``not-enqueued``.
- 4.x/5.x delay levels (``ScheduleMessageService``). Level L's messages are queue L - 1 of
  ``SCHEDULE_TOPIC_XXXX`` (``#delayLevel2QueueId``); ``config/delayOffset.json``
  (``#encode``: ``{"offsetTable":{L:offset}}``) holds the next offset to deliver
  (``DeliverDelayedMessageTimerTask#executeOnTimeUp`` saves the offset of the first unit
  not yet due); an absent level starts at 0 (``#start``) and one outside the queue is moved
  to its min or max (``#correctDelayOffset``). The consume-queue unit's tags code is the
  delivery time (``CommitLog#checkMessageAndReturnSize``: ``computeDeliverTimestamp(level,
  storeTimestamp)`` for the schedule topic). A unit at or after the start offset whose tags
  code is before ``now`` is ``pending``. A queue whose level is not in ``messageDelayLevel``
  gets no delivery task (``#start`` walks the level table): its messages are ``no-level``.

``late_ms`` is ``now - due_ms``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.formats.timer import MAGIC_DELETE, MAGIC_ROLL, PROPERTY_TIMER_DEL_UNIQKEY, TIMER_TOPIC

from rmqstore_cli.store.layout import offsets

REAL_TOPIC = "REAL_TOPIC"  # MessageConst.PROPERTY_REAL_TOPIC


@dataclass
class LevelState:
    """One delay level: its queue's bounds, the offset the broker delivers from, and what
    of the rest is overdue."""

    level: int
    delay_ms: int | None  # None: the level is not in messageDelayLevel
    queue_id: int
    min_offset: int
    max_offset: int
    saved_offset: int | None  # delayOffset.json's, None when the level is absent there
    start_offset: int  # where DeliverDelayedMessageTimerTask starts (#start, #correctDelayOffset)
    pending: int
    overdue: int = 0
    oldest_due_ms: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TimerState:
    """The timer's progress marks the overdue rows were judged against."""

    last_read_time_ms: int
    last_timer_queue_offset: int
    enqueue_from: int  # the queue offset #recover restarts the enqueue from
    behind: int = 0
    passed: int = 0
    not_enqueued: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class OverdueScan:
    """Everything overdue at ``now_ms``: the rows (oldest first), the delay levels, the
    timer's marks (None: no timer store) and notes on what was assumed."""

    now_ms: int
    rows: list[dict[str, Any]]
    levels: list[LevelState]
    timer: TimerState | None
    notes: list[str] = field(default_factory=list)
    delay_offsets_file: str | None = None


def scan(ms: Any, now_ms: int, deliveries: bool = True, levels_without_file: bool = True) -> OverdueScan:
    """The store's overdue timer and delay-level messages at ``now_ms``. ``deliveries``:
    look for passed timer units' delivered copies (a commit-log walk from the first one);
    ``levels_without_file`` False: no delay level is read when delayOffset.json (and its
    .bak) is absent."""
    out = OverdueScan(now_ms, [], [], None)
    delay_rows(ms, now_ms, out, levels_without_file)
    timer_rows(ms, now_ms, out, deliveries)
    out.rows.sort(key=lambda r: (r["due_ms"], r["source"]))
    return out


def topic_summary(rows: list[dict[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """Per (source, real topic): how many are overdue, the oldest due time and the most late."""
    groups: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in rows:
        key = (r["source"], r["real_topic"])
        g = groups.setdefault(
            key, {"source": key[0], "real_topic": key[1], "count": 0, "oldest_due_ms": r["due_ms"], "max_late_ms": 0}
        )
        g["count"] += 1
        g["oldest_due_ms"] = min(g["oldest_due_ms"], r["due_ms"])
        g["max_late_ms"] = now_ms - g["oldest_due_ms"]
    return sorted(groups.values(), key=lambda g: (-g["count"], g["source"], g["real_topic"] or ""))


# ------------------------------------------------------------------ delay levels
def load_delay_offsets(config_dir) -> offsets.OffsetTable:
    """``config/delayOffset.json`` as ``ScheduleMessageService#load`` reads it (``.bak`` fallback)."""
    return offsets.load_consumer_offsets(config_dir, offsets.DELAY_OFFSET_FILE, offsets.decode_delay_table, True)


def delay_rows(ms: Any, now_ms: int, out: OverdueScan, without_file: bool = True) -> None:
    """The levels of ``SCHEDULE_TOPIC_XXXX`` and their overdue messages into ``out`` (none
    when there is no delayOffset.json and not ``without_file``)."""
    loaded = load_delay_offsets(ms.config.root / "config")
    out.notes.extend(loaded.warnings)
    out.delay_offsets_file = loaded.path.name if loaded.path is not None else None
    if loaded.path is None and not without_file:
        return
    saved = loaded.table.get(f"{offsets.SCHEDULE_TOPIC}@{offsets.DELAY_GROUP}", {})
    table = ms.config.delay_level_table
    qids = schedule_queue_ids(ms)
    if qids and loaded.path is None:
        out.notes.append(
            f"no {offsets.DELAY_OFFSET_FILE}: every level is taken from offset 0, as ScheduleMessageService#start does"
        )
    for qid in qids:
        out.levels.append(_level(ms, qid, saved.get(qid), table, now_ms, out))


def _level(ms: Any, qid: int, s: int | None, table: dict, now_ms: int, out: OverdueScan) -> LevelState:
    """One delay level (queue ``qid``): from its saved offset ``s`` (``#correctDelayOffset``
    into the queue's bounds, 0 when none), its units due before ``now_ms`` as overdue rows."""
    cq = ms.consume_queue(offsets.SCHEDULE_TOPIC, qid)
    lo, hi = cq.min_offset(ms.commitlog.min_offset), cq.max_offset
    level = qid + 1
    start = 0 if s is None else min(max(s, lo), hi)
    st = LevelState(level, table.get(level), qid, lo, hi, s, start, max(hi - max(start, lo), 0))
    for unit in cq.units(max(start, lo), hi):
        if not unit.pre_blank and unit.tags_code < now_ms:
            out.rows.append(_overdue_row(ms, st, unit, now_ms))
    return st


def _overdue_row(ms: Any, st: LevelState, unit: Any, now_ms: int) -> dict:
    """An overdue unit of the level, counted on ``st``: its message's row, due time and lateness."""
    st.overdue += 1
    st.oldest_due_ms = unit.tags_code if st.oldest_due_ms is None else min(st.oldest_due_ms, unit.tags_code)
    row = message_row(ms.commitlog, unit.commitlog_offset, unit.size)
    row.update(
        source="delay",
        state="pending" if st.delay_ms is not None else "no-level",
        level=st.level,
        queue_offset=unit.cq_offset,
        timer_pos=None,
        due_ms=unit.tags_code,
        late_ms=now_ms - unit.tags_code,
    )
    return row


def schedule_queue_ids(ms: Any) -> list[int]:
    """The queue ids of SCHEDULE_TOPIC_XXXX the store holds (its directories, or RocksDB's rows)."""
    from rmqstore_cli.store.files.mapped_files import queue_dirs

    if ms.rocksdb_cq is not None:
        return sorted(q.queue_id for q in ms.rocksdb_cq.queues() if q.topic == offsets.SCHEDULE_TOPIC)
    return sorted({q for t, q, _ in queue_dirs(ms.config.consumequeue_dir) if t == offsets.SCHEDULE_TOPIC})


def message_row(cl: Any, offset: int, size: int) -> dict[str, Any]:
    """The commit-log message a unit points at, as an overdue row's message fields."""
    from rmqstore_cli.store.records.message import offset_msg_id

    c = cl.check_at(offset) if offset >= cl.min_offset else None
    m = c.message if c is not None else None
    return {
        "real_topic": m.properties.get(REAL_TOPIC) if m is not None else None,
        "commitlog_offset": offset,
        "size": size,
        "msg_id": offset_msg_id(m.store_address, m.store_port, m.physical_offset) if m is not None else None,
        "uniq_key": m.uniq_key if m is not None else None,
        "keys": m.keys if m is not None else [],
    }


# ------------------------------------------------------------------ the timer wheel
def timer_rows(ms: Any, now_ms: int, out: OverdueScan, deliveries: bool) -> None:
    """The timer store's overdue messages into ``out`` (nothing for a store without one)."""
    from rmqstore_cli.store.timer import TimerStore, schedule

    ts = TimerStore.open(ms.config)
    if ts is None:
        return
    try:
        view = schedule.load(ts)
        rec = schedule.recover(view, ms, now_ms)
        cp = view.checkpoint
        out.timer = TimerState(view.read_time_ms, cp.last_timer_queue_offset if cp else 0, rec.queue_offset)
        _wheel_rows(view, ms, now_ms, out, deliveries)
        _queue_rows(ms, rec, now_ms, out)
    finally:
        ts.close()


def _wheel_rows(view: Any, ms: Any, now_ms: int, out: OverdueScan, deliveries: bool) -> None:
    import numpy as np

    from rmqstore_cli.store.timer import schedule

    if not len(view.units):
        return
    st = view.store
    slot = view.due_ms() // st.precision_ms * st.precision_ms
    plain = (view.units["magic"] & (MAGIC_DELETE | MAGIC_ROLL)) == 0
    read = view.read_time_ms
    behind = plain & (slot >= read) & (slot < now_ms)
    passed = plain & (slot < read) & (slot < now_ms)
    copies, deleted = _delivered(view, ms.commitlog, np.flatnonzero(passed)) if deliveries else ({}, set())
    for i in np.flatnonzero(behind | (passed if deliveries else False)).tolist():
        u = schedule.unit_at(view, i)
        m, _status = schedule.message_of(u, ms.commitlog)
        row = message_row(ms.commitlog, u.offset_py, u.size_py)
        if behind[i]:
            state = "behind"
        else:  # passed: lost unless a copy or a delete mark says otherwise (an expired message: cannot tell)
            key = f"{row['real_topic']}+{row['uniq_key']}"
            if m is None or key in copies or key in deleted or PROPERTY_TIMER_DEL_UNIQKEY in m.properties:
                continue
            state = "passed"
        row.update(
            source="timer",
            state=state,
            level=None,
            queue_offset=None,
            timer_pos=u.pos,
            due_ms=u.due_ms,
            late_ms=now_ms - u.due_ms,
        )
        setattr(out.timer, state, getattr(out.timer, state) + 1)
        out.rows.append(row)


def _delivered(view: Any, cl: Any, passed: Any) -> tuple[dict[str, int], set[str]]:
    """The delivered copies and delete-mark keys from the first passed unit's message on."""
    from rmqstore_cli.store.checks.shared_walk import timer_marks

    copies: dict[str, int] = {}
    deleted: set[str] = set()
    if not len(passed):
        return copies, deleted
    start = int(view.units["offset_py"][passed].min())
    for m in cl.scan(max(start, cl.min_offset), every_file=True):
        if hasattr(m, "properties_bytes"):
            timer_marks(m, copies, deleted)
    return copies, deleted


def _queue_rows(ms: Any, rec: Any, now_ms: int, out: OverdueScan) -> None:
    """rmq_sys_wheel_timer messages the enqueue has not put on the wheel, already due."""
    from rmqstore_cli.formats.timer import PROPERTY_TIMER_OUT_MS

    cq = ms.consume_queue(TIMER_TOPIC, 0)
    if not cq.queue.files:
        return
    for unit in cq.units(rec.queue_offset, rec.queue_max):
        c = ms.commitlog.check_at(unit.commitlog_offset) if unit.commitlog_offset >= ms.commitlog.min_offset else None
        m = c.message if c is not None else None
        out_ms = _int(m.properties.get(PROPERTY_TIMER_OUT_MS)) if m is not None else None
        if out_ms is None or out_ms >= now_ms:
            continue
        row = message_row(ms.commitlog, unit.commitlog_offset, unit.size)
        row.update(
            source="timer",
            state="not-enqueued",
            level=None,
            queue_offset=unit.cq_offset,
            timer_pos=None,
            due_ms=out_ms,
            late_ms=now_ms - out_ms,
        )
        out.timer.not_enqueued += 1
        out.rows.append(row)


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def rows_of(s: OverdueScan, topic: str | None) -> Iterator[dict[str, Any]]:
    """The rows, of real topic ``topic`` when given."""
    return (r for r in s.rows if topic is None or r["real_topic"] == topic)
