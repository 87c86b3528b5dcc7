"""verify's plan (``pipeline/verify_tasks.py``): what the driver reads of a store before any
task (:func:`plan_store`), the index files' headers and structure (:func:`index_info_task`,
:func:`index_open_task`, :func:`index_order`), and what every task shares: the
:class:`Recorder` that places each finding in the order one pass over the store emits it,
and the Verifier a task runs its phases on (:func:`task_verifier`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from rmqstore_cli.store.files.gcpause import collector_paused, freeze_built, thaw
from rmqstore_cli.store.verify import Finding, IndexScan, Verifier, VerifyOptions


class Marks:
    """Stands in for a boolean array that is only ever set (``a[idx] = True``) during the
    scan; the indices are handed back as [start, end) runs.

    The marks wait as they come (a list append: a queue of a many-queue store gets a few)
    and are folded into runs every :attr:`PENDING` of them, so a task holds its runs (one
    per queue or index file met in order) and at most that many marks, not 8 bytes per
    unit and index entry of its commit-log file (issue 35)."""

    #: Marks waiting at most before they are folded into :attr:`folded`.
    PENDING = 1 << 16

    def __init__(self):
        self.parts: list[np.ndarray] = []
        self.folded: np.ndarray | None = None  # (n, 2) runs of the marks folded so far
        self._waiting = 0

    def __setitem__(self, idx, value) -> None:
        assert value is True
        p = np.asarray(idx, dtype=np.int64).ravel()
        self.parts.append(p)
        self._waiting += p.size
        if self._waiting >= self.PENDING:
            self.folded, self.parts, self._waiting = self.runs(), [], 0

    #: Up to this many marks, :meth:`runs` is a Python loop: numpy's calls cost more than
    #: the work for the few units most queues of a many-queue store have in a file.
    FEW = 64

    def runs(self) -> np.ndarray:
        got = self._waiting_runs()
        if self.folded is None:
            return got
        return merge_runs(np.concatenate([self.folded, got]))

    def _waiting_runs(self) -> np.ndarray:
        """The runs of the marks not folded yet."""
        if not self.parts:
            return np.zeros((0, 2), np.int64)
        if sum(p.size for p in self.parts) <= self.FEW:
            return _few_runs(sorted(x for p in self.parts for x in p.tolist()))
        u = np.concatenate(self.parts)
        if len(u) > 1 and not bool(np.all(u[1:] >= u[:-1])):  # marks come mostly in order: sort only if not
            u = np.sort(u)
        cut = np.flatnonzero(np.diff(u) > 1) + 1  # repeats (step 0) stay inside a run
        starts = np.r_[u[:1], u[cut]]
        ends = np.r_[u[cut - 1], u[-1:]] + 1
        return np.stack([starts, ends], axis=1)


def merge_runs(runs: np.ndarray) -> np.ndarray:
    """[start, end) runs (n, 2) as the fewest disjoint runs in order: runs that overlap or
    touch joined, as :meth:`Marks.runs` gives them for all their marks at once."""
    if runs.shape[0] < 2:
        return runs
    runs = runs[np.argsort(runs[:, 0], kind="stable")]
    s, e = runs[:, 0], np.maximum.accumulate(runs[:, 1])
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new)
    return np.stack([s[first], e[np.r_[first[1:] - 1, s.size - 1]]], axis=1)


def _few_runs(u: list[int]) -> np.ndarray:
    """:meth:`Marks.runs` of a few sorted marks: [start, end) runs, repeats inside a run."""
    out = [[u[0], u[0] + 1]]
    for x in u[1:]:
        if x > out[-1][1]:
            out.append([x, x + 1])
        else:
            out[-1][1] = x + 1
    return np.array(out, np.int64)


def mark_runs(arr: np.ndarray, runs_list) -> None:
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


def task_verifier(plan: StorePlan, rec: Recorder) -> Verifier:
    """A Verifier of ``plan``'s store whose every finding goes to ``rec`` (the cap is the
    driver's); a task hands its missing units on as arrays (bounded by its file), and a
    queue task reports them exactly from those: never only runs."""
    v = Verifier(
        plan.config,
        VerifyOptions(crc=plan.crc, deep=plan.deep, max_findings=None, broker_version=plan.broker_version),
        sink=rec,
    )
    v.MISSING_CAP = None
    v.skipped = dict(plan.skipped)  # what the plan could not read is not known missing in any task
    return v


def task_result(v: Verifier, rec: Recorder) -> dict:
    return {"kept": rec.kept, "counts": v.counts, "sev": v.by_severity}


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
    skipped: dict = field(default_factory=dict)  # parts not checked, and why (Verifier.skipped)
    queue_ends: dict = field(default_factory=dict)  # the queues' recovered ends (verify_stores keeps them)
    queue_facts: dict = field(default_factory=dict)  # (topic bytes, qid) -> QueueFacts (queue directories)
    #: The plan's open queues and batch-queue topics, for scans in this process or its forks
    #: (``plan_store(..., keep_queues=True)``); never pickled: a Spark task opens its own.
    opened: tuple | None = field(default=None, repr=False, compare=False)
    #: The objects alive after the plan, its open queues among them, were left out of the
    #: garbage collector's walks (``gcpause.freeze_built``) until :meth:`release`.
    frozen: bool = field(default=False, repr=False, compare=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "opened": None, "frozen": False}

    def release(self) -> None:
        """Close the queues kept open for the scans (:attr:`opened`)."""
        if self.opened is not None:
            for mq in self.opened[0].values():
                mq.close()
            self.opened = None
        if self.frozen:
            self.frozen = False
            thaw()


@dataclass(frozen=True, slots=True)
class QueueFacts:
    """What the finish of a queue whose every unit some message accounted for reports, read
    by the plan (which opened the queue anyway): its first unit and end, and its tail
    (``QueueChecks.queue_tail``). Such a queue's finish needs neither its files nor a Verifier."""

    topic: str
    qid: int
    base: int
    end: int
    tail: tuple[str, int] | None


def plan_store(spec, crc: bool, deep: bool, cap: int | None, keep_queues: bool = False) -> StorePlan:
    """Phase 0 on the driver (metadata only: directory listings, checkpoint, queue ends).
    ``keep_queues``: the scans run in this process or its forks, which read the queues the
    plan opened (:attr:`StorePlan.opened`) instead of opening every queue again; the caller
    closes them (:meth:`StorePlan.release`)."""
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.verify import open_for_verify

    cfg = open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))
    with collector_paused():  # every queue opened: many objects that live on (store/files/gcpause.py)
        plan = _plan(spec, cfg, crc, deep, cap, keep_queues)
        plan.frozen = plan.opened is not None and freeze_built()  # the open queues live until the scans end
    return plan


def _plan(spec, cfg, crc: bool, deep: bool, cap: int | None, keep_queues: bool) -> StorePlan:
    """:func:`plan_store` of the store's config ``cfg``."""
    rec = Recorder(cap, 0)
    v = Verifier(cfg, VerifyOptions(crc=crc, deep=deep, max_findings=None), sink=rec)
    v.infer_sizes()
    v.open_store(index=False)
    rocks = getattr(v, "rocksdb", None) is not None  # the tasks reopen it (RocksDBChecks)
    v.close_rocksdb()
    v.open_commitlog()
    v.mfq.close()
    queue_dirs = {k: (mq.topic, mq.qid, str(mq.dir), n) for n, (k, mq) in enumerate(v.queues.items())}
    facts, opened = _queue_facts(v, rocks, keep_queues)
    return StorePlan(
        spec.label,
        cfg,
        crc,
        deep,
        cap,
        [f.name for f in v.mfq.files],
        _index_paths(cfg),
        queue_dirs,
        v.checkpoint,
        v.abort,
        v.cl_min,
        list(v.notes),
        Counter(v.files),
        task_result(v, rec),
        rocksdb=rocks,
        skipped=dict(v.skipped),
        queue_ends=v.known_ends,  # a KnownEnds: with the listing the start-up prediction reads
        queue_facts=facts,
        opened=opened,
    )


def _queue_facts(v: Verifier, rocks: bool, keep: bool) -> tuple[dict, tuple | None]:
    """Each queue directory's :class:`QueueFacts` (none for a RocksDB consume queue), and
    the plan's open queues when they are kept for the scans (else closed here)."""
    if rocks:
        keep = False
    facts = (
        {} if rocks else {k: QueueFacts(q.topic, q.qid, q.base, q.end, v.queue_tail(q)) for k, q in v.queues.items()}
    )
    if not keep:
        for mq in v.queues.values():
            mq.close()
    return facts, (v.queues, v.batch_topics) if keep else None


def _index_paths(cfg) -> list[str]:
    """The index files' paths, in order (none when index/ is missing)."""
    try:
        return sorted(str(p) for p in cfg.index_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def index_info_task(plan: StorePlan, k: int, ranged: bool = True) -> SimpleNamespace:
    """What the scan needs of index file ``k``, without checking it: its header and the
    range of its entries' offsets (one pass over one column; ``ranged=False``: the header
    alone, what :func:`index_order` reads, the range left to :func:`index_range_task`), so
    that the structure check (:func:`index_open_task`) can run beside the scan instead of
    before it."""
    f = _index_scan(plan, k)
    try:
        info = SimpleNamespace(
            k=k,
            name=f.name,
            rel=f.rel,
            n=f.n,
            begin_phy=f.begin_phy,
            end_phy=f.end_phy,
            end_ts=f.end_ts,
            entries=f.entry_count,
            phy_min=None,
            phy_max=None,
            ordered=False,
        )
        return _ranged(info, f) if ranged else info
    finally:
        f.close()


def index_range_task(plan: StorePlan, info: SimpleNamespace) -> SimpleNamespace:
    """``info`` (:func:`index_info_task`'s header alone) with the range of its file's entries'
    offsets: on this machine's processes a first task, beside the walk to the cuts, not
    before the workers start."""
    f = _index_scan(plan, info.k)
    try:
        return _ranged(SimpleNamespace(**vars(info)), f)
    finally:
        f.close()


def _index_scan(plan: StorePlan, k: int) -> IndexScan:
    cfg = plan.config
    return IndexScan(Path(plan.index_paths[k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)


def _ranged(info: SimpleNamespace, f: IndexScan) -> SimpleNamespace:
    """``info`` with its entries' smallest and largest offsets and whether they are in order."""
    if f.entry_count:
        info.phy_min, info.phy_max = f.phy_min, f.phy_max
    info.ordered = bool(f.phy_ordered)
    return info


class IndexWindow(IndexScan):
    """An index file as one file task's scan reads it: only the entries whose offsets lie in
    ``[lo, hi)``, the task's commit-log file, when the entries are in offset order (as the
    broker appends them; ``index_info_task`` saw the whole file). They are streamed
    (:meth:`IndexScan.entries_in`: a chunk at a time as the scan passes them, from the
    window's first entry) in the file's numbering, so marks and findings name the same
    entries as a whole-file load; a task holds what one batch of records points at, not 12
    bytes an entry of its commit-log file (issue 35: that grew with the store up to ~160 MB)."""

    def __init__(self, path: Path, slots: int, max_num: int, root: Path, lo: int, hi: int):
        super().__init__(path, slots, max_num, root)
        self.window = (self._first_at_or_above(lo), self._first_at_or_above(hi))
        self.stream = True
        self.stream_span = self.window
        self._wa = self._next = self.window[0]

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


def index_open_task(plan: StorePlan, k: int) -> dict:
    """Index file ``k`` checked alone (name, size, structure)."""
    rec = Recorder(plan.cap, 1, (k,))
    v = task_verifier(plan, rec)
    v.open_index_file(Path(plan.index_paths[k])).close()
    return task_result(v, rec)


def index_order(plan: StorePlan, infos: list) -> dict:
    """``check_index_order`` from the index files' headers; sets ``index_end`` and whether the
    scan extracts index keys (as ``open_commitlog`` decides it)."""
    rec = Recorder(plan.cap, 1, (len(infos),))
    v = task_verifier(plan, rec)
    v.index_files = infos
    v.check_index_order()
    plan.index_info = infos
    plan.index_end = v.index_end
    plan.want_keys = plan.config.message_index_enable and (any(i.entries for i in infos) or plan.deep)
    return task_result(v, rec)
