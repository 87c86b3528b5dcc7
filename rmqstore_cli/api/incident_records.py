"""The records of the incident answers (``transactions``, ``pop``, ``diff``): frozen dataclasses
whose fields are the commands' JSON Lines keys, ``as_dict()`` the exact object printed."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Transaction:
    """One transactional message and what became of it (``transactions``' rows).

    ``kind`` is ``half`` (4.3+: a half record in RMQ_SYS_TRANS_HALF_TOPIC, ended by an op
    record) or ``prepared`` (a pre-4.3 PREPARED record in its real topic). ``state``:
    committed (a COMMIT record names it), rolled-back (an op record or a ROLLBACK record
    ends it without a commit), pending (nothing ends it yet: the broker checks it back), or
    discard (pending, but the broker's next check gives it up: ``discard_reason``
    check-max, its ``check_times`` reached ``transactionCheckMax``, or file-reserved-time,
    born more than ``fileReservedTime`` hours ago; ``TransactionalMessageServiceImpl#needDiscard``
    and ``#needSkip``). ``half_offset`` is the commit-log offset of its latest half (or
    PREPARED) record, ``half_records`` how many the checks re-put; ``end_offset`` the COMMIT
    or ROLLBACK record's, ``op_offset`` the op record's; ``age_ms`` (pending and discard)
    now - born time."""

    producer_group: str
    topic: str
    queue_id: int | None
    uniq_key: str | None
    state: str
    kind: str
    half_offset: int
    half_queue_offset: int | None
    half_records: int
    check_times: int | None
    born_timestamp: int
    store_timestamp: int
    age_ms: int | None
    end_offset: int | None
    op_offset: int | None
    discard_reason: str | None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class TransactionGroup:
    """One producer group's transactions on one real topic: how many are in each state, the
    born time of the oldest still open, the highest check count."""

    producer_group: str
    topic: str
    committed: int
    rolled_back: int
    pending: int
    discard: int
    oldest_pending_born_timestamp: int | None
    max_check_times: int

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class TransactionReport:
    """What ``Store.transactions`` found: the transactions kept (those matching the
    filters, up to the limit), every matching group, and the summary (``transactions
    --format jsonl``'s last line: counts by state, the rules applied, what named nothing)."""

    transactions: list[Transaction]
    groups: list[TransactionGroup]
    summary: JSON

    def as_dict(self) -> JSON:
        """The object ``transactions --format json`` prints."""
        return {
            "transactions": [t.as_dict() for t in self.transactions],
            "groups": [g.as_dict() for g in self.groups],
            "summary": self.summary,
        }


# ---------------------------------------------------------------- Store.pop: POP consumption reconciled


@dataclass(frozen=True, slots=True)
class PopMessage:
    """One message a POP consumer group popped, and what became of it (``pop``'s rows).

    ``state``: acked (its bit set in the checkpoint, by ``ack`` the checkpoint's own bitmap
    ``ck``, an ``ack`` record or a ``batch-ack``), revived (not acked, and a message with its
    UNIQ_KEY stored in ``retry_topic`` after the pop: ``PopReviveService#reviveRetry``),
    invisible (neither, ``revive_time`` = pop time + invisible time still after now: it is
    revived then) or overdue (neither, its revive time passed, nothing in the retry topic).
    The checkpoint lies at ``revive_queue_offset`` of ``revive_queue`` (None: still only in
    the timer, not yet delivered) at commit-log offset ``ck_offset``; ``revive_processed``
    says whether the revive group's committed offset covers it (None when unknown)."""

    group: str
    topic: str
    queue_id: int
    queue_offset: int
    state: str
    ack: str | None
    uniq_key: str | None
    pop_time: int
    invisible_time: int
    revive_time: int
    revive_topic: str
    revive_queue: int
    revive_queue_offset: int | None
    revive_processed: bool | None
    ck_offset: int
    reput_times: str | None
    broker_name: str | None
    retry_topic: str | None
    retry_offset: int | None
    retry_store_timestamp: int | None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class PopGroup:
    """One POP group's messages of one topic: how many popped, in each state, and the
    earliest revive time of those still invisible."""

    group: str
    topic: str
    popped: int
    acked: int
    revived: int
    invisible: int
    overdue: int
    next_revive_time: int | None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class ReviveQueue:
    """One revive queue's progress: the revive group's committed offset (``CID_RMQ_SYS_REVIVE_GROUP``,
    None: none committed) against the queue's max offset; ``behind`` records not yet read
    (``PopReviveService#getReviveBehindMessages``), the checkpoints past the committed offset
    and the earliest revive time among them, the checkpoints still only in the timer."""

    revive_topic: str
    queue_id: int
    committed_offset: int | None
    max_offset: int
    behind: int
    checkpoints: int
    unprocessed_checkpoints: int
    in_timer: int
    oldest_unprocessed_revive_time: int | None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class PopReport:
    """What ``Store.pop`` found: the popped messages kept (matching the filters, up to the
    limit), every matching group and topic, the revive queues, and the summary (``pop
    --format jsonl``'s last line)."""

    messages: list[PopMessage]
    groups: list[PopGroup]
    revive_queues: list[ReviveQueue]
    summary: JSON

    def as_dict(self) -> JSON:
        """The object ``pop --format json`` prints."""
        return {
            "messages": [m.as_dict() for m in self.messages],
            "groups": [g.as_dict() for g in self.groups],
            "revive_queues": [q.as_dict() for q in self.revive_queues],
            "summary": self.summary,
        }


# ---------------------------------------------------------------- diff_stores: two snapshots compared


@dataclass(frozen=True, slots=True)
class DiffRow:
    """What the rows of :func:`~rmqstore_cli.diff_stores` share: ``as_dict()`` is the JSON
    line ``rmqstore diff --format jsonl`` prints, its ``kind`` first."""

    def as_dict(self) -> JSON:
        kind = {"DiffFile": "file", "DiffDivergence": "divergence", "DiffQueue": "queue"}
        kind |= {"DiffUnit": "unit", "DiffMessage": "message", "DiffOffset": "offset", "DiffSummary": "summary"}
        return {"kind": kind[type(self).__name__], **{f.name: getattr(self, f.name) for f in fields(self)}}


@dataclass(frozen=True, slots=True)
class DiffFile(DiffRow):
    """A file added (only in the second store), removed (only in the first) or changed:
    ``path`` relative to the store root, both sizes (None where absent), and the first byte
    offset where the contents differ (the shorter one's length when one is the other's prefix)."""

    path: str
    status: str
    size_a: int | None
    size_b: int | None
    first_difference: int | None


@dataclass(frozen=True, slots=True)
class DiffDivergence(DiffRow):
    """Where the two commit logs first part: ``offset``, the global commit-log offset of the
    first record that differs (``first_byte``: the byte), the record there in each (topic,
    queue_id, queue_offset, msg_id, store_timestamp, total_size; None where none is), each
    log's end (``CommitLog#getMaxOffset``) and how many bytes each goes past ``offset``."""

    offset: int
    first_byte: int
    a: JSON | None
    b: JSON | None
    end_a: int
    end_b: int
    past_a: int
    past_b: int


@dataclass(frozen=True, slots=True)
class DiffQueue(DiffRow):
    """A consume queue that differs: its bounds in each store (None where it has no such
    queue), the queue offset ranges ``[from, to)`` only one holds and their counts, and how
    many units differ in place (same queue offset, other commit-log offset, size or tags
    code), the first of them at ``first_changed``."""

    topic: str
    queue_id: int
    min_offset_a: int | None
    max_offset_a: int | None
    min_offset_b: int | None
    max_offset_b: int | None
    only_a: list[list[int]]
    only_b: list[list[int]]
    messages_only_a: int
    messages_only_b: int
    units_changed: int
    first_changed: int | None


@dataclass(frozen=True, slots=True)
class DiffUnit(DiffRow):
    """A unit that differs in place: each store's ``commitlog_offset``, ``size`` and
    ``tags_code`` at ``queue_offset`` (None where that store has none there)."""

    topic: str
    queue_id: int
    queue_offset: int
    a: JSON | None
    b: JSON | None


@dataclass(frozen=True, slots=True)
class DiffMessage(DiffRow):
    """A message only one store holds (``side`` "a" or "b"): its queue offset, where its unit
    points, and the record there (msg_id, body_crc, store_timestamp; None where no valid
    record lies there)."""

    side: str
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    size: int
    msg_id: str | None
    body_crc: int | None
    store_timestamp: int | None


@dataclass(frozen=True, slots=True)
class DiffOffset(DiffRow):
    """A consumer offset (``config/consumerOffset.json``) that moved backwards from the first
    store to the second (``b`` None: the second has none)."""

    group: str
    topic: str
    queue_id: int
    a: int
    b: int | None


@dataclass(frozen=True, slots=True)
class DiffSummary(DiffRow):
    """The counts of a diff, its last row; ``same``: no row before it."""

    same: bool
    store_a: str
    store_b: str
    files_added: int
    files_removed: int
    files_changed: int
    files_same: int
    commitlog_divergence: int | None
    queues_differing: int
    messages_only_a: int
    messages_only_b: int
    units_changed: int
    offsets_backwards: int
    offsets_forward: int
    offsets_removed: int
    offsets_added: int


@dataclass(frozen=True, slots=True)
class OverdueMessage:
    """A delayed message past its delivery time and not delivered (``dump-timer --overdue``'s
    rows). ``source``: ``timer`` (the 5.x timer wheel) or ``delay`` (a delay level of
    SCHEDULE_TOPIC_XXXX). ``state``: ``behind`` (its slot is at or after timercheck's
    lastReadTimeMs: ``TimerMessageStore#dequeue`` has not reached it), ``passed`` (the read
    time passed its slot, yet the commit log holds no delivered copy and no delete mark),
    ``not-enqueued`` (an rmq_sys_wheel_timer message the enqueue has not put on the wheel),
    ``pending`` (at or after delayOffset.json's offset of its level) or ``no-level`` (its
    queue's level is not in messageDelayLevel: no task delivers it). ``late_ms`` is now -
    ``due_ms``; ``level`` and ``queue_offset`` (its SCHEDULE_TOPIC_XXXX or
    rmq_sys_wheel_timer queue offset), ``timer_pos`` (its timer-log unit) where they apply."""

    source: str
    state: str
    real_topic: str | None
    due_ms: int
    late_ms: int
    level: int | None
    queue_offset: int | None
    timer_pos: int | None
    commitlog_offset: int
    size: int
    msg_id: str | None
    uniq_key: str | None
    keys: list[str]

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class DelayLevel:
    """One delay level (queue ``level - 1`` of SCHEDULE_TOPIC_XXXX): the queue's bounds,
    delayOffset.json's offset (``saved_offset``, None when absent), the offset the broker
    delivers from (``start_offset``: 0 when absent, else moved into the queue,
    ``ScheduleMessageService#correctDelayOffset``), how many are left (``pending``) and how
    many of those are overdue, the oldest due time among them. ``delay_ms`` None: the level
    is not in messageDelayLevel."""

    level: int
    delay_ms: int | None
    queue_id: int
    min_offset: int
    max_offset: int
    saved_offset: int | None
    start_offset: int
    pending: int
    overdue: int
    oldest_due_ms: int | None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class OverdueTopic:
    """Per source and real topic: how many are overdue, the oldest due time, now - that."""

    source: str
    real_topic: str | None
    count: int
    oldest_due_ms: int
    max_late_ms: int

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class OverdueReport:
    """What ``Store.overdue`` found at ``now_ms``: the overdue messages (oldest first), the
    delay levels, the topics, the timer's marks (None: no timer store; else
    ``last_read_time_ms``, ``last_timer_queue_offset``, ``enqueue_from`` and the counts
    ``behind``, ``passed``, ``not_enqueued``), the delay offsets' file (None: absent) and
    the notes. ``as_dict()`` less ``messages`` is ``dump-timer --overdue --summary``'s JSON."""

    now_ms: int
    messages: list[OverdueMessage]
    delay_levels: list[DelayLevel]
    topics: list[OverdueTopic]
    timer: JSON | None
    delay_offsets_file: str | None
    notes: list[str]

    def as_dict(self) -> JSON:
        return {
            "now_ms": self.now_ms,
            "timer": self.timer,
            "delay_offsets_file": self.delay_offsets_file,
            "delay_levels": [lv.as_dict() for lv in self.delay_levels],
            "topics": [t.as_dict() for t in self.topics],
            "notes": list(self.notes),
            "messages": [m.as_dict() for m in self.messages],
        }
