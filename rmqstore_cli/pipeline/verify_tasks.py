"""``verify``'s one engine: one task per commit-log file, per queue and per index file, the
same tasks in this process (``Forked(1)``), on this machine's processes (:class:`Forked`) or
on Spark executors (``pipeline/spark.py``: the distribution, nothing else).

The whole-store :class:`~rmqstore_cli.store.verify.Verifier`'s checks run in pieces: every
piece runs the Verifier's public phases on a Verifier that holds only that piece's state, its
findings going to a :class:`Recorder` (a :class:`~rmqstore_cli.store.verify.FindingSink`
that keeps each finding with its place in the order one pass over the store emits them), so
the findings and the summary are the single pass's (``Verifier.run``, the tests' reference:
the driver sorts them into that order and caps them per check as it does). The plan is in
``verify_plan.py`` (steps 0-1), the scan in ``verify_scan.py`` (2), the join in
``verify_join.py`` (3-4):

0. driver: ``infer_sizes``, ``open_store(index=False)``, ``open_commitlog`` (sizes, lock,
   checkpoint, abort, consume-queue files and directories, commit-log file names).
1. one task per index file: ``open_index_file`` (name, size, structure); the driver runs
   ``check_index_order`` on the headers.
2. one task per commit-log file: ``scan_file_at`` with fresh cross-file state; on this
   machine's processes a file larger than its share is split into parts (:func:`spans_task`:
   where the scan's batches start, from a walk of the record sizes alone, which the driver
   runs while the workers already check the index files), one task each,
   joined like files (a part that does not join up with the next, after damage, has its
   file scanned again whole: the answer never depends on the split). What crosses
   files comes back as small summaries: each queue's first and next queue offset in the file
   (the driver runs ``_check_queue_offsets`` on the first record of each queue against the
   previous file's end), the topics first seen (a topic finding is kept from its first file
   only), and where the local engine would first number each topic and queue (the order of
   findings within a batch). Units and index entries a file accounts for are kept as runs.
3. one task per queue: ``finish_queues`` on that queue alone (missing units of every file,
   units matched by any file); one task per index file: ``finish_index``. On this machine
   the tasks run a few chunks a process (:func:`finish_tasks`: what they share opened once),
   or all in the driver when they are few and read nothing (``little_to_finish``).
4. driver: ``check_index_missing``, ``check_checkpoint`` and ``check_recovery`` from the
   per-file summaries, then the timer store, batch queues and ``check_configs``.

Each finding carries its place in the single pass's emission order: (phase, group, batch,
rank, sequence). Tasks keep at most ``max_findings`` per check of what can still be among the
first ``max_findings`` in that order, so the driver only ever holds capped findings.
"""

from __future__ import annotations

from collections.abc import Callable

from rmqstore_cli.pipeline.verify_join import (
    conclude,
    finish_keys,
    finish_task,
    finish_tasks,
    join_files,
    little_to_finish,
)
from rmqstore_cli.pipeline.verify_plan import (
    Recorder,
    StorePlan,
    index_info_task,
    index_open_task,
    index_order,
    index_range_task,
    plan_store,
)
from rmqstore_cli.pipeline.verify_scan import (
    FileScan,
    file_start_and_length,
    grouped,
    scan_task,
    shuffle_items,
    spans_task,
)
from rmqstore_cli.pipeline.workers import PARTS_PER_JOB, fork_map, fork_map_then

__all__ = [
    "FileScan",
    "Forked",
    "Recorder",
    "StorePlan",
    "finish_task",
    "finish_tasks",
    "grouped",
    "plan_store",
    "shuffle_items",
    "verify_stores",
]


#: How many finish chunks each process gets (:meth:`Forked.finish`): a few, so that a slow
#: chunk does not leave the other processes idle, not one a queue.
FINISH_CHUNKS_PER_JOB = 4
#: A commit-log file is split into parts of at least this many bytes (each part costs a
#: task: a Verifier, its index windows, a mark per queue it met).
MIN_PART_BYTES = 32 << 20
#: What checking one index entry's structure (``index_open_task``, handed out before the scan
#: parts) costs in the scan's commit-log bytes, to size the parts beside it: 1 M x 256 B
#: sends, 0.135 s for 3.1 M entries against 0.69 s for the scan of 505 MB (~30 bytes).
SIDE_BYTES_PER_INDEX_ENTRY = 32


class Forked:
    """verify's steps (:func:`verify_stores`) on ``jobs`` processes of this machine
    (:func:`~rmqstore_cli.pipeline.workers.fork_map`): the commit-log files scanned side by side
    with the index files' checks, then the queues and index files finished side by side. With
    ``jobs=1``, the tasks one after another in this process (tests, and the reference for Spark)."""

    #: Its tasks run in this process or forks of it: they read what the plan opened
    #: (``plan_store(..., keep_queues=True)``) without it being pickled.
    shares_memory = True

    def __init__(self, jobs: int = 1, advance: Callable[[int], None] | None = None):
        self.jobs = jobs
        self.advance = advance  # a progress bar's: each commit-log file's bytes as its scan ends

    @property
    def parts(self) -> int:
        """How many scan tasks the commit log is cut into at least (files split into parts
        when there are fewer): one per process is too few to keep them all busy."""
        return self.jobs * PARTS_PER_JOB if self.jobs > 1 else 1

    def map(self, fn, items):
        return fork_map(lambda x: fn(*x), items, self.jobs)

    def scan(self, fn, items, side_fn, side_items):
        tagged = [(side_fn, x) for x in side_items] + [(fn, x) for x in items]
        got = fork_map(lambda t: t[0](*t[1]), tagged, self.jobs, self._scanned)
        return got[: len(side_items)], got[len(side_items) :]

    def scan_then(self, first: list[tuple], fn, items):
        """:meth:`scan` whose scan tasks' arguments ``items(got)`` makes in this process once
        the workers have the ``first`` tasks, (function, arguments) each, ``got(i)`` the
        result of the i-th (``fn`` takes them as made: pickled, so never a plan)."""
        return fork_map_then(lambda t: t[0](*t[1]), first, fn, items, self.jobs, self._scanned)

    def _scanned(self, result) -> None:
        if self.advance is not None and isinstance(result, FileScan):
            self.advance(result.scanned)

    def results(self, handle):
        return handle[0], [r.light() for r in handle[1]]

    def rescan(self, handle, fn, items, torn: set):
        """The files ``torn`` (store, file) scanned again whole (``items``), their parts dropped."""
        again = fork_map(lambda x: fn(*x), items, self.jobs)
        return handle[0], [r for r in handle[1] if (r.store, r.i) not in torn] + again

    def finish(self, handle, keys, ctxs):
        groups = list(grouped(handle[1], keys).items())
        jobs = 1 if little_to_finish(ctxs, groups) else self.jobs  # then no processes forked for them
        n = max(1, min(len(groups), jobs * FINISH_CHUNKS_PER_JOB if jobs > 1 else 1))
        chunks = [groups[c::n] for c in range(n)]  # every n-th: each chunk a like share of queues and index files
        return [part for parts in fork_map(lambda g: finish_tasks(ctxs, g), chunks, jobs) for part in parts]

    def release(self, handle):
        pass


def verify_stores(
    specs: list, crc: bool, deep: bool, max_findings: int | None, engine=None, broker_version: str | None = None
) -> list[dict]:
    """verify several stores through the decomposition: one result per store (``store``,
    ``findings`` each carrying the store, ``summary``, ``ok``), the findings and summary the
    whole-store Verifier's single pass gives (``Verifier.run``, the tests' reference)."""
    engine = engine or Forked(1)
    keep = getattr(engine, "shares_memory", False)
    plans = [plan_store(s, crc, deep, max_findings, keep) for s in specs]
    ends = [p.queue_ends for p in plans]  # the driver keeps them for the start-up prediction:
    for p in plans:  # not shipped with every task
        p.broker_version, p.queue_ends = broker_version, {}
    keys = [(p, k) for p in plans for k in range(len(p.index_paths))]
    orders = _index_orders(engine, plans, keys, not _splits(engine))
    handle, spans = _scan(engine, plans, keys)
    try:
        handle, side, light = _joined_up(engine, handle, plans, spans)
        parts = _opening_parts(plans, side, orders)
        joined = _join(plans, light)
        ctxs = {s: j[0] for s, j in enumerate(joined)}
        for store, part in engine.finish(handle, finish_keys(plans), ctxs):
            parts[store].append(part)
    finally:
        engine.release(handle)
    return [
        dict(conclude(p, *joined[s][:2], parts[s], joined[s][2]), queue_ends=ends[s], config=p.config)
        for s, p in enumerate(plans)
    ]


def _scan(engine, plans: list[StorePlan], keys: list) -> tuple:
    """The commit-log files' scans, the index files' checks beside them, and the parts of the
    files split ((store, file) -> spans, :func:`_spans`); then the queues the plans kept open
    for the scans are closed. An engine that splits files (:func:`_splits`) starts the index
    files' range passes (:func:`index_range_task`) and checks first and walks to the cuts in
    this process meanwhile (~70 ms of a 1 M-message log that no longer wait for each other,
    nor for a pool of their own); each scan task gets its store's index headers with their
    ranges (the workers were forked with the headers alone)."""
    spans: dict = {}
    try:
        if not _splits(engine):
            return engine.scan(scan_task, _scan_items(plans, spans), index_open_task, keys), spans
        ranged = [(index_range_task, (p, x)) for p in plans for x in p.index_info if x.entries]

        def parts(got) -> list[tuple]:  # the walk reads the headers alone: the ranges come meanwhile
            spans.update(_spans(engine, plans, lambda fn, todo: [fn(*t) for t in todo]))
            for n, (_, (p, x)) in enumerate(ranged):
                p.index_info[x.k] = got(n)
            return [(item[1], plans[item[1]].index_info, *item[2:]) for item in _scan_items(plans, spans)]

        first = [*ranged, *((index_open_task, k) for k in keys)]
        side, scans = engine.scan_then(
            first, lambda s, infos, *a: scan_task(_with_ranges(plans[s], infos), s, *a), parts
        )
        return (side[len(ranged) :], scans), spans
    finally:
        for p in plans:
            p.release()


def _splits(engine) -> bool:
    """Whether ``engine`` cuts commit-log files into parts (:attr:`Forked.parts`; not Spark)."""
    return getattr(engine, "parts", 1) > 1


def _with_ranges(plan: StorePlan, infos: list) -> StorePlan:
    """A worker's plan (forked with the index headers alone) with their ranges."""
    plan.index_info = infos
    return plan


def _scan_items(plans: list[StorePlan], spans: dict) -> list[tuple]:
    """One scan task per commit-log file of every store, (plan, store number, file number),
    or per part of a file split (``spans``), (plan, store, file, part number, span)."""
    return [
        (p, s, i, *part)
        for s, p in enumerate(plans)
        for i in range(len(p.files))
        for part in (enumerate(spans[s, i]) if (s, i) in spans else [()])
    ]


def _spans(engine, plans: list[StorePlan], walk) -> dict:
    """The parts of each commit-log file split for ``engine`` ((store, file) -> spans): files
    larger than the commit log's bytes over the engine's :attr:`Forked.parts`, cut into that
    share at the scan's batch starts (none: an engine that scans whole files), ``walk(fn,
    todo)`` running ``spans_task`` over them. A store whose log is one file has its parts
    sized beside the index files' checks
    (:func:`~rmqstore_cli.pipeline.verify_scan.part_shares`)."""
    want = getattr(engine, "parts", 1)
    if want <= 1:
        return {}
    sizes = {(s, i): _length(p, i) for s, p in enumerate(plans) for i in range(len(p.files))}
    share = max(MIN_PART_BYTES, -(-sum(sizes.values()) // want))
    todo = [(plans[s], s, i, -(-n // share)) for (s, i), n in sizes.items() if n > share]
    if len(sizes) == 1:
        todo = _beside_index_checks(engine.jobs, todo)
    got = walk(spans_task, todo)
    return {(t[1], t[2]): g for t, g in zip(todo, got, strict=True) if len(g) > 1}


def _beside_index_checks(jobs: int, todo: list[tuple]) -> list[tuple]:
    """The split of a store's one commit-log file with the index files' checks it runs beside
    (handed out first), each at :data:`SIDE_BYTES_PER_INDEX_ENTRY` an entry: a part fewer for
    each check with entries while every process still gets one (a part costs a task; the
    process that runs a check is kept as busy by it as by a part)."""
    out = []
    for plan, s, i, n in todo:
        side = tuple(x.entries * SIDE_BYTES_PER_INDEX_ENTRY for x in plan.index_info)
        fewer = n - sum(1 for x in side if x)
        out.append((plan, s, i, fewer if fewer >= jobs else n, jobs, side))
    return out


def _length(plan: StorePlan, i: int) -> int:
    """Commit-log file ``i``'s bytes as the scan counts them (at most the file size)."""
    return min(plan.config.mapped_file_size_commit_log, file_start_and_length(plan, i)[1])


def _joined_up(engine, handle, plans: list[StorePlan], spans: dict) -> tuple:
    """The scans' results, (handle, side results, light scans), every split file's parts
    joined up: those damage moved the walk off a part's start scanned again, whole."""
    side, light = engine.results(handle)
    torn = _torn(spans, light)
    if not torn:
        return handle, side, light
    handle = engine.rescan(handle, scan_task, [(plans[s], s, i) for s, i in sorted(torn)], torn)
    return (handle, *engine.results(handle))


def _torn(spans: dict, light: list[FileScan]) -> set:
    """The split files (store, file) one of whose parts stopped elsewhere than where the
    next part started (a record the checks rejected: the scan resynchronised where the walk
    of sizes alone did not), or ended the file before it."""
    torn = set()
    for r in light:
        parts = spans.get((r.store, r.i))
        if parts and r.r + 1 < len(parts):
            nxt = parts[r.r + 1]
            if r.end != (nxt.start, nxt.walked):
                torn.add((r.store, r.i))
    return torn


def _join(plans: list[StorePlan], light: list[FileScan]) -> list[tuple]:
    """Each store's files joined (:func:`join_files`) from its scans' light results."""
    return [join_files(p, [r for r in light if r.store == s]) for s, p in enumerate(plans)]


def _index_orders(engine, plans: list[StorePlan], keys: list, ranged: bool = True) -> list[dict]:
    """Every index file's header (one task each; ``ranged``: with its entries' range, else
    that comes later, :func:`_scan`), then each store's index order checked on the driver
    (which also tells the scans where the index ends)."""
    infos = iter(engine.map(lambda p, k: index_info_task(p, k, ranged), keys))
    return [index_order(p, [next(infos) for _ in p.index_paths]) for p in plans]


def _opening_parts(plans: list[StorePlan], side: list, orders: list) -> dict:
    """Each store's findings before the scan's: the plan's, its index files' own checks (in
    file order), their order."""
    checks = iter(side)
    return {s: [p.opening, *(next(checks) for _ in p.index_paths), orders[s]] for s, p in enumerate(plans)}
