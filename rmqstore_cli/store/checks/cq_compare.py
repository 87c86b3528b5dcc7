"""The two consume queues of a double-writing 5.x broker, compared unit by unit.

With ``rocksdbCQDoubleWriteEnable`` (5.3.1+; from 5.3.2 ``DefaultMessageStore`` then builds a
``CombineConsumeQueueStore`` over the ``combineCQLoadingCQTypes``, default
``default;defaultRocksDB``) every dispatched message gets a 20-byte unit in
``consumequeue/<topic>/<queueId>/`` *and* a row in the RocksDB database that is the
``consumequeue/`` directory itself (``RocksDBConsumeQueueStore``'s store path is
``StorePathConfigHelper#getStorePathConsumeQueue`` too), so both live in one store
directory. The broker reads one (``combineCQPreferCQType``) and assigns queue offsets from
one (``combineAssignOffsetCQType``); ``CombineConsumeQueueStore#checkSelf`` only logs when
they drift. This module says where they drift: per queue, each side's bounds, the first
cq offset whose unit differs (commit-log offset, size, tags code) and how many units one
side holds that the other does not. docs/format/rocksdb.md "Double write".
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rmqstore_cli.formats.consume_queue import PRE_BLANK_SIZE

from rmqstore_cli.store.files.mapped_files import queue_dirs

if TYPE_CHECKING:  # numpy-backed readers, imported where a queue is opened
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues, RocksDBQueue

#: Cq offsets compared per step (three int64 arrays and a mask per side).
STEP = 1 << 16
UnitTuple = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class QueueComparison:
    """One queue of a double-writing 5.x store (``rocksdbCQDoubleWriteEnable``,
    ``CombineConsumeQueueStore``): the file consume queue against the RocksDB one.
    ``*_first``/``*_end``: the first unit each side holds and one past its last
    (``#getMaxOffsetInQueue``; file pre-blank units are not held; 0, 0: the side has no such
    queue); ``differing``: cq offsets whose units differ; ``only_file`` / ``only_rocksdb``:
    units one side holds and the other does not; ``first_difference``: the lowest cq offset
    where they disagree, with each side's unit there as (commit-log offset, size, tags
    code), None where that side has none.

    Also the library's record (``rmqstore_cli.QueueComparison``, ``Store.compare_consume_queues``):
    its fields are declared here once, ``as_dict()`` its JSON object (units as objects)."""

    topic: str
    queue_id: int
    file_first: int
    file_end: int
    rocksdb_first: int
    rocksdb_end: int
    differing: int
    only_file: int
    only_rocksdb: int
    first_difference: int | None
    file_unit: UnitTuple | None
    rocksdb_unit: UnitTuple | None

    @property
    def agrees(self) -> bool:
        """No unit differs and neither side holds one the other lacks."""
        return self.first_difference is None

    def as_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        for k in ("file_unit", "rocksdb_unit"):
            u = d[k]
            d[k] = None if u is None else {"commitlog_offset": u[0], "size": u[1], "tags_code": u[2]}
        return {**d, "agrees": self.agrees}


def has_file_queues(consumequeue_dir: Path) -> bool:
    """The directory holds at least one ``<topic>/<queueId>/`` queue directory."""
    return next(queue_dirs(consumequeue_dir), None) is not None


def _side(q: ConsumeQueue | RocksDBQueue | None, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(held mask, units as an (n, 3) int64 array) of ``q`` over cq offsets ``[lo, hi)``."""
    n = max(0, hi - lo)
    held = np.zeros(n, bool)
    units = np.zeros((n, 3), np.int64)
    if q is None or hi <= lo:
        return held, units
    for arr, first, _ in q.unit_arrays(lo, hi):
        a = first - lo
        units[a : a + arr.size, 0] = arr["commitlog_offset"]
        units[a : a + arr.size, 1] = arr["size"]
        units[a : a + arr.size, 2] = arr["tags_code"]
        held[a : a + arr.size] = True
    return held, units


def _file_bounds(cq: ConsumeQueue) -> tuple[int, int]:
    """(first real unit, end) of a file queue: pre-blank units below a queue's start are
    not units (``ConsumeQueue#fillPreBlank``)."""
    end = cq.max_offset
    start = cq.min_file_offset
    for arr, first, _ in cq.unit_arrays(start, end):
        real = np.flatnonzero(arr["size"] != PRE_BLANK_SIZE)
        if real.size:
            return first + int(real[0]), end
    return end, end


def compare_queue(
    topic: str, queue_id: int, file_cq: ConsumeQueue | None, rocks_q: RocksDBQueue | None
) -> QueueComparison:
    """Compare one queue; ``file_cq`` / ``rocks_q`` None when that side lacks it."""
    f_lo, f_hi = _file_bounds(file_cq) if file_cq is not None else (0, 0)
    r_lo, r_hi = rocks_q.key_bounds if rocks_q is not None else (0, 0)
    lo, hi = _union((f_lo, f_hi), (r_lo, r_hi))
    differing = only_f = only_r = 0
    first: tuple[int, UnitTuple | None, UnitTuple | None] | None = None
    for a in range(lo, hi, STEP):
        b = min(hi, a + STEP)
        fh, fu = _side(file_cq, max(a, f_lo), max(a, min(b, f_hi)))
        fh, fu = _pad(fh, fu, max(a, f_lo) - a, b - a)
        rh, ru = _side(rocks_q, max(a, r_lo), max(a, min(b, r_hi)))
        rh, ru = _pad(rh, ru, max(a, r_lo) - a, b - a)
        both = fh & rh
        diff = both & (fu != ru).any(axis=1)
        differing += int(diff.sum())
        only_f += int((fh & ~rh).sum())
        only_r += int((rh & ~fh).sum())
        bad = np.flatnonzero(diff | (fh != rh))
        if first is None and bad.size:
            i = int(bad[0])
            first = (a + i, _unit(fh, fu, i), _unit(rh, ru, i))
    f_off, f_unit, r_unit = first if first is not None else (None, None, None)
    return QueueComparison(topic, queue_id, f_lo, f_hi, r_lo, r_hi, differing, only_f, only_r, f_off, f_unit, r_unit)


def _union(*spans: tuple[int, int]) -> tuple[int, int]:
    """The smallest [lo, hi) holding every non-empty span (0, 0: none is)."""
    held = [s for s in spans if s[1] > s[0]]
    return min((s[0] for s in held), default=0), max((s[1] for s in held), default=0)


def _pad(held: np.ndarray, units: np.ndarray, at: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``held``/``units`` placed at index ``at`` of arrays of length ``n``."""
    h = np.zeros(n, bool)
    u = np.zeros((n, 3), np.int64)
    h[at : at + held.size] = held
    u[at : at + held.size] = units
    return h, u


def _unit(held: np.ndarray, units: np.ndarray, i: int) -> UnitTuple | None:
    return (int(units[i, 0]), int(units[i, 1]), int(units[i, 2])) if held[i] else None


def compare_stores(
    consumequeue_dir: Path,
    cq_file_size: int,
    rocks: RocksDBConsumeQueues,
    topic: str | None = None,
    queue_id: int | None = None,
) -> Iterator[QueueComparison]:
    """Every queue of either side (or those of ``topic``/``queue_id``), sorted: the file
    queues under ``consumequeue_dir`` against ``rocks`` (a ``RocksDBConsumeQueues``)."""
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue

    files = {(t, q) for t, q, _ in queue_dirs(consumequeue_dir)}
    rows = set(rocks.queue_ids())
    for t, q in sorted(files | rows):
        if (topic is not None and t != topic) or (queue_id is not None and q != queue_id):
            continue
        fcq = ConsumeQueue(consumequeue_dir, t, q, cq_file_size) if (t, q) in files else None
        try:
            yield compare_queue(t, q, fcq, rocks.queue(t, q) if (t, q) in rows else None)
        finally:
            if fcq is not None:
                fcq.close()
