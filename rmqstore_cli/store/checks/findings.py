"""Findings, the check ids, and the sink a :class:`~rmqstore_cli.store.verify.Verifier` emits them to.

A finding is a stable check id, a severity, the file relative to the store root, the byte
offset in that file and a detail. The Verifier counts every finding and hands those under
``max_findings`` to its :class:`FindingSink` in emission order; the local command drains a
:class:`FindingList`, the pipeline's tasks record them with their place in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from rmqstore_cli.store.records.fields import keys_dict

ERROR, WARNING, INFO = "error", "warning", "info"


def check_table(rows: str) -> dict[str, tuple[str, str]]:
    """Checks declared as a table, one row a check: ``<id> <severity> <meaning>``, a line that
    starts with white space going on with the meaning above it (joined by one space) and a
    line that starts with ``#`` a comment. Each check reads as one row, severities in one
    column; a severity that is none of the three, or an id given twice, fails at import."""
    table: dict[str, tuple[str, str]] = {}
    check = ""
    for line in rows.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace():
            severity, meaning = table[check]
            table[check] = (severity, f"{meaning} {line.strip()}")
            continue
        check, severity, meaning = line.split(maxsplit=2)
        if severity not in (ERROR, WARNING, INFO) or check in table:
            raise ValueError(f"check {check}: a second row, or severity {severity!r} not error, warning or info")
        table[check] = (severity, meaning)
    return table


#: Every check id, its severity when it fires, and what it means. Ids are stable. The other
#: modules of verify add theirs (``CHECKS.update``).
CHECKS: dict[str, tuple[str, str]] = check_table(
    """
store.live-broker               warning  a live broker holds the store's lock; files change under the check
store.not-regular               error    a FIFO, device, socket, directory or dangling link where a store file belongs:
                                         the broker cannot load it, and verify skips it
commitlog.file-name             error    a commit-log file name is not a 20-digit offset aligned to the file size
commitlog.file-size             error    a commit-log file's length is not mappedFileSizeCommitLog
                                         (docs/format/store-layout.md#loading)
commitlog.gap                   error    no file holds a range between two commit-log files (expired or lost middle
                                         file)
commitlog.magic                 error    no valid MAGICCODE where a record must start
commitlog.total-size            error    TOTALSIZE does not fit the file or disagrees with the fields (calMsgLength)
commitlog.field-bounds          error    a length field runs past the record's end or is negative
commitlog.truncated             error    the file ends inside a record
commitlog.physical-offset       error    PHYSICALOFFSET stored in the record differs from its position
commitlog.body-crc              error    BODYCRC differs from crc32(body) & 0x7FFFFFFF
commitlog.prop-crc              error    the __CRC32# whole-record CRC property is wrong
                                         (docs/format/commitlog.md#whole-record-crc)
commitlog.properties            warning  PROPERTIES are not valid UTF-8 or hold pairs the broker's parser drops
commitlog.topic                 error    the topic is empty, not UTF-8, or cannot be a consume-queue directory name
commitlog.topic-chars           warning  the topic has characters outside the broker's topic character set
commitlog.blank                 error    a BLANK end-of-file record is wrong, or a full file lacks one
                                         (docs/format/commitlog.md#blank-record)
commitlog.tail                  warning  non-zero bytes after the end of data (stale data after truncation,
                                         docs/format/recovery.md#stale-bytes)
commitlog.queue-offset          error    QUEUEOFFSET skips ahead within a (topic, queue): messages are missing
commitlog.queue-offset-reset    info     QUEUEOFFSET repeats or restarts (broker restart without its CQ,
                                         docs/format/commitlog.md#append)
cq.file-name                    error    a consume-queue file or directory name is not what the broker writes
cq.file-size                    error    a consume-queue file's length is not mappedFileSizeConsumeQueue
cq.gap                          error    a consume-queue file is missing between two others
cq.unit-target                  error    a unit points where no message of its queue starts
cq.unit-mismatch                error    a unit's size or tagsCode disagrees with its message, or points elsewhere
cq.missing-unit                 error    a dispatched message (store time <= checkpoint) has no consume-queue unit
cq.not-dispatched               info     messages newer than the checkpoint have no unit yet; the broker dispatches them
cq.superseded                   info     messages whose queue offsets were used again after a restart lost their units
                                         (docs/format/commitlog.md#append)
cq.pre-blank                    info     pre-blank units below a queue's first unit
                                         (docs/format/consume-queue.md#pre-blank-units)
cq.expired                      info     units point below the commit log's first offset (expired files,
                                         docs/format/expiry.md#consume-queue-files)
cq.tail                         warning  non-zero units after a queue's logical end (stale after truncation,
                                         docs/format/recovery.md#stale-bytes)
index.file-name                 warning  an index file name is not a yyyyMMddHHmmssSSS time
index.file-size                 error    an index file's length is not 40 + 4*maxHashSlotNum + 20*maxIndexNum
index.header                    error    the index header disagrees with its entries (count, begin/end offset and time)
index.slot-count                warning  hashSlotCount differs from the number of used slots (older writer?)
index.slot                      error    a slot points outside the written entries or at an entry of another slot
index.chain                     error    an entry's chain leaves the file, its slot, or does not terminate (loop,
                                         branch)
index.orphan                    error    an entry no slot chain reaches: its key cannot be found
index.entry                     error    an entry has a negative hash or time difference
index.order                     warning  entries' physical offsets go backwards
index.tail                      warning  non-zero entries after indexCount
index.entry-target              error    an entry points where no readable message starts
index.entry-hash                error    an entry's hash is none of its message's index keys
index.expired                   info     entries point below the commit log's first offset (expired,
                                         docs/format/index.md#entries-and-the-commit-log)
index.beyond-end                warning  entries point beyond the end of the commit log's data
                                         (docs/format/recovery.md#truncation)
index.missing-key               error    an indexed key of a message is not in the index (--deep)
index.missing                   error    messageIndexEnable=true, but no index file holds an entry while messages carry
                                         keys: every index-lookup finds nothing
checkpoint.missing              warning  no checkpoint file
checkpoint.ahead                error    a checkpoint time is newer than any message: flushed data is missing
abort.unclean-shutdown          warning  an abort file: the broker will run abnormal recovery
                                         (docs/format/recovery.md#abnormal-recovery)
recovery.truncate               error    the broker's recovery would stop here and truncate the commit log after it
broker.no-start                 error    the broker would not start on this store for a reason no other finding reports
                                         (broker_start names it and the repair)
# 5.x batch consume queues and compaction topics (store/verify/bcq.py)
bcq.file-name                   error    a batch consume-queue file name is not a 20-digit offset aligned to its file
                                         size
bcq.file-size                   error    a batch consume-queue file's length is not mapperFileSizeBatchConsumeQueue
bcq.queue-type                  error    a topic's queue directory (consumequeue/ or batchconsumequeue/) is not of the
                                         queue.type config/topics.json gives it: the 5.x broker does not load the store
bcq.unit-target                 error    a batch consume-queue unit points where no valid commit-log record starts
bcq.unit-mismatch               error    a batch unit's size, topic, queue, tagsCode, store time, msgBaseOffset
                                         (INNER_BASE) or batchSize (INNER_NUM) disagrees with its record
bcq.base-offset                 error    a batch unit's msgBaseOffset is not the previous unit's plus its batchSize
bcq.expired                     info     batch units point below the commit log's first offset (expired files)
bcq.missing-unit                error    records of a BatchCQ queue's topic (store time <= checkpoint) have no batch
                                         unit
bcq.not-dispatched              info     records of a BatchCQ queue newer than the checkpoint have no unit yet
compaction.log-record           error    a compaction log holds a damaged record, or PHYSICALOFFSET is not its place
compaction.unit-target          error    a compaction-queue unit points where no valid compaction-log record starts
compaction.unit-mismatch        error    a compaction-queue unit disagrees with its compaction-log record
compaction.expired              info     compaction-queue units point below the compaction log's first offset
compaction.cq-order             error    compaction-queue units' queue offsets or log offsets do not rise
compaction.unreferenced         warning  a compaction-log record no compaction-queue unit names: never read
compaction.source               error    a compaction-log record differs from the commit-log record at its queue offset
compaction.position-checkpoint  error    compaction/position-checkpoint is unreadable, names a queue without a
                                         compaction log, or lies past a compaction queue's end
# DLedger (store/verify/dledger.py; DLedgerMmapFileStore#recover)
dledger.entry                   error    a DLedger entry header is wrong: magic, size, pos or bodySize
dledger.order                   error    DLedger entry indexes do not follow each other, or a term goes back
dledger.index                   error    a DLedger index/ unit is missing or disagrees with its entry (recovery rewrites
                                         it)
dledger.unused-field            info     a DLedger entry's channel, chainCrc or bodyCrc is not 0: no DLedger version
                                         writes them and recovery ignores them (changed bytes)
dledger.index-tail              warning  DLedger index units after the last entry (recovery truncates them)
dledger.checkpoint              warning  the DLedger checkpoint's endIndex or committedIndex disagrees with the entries
dledger.term                    warning  DLedger's currterm is missing or older than the last entry's term
dledger.old-log                 error    a divided store lacks the old commitlog/ below its first DLedger data file
# LMQ multi-dispatch (store/verify/lmq.py)
lmq.assumed                     info     messages carry INNER_MULTI_QUEUE_OFFSET, no config says multi-dispatch: checked
                                         as enabled
lmq.malformed                   error    INNER_MULTI_DISPATCH/INNER_MULTI_QUEUE_OFFSET the broker's dispatch rejects
                                         (count, offset, name)
lmq.missing-unit                warning  a queue a message lists has no unit at the listed offset
lmq.not-dispatched              info     a message newer than the checkpoint lacks a listed unit: the broker dispatches
                                         it
lmq.unit-mismatch               error    a multi-dispatch unit points elsewhere or disagrees in size or tagsCode
lmq.queue-end                   warning  an LMQ queue's end is not the next offset the log assigned it (the counter
                                         after a restart)
"""
)


@dataclass(slots=True)
class Finding:
    check: str
    severity: str
    file: str
    offset: int | None
    detail: str
    extra: dict = field(default_factory=dict)
    #: What the finding is about when its place in the emission order depends on it (not
    #: output): ("topic", topic bytes) or ("queue", (topic bytes, queue id)).
    subject: tuple | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict:
        d = keys_dict(self, "check severity file offset detail")
        d.update(self.extra)
        return d


class FindingSink(Protocol):
    """Where a Verifier's findings go, and what its commit-log scan tells about where it is
    (the order findings come out in: per batch of records, topics and queues by first sight).
    :class:`FindingList` is the plain sink; the scan events are for sinks that place
    findings of a part of the store in the order of the whole (``pipeline.verify_tasks``)."""

    def emit(self, finding: Finding) -> None:
        """One finding, in emission order."""

    def batch_started(self) -> None:
        """A batch of records is about to be checked."""

    def topic_seen(self, topic: bytes, physical_offset: int) -> None:
        """The scan met ``topic`` for the first time (its topic findings follow)."""

    def queues_numbered(self, keys: list[tuple[bytes, int]]) -> None:
        """The scan met these (topic, queue id) for the first time, in this order."""

    def queue_heads(self, heads: dict) -> None:
        """(topic, queue id) -> (queue offset, step, physical offset, file, file base) of a
        queue's first dispatched record in the scan: only if :attr:`wants_queue_heads`."""

    wants_queue_heads: bool


class FindingList:
    """The plain sink: findings kept in order until :meth:`drain` hands them out."""

    wants_queue_heads = False

    def __init__(self) -> None:
        self.pending: list[Finding] = []

    def emit(self, finding: Finding) -> None:
        self.pending.append(finding)

    def drain(self) -> list[Finding]:
        out, self.pending = self.pending, []
        return out

    def batch_started(self) -> None:
        pass

    def topic_seen(self, topic: bytes, physical_offset: int) -> None:
        pass

    def queues_numbered(self, keys: list[tuple[bytes, int]]) -> None:
        pass

    def queue_heads(self, heads: dict) -> None:
        pass


@dataclass
class VerifyOptions:
    crc: bool = True
    deep: bool = False
    #: Findings emitted per check (all are counted); None = no limit.
    max_findings: int | None = None
    #: The broker version recovery is predicted for (store/checks/startup.py VERSIONS); None: the store's.
    broker_version: str | None = None


def text(s: str) -> str:
    """A file or topic name from disk as valid UTF-8 text: bytes that are not UTF-8 (held
    as surrogates by ``os.fsdecode``) become ``\\xNN`` escapes, so JSON output cannot fail."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class Deferred:
    """Findings of one kind met out of their emission order: arrays of (key, values...),
    handed out sorted by key. With a cap on findings only the ``cap`` smallest keys are
    kept (the rest are counted in :attr:`dropped`), so memory is bounded by the cap."""

    def __init__(self, cap: int | None):
        self.cap = cap
        self.parts: list[list[np.ndarray]] = []
        self.kept = self.total = 0

    def add(self, key: np.ndarray, *cols: np.ndarray) -> None:
        if not key.size:
            return
        self.parts.append([np.asarray(x, np.int64) for x in (key, *cols)])
        self.kept += key.size
        self.total += key.size
        if self.cap is not None and self.kept > 2 * self.cap + 1024:
            self.parts = [self._sorted()]
            self.kept = self.parts[0][0].size

    def _sorted(self) -> list[np.ndarray]:
        cols = [np.concatenate(c) for c in zip(*self.parts, strict=True)]
        o = np.argsort(cols[0], kind="stable")
        if self.cap is not None:
            o = o[: self.cap]
        return [c[o] for c in cols]

    def rows(self):
        if not self.parts:
            return iter(())
        cols = self._sorted()
        self.kept = cols[0].size
        return zip(*(c.tolist() for c in cols), strict=True)

    @property
    def dropped(self) -> int:
        return self.total - self.kept
