"""What is eating the disk: messages and bytes per topic, queue and file, and the size of
every part of the store root (``rmqstore stats``).

Two ways to count, named in the answer's ``method``:

* ``consumequeue`` (the default, :func:`from_consume_queues`): each queue's units of
  ``[first file, max offset)`` are read as numpy arrays (``ConsumeQueue#getMaxOffsetInQueue``
  after recovery). A unit counts as one message of ``size`` bytes when its message is
  still in the commit log's files (``commitlog_offset`` in [the first file's start, the
  last file's end)) and it is not a pre-blank unit (``ConsumeQueue#fillPreBlank``). The
  first and last store times are those of each queue's first and last such message, read
  from the commit log (a few records per queue, never a scan). Records no consume queue
  holds are not seen: PREPARED and ROLLBACK transactional records
  (``CommitLogDispatcherBuildConsumeQueue`` dispatches NOT and COMMIT only) and records of
  a topic whose queues are gone.
* ``commitlog`` (``--exact``, :func:`from_commit_log`): one columnar walk of every
  commit-log file (``CommitLog#scan_blocks``, the records ``checkMessageAndReturnSize``
  calls valid; a damaged stretch ends its file, the next file is read); every record
  counts, and those no consume queue holds are counted in ``not_in_cq`` by reason.

Both give per-queue :class:`Row` objects, per-file :class:`FileRow` objects (commit-log,
consume-queue and index files: time range and fill), and :func:`disk_usage` accounts for
every entry of the store root (:class:`Component`), the unknown ones named.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.batch_queue import BATCH_CQ_UNIT_SIZE
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE
from rmqstore_cli.formats.derive import numpy_dtype
from rmqstore_cli.formats.index import INDEX_HEADER_SIZE, IndexHeader
from rmqstore_cli.formats.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store import safefs
from rmqstore_cli.store.consume_queue import UNIT_DTYPE, ConsumeQueue
from rmqstore_cli.store.index import index_file_paths
from rmqstore_cli.store.lmq import is_lmq
from rmqstore_cli.store.mapped_files import queue_dirs
from rmqstore_cli.store.message import Message
from rmqstore_cli.store.root_entries import classify

_INDEX_HEADER = numpy_dtype(IndexHeader)
#: How many units from each end of a queue are tried for a readable first/last message.
TIME_PROBES = 64
_NOT_IN_CQ_TX = {TRANSACTION_PREPARED_TYPE: "prepared", TRANSACTION_ROLLBACK_TYPE: "rollback"}


@dataclass
class Row:
    """One queue's (or, summed, one topic's) messages and bytes in the commit log."""

    topic: str
    queue_id: int | None
    messages: int = 0
    bytes: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    cq_bytes: int = 0
    not_in_cq: int | None = None
    #: Units pointing where no commit-log file is, past the first (not in the output: a note).
    dangling: int = 0
    #: A queue of multi-dispatch units (store/lmq.py): its messages are other queues' too.
    multi_dispatch: bool = False
    #: Of ``bytes``, those of multi-dispatch queues folded in (a topic's): counted elsewhere.
    shared_bytes: int = 0

    def add(self, other: Row) -> None:
        """Fold another queue's counts into this row (a topic's total)."""
        self.messages += other.messages
        self.bytes += other.bytes
        self.shared_bytes += other.bytes if other.multi_dispatch else other.shared_bytes
        self.cq_bytes += other.cq_bytes
        self.multi_dispatch |= other.multi_dispatch
        if other.not_in_cq is not None:
            self.not_in_cq = (self.not_in_cq or 0) + other.not_in_cq
        self.times(other.first_store_timestamp, other.last_store_timestamp)

    def times(self, first: int | None, last: int | None) -> None:
        """Widen the time range to include ``[first, last]``."""
        if first is not None:
            self.first_store_timestamp = (
                first if self.first_store_timestamp is None else min(self.first_store_timestamp, first)
            )
        if last is not None:
            self.last_store_timestamp = (
                last if self.last_store_timestamp is None else max(self.last_store_timestamp, last)
            )

    @property
    def once_bytes(self) -> int:
        """The bytes of records no other row counts first: none for a multi-dispatch queue
        (its units point at another topic's records, ``ConsumeQueue#multiDispatchLmqQueue``)."""
        return 0 if self.multi_dispatch and self.queue_id is not None else self.bytes - self.shared_bytes

    def share(self, total_once: int) -> float | None:
        """This row's part of the message bytes counted once (``total_once``): the rows'
        shares add up to 1; None for a row of multi-dispatch units alone."""
        if self.multi_dispatch and not self.once_bytes:
            return None
        return round(self.once_bytes / total_once, 6) if total_once else 0.0

    def to_dict(self, total_once: int) -> dict:
        d = {"topic": self.topic}
        if self.queue_id is not None:
            d["queue_id"] = self.queue_id
        d.update(
            messages=self.messages,
            bytes=self.bytes,
            first_store_timestamp=self.first_store_timestamp,
            last_store_timestamp=self.last_store_timestamp,
            share=self.share(total_once),
            cq_bytes=self.cq_bytes,
        )
        if self.not_in_cq is not None:
            d["not_in_cq"] = self.not_in_cq
        if self.multi_dispatch:
            d["multi_dispatch"] = True
        return d


@dataclass
class FileRow:
    """One commit-log, consume-queue or index file: its size, what it holds, and how full it is.
    ``entries``: records (commit log), live units (consume queue) or index entries."""

    component: str
    file: str
    bytes: int
    disk_bytes: int
    entries: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    fill: float | None = None
    topic: str | None = None
    queue_id: int | None = None

    def to_dict(self) -> dict:
        return {
            "component": self.component,
            "file": self.file,
            "topic": self.topic,
            "queue_id": self.queue_id,
            "bytes": self.bytes,
            "disk_bytes": self.disk_bytes,
            "entries": self.entries,
            "first_store_timestamp": self.first_store_timestamp,
            "last_store_timestamp": self.last_store_timestamp,
            "fill": None if self.fill is None else round(self.fill, 6),
        }


@dataclass
class Component:
    """One part of the store: a component directory, or another entry of the store root."""

    component: str  # commitlog, consumequeue, index, config or other
    path: str
    files: int = 0
    bytes: int = 0
    disk_bytes: int = 0
    known: bool = True

    def to_dict(self) -> dict:
        return {
            "component": self.component,
            "path": self.path,
            "files": self.files,
            "bytes": self.bytes,
            "disk_bytes": self.disk_bytes,
            "known": self.known,
        }


@dataclass
class Stats:
    """What :func:`from_consume_queues` or :func:`from_commit_log` found."""

    method: str
    queues: dict[tuple[str, int], Row]
    commitlog_bytes: int
    files: list[FileRow] = field(default_factory=list)
    not_in_cq: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ sizes on disk


def file_sizes(path: Path) -> tuple[int, int]:
    """(apparent size, allocated bytes) of one file, links followed (a sparse, preallocated
    file takes less disk than its size)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise safefs.os_error(e, path, "stat") from None
    return st.st_size, st.st_blocks * 512


def _tree(path: Path, warnings: list[str]) -> tuple[int, int, int]:
    """(files, bytes, allocated bytes) below ``path`` without following links (a link is
    counted as itself); the top ``path`` itself is followed. Unreadable directories are
    warned about, not skipped silently."""
    files = size = disk = 0
    try:
        st = os.stat(path)
    except OSError as e:
        warnings.append(f"{path}: cannot stat: {e.strerror}")
        return 0, 0, 0
    if not stat.S_ISDIR(st.st_mode):
        return 1, st.st_size, st.st_blocks * 512
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError as e:
            warnings.append(f"{d}: cannot list: {e.strerror}; its files are not counted")
            continue
        for e in entries:
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(est.st_mode):
                stack.append(Path(e.path))
            else:
                files += 1
                size += est.st_size
                disk += est.st_blocks * 512
    return files, size, disk


def disk_usage(config, warnings: list[str]) -> list[Component]:
    """Every entry of the store root as a :class:`Component`, the commit log's directories
    (``storePathCommitLog`` may lie elsewhere) included; entries no broker writes are
    ``known: false``. Biggest first."""
    root = config.root
    out: list[Component] = []
    cl_dirs = [Path(d) for d in config.commitlog_dirs]
    for d in cl_dirs:
        out.append(
            Component("commitlog", _rel(d, root), *_tree(d, warnings))
            if d.exists()
            else Component("commitlog", _rel(d, root))
        )
    try:
        names = sorted(e.name for e in os.scandir(root))
    except OSError as e:
        raise safefs.os_error(e, root, "list the store directory") from None
    for name in names:
        p = root / name
        if any(_same(p, d) for d in cl_dirs):
            continue
        dl = config.dledger_dir
        if dl is not None and _same(p, dl):  # DLedger's index/, checkpoint, currterm; data/ is the commit log
            whole, data = (
                _tree(p, warnings),
                _tree(p / "data", warnings) if any(d.parent == dl for d in cl_dirs) else (0, 0, 0),
            )
            out.append(Component("other", name, *(a - b for a, b in zip(whole, data, strict=True)), known=True))
            continue
        e = classify(name)  # store/root_entries.py: what a broker writes there
        out.append(Component(e.component if e else "other", name, *_tree(p, warnings), known=e is not None))
    out.sort(key=lambda c: (-c.bytes, c.path))
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _rel(p: Path, root: Path) -> str:
    try:
        return str(Path(p).relative_to(root))
    except ValueError:
        return str(p)


# ------------------------------------------------------------------ from the consume queues


class LogSpan:
    """Which commit-log offsets lie in a file that is there (``MappedFileQueue#findMappedFileByOffset``
    finds one): not expired, not past the last file, not in a gap between files."""

    def __init__(self, commitlog):
        self.starts = np.array([f.file_from_offset for f in commitlog.files], np.int64)
        self.ends = np.array([f.end_offset for f in commitlog.files], np.int64)

    def holds(self, phy: np.ndarray) -> np.ndarray:
        if not self.starts.size:
            return np.zeros(phy.shape, bool)
        fi = np.searchsorted(self.starts, phy, "right") - 1
        return (fi >= 0) & (phy < self.ends[np.maximum(fi, 0)])


def _live(units: np.ndarray, span: LogSpan) -> tuple[np.ndarray, int]:
    """Units that stand for a message in the commit log's files (not expired, not past the
    last file, not a pre-blank unit), and how many others point where no file is although
    newer than the first (past the end, or in a gap: abnormal, verify tells more)."""
    phy, size = units["commitlog_offset"], units["size"]
    pre_blank = (phy == 0) & (size == PRE_BLANK_SIZE) & (units["tags_code"] == 0)
    real = (size > 0) & ~pre_blank
    inside = span.holds(phy)
    first = span.starts[0] if span.starts.size else 0
    return real & inside, int((real & ~inside & (phy >= first)).sum())


def _store_time(commitlog, phys: list[int]) -> int | None:
    """The store timestamp of the first valid record at one of ``phys`` (None: none valid)."""
    from rmqstore_cli.store.commitlog import Status

    for phy in phys:
        c = commitlog.check_at(int(phy))
        if c is not None and c.message is not None and c.status is Status.VALID:
            return c.message.store_timestamp
    return None


def _ends_time(commitlog, phy: np.ndarray) -> tuple[int | None, int | None]:
    """Store times of the first and last readable of ``phy`` (at most TIME_PROBES tried each)."""
    if not phy.size:
        return None, None
    return _store_time(commitlog, phy[:TIME_PROBES].tolist()), _store_time(commitlog, phy[::-1][:TIME_PROBES].tolist())


class _PerFile:
    """Per commit-log file: the records (or live units) that lie in it, their bytes, the least
    and greatest of one value per record, and the end of the last record. The consume-queue
    count keeps commit-log offsets (their store times are probed at the end: :meth:`rows`
    gets ``times``); ``--exact``'s walk keeps store times, which it already has."""

    def __init__(self, commitlog):
        self.commitlog = commitlog
        self.starts = np.array([f.file_from_offset for f in commitlog.files], np.int64)
        n = len(self.starts)
        self.count = np.zeros(n, np.int64)
        self.bytes = np.zeros(n, np.int64)
        self.lo = np.full(n, np.iinfo(np.int64).max, np.int64)
        self.hi = np.full(n, np.iinfo(np.int64).min, np.int64)
        self.end = np.zeros(n, np.int64)

    def add(self, offsets: np.ndarray, sizes: np.ndarray, values: np.ndarray | None = None) -> None:
        """Records at commit-log ``offsets`` of ``sizes`` bytes; ``values`` (default: the
        offsets) for the least and greatest per file."""
        if not offsets.size or not self.starts.size:
            return
        values = offsets if values is None else values
        fi = np.searchsorted(self.starts, offsets, "right") - 1
        np.add.at(self.count, fi, 1)
        np.add.at(self.bytes, fi, sizes)
        np.minimum.at(self.lo, fi, values)
        np.maximum.at(self.hi, fi, values)
        np.maximum.at(self.end, fi, offsets + sizes)

    def rows(self, root: Path, times=None) -> list[FileRow]:
        """One row per file; ``times(lo, hi)`` turns a file's least and greatest value into its
        first and last store time (default: the values are offsets, their records are read)."""
        if times is None:

            def times(lo: int, hi: int) -> tuple[int | None, int | None]:
                return _store_time(self.commitlog, [lo]), _store_time(self.commitlog, [hi])

        out = []
        for i, f in enumerate(self.commitlog.files):
            size, disk = file_sizes(f.path)
            n = int(self.count[i])
            row = FileRow("commitlog", _rel(f.path, root), size, disk, n, fill=0.0)
            if n:
                row.first_store_timestamp, row.last_store_timestamp = times(int(self.lo[i]), int(self.hi[i]))
                row.fill = (int(self.end[i]) - f.file_from_offset) / f.file_size
            out.append(row)
        return out


class _QueueTally:
    """One queue's units counted block by block into its :class:`Row`, the file queue's and
    the RocksDB queue's alike (module docstring): live messages and bytes, dangling units,
    and the live units of the first and the last block that has any (for the row's times)."""

    def __init__(self, row: Row, span: LogSpan, per_file: _PerFile | None):
        self.row, self.span, self.per_file = row, span, per_file
        self.first = self.last = None

    def add(self, units: np.ndarray) -> np.ndarray:
        """Count one block of units; returns the commit-log offsets of its live ones."""
        live, dangling = _live(units, self.span)
        self.row.dangling += dangling
        phy = units["commitlog_offset"][live]
        sizes = units["size"][live].astype(np.int64)
        self.row.messages += int(phy.size)
        self.row.bytes += int(sizes.sum())
        if phy.size:
            self.first = phy if self.first is None else self.first
            self.last = phy
        if self.per_file is not None:
            self.per_file.add(phy, sizes)
        return phy

    def finish(self, commitlog) -> bool:
        """The row's first and last store times, probed at both ends; False when no unit lives."""
        if self.first is None:
            return False
        self.row.first_store_timestamp = _ends_time(commitlog, self.first[:TIME_PROBES])[0]
        self.row.last_store_timestamp = _ends_time(commitlog, self.last[-TIME_PROBES:])[1]
        return True


def _queue_row(
    cq: ConsumeQueue, commitlog, span: LogSpan, per_file: _PerFile | None, cq_files: list[FileRow] | None, root: Path
) -> Row:
    """One queue from its units (module docstring); ``per_file``/``cq_files`` collect the
    commit-log and consume-queue file rows when ``--by file`` asks for them."""
    row = Row(cq.topic, cq.queue_id)
    tally = _QueueTally(row, span, per_file)
    arrays = {name: arr for arr, _, name in cq.unit_arrays(cq.min_file_offset, cq.max_offset)}
    empty = np.zeros(0, UNIT_DTYPE)
    for f in cq.queue.files:
        size, disk = file_sizes(f.path)
        row.cq_bytes += size
        units = arrays.get(f.name, empty)
        phy = tally.add(units)
        if cq_files is not None:
            lo, hi = _ends_time(commitlog, phy)
            cq_files.append(
                FileRow(
                    "consumequeue",
                    _rel(f.path, root),
                    size,
                    disk,
                    int(phy.size),
                    lo,
                    hi,
                    len(units) * CQ_STORE_UNIT_SIZE / cq.file_size,
                    cq.topic,
                    cq.queue_id,
                )
            )
    if tally.finish(commitlog):
        row.multi_dispatch = is_lmq(cq.topic) or _other_topic(commitlog, int(tally.first[0]), cq.topic)
    return row


def _other_topic(commitlog, phy: int, topic: str) -> bool:
    """Whether the queue's first live unit points at a message of another topic: the units
    of a name only ``INNER_MULTI_DISPATCH`` lists (``ConsumeQueue#multiDispatchLmqQueue``)."""
    c = commitlog.check_at(phy)
    return c is not None and c.message is not None and c.message.topic_bytes != topic.encode("utf-8", "surrogateescape")


def _rocksdb_queues(store, topic: str | None) -> list:
    """The queues of a RocksDB consume queue (``store/rocksdb_cq.py``), of ``topic`` or all;
    none for file consume queues."""
    db = store.rocksdb_cq
    return [] if db is None else [q for q in db.queues() if topic is None or q.topic == topic]


def _rocksdb_queue_row(q, commitlog, span: LogSpan, per_file: _PerFile | None) -> Row:
    """One RocksDB queue counted as :func:`_queue_row` counts a file queue's units; the
    database is one for all queues, so no queue has consume-queue bytes of its own."""
    row = Row(q.topic, q.queue_id)
    tally = _QueueTally(row, span, per_file)
    for units, _, _ in q.unit_arrays(q.min_file_offset, q.max_offset):
        tally.add(units)
    tally.finish(commitlog)
    return row


def from_consume_queues(store, topic: str | None = None, by_file: bool = False) -> Stats:
    """Counts from the consume queues (module docstring): fast, no commit-log scan."""
    commitlog = store.commitlog
    span = LogSpan(commitlog)
    root = store.config.root
    per_file = _PerFile(commitlog) if by_file else None
    cq_files: list[FileRow] | None = [] if by_file else None
    queues: dict[tuple[str, int], Row] = {}
    strays: list[Path] = []
    for q in _rocksdb_queues(store, topic):  # a RocksDB consume queue: no queue directories below
        queues[q.topic, q.queue_id] = _rocksdb_queue_row(q, commitlog, span, per_file)
    for t, qid, _ in queue_dirs(store.config.consumequeue_dir):
        if topic is not None and t != topic:
            continue
        cq = store.consume_queue(t, qid)
        strays += cq.queue.strays
        try:
            queues[t, qid] = _queue_row(cq, commitlog, span, per_file, cq_files, root)
        finally:
            cq.close()
    batch, records = _batch_rows(store, topic, span, per_file, cq_files)
    queues.update(batch)
    st = Stats("consumequeue", queues, commitlog_total(commitlog))
    if batch:
        st.notes.append(
            f"{len(batch)} BatchCQ queues (batchconsumequeue/): their messages are the inner messages "
            f"of {records} batch records (msgBaseOffset/batchSize), "
            "as the broker's queue offsets count them"
        )
    if by_file:
        st.files = per_file.rows(root) + cq_files
    st.notes += unread_entries(store) + [f"{p}: not a consume-queue file name; not read" for p in strays]
    dangling = [r for r in queues.values() if r.dangling]
    if dangling:
        st.notes.append(
            f"{sum(r.dangling for r in dangling)} consume-queue units of {len(dangling)} queues point "
            "where no commit-log file is (past its end or in a gap): not counted; rmqstore verify "
            "tells more"
        )
    if not commitlog.files:
        st.notes.append("the commit log holds no file: no unit's message is there")
    return st


def unread_entries(store) -> list[str]:
    """Notes naming what lies in the store's data directories but is not read as a store file
    (its bytes still count in the components): commit-log files and consume-queue entries
    whose names the broker would not load, files where queue directories belong."""
    notes = [f"{p}: not a commit-log file name; not read" for p in store.commitlog.queue.strays]
    cq_dir = store.config.consumequeue_dir
    if store.rocksdb_cq is not None:  # the directory is the database: its files are read through it
        return notes
    try:
        topics = sorted(os.scandir(cq_dir), key=lambda e: e.name)
    except OSError:
        return notes
    for t in topics:
        if not t.is_dir():
            notes.append(f"{t.path}: not a topic directory; not read")
            continue
        try:
            queues = sorted(os.scandir(t.path), key=lambda e: e.name)
        except OSError as e:
            notes.append(f"{t.path}: cannot list: {e.strerror}; not read")
            continue
        notes += [
            f"{q.path}: not a queue directory; not read"
            for q in queues
            if not (q.is_dir() and q.name.isdigit() and q.name.isascii())
        ]
    return notes


def commitlog_total(commitlog) -> int:
    """The commit-log files' size (the summary's ``commitlog_bytes``)."""
    return sum(file_sizes(f.path)[0] for f in commitlog.files)


# ------------------------------------------------------------------ from the commit log


class _Groups:
    """Per (topic, queue) accumulators over the blocks of a scan, and per commit-log file."""

    def __init__(self, commitlog):
        self.rows: dict[tuple[str, int], Row] = {}
        self.not_in_cq: dict[str, int] = {}
        self.files = _PerFile(commitlog)  # store times per file, as the walk has them

    def add(
        self,
        names: list[str],
        tid: np.ndarray,
        qid: np.ndarray,
        total: np.ndarray,
        ts: np.ndarray,
        sys_flag: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        """A run of records: topic ids into ``names``, queue ids, sizes, store times, sysflags."""
        key = (tid.astype(np.int64) << 32) | (qid.astype(np.int64) & 0xFFFFFFFF)
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=total, minlength=uniq.size)
        lo = np.full(uniq.size, np.iinfo(np.int64).max, np.int64)
        hi = np.full(uniq.size, np.iinfo(np.int64).min, np.int64)
        np.minimum.at(lo, inv, ts)
        np.maximum.at(hi, inv, ts)
        tx = sys_flag & TRANSACTION_MASK
        skipped = np.zeros(uniq.size, np.int64)
        for value, reason in _NOT_IN_CQ_TX.items():
            hit = tx == value
            if hit.any():
                self.not_in_cq[reason] = self.not_in_cq.get(reason, 0) + int(hit.sum())
                skipped += np.bincount(inv, weights=hit, minlength=uniq.size).astype(np.int64)
        for k, c, s, a, b, x in zip(
            uniq.tolist(), counts.tolist(), sums.tolist(), lo.tolist(), hi.tolist(), skipped.tolist(), strict=True
        ):
            q = k & 0xFFFFFFFF
            q = q - (1 << 32) if q >= 1 << 31 else q
            r = self.rows.setdefault((names[k >> 32], q), Row(names[k >> 32], q, not_in_cq=0))
            r.messages += c
            r.bytes += int(s)
            r.not_in_cq += x
            r.times(a, b)
        self.files.add(offsets, total, ts)


def _add_record(g: _Groups, m: Message) -> None:
    """One record the columnar walk left to the per-record check (same accounting)."""

    def one(v: int) -> np.ndarray:
        return np.array([v], np.int64)

    g.add([m.topic], one(0), one(m.queue_id), one(m.total_size), one(m.store_timestamp), one(m.sys_flag), one(m.offset))


def from_commit_log(store, topic: str | None = None, by_file: bool = False, records=None) -> Stats:
    """Counts from one walk of the whole commit log (``--exact``): every valid record, and
    ``not_in_cq`` for those no consume queue holds (PREPARED/ROLLBACK, a queue not on disk);
    ``records``: a narrowed walk's records and blocks instead (:func:`from_sampled_walk`)."""
    commitlog = store.commitlog
    total = commitlog_total(commitlog)
    g = _Groups(commitlog)
    names_seen: list[str] = []
    walked = commitlog.scan_blocks(skip_mismatch=True, every_file=True) if records is None else records
    for rec in walked:
        if isinstance(rec, Message):
            if topic is None or rec.topic == topic:
                _add_record(g, rec)
            continue
        names_b, tid = rec.topics
        if len(names_seen) < len(names_b):
            names_seen += [n.decode("utf-8", "replace") for n in names_b[len(names_seen) :]]
        rb = rec.rb
        cols = (tid, rb.queue_id, rb.total, rec.store_timestamp, rb.sys_flag, rec.offsets)
        if topic is not None:
            keep = tid == (names_seen.index(topic) if topic in names_seen else -1)
            if not keep.any():
                continue
            cols = tuple(c[keep] for c in cols)
        g.add(names_seen, *cols)
    on_disk = {(t, q) for t, q, _ in queue_dirs(store.config.consumequeue_dir) if topic is None or t == topic}
    on_disk |= {(q.topic, q.queue_id) for q in _rocksdb_queues(store, topic)}
    on_disk |= _batch_keys(store, topic)  # a BatchCQ topic's records are in its batch queues
    for (t, q), r in g.rows.items():
        if (t, q) not in on_disk:
            lost = r.messages - r.not_in_cq
            if lost:
                g.not_in_cq["no_consume_queue"] = g.not_in_cq.get("no_consume_queue", 0) + lost
            r.not_in_cq = r.messages
    _cq_bytes(store, g.rows, topic)
    queues = g.rows
    st = Stats("commitlog", queues, total, not_in_cq=g.not_in_cq)
    st.notes += unread_entries(store)
    for t, q in _batch_keys(store, topic):  # their files' bytes, as _cq_bytes for consume queues
        r = queues.setdefault((t, q), Row(t, q, not_in_cq=0))
        r.cq_bytes = _tree(store.config.root / "batchconsumequeue" / t / str(q), [])[1]
    if _batch_keys(store, topic):
        st.notes.append(
            "BatchCQ queues (batchconsumequeue/): --exact counts their batch records, one each; "
            "without --exact their inner messages are counted"
        )
    st.notes += [f"the commit log's data stops at {s.offset} in {s.file}: {s.reason}" for s in commitlog.stops]
    if by_file:
        st.files = g.files.rows(store.config.root, times=lambda lo, hi: (lo, hi)) + cq_file_rows(store, topic)
    return st


def _cq_bytes(store, rows: dict[tuple[str, int], Row], topic: str | None) -> None:
    """The consume-queue files' size of each queue (a queue with no record gets a row too)."""
    for t, q, d in queue_dirs(store.config.consumequeue_dir):
        if topic is not None and t != topic:
            continue
        r = rows.setdefault((t, q), Row(t, q, not_in_cq=0))
        r.cq_bytes = _tree(d, [])[1]


def cq_file_rows(store, topic: str | None) -> list[FileRow]:
    """The consume-queue and BatchCQ file rows alone (``--exact --by file``)."""
    from rmqstore_cli.store.batch_queue import store_batch_queues

    commitlog = store.commitlog
    span = LogSpan(commitlog)
    rows: list[FileRow] = []
    for t, qid, _ in queue_dirs(store.config.consumequeue_dir):
        if topic is None or t == topic:
            cq = store.consume_queue(t, qid)
            try:
                _queue_row(cq, commitlog, span, None, rows, store.config.root)
            finally:
                cq.close()
    for bq in store_batch_queues(store.config, topic):
        try:
            rows += _batch_file_rows(bq, span, store.config.root)
        finally:
            bq.close()
    return rows


# ------------------------------------------------------------------ index files


def index_file_rows(config) -> list[FileRow]:
    """Each index file from its 40-byte header (``IndexHeader#load``): time range, and fill =
    indexCount / maxIndexNum (``IndexFile#isWriteFull``)."""
    out = []
    for p in index_file_paths(config.index_dir):
        fd = safefs.open_read_only(p)
        try:
            raw = os.pread(fd, INDEX_HEADER_SIZE, 0)
        except OSError as e:
            raise safefs.os_error(e, p, "read") from None
        finally:
            os.close(fd)
        size, disk = file_sizes(p)
        if len(raw) < INDEX_HEADER_SIZE:
            raise StoreError(f"index file has {len(raw)} bytes, less than its {INDEX_HEADER_SIZE}-byte header", path=p)
        h = np.frombuffer(raw, _INDEX_HEADER)[0]
        count = max(int(h["index_count"]), 1)  # IndexHeader#load: a stored count <= 0 reads as 1
        begin, end = int(h["begin_timestamp"]), int(h["end_timestamp"])
        out.append(
            FileRow(
                "index",
                _rel(p, config.root),
                size,
                disk,
                count - 1,
                begin or None,
                end or None,
                None if config.index_geometry_error is not None else count / config.max_index_num,
            )
        )
    return out


# ------------------------------------------------------------------ rows as asked


def once_total(queues: dict[tuple[str, int], Row]) -> int:
    """The message bytes the queues count, each record once (multi-dispatch queues left out):
    the denominator of every row's ``share``."""
    return sum(r.once_bytes for r in queues.values())


def topic_rows(queues: dict[tuple[str, int], Row]) -> list[Row]:
    """Queue rows summed per topic."""
    out: dict[str, Row] = {}
    for (t, _), r in queues.items():
        out.setdefault(t, Row(t, None, not_in_cq=None if r.not_in_cq is None else 0)).add(r)
    return list(out.values())


def biggest_first(rows: list, top: int | None) -> list:
    """Rows by bytes, biggest first (ties: by name), the first ``top`` of them."""
    key = (
        (lambda r: (-r.bytes, r.component, r.file))
        if rows and isinstance(rows[0], FileRow)
        else (lambda r: (-r.bytes, -r.messages, r.topic, r.queue_id if r.queue_id is not None else -1))
    )
    rows = sorted(rows, key=key)
    return rows if top is None else rows[:top]


# BatchCQ queues (store/batch_queue.py)
def _batch_keys(store, topic: str | None) -> set[tuple[str, int]]:
    from rmqstore_cli.store.mapped_files import queue_dirs as dirs

    cfg = store.config
    return {
        (t, q)
        for t, q, _ in dirs(cfg.root / "batchconsumequeue")
        if (topic is None or t == topic) and not (cfg.consumequeue_dir / t / str(q)).is_dir()
    }


def _batch_rows(
    store, topic: str | None, span: LogSpan, per_file: _PerFile | None, bq_files: list[FileRow] | None = None
) -> tuple[dict, int]:
    """Each BatchCQ queue's row: its units whose record is in the commit log's files count
    ``batchSize`` messages each (the queue offsets ``BatchConsumeQueue#getMaxOffsetInQueue``
    counts) and the record's bytes; times are the units' store times. Also how many
    records (units) they hold; ``bq_files`` collects the queues' file rows (``--by file``)."""
    from rmqstore_cli.store.batch_queue import store_batch_queues

    rows, records = {}, 0
    for bq in store_batch_queues(store.config, topic):
        try:
            if bq_files is not None:
                bq_files += _batch_file_rows(bq, span, store.config.root)
            u = bq.columns()
            row = rows[bq.topic, bq.queue_id] = Row(bq.topic, bq.queue_id)
            live = span.holds(u["commitlog_offset"])
            row.messages = int(u["batch_size"][live].astype(np.int64).sum())
            row.bytes = int(u["size"][live].astype(np.int64).sum())
            row.cq_bytes = sum(file_sizes(f.path)[0] for f in bq.queue.files)
            records += int(live.sum())
            ts = u["store_time"][live]
            if ts.size:
                row.times(int(ts.min()), int(ts.max()))
            if per_file is not None:
                per_file.add(u["commitlog_offset"][live], u["size"][live].astype(np.int64))
        finally:
            bq.close()
    return rows, records


def _batch_file_rows(bq, span: LogSpan, root: Path) -> list[FileRow]:
    """A BatchCQ queue's files: live units (their records in the commit log), the units' own
    store times, fill = recovered units x 46 / file size (``BatchConsumeQueue#recover``)."""
    out = []
    arrays = {f.name: a for f, a, _ in bq.unit_arrays()}
    for f in bq.queue.files:
        size, disk = file_sizes(f.path)
        u = arrays.get(f.name)
        row = FileRow(
            "batchconsumequeue", _rel(f.path, root), size, disk, 0, fill=0.0, topic=bq.topic, queue_id=bq.queue_id
        )
        if u is not None:
            ts = u["store_time"][span.holds(u["commitlog_offset"])]
            row.entries = int(ts.size)
            if ts.size:
                row.first_store_timestamp, row.last_store_timestamp = int(ts.min()), int(ts.max())
            row.fill = len(u) * BATCH_CQ_UNIT_SIZE / bq.file_size
        out.append(row)
    return out


def from_sampled_walk(store, topic: str | None, by_file: bool, narrowing) -> Stats:
    """:func:`from_commit_log` over the walk ``narrowing`` narrows (``--sample``,
    ``--max-bytes``: store/sampling.py): the counts are of the records kept, not scaled."""
    from rmqstore_cli.store.log_range import Range
    from rmqstore_cli.store.sampling import narrowed

    cl = store.commitlog

    def walk_one(r: Range):
        for b in cl.scan_blocks(r.start, r.stop, skip_mismatch=True, every_file=True):
            yield b, None if isinstance(b, Message) else np.arange(b.n)

    def records():
        for rec, take in narrowed(cl, Range(None, None), walk_one, narrowing, None):
            yield rec if take is None else rec.take(take)

    return from_commit_log(store, topic, by_file, records())
