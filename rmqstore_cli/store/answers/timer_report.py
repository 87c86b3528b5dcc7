"""What ``dump-timer`` shows of the 5.x timer store and ``Store.timer_*`` return: the wheel's
slots, the timer log's units, what the broker does next (``TimerMessageStore#recover``, then
``#enqueue`` and ``#dequeue``) and a summary; each as the JSON objects (store/timer/schedule.py
makes the rows)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from rmqstore_cli.errors import NotFound
from rmqstore_cli.store.timer import TimerStore, schedule

#: What the broker does when it starts without a ``timerwheel`` file.
NO_WHEEL = (
    "no timerwheel: the broker starts with an empty one and re-links slots from the "
    "timer log's last files (TimerMessageStore#recover)"
)


def open_timer(config: Any) -> TimerStore:
    """The store's timer files, or :class:`NotFound` for a store without them."""
    ts = TimerStore.open(config)
    if ts is None:
        raise NotFound(
            "the store has no timer files (timerwheel, timerlog/, config/timercheck): a 4.9 store, "
            "or timerWheelEnable=false",
            path=config.root,
        )
    return ts


def one_slot(ts: TimerStore, time_ms: int) -> list[dict[str, Any]]:
    """The slot of one due time read alone (``TimerWheel#getSlot``: no pass over the wheel)."""
    s = ts.wheel.get_slot(time_ms)
    if s is None:
        return []
    cp = ts.read_checkpoint()
    state = "pending" if s.time_ms >= (cp.last_read_time_ms if cp else 0) else "passed"
    return [
        {
            "index": s.index,
            "time_ms": s.time_ms,
            "first_pos": s.first_pos,
            "last_pos": s.last_pos,
            "num": s.num,
            "magic": s.magic,
            "state": state,
        }
    ]


def next_rows(
    view: schedule.TimerView, ms: Any, limit: int, now_ms: int, topic: str | None = None
) -> tuple[Iterator[dict[str, Any]], list[str]]:
    """(what the broker does next, up to ``limit`` messages, of real topic ``topic``; the
    recovery's notes): the wheel as ``#recover`` leaves it, then the enqueue and dequeue."""
    rec = schedule.recover(view, ms, now_ms)
    schedule.revise(view, rec.read_time_ms)
    rows = schedule.next_deliveries(view, ms, rec, limit, now_ms)
    return (r for r in rows if topic is None or r["real_topic"] == topic), rec.notes


def summary(ts: TimerStore, view: schedule.TimerView, ms: Any, now_ms: int) -> dict[str, Any]:
    """The checkpoint, the wheel's geometry, the timer-log files, the log's end and what the
    broker's recovery makes of them at ``now_ms``."""
    rec = schedule.recover(view, ms, now_ms)
    revised = schedule.revise(view, rec.read_time_ms)
    return {
        "checkpoint": view.checkpoint.as_dict() if view.checkpoint else None,
        "wheel": ts.geometry(),
        "timer_log_files": [{"name": f.name, "size": f.path.stat().st_size} for f in ts.log.files],
        "slots": len(view.slots),
        "units": len(view.units),
        "log_end": {"offset": view.end.offset, "reason": view.end.reason, "file": view.end.file},
        "recovery": {
            "process_offset": rec.process_offset,
            "revised_queue_offset": rec.revised_queue_offset,
            "queue_offset": rec.queue_offset,
            "queue_min": rec.queue_min,
            "queue_max": rec.queue_max,
            "read_time_ms": rec.read_time_ms,
            "revised_slots": len(revised),
            "notes": rec.notes,
        },
    }


def set_sizes(config: Any, timer_log_file_size: int | None, timer_precision_ms: int | None) -> None:
    """The timer's sizes given as options (``mappedFileSizeTimerLog``, ``timerPrecisionMs``),
    taken over broker.conf's and the files' own."""
    for attr, value in (
        ("mapped_file_size_timer_log", timer_log_file_size),
        ("timer_precision_ms", timer_precision_ms),
    ):
        if value is not None:
            setattr(config, attr, value)
            config.explicit.add(attr)


def dump_rows(
    view: schedule.TimerView,
    ms: Any,
    mode: str,
    window: tuple[int | None, int | None],
    topic: str | None,
    replay: int | None,
    now_ms: int,
) -> tuple[Iterator[dict[str, Any]], list[str]]:
    """(rows, notes) of ``dump-timer``'s ``mode``: ``slots`` (the wheel's non-empty slots due
    in ``window``), ``units`` (the timer log's, of real topic ``topic``) or ``next`` (what the
    broker does next, the replay cut after ``replay`` rows when given, then kept to ``topic``)."""
    b, e = window
    if mode == "next":
        return next_rows(view, ms, sys.maxsize if replay is None else replay, now_ms, topic)
    if mode == "units":
        return schedule.unit_records(view, ms.commitlog, b, e, topic), []
    return schedule.slot_records(view, b, e), []
