"""Store's answers about the 5.x timer and delayed messages (:class:`TimerQueries`, a mixin
Store inherits): the wheel's slots, the timer log's units, what the broker does next, the
checkpoint's summary, and the delayed messages overdue.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmqstore_cli.api.base import StoreView, TimeLike, at_ms, to_ms
from rmqstore_cli.api.incident_records import DelayLevel, OverdueMessage, OverdueReport, OverdueTopic
from rmqstore_cli.api.timer_records import TimerNext, TimerSlot, TimerSummary, TimerUnit
from rmqstore_cli.errors import UsageError
from rmqstore_cli.times import check_window


class TimerQueries(StoreView):
    """Store's timer answers (api/store.py binds each public one in Store's body)."""

    def _timer(self) -> tuple[Any, Any]:
        """(the timer store, its loaded view); NotFound for a store without timer files."""
        from rmqstore_cli.store.answers import timer_report
        from rmqstore_cli.store.timer import schedule

        ts = timer_report.open_timer(self.config)
        if not self.config.timer_wheel_path.exists() and timer_report.NO_WHEEL not in self.engine.warnings:
            self.engine.warnings.append(timer_report.NO_WHEEL)
        return ts, schedule.load(ts)

    def timer_slots(self, begin: TimeLike | None = None, end: TimeLike | None = None) -> list[TimerSlot]:
        """The timer wheel's non-empty slots by due time in ``[begin, end]``, as ``dump-timer``
        lists them (``begin == end``: the one slot ``TimerWheel#getSlot`` reads for that time).
        Raises :class:`~rmqstore_cli.errors.NotFound` for a store without timer files."""
        from rmqstore_cli.store.answers import timer_report
        from rmqstore_cli.store.timer import schedule

        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        if b is not None and b == e:
            return [TimerSlot(**d) for d in timer_report.one_slot(timer_report.open_timer(self.config), b)]
        _ts, view = self._timer()
        return [TimerSlot(**d) for d in schedule.slot_records(view, b, e)]

    def timer_units(
        self, begin: TimeLike | None = None, end: TimeLike | None = None, *, topic: str | None = None
    ) -> Iterator[TimerUnit]:
        """The timer log's units in log order (due time in ``[begin, end]``, real topic
        ``topic``) with the message each points at, as ``dump-timer --units`` lists them."""
        from rmqstore_cli.store.timer import schedule

        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        _ts, view = self._timer()
        for d in schedule.unit_records(view, self.engine.commitlog, b, e, topic):
            yield TimerUnit(**d)

    def timer_next(self, limit: int, *, now: TimeLike | None = None, topic: str | None = None) -> list[TimerNext]:
        """What the broker does next with the timer after it starts at ``now`` (default now),
        up to ``limit`` messages (of real topic ``topic``), as ``dump-timer --next``: its
        ``TimerMessageStore#recover``, then ``#enqueue`` and ``#dequeue``. The recovery's
        notes go to :attr:`warnings`."""
        from rmqstore_cli.store.answers import timer_report

        if limit < 1:
            raise UsageError(f"limit {limit}: at least one")
        at = at_ms(now, self.tz)
        _ts, view = self._timer()
        rows, notes = timer_report.next_rows(view, self.engine, limit, at, topic)
        out = [TimerNext(**d) for d in rows]
        self.engine.warnings.extend(notes)
        return out

    def timer_summary(self, *, now: TimeLike | None = None) -> TimerSummary:
        """The checkpoint, the wheel, the timer-log files and the broker's recovery at ``now``
        (default now), as ``dump-timer --summary``."""
        from rmqstore_cli.store.answers import timer_report

        at = at_ms(now, self.tz)
        ts, view = self._timer()
        return TimerSummary(**timer_report.summary(ts, view, self.engine, at))

    def overdue(self, *, now: TimeLike | None = None, topic: str | None = None) -> OverdueReport:
        """Delayed messages past their delivery time at ``now`` (default now) and not
        delivered, as ``dump-timer --overdue``: the 5.x timer wheel's (judged against
        config/timercheck) and the delay levels' (against config/delayOffset.json), of real
        topic ``topic`` when given; a store without either has none (store/answers/overdue.py
        defines each state). The notes also go to :attr:`warnings`."""
        from rmqstore_cli.store.answers import overdue

        at = at_ms(now, self.tz)
        s = overdue.scan(self.engine, at)
        rows = list(overdue.rows_of(s, topic))
        self.engine.warnings.extend(n for n in s.notes if n not in self.engine.warnings)
        return OverdueReport(
            s.now_ms,
            [OverdueMessage(**r) for r in rows],
            [DelayLevel(**lv.as_dict()) for lv in s.levels],
            [OverdueTopic(**g) for g in overdue.topic_summary(rows, s.now_ms)],
            s.timer.as_dict() if s.timer is not None else None,
            s.delay_offsets_file,
            list(s.notes),
        )
