"""verify's scan tasks (``pipeline/verify_tasks.py``): one commit-log file, or one part of
it (a :class:`~rmqstore_cli.store.verify.Span`), checked alone (:func:`scan_task`), its
findings placed by a :class:`FileRecorder`, and what it hands on (:class:`FileScan`):
totals, what crosses files and parts for the join, and the marks the queue and index tasks
read (:func:`shuffle_items`, :func:`grouped`)."""

from __future__ import annotations

import bisect
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmqstore_cli.pipeline.verify_plan import IndexWindow, Marks, Recorder, StorePlan, task_verifier
from rmqstore_cli.store.files.arrays import data_end_guess, file_array
from rmqstore_cli.store.verify import Finding, IndexScan, Span, Verifier

_TQ_CHECKS = frozenset(
    {"commitlog.queue-offset", "commitlog.queue-offset-reset", "cq.unit-mismatch", "cq.superseded"}
)  # ordered by queue within a batch
_TOPIC_CHECKS = frozenset({"commitlog.topic", "commitlog.topic-chars"})  # once per store, where first seen
#: What walking to a cut (:func:`spans_task`) costs a byte, in the scan's cost of a byte: the
#: sizes alone, ~0.04 s for 350 MB of 1 M x 256 B sends against the scan's 0.69 s for 505 MB.
WALK_COST = 0.1


class FileRecorder(Recorder):
    """The findings of one commit-log file's scan (``scan_file_at``), or of its part ``r``,
    on a Verifier that has seen no earlier file or part, and what the driver needs to join
    them up: where each topic and queue was first met, each queue's first record in it."""

    wants_queue_heads = True

    def __init__(self, plan: StorePlan, i: int, r: int = 0):
        super().__init__(plan.cap, 2, (i, r))
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
    r: int = 0  # the part of the file (:func:`scan_task`), 0: the whole file or its first part
    span: Span | None = None  # the part scanned (None: the whole file)
    end: tuple | None = None  # where the part's walk stopped, (position, walked); None: the file's end
    data_end: int | None = None  # the end of the part's last record checked (the last file's end)

    @property
    def at(self) -> tuple[int, int]:
        """The scan's place in the order one pass over the store meets files and parts."""
        return (self.i, self.r)

    def light(self) -> FileScan:
        return FileScan(**{**self.__dict__, "missing": None, "matched": None, "checked": None, "lmq_ends": None})

    def marks(self) -> int:
        """Numbers in what the queue and index tasks read of this file (runs, missing units):
        a few per queue and index file unless the store is damaged."""
        arrays = [a for t in (self.missing or {}).values() for a in t]
        return sum(np.size(a) for a in [*arrays, *(self.matched or {}).values(), *(self.checked or {}).values()])


def scan_task(plan: StorePlan, store: int, i: int, r: int = 0, span: Span | None = None) -> FileScan:
    """Commit-log file ``i`` (or its part ``r``, ``span``) scanned alone: its findings,
    totals and what crosses files and parts."""
    cfg = plan.config
    rec = FileRecorder(plan, i, r)
    v = task_verifier(plan, rec)
    v.retire_index_files = False  # the task ships its index files' marks after the scan
    v.checkpoint, v.abort = plan.checkpoint, plan.abort
    if plan.opened is not None:  # the plan's queues, open in this process (the local engine)
        v.queues, v.batch_topics = dict(plan.opened[0]), plan.opened[1]
    else:
        with v.muted():  # the driver's findings
            v.open_queues()
    for mq in v.queues.values():
        mq.matched = Marks()
    lo, hi, length = _records_range(plan, i, span)
    v.index_files, ks = _scan_index_files(plan, lo, hi)
    v.index_end = plan.index_end
    try:
        with v.muted():
            v.open_commitlog()
        v.want_keys = plan.want_keys
        v.index_empty = cfg.message_index_enable and not any(x.entries for x in plan.index_info)
        end = v.scan_file_at(i, span or Span())
        try:
            v.mfq.close()
        except BufferError:
            pass
        got = _file_scan(plan, store, i, v, rec, ks)
        _part_scan(got, v, r, span, end)
        got.scanned = _part_bytes(min(length, cfg.mapped_file_size_commit_log), span)
        return got
    finally:
        for x in [*([] if plan.opened is not None else v.queues.values()), *v.index_files]:
            x.close()  # the plan's queues stay open for the next file's scan (StorePlan.release)
        v.close_rocksdb()


def _records_range(plan: StorePlan, i: int, span: Span | None) -> tuple[int | None, int | None, int]:
    """Where commit-log file ``i``'s records (its part's, ``span``) lie in the log, [lo, hi)
    (None: a file name that is not an offset), and the file's length."""
    lo, length = file_start_and_length(plan, i)
    if lo is None:
        return None, None, length
    hi = lo + max(plan.config.mapped_file_size_commit_log, length)  # records lie below
    if span is None:
        return lo, hi, length
    return lo + span.start, hi if span.stop is None else lo + span.stop, length


def _part_scan(got: FileScan, v: Verifier, r: int, span: Span | None, end: tuple | None) -> None:
    """What a part's scan adds: its place, where its walk stopped, the end of its last
    record; only the file's last part says where the log ends."""
    got.r, got.span, got.end = r, span, end
    got.data_end = max((e for _, e in v.ranges), default=None)  # the log's end, if the last part says None
    if span is not None and span.stop is not None:
        got.cl_end = None


def spans_task(plan: StorePlan, store: int, i: int, n: int, jobs: int = 1, side: tuple = ()) -> list[Span]:
    """Commit-log file ``i`` cut into ``n`` parts of its data where the scan's batches start
    (``CommitLogScan#batch_starts``, walked only as far as the last cut): of like bytes, or
    beside ``side`` tasks handed out to ``jobs`` processes before them, which run while this
    walk does (:func:`part_shares`, no part starting before it ends); one span, the whole
    file, when it has one batch."""
    v = task_verifier(plan, Recorder(None, 0))
    v.index_files = []
    with v.muted():  # the plan's findings
        v.open_commitlog()
    try:
        f = v.mfq.files[i]
        data = data_end_guess(file_array(f.buffer()))
        walk = WALK_COST * data * (n - 1) / n  # about as far as the last cut
        shares = tuple(part_shares(jobs, n, list(side), data, walk)) if side else (1,) * n
        cuts = cut_points(data, shares)
        starts, _ = v.batch_starts(f, cuts[-1] if cuts else 0)
    finally:
        v.mfq.close()
    return cut_spans(starts, data, shares)


def part_shares(jobs: int, n: int, side: list[float], total: float, walk: float = 0.0) -> list[float]:
    """``n`` parts of ``total`` (a file's bytes) sized so that ``jobs`` processes end together,
    in the order they are handed out, after the ``side`` tasks (their cost in the same unit):
    the pool hands each task, in order, to the process free first (:func:`fork_map`), so the
    side tasks go one each to the least loaded; no part starts before ``walk`` (the walk to
    the cuts, which runs beside the side tasks); then the log tops every process up to one
    level, the least loaded first (what a process already carries over that level, it keeps),
    its share cut into its parts, each part going to the process whose last one ends first."""
    loads = [0.0] * jobs
    for x in side:
        loads[loads.index(min(loads))] += x
    loads = [max(x, walk) for x in loads]
    level = _level(loads, total)
    takers = sorted((p for p in range(jobs) if loads[p] < level), key=lambda p: loads[p])
    left = {p: n // len(takers) + (k < n % len(takers)) for k, p in enumerate(takers)}
    out = []
    while any(left.values()):
        p = min((q for q in takers if left[q]), key=lambda q: loads[q])
        out.append((level - loads[p]) / left[p])
        loads[p] += out[-1]
        left[p] -= 1
    return out


def _level(loads: list[float], total: float) -> float:
    """The load every process that takes a share of ``total`` ends at, poured onto the least
    loaded first (water-filling): a process loaded above it takes none."""
    ordered = sorted(loads)
    for k in range(len(ordered), 0, -1):
        level = (sum(ordered[:k]) + total) / k
        if level >= ordered[k - 1]:
            return level
    return total


def cut_points(end: int, shares: tuple[float, ...]) -> list[int]:
    """Where parts in the proportions ``shares`` of ``end`` bytes meet (one fewer than them)."""
    total, at, out = sum(shares), 0.0, []
    for x in shares[:-1]:
        at += x
        out.append(int(end * at / total))
    return out


def cut_spans(starts: list[Span], end: int, shares: tuple[float, ...]) -> list[Span]:
    """Spans in the proportions ``shares`` of ``end`` bytes (fewer if ``starts`` are too few):
    cut at the batch starts nearest each :func:`cut_points`, each to the next one's start,
    the last to the file's end."""
    at = [s.start for s in starts]
    picked = {0}
    for cut in cut_points(end, shares):
        j = bisect.bisect_left(at, cut)
        if j < len(at):
            picked.add(j if j == 0 or at[j] - cut <= cut - at[j - 1] else j - 1)
    cuts = sorted(picked)
    stops = [at[j] for j in cuts[1:]] + [None]
    return [Span(starts[j].start, starts[j].walked, stop) for j, stop in zip(cuts, stops, strict=True)]


def _part_bytes(n: int, span: Span | None) -> int:
    """A part's share of its file's ``n`` bytes (a progress bar's): the parts' add up to ``n``."""
    if span is None:
        return n
    return min(n, n if span.stop is None else span.stop) - min(n, span.start)


def file_start_and_length(plan: StorePlan, i: int) -> tuple[int | None, int]:
    """Commit-log file ``i``'s start offset (None: a name that is not one) and its length."""
    name = plan.files[i]
    dirs = plan.config.commitlog_dirs
    length = max((os.path.getsize(d / name) for d in dirs if (d / name).is_file()), default=0)
    return (int(name) if name.isdigit() else None), length


def _scan_index_files(plan: StorePlan, lo: int | None, hi: int | None) -> tuple[list, list]:
    """The index files with entries inside a commit-log file's range (a window of each
    ordered one), and their numbers."""
    cfg = plan.config
    files, ks = [], []
    for info in plan.index_info:
        if info.entries and (lo is None or (info.phy_min < hi and info.phy_max >= lo)):
            args = (Path(plan.index_paths[info.k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)
            f = IndexWindow(*args, lo, hi) if info.ordered and lo is not None else IndexScan(*args)
            f.known_range = (info.phy_min, info.phy_max)  # read by the info pass
            f.checked = Marks()
            files.append(f)
            ks.append(info.k)
    return files, ks


def _file_scan(plan: StorePlan, store: int, i: int, v: Verifier, rec: FileRecorder, ks: list) -> FileScan:
    """What scan task ``i`` hands on, from its Verifier and recorder."""
    missing = _missing_by_queue(v)
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


def _missing_by_queue(v: Verifier) -> dict:
    """The file's messages without a consume-queue unit, by queue: (queue offsets, physical
    offsets, store times) arrays, exact (the queue tasks report them)."""
    missing: dict = {}
    if v.missing:
        t = np.concatenate([m[0] for m in v.missing])
        cols = [np.concatenate([m[c] for m in v.missing]) for c in (1, 2, 3)]
        for tq in np.unique(t).tolist():
            sel = t == tq
            missing[v.queue_key(tq)] = tuple(c[sel] for c in cols)
    return missing


def _lmq_ends(v: Verifier) -> dict:
    """``LmqChecks#check_lmq_batch``'s queue ends of one file, by existing queue (the
    queue task runs ``finish_lmq`` on the largest)."""
    ends = {(name.encode("utf-8", "surrogateescape"), q): e for (name, q), e in v.__dict__.get("lmq_ends", {}).items()}
    return {k: e for k, e in ends.items() if k in v.queues}


def shuffle_items(r: FileScan):
    """What one file gives the queue and index tasks: ((store, kind, key), item)."""
    for tk, arrays in (r.missing or {}).items():
        yield (r.store, "q", tk), ("missing", r.at, arrays)
    for k, runs in (r.matched or {}).items():
        yield (r.store, "q", k), ("matched", r.at, runs)
    for k, runs in (r.checked or {}).items():
        yield (r.store, "i", k), ("checked", r.at, runs)
    for k, end in (r.lmq_ends or {}).items():
        yield (r.store, "q", k), ("lmq_end", r.at, end)


def grouped(scans: list, keys: list) -> dict:
    """What the scans give each queue and index task, by task (every key gets one)."""
    groups: dict = {k: [] for k in keys}
    for r in scans:
        for k, item in shuffle_items(r):
            groups.setdefault(k, []).append(item)
    return groups
