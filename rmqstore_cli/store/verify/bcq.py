"""verify's checks of the 5.x batch consume queues and the compaction store (``bcq.*``,
``compaction.*``), run after the commit-log scan.

- ``batchconsumequeue/<topic>/<queueId>/`` (``BatchConsumeQueue``): file names and sizes,
  each recovered unit against its commit-log record (size, topic, queue, tagsCode, store
  time, msgBaseOffset = INNER_BASE, batchSize = INNER_NUM: ``CommitLog#setBatchSizeIfNeeded``,
  ``BatchConsumeQueue#putBatchMessagePositionInfo``), msgBaseOffset contiguous from unit to
  unit, and every record of the topic's queue in the commit log having its unit.
- ``compaction/``: every compaction log's records well formed (``CompactionLog``: commit-log
  records, PHYSICALOFFSET their place in the compaction log), every compaction-queue unit
  against its compaction-log record (batch size 1), queue offsets rising, each record the
  same bytes as the commit-log record its consume queue names at that queue offset, and the
  position checkpoint (``CompactionPositionMgr``) naming queues that exist, not ahead of them.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from rmqstore_cli.formats.batch_queue import BATCH_CQ_UNIT_SIZE, COMPACTION_DIR, POSITION_CHECKPOINT
from rmqstore_cli.formats.commitlog import HEAD

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.commitlog import CommitLog, Status
from rmqstore_cli.store.files.mapped_files import queue_dir_paths, queue_dirs, topic_queue_dirs
from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue, queue_type, topic_table
from rmqstore_cli.store.records.message import Message

if TYPE_CHECKING:  # the unit checks, the shared walk and compaction/ load past check_batch_queues' gate
    from rmqstore_cli.store.queues.compaction import CompactionStore

BCQ_DIR = "batchconsumequeue"
#: Where PHYSICALOFFSET lies in a record: the one field a compaction log rewrites.
_PHY_AT = HEAD["physical_offset"].offset
_PHY_END = _PHY_AT + HEAD["physical_offset"].size


class BatchQueueChecks:
    """The ``bcq.*`` and ``compaction.*`` part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_batch_queues(self) -> None:
        """Both groups, over their own read-only views of the store."""
        root = self.config.root
        self._check_queue_types()
        if not (root / BCQ_DIR).is_dir() and not (root / COMPACTION_DIR).is_dir():
            return
        cl = CommitLog(self.config)
        try:
            self._check_bcq(cl)
            self._check_compaction(cl)
        finally:
            cl.close()

    def _check_queue_types(self) -> None:
        """``ConsumeQueueStore#loadConsumeQueues`` calls ``#queueTypeShouldBe`` for every queue
        directory of consumequeue/ (SimpleCQ) and batchconsumequeue/ (BatchCQ): a topic whose
        ``queue.type`` in config/topics.json (``QueueTypeUtils#getCQType``) is another throws,
        and ``DefaultMessageStore#load`` fails. Only with a topics.json (without one the
        table the broker will be given is unknown)."""
        from rmqstore_cli.formats.batch_queue import BATCH_CQ_TYPE, CQ_TYPES, SIMPLE_CQ_TYPE

        table = topic_table(self.config.root)
        if table is None:
            return
        seen: set[tuple[str, str]] = set()
        for directory, want in (
            (self.config.consumequeue_dir, SIMPLE_CQ_TYPE),
            (self.config.root / BCQ_DIR, BATCH_CQ_TYPE),
        ):
            listed = queue_dir_paths(directory) if want != SIMPLE_CQ_TYPE else _typed_queue_dirs(directory, table)
            for topic, _, d in listed:
                if (directory.name, topic) in seen:
                    continue
                seen.add((directory.name, topic))
                got = queue_type(table, topic)
                if got != want:
                    why = (
                        "not a CQType: CQType.valueOf throws"
                        if got not in CQ_TYPES
                        else f"'The queue type of topic: {topic} should be {want}, but is {got}'"
                    )
                    self._add(
                        "bcq.queue-type",
                        self.rel(d),
                        None,
                        f"topic {topic} has queue.type {got} in "
                        f"config/topics.json but a {directory.name}/ queue: {why}",
                    )

    # ------------------------------------------------------------------ batchconsumequeue/
    def _check_bcq(self, cl: CommitLog) -> None:
        root = self.config.root / BCQ_DIR
        qdirs = list(queue_dirs(root))
        if not qdirs:
            return
        size = self.config.mapper_file_size_batch_consume_queue or _majority_size(q for _, _, q in qdirs)
        units: dict[tuple[str, int], set[int]] = {}
        for topic, qid, d in qdirs:
            try:
                bq = BatchConsumeQueue(d, topic, qid, size)
            except StoreError as e:
                self._add("bcq.file-name", self.rel(e.path or d), None, e.message)
                continue
            self.files[BCQ_DIR] += len(bq.queue.files)
            self._bcq_files(bq, size)
            units[(topic, qid)] = self._bcq_units(bq, cl)
            bq.close()
        self._bcq_missing(cl, units)

    def _bcq_files(self, bq: BatchConsumeQueue, size: int) -> None:
        self.check_strays("bcq", bq.queue)
        for f in bq.queue.files:
            self.check_queue_file("bcq", self.rel(f.path), f, size, "mapperFileSizeBatchConsumeQueue")

    def _bcq_units(self, bq: BatchConsumeQueue, cl: CommitLog) -> set[int]:
        """Each unit against its record and its predecessor; the commit-log offsets seen."""
        from rmqstore_cli.store.checks.unit_check import check_batch_unit

        seen: set[int] = set()
        prev = None
        delay = self.config.delay_level_table
        for u in bq.units():
            rel = self.rel(bq.dir / u.file)
            seen.add(u.commitlog_offset)
            if prev is not None and (
                u.msg_base_offset != prev.msg_base_offset + prev.batch_size
                or u.commitlog_offset <= prev.commitlog_offset
            ):
                self._add(
                    "bcq.base-offset",
                    rel,
                    u.pos,
                    f"{bq.topic}/{bq.queue_id} unit {u.index}: msgBaseOffset "
                    f"{u.msg_base_offset} at {u.commitlog_offset} after {prev.msg_base_offset} + "
                    f"{prev.batch_size} at {prev.commitlog_offset}",
                )
            prev = u
            self._unit_finding("bcq", bq, u, check_batch_unit(cl, u, bq.topic, bq.queue_id, delay), rel)
        return seen

    def _unit_finding(self, area: str, bq: BatchConsumeQueue, u, c, rel: str) -> None:
        """A unit's check as its finding: expired (no queue named), mismatch or a bad target."""
        from rmqstore_cli.store.checks.unit_check import EXPIRED, MISMATCH

        if c.status == "ok":
            return
        check = {EXPIRED: "expired", MISMATCH: "unit-mismatch"}.get(c.status, "unit-target")
        where = {} if c.status == EXPIRED else {"topic": bq.topic, "queue_id": bq.queue_id}
        detail = f"{bq.topic}/{bq.queue_id} unit {u.index} -> {u.commitlog_offset}: {'; '.join(c.problems)}"
        self._add(f"{area}.{check}", rel, u.pos, detail, **where)

    def _bcq_missing(self, cl: CommitLog, units: dict[tuple[str, int], set[int]]) -> None:
        """Records of a BatchCQ queue's topic that no unit of that queue names: one finding a
        queue (missing up to the checkpoint's logics time, not dispatched yet after it)."""
        from rmqstore_cli.store.checks.shared_walk import shared_facts

        topics = {t for t, _ in units}
        cp = getattr(self, "checkpoint", None)
        logics = cp.logics_msg_timestamp if cp is not None else None
        missing: dict[tuple[str, int, bool], list[int]] = defaultdict(list)
        for topic, qid, off, ts in shared_facts(self).bcq_records(topics):  # the walk shared with timer.*
            have = units.get((topic, qid))
            if have is not None and off in have:
                continue
            late = logics is not None and ts > logics
            missing[(topic, qid, late)].append(off)
        for (topic, qid, late), offs in sorted(missing.items()):
            where = f"{BCQ_DIR}/{topic}/{qid}"
            what = f"{len(offs)} records of {topic}/{qid} (first at commit-log offset {offs[0]})"
            if late:
                self._add(
                    "bcq.not-dispatched",
                    where,
                    None,
                    f"{what} are newer than the checkpoint and have no unit yet: the broker dispatches them",
                )
            else:
                self._add(
                    "bcq.missing-unit",
                    where,
                    None,
                    f"{what} have no batch consume-queue unit",
                    topic=topic,
                    queue_id=qid,
                    physical_offset=offs[0],
                )

    # ------------------------------------------------------------------ compaction/
    def _check_compaction(self, cl: CommitLog) -> None:
        from rmqstore_cli.store.queues.compaction import CompactionStore

        cs = CompactionStore(self.config)
        if not cs.dir.is_dir():
            return
        ends: dict[tuple[str, int], int] = {}
        for topic, qid in cs.queues():
            try:
                bq = cs.cq(topic, qid)
                self.files["compaction"] += len(bq.queue.files)
                ends[(topic, qid)] = bq.max_offset
                log = cs.log(topic, qid)
            except StoreError as e:
                self._add("compaction.log-record", self.rel(e.path or cs.log_dir), None, e.message)
                continue
            self.files["compaction"] += len(log.files)
            records = self._compaction_log(log)
            self._compaction_units(bq, log, records, cl)
            log.close()
            bq.close()
        self._position_checkpoint(cs, ends)

    def _compaction_log(self, log: CommitLog) -> dict[int, Message]:
        """Every record of one compaction log; damage is ``compaction.log-record``."""
        from rmqstore_cli.store.queues.compaction import unexpected_stops

        records: dict[int, Message] = {}
        for m in log.scan(every_file=True):
            records[m.offset] = m
            if m.physical_offset != m.offset:
                f = log.queue.find(m.offset)
                self._add(
                    "compaction.log-record",
                    self.rel(f.path),
                    m.offset - f.file_from_offset,
                    f"PHYSICALOFFSET {m.physical_offset}, but the record lies at {m.offset} of the compaction log",
                )
        for s in unexpected_stops(log):
            f = log.queue.find(s.offset)
            self._add(
                "compaction.log-record",
                self.rel(f.path) if f else self.rel(log.queue.dirs[0]),
                s.offset - f.file_from_offset if f else None,
                f"{s.reason}: the rest of the file is not read",
            )
        return records

    def _compaction_units(
        self, bq: BatchConsumeQueue, log: CommitLog, records: dict[int, Message], cl: CommitLog
    ) -> None:
        """Units against the compaction log, in rising order, and each record against the
        commit-log record its consume queue names at that queue offset."""
        from rmqstore_cli.store.checks.unit_check import check_batch_unit

        prev = None
        named: set[int] = set()
        cq = self._commit_queue(bq.topic, bq.queue_id)
        delay = self.config.delay_level_table
        for u in bq.units():
            rel = self.rel(bq.dir / u.file)
            named.add(u.commitlog_offset)
            if prev is not None and (
                u.msg_base_offset <= prev.msg_base_offset or u.commitlog_offset <= prev.commitlog_offset
            ):
                self._add(
                    "compaction.cq-order",
                    rel,
                    u.pos,
                    f"{bq.topic}/{bq.queue_id} unit {u.index}: queue offset "
                    f"{u.msg_base_offset} at {u.commitlog_offset} after {prev.msg_base_offset} at "
                    f"{prev.commitlog_offset}",
                )
            prev = u
            c = check_batch_unit(log, u, bq.topic, bq.queue_id, delay, sparse=True)
            self._unit_finding("compaction", bq, u, c, rel)
            if c.status == "ok" and cq is not None:
                self._compaction_source(cq, cl, log, c.message, rel, u.pos)
        if cq is not None:
            cq.close()
        for off in sorted(set(records) - named):
            f = log.queue.find(off)
            self._add(
                "compaction.unreferenced",
                self.rel(f.path),
                off - f.file_from_offset,
                f"{bq.topic}/{bq.queue_id}: the record at {off} (queue offset {records[off].queue_offset}) has "
                "no compaction-queue unit: a consumer never reads it",
            )

    def _commit_queue(self, topic: str, qid: int):
        """The topic's consume queue (its own read-only view; None: not there)."""
        from rmqstore_cli.store.queues.consume_queue import ConsumeQueue

        d = self.config.consumequeue_dir / topic / str(qid)
        if not d.is_dir():
            return None
        try:
            return ConsumeQueue(self.config.consumequeue_dir, topic, qid, self.config.cq_file_size)
        except StoreError:
            return None  # the consume-queue checks report it

    def _compaction_source(self, cq, cl: CommitLog, log: CommitLog, m: Message, rel: str, pos: int) -> None:
        """The compaction record is the commit-log record at that queue offset, but for
        PHYSICALOFFSET (``CompactionAppendMessageCallback#doAppend``)."""
        found, off, size, _ = cq.units_at(np.array([m.queue_offset], np.int64))
        if not found[0] or int(off[0]) < cl.min_offset:
            return  # the consume queue or the commit log no longer holds it
        c = cl.check_at(int(off[0]))
        if c is None or c.status is not Status.VALID:
            return  # the consume queue's own checks report that
        a, b = _record_bytes(log, m.offset, m.total_size), _record_bytes(cl, int(off[0]), c.size)
        if a is None or b is None:
            return
        if len(a) != len(b) or a[:_PHY_AT] != b[:_PHY_AT] or a[_PHY_END:] != b[_PHY_END:]:
            self._add(
                "compaction.source",
                rel,
                pos,
                f"{m.topic}/{m.queue_id} queue offset {m.queue_offset}: the "
                f"compaction-log record at {m.offset} is not the commit-log record at {int(off[0])}",
                physical_offset=int(off[0]),
            )

    def _position_checkpoint(self, cs: CompactionStore, ends: dict[tuple[str, int], int]) -> None:
        """``CompactionPositionMgr``: readable, naming compacted queues, not past their end."""
        from rmqstore_cli.store.queues.compaction import parse_position_checkpoint

        path = cs.checkpoint_path
        rel = self.rel(path)
        try:
            cp = cs.position_checkpoint()
        except StoreError as e:
            self._add("compaction.position-checkpoint", rel, e.offset, e.message)
            return
        if cp is None:
            return
        for (topic, qid), offset in sorted(cp.offsets.items()):
            end = ends.get((topic, qid))
            if end is None:
                self._add(
                    "compaction.position-checkpoint",
                    rel,
                    None,
                    f"{topic}_{qid} = {offset}, but {topic}/{qid} has no compaction log",
                    severity="warning",
                )
            elif offset >= end:
                self._add(
                    "compaction.position-checkpoint",
                    rel,
                    None,
                    f"{topic}_{qid} = {offset}: compacted up to "
                    f"a queue offset its compaction queue does not reach (its end is {end})",
                )
        bak = path.with_name(POSITION_CHECKPOINT + ".bak")
        if bak.exists():
            try:
                other = parse_position_checkpoint(bak)
            except StoreError as e:
                self._add("compaction.position-checkpoint", self.rel(bak), e.offset, e.message, severity="info")
                return
            if other.offsets != cp.offsets:
                self._add(
                    "compaction.position-checkpoint",
                    self.rel(bak),
                    None,
                    "differs from position-checkpoint (the broker reads the .bak only when the file is unreadable)",
                    severity="info",
                )


def _majority_size(dirs) -> int:
    """The most common length of the files in ``dirs`` (the configured size a broker
    creates every file at); a whole number of units by default."""
    sizes = Counter(p.stat().st_size for d in dirs for p in Path(d).iterdir() if p.is_file())
    sizes.pop(0, None)
    return sizes.most_common(1)[0][0] if sizes else BATCH_CQ_UNIT_SIZE


def _record_bytes(log: CommitLog, offset: int, size: int) -> bytes | None:
    f = log.queue.find(offset)
    if f is None:
        return None
    buf = f.buffer()
    pos = offset - f.file_from_offset
    return bytes(buf[pos : pos + size]) if pos + size <= len(buf) else None


def _typed_queue_dirs(cq_dir: Path, table: dict) -> Iterator[tuple[str, int, str]]:
    """What ``queue_dir_paths(cq_dir)`` yields first of each topic that can be a
    ``bcq.queue-type`` finding there: one whose ``queue.type`` is not SimpleCQ, and so is
    named in ``table`` (a topic it leaves out is SimpleCQ). Those few topic directories are
    listed, not every one of consumequeue/ (20 000 on a many-queue store); in name order."""
    from rmqstore_cli.formats.batch_queue import SIMPLE_CQ_TYPE

    for topic in sorted(t for t in table if isinstance(t, str) and queue_type(table, t) != SIMPLE_CQ_TYPE):
        if topic in ("", ".", "..") or "/" in topic or "\0" in topic:
            continue  # not one directory name: no such topic directory
        try:
            d = os.path.join(cq_dir, topic)
            first = topic_queue_dirs(d)[:1] if os.path.isdir(d) else []
        except (UnicodeEncodeError, ValueError):  # a name no file system entry has
            continue
        for q in first:
            yield topic, int(q.name), q.path
