"""The compaction store of a 5.x broker (``CompactionStore``): per compacted queue a
compaction log and its sparse consume queue, and the position checkpoint.

``compaction/compactionLog/<topic>/<queueId>/`` holds commit-log records copied from the
commit log with PHYSICALOFFSET rewritten to their place in the compaction log
(``CompactionLog.CompactionAppendMessageCallback#doAppend``): they are read by the commit
log's own record decoder (:class:`~rmqstore_cli.store.commitlog.CommitLog` over that
directory). ``compaction/compactionCq/<topic>/<queueId>/`` is a ``SparseConsumeQueue`` of
46-byte units, one per retained message (batch size 1). ``compaction/position-checkpoint``
is ``CompactionPositionMgr``'s JSON: per ``topic_queueId`` the last queue offset compacted.
A compaction run rewrites the oldest files into one named like the first, so the log's
and the queue's file names have gaps (the sample: ``0`` then ``18400``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats.batch_queue import (
    BATCH_CQ_UNIT_SIZE,
    COMPACTION_CQ_DIR,
    COMPACTION_DIR,
    COMPACTION_LOG_DIR,
    POSITION_CHECKPOINT,
    POSITION_CHECKPOINT_LIMIT,
    POSITION_KEY_SEPARATOR,
)

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.commitlog import CommitLog, ScanEnd, is_clean_end
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import MappedFileQueue, queue_dirs, regular_size
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue


def compaction_log_size(cq_size: int, orig_log_size: int) -> int:
    """``CompactionLog#getCompactionLogSize``: the log's file size, a whole number of CQ
    file sizes (at least 5)."""
    n = orig_log_size // cq_size
    if n < 5:
        return cq_size * 5
    m = orig_log_size % cq_size
    return n * cq_size if 0 < m < (cq_size >> 1) else (n + 1) * cq_size


@dataclass(frozen=True)
class PositionCheckpoint:
    """``CompactionPositionMgr``: ``queueOffsetMap`` as {(topic, queueId): offset}."""

    offsets: dict[tuple[str, int], int]
    empty: bool


def parse_position_checkpoint(path: Path) -> PositionCheckpoint:
    """``CompactionPositionMgr#decode`` of the file (fastjson): a JSON object whose
    ``queueOffsetMap`` maps ``topic + "_" + queueId`` to a long. Anything else is a
    one-line StoreError naming the file."""
    data = safefs.load_json(path, limit=POSITION_CHECKPOINT_LIMIT, what="position-checkpoint")
    if not isinstance(data, dict):
        raise StoreError("position-checkpoint is not a JSON object", path=path)
    table = data.get("queueOffsetMap", {})
    if not isinstance(table, dict):
        raise StoreError("position-checkpoint: queueOffsetMap is not an object", path=path)
    offsets = dict(_position_entry(key, value, path) for key, value in table.items())
    return PositionCheckpoint(offsets, bool(data.get("empty", not offsets)))


def _position_entry(key: str, value: object, path: Path) -> tuple[tuple[str, int], int]:
    """One ``queueOffsetMap`` entry: ``topic + "_" + queueId`` (split at the last ``_``) to a
    long (a JSON bool or a number outside a long is refused)."""
    topic, sep, qid = key.rpartition(POSITION_KEY_SEPARATOR)
    if not sep or not topic or not (qid.isascii() and qid.isdigit()):
        raise StoreError(f"position-checkpoint: key {key!r} is not topic_queueId", path=path)
    if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 63) <= value < (1 << 63):
        raise StoreError(f"position-checkpoint: {key} holds {value!r}, not a long", path=path)
    return (topic, int(qid)), value


class CompactionStore:
    """``CompactionStore``'s directories under one store root, read-only."""

    def __init__(self, config: StoreConfig):
        self.config = config
        self.dir = config.root / COMPACTION_DIR
        self.log_dir = self.dir / COMPACTION_LOG_DIR
        self.cq_dir = self.dir / COMPACTION_CQ_DIR
        self.checkpoint_path = self.dir / POSITION_CHECKPOINT

    def queues(self) -> Iterator[tuple[str, int]]:
        """(topic, queueId) of every compaction log or compaction queue on disk, sorted."""
        found = {(t, q) for t, q, _ in queue_dirs(self.log_dir)} | {(t, q) for t, q, _ in queue_dirs(self.cq_dir)}
        yield from sorted(found)

    def cq_file_size(self) -> int | None:
        """``compactionCqMappedFileSize`` rounded down to whole units (None: the files' size)."""
        v = self.config.compaction_cq_mapped_file_size
        return v // BATCH_CQ_UNIT_SIZE * BATCH_CQ_UNIT_SIZE if v > 0 else None

    def log_file_size(self, directory: Path) -> int:
        """``CompactionLog#getCompactionLogSize`` of the configured sizes; with neither set,
        the size of the files found (every file is created at that size)."""
        cq = self.cq_file_size()
        log = self.config.compaction_mapped_file_size
        if cq is not None and log > 0:
            return compaction_log_size(cq, log)
        sizes = {regular_size(f.path) for f in MappedFileQueue(directory, 1).files}
        if len(sizes) > 1:
            raise StoreError(
                f"compaction-log files disagree on their size ({sorted(sizes)})",
                path=directory,
                hint="pass ⟦broker_conf⟧ with compactionMappedFileSize and compactionCqMappedFileSize",
            )
        return sizes.pop() if sizes else 1

    def log(self, topic: str, queue_id: int) -> CommitLog:
        """The compaction log of (topic, queueId) as a commit log over its directory."""
        d = self.log_dir / topic / str(queue_id)
        if not d.is_dir():
            raise StoreError(
                f"no compaction log {topic}/{queue_id}",
                path=d,
                hint="rmqstore dump-cq --summary lists the compacted queues",
            )
        cfg = dataclasses.replace(
            self.config, store_path_commit_log=str(d), mapped_file_size_commit_log=self.log_file_size(d)
        )
        return CommitLog(cfg)

    def cq(self, topic: str, queue_id: int) -> BatchConsumeQueue:
        """The compaction log's ``SparseConsumeQueue``."""
        return BatchConsumeQueue(self.cq_dir / topic / str(queue_id), topic, queue_id, self.cq_file_size(), sparse=True)

    def position_checkpoint(self) -> PositionCheckpoint | None:
        """The position checkpoint (None: no file)."""
        if not self.checkpoint_path.exists():
            return None
        return parse_position_checkpoint(self.checkpoint_path)


def unexpected_stops(log: CommitLog) -> list[ScanEnd]:
    """The stops of a compaction-log scan (``every_file``) that are damage: a compaction log
    has gaps between its files after a run, and each file ends in its preallocated zeros
    (a rewritten file gets no BLANK record), so neither is."""
    out = []
    for s in log.stops:
        if s.reason.startswith("gap:"):
            continue
        f = log.queue.find(s.offset)
        if f is not None and is_clean_end(f.buffer(), s.offset - f.file_from_offset, s.reason, True):
            continue
        out.append(s)
    return out
