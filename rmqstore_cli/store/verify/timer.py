"""verify's checks of the 5.x timer store (``timerwheel``, ``timerlog/``, ``config/timercheck``).

Each check follows what ``TimerMessageStore`` (5.3.3) does with the files: ``#recover``
walks the log and truncates it at the first bad unit, revises the queue offset from the
last unit's message and clamps it to the ``rmq_sys_wheel_timer`` queue; ``#dequeue`` reads
a slot's chain back from lastPos along prevPos and fetches each unit's message (a message
it cannot convert stalls the dequeue: apache/rocketmq#10668); a slot the log does not
back cannot be rebuilt from it (apache/rocketmq#9735). A store without timer files (4.9)
has no timer findings. Nothing here depends on the clock: "pending" means at or after
the checkpoint's read time.
"""

from __future__ import annotations

from rmqstore_cli.formats.timer import (
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MAGIC_ROLL,
    NO_POS,
    SLOT_SIZE,
    TIMER_TOPIC,
    UNIT_SIZE,
)

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.checks.findings import CHECKS, check_table
from rmqstore_cli.store.layout.config import timer_files_present

#: The timer checks, their severity and meaning (joined into ``findings.CHECKS``).
TIMER_CHECKS: dict[str, tuple[str, str]] = check_table(
    """
timer.unreadable        error    a timer file (timerwheel, timerlog/, config/timercheck) cannot be read
timer.wheel-size        error    timerwheel is not slotsTotal x 2 x 32 bytes: the broker does not start (TimerWheel)
timer.log-file-size     error    a timer-log file's length is not mappedFileSizeTimerLog
timer.log-truncate      error    a damaged timer-log unit: recovery ends the timer log there and drops what follows
timer.slot-revised      warning  a slot's lastPos is not the log's last unit of its time: the broker's recovery
                                 (TimerMessageStore#recoverAndRevise) re-links it from the log
timer.slot-past-log     error    a pending slot points at or past the timer log's end: its messages are not in the log
                                 (the wheel cannot be rebuilt from it, apache/rocketmq#9735)
timer.slot-chain        error    a pending slot's chain (lastPos back along prevPos) leaves the slot, loops, or does not
                                 end at firstPos
timer.slot-count        warning  a pending slot's num differs from the messages its chain holds
timer.unit-unreachable  error    a pending timer-log unit no slot chain reaches: its message is never delivered
timer.unit-target       error    a pending unit does not point at a rmq_sys_wheel_timer message of its size and
                                 real-topic hash: the dequeue retries it for ever (apache/rocketmq#10668)
timer.delivered-twice   warning  a pending unit's message was already delivered (a copy with TIMER_DEQUEUE_MS in its
                                 real topic): timercheck's read time is behind, the broker delivers it again
timer.never-delivered   error    the read time passed a unit's slot but its real topic has no delivered copy (and no
                                 delete mark names it): the message is lost
timer.checkpoint-ahead  error    timercheck's flushed timer-log position lies past the log's end: units the broker had
                                 written are gone
timer.checkpoint-queue  warning  timercheck's queue offset lies outside the rmq_sys_wheel_timer queue
                                 (TimerMessageStore#recover clamps it)
timer.redelivery        warning  recovery restarts the enqueue below timercheck's queue offset: messages the timer log
                                 already holds are enqueued again and delivered twice
timer.not-enqueued      info     rmq_sys_wheel_timer messages after timercheck's queue offset: the broker enqueues them
                                 at start
timer.metrics           info     timermetrics' count of a topic differs from its pending units (the broker's
                                 checkAndReviseMetrics revises small ones)
"""
)
CHECKS.update(TIMER_CHECKS)


class TimerChecks:
    """Mixed into the Verifier: :meth:`check_timer` runs every timer check."""

    def check_timer(self) -> None:
        """The timer store against itself, the commit log and the rmq_sys_wheel_timer queue."""
        if not timer_files_present(self.config.root):
            return  # no timer store (TimerStore.open's test): its modules are not loaded
        from rmqstore_cli.store.timer import TimerStore

        ts = TimerStore.open(self.config)
        if ts is None:
            return
        for p in ts.log.queue.not_regular:
            self.not_regular(p)
        if self.not_regular(self.config.timer_checkpoint_path):
            return
        try:
            view = self._timer_view(ts)
            if view is not None:
                self._count_timer_files(ts)
                self._timer_log_files(ts)
                self._timer_log_end(view)
                self._timer_slots(view)
                self._timer_units(view)
                self._timer_checkpoint(view)
        except StoreError as e:
            self._add("timer.unreadable", self.rel(e.path or self.config.root), e.offset, e.message)
        finally:
            ts.close()
            if getattr(self, "_timer_cl", None) is not None:
                self._timer_cl.close()
                self._timer_cl = None

    def _count_timer_files(self, ts) -> None:
        """The timer store's files in the summary: the wheel, the log's files, the checkpoint."""
        cfg = self.config
        self.files["timerwheel"] += int(cfg.timer_wheel_path.exists())
        self.files["timerlog"] += len(ts.log.files)
        self.files["timercheck"] += int(cfg.timer_checkpoint_path.exists())

    def _timer_log_end(self, view) -> None:
        end = view.end
        if end.reason != "end":
            name, at = self._timer_where(view.store, end.offset)
            self._add(
                "timer.log-truncate",
                name,
                at,
                f"{end.reason}: TimerMessageStore#recover ends the timer log at "
                f"{end.offset} and truncates the rest (their messages are re-enqueued only from the "
                f"{TIMER_TOPIC} queue)",
            )

    def _timer_view(self, ts):
        from rmqstore_cli.store.timer import schedule

        wheel = self.config.timer_wheel_path
        if self.not_regular(wheel):
            return None
        if wheel.exists():
            size = wheel.stat().st_size
            if size not in (0, ts.wheel.length):
                self._add(
                    "timer.wheel-size",
                    self.rel(wheel),
                    None,
                    f"{size} bytes, expected {ts.wheel.length} ({ts.wheel.slots_total} slots x 2 x {SLOT_SIZE})",
                )
                return None
        return schedule.load(ts)

    def _timer_log_files(self, ts) -> None:
        for f in ts.log.files:
            size = f.path.stat().st_size
            if size != ts.log.file_size:
                self._add(
                    "timer.log-file-size",
                    self.rel(f.path),
                    None,
                    f"{size} bytes, expected mappedFileSizeTimerLog={ts.log.file_size}",
                )

    def _timer_slots(self, view) -> None:
        """Each pending slot's chain, walked as ``#dequeue`` walks it."""
        import numpy as np

        from rmqstore_cli.store.timer import schedule

        st = view.store
        wheel = self.rel(st.config.timer_wheel_path)
        read = view.read_time_ms
        for index, t, old, new in schedule.revise(view, read):
            if t >= read:
                self._add(
                    "timer.slot-revised",
                    wheel,
                    index * SLOT_SIZE,
                    f"slot {index} (due {t}): lastPos {old}, "
                    f"the log's last unit of that time is at {new}; recovery sets it there",
                )
        times = view.slot_time_ms()
        home = view.slots["time"] % (st.wheel.slots_total * 2) == view.slots["index"]
        for i in np.flatnonzero(home & (times >= read)).tolist():
            s = view.slots[i]
            t, first, last, num, index = (
                int(times[i]),
                int(s["first_pos"]),
                int(s["last_pos"]),
                int(s["num"]),
                int(s["index"]),
            )
            at = index * SLOT_SIZE
            if last >= view.end.offset or first >= view.end.offset:
                self._add(
                    "timer.slot-past-log",
                    wheel,
                    at,
                    f"slot {index} (due {t}) has firstPos {first} and lastPos "
                    f"{last}, the timer log ends at {view.end.offset}: its messages are not in the log",
                )
                continue
            chain = schedule.chain_units(view, last)
            problem = _chain_problem(chain, last, first, t, st.precision_ms)
            if problem:
                self._add("timer.slot-chain", wheel, at, f"slot {index} (due {t}): {problem}")
                continue
            held = sum(-1 if u.magic & MAGIC_DELETE else 1 for u in chain)
            if held != num:
                self._add(
                    "timer.slot-count", wheel, at, f"slot {index} (due {t}) says num {num}, its chain holds {held}"
                )

    def _timer_units(self, view) -> None:
        """Pending units: reached by their slot's chain, and pointing at their message."""
        import numpy as np

        from rmqstore_cli.store.timer import schedule

        if not len(view.units):
            return
        st = view.store
        due = view.due_ms() // st.precision_ms * st.precision_ms
        pending = due >= view.read_time_ms
        reached = np.isin(view.positions, view.units["prev_pos"]) | np.isin(view.positions, view.slots["last_pos"])
        slots = {int(r[-1]): (int(r[0]), int(r[1]), int(r[2])) for r in view.slots.tolist()}
        cl = self._timer_commitlog()
        seen: dict[int, tuple] = {}  # unit index -> (message, status), for _timer_deliveries
        for i in np.flatnonzero(pending).tolist():
            u = schedule.unit_at(view, i)
            if not reached[i] or not _slot_holds(slots, u, int(due[i]) // st.precision_ms, st.wheel.slots_total):
                self._add(
                    "timer.unit-unreachable",
                    *self._timer_where(st, u.pos),
                    f"unit at {u.pos} (due {int(due[i])}, message at "
                    f"{u.offset_py}) is on no slot's chain: the broker never delivers it",
                )
            end = getattr(self, "cl_end", None)
            if end is not None and u.offset_py + u.size_py > end:
                self._add(
                    "timer.unit-target",
                    *self._timer_where(st, u.pos),
                    f"unit at {u.pos} points at {u.offset_py}+{u.size_py}, past "
                    f"the commit log's end {end} (truncated?): the dequeue of its slot stalls (#10668)",
                )
                continue
            seen[i] = schedule.message_of(u, cl)
            if seen[i][1] != "ok":
                self._add(
                    "timer.unit-target",
                    *self._timer_where(st, u.pos),
                    f"unit at {u.pos} (message at {u.offset_py}): {seen[i][1]}",
                )
        self._timer_metrics(view, pending)
        self._timer_deliveries(view, pending, cl, seen)

    def _timer_deliveries(self, view, pending, cl, seen: dict) -> None:
        """Each default-magic unit against the delivered copies in the commit log (the
        dequeue puts the message back under REAL_TOPIC with TIMER_DEQUEUE_MS and the same
        UNIQ_KEY): pending and already delivered = twice; passed and never delivered = lost."""
        from rmqstore_cli.store.checks.shared_walk import shared_facts

        found = self._readable_units(view, cl, seen)
        if not found:
            return
        start = min(u.offset_py for _, u, _ in found)
        facts = shared_facts(self, start)  # the walk shared with bcq.missing-unit
        copies, deleted = (facts.copies, facts.deleted) if facts.timer_reached else _delivered_copies(cl, start)
        for i, u, m in found:
            if not u.magic & MAGIC_DELETE:
                self._timer_delivery(view, u, m, bool(pending[i]), copies, deleted)

    def _readable_units(self, view, cl, seen: dict) -> list:
        """(index, unit, message) of the default-magic units and delete marks whose message
        reads ``ok`` (``schedule.message_of``; ``seen`` holds those read already)."""
        from rmqstore_cli.store.timer import schedule

        found = []
        for i in range(len(view.units)):
            u = schedule.unit_at(view, i)
            if u.magic != MAGIC_DEFAULT and not u.magic & MAGIC_DELETE:
                continue
            m, status = seen[i] if i in seen else schedule.message_of(u, cl)
            if status == "ok":
                found.append((i, u, m))
        return found

    def _timer_delivery(self, view, u, m, pending: bool, copies: dict, deleted) -> None:
        """One unit against its delivered copy (``topic+UNIQ_KEY``): a pending one already
        delivered is ``timer.delivered-twice``; a passed one with no copy, not deleted and no
        delete mark itself, is ``timer.never-delivered``."""
        from rmqstore_cli.formats.timer import PROPERTY_REAL_TOPIC, PROPERTY_TIMER_DEL_UNIQKEY

        props = m.properties
        key = f"{props.get(PROPERTY_REAL_TOPIC)}+{m.uniq_key}"
        copy = copies.get(key)
        if pending and copy is not None:
            self._add(
                "timer.delivered-twice",
                *self._timer_where(view.store, u.pos),
                f"unit at {u.pos} (due {u.due_ms}): {key} was delivered "
                f"at commit-log offset {copy}, yet its slot is at or after timercheck's read time",
            )
        elif not pending and copy is None and key not in deleted and PROPERTY_TIMER_DEL_UNIQKEY not in props:
            self._add(
                "timer.never-delivered",
                *self._timer_where(view.store, u.pos),
                f"unit at {u.pos} (due {u.due_ms}, message at "
                f"{u.offset_py}): the read time passed it, {key} has no delivered copy",
            )

    def _timer_commitlog(self):
        from rmqstore_cli.store.commitlog import CommitLog

        if getattr(self, "_timer_cl", None) is None:
            self._timer_cl = CommitLog(self.config)
        return self._timer_cl

    def _timer_where(self, st, pos: int) -> tuple[str, int]:
        f = st.log.queue.find(pos)
        return (self.rel(f.path), pos - f.file_from_offset) if f is not None else (self.rel(st.log.dir), pos)

    def _timer_metrics(self, view, pending) -> None:
        """``TimerMetrics``' count per topic against the pending units of that topic's hash."""
        import numpy as np

        from rmqstore_cli.store.javahash import java_hash
        from rmqstore_cli.store.layout.configfiles import BROKER_CONFIG_FILES, load_config
        from rmqstore_cli.store.timer.metrics import TimerMetrics

        cf = next(c for c in BROKER_CONFIG_FILES if c.name == "timermetrics")
        loaded = load_config(self.config.root / "config", cf)
        if loaded.source not in ("file", "bak"):
            return
        sign = np.where(view.units["magic"] & MAGIC_DELETE, -1, 1)
        sign = np.where(view.units["magic"] & MAGIC_ROLL, 0, sign)
        for topic, (count, _ts) in TimerMetrics.from_json(loaded.value).timing_count.items():
            held = int(sign[pending & (view.units["topic_hash"] == java_hash(topic))].sum())
            if held != count:
                self._add(
                    "timer.metrics",
                    self.rel(loaded.path),
                    None,
                    f"{topic}: count {count}, the timer log holds {held} pending",
                )

    def _timer_checkpoint(self, view) -> None:
        """timercheck against the log and the rmq_sys_wheel_timer queue (``#recover``)."""
        cp = view.checkpoint
        if cp is None:
            return
        name = self.rel(view.store.config.timer_checkpoint_path)
        if cp.last_timer_log_flush_pos > view.end.offset:
            lost = (cp.last_timer_log_flush_pos - view.end.offset) // UNIT_SIZE
            self._add(
                "timer.checkpoint-ahead",
                name,
                8,
                f"lastTimerLogFlushPos {cp.last_timer_log_flush_pos}, the "
                f"timer log ends at {view.end.offset}: about {lost} units are gone",
            )
        from rmqstore_cli.store.message_store import MessageStore
        from rmqstore_cli.store.timer import schedule

        ms = MessageStore(self.config)
        cq = ms.consume_queue(TIMER_TOPIC, 0)
        if not cq.queue.files:
            return
        qmax = cq.max_offset
        if cp.last_timer_queue_offset > qmax:
            self._add(
                "timer.checkpoint-queue",
                name,
                16,
                f"lastTimerQueueOffset {cp.last_timer_queue_offset} is past "
                f"the {TIMER_TOPIC} queue's max {qmax} (truncated queue, apache/rocketmq#7480): the broker "
                "lowers it to the max",
            )
        elif cp.last_timer_queue_offset < qmax:
            self._add(
                "timer.not-enqueued",
                name,
                16,
                f"{qmax - cp.last_timer_queue_offset} messages of {TIMER_TOPIC} "
                f"from offset {cp.last_timer_queue_offset} on are not in the timer log yet",
            )
        rec = schedule.recover(view, ms, cp.last_read_time_ms)
        again = min(cp.last_timer_queue_offset, qmax) - rec.queue_offset
        if again > 0:
            self._add(
                "timer.redelivery",
                name,
                16,
                f"recovery restarts the enqueue at queue offset {rec.queue_offset} "
                f"(the timer log's last unit's message + 1), timercheck says {cp.last_timer_queue_offset}: "
                f"{again} messages are enqueued again; those the log holds or already delivered are "
                "delivered twice",
            )


def _delivered_copies(cl, start: int) -> tuple[dict[str, int], set[str]]:
    """From ``start`` (a timer message) on: ``REAL_TOPIC+UNIQ_KEY`` -> offset of each copy the
    timer delivered and the keys delete marks name (:func:`~.shared_walk.timer_marks`), by
    a walk of their own: only when the shared walk did not meet ``start``."""
    from rmqstore_cli.store.checks.shared_walk import timer_marks

    copies: dict[str, int] = {}
    deleted: set[str] = set()
    for m in cl.scan(start, every_file=True):
        timer_marks(m, copies, deleted)
    return copies, deleted


def _chain_problem(chain, last: int, first: int, time_ms: int, precision: int) -> str | None:
    """What is wrong with a slot's chain, or None."""
    if not chain or chain[0].pos != last:
        return f"lastPos {last} is no unit of the timer log"
    for u in chain:
        if u.due_ms // precision * precision != time_ms:
            return f"the unit at {u.pos} is due at {u.due_ms}, not in this slot"
    tail = chain[-1]
    if tail.prev_pos != NO_POS:
        if tail.prev_pos >= tail.pos:
            return f"the unit at {tail.pos} points forward to {tail.prev_pos} (a loop)"
        return f"the unit at {tail.pos} points back to {tail.prev_pos}, where no unit is"
    if tail.pos != first:
        return f"the chain ends at {tail.pos}, firstPos is {first}"
    return None


def _slot_holds(slots: dict, u, due_sec: int, slots_total: int) -> bool:
    """Whether the (recovered) wheel's slot of ``due_sec`` holds that time and spans the
    unit (``TimerWheel#getSlot``)."""
    s = slots.get(due_sec % (slots_total * 2))
    return s is not None and s[0] == due_sec and s[1] <= u.pos <= s[2]
