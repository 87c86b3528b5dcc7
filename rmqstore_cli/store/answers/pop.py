"""What became of each POP-consumed message, from the files alone (``pop``).

The broker's rules (docs/format/pop.md, formats/pop.py for the bodies):

- ``PopMessageProcessor#appendCheckPoint`` records each pop as a checkpoint (``ck``) in a
  revive queue of ``rmq_sys_REVIVE_LOG_<cluster>``; ``AckMessageProcessor#appendAck`` and
  ``PopBufferMergeService#putAckToStore`` / ``#putBatchAckToStore`` record the acks
  (``ack``, ``bAck``); ``PopBufferMergeService`` may also merge acks into the checkpoint's
  bitmap before it is stored;
- each carries TIMER_DELIVER_MS, so a 5.x broker (``HookUtils#handleScheduleMessage``) first
  stores it in ``rmq_sys_wheel_timer`` (REAL_TOPIC the revive topic) and the timer puts it
  in the revive queue when due: a record still only in the timer is not yet delivered;
- ``PopReviveService#consumeReviveMessage`` reads a revive queue from its consumer offset
  (group ``CID_RMQ_SYS_REVIVE_GROUP``) + 1, sets each checkpoint's bits from the acks that
  name it (topic, group, queue, start offset, pop time, broker name), and
  ``#mergeAndRevive`` / ``#reviveMsgFromCk`` put every message whose bit is unset into the
  retry topic (``#reviveRetry``: ``KeyBuilder#buildPopRetryTopic``, the original's
  properties, UNIQ_KEY among them, and 1ST_POP_TIME), then commit the checkpoint's revive
  queue offset; ``#rePutCK`` writes a new checkpoint (``rp``: re-put times) for one it could
  not revive.

A popped message is ``acked`` (its bit set), ``revived`` (a message with its UNIQ_KEY in the
retry topic stored after the pop), ``invisible`` (neither, its revive time after now: it will
be revived then) or ``overdue`` (neither, revive time passed, nothing in the retry topic).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
from rmqstore_cli.formats.pop import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    RETRY_PREFIX,
    REVIVE_GROUP,
    REVIVE_TOPIC_PREFIX,
    BodyError,
    CheckPoint,
    parse_ack,
    parse_checkpoint,
    retry_topics,
)
from rmqstore_cli.formats.timer import TIMER_TOPIC

from rmqstore_cli.store.answers.keyed_rows import Answer as RowsAnswer, Wanted, Warned, keep
from rmqstore_cli.store.records.message import PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC, PROPERTY_TAGS

STATES = ("acked", "revived", "invisible", "overdue")
_REVIVE, _RETRY, _TIMER = REVIVE_TOPIC_PREFIX.encode(), RETRY_PREFIX.encode(), TIMER_TOPIC.encode()


@dataclass(slots=True)
class Ck:
    """A checkpoint where it was found: its revive queue and queue offset (None while only in
    the timer), commit-log offset, and the acks merged into it."""

    ck: CheckPoint
    revive_topic: str
    revive_queue: int
    revive_queue_offset: int | None
    physical_offset: int
    store_timestamp: int
    acked: dict[int, str] = field(default_factory=dict)  # index -> "ck", "ack" or "batch-ack"


@dataclass(slots=True)
class Retry:
    """A message in a retry topic, as the revive matches it."""

    topic: str
    physical_offset: int
    queue_offset: int
    store_timestamp: int


class PendingAck(NamedTuple):
    """An ack or batch ack waiting for its checkpoint: its merge key, the queue offsets it
    acks and where it lies (what :func:`merge_acks` needs, not the whole parsed body)."""

    key: tuple[Any, ...]
    ack_offsets: tuple[int, ...]
    batch: bool
    physical_offset: int


@dataclass
class Scan(Warned):
    """What one commit-log walk found: checkpoints by merge key, acks waiting for theirs,
    retry messages by (topic, UNIQ_KEY), counts and warnings."""

    cks: dict[tuple, Ck] = field(default_factory=dict)
    acks: list[PendingAck] = field(default_factory=list)
    retries: dict[tuple[str, str], list[Retry]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"in_timer": 0, "bad_bodies": 0})


def merge_key(topic: Any, group: Any, queue_id: int, start: int, pop_time: int, broker: Any, rq: int) -> tuple:
    """``PopReviveService#consumeReviveMessage``'s map key (per revive queue); its names are
    interned: a store's few topics, groups and brokers, named again by every body."""
    return (rq, _intern(topic), _intern(group), queue_id, start, pop_time, _intern(broker or ""))


def _intern(text: Any) -> Any:
    """``text`` interned when it is a string (one copy of each name, not one per record)."""
    return sys.intern(text) if isinstance(text, str) else text


def records(commitlog: Any) -> Iterator[Any]:
    """The records a POP answer needs, in log order: the revive topics', the retry topics' and
    the timer topic's (whose REAL_TOPIC is then checked); blocks filtered by their topic column."""
    for item in commitlog.scan_blocks(None, None, every_file=True, blocks=not commitlog.is_dledger):
        if hasattr(item, "rb"):  # a MessageBlock
            names, tid = item.topics
            want = np.array([n.startswith((_REVIVE, _RETRY)) or n == _TIMER for n in names], bool)
            take = np.flatnonzero(want[tid])
            if take.size:
                yield from item.messages(take)
        elif item.topic.startswith((REVIVE_TOPIC_PREFIX, RETRY_PREFIX)) or item.topic == TIMER_TOPIC:
            yield item


def scan(commitlog: Any) -> Scan:
    """One walk: checkpoints, acks (kept to merge once every checkpoint is known: a delivered
    ack may precede its checkpoint's delivery), retry messages."""
    s = Scan()
    for rec in records(commitlog):
        topic, props = rec.topic, rec.properties
        if topic.startswith(RETRY_PREFIX):
            uniq = rec.uniq_key
            if uniq:
                topic = sys.intern(topic)
                r = Retry(topic, rec.physical_offset, rec.queue_offset, rec.store_timestamp)
                s.retries.setdefault((topic, uniq), []).append(r)
            continue
        if topic == TIMER_TOPIC:
            real = props.get(PROPERTY_REAL_TOPIC, "")
            if not real.startswith(REVIVE_TOPIC_PREFIX):
                continue
            revive_topic, rq, rqo = real, _int(props.get(PROPERTY_REAL_QID)) or 0, None
        else:
            revive_topic, rq, rqo = topic, rec.queue_id, rec.queue_offset
        revive(s, rec, props.get(PROPERTY_TAGS), revive_topic, rq, rqo)
    return s


def revive(s: Scan, rec: Any, tag: str | None, revive_topic: str, rq: int, rqo: int | None) -> None:
    """One revive record (delivered, or still in the timer when ``rqo`` is None)."""
    if tag not in (CK_TAG, ACK_TAG, BATCH_ACK_TAG):
        return
    try:
        body = parse_checkpoint(rec.body) if tag == CK_TAG else parse_ack(rec.body, tag == BATCH_ACK_TAG)
    except BodyError as e:
        s.counts["bad_bodies"] += 1
        s.warn(f"revive record at {rec.physical_offset} ({tag}): {e}; the broker cannot read it")
        return
    if tag == CK_TAG:
        _add_checkpoint(s, rec, body, revive_topic, rq, rqo)
        return
    key = merge_key(body.topic, body.group, body.queue_id, body.start_offset, body.pop_time, body.broker_name, rq)
    s.acks.append(PendingAck(key, body.ack_offsets, body.batch, rec.physical_offset))


def _add_checkpoint(s: Scan, rec: Any, ck: Any, revive_topic: str, rq: int, rqo: int | None) -> None:
    """A checkpoint, once per merge key: the delivered copy wins over a copy still in the timer;
    its bitmap's bits are the messages acked when it was written."""
    if ck.topic is None or ck.group is None:  # PopReviveService skips it
        s.warn(f"checkpoint at {rec.physical_offset} names no topic or group; the broker skips it")
        return
    key = merge_key(ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time, ck.broker_name, rq)
    old = s.cks.get(key)
    if old is not None and (old.revive_queue_offset is not None or rqo is None):
        return  # the delivered copy of a timer record, or a second timer copy: one checkpoint
    _count_in_timer(s, old, rqo)
    ck = replace(ck, topic=key[1], group=key[2], broker_name=_intern(ck.broker_name))  # the interned names
    s.cks[key] = c = Ck(ck, sys.intern(revive_topic), rq, rqo, rec.physical_offset, rec.store_timestamp)
    for i in range(ck.num):
        if ck.bitmap >> i & 1:
            c.acked[i] = "ck"


def _count_in_timer(s: Scan, old: Ck | None, rqo: int | None) -> None:
    """``in_timer`` counts checkpoints known only from the timer: one more for a timer copy, one
    less when the delivered copy replaces a timer copy."""
    if rqo is None:
        s.counts["in_timer"] += 1
    elif old is not None and old.revive_queue_offset is None:
        s.counts["in_timer"] -= 1


def merge_acks(s: Scan) -> int:
    """Each ack's bits set in its checkpoint (``PopCheckPoint#indexOfAck``); how many acks
    name no checkpoint in their revive queue."""
    orphans = 0
    for key, ack_offsets, batch, off in s.acks:
        c = s.cks.get(key)
        if c is None:
            orphans += 1
            continue
        for a in ack_offsets:
            i = c.ck.index_of_ack(a)
            if i < 0:
                s.warn(f"ack at {off} of offset {a} is not in its checkpoint (PopReviveService: invalid ack index)")
            else:
                c.acked.setdefault(i, "batch-ack" if batch else "ack")
    return orphans


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Rules:
    """The time taken as now, and the revive groups' committed offsets
    (``consumerOffset.json``: ``<revive topic>@CID_RMQ_SYS_REVIVE_GROUP``)."""

    now_ms: int
    revive_offsets: dict[str, dict[int, int]]


def revive_offsets(tables: list[dict[str, dict[int, int]]]) -> dict[str, dict[int, int]]:
    """The revive queues' committed offsets from the broker's offset tables."""
    out: dict[str, dict[int, int]] = {}
    for table in tables:
        for k, queues in table.items():
            topic, _, group = k.rpartition("@")
            if group == REVIVE_GROUP and topic.startswith(REVIVE_TOPIC_PREFIX):
                out.setdefault(topic, {}).update(queues)
    return out


def rows(s: Scan, rules: Rules, original: Any) -> Iterator[dict[str, Any]]:
    """One row per popped message of every checkpoint; ``original(topic, queue_id, offset)``
    gives the popped message's UNIQ_KEY (None when it is gone)."""
    done: dict[tuple[Any, ...], tuple[Ck, int]] = {}  # the row's checkpoint and index; its dict made when it is read
    for c in sorted(s.cks.values(), key=lambda c: (c.ck.pop_time, c.physical_offset), reverse=True):
        ck = c.ck
        for i, off in enumerate(ck.offsets()):
            k = (ck.group, ck.topic, ck.queue_id, off, ck.pop_time)
            if k not in done:  # a re-put checkpoint (PopReviveService#rePutCK) names it again: the latest counts
                done[k] = (c, i)
    for k in sorted(done):
        c, i = done.pop(k)
        committed = rules.revive_offsets.get(c.revive_topic, {}).get(c.revive_queue)
        yield row(s, rules, c, i, k[3], committed, original)


def row(s: Scan, rules: Rules, c: Ck, i: int, off: int, committed: int | None, original: Any) -> dict[str, Any]:
    ck = c.ck
    assert ck.topic is not None and ck.group is not None
    uniq = original(ck.topic, ck.queue_id, off)
    ack = c.acked.get(i)
    retry = _retry_of(s, ck, uniq) if ack is None and uniq is not None else None
    return {
        "group": ck.group,
        "topic": ck.topic,
        "queue_id": ck.queue_id,
        "queue_offset": off,
        "state": _state(ack, retry, ck.revive_time, rules.now_ms),
        "ack": ack,
        "uniq_key": uniq,
        "pop_time": ck.pop_time,
        "invisible_time": ck.invisible_time,
        "revive_time": ck.revive_time,
        "revive_topic": c.revive_topic,
        "revive_queue": c.revive_queue,
        "revive_queue_offset": c.revive_queue_offset,
        "revive_processed": _processed(c, committed),
        "ck_offset": c.physical_offset,
        "reput_times": ck.reput_times,
        "broker_name": ck.broker_name,
        **_retry_fields(retry),
    }


def _retry_of(s: Scan, ck: Any, uniq: str) -> Any:
    """The first retry record of the popped message stored after the pop (its retry topics in
    the broker's order), or None."""
    for t in retry_topics(ck.group, ck.topic):
        got = [r for r in s.retries.get((t, uniq), ()) if r.store_timestamp >= ck.pop_time]
        if got:
            return min(got, key=lambda r: r.store_timestamp)
    return None


def _state(ack: str | None, retry: Any, revive_time: int, now_ms: int) -> str:
    """Acked, revived (a retry record holds it), still invisible, or overdue for revival."""
    if ack is not None:
        return "acked"
    if retry is not None:
        return "revived"
    return "invisible" if revive_time > now_ms else "overdue"


def _processed(c: Ck, committed: int | None) -> bool | None:
    """Whether the revive service has read past the checkpoint (None: unknown)."""
    if c.revive_queue_offset is None or committed is None:
        return None
    return c.revive_queue_offset <= committed


def _retry_fields(retry: Any) -> dict[str, Any]:
    if retry is None:
        return {"retry_topic": None, "retry_offset": None, "retry_store_timestamp": None}
    return {
        "retry_topic": retry.topic,
        "retry_offset": retry.physical_offset,
        "retry_store_timestamp": retry.store_timestamp,
    }


def revive_queues(s: Scan, rules: Rules, max_offset: Any) -> list[dict[str, Any]]:
    """Per revive queue: the committed offset against the queue's end (``max_offset(topic,
    qid)``); the broker reads from committed + 1, so ``behind`` = max - committed - 1
    (``PopReviveService#getReviveBehindMessages``; nothing committed: it starts at 1)."""
    seen = {(c.revive_topic, c.revive_queue) for c in s.cks.values()}
    seen |= {(t, q) for t, qs in rules.revive_offsets.items() for q in qs}
    return [
        _revive_queue_row(s, topic, qid, rules.revive_offsets.get(topic, {}).get(qid), max_offset(topic, qid))
        for topic, qid in sorted(seen)
    ]


def _revive_queue_row(s: Scan, topic: str, qid: int, committed: int | None, mx: int) -> dict[str, Any]:
    """One revive queue: its checkpoints, those the revive service has not read, those in the timer."""
    pending = [c for c in s.cks.values() if (c.revive_topic, c.revive_queue) == (topic, qid)]
    delivered = [c for c in pending if c.revive_queue_offset is not None]
    unproc = [c for c in delivered if c.revive_queue_offset > (committed or 0)]
    return {
        "revive_topic": topic,
        "queue_id": qid,
        "committed_offset": committed,
        "max_offset": mx,
        "behind": max(0, mx - (committed or 0) - 1),
        "checkpoints": len(delivered),
        "unprocessed_checkpoints": len(unproc),
        "in_timer": len(pending) - len(delivered),
        "oldest_unprocessed_revive_time": min((c.ck.revive_time for c in unproc), default=None),
    }


def count_row(counts: dict[tuple[str, str], dict[str, Any]], r: dict[str, Any]) -> None:
    k = (r["group"], r["topic"])
    g = counts.get(k)
    if g is None:
        g = counts[k] = {"group": k[0], "topic": k[1], "popped": 0, **dict.fromkeys(STATES, 0)}
        g["next_revive_time"] = None
    g["popped"] += 1
    g[r["state"]] += 1
    if r["state"] == "invisible":
        nxt = g["next_revive_time"]
        g["next_revive_time"] = r["revive_time"] if nxt is None else min(nxt, r["revive_time"])


@dataclass
class Answer(RowsAnswer):
    """The rows kept, the groups, the summary, the warnings and the revive queues."""

    queues: list[dict[str, Any]] = field(default_factory=list)


def answer(ms: Any, rules: Rules, want: Wanted) -> Answer:
    """One walk of ``ms``'s commit log, then a consume-queue look-up per popped message."""
    s = scan(ms.commitlog)
    orphans = merge_acks(s)
    queues_read = _PoppedQueues(ms)
    k = keep(rows(s, rules, queues_read.original), want, "group", STATES, count_row)
    queues = revive_queues(s, rules, queues_read.max_offset)
    summary = _summary(s, rules, k.totals, k.matched, len(k.rows), orphans, queues)
    warnings = s.all_warnings("revive records the broker cannot use")
    return Answer(k.rows, k.groups, summary, warnings, queues)


class _PoppedQueues:
    """The consume queues the answer reads, each opened once: the popped messages' UNIQ_KEYs
    and the revive queues' ends."""

    def __init__(self, ms: Any):
        self.ms = ms
        self.cqs: dict[tuple[str, int], Any] = {}

    def queue(self, t: str, qid: int) -> Any:
        if (t, qid) not in self.cqs:
            self.cqs[(t, qid)] = self.ms.consume_queue(t, qid)
        return self.cqs[(t, qid)]

    def original(self, t: str, qid: int, off: int) -> str | None:
        """The UNIQ_KEY of the message at queue offset ``off`` (None when it is gone)."""
        from rmqstore_cli.store.answers.lookup import read_record

        try:
            unit = next(iter(self.queue(t, qid).units(off, off + 1)), None)
        except (OSError, ValueError):
            return None
        if unit is None:
            return None
        rec, _why = read_record(self.ms.commitlog, unit.commitlog_offset)
        return None if rec is None else rec.uniq_key

    def max_offset(self, t: str, qid: int) -> int:
        try:
            return int(self.queue(t, qid).max_offset)
        except (OSError, ValueError):
            return 0


def _summary(
    s: Scan,
    rules: Rules,
    totals: dict[str, int],
    matched: int,
    shown: int,
    orphans: int,
    queues: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "popped": sum(totals.values()),
        **totals,
        "matched": matched,
        "shown": shown,
        **s.counts,
        "checkpoints": len(s.cks),
        "acks": sum(1 for a in s.acks if not a.batch),
        "batch_acks": sum(1 for a in s.acks if a.batch),
        "acks_without_checkpoint": orphans,
        "revive_behind": sum(q["behind"] for q in queues),
        "now": rules.now_ms,
    }
