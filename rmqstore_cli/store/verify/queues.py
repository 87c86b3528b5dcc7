"""Consume queues against the commit log (docs/format/consume-queue.md).

The units are checked against each batch of records as it passes (numpy look-ups by queue
offset, :meth:`ConsumeQueue.units_at`), so the store is read once; which units were
accounted for is kept as runs (:class:`~rmqstore_cli.store.verify.marks.Marks`), and the
finish reports the rest and the messages that have no unit, in runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import numpy as np
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, EXT_ADDR_MAX, PRE_BLANK_SIZE

from rmqstore_cli.store.checks.findings import WARNING
from rmqstore_cli.store.checks.startup_queues import KnownEnd, KnownEnds, known_end
from rmqstore_cli.store.commitlog import Status
from rmqstore_cli.store.files.arrays import stable_argsort
from rmqstore_cli.store.files.mapped_files import QueueTree, queue_tree
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
from rmqstore_cli.store.verify import limits
from rmqstore_cli.store.verify.checks import first_nonzero
from rmqstore_cli.store.verify.marks import Marks


class QueueState:
    """One consume queue as verify reads it: the queue itself (:class:`ConsumeQueue` reads its
    units and finds its end) and which of its units the scan accounted for."""

    def __init__(self, cq: ConsumeQueue, root: Path):
        self.cq, self.root = cq, root
        self.topic, self.qid, self.dir = cq.topic, cq.queue_id, cq.dir
        #: (topic, queue id) as the scan names queues.
        self.key = (cq.topic.encode("utf-8", "surrogateescape"), cq.queue_id)
        cq.map_files()
        self.base = cq.min_file_offset
        self.end = cq.max_offset
        self.matched = Marks(max(0, self.end - self.base))

    def units_at(self, logical: np.ndarray):
        """(found mask, offset, size, tags) for logical unit indices below the end."""
        return self.cq.units_at(logical)

    def file_of(self, logical: int) -> tuple[str, int]:
        """(file relative to the store, byte offset) of unit ``logical``."""
        path, at = self.cq.file_of(logical)
        return os.path.relpath(path, self.root), at

    def has_file(self, logical: int) -> bool:
        """Whether the file that would hold unit ``logical`` is there."""
        return self.cq.file_path(self.cq.file_base(logical)) is not None

    def close(self) -> None:
        self.cq.close()


def queue_dir_list(tree: QueueTree) -> list[tuple[str, int, str]] | None:
    """``mapped_files.queue_dir_paths`` from a listing made already (:func:`queue_tree`), or
    None when two names of one topic are one queue id ("1", "01": their order is the listing's)."""
    out = []
    for t, queues in tree:
        ids = sorted((int(q.name), q.path) for q, _ in queues if q.name.isdigit() and q.name.isascii())
        if len({i for i, _ in ids}) < len(ids):
            return None
        out.extend((t.name, i, path) for i, path in ids)
    return out


class QueueChecks:
    """The consume-queue part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    #: How many missing-unit elements are kept exactly before only runs are (32 B each).
    MISSING_CAP = 2_000_000
    #: By queue directory, each queue's end as the broker's start-up leaves it
    #: (``startup_queues.recovered_end``), for the start-up prediction; none before :meth:`open_queues`.
    known_ends: Mapping[str, KnownEnd] = MappingProxyType({})

    def open_queues(self) -> None:
        """Every queue directory: names, file names, sizes and gaps; each queue's end."""
        cfg = self.config
        self.queues: dict[tuple[bytes, int], QueueState] = {}
        self._queue_ends = KnownEnds()
        self.known_ends = self._queue_ends
        bcq = cfg.root / "batchconsumequeue"
        self.batch_topics = (
            {p.name.encode("utf-8", "surrogateescape") for p in bcq.iterdir()} if bcq.is_dir() else set()
        )
        if self.open_rocksdb_queues():  # verify/rocksdb.py: the queues are a RocksDB database
            return
        cq_dir = cfg.consumequeue_dir  # a property building Paths: once, not once a queue
        listed, self.queue_listing = self.queue_listing, None  # infer_sizes' listing of the same directories
        tree = listed[1] if listed is not None and listed[0] == cq_dir else queue_tree(cq_dir)
        for t, queues in tree:
            t_dir = cq_dir / t.name  # children of a parsed Path: no parse of a whole path a queue
            for q, files in queues:
                if not (q.name.isascii() and q.name.isdigit()):
                    self._add(
                        "cq.file-name",
                        self.rel(q.path),
                        None,
                        "queue directory name is not a queue id",
                        severity=WARNING,
                    )
                    continue
                self._open_queue(cq_dir, t.name, int(q.name), t_dir / q.name, files)
        self._queue_ends.dirs = queue_dir_list(tree)

    def _open_queue(self, cq_dir: Path, topic: str, qid: int, d: Path, listed: list[os.DirEntry]) -> None:
        """One queue directory (``listed``: its entries): its files' names, sizes and gaps, its
        end (kept for the start-up prediction)."""
        cfg, size = self.config, self.config.cq_file_size
        cq = ConsumeQueue(cq_dir, topic, qid, size, directory=d, skip=self.not_regular, listed=listed)
        mq = QueueState(cq, self.root)
        self.files["consumequeue"] += len(cq.queue.files)
        self.check_strays("cq", cq.queue)
        prev = None
        for f in cq.queue.files:
            self.check_queue_file("cq", None, f, size)
            if prev is not None and f.file_from_offset != prev.end_offset:
                self._add(
                    "cq.gap",
                    self.rel(f.path),
                    0,
                    f"no file holds logical offsets "
                    f"{prev.end_offset // CQ_STORE_UNIT_SIZE}..{f.file_from_offset // CQ_STORE_UNIT_SIZE - 1} "
                    f"(file {prev.end_offset:020d} is missing)",
                    missing_file=self.rel(mq.dir / f"{prev.end_offset:020d}"),
                )
            prev = f
        if not cq.skipped and size == cfg.mapped_file_size_consume_queue:
            self._queue_ends[str(d)] = known_end(cq, size)
        self.queues[(topic.encode("utf-8", "surrogateescape"), qid)] = mq

    def check_strays(self, area: str, queue) -> None:
        """``MappedFileQueue#load`` skips what is not a 20-digit file name: ``<area>.file-name``."""
        for s in queue.strays:
            self._add(f"{area}.file-name", self.rel(s), None, "not a 20-digit offset: the broker cannot load it")

    def check_queue_file(self, area: str, rel: str | None, f, size: int, setting: str = "") -> None:
        """One file of a fixed-size queue as ``MappedFileQueue#load`` takes it: its start a
        multiple of the file size (``<area>.file-name``) and its length that size
        (``<area>.file-size``; ``setting`` names the broker option that sets it). ``rel``:
        its name in findings (None: made from its path when one is reported). Its length is
        the one it was opened with when it was (``MappedFile.length``), else a ``stat``."""
        if f.file_from_offset % size:
            self._add(
                f"{area}.file-name",
                rel or self.rel(f.path),
                None,
                f"start {f.file_from_offset} is not a multiple of the file size {size}",
            )
        length = f.length if f.length is not None else f.path.stat().st_size
        if length != size:
            said = f" ({setting})" if setting else ""
            self._add(
                f"{area}.file-size",
                rel or self.rel(f.path),
                None,
                f"{length} bytes, expected {size}{said}" + self._queue_file_advice(area, f, length, size),
            )

    def _queue_file_advice(self, area: str, f, length: int, size: int) -> str:
        """The repair of a consume-queue file the broker would not load: pad it to its size,
        then rebuild the topic's queues from the commit log (no unit lost: they are derived);
        a batch consume queue: rebuild-index rewrites all of them."""
        from rmqstore_cli.store.write.repair import pad_command

        if area == "bcq":  # no --topic rebuild for batch queues: rewritten by a whole queue rebuild
            return ""
        if length > size and any(f.path.read_bytes()[size:]):
            return "; units lie beyond the size: the file was written with another mappedFileSizeConsumeQueue"
        topic = f.path.parent.parent.name
        return "; repair (keeps every unit: the queue is rebuilt from the commit log): " + pad_command(
            self.root, size, f.path, queue=topic
        )

    def _check_units(self, tq, qoff, dispatch, absP, total, tags_code, store_ts, rel, base) -> None:
        """The unit of every dispatched record of the batch: there, pointing at it, agreeing."""
        idx = np.flatnonzero(dispatch)
        if not idx.size:
            return
        order = idx[stable_argsort(tq[idx])]
        g = tq[order]
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            sel = order[a:b]
            t = int(g[a])
            mq = self.tq_queue[t]
            L = qoff[sel]
            if mq is None and self.topic_names[self.tq_list[t][0]] in self.batch_topics:
                # a 5.x BatchCQ topic: its units are in batchconsumequeue/ (docs/format/batch-consume-queue.md),
                # not checked
                continue
            if mq is None:
                self._add_missing(t, L, absP[sel], store_ts[sel])
                continue
            found, off, size, tags = mq.units_at(L)
            match = found & (off == absP[sel])
            if not match.all():
                miss = ~found
                if miss.any():
                    self._add_missing(t, L[miss], absP[sel][miss], store_ts[sel][miss])
                other = found & ~match
                for j in np.flatnonzero(other).tolist():
                    self._unit_elsewhere(mq, int(L[j]), int(off[j]), int(absP[sel][j]))
                    mq.matched[int(L[j]) - mq.base] = True
            if match.any():
                m = np.flatnonzero(match)
                mq.matched[L[m] - mq.base] = True
                ext = (
                    tags[m] <= EXT_ADDR_MAX
                )  # ConsumeQueueExt address, not a tagsCode (docs/format/consume-queue.md#tags-code)
                bad = m[(size[m] != total[sel][m]) | ((tags[m] != tags_code[sel][m]) & ~ext)]
                for j in bad.tolist():
                    f, o = mq.file_of(int(L[j]))
                    what = []
                    if size[j] != total[sel][j]:
                        what.append(f"size {int(size[j])} but the message has {int(total[sel][j])} bytes")
                    if tags[j] != tags_code[sel][j]:
                        what.append(f"tagsCode {int(tags[j])} but the message's is {int(tags_code[sel][j])}")
                    self._add(
                        "cq.unit-mismatch",
                        f,
                        o,
                        f"unit {int(L[j])} -> {int(absP[sel][j])}: " + "; ".join(what),
                        topic=mq.topic,
                        queue_id=mq.qid,
                        physical_offset=int(absP[sel][j]),
                        subject=("queue", mq.key),
                    )

    def _unit_elsewhere(self, mq: QueueState, L: int, off: int, msg_at: int) -> None:
        """Unit L of the message's queue points at ``off``, not at the message (at ``msg_at``)."""
        c = self._check_at(off)
        f, o = mq.file_of(L)
        if (
            c is not None
            and c.status is Status.VALID
            and c.message.queue_offset == L
            and c.message.queue_id == mq.qid
            and c.message.topic_bytes == mq.topic.encode("utf-8", "surrogateescape")
        ):
            self._add(
                "cq.superseded",
                f,
                o,
                f"{mq.topic}/{mq.qid}: queue offset {L} is used by the messages at "
                f"{msg_at} and {off}; the unit points at {off} (duplicate queue offset after a restart, "
                "docs/format/commitlog.md#append)",
                physical_offset=msg_at,
                topic=mq.topic,
                queue_id=mq.qid,
                subject=("queue", mq.key),
            )
            return
        self._add(
            "cq.unit-mismatch",
            f,
            o,
            f"unit {L} points at {off}, but the message with queue offset {L} is at {msg_at}",
            topic=mq.topic,
            queue_id=mq.qid,
            physical_offset=msg_at,
            subject=("queue", mq.key),
        )

    def _late(self, off: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Messages not dispatched yet: stored after the checkpoint's logicsMsgTimestamp, or,
        for a RocksDB consume queue, at or past its dispatch checkpoint (verify/rocksdb.py)."""
        below = self.rocksdb_dispatched()
        if below is not None:
            return off >= below
        cp = self.checkpoint
        return ts > (cp.logics_msg_timestamp if cp is not None else 0)

    def _missing_where(self, mq: QueueState | None, lo: int) -> str:
        """Where the missing units of a cq.missing-unit run would have been."""
        if self.rocksdb_dispatched() is not None:  # one database, no files (verify/rocksdb.py)
            return (
                "the RocksDB consume queue holds no key of this queue"
                if mq is None
                else "no key for it in the RocksDB consume queue"
                if lo < mq.end
                else "after the queue's max offset"
            )
        return (
            "its queue directory is missing"
            if mq is None
            else (
                "below the queue's first file"
                if lo < mq.base
                else "in a missing file"
                if not mq.has_file(lo)
                else "after the queue's end"
            )
        )

    def _late_why(self) -> str:
        """Why :meth:`_late` messages are not due yet, for cq.not-dispatched's detail."""
        below = self.rocksdb_dispatched()
        return (
            "newer than the checkpoint's logicsMsgTimestamp"
            if below is None
            else f"at or past the RocksDB consume queue's dispatch checkpoint {below} (CHECKPOINT_TOPIC)"
        )

    def _add_missing(self, t: int, L: np.ndarray, off: np.ndarray, ts: np.ndarray) -> None:
        """Record messages of tq ``t`` that have no unit: as runs always, and as elements
        while under ``MISSING_CAP`` (then dropped: memory stays bounded by queues)."""
        self._extend_runs(t, L, off, ts)
        if self.missing is None:
            return
        self.missing.append((np.full(L.size, t), L, off, ts))
        self.missing_n += L.size
        if self.MISSING_CAP is not None and self.missing_n > self.MISSING_CAP:
            self.missing = None

    def _extend_runs(self, t: int, L: np.ndarray, off: np.ndarray, ts: np.ndarray) -> None:
        """Runs of consecutive queue offsets with one lateness (store time after the
        checkpoint's logicsMsgTimestamp) on one side of the tq's reset so far. Queue offsets
        are checked before units in each block, so the last reset (which decides
        cq.superseded at the end) is known here: no run straddles it."""
        late = self._late(off, ts)
        mark = self.tq_reset.get(t, -1)
        pre = off < mark
        cut = np.flatnonzero((L[1:] != L[:-1] + 1) | (late[1:] != late[:-1]) | (pre[1:] != pre[:-1])) + 1
        runs = self.missing_runs.setdefault(t, [])
        for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, L.size].tolist(), strict=True):
            lo, hi, lt = int(L[a]), int(L[b - 1]), bool(late[a])
            if a == 0 and runs:
                r = runs[-1]
                if r[1] + 1 == lo and r[3] == lt and r[4] == mark and (r[2] < mark) == bool(pre[0]):
                    r[1] = hi
                    continue
            self.missing_seq += 1
            runs.append([lo, hi, int(off[a]), lt, mark, self.missing_seq])

    def _missing_groups(self):
        """(kind, tq, first L, last L, first physical offset, count) per reported range, kind
        0 missing, 1 not dispatched yet, 2 superseded; ordered by kind, tq, queue offset.
        From the exact elements when kept; else from the runs, which give the same ranges
        unless one queue has the same queue offset missing twice in one kind (a damaged
        store past MISSING_CAP messages): then overlapping runs are reported apart."""
        reset_at = np.array([self.tq_reset.get(x, -1) for x in range(len(self.tq_list))], np.int64)
        if self.missing is None:
            yield from self._missing_groups_from_runs(reset_at)
            return
        if not self.missing:
            return
        t = np.concatenate([m[0] for m in self.missing])
        L = np.concatenate([m[1] for m in self.missing])
        off = np.concatenate([m[2] for m in self.missing])
        ts = np.concatenate([m[3] for m in self.missing])
        kind = np.where(off < reset_at[t], 2, self._late(off, ts).astype(np.int64))
        for is_late in (0, 1, 2):
            sel = np.flatnonzero(kind == is_late)
            if not sel.size:
                continue
            o = sel[np.lexsort((L[sel], t[sel]))]
            tt, LL = t[o], L[o]
            brk = np.flatnonzero(np.r_[True, (tt[1:] != tt[:-1]) | (LL[1:] != LL[:-1] + 1), True])
            for a, b in zip(brk[:-1].tolist(), brk[1:].tolist(), strict=True):
                yield is_late, int(tt[a]), int(LL[a]), int(LL[b - 1]), int(off[o[a]]), b - a

    def _missing_groups_from_runs(self, reset_at: np.ndarray):
        runs = [
            (2 if r[2] < reset_at[t] else int(r[3]), t, r[0], r[5], r[1], r[2])
            for t, rs in self.missing_runs.items()
            for r in rs
        ]
        runs.sort()
        cur = None
        for kind, t, lo, _, hi, first in runs:
            if cur is not None and cur[0] == kind and cur[1] == t and lo == cur[3] + 1:
                cur[3] = hi
                cur[5] += hi - lo + 1
                continue
            if cur is not None:
                yield tuple(cur)
            cur = [kind, t, lo, hi, first, hi - lo + 1]
        if cur is not None:
            yield tuple(cur)

    def finish_queues(self) -> None:
        if self.skipped:  # the queues could not be read: their units are not known missing
            return
        self.finish_lmq()
        self._report_missing_units()
        for mq in self.queues.values():
            self._report_unclaimed_units(mq)

    def _report_missing_units(self) -> None:
        """Messages their queue has no unit for, a run of queue offsets at a time: superseded
        (the offsets were used again after a restart), not dispatched yet (past the dispatch
        point), or missing (a repair case)."""
        for is_late, ti, lo, hi, first_off, count in self._missing_groups():
            tid, qid = self.tq_list[ti]
            topic = self.topic_names[tid].decode("utf-8", "backslashreplace")
            mq = self.tq_queue[ti]
            if mq is not None:
                file, fo = mq.file_of(lo)
            else:
                file = self.rel(self.config.consumequeue_dir / topic / str(qid))
                fo = None
            rng = f"unit {lo}" if lo == hi else f"units {lo}..{hi}"
            if is_late == 2:
                self._add(
                    "cq.superseded",
                    file,
                    fo,
                    f"{topic}/{qid}: {rng} ({count} messages from offset "
                    f"{first_off}) have no unit: their queue offsets were used again after a restart "
                    "(docs/format/commitlog.md#append), and the queue holds the newer messages",
                    topic=topic,
                    queue_id=qid,
                    physical_offset=first_off,
                    count=count,
                )
            elif is_late:
                self._add(
                    "cq.not-dispatched",
                    file,
                    fo,
                    f"{topic}/{qid}: {rng} ({count} messages from "
                    f"offset {first_off}) not written yet; " + self._late_why() + ", the broker "
                    "dispatches them at start",
                    topic=topic,
                    queue_id=qid,
                    physical_offset=first_off,
                    count=count,
                )
            else:
                where = self._missing_where(mq, lo)
                self._add(
                    "cq.missing-unit",
                    file,
                    fo,
                    f"{topic}/{qid}: {rng} missing ({count} messages "
                    f"from offset {first_off}; {where}); repair: "
                    + self.repair_command("--only", "cq", "--topic", topic),
                    topic=topic,
                    queue_id=qid,
                    physical_offset=first_off,
                    count=count,
                )

    def _report_unclaimed_units(self, mq: QueueState) -> None:
        """The units of ``mq`` no message accounted for: pre-blank units and units below the
        commit log's first offset are counted, one finding each per queue; any other is
        checked against the record it points at. Then the queue's tail."""
        cl_min = self.cl_min
        n = mq.end - mq.base
        if n <= 0:
            self._cq_tail(mq)
            return
        pre = expired = 0
        for a in range(0, n, limits.UNIT_CHUNK):  # the units no message accounted for, a chunk at a time
            un = mq.matched.unmarked(a, min(n, a + limits.UNIT_CHUNK))
            if not un.size:
                continue
            L = un + mq.base
            found, off, size, tags = mq.units_at(L)
            is_pre = (off == 0) & (size == PRE_BLANK_SIZE) & (tags == 0)
            pre += int(is_pre.sum())
            is_exp = ~is_pre & (off < cl_min) & (off >= 0)
            expired += int(is_exp.sum())
            rest = np.flatnonzero(found & ~is_pre & ~is_exp)
            for j in rest.tolist():
                why = self._why_not_message(int(off[j]), mq, int(L[j]))
                if why is None:
                    continue
                f, o = mq.file_of(int(L[j]))
                self._add(
                    "cq.unit-target",
                    f,
                    o,
                    f"unit {int(L[j])} -> {int(off[j])} ({int(size[j])} bytes): " + why,
                    topic=mq.topic,
                    queue_id=mq.qid,
                    physical_offset=int(off[j]),
                )
        if pre:
            f, o = mq.file_of(mq.base)
            self._add(
                "cq.pre-blank",
                f,
                o,
                f"{mq.topic}/{mq.qid}: {pre} pre-blank units below the first unit",
                topic=mq.topic,
                queue_id=mq.qid,
                count=pre,
            )
        if expired:
            f, o = mq.file_of(mq.base)
            self._add(
                "cq.expired",
                f,
                o,
                f"{mq.topic}/{mq.qid}: {expired} units point below the commit log's first offset {cl_min}",
                topic=mq.topic,
                queue_id=mq.qid,
                count=expired,
            )
        self._cq_tail(mq)

    def _why_not_message(self, off: int, mq: QueueState, logical: int) -> str | None:
        """Why unit ``logical`` of ``mq`` (pointing at ``off``) is wrong, or None if it is an LMQ unit."""
        if off < self.cl_min:
            return "below the commit log"
        if off >= self.cl_end:
            return f"beyond the end of the commit log's data ({self.cl_end})"
        c = self._check_at(off)
        if c is None:
            return self._no_file_reason(off)
        if c.status is not Status.VALID or c.message is None:
            return f"no readable message starts there ({c.reason or c.status.value})"
        m = c.message
        if m.topic_bytes != mq.topic.encode("utf-8", "surrogateescape") or m.queue_id != mq.qid:
            return self.lmq_unit_reason(m, mq, logical) or f"the message there belongs to {m.topic}/{m.queue_id}"
        if m.physical_offset != off:
            return f"the record there has PHYSICALOFFSET {m.physical_offset}"
        return f"the message there has queue offset {m.queue_offset}"

    def _cq_tail(self, mq: QueueState) -> None:
        tail = self.queue_tail(mq)
        if tail is not None:
            self.report_tail(mq.topic, mq.qid, mq.end, tail)

    def queue_tail(self, mq: QueueState) -> tuple[str, int] | None:
        """Where non-zero bytes follow ``mq``'s end in the file that holds it (``ConsumeQueue#recover``
        stops at the first invalid unit; what lies after it is ignored): (file relative to
        the store, the byte offset of the unit they are in), or None when only zeros follow."""
        b = mq.cq.file_base(mq.end)
        path = mq.cq.file_path(b)
        if path is None:
            return None
        at = _tail_at(mq.cq, b, path, (mq.end - b) * CQ_STORE_UNIT_SIZE)
        return None if at is None else (self.rel(path), at // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE)

    def report_tail(self, topic: str, qid: int, end: int, tail: tuple[str, int]) -> None:
        """``cq.tail`` of queue ``topic``/``qid`` ending at unit ``end`` (:meth:`queue_tail`)."""
        self._add(
            "cq.tail",
            tail[0],
            tail[1],
            f"{topic}/{qid}: non-zero bytes after the queue's end at unit {end}",
            topic=topic,
            queue_id=qid,
        )


def _tail_at(cq: ConsumeQueue, base: int, path: Path, start: int) -> int | None:
    """The first non-zero byte from ``start`` on of the queue file whose first unit is
    ``base``: in its copy when it was read (zeros follow it), else in its mapping's data."""
    copy = cq.copied_units(base)
    if copy is None:
        return first_nonzero(path, cq.file_units(base).view(np.uint8), start)
    if copy.size * CQ_STORE_UNIT_SIZE <= start:  # the copy ends with its last non-zero unit: zeros follow
        return None
    nz = np.flatnonzero(copy.view(np.uint8)[start:])
    return start + int(nz[0]) if nz.size else None
