"""The queue half of ``rmqstore diff`` (``store/answers/store_diff.py``): per consume queue, the
messages only one store holds (by queue offset range) and the units that differ in place;
then the consumer offsets that moved backwards from the first store to the second.

Units are compared in bulk: :data:`UNIT_BLOCK` queue offsets at a time through each
queue's ``units_at`` (``ConsumeQueue#getIndexBuffer`` in bulk, over the mapped files or
the RocksDB values), whose pages are released as it goes; nothing holds a whole queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqstore_cli.store.answers.lookup import read_record
from rmqstore_cli.store.files.mapped_files import queue_dirs
from rmqstore_cli.store.layout.offsets import load_consumer_offsets, split_key
from rmqstore_cli.store.message_store import MessageStore

#: Queue offsets compared at a time.
UNIT_BLOCK = 1 << 16


#: The queue and offset counts of the summary, in its order.
TALLY_KEYS = (
    "queues_differing",
    "messages_only_a",
    "messages_only_b",
    "units_changed",
    "offsets_backwards",
    "offsets_forward",
    "offsets_removed",
    "offsets_added",
)


def new_tally() -> dict[str, int]:
    """The summary's queue and offset counts, all zero (:data:`TALLY_KEYS`)."""
    return dict.fromkeys(TALLY_KEYS, 0)


def queue_keys(ms: MessageStore, topic: str | None) -> set[tuple[str, int]]:
    """(topic, queueId) of every consume queue of ``ms`` (of ``topic``)."""
    if ms.rocksdb_cq is not None:
        keys = set(ms.rocksdb_cq.queue_ids())
    else:
        root = ms.config.consumequeue_dir
        keys = {(t, q) for t, q, _ in queue_dirs(root)} if topic is None else set(topic_queues(root, topic))
    return {k for k in keys if topic is None or k[0] == topic}


def topic_queues(root, topic: str) -> Iterator[tuple[str, int]]:
    """(topic, queueId) of one topic's queue directories."""
    d = root / topic
    if not d.is_dir():
        return
    for p in d.iterdir():
        if p.is_dir() and p.name.isdigit() and p.name.isascii():
            yield topic, int(p.name)


def bounds(ms: MessageStore, topic: str, queue_id: int, present: bool):
    """(queue, min offset, max offset) of one queue (None, 0, 0 when the store has none)."""
    if not present:
        return None, 0, 0
    cq = ms.consume_queue(topic, queue_id)
    return cq, cq.min_offset(ms.commitlog.min_offset), cq.max_offset


def minus(lo: int, hi: int, olo: int, ohi: int) -> list[list[int]]:
    """The parts of ``[lo, hi)`` outside ``[olo, ohi)``, as ``[from, to)`` pairs."""
    if ohi <= olo:
        return [[lo, hi]] if hi > lo else []
    out = []
    if lo < min(hi, olo):
        out.append([lo, min(hi, olo)])
    if max(lo, ohi) < hi:
        out.append([max(lo, ohi), hi])
    return out


def queue_rows(
    a: MessageStore,
    b: MessageStore,
    topic: str | None,
    messages: bool,
    tally: dict[str, int],
    only: set[tuple[str, int]] | None = None,
) -> Iterator[dict]:
    """A row per queue that differs (then, with ``messages``, its units that differ in place
    and its messages only in one store), in (topic, queueId) order; of the queues in
    ``only`` when given (those whose files differ)."""
    ka, kb = queue_keys(a, topic), queue_keys(b, topic)
    for t, q in sorted(ka | kb):
        if only is not None and (t, q) not in only:
            continue
        d = _queue_diff(a, b, t, q, (t, q) in ka, (t, q) in kb)
        if d is None:
            continue
        d.count(tally)
        yield d.row()
        if messages:
            if d.changed:
                yield from unit_rows(t, q, d.cqa, d.cqb, d.lo, d.hi)
            yield from message_rows(a, t, q, d.cqa, d.only_a, "a")
            yield from message_rows(b, t, q, d.cqb, d.only_b, "b")


@dataclass
class _QueueDiff:
    """One queue in both stores: each one's bounds (its queue None where it has none), the
    offsets only one has, and the units that differ in the offsets both have."""

    topic: str
    queue_id: int
    cqa: Any
    cqb: Any
    bounds_a: tuple[int, int]
    bounds_b: tuple[int, int]
    only_a: list[list[int]]
    only_b: list[list[int]]
    changed: int
    first: int | None

    @property
    def lo(self) -> int:
        return max(self.bounds_a[0], self.bounds_b[0])

    @property
    def hi(self) -> int:
        return min(self.bounds_a[1], self.bounds_b[1])

    def count(self, tally: dict[str, int]) -> None:
        tally["queues_differing"] += 1
        tally["messages_only_a"] += _messages_in(self.only_a)
        tally["messages_only_b"] += _messages_in(self.only_b)
        tally["units_changed"] += self.changed

    def row(self) -> dict:
        (lo_a, hi_a), (lo_b, hi_b) = self.bounds_a, self.bounds_b
        return {
            "kind": "queue",
            "topic": self.topic,
            "queue_id": self.queue_id,
            "min_offset_a": None if self.cqa is None else lo_a,
            "max_offset_a": None if self.cqa is None else hi_a,
            "min_offset_b": None if self.cqb is None else lo_b,
            "max_offset_b": None if self.cqb is None else hi_b,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "messages_only_a": _messages_in(self.only_a),
            "messages_only_b": _messages_in(self.only_b),
            "units_changed": self.changed,
            "first_changed": self.first,
        }


def _messages_in(ranges: list[list[int]]) -> int:
    return sum(y - x for x, y in ranges)


def _queue_diff(a: MessageStore, b: MessageStore, t: str, q: int, in_a: bool, in_b: bool) -> _QueueDiff | None:
    """Queue ``t``/``q`` compared between the stores; None when they agree."""
    cqa, lo_a, hi_a = bounds(a, t, q, in_a)
    cqb, lo_b, hi_b = bounds(b, t, q, in_b)
    only_a, only_b = minus(lo_a, hi_a, lo_b, hi_b), minus(lo_b, hi_b, lo_a, hi_a)
    changed, first = _changed_count(cqa, cqb, max(lo_a, lo_b), min(hi_a, hi_b))
    if not (only_a or only_b or changed):
        return None
    return _QueueDiff(t, q, cqa, cqb, (lo_a, hi_a), (lo_b, hi_b), only_a, only_b, changed, first)


def _changed_count(cqa, cqb, lo: int, hi: int) -> tuple[int, int | None]:
    """How many units in ``[lo, hi)`` differ, and the first one's queue offset (both queues there)."""
    changed, first = 0, None
    if cqa is None or cqb is None:
        return changed, first
    for at, _ua, _ub in changed_units(cqa, cqb, lo, hi):
        changed += int(at.size)
        first = int(at[0]) if first is None else first
    return changed, first


def changed_units(cqa, cqb, lo: int, hi: int) -> Iterator[tuple[np.ndarray, tuple, tuple]]:
    """Per block of queue offsets in ``[lo, hi)``: the offsets whose units differ (one store
    has it and the other not, or its commit-log offset, size or tags code differ), and both
    stores' (found, offset, size, tags code) columns at them."""
    for start in range(lo, hi, UNIT_BLOCK):
        at = np.arange(start, min(hi, start + UNIT_BLOCK), dtype=np.int64)
        ua, ub = cqa.units_at(at), cqb.units_at(at)
        bad = ua[0] != ub[0]
        for x, y in zip(ua[1:], ub[1:], strict=True):
            bad |= x != y
        sel = np.flatnonzero(bad)
        if sel.size:
            yield at[sel], tuple(c[sel] for c in ua), tuple(c[sel] for c in ub)


def unit_rows(t: str, q: int, cqa, cqb, lo: int, hi: int) -> Iterator[dict]:
    """A row per unit that differs in place: both stores' commit-log offset, size and tags code."""

    def unit(cols, j: int) -> dict | None:
        found, off, size, tags = (c[j] for c in cols)
        return {"commitlog_offset": int(off), "size": int(size), "tags_code": int(tags)} if found else None

    for at, ua, ub in changed_units(cqa, cqb, lo, hi):
        for j, offset in enumerate(at.tolist()):
            yield {
                "kind": "unit",
                "topic": t,
                "queue_id": q,
                "queue_offset": offset,
                "a": unit(ua, j),
                "b": unit(ub, j),
            }


def message_rows(ms: MessageStore, t: str, q: int, cq, ranges: list[list[int]], side: str) -> Iterator[dict]:
    """A row per message in ``ranges`` of the queue: its queue offset, msg id and body CRC, read
    from the commit log where its unit points (``lookMessageByOffset``; null where no valid
    record lies there)."""
    for lo, hi in ranges:
        for arr, first, _name in cq.unit_arrays(lo, hi):
            for j, (off, size, _tags) in enumerate(arr.tolist()):
                rec, _why = read_record(ms.commitlog, off)
                yield {
                    "kind": "message",
                    "side": side,
                    "topic": t,
                    "queue_id": q,
                    "queue_offset": first + j,
                    "physical_offset": off,
                    "size": size,
                    "msg_id": None if rec is None else rec.msg_id,
                    "body_crc": None if rec is None else rec.body_crc,
                    "store_timestamp": None if rec is None else rec.store_timestamp,
                }


# ---------------------------------------------------------------- consumer offsets


def offset_table(ms: MessageStore) -> dict[str, dict[int, int]]:
    """``config/consumerOffset.json`` as the broker loads it (``ConfigManager#load``, then
    its ``.bak``); what it said on the way goes to the store's warnings."""
    loaded = load_consumer_offsets(ms.config.root / "config", optional=True)
    ms.warnings.extend(loaded.warnings)
    return loaded.table


def offset_rows(a: MessageStore, b: MessageStore, topic: str | None, tally: dict[str, int]) -> Iterator[dict]:
    """A row per consumer offset that moved backwards from ``a`` to ``b`` (or that ``b`` no
    longer has); the ones that moved forward, or only ``b`` has, are counted."""
    ta, tb = offset_table(a), offset_table(b)
    for key in sorted(ta.keys() | tb.keys()):
        parts = split_key(key)
        if parts is None or (topic is not None and parts[0] != topic):
            continue
        yield from _offset_moves(parts, ta.get(key, {}), tb.get(key, {}), tally)


def _offset_moves(
    parts: tuple[str, str], qa: dict[int, int], qb: dict[int, int], tally: dict[str, int]
) -> Iterator[dict]:
    """One ``topic@group``'s queues: a row per offset gone backwards or removed, the rest counted."""
    for q in sorted(qa.keys() | qb.keys()):
        x, y = qa.get(q), qb.get(q)
        if x is None:
            tally["offsets_added"] += 1
        elif y is not None and y > x:
            tally["offsets_forward"] += 1
        elif y is None or y < x:
            tally["offsets_removed" if y is None else "offsets_backwards"] += 1
            yield {"kind": "offset", "group": parts[1], "topic": parts[0], "queue_id": q, "a": x, "b": y}
