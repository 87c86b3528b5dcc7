"""The RocksDB consume queue (``storeType=defaultRocksDB``, 5.2+), read-only.

``RocksDBConsumeQueueStore`` keeps every queue's units in one RocksDB database, the
directory ``consumequeue/`` itself (``ConsumeQueueRocksDBStorage``): the ``default``
column family holds one 28-byte value per unit under (topic, queueId, cqOffset), the
``offset`` family each queue's ``min`` and ``max`` (commit-log offset, cq offset) and the
dispatch checkpoint under ``CHECKPOINT_TOPIC`` (``RocksDBConsumeQueueOffsetTable``).
Layouts: ``formats/rocksdb_cq.py``.

The binding is ``rocksdict`` (the ``rocksdb`` extra), imported only here. Even its
read-only open writes beside the database (``rocksdict-config.json``, RocksDB's info
``LOG``), so the database is opened through :func:`rocksdb_db.shadow_dir`: a temp directory
of links to its files, where those writes land instead. A :class:`RocksDBQueue` gives the
same views as the file :class:`~rmqstore_cli.store.queues.consume_queue.ConsumeQueue`
(``max_offset``, ``min_offset``, ``units``, ``unit_arrays``, ``units_at``), so dump-cq,
search-offset, stats and verify read either.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rmqstore_cli.formats import rocksdb_cq as fmt

from rmqstore_cli.store.files.rocksdb_db import ReadOnlyDB
from rmqstore_cli.store.queues.consume_queue import Unit

_VALUE = struct.Struct(fmt.CQ_VALUE_FORMAT)
_OFFSET_VALUE = struct.Struct(fmt.OFFSET_VALUE_FORMAT)
_CHECKPOINT = struct.Struct(fmt.CHECKPOINT_VALUE_FORMAT)
_KEY_HEAD = struct.Struct(fmt.KEY_TOPIC_LENGTH_FORMAT)
_CQ_OFFSET = struct.Struct(fmt.KEY_CQ_OFFSET_FORMAT)
#: Units read from the database per numpy block (bounded memory on a queue of any length).
BLOCK_UNITS = 1 << 16
#: What the source column of dump-cq says for a unit read from the database.
SOURCE = "rocksdb"


def cq_key(topic: bytes, queue_id: int, cq_offset: int) -> bytes:
    """``RocksDBConsumeQueueTable#buildCQKeyByteBuffer0``."""
    return fmt.CqKey.build({"topic_length": len(topic), "topic": topic, "queue_id": queue_id, "cq_offset": cq_offset})


def queue_prefix(topic: bytes, queue_id: int) -> bytes:
    """The first bytes of every key of one queue (its cq offset follows)."""
    return cq_key(topic, queue_id, 0)[: -_CQ_OFFSET.size]


def _parse_key(key: bytes, fixed: int, layout):
    """``key`` parsed with ``layout`` when it has the broker's shape (its topic length, the
    fixed part and the CTRL_1 separators), else None."""
    if len(key) < fixed:
        return None
    n = _KEY_HEAD.unpack_from(key)[0]
    if n < 0 or len(key) != fixed + n:
        return None
    try:
        return layout.parse(key)
    except Exception:  # construct's ConstError: a separator is not CTRL_1
        return None


def parse_cq_key(key: bytes) -> tuple[bytes, int, int] | None:
    """(topic, queueId, cqOffset) of a ``default``-family key, or None when it is not the
    broker's layout (length, separators)."""
    k = _parse_key(key, fmt.CQ_KEY_FIXED, fmt.CqKey)
    return None if k is None else (k.topic, k.queue_id, k.cq_offset)


def parse_offset_key(key: bytes) -> tuple[bytes, bytes, int] | None:
    """(topic, ``max``/``min``, queueId) of an ``offset``-family key, or None."""
    k = _parse_key(key, fmt.OFFSET_KEY_FIXED, fmt.OffsetKey)
    if k is None or k.kind not in (fmt.KIND_MAX, fmt.KIND_MIN):
        return None
    return k.topic, k.kind, k.queue_id


@dataclass(slots=True)
class OffsetEntry:
    """One row of the ``offset`` family (``RocksDBConsumeQueueOffsetTable.OffsetEntry``)."""

    topic: str
    queue_id: int
    kind: str  # "max" or "min"
    commitlog_offset: int
    cq_offset: int


@dataclass(slots=True)
class BadRow:
    """A row not in the broker's layout: which family, its key, why."""

    family: str
    key: bytes
    problem: str


class RocksDBConsumeQueues(ReadOnlyDB):
    """The database, opened read-only once; one :class:`RocksDBQueue` per queue."""

    skip_dirs = True  # rocksdbCQDoubleWriteEnable: consumequeue/<topic>/ beside the database

    def __init__(self, directory: Path):
        super().__init__(directory, "the RocksDB consume queue")
        self.offsets = self.family(fmt.OFFSET_CF)
        self._table: dict[tuple[str, int], dict[str, OffsetEntry]] | None = None
        self.bad_rows: list[BadRow] = []
        self.max_phy_offset: int | None = None
        self._queue_ids: list[tuple[str, int]] | None = None

    # ------------------------------------------------------------------ the offset family
    def offset_table(self) -> dict[tuple[str, int], dict[str, OffsetEntry]]:
        """(topic, queueId) -> {"max": …, "min": …}, read once (``#forEach``); the
        checkpoint goes to :attr:`max_phy_offset`, rows off the layout to :attr:`bad_rows`."""
        if self._table is not None:
            return self._table
        table: dict[tuple[str, int], dict[str, OffsetEntry]] = {}
        for key, value in self.offsets.items() if self.offsets is not None else ():
            parsed = parse_offset_key(key)
            if parsed is None:
                self.bad_rows.append(BadRow(fmt.OFFSET_CF, key, "key not in the offset layout"))
                continue
            topic = parsed[0].decode("utf-8", "replace")
            if topic == fmt.CHECKPOINT_TOPIC and len(value) == fmt.CHECKPOINT_VALUE_SIZE:
                self.max_phy_offset = _CHECKPOINT.unpack(value)[0]
                continue
            if len(value) != fmt.OFFSET_VALUE_SIZE:
                self.bad_rows.append(
                    BadRow(fmt.OFFSET_CF, key, f"value of {len(value)} bytes, not {fmt.OFFSET_VALUE_SIZE}")
                )
                continue
            phy, cq = _OFFSET_VALUE.unpack(value)
            kind = parsed[1].decode()
            table.setdefault((topic, parsed[2]), {})[kind] = OffsetEntry(topic, parsed[2], kind, phy, cq)
        self._table = table
        return table

    # ------------------------------------------------------------------ queues
    def queue_ids(self) -> list[tuple[str, int]]:
        """Every (topic, queueId) with units or offset rows, sorted; ``CHECKPOINT_TOPIC`` is
        not a queue. Keys are walked one queue at a time: after a queue's first key the
        iterator seeks past the queue (``#buildDeleteCQKey``'s CTRL_2 end). Read once."""
        if self._queue_ids is not None:
            return self._queue_ids
        found = {q for q in self.offset_table()}
        it = self.db.iter()
        it.seek_to_first()
        while it.valid():
            key = it.key()
            parsed = parse_cq_key(key)
            if parsed is None:
                self.bad_rows.append(BadRow(fmt.DEFAULT_CF, key, "key not in the consume-queue layout"))
                it.next()
                continue
            topic, qid, _ = parsed
            found.add((topic.decode("utf-8", "replace"), qid))
            it.seek(queue_prefix(topic, qid)[:-1] + fmt.CTRL_2)
        self._queue_ids = sorted(found)
        return self._queue_ids

    def queue(self, topic: str, queue_id: int) -> RocksDBQueue:
        return RocksDBQueue(self, topic, queue_id)

    def queues(self) -> Iterator[RocksDBQueue]:
        for topic, qid in self.queue_ids():
            yield self.queue(topic, qid)


class RocksDBQueue:
    """One queue of the database, with the file ``ConsumeQueue``'s read views."""

    source = SOURCE

    def __init__(self, store: RocksDBConsumeQueues, topic: str, queue_id: int):
        self.store = store
        self.topic = topic
        self.queue_id = queue_id
        self.dir = store.dir
        self._topic = topic.encode("utf-8")
        self._prefix = queue_prefix(self._topic, queue_id)
        self._key_bounds: tuple[int, int] | None = None
        #: Values of a length other than 28 met while reading: (cq offset, length).
        self.bad_values: list[tuple[int, int]] = []

    @property
    def offset_rows(self) -> dict[str, OffsetEntry]:
        """This queue's ``min`` and ``max`` rows of the offset family (either may be absent)."""
        return self.store.offset_table().get((self.topic, self.queue_id), {})

    @property
    def key_bounds(self) -> tuple[int, int]:
        """(first cq offset, last + 1) of the queue's keys; (0, 0) when it has none."""
        if self._key_bounds is None:
            first = self._end_key(self.store.db.items(from_key=self._prefix))
            last = self._end_key(self.store.db.items(backwards=True, from_key=self._prefix[:-1] + fmt.CTRL_2))
            self._key_bounds = (first, last + 1) if first is not None and last is not None else (0, 0)
        return self._key_bounds

    def _end_key(self, rows) -> int | None:
        """The cq offset of the first well-formed key of this queue in ``rows`` (an iteration
        from one end of the queue's range); keys of another length are skipped."""
        want = len(self._prefix) + _CQ_OFFSET.size
        for key, _ in rows:
            if not key.startswith(self._prefix):
                return None
            if len(key) == want:
                return _CQ_OFFSET.unpack_from(key, len(self._prefix))[0]
        return None

    @property
    def max_offset(self) -> int:
        """``RocksDBConsumeQueueStore#getMaxOffsetInQueue``: the ``max`` row's cq offset + 1;
        without that row (its family lost), the end of the keys."""
        row = self.offset_rows.get("max")
        return row.cq_offset + 1 if row is not None else self.key_bounds[1]

    @property
    def min_file_offset(self) -> int:
        """The first unit held (the file CQ's first file start): the first key."""
        return self.key_bounds[0]

    def min_offset(self, commitlog_min_offset: int) -> int:
        """``RocksDBConsumeQueueOffsetTable#getMinCqOffset``: the ``min`` row when its commit-log
        offset is still in the log, else (``#correctMinCqOffset``) the first unit at or after
        the log's minimum (``#binarySearchInCQ`` with min), max + 1 when the whole queue expired."""
        row = self.offset_rows.get("min")
        if row is not None and row.commitlog_offset >= commitlog_min_offset:
            return row.cq_offset
        top = self.offset_rows.get("max")
        if top is None:
            return 0 if row is None else row.cq_offset
        if top.commitlog_offset < commitlog_min_offset:
            return top.cq_offset + 1
        lo = row.cq_offset if row is not None else 0
        found = self._first_unit_from(lo, top.cq_offset, commitlog_min_offset)
        return found if found != -1 else lo

    def _first_unit_from(self, lo: int, hi: int, commitlog_min_offset: int) -> int:
        """``RocksDBConsumeQueueOffsetTable#binarySearchInCQ`` with min: the first unit in
        ``[lo, hi]`` whose commit-log offset is at or after ``commitlog_min_offset`` (-1 when
        none is seen; a missing key is stepped over)."""
        found = -1
        while hi >= lo:
            mid = lo + ((hi - lo) >> 1)
            u = self.unit(mid)
            if u is None:
                lo = mid + 1
                continue
            if u[0] == commitlog_min_offset:
                found = mid
                break
            if u[0] > commitlog_min_offset:
                hi, found = mid - 1, mid
            else:
                lo = mid + 1
        return found

    # ------------------------------------------------------------------ units
    def value(self, cq_offset: int) -> tuple[int, int, int, int] | None:
        """``RocksDBConsumeQueueTable#getCQInKV``: (phyOffset, size, tagsCode, storeTime), or
        None when there is no such key or its value is not 28 bytes."""
        v = self.store.db.get(self._prefix + _CQ_OFFSET.pack(cq_offset))
        if v is None:
            return None
        if len(v) != fmt.CQ_VALUE_SIZE:
            self.bad_values.append((cq_offset, len(v)))
            return None
        return _VALUE.unpack(v)

    def unit(self, cq_offset: int) -> tuple[int, int, int] | None:
        """(phyOffset, size, tagsCode) of one unit, as a 20-byte file unit reads."""
        v = self.value(cq_offset)
        return None if v is None else v[:3]

    def value_blocks(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, int]]:
        """The 28-byte values of ``[start, stop)`` in key order as numpy records
        (``CQ_VALUE_DTYPE``), one block per run of consecutive cq offsets (a missing key or
        a value of the wrong length ends a run), at most :data:`BLOCK_UNITS` each."""
        dtype = fmt.CQ_VALUE_DTYPE
        buf: list[bytes] = []
        first = expect = start
        for off, v in self._unit_items(start, stop):
            if off != expect or len(v) != fmt.CQ_VALUE_SIZE or len(buf) >= BLOCK_UNITS:
                if buf:
                    yield np.frombuffer(b"".join(buf), dtype), first
                buf = []
                if len(v) != fmt.CQ_VALUE_SIZE:
                    self.bad_values.append((off, len(v)))
                    expect = first = off + 1
                    continue
                first = off
            buf.append(v)
            expect = off + 1
        if buf:
            yield np.frombuffer(b"".join(buf), dtype), first

    def _unit_items(self, start: int, stop: int) -> Iterator[tuple[int, bytes]]:
        """(cq offset, value) of this queue's unit keys in ``[start, stop)``, in key order
        (a key of another length under the queue's prefix is not a unit's: skipped)."""
        for key, v in self.store.db.items(from_key=self._prefix + _CQ_OFFSET.pack(max(start, 0))):
            if not key.startswith(self._prefix):
                return
            if len(key) != len(self._prefix) + _CQ_OFFSET.size:
                continue
            off = _CQ_OFFSET.unpack_from(key, len(self._prefix))[0]
            if off >= stop:
                return
            yield off, v

    def unit_arrays(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, int, str]]:
        """The file CQ's ``unit_arrays``: (units with the 20-byte unit's fields, first offset,
        where from) per run of consecutive units in ``[start, stop)``."""
        for arr, first in self.value_blocks(start, stop):
            yield arr[["commitlog_offset", "size", "tags_code"]], first, SOURCE

    def units_at(self, logical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(found mask, offset, size, tagsCode) of the units at ``logical`` (the file CQ's
        ``units_at``): offsets close together (a scan's batch) by one range read, scattered
        ones by key (``RocksDBConsumeQueueTable#rangeQuery``'s multiGet)."""
        n = logical.size
        found = np.zeros(n, bool)
        off, size, tags = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        idx = np.flatnonzero(logical >= 0)
        if not idx.size:
            return found, off, size, tags
        lo, hi = int(logical[idx].min()), int(logical[idx].max()) + 1
        if hi - lo <= 2 * idx.size + BLOCK_UNITS:
            for arr, first in self.value_blocks(lo, hi):
                at = logical - first
                m = (logical >= 0) & (at >= 0) & (at < arr.size)
                u = arr[at[m]]
                found[m] = True
                off[m], size[m], tags[m] = u["commitlog_offset"], u["size"], u["tags_code"]
            return found, off, size, tags
        for a in range(0, idx.size, BLOCK_UNITS):
            sel = idx[a : a + BLOCK_UNITS]
            keys = [self._prefix + _CQ_OFFSET.pack(int(x)) for x in logical[sel].tolist()]
            for i, v in zip(sel.tolist(), self.store.db.get(keys), strict=True):
                if v is not None and len(v) == fmt.CQ_VALUE_SIZE:
                    found[i] = True
                    off[i], size[i], tags[i], _ = _VALUE.unpack(v)
        return found, off, size, tags

    def units(self, start: int = 0, stop: int | None = None) -> Iterator[Unit]:
        """The file queue's ``units``: the units in ``[start, stop)`` one by one."""
        stop = self.max_offset if stop is None else stop
        for arr, first, _ in self.unit_arrays(start, stop):
            for j, (o, s, t) in enumerate(arr.tolist()):
                yield Unit(first + j, o, s, t, SOURCE)

    # ------------------------------------------------------------------ verify's QueueState
    def map_files(self) -> None:
        """Nothing to map: the database is open."""

    def file_base(self, logical: int) -> int:
        """Every unit is its own row: no file groups them."""
        return logical

    def file_path(self, base: int) -> Path | None:
        """No file holds a unit (a file queue's tail check has nothing to read)."""
        return None

    def file_of(self, logical: int) -> tuple[Path, None]:
        """Where unit ``logical`` is: the database (no byte offset)."""
        return self.dir, None

    def file_names(self) -> list[str]:
        """Where the units are: the database (``[SOURCE]``), or nothing when it holds none."""
        return [SOURCE] if self.key_bounds[1] > self.key_bounds[0] or self.offset_rows else []

    def close(self) -> None:
        """The database closes with :class:`RocksDBConsumeQueues`."""


def search_by_time(q: RocksDBQueue, when: int, commitlog_min_offset: int, upper: bool = False) -> int:
    """``RocksDBConsumeQueueStore#getOffsetInQueueByTime`` → ``RocksDBConsumeQueueTable#
    binarySearchInCQByTime`` (5.3.3) with BoundaryType LOWER (or UPPER), line by line: the
    store times come from the values, not from the commit log. 0 when the queue has no
    ``max`` row; -1 where the broker answers -1 (apache/rocketmq#8736)."""
    rows = q.offset_rows
    if "max" not in rows:
        return 0
    ceiling = rows["max"].cq_offset
    floor = q.min_offset(commitlog_min_offset)
    outside = _outside_times(q, when, floor, ceiling, upper)
    if outside is not None:
        return outside
    got = _bisect_by_time(q, when, floor, ceiling, commitlog_min_offset)
    if got is None:
        return 0
    target, left, right = got
    if target == -1:
        return left if upper else right
    step, edge = (1, ceiling) if upper else (-1, floor)
    while (nxt := target + step) * step <= edge * step:
        v = q.value(nxt)
        if v is None or v[3] != when:  # the broker would throw on a missing key here
            break
        target = nxt
    return target


def _outside_times(q: RocksDBQueue, when: int, floor: int, ceiling: int, upper: bool) -> int | None:
    """``binarySearchInCQByTime``'s answer when ``when`` is after the last unit's store time or
    before the first's; None when it is within them."""
    v = q.value(ceiling)
    if v is not None and v[3] < when:
        return ceiling if upper else ceiling + 1
    v = q.value(floor)
    if v is not None and v[3] > when:
        return 0 if upper else floor
    return None


def _bisect_by_time(
    q: RocksDBQueue, when: int, low: int, high: int, commitlog_min_offset: int
) -> tuple[int, int, int] | None:
    """``binarySearchInCQByTime``'s bisection: (a unit stored at ``when`` or -1, the last unit
    seen before it, the last seen after it; -1 when none). A missing key is stepped over, a unit
    whose message expired counts as before; None where a negative store time makes the broker
    answer 0."""
    target = left = right = -1
    while high >= low:
        mid = low + ((high - low) >> 1)
        v = q.value(mid)
        if v is None:
            low = mid + 1
            continue
        if v[0] < commitlog_min_offset:
            low, left = mid + 1, mid
            continue
        if v[3] < 0:
            return None
        if v[3] == when:
            target = mid
            break
        if v[3] > when:
            high, right = mid - 1, mid
        else:
            low, left = mid + 1, mid
    return target, left, right
