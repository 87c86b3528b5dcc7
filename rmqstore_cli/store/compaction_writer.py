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
    position_checkpoint_text,
    QUEUE_OFFSET_POS,
    RecordLong,
)
from rmqstore_cli.store import safefs
from rmqstore_cli.store.batch_queue import pack_unit
from rmqstore_cli.store.compaction import compaction_log_size
from rmqstore_cli.store.consume_queue import write_range
from rmqstore_cli.store.mapped_files import offset2file_name
from rmqstore_cli.store.message import PROPERTY_KEYS, tags_code

#: ``CompactionLog.COMPACTING_SUB_FOLDER``: where a run writes the files that replace the old ones.
COMPACTING_DIR = "compacting"

class _OpenFile:
    """The last file of a log or queue: what was appended since the last flush (files are
    created at their full size when rolled, as ``MappedFileQueue#getLastMappedFile`` does)."""

    def __init__(self, path: Path, size: int, roots: list[Path], what: str):
        self.path, self.size, self.what = path, size, what
        self.pos = self.flushed = 0
        self.buf = bytearray()
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

    def _roll(self) -> None:
        """``TopicPartitionLog#roll``: the next log file, and a queue file of the same name."""
        self.flush()
        self.log_from += self.log_size
        name = offset2file_name(self.log_from)
        self.log = _OpenFile(self.log_dir / name, self.log_size, self.roots, "compaction-log file")
        self.cq = _OpenFile(self.cq_dir / name, self.cq_size, self.roots, "compaction consume-queue file")

    def put(self, record: bytes, keys: str | None, tags_code: int, store_time: int) -> bool:
        """``CompactionLog#asyncPutMessage``: False when the broker skips the message (a queue
        offset already in the queue, or no KEYS: ``StringUtils#isBlank``)."""
        queue_offset = RecordLong.parse(record[QUEUE_OFFSET_POS:PHYSICAL_OFFSET_POS])
        if queue_offset < self.next_queue_offset or not (keys or "").strip():
            return False
        if len(record) + COMPACTION_END_BLANK_LENGTH > self.log_size:
            return False  # fits no file: the broker writes a BLANK and the retry fails again
        if self.log is None:  # #isEmptyOrCurrentFileFull
            self._roll()
        if not self._append(record, queue_offset, tags_code, store_time):  # END_OF_FILE: roll, retry
            self._roll()
            self._append(record, queue_offset, tags_code, store_time)
        self.next_queue_offset = queue_offset + 1
        if len(self.log.buf) >= self.FLUSH_BYTES:
            self.flush()
        return True

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
        self.log.append(record[:PHYSICAL_OFFSET_POS] + RecordLong.build(physical)
                        + record[PHYSICAL_OFFSET_POS + RecordLong.sizeof():])
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
        out = CompactionLogWriter(self.log_dir / COMPACTING_DIR, self.cq_dir / COMPACTING_DIR, self.log_size,
                                  self.cq_size, self.roots)
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
            raw = data[physical - base:physical - base + size]
            yield check_message(raw, 0, size, physical).message, raw

    def flush(self) -> None:
        for f in (self.log, self.cq):
            if f is not None:
                f.flush(self.roots)


class CompactionDispatch:
    """``CommitLogDispatcherCompaction`` for the compaction topics of a new store: one
    :class:`CompactionLogWriter` per queue, and the position checkpoint at close."""

    def __init__(self, root: Path, topics: set[str], log_file_size: int, cq_file_size: int, roots: list[Path],
                 run: bool = False):
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
        w = self.writers.get((req.topic, req.queue_id))
        if w is None:
            sub = Path(req.topic) / str(req.queue_id)
            w = self.writers[(req.topic, req.queue_id)] = CompactionLogWriter(
                self.dir / COMPACTION_LOG_DIR / sub, self.dir / COMPACTION_CQ_DIR / sub, self.log_size,
                self.cq_size, self.roots)
        w.put(record, msg.properties.get(PROPERTY_KEYS), req.tags_code, req.store_timestamp)

    def close(self) -> None:
        """Flush every queue (with ``run``: compact each, in (topic, queueId) order, each run
        persisting the checkpoint, ``CompactionLog#compactAndReplace``); then
        ``CompactionStore#shutdown`` persists it once more. ``MixAll#string2File`` keeps the
        previous text as ``.bak``, so a store with a run has a ``.bak`` equal to the file."""
        from rmqstore_cli.store.message import JavaHashMap

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
        safefs.replace_file(path, text, self.roots)
