"""``rmqstore stats`` counted from the consume queues (the default ``consumequeue`` method).

Each queue's units of ``[first file, max offset)`` are read as numpy arrays
(``ConsumeQueue#getMaxOffsetInQueue`` after recovery). A unit counts as one message of ``size``
bytes when its message is still in the commit log's files (``commitlog_offset`` in [the first
file's start, the last file's end)) and it is not a pre-blank unit
(``ConsumeQueue#fillPreBlank``). The first and last store times are those of each queue's
first and last such message, read from the commit log (a few records per queue, never a
scan). Records no consume queue holds are not seen: PREPARED and ROLLBACK transactional
records (``CommitLogDispatcherBuildConsumeQueue`` dispatches NOT and COMMIT only) and records
of a topic whose queues are gone. BatchCQ queues (store/queues/batch_queue.py) count their inner
messages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rmqstore_cli.formats.batch_queue import BATCH_CQ_UNIT_SIZE
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE

from rmqstore_cli.store.answers.stats import FileRow, Row, Stats, commitlog_total, file_sizes, rel_path, unread_entries
from rmqstore_cli.store.files.mapped_files import queue_dirs
from rmqstore_cli.store.queues.consume_queue import UNIT_DTYPE, ConsumeQueue
from rmqstore_cli.store.write.lmq import is_lmq

#: How many units from each end of a queue are tried for a readable first/last message.
TIME_PROBES = 64


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


class PerFile:
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
            row = FileRow("commitlog", rel_path(f.path, root), size, disk, n, fill=0.0)
            if n:
                row.first_store_timestamp, row.last_store_timestamp = times(int(self.lo[i]), int(self.hi[i]))
                row.fill = (int(self.end[i]) - f.file_from_offset) / f.file_size
            out.append(row)
        return out


class _QueueTally:
    """One queue's units counted block by block into its :class:`Row`, the file queue's and
    the RocksDB queue's alike (module docstring): live messages and bytes, dangling units,
    and the live units of the first and the last block that has any (for the row's times)."""

    def __init__(self, row: Row, span: LogSpan, per_file: PerFile | None):
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
    cq: ConsumeQueue, commitlog, span: LogSpan, per_file: PerFile | None, cq_files: list[FileRow] | None, root: Path
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
                    rel_path(f.path, root),
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


def rocksdb_queues(store, topic: str | None) -> list:
    """The queues of a RocksDB consume queue (``store/queues/rocksdb_cq.py``), of ``topic`` or all;
    none for file consume queues."""
    db = store.rocksdb_cq
    return [] if db is None else [q for q in db.queues() if topic is None or q.topic == topic]


def _rocksdb_queue_row(q, commitlog, span: LogSpan, per_file: PerFile | None) -> Row:
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
    per_file = PerFile(commitlog) if by_file else None
    cq_files: list[FileRow] | None = [] if by_file else None
    queues: dict[tuple[str, int], Row] = {}
    for q in rocksdb_queues(store, topic):  # a RocksDB consume queue: no queue directories below
        queues[q.topic, q.queue_id] = _rocksdb_queue_row(q, commitlog, span, per_file)
    strays = _file_queue_rows(store, topic, span, per_file, cq_files, queues)
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
    st.notes += _missing_messages_notes(queues, commitlog)
    return st


def _file_queue_rows(
    store,
    topic: str | None,
    span: LogSpan,
    per_file: PerFile | None,
    cq_files: list[FileRow] | None,
    queues: dict[tuple[str, int], Row],
) -> list[Path]:
    """Each file consume queue's row (of ``topic`` or all) into ``queues``; returns the files in
    their directories that are not consume-queue files (not read)."""
    strays: list[Path] = []
    for t, qid, _ in queue_dirs(store.config.consumequeue_dir):
        if topic is not None and t != topic:
            continue
        cq = store.consume_queue(t, qid)
        strays += cq.queue.strays
        try:
            queues[t, qid] = _queue_row(cq, store.commitlog, span, per_file, cq_files, store.config.root)
        finally:
            cq.close()
    return strays


def _missing_messages_notes(queues: dict[tuple[str, int], Row], commitlog) -> list[str]:
    """Notes on units whose message is not there: dangling units, a commit log with no file."""
    notes = []
    dangling = [r for r in queues.values() if r.dangling]
    if dangling:
        notes.append(
            f"{sum(r.dangling for r in dangling)} consume-queue units of {len(dangling)} queues point "
            "where no commit-log file is (past its end or in a gap): not counted; rmqstore verify "
            "tells more"
        )
    if not commitlog.files:
        notes.append("the commit log holds no file: no unit's message is there")
    return notes


def cq_file_rows(store, topic: str | None) -> list[FileRow]:
    """The consume-queue and BatchCQ file rows alone (``--exact --by file``)."""
    from rmqstore_cli.store.queues.batch_queue import store_batch_queues

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
            rows += batch_file_rows(bq, span, store.config.root)
        finally:
            bq.close()
    return rows


# ------------------------------------------------------------------ BatchCQ queues (store/queues/batch_queue.py)


def batch_keys(store, topic: str | None) -> set[tuple[str, int]]:
    from rmqstore_cli.store.files.mapped_files import queue_dirs as dirs

    cfg = store.config
    return {
        (t, q)
        for t, q, _ in dirs(cfg.root / "batchconsumequeue")
        if (topic is None or t == topic) and not (cfg.consumequeue_dir / t / str(q)).is_dir()
    }


def _batch_rows(
    store, topic: str | None, span: LogSpan, per_file: PerFile | None, bq_files: list[FileRow] | None = None
) -> tuple[dict, int]:
    """Each BatchCQ queue's row: its units whose record is in the commit log's files count
    ``batchSize`` messages each (the queue offsets ``BatchConsumeQueue#getMaxOffsetInQueue``
    counts) and the record's bytes; times are the units' store times. Also how many
    records (units) they hold; ``bq_files`` collects the queues' file rows (``--by file``)."""
    from rmqstore_cli.store.queues.batch_queue import store_batch_queues

    rows, records = {}, 0
    for bq in store_batch_queues(store.config, topic):
        try:
            if bq_files is not None:
                bq_files += batch_file_rows(bq, span, store.config.root)
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


def batch_file_rows(bq, span: LogSpan, root: Path) -> list[FileRow]:
    """A BatchCQ queue's files: live units (their records in the commit log), the units' own
    store times, fill = recovered units x 46 / file size (``BatchConsumeQueue#recover``)."""
    out = []
    arrays = {f.name: a for f, a, _ in bq.unit_arrays()}
    for f in bq.queue.files:
        size, disk = file_sizes(f.path)
        u = arrays.get(f.name)
        row = FileRow(
            "batchconsumequeue", rel_path(f.path, root), size, disk, 0, fill=0.0, topic=bq.topic, queue_id=bq.queue_id
        )
        if u is not None:
            ts = u["store_time"][span.holds(u["commitlog_offset"])]
            row.entries = int(ts.size)
            if ts.size:
                row.first_store_timestamp, row.last_store_timestamp = int(ts.min()), int(ts.max())
            row.fill = len(u) * BATCH_CQ_UNIT_SIZE / bq.file_size
        out.append(row)
    return out
