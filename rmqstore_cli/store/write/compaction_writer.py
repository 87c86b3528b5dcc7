"""Writing the compaction store as a 5.x broker's dispatch does (generate): every message of
a ``cleanup.policy=COMPACTION`` topic that has KEYS is copied into its queue's compaction
log with PHYSICALOFFSET rewritten, and gets one unit in the queue's sparse consume queue.

``CommitLogDispatcherCompaction#dispatch`` -> ``CompactionService#putRequest`` ->
``CompactionStore#doDispatch`` -> ``CompactionLog#asyncPutMessage``. No compaction run is
made: the files are those of a broker that has dispatched but not compacted yet, and
``position-checkpoint`` is what its ``CompactionStore#shutdown`` persists then (empty).
"""

from __future__ import annotations

import os
from pathlib import Path

from rmqstore_cli.formats.batch_queue import (
    BATCH_CQ_UNIT_SIZE,
    COMPACTION_CQ_DIR,
    COMPACTION_DIR,
    COMPACTION_LOG_DIR,
    POSITION_CHECKPOINT,
    POSITION_KEY_SEPARATOR,
)
from rmqstore_cli.formats.commitlog import MAGIC_BLANK, BlankRecord
from rmqstore_cli.formats.compaction import (
    CLEANUP_POLICY_ATTRIBUTE,
    COMPACTION_END_BLANK_LENGTH,
    COMPACTION_POLICY,
    DEFAULT_COMPACTION_CQ_MAPPED_FILE_SIZE,
    DEFAULT_COMPACTION_MAPPED_FILE_SIZE,
    PHYSICAL_OFFSET_POS,
    QUEUE_OFFSET_POS,
    RecordLong,
    position_checkpoint_text,
)

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import offset2file_name
from rmqstore_cli.store.files.safefs import write_range
from rmqstore_cli.store.queues.batch_queue import pack_unit
from rmqstore_cli.store.queues.compaction import compaction_log_size
from rmqstore_cli.store.records.message import PROPERTY_KEYS, tags_code

#: ``CompactionLog.COMPACTING_SUB_FOLDER``: where a run writes the files that replace the old ones.
COMPACTING_DIR = "compacting"


class _OpenFile:
    """The last file of a log or queue: what was appended since the last flush (files are
    created at their full size when rolled, as ``MappedFileQueue#getLastMappedFile`` does)."""

    def __init__(self, path: Path, size: int, roots: list[Path], what: str, pos: int | None = None):
        """``pos``: an existing file continued at that byte (a generate --append), else a new one."""
        self.path, self.size, self.what = path, size, what
        self.pos = self.flushed = pos or 0
        self.buf = bytearray()
        if pos is None:
            safefs.create_sized(path, size, roots, what)

    def append(self, data: bytes) -> None:
        self.buf += data
        self.pos += len(data)

    def flush(self, roots: list[Path]) -> None:
        if self.buf:
            write_range(self.path, self.flushed, bytes(self.buf), self.what, roots)
        self.flushed, self.buf = self.flushed + len(self.buf), bytearray()


class CompactionLogWriter:
    """``CompactionLog`` of one (topic, queueId), new: ``TopicPartitionLog``'s log and
    ``SparseConsumeQueue``, the queue file named after the log file it indexes (``#roll``)."""

    FLUSH_BYTES = 1 << 20

    def __init__(self, log_dir: Path, cq_dir: Path, log_size: int, cq_size: int, roots: list[Path]):
        self.log_dir, self.cq_dir = log_dir, cq_dir
        self.log_size, self.cq_size = log_size, cq_size
        self.roots = roots
        self.log: _OpenFile | None = None
        self.cq: _OpenFile | None = None
        self.log_from = -log_size
        self.next_queue_offset = 0
        #: (physical offset, size) of every record written, for a compaction run.
        self.placed: list[tuple[int, int]] = []

    def resume(self) -> None:
        """Continue a queue already on disk (generate --append) where a restarted broker
        does: ``TopicPartitionLog#init`` (``#sanityCheck``: the log and its queue have the
        same file names), ``SparseConsumeQueue#recover`` (the last file's units up to the
        first invalid one, so an end-of-file unit is written again), then the log's write
        position is the end of the last unit's record (``#getMaxPhyOffsetInLog``,
        ``MappedFileQueue#truncateDirtyFiles``; none: the file counts as full and the next
        put rolls). Anything that would not continue byte for byte is a StoreError."""
        from rmqstore_cli.store.files.mapped_files import MappedFileQueue, regular_size
        from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue

        if not self.log_dir.is_dir() and not self.cq_dir.is_dir():
            return
        if (self.log_dir / COMPACTING_DIR).exists() or (self.cq_dir / COMPACTING_DIR).exists():
            raise StoreError(
                "an unfinished compaction run (compacting/) is here: generate --append cannot "
                "continue this compaction log",
                path=self.log_dir / COMPACTING_DIR,
            )
        logs = MappedFileQueue(self.log_dir, self.log_size).files
        cq = BatchConsumeQueue(self.cq_dir, "", 0, self.cq_size, sparse=True)
        try:
            self._resume_from(logs, cq, regular_size)
        finally:
            cq.close()

    def _resume_from(self, logs, cq, regular_size) -> None:
        """:meth:`resume` once the files are listed."""
        self._check_resumable(logs, cq, regular_size)
        if not logs:
            return
        valid = [(f, n) for f, n in zip(cq.queue.files, cq.valid_counts, strict=True) if n]
        if valid:  # SparseConsumeQueue#reviseMaxAndMinOffsetInQueue
            last = cq.file_units(valid[-1][0])[valid[-1][1] - 1]
            self.next_queue_offset = int(last["msg_base_offset"]) + int(last["batch_size"])
        self.log_from = logs[-1].file_from_offset
        n = cq.valid_counts[-1]
        log_pos = self.log_size
        if n:
            u = cq.file_units(cq.queue.files[-1])[n - 1]
            log_pos = int(u["commitlog_offset"]) + int(u["size"]) - self.log_from
        self.log = _OpenFile(logs[-1].path, self.log_size, self.roots, "compaction-log file", log_pos)
        self.cq = _OpenFile(
            cq.queue.files[-1].path, self.cq_size, self.roots, "compaction consume-queue file", n * BATCH_CQ_UNIT_SIZE
        )
        if log_pos >= self.log_size:
            self.log = None  # #isEmptyOrCurrentFileFull: the next put rolls

    def _check_resumable(self, logs, cq, regular_size) -> None:
        """The log and its queue have the same file names (``TopicPartitionLog#sanityCheck``)
        and every file the size this run writes; refused otherwise."""
        if [f.path.name for f in logs] != [f.path.name for f in cq.queue.files]:
            raise StoreError(
                "the compaction log and its queue do not have the same files "
                "(TopicPartitionLog#sanityCheck): generate --append cannot continue them",
                path=self.log_dir,
            )
        for f, size in [(f, self.log_size) for f in logs] + [(f, self.cq_size) for f in cq.queue.files]:
            if regular_size(f.path) != size:
                raise StoreError(
                    f"a compaction file of {regular_size(f.path)} bytes where this run writes {size}: "
                    "generate --append cannot continue it",
                    path=f.path,
                    hint="pass the ⟦broker_conf⟧ the store was generated with",
                )

    def _roll(self) -> None:
        """``TopicPartitionLog#roll``: the next log file, and a queue file of the same name."""
        self.flush()
        self.log_from += self.log_size
        name = offset2file_name(self.log_from)
        self.log = _OpenFile(self.log_dir / name, self.log_size, self.roots, "compaction-log file")
        self.cq = _OpenFile(self.cq_dir / name, self.cq_size, self.roots, "compaction consume-queue file")

    def put(self, record: bytes, keys: str | None, tags_code: int, store_time: int) -> bool:
        """``CompactionLog#asyncPutMessage``: False when the broker skips the message (a queue
        offset already in the queue, or no KEYS: ``StringUtils#isBlank``) or it fits no log
        file (the file it ends and the one rolled for the retry both get an end unit and a
        BLANK, and the queue offset is not taken)."""
        queue_offset = RecordLong.parse(record[QUEUE_OFFSET_POS:PHYSICAL_OFFSET_POS])
        if queue_offset < self.next_queue_offset or not (keys or "").strip():
            return False
        if self.log is None:  # #isEmptyOrCurrentFileFull
            self._roll()
        if not self._append(record, queue_offset, tags_code, store_time):  # END_OF_FILE: roll, retry
            self._roll()
            if not self._append(record, queue_offset, tags_code, store_time):
                self._ended()  # it fits no file: the new files got an end unit and a BLANK too
                return False
        self.next_queue_offset = queue_offset + 1
        if len(self.log.buf) >= self.FLUSH_BYTES:
            self.flush()
        return True

    def _ended(self) -> None:
        """The log file is full (its BLANK spans it), so the next put rolls
        (``MappedFileQueue#isEmptyOrCurrentFileFull``); what was written is flushed."""
        self.flush()
        self.log = None

    def _append(self, record: bytes, queue_offset: int, tags_code: int, store_time: int) -> bool:
        """``CompactionAppendMessageCallback#doAppend``: at the end of the queue file (its
        next unit would fill it) or of the log file (no room for the record and a BLANK)
        the queue gets ``SparseConsumeQueue#putEndPositionInfo``'s unit and the log a BLANK
        (size = the rest of the file), and both files are full."""
        max_blank = self.log_size - self.log.pos
        if self.cq.pos + BATCH_CQ_UNIT_SIZE >= self.cq_size or len(record) + COMPACTION_END_BLANK_LENGTH > max_blank:
            self.cq.append(pack_unit(-1, 0, 0, 0, 0, 0))
            self.log.append(BlankRecord.build(dict(total_size=max_blank, magic=MAGIC_BLANK)))
            return False
        physical = self.log_from + self.log.pos
        self.log.append(
            record[:PHYSICAL_OFFSET_POS]
            + RecordLong.build(physical)
            + record[PHYSICAL_OFFSET_POS + RecordLong.sizeof() :]
        )
        self.cq.append(pack_unit(physical, len(record), tags_code, store_time, queue_offset, 1))
        self.placed.append((physical, len(record)))
        return True

    def compact(self) -> int | None:
        """``CompactionLog#doCompaction`` once, with nothing compacted before: every log file
        but the last (``#getCompactionFile``) is rewritten into ``compacting/``, keeping a
        record when its queue offset is its key's latest there and its body is not empty
        (``#getOffsetMap``, ``#shouldRetainMsg``), then the new files replace the old ones
        under the names they were written with (``#replaceFiles``, ``#replaceCqFiles``).
        Returns ``OffsetMap#getLastOffset`` for the position checkpoint, or None (one file)."""
        self.flush()
        if self.log_from < self.log_size:
            return None
        latest, last = {}, -1  # OffsetMap (MD5 of the key; collisions not modelled), then re-read
        for msg, _ in self._messages(self.log_from):
            latest[msg.properties.get(PROPERTY_KEYS)] = last = msg.queue_offset
        out = CompactionLogWriter(
            self.log_dir / COMPACTING_DIR, self.cq_dir / COMPACTING_DIR, self.log_size, self.cq_size, self.roots
        )
        for msg, raw in self._messages(self.log_from):
            if msg.queue_offset >= latest[msg.properties.get(PROPERTY_KEYS)] and msg.body:
                out.put(raw, msg.properties.get(PROPERTY_KEYS), tags_code(msg.tags), msg.store_timestamp)
        out.flush()
        for base in range(0, self.log_from, self.log_size):  # MappedFile#renameToDelete, #destroy
            for d in (self.log_dir, self.cq_dir):
                safefs.unlink_inside(d / offset2file_name(base), self.roots)
        for d in (self.log_dir, self.cq_dir):  # MappedFile#moveToParent
            for f in sorted((d / COMPACTING_DIR).iterdir()):
                os.replace(f, d / f.name)
            (d / COMPACTING_DIR).rmdir()
        return last

    def _messages(self, end: int):
        """(message, record bytes) of every record written below log offset ``end``, in order
        (one log file read at a time)."""
        from rmqstore_cli.store.commitlog import check_message

        data, base = b"", -1
        for physical, size in self.placed:
            if physical >= end:
                return
            if physical - physical % self.log_size != base:
                base = physical - physical % self.log_size
                data = safefs.read_bounded(self.log_dir / offset2file_name(base), self.log_size, "compaction log")
            raw = data[physical - base : physical - base + size]
            yield check_message(raw, 0, size, physical).message, raw

    def flush(self) -> None:
        for f in (self.log, self.cq):
            if f is not None:
                f.flush(self.roots)


class CompactionDispatch:
    """``CommitLogDispatcherCompaction`` for the compaction topics of a new store: one
    :class:`CompactionLogWriter` per queue, and the position checkpoint at close."""

    def __init__(
        self, root: Path, topics: set[str], log_file_size: int, cq_file_size: int, roots: list[Path], run: bool = False
    ):
        self.dir = root / COMPACTION_DIR
        #: Make one compaction run per queue at close (``CompactionLog#doCompaction``).
        self.run = run
        self.topics = topics
        cq = (cq_file_size or DEFAULT_COMPACTION_CQ_MAPPED_FILE_SIZE) // BATCH_CQ_UNIT_SIZE * BATCH_CQ_UNIT_SIZE
        self.cq_size = cq
        self.log_size = compaction_log_size(cq, log_file_size or DEFAULT_COMPACTION_MAPPED_FILE_SIZE)
        self.roots = roots
        self.writers: dict[tuple[str, int], CompactionLogWriter] = {}
        #: ``topics.json`` attributes of these topics (``TopicConfig#getAttributes``).
        self.attributes = {CLEANUP_POLICY_ATTRIBUTE: COMPACTION_POLICY}

    def dispatch(self, req, record: bytes, msg) -> None:
        """``CompactionService#putRequest``: a record of a compaction topic (every dispatch
        request, whatever its transaction type) into its queue's compaction log."""
        if req.topic not in self.topics:
            return
        w = self.writers.get((req.topic, req.queue_id)) or self.writer(req.topic, req.queue_id)
        w.put(record, msg.properties.get(PROPERTY_KEYS), req.tags_code, req.store_timestamp)

    def writer(self, topic: str, queue_id: int) -> CompactionLogWriter:
        """The queue's writer, made and continued after what is on disk (:meth:`CompactionLogWriter.resume`)."""
        sub = Path(topic) / str(queue_id)
        w = self.writers[(topic, queue_id)] = CompactionLogWriter(
            self.dir / COMPACTION_LOG_DIR / sub,
            self.dir / COMPACTION_CQ_DIR / sub,
            self.log_size,
            self.cq_size,
            self.roots,
        )
        w.resume()
        return w

    def close(self) -> None:
        """Flush every queue (with ``run``: compact each, in (topic, queueId) order, each run
        persisting the checkpoint, ``CompactionLog#compactAndReplace``); then
        ``CompactionStore#shutdown`` persists it once more. ``MixAll#string2File`` keeps the
        previous text as ``.bak``, so a store with a run has a ``.bak`` equal to the file."""
        from rmqstore_cli.store.records.message import JavaHashMap

        offsets = JavaHashMap(16)  # CompactionPositionMgr's ConcurrentHashMap: the same order under 12 keys
        for (topic, qid), w in sorted(self.writers.items()):
            w.flush()
            last = w.compact() if self.run else None
            if last is not None:
                offsets.put(f"{topic}{POSITION_KEY_SEPARATOR}{qid}", str(last))
        text = position_checkpoint_text([(k, int(v)) for k, v in offsets.items()]).encode()
        path = self.dir / POSITION_CHECKPOINT
        safefs.make_dirs(self.dir, self.roots)
        if offsets.items():
            safefs.replace_file(path.with_name(POSITION_CHECKPOINT + ".bak"), text, self.roots)
        if offsets.items() or not path.exists():  # appended without a run: the offsets loaded are kept
            safefs.replace_file(path, text, self.roots)


def compaction_dispatch(config, roots: list[Path]) -> CompactionDispatch | None:
    """The compaction store of an existing store continued (generate --append): its topics
    are those whose ``cleanup.policy`` is COMPACTION in config/topics.json
    (``CleanupPolicyUtils#isCompaction``, read by :func:`~rmqstore_cli.store.queues.batch_queue.topic_attribute`)
    and those compaction/compactionLog/ already has; None when there is none."""
    from rmqstore_cli.store.files.mapped_files import queue_dirs
    from rmqstore_cli.store.queues.batch_queue import topic_attribute, topic_table

    table = topic_table(config.root) or {}
    topics = {t for t in table if topic_attribute(table, t, CLEANUP_POLICY_ATTRIBUTE) == COMPACTION_POLICY}
    topics |= {t for t, _, _ in queue_dirs(config.root / COMPACTION_DIR / COMPACTION_LOG_DIR)}
    if not topics:
        return None
    d = CompactionDispatch(
        config.root, topics, config.compaction_mapped_file_size, config.compaction_cq_mapped_file_size, roots
    )
    _infer_sizes(d, config)
    on_disk = {
        (t, q)
        for sub in (COMPACTION_LOG_DIR, COMPACTION_CQ_DIR)
        for t, q, _ in queue_dirs(config.root / COMPACTION_DIR / sub)
    }
    for topic, qid in sorted(on_disk):
        d.writer(topic, qid)  # every queue checked before the store's first byte is written
    return d


def _infer_sizes(d: CompactionDispatch, config) -> None:
    """A file size not configured is the files' own (as the commit log's,
    ``StoreConfig#infer_sizes``): the first file's of the first queue."""
    for what, configured, sub in (
        ("cq_size", config.compaction_cq_mapped_file_size, COMPACTION_CQ_DIR),
        ("log_size", config.compaction_mapped_file_size, COMPACTION_LOG_DIR),
    ):
        size = None if configured > 0 else _first_file_size(config.root / COMPACTION_DIR / sub)
        if size:
            setattr(d, what, size)


def _first_file_size(directory: Path) -> int | None:
    """The size of the first file of the first queue under ``directory`` (every file is
    created at its full size), or None."""
    from rmqstore_cli.store.files.mapped_files import MappedFileQueue, queue_dirs, regular_size

    for _, _, q in sorted(queue_dirs(directory)):
        files = MappedFileQueue(q, 1).files
        if files:
            return regular_size(files[0].path)
    return None
