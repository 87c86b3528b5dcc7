"""verify's one extra commit-log walk, shared by the checks that need records the main scan
does not keep (they used to walk the commit log once each):

- ``bcq.missing-unit`` / ``bcq.not-dispatched``: every NOT/COMMIT record of a BatchCQ topic
  up to where the broker's recovery stops (``CommitLog#recoverNormally``; ``CommitLog.scan``
  without ``every_file``);
- ``timer.delivered-twice`` / ``timer.never-delivered``: from the first timer message on,
  the copies the timer delivered (``TimerMessageStore#convertMessage``: a record outside
  rmq_sys_wheel_timer with TIMER_DEQUEUE_MS) and the keys delete marks name
  (TIMER_DEL_UNIQKEY), every file read (``CommitLog.scan(every_file=True)``).

The walk is ``CommitLog.scan_blocks(every_file=True)`` from the log's start: the records it
gives before its first stop are exactly those of the stopping scan, and once it meets the
timer's first message the records from there on are exactly those of ``scan(start,
every_file=True)``. When it does not meet that message (damage earlier in its file, or a
unit naming a record off the chain) the timer's records are read by their own walk, as
before, so the findings never change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from rmqstore_cli.formats.commitlog import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from rmqstore_cli.formats.timer import PROPERTY_TIMER_DEL_UNIQKEY, TIMER_TOPIC

from rmqstore_cli.store.records.message import Message

#: Both timer properties start so (TIMER_DEQUEUE_MS, TIMER_DEL_UNIQKEY): a block whose
#: records' properties lack it has neither.
_TIMER_MARK = b"TIMER_DE"


@dataclass
class WalkFacts:
    """What the walk kept. ``timer_start``: the offset the timer records were kept from,
    ``timer_reached``: the walk met a record there (else they are not usable)."""

    bcq_topics: set[str]
    timer_start: int | None
    #: per block, (topic number in ``bcq_names``, queueId, offset, storeTime) columns
    bcq_cols: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    bcq_names: list[str] = field(default_factory=list)
    copies: dict[str, int] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    timer_reached: bool = False

    def bcq_records(self, topics: set[str]):
        """(topic, queueId, offset, storeTime) of the kept records of ``topics``, in log order."""
        for tix, qid, off, ts in self.bcq_cols:
            for t, q, o, s in zip(tix.tolist(), qid.tolist(), off.tolist(), ts.tolist(), strict=True):
                if self.bcq_names[t] in topics:
                    yield self.bcq_names[t], q, o, s

    def add_bcq(self, names: list[str], qid, off, ts) -> None:
        """Keep records (as columns: four int64 a record, whatever the store's size)."""
        ix = {n: i for i, n in enumerate(self.bcq_names)}
        for n in names:
            if n not in ix:
                ix[n] = len(self.bcq_names)
                self.bcq_names.append(n)
        tix = np.array([ix[n] for n in names], np.int64)
        self.bcq_cols.append((tix, np.asarray(qid, np.int64), np.asarray(off, np.int64), np.asarray(ts, np.int64)))


def timer_marks(m: Message, copies: dict[str, int], deleted: set[str]) -> None:
    """One record's part in ``_delivered_copies``: a delivered copy (``REAL_TOPIC+UNIQ_KEY`` ->
    its first offset) or a delete mark's key."""
    pb = m.properties_bytes
    if b"TIMER_DEQUEUE_MS" in pb and m.topic != TIMER_TOPIC:
        copies.setdefault(f"{m.topic}+{m.uniq_key}", m.offset)
    elif b"TIMER_DEL_UNIQKEY" in pb:
        deleted.add(m.properties.get(PROPERTY_TIMER_DEL_UNIQKEY, ""))


def walk(cl, bcq_topics: set[str], timer_start: int | None) -> WalkFacts:
    """The one walk of ``cl`` (a ``CommitLog``), keeping what :class:`WalkFacts` holds."""
    facts = WalkFacts(bcq_topics, timer_start)
    want = {t.encode("utf-8", "surrogateescape") for t in bcq_topics}
    for rec in cl.scan_blocks(every_file=True):
        before_stop = not cl.stops  # the stopping scan would have ended at the first stop
        if isinstance(rec, Message):
            _one_record(rec, want, facts, before_stop)
            continue
        if not hasattr(rec, "topics"):  # a Blank
            continue
        if before_stop and want:
            _bcq_block(rec, want, facts)
        if timer_start is not None:
            _timer_block(rec, facts)
    return facts


def _one_record(rec: Message, want: set[bytes], facts: WalkFacts, before_stop: bool) -> None:
    """A record the scan gives one by one (not in a block): kept for the batch queues when
    dispatched to one of ``want`` before the first stop, and for the timer from its start on."""
    if before_stop and rec.topic_bytes in want and _dispatched(rec.sys_flag):
        facts.add_bcq([rec.topic], [rec.queue_id], [rec.offset], [rec.store_timestamp])
    start = facts.timer_start
    if start is not None and rec.offset >= start:
        facts.timer_reached |= rec.offset == start
        if facts.timer_reached:
            timer_marks(rec, facts.copies, facts.deleted)


def _dispatched(sys_flag):
    """NOT and COMMIT records (a scalar or an array of sysFlags): those dispatched to a queue."""
    tran = sys_flag & TRANSACTION_MASK
    return (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)


def _bcq_block(rec, want: set[bytes], facts: WalkFacts) -> None:
    """A block's NOT/COMMIT records of ``want``, kept."""
    names, tid = rec.topics
    hit = np.array([n in want for n in names], bool)[tid] & _dispatched(rec.rb.sys_flag)
    at = np.flatnonzero(hit)
    if at.size:
        facts.add_bcq(
            [names[t].decode("utf-8", "surrogateescape") for t in tid[at].tolist()],
            rec.rb.queue_id[at],
            rec.offsets[at],
            rec.store_timestamp[at],
        )


def _timer_block(rec, facts: WalkFacts) -> None:
    """A block's part of the timer's records: from ``timer_start`` on, once the walk met it;
    only the records whose properties hold :data:`_TIMER_MARK` are decoded."""
    offs = rec.offsets
    start = facts.timer_start
    if not offs.size or int(offs[-1]) < start:
        return
    if not facts.timer_reached:
        facts.timer_reached = bool((offs == start).any())
        if not facts.timer_reached:
            return
    buf, rb = rec.buf, rec.rb
    ends = (rb.props_at + rb.props_len).tolist()
    idx = [
        i
        for i, (a, b, o) in enumerate(zip(rb.props_at.tolist(), ends, offs.tolist(), strict=True))
        if o >= start and buf.find(_TIMER_MARK, a, b) >= 0
    ]
    if idx:
        for m in rec.messages(np.array(idx, np.int64)):
            timer_marks(m, facts.copies, facts.deleted)


def shared_facts(verifier, timer_start: int | None = None) -> WalkFacts:
    """The verifier's walk, made once (again only for a timer start the first one did not
    keep: :meth:`TimerChecks._timer_deliveries` runs before the bcq checks, so never in
    ``Verifier.run``); the BatchCQ topics are those of ``batchconsumequeue/``."""
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.files.mapped_files import queue_dirs

    facts = getattr(verifier, "shared_walk_facts", None)
    if facts is None or (timer_start is not None and facts.timer_start != timer_start):
        cl = CommitLog(verifier.config)
        try:
            facts = walk(cl, {t for t, _, _ in queue_dirs(verifier.config.root / "batchconsumequeue")}, timer_start)
        finally:
            cl.close()
        verifier.shared_walk_facts = facts
    return facts
