"""Where in a consume queue is time T: the consume-queue offset of the first message stored
at or after T (the broker's ``searchOffset``), and what the broker itself answers.

Three ways, one per question:

* :func:`first_at_or_after` (the default): a binary search over the units of
  ``[min offset, max offset)`` by the store timestamp of each unit's message, read and
  checked through the commit log. Units whose record has expired (below the commit log's
  first file) lie below the queue's min offset and are never an answer, as in the broker.
  A unit whose message cannot be read (beyond the commit log's end, no valid record there)
  takes the time of the next readable unit after it, so a consumer rewound to the answer
  does not skip it; with no readable unit after it, it counts as stored after T. Store
  times rise within a queue except where the broker's clock stepped back: then the search
  still returns a boundary (the unit before is older than T, this one is not), and the
  probes that saw time go backwards are reported; :func:`scan_first_at_or_after` reads
  every unit and finds the first.
* :func:`broker_49` — ``ConsumeQueue#getOffsetInQueueByTime(long)`` of 4.9.x: the CQ file
  is chosen by its modification time (``MappedFileQueue#getMappedFileByTime``), an exact
  time match returns whichever equal unit the bisection hits, otherwise the nearer of the
  two neighbours (ties to the older); no unit at or after T gives the last unit before T,
  not the max offset; a message that cannot be read makes it return 0.
* :func:`broker_5` — ``ConsumeQueue#getOffsetInQueueByTime(long, BoundaryType)`` of 5.x:
  the file is chosen by the store times of its first and last units
  (``MappedFileQueue#getConsumeQueueMappedFileByTime``); LOWER is the first unit at or
  after T (the max offset if none), UPPER the last unit at or before T; the result is
  clamped to [min, max] by ``ConsumeQueueStore#getOffsetInQueueByTime``.

Both broker ways read the time as ``CommitLog#pickupStoreTimestamp`` does: the eight bytes
at the store-timestamp position of whatever lies at the unit's commit-log offset, with no
check of the record (−1 below the commit log's min offset or past its end).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from itertools import pairwise

from rmqstore_cli.formats.commitlog import AFTER_BORN_HOST, HEAD, HEAD_SIZE, HOST_SIZE
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE, UNIT_FORMAT, UNIT_TAGS_CODE_AT
from rmqstore_cli.formats.sysflag import BORNHOST_V6_FLAG

from rmqstore_cli.store.commitlog import CommitLog, Status
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue, is_pre_blank
from rmqstore_cli.store.records.fields import keys_dict

_UNIT = struct.Struct(UNIT_FORMAT)
_SYS_FLAG = HEAD["sys_flag"]  # MessageDecoder.SYSFLAG_POSITION
_STORE_TS = AFTER_BORN_HOST["store_timestamp"]
_STORE_TS_V4 = HEAD_SIZE + HOST_SIZE[False] + _STORE_TS.offset  # CommitLog#pickupStoreTimestamp
_STORE_TS_V6 = HEAD_SIZE + HOST_SIZE[True] + _STORE_TS.offset
_I32 = struct.Struct(_SYS_FLAG.fmt)
_I64 = struct.Struct(_STORE_TS.fmt)


@dataclass
class SearchResult:
    """One queue's answer. ``offset`` is None only when the broker's call would throw."""

    topic: str
    queue_id: int
    time: int
    method: str
    offset: int | None
    store_timestamp: int | None
    min_offset: int
    max_offset: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = keys_dict(self, "topic queue_id time method offset store_timestamp min_offset max_offset")
        if self.notes:
            d["note"] = "; ".join(self.notes)
        return d


class BrokerWouldThrow(Exception):
    """The broker's Java code would throw here (a unit too short to hold a store timestamp)."""


def java_div(a: int, b: int) -> int:
    """Java's ``long`` division: truncates toward zero (``-1 / 20 == 0``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ------------------------------------------------------------------ reading one unit's time


class TimeReader:
    """Store timestamps of the messages behind consume-queue units, cached per unit."""

    def __init__(self, commitlog: CommitLog):
        self.commitlog = commitlog
        self.min_offset = commitlog.min_offset
        self._end: int | None = None

    def checked(self, phy: int, size: int) -> tuple[int | None, str | None]:
        """(store timestamp, None) of a valid record at ``phy``, or (None, why not)."""
        if phy == 0 and size == PRE_BLANK_SIZE:
            return None, "a pre-blank unit"
        if phy < self.min_offset:
            return None, f"expired: the commit log starts at {self.min_offset}"
        c = self.commitlog.check_at(phy)
        if c is None:
            return None, f"no commit-log file holds offset {phy}"
        if c.message is None or c.status in (Status.INVALID, Status.BLANK):
            return None, f"no valid record at commit-log offset {phy}: {c.reason or c.status.value}"
        return c.message.store_timestamp, None

    @property
    def end(self) -> int:
        """``CommitLog#getMaxOffset`` after recovery (read only when a pick-up needs it)."""
        if self._end is None:
            self._end = self.commitlog.max_offset()
        return self._end

    def pickup(self, phy: int, size: int) -> int:
        """``CommitLog#pickupStoreTimestamp`` (4.9.7 and 5.3.3): −1 below the min offset or
        when ``[phy, phy+size)`` is not inside the readable data (``getMessage`` →
        ``selectMappedBuffer(pos, size)`` is null); otherwise the long at the store-timestamp
        position, whatever the bytes there are. A ``size`` too short for the fields makes the
        broker's ``ByteBuffer#getInt/getLong`` throw."""
        if phy < self.min_offset or size < 0:
            return -1
        f = self._file_holding(phy)
        if f is None:
            return -1
        buf = f.buffer()
        pos = phy - f.file_from_offset
        if pos + size > self._readable(f, buf):
            return -1
        return _store_timestamp_at(buf, pos, size, phy)

    def _file_holding(self, phy: int):
        """The file whose range holds ``phy`` (offset 0: the first file), or None."""
        files = self.commitlog.files
        f = self.commitlog.queue.find(phy) if phy != 0 else (files[0] if files else None)
        if f is None or not (f.file_from_offset <= phy < f.end_offset):
            return None
        return f

    def _readable(self, f, buf) -> int:
        """How many bytes of ``f`` are readable data: all of it, but for the last file up to
        the end of the log (its zero tail is not)."""
        if f is self.commitlog.files[-1]:
            return min(len(buf), self.end - f.file_from_offset)
        return len(buf)


def _store_timestamp_at(buf, pos: int, size: int, phy: int) -> int:
    """The long at the store-timestamp position of the record at ``pos`` (its place set by the
    born host's width in SYSFLAG), whatever the bytes there are; a ``size`` too short for
    the fields makes the broker's ``ByteBuffer#getInt/getLong`` throw."""
    if size < _SYS_FLAG.offset + _SYS_FLAG.size:
        raise BrokerWouldThrow(f"unit size {size} at commit-log offset {phy} is too short to read sysFlag")
    sys_flag = _I32.unpack_from(buf, pos + _SYS_FLAG.offset)[0]
    at = _STORE_TS_V6 if sys_flag & BORNHOST_V6_FLAG else _STORE_TS_V4
    if size < at + _STORE_TS.size:
        raise BrokerWouldThrow(f"unit size {size} at commit-log offset {phy} is too short to read the store timestamp")
    return _I64.unpack_from(buf, pos + at)[0]


def _unit(cq: ConsumeQueue, offset: int) -> tuple[int, int, int] | None:
    if not isinstance(cq, ConsumeQueue):  # a RocksDBQueue reads its unit by key
        return cq.unit(offset)
    f = cq.queue.find(offset * CQ_STORE_UNIT_SIZE)
    if f is None:
        return None
    buf = f.buffer()
    at = offset * CQ_STORE_UNIT_SIZE - f.file_from_offset
    return _UNIT.unpack_from(buf, at) if at + CQ_STORE_UNIT_SIZE <= len(buf) else None


def _first_live(cq: ConsumeQueue, start: int, end: int) -> int:
    """Skip the pre-blank units (``ConsumeQueue#fillPreBlank``) at the start of a queue."""
    while start < end:
        u = _unit(cq, start)
        if u is None or not is_pre_blank(*u):
            return start
        start += 1
    return start


# ------------------------------------------------------------------ the default: first at or after


def first_at_or_after(cq: ConsumeQueue, reader: TimeReader, when: int) -> SearchResult:
    """The first unit of ``[min, max)`` whose message was stored at or after ``when`` (module
    docstring: unreadable units, clock steps), by bisection: O(log n) messages read. The min
    offset is 5.x's (a queue whose every unit expired has min = max), so such a queue answers
    its max offset."""
    lo0, end = min_logic_offset(cq, reader, "5") // CQ_STORE_UNIT_SIZE, cq.max_offset
    lo = _first_live(cq, lo0, end)
    hi = end
    probes: list[tuple[int, int]] = []

    def next_readable(i: int, stop: int) -> tuple[int, int | None]:
        while i < stop:
            u = _unit(cq, i)
            ts = reader.checked(u[0], u[1])[0] if u is not None else None
            if ts is not None:
                probes.append((i, ts))
                return i, ts
            i += 1
        return stop, None

    while lo < hi:  # invariant: units < lo are older than T; units >= hi are not
        mid = (lo + hi) // 2
        j, ts = next_readable(mid, hi)
        if ts is None or ts >= when:  # [mid, j) are unreadable: they take unit j's time
            hi = mid
        else:
            lo = j + 1
    res = SearchResult(cq.topic, cq.queue_id, when, "first", lo, None, lo0, end)
    _describe_answer(cq, reader, res)
    _probe_last(cq, reader, max(lo, end - 64), end, probes)  # one more read: a step back before the end shows
    probes.sort()
    back = [(a, b) for (a, ta), (b, tb) in pairwise(probes) if tb < ta]
    if back:
        a, b = back[0]
        res.notes.append(
            f"store times go backwards between offsets {a} and {b} (a clock step?): the "
            "answer is a boundary, not necessarily the first unit at or after the time; --scan "
            "reads every unit"
        )
    return res


def _probe_last(cq: ConsumeQueue, reader: TimeReader, stop: int, end: int, probes: list[tuple[int, int]]) -> None:
    """Add the last readable unit of ``[stop, end)`` to ``probes``."""
    for i in range(end - 1, stop - 1, -1):
        u = _unit(cq, i)
        ts = reader.checked(u[0], u[1])[0] if u is not None else None
        if ts is not None:
            probes.append((i, ts))
            return


def scan_first_at_or_after(cq: ConsumeQueue, reader: TimeReader, when: int) -> SearchResult:
    """The same question answered by reading every unit in order: exact even when the store's
    clock stepped back. Unreadable units before the answer count with it, as in the search."""
    lo0, end = min_logic_offset(cq, reader, "5") // CQ_STORE_UNIT_SIZE, cq.max_offset
    answer, run = end, None
    for i in range(_first_live(cq, lo0, end), end):
        u = _unit(cq, i)
        ts = reader.checked(u[0], u[1])[0] if u is not None else None
        if ts is None:
            run = i if run is None else run
            continue
        if ts >= when:
            answer = i if run is None else run
            break
        run = None
    else:
        if run is not None:
            answer = run
    res = SearchResult(cq.topic, cq.queue_id, when, "scan", answer, None, lo0, end)
    _describe_answer(cq, reader, res)
    return res


def _describe_answer(cq: ConsumeQueue, reader: TimeReader, res: SearchResult) -> None:
    if res.offset is None or res.offset >= res.max_offset:
        res.notes.append("no message stored at or after the time: the max offset")
        return
    u = _unit(cq, res.offset)
    ts, why = reader.checked(u[0], u[1]) if u is not None else (None, "no unit")
    res.store_timestamp = ts
    if why is not None:
        res.notes.append(f"the message of unit {res.offset} cannot be read ({why})")


# ------------------------------------------------------------------ the broker's own answers


@dataclass
class _CqFile:
    """A consume-queue file as the broker holds it after ``ConsumeQueue#recover``."""

    buf: object
    file_from: int  # bytes
    read_position: int  # bytes readable (the last file: up to the queue's end)
    wrote_position: int
    file_size: int
    mtime_ms: int


def _broker_files(cq: ConsumeQueue) -> list[_CqFile]:
    """The files a started broker keeps: ``MappedFileQueue#truncateDirtyFiles`` deletes files
    past the recovered end and sets the last one's positions to the end."""
    end = cq.max_offset * CQ_STORE_UNIT_SIZE
    out = []
    for f in cq.queue.files:
        if f.file_from_offset > end:
            break
        buf = f.buffer()
        length = len(buf)
        rp = min(length, end - f.file_from_offset) if f.file_from_offset + cq.file_size > end else length
        try:
            mtime = os.stat(f.path).st_mtime_ns // 1_000_000
        except OSError:
            mtime = 0
        out.append(_CqFile(buf, f.file_from_offset, rp, rp, cq.file_size, mtime))
    return out


def _read(f: _CqFile, pos: int, limit: int) -> tuple[int, int]:
    """``byteBuffer.position(pos); getLong(); getInt()`` within ``limit``."""
    if pos < 0 or pos + UNIT_TAGS_CODE_AT > limit:
        raise BrokerWouldThrow(f"the broker would read a unit at byte {pos} of a {limit}-byte buffer")
    phy, size, _ = _UNIT.unpack_from(f.buf, pos)
    return phy, size


def min_logic_offset(cq: ConsumeQueue, reader: TimeReader, version: str) -> int:
    """``ConsumeQueue#minLogicOffset`` after ``#correctMinOffset``, in bytes. 5.x: when even
    the last unit has expired the min offset is the max offset; otherwise both versions give
    the first unit whose message is still in the commit log."""
    end = cq.max_offset
    if version == "5" and end > cq.min_file_offset:
        last = _unit(cq, end - 1)
        if last is not None and last[0] < reader.min_offset:
            return end * CQ_STORE_UNIT_SIZE
    return cq.min_offset(reader.min_offset) * CQ_STORE_UNIT_SIZE


def broker_49(cq: ConsumeQueue, reader: TimeReader, when: int) -> SearchResult:
    """``ConsumeQueue#getOffsetInQueueByTime(long)`` of rocketmq-all-4.9.7, line by line, as
    ``AdminBrokerProcessor#searchOffsetByTimestamp`` returns it (no clamping)."""
    min_logic = min_logic_offset(cq, reader, "4.9")
    res = SearchResult(
        cq.topic, cq.queue_id, when, "broker-4.9", 0, None, min_logic // CQ_STORE_UNIT_SIZE, cq.max_offset
    )
    files = _broker_files(cq)
    try:
        res.offset = _search_49(files, min_logic, reader, when, res.notes)
    except BrokerWouldThrow as e:
        res.offset = None
        res.notes.append(f"the broker's call would throw: {e}")
    _broker_answer_time(cq, reader, res)
    return res


def _search_49(files: list[_CqFile], min_logic: int, reader: TimeReader, when: int, notes: list[str]) -> int:
    if not files:
        notes.append("no consume-queue file: the broker answers 0")
        return 0
    mf = next((f for f in files if f.mtime_ms >= when), files[-1])  # MappedFileQueue#getMappedFileByTime
    notes.append(f"file {mf.file_from:020d} chosen by its mtime")
    if mf.read_position <= 0:  # selectMappedBuffer(0) is null
        notes.append("the chosen file holds no unit: the broker answers 0")
        return 0
    low = min_logic - mf.file_from if min_logic > mf.file_from else 0
    high = mf.read_position - CQ_STORE_UNIT_SIZE
    found = _bisect(mf, low, high, mf.read_position, reader, when, notes)
    if found is None:
        return 0
    return java_div(mf.file_from + _nearest_49(found, when), CQ_STORE_UNIT_SIZE)


def _nearest_49(found: tuple[int, int, int, int, int], when: int) -> int:
    """4.9.7's pick from the search: the unit stored exactly at ``when``, else the nearer in
    time of the last probed below and above it (the one side probed when the other is not)."""
    target, left, left_v, right, right_v = found
    if target != -1:
        return target
    if left_v == -1:
        return right
    if right_v == -1:
        return left
    return right if abs(when - left_v) > abs(when - right_v) else left


def _bisect(
    mf: _CqFile, low: int, high: int, limit: int, reader: TimeReader, when: int, notes: list[str]
) -> tuple[int, int, int, int, int] | None:
    """The binary search both versions of ``ConsumeQueue#getOffsetInQueueByTime`` run over
    the units at byte positions [low, high] of one file (read up to ``limit``): ``(target,
    left, left time, right, right time)`` — the unit stored exactly at ``when``, else the
    last one probed below it and the last above (-1: none); units of expired messages go
    left without a time. None where the broker answers 0 (a message it cannot read)."""
    unit = CQ_STORE_UNIT_SIZE
    target = left = right = -1
    left_v = right_v = -1
    while high >= low:
        mid = (low + high) // (2 * unit) * unit
        phy, size = _read(mf, mid, limit)
        if phy < reader.min_offset:
            low = mid + unit
            left = mid
            continue
        t = reader.pickup(phy, size)
        if t < 0:
            notes.append(f"the message at commit-log offset {phy} cannot be read: the broker answers 0")
            return None
        if t == when:
            target = mid
            break
        if t > when:
            high = mid - unit
            right, right_v = mid, t
        else:
            low = mid + unit
            left, left_v = mid, t
    return target, left, left_v, right, right_v


def broker_5(cq: ConsumeQueue, reader: TimeReader, when: int, boundary: str = "lower") -> SearchResult:
    """``ConsumeQueue#getOffsetInQueueByTime(long, BoundaryType)`` of rocketmq-all-5.3.3 and
    the clamp to [min, max] of ``ConsumeQueueStore#getOffsetInQueueByTime``."""
    min_logic = min_logic_offset(cq, reader, "5")
    lo_q, hi_q = min_logic // CQ_STORE_UNIT_SIZE, cq.max_offset
    res = SearchResult(cq.topic, cq.queue_id, when, f"broker-5-{boundary}", 0, None, lo_q, hi_q)
    files = _broker_files(cq)
    try:
        raw = _search_5(files, min_logic, reader, when, boundary, res.notes)
        res.offset = min(max(raw, lo_q), hi_q)
        if res.offset != raw:
            res.notes.append(f"the search gave {raw}, clamped to [{lo_q}, {hi_q}]")
    except BrokerWouldThrow as e:
        res.offset = None
        res.notes.append(f"the broker's call would throw: {e}")
    _broker_answer_time(cq, reader, res)
    return res


def _pick_file_5(files: list[_CqFile], reader: TimeReader, when: int, boundary: str) -> _CqFile | None:
    """``MappedFileQueue#getConsumeQueueMappedFileByTime``: each file's start time (its first
    unit) and, but for the last file, stop time (its last unit), set only when > 0."""
    starts, stops = _file_times_5(files, reader)
    if boundary == "lower":
        for i, f in enumerate(files):
            if i < len(files) - 1 and stops[i] >= when:
                return f
        return files[-1]
    for i in range(len(files) - 1, -1, -1):
        if starts[i] <= when:
            return files[i]
    return None


def _file_times_5(files: list[_CqFile], reader: TimeReader) -> tuple[list[int], list[int]]:
    """Each file's start time (its first unit's store time) and stop time (its last unit's, not
    for the last file); -1 where unset (a time <= 0 is not set)."""
    starts, stops = [], []
    for i, f in enumerate(files):
        s = e = -1
        if CQ_STORE_UNIT_SIZE <= f.read_position:
            s = _positive(reader.pickup(*_read(f, 0, f.read_position)))
        if i < len(files) - 1 and f.file_size <= f.read_position:
            e = _positive(reader.pickup(*_read(f, f.file_size - CQ_STORE_UNIT_SIZE, f.read_position)))
        starts.append(s)
        stops.append(e)
    return starts, stops


def _positive(t: int) -> int:
    return t if t > 0 else -1


def _search_5(
    files: list[_CqFile], min_logic: int, reader: TimeReader, when: int, boundary: str, notes: list[str]
) -> int:
    mf = _chosen_file_5(files, reader, when, boundary, notes)
    if mf is None:
        return 0
    low = min_logic - mf.file_from if min_logic > mf.file_from else 0
    rng = _search_range(mf)
    if rng > mf.read_position:  # selectMappedBuffer(0, range) is null
        notes.append("the chosen file holds no unit: the broker answers 0")
        return 0
    ceiling = rng - CQ_STORE_UNIT_SIZE
    edge = _beyond_ends_5(mf, reader, when, boundary, low, ceiling, rng)
    if edge is not None:
        return edge
    found = _bisect(mf, low, ceiling, rng, reader, when, notes)
    if found is None:
        return 0
    return java_div(
        mf.file_from + _bisect_pick_5(found, mf, reader, when, boundary, low, ceiling, rng), CQ_STORE_UNIT_SIZE
    )


def _chosen_file_5(
    files: list[_CqFile], reader: TimeReader, when: int, boundary: str, notes: list[str]
) -> _CqFile | None:
    """The file the 5.x search reads (:func:`_pick_file_5`), noted; None where the broker answers 0."""
    if not files:
        notes.append("no consume-queue file: the broker answers 0")
        return None
    mf = _pick_file_5(files, reader, when, boundary)
    if mf is None:
        notes.append("no file starts at or before the time: the broker answers 0")
        return None
    notes.append(f"file {mf.file_from:020d} chosen by its units' store times")
    return mf


def _search_range(mf: _CqFile) -> int:
    """The bytes the search reads: the whole file, or up to its wrote position when it is partly written."""
    if mf.wrote_position != 0 and mf.wrote_position != mf.file_size:
        return mf.wrote_position
    return mf.file_size


def _beyond_ends_5(
    mf: _CqFile, reader: TimeReader, when: int, boundary: str, floor: int, ceiling: int, rng: int
) -> int | None:
    """The answer when ``when`` lies after the last unit's time or before the first one's (no
    search then), else None."""
    unit = CQ_STORE_UNIT_SIZE
    if reader.pickup(*_read(mf, ceiling, rng)) < when:
        return (mf.file_from + ceiling + (unit if boundary == "lower" else 0)) // unit
    if reader.pickup(*_read(mf, floor, rng)) > when:
        return mf.file_from // unit if boundary == "lower" else 0
    return None


def _bisect_pick_5(
    found: tuple[int, int, int, int, int],
    mf: _CqFile,
    reader: TimeReader,
    when: int,
    boundary: str,
    floor: int,
    ceiling: int,
    rng: int,
) -> int:
    """5.x's pick from the search: from a unit stored exactly at ``when``, walk to the first
    (LOWER) or last (UPPER) unit of that same time; else the unit after (LOWER) or before
    (UPPER) the time."""
    target, left, _, right, _ = found
    if target == -1:
        return right if boundary == "lower" else left
    step = -CQ_STORE_UNIT_SIZE if boundary == "lower" else CQ_STORE_UNIT_SIZE
    offset = target
    while floor <= offset + step <= ceiling and reader.pickup(*_read(mf, offset + step, rng)) == when:
        offset += step
    return offset


def _broker_answer_time(cq: ConsumeQueue, reader: TimeReader, res: SearchResult) -> None:
    """The store time of the unit the broker answered with (checked, for the reader)."""
    if res.offset is None or not (res.min_offset <= res.offset < res.max_offset):
        return
    u = _unit(cq, res.offset)
    if u is not None:
        res.store_timestamp = reader.checked(u[0], u[1])[0]


def broker_rocksdb(cq, reader: TimeReader, when: int, version: str, boundary: str = "lower") -> SearchResult:
    """``RocksDBConsumeQueueStore#getOffsetInQueueByTime`` (5.3.3) for a RocksDB queue: the
    store times come from the 28-byte values (``RocksDBConsumeQueueTable#binarySearchInCQByTime``),
    and the answer is not clamped (apache/rocketmq#8736: it can be -1)."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.store.queues.rocksdb_cq import search_by_time

    if version != "5":
        raise UsageError("a RocksDB consume queue is a 5.x broker's", hint="pass ⟦broker_version⟧ 5")
    res = SearchResult(
        cq.topic, cq.queue_id, when, f"broker-5-{boundary}", 0, None, cq.min_offset(reader.min_offset), cq.max_offset
    )
    res.offset = search_by_time(cq, when, reader.min_offset, upper=boundary == "upper")
    if res.offset == -1:
        res.notes.append("the broker answers -1 (no unit on that side of TIME)")
    _broker_answer_time(cq, reader, res)
    return res
