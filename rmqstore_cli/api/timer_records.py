"""The records of the 5.x timer answers (``dump-timer``: slots, units, what comes next, the
summary): frozen dataclasses whose fields are the command's JSON Lines keys, ``as_dict()``
the exact object printed."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from rmqstore_cli.store.records.fields import fields_dict
from rmqstore_cli.store.timer.wheel import Slot

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TimerSlot(Slot):
    """One non-empty slot of the 5.x timer wheel (``TimerWheel``'s 32-byte slot): its due
    time, message count and timer-log chain; ``state`` pending (the checkpoint's read time
    has not reached it), passed (already dequeued: the broker never clears a slot) or
    misplaced (its time belongs to another slot index). The slot's fields are the wheel's
    (``store.timer.wheel.Slot``: index, time_ms, first_pos, last_pos, num, magic)."""

    state: str

    def as_dict(self) -> JSON:
        return fields_dict(self)


@dataclass(frozen=True, slots=True)
class TimerLogEntry:
    """The fields a timer-log unit (``TimerLog``'s 52-byte unit) and the
    ``rmq_sys_wheel_timer`` message it points at share in :class:`TimerUnit` and
    :class:`TimerNext`, in ``dump-timer``'s order."""

    pos: int
    prev_pos: int
    magic: int
    roll: bool
    delete: bool
    enqueue_time: int
    due_ms: int | None
    commitlog_offset: int
    size: int
    topic_hash: int
    message_status: str
    topic: str | None
    real_topic: str | None
    real_queue_id: int | None
    keys: list[str]
    uniq_key: str | None
    msg_id: str | None
    timer_out_ms: int | None

    def entry_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(TimerLogEntry)}


@dataclass(frozen=True, slots=True)
class TimerUnit(TimerLogEntry):
    """One timer-log unit with the message it points at: ``message_status`` ok, or what is
    wrong there (such a unit stalls the broker's dequeue); ``state`` pending or passed."""

    state: str

    def as_dict(self) -> JSON:
        return {**self.entry_dict(), "state": self.state}


@dataclass(frozen=True, slots=True)
class TimerNext(TimerLogEntry):
    """One step of what the broker does next with the timer (``TimerMessageStore#enqueue``
    from the queue, then ``#dequeue`` from the wheel): the unit's fields, ``source`` queue or
    wheel, ``action`` (deliver, enqueue, roll, deleted, delete-mark, stuck, skip), and
    ``queue_offset`` (from the queue) or ``slot_time_ms`` (from the wheel)."""

    source: str
    action: str
    queue_offset: int | None = None
    slot_time_ms: int | None = None

    def as_dict(self) -> JSON:
        d = self.entry_dict()
        d["source"] = self.source
        if self.queue_offset is not None:
            d["queue_offset"] = self.queue_offset
        if self.slot_time_ms is not None:
            d["slot_time_ms"] = self.slot_time_ms
        d["action"] = self.action
        return d


@dataclass(frozen=True, slots=True)
class TimerSummary:
    """The timer store at a glance (``dump-timer --summary``): the checkpoint, the wheel's
    geometry, the timer-log files, counts, where the log ends and what the broker's
    ``TimerMessageStore#recover`` makes of them."""

    checkpoint: JSON | None
    wheel: JSON
    timer_log_files: list[JSON]
    slots: int
    units: int
    log_end: JSON
    recovery: JSON

    def as_dict(self) -> JSON:
        return fields_dict(self)
