"""What the timer store holds and what the broker will do with it (``TimerMessageStore``, 5.3.3).

:func:`load` reads the wheel, the log and the checkpoint once (the wheel and log in bulk);
:func:`slot_records` and :func:`unit_records` give dump-timer's rows; :func:`recover`
replays ``TimerMessageStore#recover``; :func:`next_deliveries` replays ``#dequeue`` from the
recovered read time. Verify's checks (``store/verify/timer.py``) use the same view.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rmqstore_cli.formats.timer import (
    MAGIC_DELETE,
    MAGIC_ROLL,
    NO_POS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    TIMER_BLANK_SLOTS,
    TIMER_TOPIC,
    UNIT_SIZE,
)

from rmqstore_cli.store.timer import TimerStore
from rmqstore_cli.store.timer.checkpoint import TimerCheckpoint
from rmqstore_cli.store.timer.log import LogEnd, Unit


@dataclass
class TimerView:
    """The timer store read once: slots (numpy, with ``index``), units (numpy) and their
    positions, where the log ends, and the checkpoint (None when absent)."""

    store: TimerStore
    slots: object
    units: object
    positions: object
    end: LogEnd
    checkpoint: TimerCheckpoint | None

    @property
    def read_time_ms(self) -> int:
        return self.checkpoint.last_read_time_ms if self.checkpoint else 0

    def due_ms(self):
        """Each unit's ``delayedTime`` (enqueue time + delay), as numpy."""
        return self.units["enqueue_time"] + self.units["delay"].astype("int64")

    def slot_time_ms(self):
        return self.slots["time"] * self.store.precision_ms


def load(store: TimerStore) -> TimerView:
    """Read everything once; no ``timerwheel`` reads as the empty wheel ``TimerWheel`` creates."""
    import os

    from numpy.lib import recfunctions as rfn

    if os.path.lexists(store.wheel.path):
        slots = store.wheel.slots()
    else:
        import numpy as np
        from rmqstore_cli.formats.timer import SLOT_DTYPE

        slots = rfn.append_fields(np.zeros(0, SLOT_DTYPE), "index", np.zeros(0, np.int64), usemask=False)
    units, positions, end = store.log.walk()
    return TimerView(store, slots, units, positions, end, store.read_checkpoint())


def unit_at(view: TimerView, i: int) -> Unit:
    return Unit(int(view.positions[i]), *(int(x) for x in view.units[i].tolist()))


# ------------------------------------------------------------------ rows for dump-timer
def slot_records(view: TimerView, begin: int | None, end: int | None) -> Iterator[dict]:
    """The wheel's non-empty slots by due time: ``state`` is ``pending`` (the read time has
    not passed it), ``passed`` (dequeued already: the broker never clears a slot) or
    ``misplaced`` (its time maps to another index: ``TimerWheel#getSlot`` never finds it)."""
    import numpy as np

    s = view.slots
    times = view.slot_time_ms()
    keep = _in_window(times, begin, end)
    order = np.argsort(times[keep], kind="stable")
    sel = s[keep][order]
    home = sel["time"] % (view.store.wheel.slots_total * 2)
    read = view.read_time_ms
    for row, t, h in zip(sel.tolist(), (times[keep][order]).tolist(), home.tolist(), strict=True):
        _, first, last, num, magic, index = row
        state = "misplaced" if h != index else ("pending" if t >= read else "passed")
        yield {
            "index": index,
            "time_ms": t,
            "first_pos": first,
            "last_pos": last,
            "num": num,
            "magic": magic,
            "state": state,
        }


def _in_window(times, begin: int | None, end: int | None):
    """The mask of ``times`` within ``[begin, end]`` (either bound left open when None)."""
    import numpy as np

    keep = np.ones(len(times), bool)
    if begin is not None:
        keep &= times >= begin
    if end is not None:
        keep &= times <= end
    return keep


def unit_records(view: TimerView, cl, begin: int | None, end: int | None, topic: str | None) -> Iterator[dict]:
    """Timer-log units in log order with their commit-log message; ``topic`` keeps the units
    whose real topic is ``topic`` (by the unit's hash first, then the message's REAL_TOPIC)."""
    import numpy as np

    from rmqstore_cli.store.javahash import java_hash

    due = view.due_ms()
    keep = _in_window(due, begin, end)
    if topic is not None:
        keep &= view.units["topic_hash"] == java_hash(topic)
    read = view.read_time_ms
    for i in np.flatnonzero(keep).tolist():
        u = unit_at(view, i)
        d = unit_dict(u, cl)
        if topic is not None and d["real_topic"] != topic:
            continue
        d["state"] = "pending" if view.store.format_time(u.due_ms) >= read else "passed"
        yield d


def unit_dict(u: Unit, cl) -> dict:
    """One unit and what it points at (``message_status``: ok, or what is wrong there)."""
    from rmqstore_cli.store.records.message import offset_msg_id

    d = {
        "pos": u.pos,
        "prev_pos": u.prev_pos,
        "magic": u.magic,
        "roll": bool(u.magic & MAGIC_ROLL),
        "delete": bool(u.magic & MAGIC_DELETE),
        "enqueue_time": u.enqueue_time,
        "due_ms": u.due_ms,
        "commitlog_offset": u.offset_py,
        "size": u.size_py,
        "topic_hash": u.topic_hash,
    }
    m, status = message_of(u, cl)
    props = m.properties if m is not None else {}
    d.update(
        {
            "message_status": status,
            "topic": m.topic if m is not None else None,
            "real_topic": props.get(PROPERTY_REAL_TOPIC),
            "real_queue_id": _int(props.get(PROPERTY_REAL_QUEUE_ID)),
            "keys": m.keys if m is not None else [],
            "uniq_key": props.get("UNIQ_KEY"),
            "msg_id": offset_msg_id(m.store_address, m.store_port, m.physical_offset) if m is not None else None,
            "timer_out_ms": _int(props.get(PROPERTY_TIMER_OUT_MS)),
        }
    )
    return d


def message_of(u: Unit, cl):
    """``TimerMessageStore#getMessageByCommitOffset`` and what the dequeue then needs
    (``#convertMessage`` parses REAL_QID): the message, and ``ok`` or the problem
    (a problem here stalls the dequeue: apache/rocketmq#10668)."""
    if u.offset_py < cl.min_offset:
        return None, "expired: below the commit log's first offset"
    c = cl.check_at(u.offset_py)
    if c is None:
        return None, "past the commit log's files"
    m = c.message
    if m is None or c.status.value != "valid":
        return None, f"no valid message there ({c.reason or c.status.value})"
    return m, _message_problem(u, m)


def _message_problem(u: Unit, m) -> str:
    """``ok``, or why the valid message at a unit's offset is not the unit's: another size,
    another topic than the timer's, no int REAL_QID (``#convertMessage``), or a REAL_TOPIC
    whose hashCode is not the unit's."""
    from rmqstore_cli.store.javahash import java_hash

    if m.total_size != u.size_py:
        return f"the message has {m.total_size} bytes, the unit says {u.size_py}"
    if m.topic != TIMER_TOPIC:
        return f"a message of topic {m.topic!r}, not {TIMER_TOPIC}"
    real = m.properties.get(PROPERTY_REAL_TOPIC)
    if _int(m.properties.get(PROPERTY_REAL_QUEUE_ID)) is None:
        return "no REAL_QID property: #convertMessage fails"
    if (java_hash(real) if real is not None else 0) != u.topic_hash:
        return f"REAL_TOPIC {real!r} hashes to {java_hash(real or '')}, the unit says {u.topic_hash}"
    return "ok"


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


# ------------------------------------------------------------------ the broker's start
@dataclass
class Recovery:
    """``TimerMessageStore#recover``'s outcome: where the log ends (processOffset), the
    queue offset the enqueue restarts from and the read time the dequeue restarts from."""

    process_offset: int
    revised_queue_offset: int | None  # #reviseQueueOffset: the last unit's message's offset, else None
    queue_offset: int  # currQueueOffset
    queue_min: int
    queue_max: int
    read_time_ms: int  # currReadTimeMs
    notes: list[str]


def recover(view: TimerView, ms, now_ms: int) -> Recovery:
    """Replay ``#recover``: processOffset from the log walk, currQueueOffset from the last
    unit's message (``#reviseQueueOffset``) + 1, at most masterTimerQueueOffset, inside the
    rmq_sys_wheel_timer queue; currReadTimeMs at least ``now - slotsTotal + TIMER_BLANK_SLOTS``."""
    cp = view.checkpoint or TimerCheckpoint()
    notes: list[str] = []
    cq = ms.consume_queue(TIMER_TOPIC, 0)
    qmin, qmax = (cq.min_offset(ms.commitlog.min_offset), cq.max_offset) if cq.queue.files else (0, 0)
    revised = _revise_queue_offset(view, ms, cq) if len(view.units) else None
    q = cp.last_timer_queue_offset if revised is None else revised + 1
    q = min(q, cp.master_timer_queue_offset)
    if cq.queue.files and q < qmin:
        notes.append(f"queue offset {q} is below the queue's min {qmin}: raised to it")
        q = qmin
    elif cq.queue.files and q > qmax:
        notes.append(f"queue offset {q} is above the queue's max {qmax}: lowered to it")
        q = qmax
    st = view.store
    floor = st.format_time(now_ms) - st.wheel.slots_total * st.precision_ms + TIMER_BLANK_SLOTS * st.precision_ms
    read = max(cp.last_read_time_ms, floor)
    if read > cp.last_read_time_ms:
        notes.append(
            f"the checkpoint's read time is older than the wheel's {st.wheel.slots_total} slots: "
            f"the dequeue restarts at {read} and skips the slots before it"
        )
    return Recovery(view.end.offset, revised, q, qmin, qmax, read, notes)


def _revise_queue_offset(view: TimerView, ms, cq) -> int | None:
    """``#reviseQueueOffset``: the queue offset of the last unit's message, checked against
    the queue (walking back at most 20000 units to the unit with its position and size)."""
    u = unit_at(view, len(view.units) - 1)
    c = ms.commitlog.check_at(u.offset_py)
    if c is None or c.message is None:
        return None
    off = c.message.queue_offset
    if not cq.queue.files:
        return off
    for k in range(off, max(off - 20000, -1), -1):
        unit = next(cq.units(k, k + 1), None)
        if unit is not None and unit.commitlog_offset == u.offset_py and unit.size == u.size_py:
            return k
    return off


def revise(view: TimerView, rec_read_time_ms: int) -> list[tuple[int, int, int, int]]:
    """``#recover``'s repair of the wheel from the log, applied to ``view.slots``:
    ``#recoverAndRevise(lastFlushPos - lastFile.fileSize, true)``, then, when a slot from
    the read time on (``TimerWheel#checkPhyPos``) has lastPos past the log's end, again from
    its least firstPos. Each unit from there on is ``TimerWheel#reviseSlot(delayTime, IGNORE,
    pos, true)``: its slot's lastPos becomes the unit (a slot of another time is put anew
    with the unit as first and last). Returns (index, time_ms, old lastPos, new lastPos)
    of every slot changed (old -1: a slot made)."""
    import numpy as np
    from numpy.lib import recfunctions as rfn

    st = view.store
    if not st.log.files or not len(view.units):
        return []
    begin = _revise_from(view, rec_read_time_ms)
    rows = {int(r[-1]): list(r[:-1]) for r in view.slots.tolist()}
    before = {k: (r[0], r[2]) for k, r in rows.items()}
    _revise_slots(view, rows, begin)
    keys = sorted(rows)
    view.slots = rfn.append_fields(_slot_rows(rows, keys), "index", np.array(keys, np.int64), usemask=False)
    return [
        (
            k,
            rows[k][0] * st.precision_ms,
            before[k][1] if before.get(k, (None,))[0] == rows[k][0] else NO_POS,
            rows[k][2],
        )
        for k in keys
        if before.get(k) != (rows[k][0], rows[k][2])
    ]


def _file_start_at(files: list, pos: int) -> int:
    """The start of the last log file starting at or before ``pos`` (the first file's when none does)."""
    return max([f.file_from_offset for f in files if f.file_from_offset <= pos], default=files[0].file_from_offset)


def _revise_from(view: TimerView, rec_read_time_ms: int) -> int:
    """Where ``#recover`` revises the wheel from: the file of ``lastFlushPos - lastFile.fileSize``,
    or the file of the least firstPos of a slot from the read time on whose lastPos is past the
    log's end (``TimerWheel#checkPhyPos``), whichever is earlier."""
    st = view.store
    files = st.log.files
    flush = view.checkpoint.last_timer_log_flush_pos if view.checkpoint else 0
    begin = _file_start_at(files, max(flush - files[-1].file_size, 0))
    times = view.slot_time_ms()
    home = view.slots["time"] % (st.wheel.slots_total * 2) == view.slots["index"]
    late = home & (times >= rec_read_time_ms) & (view.slots["last_pos"] > view.end.offset)
    if late.any():
        begin = min(begin, _file_start_at(files, int(view.slots["first_pos"][late].min())))
    return begin


def _revise_slots(view: TimerView, rows: dict, begin: int) -> None:
    """``TimerWheel#reviseSlot(delayTime, IGNORE, pos, true)`` of each unit from ``begin`` on,
    on ``rows`` (slot index: [time, firstPos, lastPos, num, magic])."""
    st = view.store
    ring = st.wheel.slots_total * 2
    keep = view.positions >= begin
    for pos, due in zip(view.positions[keep].tolist(), view.due_ms()[keep].tolist(), strict=True):
        t = due // st.precision_ms
        row = rows.get(t % ring)
        if row is not None and row[0] == t:
            row[2] = pos
        else:  # TimerWheel#putSlot(timeMs, lastPos, lastPos): num and magic keep their bytes
            rows[t % ring] = [t, pos, pos, row[3] if row else 0, row[4] if row else 0]


def _slot_rows(rows: dict, keys: list):
    """The revised slots as ``SLOT_DTYPE`` rows in index order."""
    import numpy as np
    from rmqstore_cli.formats.timer import SLOT_DTYPE

    out = np.zeros(len(rows), SLOT_DTYPE)
    for j, k in enumerate(keys):
        out[j] = tuple(rows[k])
    return out


# ------------------------------------------------------------------ what comes next
def next_deliveries(view: TimerView, ms, rec: Recovery, limit: int, now_ms: int) -> Iterator[dict]:
    """What the broker does next, in order: first the rmq_sys_wheel_timer messages from
    currQueueOffset on (``#enqueue``; one due before now goes straight to delivery,
    ``TimerEnqueuePutService#putMessageToTimerWheel``), then the wheel's slots from
    currReadTimeMs on (``#dequeue``: a slot's chain read from lastPos back, delete marks
    first, then its messages oldest first; a rolled unit is put back on the wheel, a
    message whose ``topic+UNIQ_KEY`` a delete mark names is dropped)."""
    shown = 0
    for d in _from_queue(view, ms, rec, now_ms):
        if shown >= limit:
            return
        shown += 1
        yield d
    for d in _from_wheel(view, ms, rec):
        if shown >= limit:
            return
        shown += 1
        yield d


def _from_queue(view: TimerView, ms, rec: Recovery, now_ms: int) -> Iterator[dict]:
    cq = ms.consume_queue(TIMER_TOPIC, 0)
    if not cq.queue.files:
        return
    write_time = view.store.format_time(now_ms)
    for unit in cq.units(rec.queue_offset, rec.queue_max):
        u = Unit(NO_POS, UNIT_SIZE, NO_POS, 1, 0, 0, unit.commitlog_offset, unit.size, 0, 0)
        d = unit_dict(u, ms.commitlog)
        out = d["timer_out_ms"]
        d.update(
            {
                "source": "queue",
                "queue_offset": unit.cq_offset,
                "due_ms": out,
                "action": "deliver" if out is not None and out < write_time else "enqueue",
            }
        )
        yield d


def _from_wheel(view: TimerView, ms, rec: Recovery) -> Iterator[dict]:
    import numpy as np

    st = view.store
    times = view.slot_time_ms()
    home = view.slots["time"] % (st.wheel.slots_total * 2) == view.slots["index"]
    pick = np.flatnonzero(home & (times >= rec.read_time_ms))
    pick = pick[np.argsort(times[pick], kind="stable")]
    for i in pick.tolist():
        yield from _slot_actions(view, ms, int(times[i]), int(view.slots["last_pos"][i]))


def _slot_actions(view: TimerView, ms, time_ms: int, last_pos: int) -> Iterator[dict]:
    """A slot's chain as ``#dequeue`` reads it: the delete marks first, then the other units
    oldest first, each with what the broker does with it."""
    chain = chain_units(view, last_pos)
    deletes = [u for u in chain if _is_delete_mark(u)]
    normal = [u for u in reversed(chain) if not _is_delete_mark(u)]
    deleted: set[str] = set()
    for u in deletes:
        d = unit_dict(u, ms.commitlog)
        m, _ = message_of(u, ms.commitlog)
        if m is not None and m.properties.get(PROPERTY_TIMER_DEL_UNIQKEY):
            deleted.add(m.properties[PROPERTY_TIMER_DEL_UNIQKEY])
        d.update({"source": "wheel", "slot_time_ms": time_ms, "action": "delete-mark"})
        yield d
    for u in normal:
        d = unit_dict(u, ms.commitlog)
        d.update({"source": "wheel", "slot_time_ms": time_ms, "action": _unit_action(u, d, deleted)})
        yield d


def _is_delete_mark(u: Unit) -> bool:
    """A delete mark that is not a rolled unit (``TimerMessageStore#dequeue`` reads these first)."""
    return bool(u.magic & MAGIC_DELETE and not u.magic & MAGIC_ROLL)


def _unit_action(u: Unit, d: dict, deleted: set[str]) -> str:
    """What ``#dequeue`` does with a unit: a rolled one is put back on the wheel; a message it
    cannot read is stuck (the broker retries it) or skipped; one a delete mark names
    (``topic+UNIQ_KEY``) is dropped; the rest are delivered."""
    if u.magic & MAGIC_ROLL:
        return "roll"
    if d["message_status"] != "ok":
        return "stuck" if d["message_status"].startswith(("a message", "no REAL_QID", "the message")) else "skip"
    if f"{d['real_topic']}+{d['uniq_key']}" in deleted:
        return "deleted"
    return "deliver"


def chain_units(view: TimerView, last_pos: int, limit: int | None = None) -> list[Unit]:
    """A slot's chain from ``last_pos`` back along prevPos (``#dequeue``'s read), stopping
    at -1, at a position no unit of the log holds, or where the chain would not go back
    (a loop). At most ``limit`` units (default: the log's unit count)."""
    import numpy as np

    out: list[Unit] = []
    pos = last_pos
    cap = len(view.units) if limit is None else limit
    while pos != NO_POS and len(out) < cap:
        i = int(np.searchsorted(view.positions, pos))
        if i >= len(view.positions) or int(view.positions[i]) != pos:
            break
        u = unit_at(view, i)
        out.append(u)
        if u.prev_pos >= pos:
            break
        pos = u.prev_pos
    return out
