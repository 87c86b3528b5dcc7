"""Traffic over time (``stats --by minute|hour``): messages and bytes per interval of store
time, from one columnar walk of the commit log.

Every valid record counts (``CommitLog#scan_blocks``, the records
``checkMessageAndReturnSize`` calls valid; a damaged stretch ends its file, the next file
is read), as ``--exact`` counts them: a consume queue holds no store time, so the commit
log is read either way. A record falls in the interval of its store timestamp
(``MessageExt#storeTimestamp``, the time the broker appended it), floored to the minute or
the hour of epoch time (UTC). The intervals between the first and the last that hold no
record are kept with zero counts, so a stop shows as a run of zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rmqstore_cli.store.answers.stats_exact import learn_topic_names, topic_mask
from rmqstore_cli.store.records.message import Message

#: The interval lengths ``by`` may name, in milliseconds.
INTERVALS = {"minute": 60_000, "hour": 3_600_000}
#: At most this many intervals are laid out with the empty ones: a store time far off
#: (a clock set wrong) would otherwise ask for millions of zero rows.
MAX_INTERVALS = 200_000


@dataclass(frozen=True)
class Interval:
    """One interval ``[start, start + length)`` of store time: the records stored in it."""

    start_timestamp: int
    end_timestamp: int
    messages: int
    bytes: int

    def to_dict(self, topic: str | None) -> dict:
        return {
            "start_timestamp": self.start_timestamp,
            "end_timestamp": self.end_timestamp,
            "topic": topic,
            "messages": self.messages,
            "bytes": self.bytes,
        }


class _Buckets:
    """Messages and bytes per interval index (store time // length), summed over blocks."""

    def __init__(self, length: int):
        self.length = length
        self.counts: dict[int, list[int]] = {}
        self.first: int | None = None
        self.last: int | None = None

    def add(self, ts: np.ndarray, sizes: np.ndarray) -> None:
        if not ts.size:
            return
        lo, hi = int(ts.min()), int(ts.max())
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)
        keys, inv = np.unique(ts.astype(np.int64) // self.length, return_inverse=True)
        n = np.bincount(inv, minlength=keys.size)
        b = np.bincount(inv, weights=sizes.astype(np.float64), minlength=keys.size)
        for k, c, s in zip(keys.tolist(), n.tolist(), b.tolist(), strict=True):
            e = self.counts.setdefault(k, [0, 0])
            e[0] += c
            e[1] += int(s)

    def intervals(self) -> tuple[list[Interval], bool]:
        """Every interval from the first to the last, the empty ones with zero counts (only
        the non-empty ones past :data:`MAX_INTERVALS`: the second value says so)."""
        if not self.counts:
            return [], True
        lo, hi, n = min(self.counts), max(self.counts), self.length
        keys = range(lo, hi + 1) if hi - lo < MAX_INTERVALS else sorted(self.counts)
        return [Interval(k * n, (k + 1) * n, *self.counts.get(k, (0, 0))) for k in keys], len(keys) == hi - lo + 1


def traffic(store: Any, by: str, topic: str | None = None) -> _Buckets:
    """The records of the commit log (of ``topic`` alone when given) per ``by`` interval
    (``minute`` or ``hour``) of their store timestamps."""
    buckets = _Buckets(INTERVALS[by])
    names: list[str] = []
    for rec in store.commitlog.scan_blocks(skip_mismatch=True, every_file=True):
        if isinstance(rec, Message):
            if topic is None or rec.topic == topic:
                buckets.add(np.array([rec.store_timestamp], np.int64), np.array([rec.total_size], np.int64))
            continue
        names_b, tid = rec.topics
        learn_topic_names(names, names_b)
        ts, sizes = rec.store_timestamp, rec.rb.total
        if topic is not None:
            keep = topic_mask(names, tid, topic)
            ts, sizes = ts[keep], sizes[keep]
        buckets.add(ts, sizes)
    return buckets


@dataclass
class TrafficResult:
    """The intervals shown (as the JSON objects) and the summary; ``topic_missing``: a topic
    was asked for and no record of it was found."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    topic_missing: bool = False
    notes: list[str] = field(default_factory=list)


def traffic_report(ms: Any, by: str, topic: str | None = None, limit: int | None = None) -> TrafficResult:
    """``stats --by minute|hour``: the intervals oldest first (the last ``limit`` of them),
    gaps as zero rows, and a summary of the totals."""
    buckets = traffic(ms, by, topic)
    intervals, whole = buckets.intervals()
    if topic is not None and not intervals:
        return TrafficResult([], {}, topic_missing=True)
    shown = _last(intervals, limit)
    notes = [stop_note(s) for s in ms.commitlog.stops]
    if not whole:
        notes.append(f"the store times span over {MAX_INTERVALS} intervals: only the {by}s holding records are listed")
    summary = _summary(ms, by, topic, intervals, shown, buckets, notes)
    return TrafficResult([i.to_dict(topic) for i in shown], summary, notes=notes)


def _last(intervals: list[Interval], limit: int | None) -> list[Interval]:
    """The last ``limit`` intervals (all when None; ``--limit 0`` shows none)."""
    if limit is None:
        return intervals
    return intervals[-limit:] if limit else []


def _summary(
    ms: Any,
    by: str,
    topic: str | None,
    intervals: list[Interval],
    shown: list[Interval],
    buckets: _Buckets,
    notes: list[str],
) -> dict[str, Any]:
    """The totals over every interval (not only those shown) and the walk's notes."""
    return {
        "store": str(ms.config.root),
        "method": "commitlog",
        "by": by,
        "topic": topic,
        "interval_ms": INTERVALS[by],
        "rows": len(intervals),
        "shown": len(shown),
        "empty_intervals": sum(1 for i in intervals if not i.messages),
        "messages": sum(i.messages for i in intervals),
        "bytes": sum(i.bytes for i in intervals),
        "first_store_timestamp": buckets.first,
        "last_store_timestamp": buckets.last,
        "notes": notes,
    }


def stop_note(stop: Any) -> str:
    """A place where the commit log's data stops early (as ``stats --exact`` says it)."""
    return f"the commit log's data stops at {stop.offset} in {stop.file}: {stop.reason}"
