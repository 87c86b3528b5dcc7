"""``verify`` decomposed: one task per commit-log file, per queue and per index file.

The whole-store :class:`~rmqstore_cli.store.verify.Verifier` is run in pieces: every piece
runs the Verifier's public phases on a Verifier that holds only that piece's state, its
findings going to a :class:`Recorder` (a :class:`~rmqstore_cli.store.verify.FindingSink`
that keeps each finding with its place in the local emission order), so the findings and
the summary are the local engine's (as a set; the driver sorts them into the local order and
caps them per check exactly as the local engine does):

0. driver: ``infer_sizes``, ``open_store(index=False)``, ``open_commitlog`` (sizes, lock,
   checkpoint, abort, consume-queue files and directories, commit-log file names).
1. one task per index file: ``open_index_file`` (name, size, structure); the driver runs
   ``check_index_order`` on the headers.
2. one task per commit-log file: ``scan_file_at`` with fresh cross-file state. What crosses
   files comes back as small summaries: each queue's first and next queue offset in the file
   (the driver runs ``_check_queue_offsets`` on the first record of each queue against the
   previous file's end), the topics first seen (a topic finding is kept from its first file
   only), and where the local engine would first number each topic and queue (the order of
   findings within a batch). Units and index entries a file accounts for are kept as runs.
3. one task per queue: ``finish_queues`` on that queue alone (missing units of every file,
   units matched by any file); one task per index file: ``finish_index``.
4. driver: ``check_index_missing``, ``check_checkpoint`` and ``check_recovery`` from the
   per-file summaries, then the timer store, batch queues and ``check_configs``.

Each finding carries its place in the local engine's emission order: (phase, group, batch,
rank, sequence). Tasks keep at most ``max_findings`` per check of what can still be among the
first ``max_findings`` in that order, so the driver only ever holds capped findings.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from rmqstore_cli.pipeline.local import fork_map
from rmqstore_cli.store.consume_queue import ConsumeQueue
from rmqstore_cli.store.verify import ERROR, INFO, WARNING, Finding, IndexScan, QueueState, Verifier, VerifyOptions

_TQ_CHECKS = frozenset(
    {"commitlog.queue-offset", "commitlog.queue-offset-reset", "cq.unit-mismatch", "cq.superseded"}
)  # ordered by queue within a batch
_TOPIC_CHECKS = frozenset({"commitlog.topic", "commitlog.topic-chars"})  # once per store, where first seen
_MISSING_CHECKS = frozenset({"cq.missing-unit", "cq.not-dispatched", "cq.superseded"})  # runs of missing units


class _Marks:
    """Stands in for a boolean array that is only ever set (``a[idx] = True``) during the
    scan; the indices are handed back as [start, end) runs."""

    def __init__(self):
        self.parts: list[np.ndarray] = []

    def __setitem__(self, idx, value) -> None:
        assert value is True
        self.parts.append(np.asarray(idx, dtype=np.int64).ravel())

    def runs(self) -> np.ndarray:
        if not self.parts:
            return np.zeros((0, 2), np.int64)
        u = np.concatenate(self.parts)
        if len(u) > 1 and not bool(np.all(u[1:] >= u[:-1])):  # marks come mostly in order: sort only if not
            u = np.sort(u)
        cut = np.flatnonzero(np.diff(u) > 1) + 1  # repeats (step 0) stay inside a run
        starts = np.r_[u[:1], u[cut]]
        ends = np.r_[u[cut - 1], u[-1:]] + 1
        return np.stack([starts, ends], axis=1)


def _mark(arr: np.ndarray, runs_list) -> None:
    for runs in runs_list:
        for s, e in runs.tolist():
            arr[s:e] = True


class Recorder:
    """A :class:`~rmqstore_cli.store.verify.FindingSink` that keeps findings with their place
    in the local emission order: (phase, group, batch, rank, sequence), at most ``cap``
    per check of what can still be among the first ``cap`` in that order."""

    wants_queue_heads = False

    def __init__(self, cap: int | None, phase: int, group: tuple = (0,)):
        self.cap, self.phase, self.group = cap, phase, group
        self.kept: list[tuple] = []  # (check, key, tag, finding dict)
        self.seq = 0
        self.batch = 0
        self.placed: Counter = Counter()

    def emit(self, finding: Finding) -> None:
        self.seq += 1
        placed = self.place(finding)
        if placed is not None:
            self.kept.append((finding.check, placed[0], placed[1], finding.as_dict()))

    def group_of(self, check: str) -> tuple:
        return self.group

    def place(self, f: Finding):
        """(key, tag) of a finding worth keeping, or None."""
        if self.cap is not None and self.placed[f.check] >= self.cap:
            return None
        self.placed[f.check] += 1
        return (self.phase, self.group_of(f.check), self.batch, (), self.seq), None

    def batch_started(self) -> None:
        pass

    def topic_seen(self, topic: bytes, physical_offset: int) -> None:
        pass

    def queues_numbered(self, keys: list) -> None:
        pass

    def queue_heads(self, heads: dict) -> None:
        pass


def _verifier(plan: StorePlan, rec: Recorder) -> Verifier:
    """A Verifier of ``plan``'s store whose every finding goes to ``rec`` (the cap is the
    driver's); a task hands its missing units on as arrays (bounded by its file), and a
    queue task reports them exactly from those: never only runs."""
    v = Verifier(
        plan.config,
        VerifyOptions(crc=plan.crc, deep=plan.deep, max_findings=None, broker_version=plan.broker_version),
        sink=rec,
    )
    v.MISSING_CAP = None
    return v


def _result(v: Verifier, rec: Recorder) -> dict:
    return {"kept": rec.kept, "counts": v.counts, "sev": v.by_severity}


# ===================================================================== driver: plan


@dataclass
class StorePlan:
    label: str
    config: object
    crc: bool
    deep: bool
    cap: int | None
    files: list  # commit-log file names, in order
    index_paths: list  # index file paths, in order
    queue_dirs: dict  # (topic bytes, qid) -> (directory name, qid, path, position)
    checkpoint: object
    abort: bool
    cl_min: int
    notes: list
    files_count: Counter
    opening: dict = field(default_factory=dict)
    # filled after the index tasks
    index_info: list = field(default_factory=list)
    index_end: int = -1
    want_keys: bool = False
    rocksdb: bool = False  # the queues are a RocksDB database (each task opens it read-only)
    broker_version: str | None = None  # the one recovery is predicted for (None: the store's)


def plan_store(spec, crc: bool, deep: bool, cap: int | None) -> StorePlan:
    """Phase 0 on the driver (metadata only: directory listings, checkpoint, queue ends)."""
    from rmqstore_cli.store.config import StoreConfig
    from rmqstore_cli.store.verify import open_for_verify

    cfg = open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))
    rec = Recorder(cap, 0)
    v = Verifier(cfg, VerifyOptions(crc=crc, deep=deep, max_findings=None), sink=rec)
    v.infer_sizes()
    v.open_store(index=False)
    rocks = getattr(v, "rocksdb", None) is not None  # the tasks reopen it (RocksDBChecks)
    v.close_rocksdb()
    v.open_commitlog()
    v.mfq.close()
    queue_dirs = {k: (mq.topic, mq.qid, str(mq.dir), n) for n, (k, mq) in enumerate(v.queues.items())}
    for mq in v.queues.values():
        mq.close()
    try:
        paths = sorted(str(p) for p in cfg.index_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        paths = []
    return StorePlan(
        spec.label,
        cfg,
        crc,
        deep,
        cap,
        [f.name for f in v.mfq.files],
        paths,
        queue_dirs,
        v.checkpoint,
        v.abort,
        v.cl_min,
        list(v.notes),
        Counter(v.files),
        _result(v, rec),
        rocksdb=rocks,
    )


# ===================================================================== index files: open


def index_info_task(plan: StorePlan, k: int) -> SimpleNamespace:
    """What the scan needs of index file ``k``, without checking it: its header and the
    range of its entries' offsets (one pass over one column), so that the structure check
    (:func:`index_open_task`) can run beside the scan instead of before it."""
    cfg = plan.config
    f = IndexScan(Path(plan.index_paths[k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)
    try:
        return SimpleNamespace(
            k=k,
            name=f.name,
            rel=f.rel,
            n=f.n,
            begin_phy=f.begin_phy,
            end_phy=f.end_phy,
            end_ts=f.end_ts,
            entries=f.entry_count,
            phy_min=f.phy_min if f.entry_count else None,
            phy_max=f.phy_max if f.entry_count else None,
            ordered=bool(f.phy_ordered),
        )
    finally:
        f.close()


class _IndexWindow(IndexScan):
    """An index file as one file task's scan reads it: only the entries whose offsets lie in
    ``[lo, hi)``, the task's commit-log file, when the entries are in offset order (as the
    broker appends them; ``index_info_task`` saw the whole file). The arrays keep the
    file's numbering (entries outside the window are allocated, never touched, so they
    cost no memory), so marks and findings name the same entries as a whole-file load;
    a task then costs and holds what its own file's entries need, not the index file's."""

    def __init__(self, path: Path, slots: int, max_num: int, root: Path, lo: int, hi: int):
        super().__init__(path, slots, max_num, root)
        self.window = (self._first_at_or_above(lo), self._first_at_or_above(hi))

    def _first_at_or_above(self, phy: int) -> int:
        """Binary search over the mapped entries' offsets (in order): a few pages read."""
        a, b = 0, self.entry_count
        while a < b:
            m = (a + b) // 2
            if int(self.columns(m, m + 1, "phy_offset")[0][0]) < phy:
                a = m + 1
            else:
                b = m
        return a

    def load(self) -> None:
        self.read_entries(*self.window)
        self.order = None
        self.sorted_phy = self.phy

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        a, b = self.window
        w = self.phy[a:b]
        return np.arange(a + np.searchsorted(w, lo, "left"), a + np.searchsorted(w, hi, "left"))


def index_open_task(plan: StorePlan, k: int) -> dict:
    """Index file ``k`` checked alone (name, size, structure)."""
    rec = Recorder(plan.cap, 1, (k,))
    v = _verifier(plan, rec)
    v.open_index_file(Path(plan.index_paths[k])).close()
    return _result(v, rec)


def index_order(plan: StorePlan, infos: list) -> dict:
    """``check_index_order`` from the index files' headers; sets ``index_end`` and whether the
    scan extracts index keys (as ``open_commitlog`` decides it)."""
    rec = Recorder(plan.cap, 1, (len(infos),))
    v = _verifier(plan, rec)
    v.index_files = infos
    v.check_index_order()
    plan.index_info = infos
    plan.index_end = v.index_end
    plan.want_keys = plan.config.message_index_enable and (any(i.entries for i in infos) or plan.deep)
    return _result(v, rec)


# ===================================================================== commit-log files: scan


class FileRecorder(Recorder):
    """The findings of one commit-log file's scan (``scan_file_at``) on a Verifier that has
    seen no earlier file, and what the driver needs to join files up: where each topic and
    queue was first met, each queue's first record in the file."""

    wants_queue_heads = True

    def __init__(self, plan: StorePlan, i: int):
        super().__init__(plan.cap, 2, (i,))
        self.topic_first: dict[bytes, int] = {}
        self.tq_first_batch: dict[tuple, int] = {}
        self.tq_head: dict[tuple, tuple] = {}
        self.tq_state: dict[str, list] = {}
        self.tq_group: Counter = Counter()

    def batch_started(self) -> None:
        self.batch += 1

    def topic_seen(self, topic: bytes, physical_offset: int) -> None:
        self.topic_first.setdefault(topic, physical_offset)

    def queues_numbered(self, keys: list) -> None:
        for k in keys:
            self.tq_first_batch[k] = self.batch

    def queue_heads(self, heads: dict) -> None:
        for k, head in heads.items():
            self.tq_head[k] = (*head, self.batch)

    def place(self, f: Finding):
        if f.check == "lmq.assumed":  # said once per store, by the first file that says it
            return (self.phase, self.group, self.batch, (), self.seq), ("once", f.check)
        if f.check in _TOPIC_CHECKS:  # the driver keeps the one of the store's first file
            return (self.phase, self.group, self.batch, (), self.seq), f.subject
        if f.check not in _TQ_CHECKS:
            return super().place(f)
        # ordered by (batch, queue number, sequence): keep what can be among the first `cap`
        tk = f.subject[1]
        s = self.tq_state.get(f.check)
        if s is None:
            s = self.tq_state[f.check] = [self.batch, 0, 0]  # batch, findings before it, in it
        if s[0] != self.batch:
            s[:] = [self.batch, s[1] + s[2], 0]
        s[2] += 1
        if self.cap is not None:
            g = (f.check, self.batch, tk)
            self.tq_group[g] += 1
            if s[1] >= self.cap or self.tq_group[g] > self.cap:
                return None
        return (self.phase, self.group, self.batch, None, self.seq), ("tq", tk)


@dataclass
class FileScan:
    store: int
    i: int
    kept: list
    counts: Counter
    sev: Counter
    messages: int
    bytes: int
    max_store_ts: int
    cl_end: int | None
    first_records: dict
    stops: list
    topic_first: dict
    tq_first_batch: dict
    tq_head: dict
    tq_tail: dict
    tq_reset: dict
    first_indexable: int | None = None  # the file's first message with an index key (index.missing)
    # shuffled to the queue and index tasks, never collected
    missing: dict = None  # tq -> (L, off, ts)
    matched: dict = None  # queue -> runs
    checked: dict = None  # index file number -> runs
    lmq_ends: dict = None  # queue -> the next offset this file's messages assign it (lmq.queue-end)
    lmq_mode: tuple | None = None  # (enable_lmq, broker5) when the file checked multi-dispatch
    scanned: int = 0  # the file's bytes as a progress bar counts them (``CommitLogScan#scan_file_at``)

    def light(self) -> FileScan:
        return FileScan(**{**self.__dict__, "missing": None, "matched": None, "checked": None, "lmq_ends": None})

    def marks(self) -> int:
        """Numbers in what the queue and index tasks read of this file (runs, missing units):
        a few per queue and index file unless the store is damaged."""
        arrays = [a for t in (self.missing or {}).values() for a in t]
        return sum(np.size(a) for a in [*arrays, *(self.matched or {}).values(), *(self.checked or {}).values()])


def scan_task(plan: StorePlan, store: int, i: int) -> FileScan:
    """Commit-log file ``i`` scanned alone: its findings, totals and what crosses files."""
    cfg = plan.config
    rec = FileRecorder(plan, i)
    v = _verifier(plan, rec)
    v.retire_index_files = False  # the task ships its index files' marks after the scan
    v.checkpoint, v.abort = plan.checkpoint, plan.abort
    with v.muted():  # the driver's findings
        v.open_queues()
    for mq in v.queues.values():
        mq.matched = _Marks()
    lo = int(plan.files[i]) if plan.files[i].isdigit() else None
    length = max(
        (os.path.getsize(d / plan.files[i]) for d in cfg.commitlog_dirs if (d / plan.files[i]).is_file()), default=0
    )
    hi = None if lo is None else lo + max(cfg.mapped_file_size_commit_log, length)  # records lie below
    v.index_files, ks = _scan_index_files(plan, lo, hi)
    v.index_end = plan.index_end
    try:
        with v.muted():
            v.open_commitlog()
        v.want_keys = plan.want_keys
        v.index_empty = cfg.message_index_enable and not any(x.entries for x in plan.index_info)
        v.scan_file_at(i)
        try:
            v.mfq.close()
        except BufferError:
            pass
        got = _file_scan(plan, store, i, v, rec, ks)
        got.scanned = min(length, cfg.mapped_file_size_commit_log)
        return got
    finally:
        for mq in v.queues.values():
            mq.close()
        for f in v.index_files:
            f.close()
        v.close_rocksdb()


def _scan_index_files(plan: StorePlan, lo: int | None, hi: int | None) -> tuple[list, list]:
    """The index files with entries inside a commit-log file's range (a window of each
    ordered one), and their numbers."""
    cfg = plan.config
    files, ks = [], []
    for info in plan.index_info:
        if info.entries and (lo is None or (info.phy_min < hi and info.phy_max >= lo)):
            args = (Path(plan.index_paths[info.k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)
            f = _IndexWindow(*args, lo, hi) if info.ordered and lo is not None else IndexScan(*args)
            f.known_range = (info.phy_min, info.phy_max)  # read by the info pass
            f.checked = _Marks()
            files.append(f)
            ks.append(info.k)
    return files, ks


def _file_scan(plan: StorePlan, store: int, i: int, v: Verifier, rec: FileRecorder, ks: list) -> FileScan:
    missing: dict = {}
    if v.missing:
        t = np.concatenate([m[0] for m in v.missing])
        cols = [np.concatenate([m[c] for m in v.missing]) for c in (1, 2, 3)]
        for tq in np.unique(t).tolist():
            sel = t == tq
            missing[v.queue_key(tq)] = tuple(c[sel] for c in cols)
    return FileScan(
        store,
        i,
        rec.kept,
        v.counts,
        v.by_severity,
        v.messages,
        v.bytes,
        v.max_store_ts,
        v.cl_end if i == len(plan.files) - 1 else None,
        dict(v.first_records),
        list(v.stops),
        rec.topic_first,
        rec.tq_first_batch,
        rec.tq_head,
        {v.queue_key(t): e for t, e in enumerate(v.tq_last) if e is not None},
        {v.queue_key(t): p for t, p in v.tq_reset.items()},
        v.first_indexable,
        missing,
        {k: r for k, mq in v.queues.items() if len(r := mq.matched.runs())},
        {k: r for k, f in zip(ks, v.index_files, strict=True) if len(r := f.checked.runs())},
        _lmq_ends(v),
        v.lmq_mode,
    )


def _lmq_ends(v: Verifier) -> dict:
    """``LmqChecks#check_lmq_batch``'s queue ends of one file, by existing queue (the
    queue task runs ``finish_lmq`` on the largest)."""
    ends = {(name.encode("utf-8", "surrogateescape"), q): e for (name, q), e in v.__dict__.get("lmq_ends", {}).items()}
    return {k: e for k, e in ends.items() if k in v.queues}


def shuffle_items(r: FileScan):
    """What one file gives the queue and index tasks: ((store, kind, key), item)."""
    for tk, arrays in (r.missing or {}).items():
        yield (r.store, "q", tk), ("missing", r.i, arrays)
    for k, runs in (r.matched or {}).items():
        yield (r.store, "q", k), ("matched", r.i, runs)
    for k, runs in (r.checked or {}).items():
        yield (r.store, "i", k), ("checked", r.i, runs)
    for k, end in (r.lmq_ends or {}).items():
        yield (r.store, "q", k), ("lmq_end", r.i, end)


def grouped(scans: list, keys: list) -> dict:
    """What the scans give each queue and index task, by task (every key gets one)."""
    groups: dict = {k: [] for k in keys}
    for r in scans:
        for k, item in shuffle_items(r):
            groups.setdefault(k, []).append(item)
    return groups


# ===================================================================== driver: join the files


@dataclass
class FinishContext:
    """What the queue and index tasks of one store need (broadcast)."""

    plan: StorePlan
    cl_end: int
    tq_rank: dict
    tq_reset: dict
    lmq_mode: tuple | None = None  # the scans' multi-dispatch mode (unit reasons in the finish)


def join_files(plan: StorePlan, scans: list[FileScan]) -> tuple[FinishContext, dict, list]:
    """Cross-file checks from the per-file summaries; returns the finish context, the
    store totals and the scan findings with their final places."""
    scans = sorted(scans, key=lambda s: s.i)
    topic_first: dict = {}
    tq_first: dict = {}
    for s in scans:
        for tb, pos in s.topic_first.items():
            topic_first.setdefault(tb, (s.i, pos))
        for tk, b in s.tq_first_batch.items():
            tq_first.setdefault(tk, (s.i, b))
    rank = {tk: (fb, topic_first[tk[0]], tk[1] & 0xFFFFFFFF) for tk, fb in tq_first.items()}
    counts, sev = Counter(), Counter()
    kept: list = []
    once: set = set()
    for s in scans:
        counts.update(s.counts)
        sev.update(s.sev)
        for check, key, tag, d in s.kept:
            if tag is not None and tag[0] == "once":
                if check in once:
                    counts[check] -= 1
                    sev[d["severity"]] -= 1
                    continue
                once.add(check)
                tag = None
            if tag is not None and tag[0] == "topic":
                if topic_first[tag[1]][0] != s.i:  # seen in an earlier file: the local engine says it once
                    counts[check] -= 1
                    sev[d["severity"]] -= 1
                    continue
            elif tag is not None:
                key = key[:3] + (rank[tag[1]],) + key[4:]
            kept.append((check, key, d))
    # queue offsets across files: the first record of each queue in a file against the previous file's end
    tq_reset: dict = {}
    for s in scans:
        for tk, p in s.tq_reset.items():
            tq_reset[tk] = max(tq_reset.get(tk, -1), p)
    shr = Recorder(None, 2)
    sh = Verifier(plan.config, VerifyOptions(crc=plan.crc, deep=plan.deep, max_findings=None), sink=shr)
    last: dict = {}
    for s in scans:
        for tk, (q, st, p, rel, base, batch) in s.tq_head.items():
            if tk in last:
                sh.topic_names, sh.tq_list, sh.tq_last, sh.tq_reset = [tk[0]], [(0, tk[1])], [last[tk]], {}
                n0 = len(shr.kept)
                sh.check_queue_offsets(
                    np.zeros(1, np.int64),
                    np.array([q], np.int64),
                    np.array([st], np.int64),
                    np.ones(1, bool),
                    np.array([p], np.int64),
                    rel,
                    base,
                )
                for check, _, _, d in shr.kept[n0:]:
                    kept.append((check, (2, (s.i,), batch, rank[tk], -1), d))
                if 0 in sh.tq_reset:
                    tq_reset[tk] = max(tq_reset.get(tk, -1), sh.tq_reset[0])
        last.update(s.tq_tail)
    counts.update(sh.counts)
    sev.update(sh.by_severity)
    cl_end = next((s.cl_end for s in scans if s.cl_end is not None), plan.cl_min)
    totals = {
        "messages": sum(s.messages for s in scans),
        "bytes": sum(s.bytes for s in scans),
        "max_store_ts": max((s.max_store_ts for s in scans), default=0),
        "first_records": {k: v for s in scans for k, v in s.first_records.items()},
        "stops": [x for s in scans for x in s.stops],
        "counts": counts,
        "sev": sev,
        "first_indexable": min((s.first_indexable for s in scans if s.first_indexable is not None), default=None),
    }
    lmq_mode = next((s.lmq_mode for s in scans if s.lmq_mode is not None), None)
    return FinishContext(plan, cl_end, rank, tq_reset, lmq_mode), totals, kept


# ===================================================================== queues and index files: finish


class QueueRecorder(Recorder):
    """The findings of one queue's finish: missing units by the queue's rank (where the
    local scan first numbered it), the rest by the queue's place among the directories."""

    def __init__(self, plan: StorePlan, rank, qpos, key: tuple = ()):
        super().__init__(plan.cap, 3)
        self.rank, self.qpos, self.key = rank, qpos, key

    def group_of(self, check: str) -> tuple:
        if check == "lmq.queue-end":  # finish_lmq says them first, by queue name
            return (-1, self.key)
        return (0, self.rank) if check in _MISSING_CHECKS else (1, self.qpos)


def _commitlog(cfg):
    from rmqstore_cli.store.mapped_files import MappedFileQueue

    return MappedFileQueue(cfg.commitlog_dirs, cfg.mapped_file_size_commit_log)


def finish_task(ctxs: dict, key: tuple, items: list) -> tuple[int, dict]:
    """One queue (``finish_queues``) or one index file (``finish_index``) of one store."""
    store, kind, k = key
    ctx = ctxs[store]
    plan = ctx.plan
    cfg = plan.config
    items = sorted(items, key=lambda it: it[1])  # by commit-log file, as the local engine met them
    if kind == "i":
        rec = Recorder(plan.cap, 4, (k,))
        v = _verifier(plan, rec)
        f = IndexScan(Path(plan.index_paths[k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)
        _mark(f.checked, [it[2] for it in items])
        v.index_files, v.queues = [f], {}
    else:
        qd = plan.queue_dirs.get(k)
        rec = QueueRecorder(plan, ctx.tq_rank.get(k), qd[3] if qd else None, k)
        v = _verifier(plan, rec)
        mq = _queue_state(plan, v, qd)
        if mq is not None:
            _mark(mq.matched, [it[2] for it in items if it[0] == "matched"])
        v.queues = {k: mq} if mq is not None else {}
        v.topic_names, v.tq_list, v.tq_queue = [k[0]], [(0, k[1])], [mq]
        v.tq_reset = {0: ctx.tq_reset[k]} if k in ctx.tq_reset else {}
        miss = [it[2] for it in items if it[0] == "missing"]
        v.missing = [(np.zeros(len(m[0]), np.int64), *m) for m in miss]
        v.index_files = []
        v.lmq_mode = ctx.lmq_mode  # multi-dispatch ends and mode of the scans
        ends = [it[2] for it in items if it[0] == "lmq_end"]
        if ends:
            v.__dict__["lmq_ends"] = {(k[0].decode("utf-8", "surrogateescape"), k[1]): max(ends)}
    v.cl_min, v.cl_end, v.checkpoint = plan.cl_min, ctx.cl_end, plan.checkpoint
    v.mfq = _commitlog(cfg)
    try:
        v.finish_index() if kind == "i" else v.finish_queues()
    finally:
        for x in list(v.queues.values()) + v.index_files:
            x.close()
        v.mfq.close()
        v.close_rocksdb()
    return store, _result(v, rec)


def _queue_state(plan: StorePlan, v: Verifier, qd: tuple | None) -> QueueState | None:
    """One queue as the finish reads it: its directory, or its rows of the RocksDB
    consume queue, the database opened read-only on ``v`` (``RocksDBConsumeQueueTable``)."""
    cfg = plan.config
    if qd is None:
        return None
    if not plan.rocksdb:
        return QueueState(
            ConsumeQueue(cfg.consumequeue_dir, qd[0], qd[1], cfg.cq_file_size, directory=Path(qd[2])), cfg.root
        )
    from rmqstore_cli.store.rocksdb_cq import RocksDBConsumeQueues

    v.rocksdb = RocksDBConsumeQueues(cfg.consumequeue_dir)
    return QueueState(v.rocksdb.queue(qd[0], qd[1]), cfg.root)


def finish_keys(plans: list[StorePlan]) -> list[tuple]:
    """Every queue directory and index file gets a task, whatever the files sent it."""
    return [(s, "q", k) for s, p in enumerate(plans) for k in p.queue_dirs] + [
        (s, "i", k) for s, p in enumerate(plans) for k in range(len(p.index_paths))
    ]


# ===================================================================== driver: the end


def conclude(plan: StorePlan, ctx: FinishContext, totals: dict, parts: list[dict], kept: list) -> dict:
    """Checkpoint and recovery on the driver, then the capped findings and the summary, as
    ``verify_store`` returns them."""
    cfg = plan.config
    rec = Recorder(plan.cap, 5)
    v = _verifier(plan, rec)
    v.checkpoint, v.abort, v.messages, v.max_store_ts = (
        plan.checkpoint,
        plan.abort,
        totals["messages"],
        totals["max_store_ts"],
    )
    v.mfq = _commitlog(cfg)
    v.first_records, v.stops, v.cl_end, v.cl_min = totals["first_records"], totals["stops"], ctx.cl_end, plan.cl_min
    v.index_files = plan.index_info
    v.first_indexable = totals["first_indexable"]
    try:
        if plan.rocksdb:  # the dispatch checkpoint against the queues' max rows and the log's end
            from rmqstore_cli.store.rocksdb_cq import RocksDBConsumeQueues

            v.rocksdb = RocksDBConsumeQueues(cfg.consumequeue_dir)
            v.rocksdb.offset_table()  # reads the checkpoint row, as the scan had locally
            v.check_rocksdb()
        v.check_index_missing()
        v.check_checkpoint()
        v.check_recovery()
        v.check_epochs()  # the controller-mode epoch file against the log's end and recovery's cut
        v.check_timer()  # the 5.x timer store (store/verify/timer.py), whole on the driver
        v.check_overdue()  # stuck timer and delay-level deliveries (store/verify/overdue.py), on the driver
        v.check_batch_queues()  # on the driver (small queues; no consume queue to compare against)
        v.check_configs()  # config/*.json as ConfigManager#load reads them, on the driver
    finally:
        v.mfq.close()
        v.close_rocksdb()
    counts, sev = Counter(totals["counts"]), Counter(totals["sev"])
    allkept = list(kept)
    for part in parts + [_result(v, rec)]:
        counts.update(part["counts"])
        sev.update(part["sev"])
        allkept.extend((c, k, d) for c, k, _, d in part["kept"])
    by_check: dict = {}
    for c, k, d in allkept:
        by_check.setdefault(c, []).append((k, d))
    shown = []
    for items in by_check.values():
        items.sort(key=lambda kd: kd[0])
        shown.extend(items if plan.cap is None else items[: plan.cap])
    shown.sort(key=lambda kd: kd[0])
    out = Verifier(cfg, VerifyOptions())  # its summary property, on the joined numbers
    out.messages, out.bytes = totals["messages"], totals["bytes"]
    files = Counter()
    for name in ("consumequeue", "index", "commitlog"):
        if name == "index":
            if plan.index_paths:
                files[name] = len(plan.index_paths)
        elif name in plan.files_count:
            files[name] = plan.files_count[name]
    files.update(v.files)  # batchconsumequeue/ and compaction/ files counted by check_batch_queues
    out.files = files
    out.skipped = v.skipped
    out.cl_min, out.cl_end, out.queues, out.notes = plan.cl_min, ctx.cl_end, plan.queue_dirs, plan.notes
    out.counts = +counts
    out.epochs = getattr(v, "epochs", None)
    out.by_severity = Counter({k: v for k, v in sev.items() if v and k in (ERROR, WARNING, INFO)})
    return {
        "store": plan.label,
        "findings": [dict(d, store=plan.label) for _, d in shown],
        "summary": dict(out.summary, store=plan.label),
        "ok": out.ok,
    }


# ===================================================================== the whole job


class Forked:
    """verify's steps (:func:`verify_stores`) on ``jobs`` processes of this machine
    (:func:`~rmqstore_cli.pipeline.local.fork_map`): the commit-log files scanned side by side
    with the index files' checks, then the queues and index files finished side by side. With
    ``jobs=1``, the tasks one after another in this process (tests, and the reference for Spark)."""

    def __init__(self, jobs: int = 1, advance: Callable[[int], None] | None = None):
        self.jobs = jobs
        self.advance = advance  # a progress bar's: each commit-log file's bytes as its scan ends

    def map(self, fn, items):
        return fork_map(lambda x: fn(*x), items, self.jobs)

    def scan(self, fn, items, side_fn, side_items):
        tagged = [(side_fn, x) for x in side_items] + [(fn, x) for x in items]
        got = fork_map(lambda t: t[0](*t[1]), tagged, self.jobs, self._scanned)
        return got[: len(side_items)], got[len(side_items) :]

    def _scanned(self, result) -> None:
        if self.advance is not None and isinstance(result, FileScan):
            self.advance(result.scanned)

    def results(self, handle):
        return handle[0], [r.light() for r in handle[1]]

    def finish(self, handle, keys, ctxs):
        return fork_map(lambda kv: finish_task(ctxs, *kv), list(grouped(handle[1], keys).items()), self.jobs)

    def release(self, handle):
        pass


def verify_stores(
    specs: list, crc: bool, deep: bool, max_findings: int | None, engine=None, broker_version: str | None = None
) -> list[dict]:
    """verify several stores through the decomposition: one result per store, as
    :func:`~rmqstore_cli.pipeline.stores.verify_store` returns it."""
    engine = engine or Forked(1)
    plans = [plan_store(s, crc, deep, max_findings) for s in specs]
    for p in plans:
        p.broker_version = broker_version
    keys = [(p, k) for p in plans for k in range(len(p.index_paths))]
    infos = iter(engine.map(index_info_task, keys))
    orders = [index_order(p, [next(infos) for _ in p.index_paths]) for p in plans]
    scans = [(p, s, i) for s, p in enumerate(plans) for i in range(len(p.files))]
    handle = engine.scan(scan_task, scans, index_open_task, keys)  # index checks beside the scan
    try:
        side, light = engine.results(handle)
        checks = iter(side)
        extra = {s: [p.opening, *(next(checks) for _ in p.index_paths), orders[s]] for s, p in enumerate(plans)}
        joined = [join_files(p, [r for r in light if r.store == s]) for s, p in enumerate(plans)]
        ctxs = {s: j[0] for s, j in enumerate(joined)}
        for store, part in engine.finish(handle, finish_keys(plans), ctxs):
            extra[store].append(part)
    finally:
        engine.release(handle)
    return [conclude(p, joined[s][0], joined[s][1], extra[s], joined[s][2]) for s, p in enumerate(plans)]
