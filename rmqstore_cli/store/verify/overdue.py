"""verify's stuck-delivery checks: timer and delay-level messages the broker should have
delivered while it was still writing, and did not (store/answers/overdue.py says when a message is
overdue).

verify has no clock of its own: it judges at the newest store time in the commit log less
:data:`GRACE_MS`, the time the broker was last known to run. The grace covers what a clean
stop leaves behind: ``ScheduleMessageService`` persists delayOffset.json every
``flushDelayOffsetInterval`` (10 s by default) and the timer's checkpoint trails its dequeue.
These are warnings, not damage: the files are sound, the delivery stalled (a level or a
timer slot whose message cannot be delivered, a dequeue stopped, an offset file restored
from an old copy). A delay level is judged only when delayOffset.json (or its .bak) exists:
without it the delay service never saved progress here, and every level would read as
undelivered. Timer units the read time passed without a delivered copy are
``timer.never-delivered`` (store/verify/timer.py), not repeated here.
"""

from __future__ import annotations

import os

from rmqstore_cli.store.checks.findings import CHECKS, check_table
from rmqstore_cli.store.layout.config import timer_files_present
from rmqstore_cli.store.layout.offsets import DELAY_OFFSET_FILE

#: How far behind the newest store time a delivery may trail before it counts as stuck.
GRACE_MS = 10_000

CHECKS.update(
    check_table(
        """
delay.overdue  warning  a delay level's messages were due while the broker still wrote (newest store time - 10 s) and
                        lie at or after delayOffset.json's offset: ScheduleMessageService did not deliver them
timer.overdue  warning  timer messages were due while the broker still wrote (newest store time - 10 s) and lie at or
                        after timercheck's lastReadTimeMs, or are not enqueued yet: the timer's dequeue stalled
"""
    )
)


class OverdueChecks:
    """Mixed into the Verifier: :meth:`check_overdue` after the timer checks, in both engines."""

    def check_overdue(self) -> None:
        """One ``delay.overdue`` per level and one ``timer.overdue`` per state with messages
        due before the newest store time less the grace."""
        if not self.messages or not self.max_store_ts or not self._may_be_overdue():
            return
        from rmqstore_cli.errors import StoreError
        from rmqstore_cli.store.answers import overdue
        from rmqstore_cli.store.message_store import MessageStore

        at = self.max_store_ts - GRACE_MS
        ms = MessageStore(self.config)
        try:
            found = overdue.scan(ms, at, deliveries=False, levels_without_file=False)
        except StoreError:
            return  # the timer's and config checks name what could not be read
        finally:
            ms.close()
        if found.delay_offsets_file is not None:
            self._delay_findings(found)
        self._timer_findings(found)

    def _may_be_overdue(self) -> bool:
        """Whether ``overdue.scan`` could find anything: a delayOffset.json (or its .bak; without
        both no level is judged) or a timer store. Neither: its modules are not loaded (start-up)."""
        delay = self.config.root / "config" / DELAY_OFFSET_FILE
        return os.path.lexists(delay) or os.path.lexists(f"{delay}.bak") or timer_files_present(self.config.root)

    def _delay_findings(self, found) -> None:
        name = self.rel(self.config.root / "config" / found.delay_offsets_file)
        for lv in found.levels:
            if not lv.overdue:
                continue
            saved = "absent there" if lv.saved_offset is None else str(lv.saved_offset)
            self._add(
                "delay.overdue",
                name,
                None,
                f"level {lv.level} (queue {lv.queue_id}): {lv.overdue} of {lv.pending} messages from offset "
                f"{lv.start_offset} (delayOffset.json: {saved}, queue max {lv.max_offset}) were due by "
                f"{found.now_ms}, the oldest at {lv.oldest_due_ms}, {found.now_ms - lv.oldest_due_ms} ms before",
            )

    def _timer_findings(self, found) -> None:
        t = found.timer
        if t is None:
            return
        name = self.rel(self.config.timer_checkpoint_path)
        for state, why in (
            ("behind", f"at or after timercheck's lastReadTimeMs {t.last_read_time_ms}: the dequeue stopped there"),
            ("not-enqueued", f"in rmq_sys_wheel_timer from queue offset {t.enqueue_from} on, not on the wheel"),
        ):
            rows = [r for r in found.rows if r["source"] == "timer" and r["state"] == state]
            if rows:
                self._add(
                    "timer.overdue",
                    name,
                    None,
                    f"{len(rows)} timer messages due by {found.now_ms} (the oldest at {rows[0]['due_ms']}) are {why}",
                )
