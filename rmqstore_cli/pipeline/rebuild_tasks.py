"""rebuild-index decomposed into per-file, per-queue and per-index-file tasks, with results
identical byte for byte to the local engine (``store/write/rebuild.py``); no Spark in here:
``rebuild_staged`` takes the map to run them with. Each commit-log file's dispatch and the
driver's plan are ``rebuild_dispatch.py``'s; here, the spills and the tasks that write.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.pipeline.rebuild_dispatch import (
    FileSummary,
    build_queue,
    dispatch_file,
    dry_counts,
    kept_keys,
    kept_mask,
    kept_sel,
    name_index_files,
    plan_dispatch,
    plan_keys,
    rebuild_inputs,
    rebuild_report,
)
from rmqstore_cli.pipeline.rebuild_parts import Parts, cut_any, cut_files, whole_files
from rmqstore_cli.pipeline.rebuild_queue_plan import plan_queues
from rmqstore_cli.pipeline.rebuild_spill import (
    parts_dir,
    save_spill,
    spilled_batch,
    spilled_keys,
    spilled_packed,
    spilled_units,
)

# ===================================================================== rebuild-index without shuffles
#
# The same decomposition, with nothing per-message going through the engine (Spark):
#
# 1. ``dispatch_and_spill``: one task per commit-log file dispatches it (``dispatch_file``)
#    and writes what it captured beside the output (``<dest>/.rmqstore-parts/<n>.units.npy``
#    and ``<n>.keys.npy``); it returns only its ``FileSummary``. A file before the recovery
#    region and before any gap is always dispatched, so its task also writes each queue's
#    units straight into the consume-queue files at their cq offsets (``write_units``), when they are what
#    ``putMessagePositionInfo`` appends unchecked (consecutive cq offsets, growing ends).
#    Files of one queue hold disjoint ranges of cq offsets, so tasks write disjoint bytes.
# 2. The driver plans as before (``plan_dispatch``, ``plan_keys``) and per queue
#    (``plan_queues``): a queue whose included files are each consecutive and follow on
#    from one another is the reference writer's result when every unit sits at its cq
#    offset and the first file is pre-blanked up to the first unit (``pre_blank_fill``); any
#    other queue is removed and rebuilt from the spilled units by ``build_queue``.
# 3. One task per included file writes the index entries of its keys (positions follow
#    from the plan's key numbers) and, for a recovery-region file, its units of the
#    straight queues (``file_stage2``); one task per other queue rebuilds it; then one task
#    per index file links the files' chains and writes its slot table and header
#    (``finish_index``). Every task is idempotent (a retried task writes the same bytes).


def dispatch_and_spill(
    config,
    position: int,
    recovering: bool,
    build_cq: bool,
    build_index: bool,
    topics: list[str] | None,
    dest: str,
    direct: bool,
    dry: bool,
    part: tuple | None = None,
) -> FileSummary:
    """Step 1 above for one commit-log file (or ``part`` of one: ``rebuild_parts.py``);
    returns its summary (``simple``: queue → its units are consecutive; ``direct``: queues
    written into the consume-queue files)."""
    fd = dispatch_file(config, position, recovering, build_cq, build_index, topics, part)
    s = fd.summary
    s.direct = []
    if dry:
        return s
    _spill(parts_dir(dest), position, fd)
    if direct and build_cq:
        _write_direct(Path(dest) / "consumequeue", fd, config.cq_file_size)
    return s


def _spill(pd: Path, position: int, fd) -> None:
    """The file's units, keys and BatchCQ units saved for the later steps (none: no file)."""
    s = fd.summary
    pd.mkdir(parents=True, exist_ok=True)
    if fd.units:  # (4, units) int64: phy, size, tagsCode, cq offset; queues in s.queues order
        save_spill(pd / f"{position}.units.npy", [[v[r] for v in fd.units.values()] for r in range(4)])
    if s.keys:
        save_spill(pd / f"{position}.keys.npy", [[a] for a in fd.keys])
    if fd.batch:  # (6, units) int64, queues in s.batch order
        save_spill(pd / f"{position}.bcq.npy", [[v[r] for v in fd.batch.values()] for r in range(6)])


def _write_direct(cq_root: Path, fd, file_size: int) -> None:
    """The queues whose units in this file are consecutive, written at their cq offsets now
    (``summary.direct`` names them): step 3 has nothing left to do for them here."""
    from rmqstore_cli.store.files.below import Below

    s = fd.summary
    with Below(cq_root, [cq_root.parent]) as below:
        for key, (phy, size, tags, qoff) in fd.units.items():
            if s.simple[key]:
                write_units_at(cq_root, key, int(qoff[0]), phy, size, tags, file_size, below)
                s.direct.append(key)


def build_batch_queue(dest, key: tuple[str, int], sums: list, file_size: int) -> int:
    """One BatchCQ queue, ``batchconsumequeue/<topic>/<qid>`` under ``dest``, from the units
    the included files spilled, in commit-log order, through the engine's
    ``BatchConsumeQueueWriter`` (``BatchConsumeQueue#putBatchMessagePositionInfo``): the
    bytes of the local engine's ``BatchDispatch``. Returns the units given."""
    from rmqstore_cli.store.files import safefs
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueueWriter
    from rmqstore_cli.store.write.rebuild import BCQ_DIR

    qdir = Path(dest) / BCQ_DIR / key[0] / str(key[1])
    if os.path.lexists(qdir):  # a retried task; never through a link, never outside dest
        safefs.rmtree_inside(qdir, [Path(dest)])
    w = BatchConsumeQueueWriter(qdir, file_size, [Path(dest)])
    n = 0
    for s in sorted(sums, key=lambda s: s.position):
        u = spilled_batch(dest, s, key)
        w.put_many(*u)
        n += u.shape[1]
    w.flush()
    return n


def kept_count(dest, position: int, floor: int) -> int:
    phy = spilled_keys(dest, position)[1]
    import numpy as np

    return int(np.count_nonzero(kept_mask(np.asarray(phy), floor)))


def write_units_at(cq_root, key: tuple[str, int], first: int, phy, size, tags, file_size: int, below=None) -> None:
    """Units of queue ``key`` at their cq offsets from ``first`` (``write_units``; ``below``:
    ``cq_root`` held open, see ``store/files/below.py``)."""
    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE
    from rmqstore_cli.store.queues.consume_queue import pack_units, write_units

    data = pack_units(phy, size, tags)
    write_units(cq_root, key[0], key[1], first * CQ_STORE_UNIT_SIZE, data, file_size, below)


def pre_blank(cq_root, key: tuple[str, int], first: int, file_size: int, below=None) -> None:
    """``isFirstCreateInQueue``: a queue whose first unit is not cq offset 0 starts its
    first file with blank units up to that unit (``pre_blank_fill``)."""
    from rmqstore_cli.store.queues.consume_queue import pre_blank_fill, write_units

    start, blank = pre_blank_fill(first, file_size)
    if blank:
        write_units(cq_root, key[0], key[1], start, blank, file_size, below)


def write_spilled_units(dest, s: FileSummary, keys: list, file_size: int) -> int:
    """The units of the straight queues ``keys`` that file ``s`` spilled, at their cq
    offsets (the consume-queue root resolved and checked once, not per queue)."""
    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE
    from rmqstore_cli.store.files.below import Below
    from rmqstore_cli.store.queues.consume_queue import write_units

    packed, where = spilled_packed(dest, s)  # every unit packed once, not a pack per queue
    cq_root = Path(dest) / "consumequeue"
    with Below(cq_root, [Path(dest)]) as below:
        for key in keys:
            at, n, first = where[key]
            data = packed[at * CQ_STORE_UNIT_SIZE : (at + n) * CQ_STORE_UNIT_SIZE]
            write_units(cq_root, key[0], key[1], first * CQ_STORE_UNIT_SIZE, data, file_size, below)
    return 0


def rebuild_queue_from_parts(dest, key: tuple[str, int], sums: list, file_size: int) -> int:
    """One queue through ``build_queue`` from the spilled units of the included files."""
    from rmqstore_cli.store.files import safefs

    parts = [(s.position, spilled_units(dest, s)[key]) for s in sums if key in s.queues]
    qdir = Path(dest) / "consumequeue" / key[0] / str(key[1])
    if os.path.lexists(qdir):  # a retried task; never through a link, never outside dest
        safefs.rmtree_inside(qdir, [dest])
    return build_queue(str(Path(dest) / "consumequeue"), key, parts, file_size)


def _kept(dest, position: int, floor: int) -> tuple:
    """The spilled keys of a file that ``IndexService#buildIndex`` puts (floor: the
    endPhyOffset before the file), as (hash, phy, ts) arrays."""
    import numpy as np

    h, phy, ts = spilled_keys(dest, position)
    phy = np.asarray(phy)
    sel = kept_sel(phy, floor)
    return np.asarray(h)[sel], phy[sel], np.asarray(ts)[sel]


def key_at(
    dest, g: int, included: list[int], counts: dict, start: dict, floors: dict, memo: dict | None = None
) -> tuple[int, int]:
    """(phy, store time) of key number ``g`` (in put order over the whole log); ``memo``:
    the last file's spilled (phy, store time, kept keys' indexes) kept for the next call
    (an index file asks for three keys, mostly of the same commit-log file)."""
    import numpy as np

    memo = {} if memo is None else memo
    for i in included:
        if start[i] <= g < start[i] + counts[i]:
            if i not in memo:
                memo.clear()  # one file's at a time: memory does not grow with the log
                _, phy, ts = spilled_keys(dest, i)
                memo[i] = (phy, ts, np.flatnonzero(kept_mask(np.asarray(phy), floors[i])))
            phy, ts, sel = memo[i]
            j = int(sel[g - start[i]])
            return int(phy[j]), int(ts[j])
    raise IndexError(g)


# An index file's entries are positional (key number g is entry g - k * per + 1 of file k),
# so each commit-log file's task writes the entries of its own keys, chaining prevIndex
# within its keys and leaving each slot's first link for later (``index.write_entries``);
# it spills, per slot it used, its first and last entry. One task per index file then links
# the chunks in key order (``IndexFile.link_blocks``: a chunk's first entry of a slot points
# at the slot's last entry in earlier chunks), writes the slot table and the header: the
# bytes of ``IndexFile.put_keys`` over all keys at once.


def write_index_chunk(dest, k: int, position: int, h, phy, ts, n0: int, b0: int, begin: int, slot_num: int) -> None:
    """Entries ``n0 .. n0 + len(h) - 1`` of index file ``k`` (``<k>.part``, created by the
    driver) from one file's keys (``index.write_entries``), their per-slot (slot, first,
    last entry) spilled for ``finish_index``; ``b0``: the header's begin time before the
    first put (the previous file's end time, for entry 1), ``begin``: the store time of the
    file's entry 1."""
    import numpy as np

    from rmqstore_cli.store.queues.index import time_diff, time_diffs, write_entries

    diff = time_diffs(ts, begin)
    if n0 == 1:
        diff[0] = time_diff(int(ts[0]), b0)
    chains = write_entries(Path(dest) / "index" / f"{k:010d}.part", slot_num, n0, h, phy, diff)
    save_spill(parts_dir(dest) / f"idx-{k}-{position}.npy", [[c] for c in chains], np.int32)


def finish_index(
    dest, k: int, positions: list[int], keys: int, first: tuple, last: tuple, slot_num: int, index_num: int
) -> dict:
    """Link the chunks of index file ``k`` (``positions`` in key order), write its slot table
    and header (first and last: (phy, ts) of its first and last key)."""
    import numpy as np

    from rmqstore_cli.store.queues.index import IndexFile

    f = IndexFile(Path(dest) / "index" / f"{k:010d}.part", slot_num, index_num, writable=True)
    try:
        used = f.link_blocks(np.load(parts_dir(dest) / f"idx-{k}-{i}.npy") for i in positions)
        hdr = f.header
        hdr.begin_phy_offset, hdr.begin_timestamp = first
        hdr.end_phy_offset, hdr.end_timestamp = last
        hdr.hash_slot_count = used
        hdr.index_count = keys + 1
        f.write_header()
        out = {"k": k, "first_ts": first[1], "keys": keys, "full": f.is_write_full(), "end_ts": last[1]}
    finally:
        f.close()
    return out


@dataclass
class IndexPlan:
    """Per index file k: (keys, b0, first key, last key); per included file: its
    (k, entry number of its first key there, slice of its kept keys) pieces."""

    files: dict
    pieces: dict


def plan_index(dest, included, counts, start, floors, total: int, per: int, slot_num: int, index_num: int) -> IndexPlan:
    """Create the index files (``<k>.part``, header as ``IndexFile.create`` after the
    previous file) and say which keys of which commit-log file go where."""
    from rmqstore_cli.store.queues.index import IndexFile

    files, pieces, memo = {}, {}, {}
    (Path(dest) / "index").mkdir(parents=True, exist_ok=True)
    for k in range(-(-total // per)):
        lo, hi = k * per, min(total, (k + 1) * per)
        prev = key_at(dest, lo - 1, included, counts, start, floors, memo) if k else (0, 0)
        first = key_at(dest, lo, included, counts, start, floors, memo)
        last = key_at(dest, hi - 1, included, counts, start, floors, memo)
        IndexFile.create(Path(dest) / "index" / f"{k:010d}.part", slot_num, index_num, *prev).close()
        files[k] = (hi - lo, prev[1], first, last)
        for i in included:
            a, b = max(lo, start[i]), min(hi, start[i] + counts[i])
            if a < b:
                pieces.setdefault(i, []).append((k, a - lo + 1, a - start[i], b - start[i]))
    return IndexPlan(files, pieces)


def file_stage2(
    dest: str,
    position: int,
    floor: int,
    pieces: list,
    ifiles: dict,
    late: tuple | None,
    slot_num: int,
    cq_file_size: int,
) -> int:
    """Step 3 for one commit-log file: its index entries, and its units of straight queues
    when it was not written in step 1."""
    if pieces:
        h, phy, ts = _kept(dest, position, floor)
        for k, n0, a, b in pieces:
            _, b0, first, _ = ifiles[k]
            write_index_chunk(dest, k, position, h[a:b], phy[a:b], ts[a:b], n0, b0, first[1], slot_num)
    if late:
        write_spilled_units(dest, late[0], late[1], cq_file_size)
    return position


def batch_jobs(config, sums: list) -> list:
    """One ``build_batch_queue`` job per BatchCQ queue the included files put units in,
    with the file size read once here (``batch_file_size``: the config, else the store's
    own files), not by each executor."""
    from rmqstore_cli.store.queues.batch_queue import batch_file_size

    keys = list(dict.fromkeys(k for s in sums for k in (s.batch or {})))
    if not keys:
        return []
    size = batch_file_size(config, config.root)
    return [("bcq", key, ([s for s in sums if key in s.batch], size)) for key in keys]


def run_stage(dest: str, config, job) -> tuple:
    kind, what, arg = job
    if kind == "file":
        return kind, file_stage2(dest, what, *arg, config.max_hash_slot_num, config.cq_file_size)
    if kind == "queue":
        return kind, rebuild_queue_from_parts(dest, what, arg, config.cq_file_size)
    if kind == "bcq":
        return kind, build_batch_queue(dest, what, *arg)
    return kind, finish_index(dest, what, *arg, config.max_hash_slot_num, config.max_index_num)


@dataclass
class KeyLayout:
    """Where the index keys go (:func:`plan_keys`): per included file its floor (the
    endPhyOffset rule), its kept count and its first global key number; the total; ``per``
    entries an index file; ``nfiles`` index files (0: no index is built)."""

    floors: dict
    counts: dict
    start: dict
    total: int
    per: int
    nfiles: int


@dataclass
class StagedSet:
    """What step 3 wrote (a dry run: would write): per index file ``{k, full, end_ts, ...}``,
    the queues and their consume-queue files, and the names the index files were given."""

    built: list[dict] = field(default_factory=list)
    queues: int = 0
    cq_files: int = 0
    index_names: list[str] = field(default_factory=list)


def rebuild_staged(config, dest: Path, opts, run_map, t0: float, progress=None, parts: int = 1):
    """rebuild-index's one engine: steps 1–3 above, into ``dest``. ``run_map(fn, items)``
    returns ``[fn(x) for x in items]``, in this process, on forked workers or as one Spark
    task per item; with ``progress`` (``rebuild.Progress``) it is called as
    ``run_map(fn, items, each)``, ``each`` hearing every dispatched file's summary as it
    comes back (the local engine's progress bar). ``parts`` > 1: the commit-log files cut
    into about that many parts (``rebuild_parts.py``), each a position of step 1."""
    import shutil
    import time

    names, rec, gaps = rebuild_inputs(config)
    cut = cut_files(config, names, parts, run_map) if cut_any(names, parts) else whole_files(names)
    build_index, dry = opts.build_index, opts.dry_run
    d = str(dest)
    try:
        step1 = _step1(config, cut, rec, gaps, opts, d)
        got = run_map(*step1) if progress is None else run_map(*step1, DispatchTally(cut, progress).add)
        summaries = {s.position: s for s in got}
        included, stop = plan_dispatch(names, gaps, list(summaries.values()), cut.files)
        exact = _exact_counter(config, d, rec, opts, run_map, cut)
        floors, counts, start, total = plan_keys(included, summaries, exact)
        per = max(1, config.max_index_num - 1)
        keys = KeyLayout(floors, counts, start, total, per, -(-total // per) if build_index else 0)
        if dry:
            queues, cq_files = dry_counts(config, included, summaries)
            staged = StagedSet([{"k": k, "full": False, "end_ts": 0} for k in range(keys.nfiles)], queues, cq_files)
        else:
            staged = _write_staged(config, dest, opts, run_map, included, summaries, keys)
    finally:
        shutil.rmtree(parts_dir(dest), ignore_errors=True)
    rep = rebuild_report(
        config,
        opts,
        names,
        rec,
        included,
        stop,
        summaries,
        staged.cq_files,
        staged.queues,
        staged.built,
        total,
        time.perf_counter() - t0,
        cut.files,
    )
    if staged.built and not dry:
        rep.fallback_index_names = _fallback_index_names(staged)
    return rep


def _step1(config, cut: Parts, rec: int, gaps: list[int], opts, d: str) -> tuple:
    """Step 1's task and positions: every file or part, the recovery region's (whose CRCs are
    checked) first; a file before the recovery region and any gap is surely dispatched, so
    its task writes its straight queues' units in place."""
    files = cut.files
    direct_upto = min([rec] + gaps) if files else 0
    spans = cut.spans if cut.split() else [None] * len(files)

    def task(p: int) -> FileSummary:
        i = files[p]
        return dispatch_and_spill(
            config,
            p,
            i >= rec,
            opts.build_cq,
            opts.build_index,
            opts.topics,
            d,
            i < direct_upto,
            opts.dry_run,
            spans[p],
        )

    return task, [p for p, i in enumerate(files) if i >= rec] + [p for p, i in enumerate(files) if i < rec]


class DispatchTally:
    """The progress of step 1 (``rebuild.Progress``): files, commit-log bytes and messages of
    the files dispatched so far, in the order they come back (a file once all its parts did)."""

    def __init__(self, cut: Parts, progress):
        self.sizes = cut.sizes
        self.total = sum(self.sizes)
        self.progress = progress
        self.left = Counter(cut.files)
        self.of = cut.files
        self.files = self.done = self.messages = 0

    def add(self, s: FileSummary) -> None:
        self.left[self.of[s.position]] -= 1
        self.files += not self.left[self.of[s.position]]
        self.done += self.sizes[s.position]
        self.messages += s.messages
        self.progress(self.files, self.done, self.total, self.messages)


def _fallback_index_names(staged: StagedSet) -> list[tuple[str, int]]:
    """The index files written whose name could not be their first entry's time
    (``index_service.name_time``): each name with the time it stands for."""
    from rmqstore_cli.store.queues.index_service import name_time

    firsts = [b["first_ts"] for b in sorted(staged.built, key=lambda b: b["k"])]
    return [(n, t) for n, t in zip(staged.index_names, firsts, strict=True) if name_time(t) != t]


def _exact_counter(config, d: str, rec: int, opts, run_map, cut: Parts):
    """:func:`plan_keys`' ``exact_counts``: how many keys each asked-for file keeps from its
    floor on (``IndexService#buildIndex``'s endPhyOffset rule), counted from its spill; a dry
    run spilled nothing, so those files are dispatched again (asked only when key offsets go
    backwards across files)."""
    build_cq, build_index, topics = opts.build_cq, opts.build_index, opts.topics

    def dispatched_again(kv):
        p = kv[0]
        part = cut.spans[p] if cut.split() else None
        fd = dispatch_file(config, p, cut.files[p] >= rec, build_cq, build_index, topics, part)
        return kv[0], len(kept_keys(fd, kv[1])[0])

    def exact(need):
        if opts.dry_run:
            return dict(run_map(dispatched_again, list(need.items())))
        return dict(run_map(lambda kv: (kv[0], kept_count(d, kv[0], kv[1])), list(need.items())))

    return exact


def _write_staged(config, dest: Path, opts, run_map, included: list[int], summaries: dict, keys: KeyLayout):
    """Step 3 in ``dest``: the queues and index files planned from the summaries, written by
    one task per commit-log file, queue and index file; then the straight queues' pre-blank
    units and the index files' names."""
    from rmqstore_cli.store.files import safefs

    d = str(dest)
    staged = StagedSet()
    qp = plan_queues(included, summaries) if opts.build_cq else None
    cq_root = dest / "consumequeue"
    for key in qp.remove if qp else []:
        safefs.rmtree_inside(cq_root / key[0] / str(key[1]), [dest])
    ip = _index_plan(config, d, included, keys)
    jobs = _stage_jobs(config, included, summaries, qp, ip, keys)
    done = run_map(lambda j: run_stage(d, config, j), jobs) if jobs else []
    if keys.nfiles:
        staged.built = [r for _, r in run_map(lambda j: run_stage(d, config, j), _finish_jobs(included, ip))]
    if qp is not None:
        _finish_queues(staged, qp, cq_root, done, config.cq_file_size)
    if staged.built:
        staged.index_names = name_index_files(dest / "index", staged.built, opts.tz)
    return staged


def _index_plan(config, d: str, included: list[int], keys: KeyLayout) -> IndexPlan:
    """Which index entries each commit-log file's task writes where (none without keys)."""
    if not keys.nfiles:
        return IndexPlan({}, {})
    return plan_index(
        d,
        included,
        keys.counts,
        keys.start,
        keys.floors,
        keys.total,
        keys.per,
        config.max_hash_slot_num,
        config.max_index_num,
    )


def _finish_jobs(included: list[int], ip: IndexPlan) -> list:
    """One task per index file: the commit-log files whose pieces it holds, and its plan."""
    return [
        ("finish", k, ([i for i in included if any(p[0] == k for p in ip.pieces.get(i, []))], v[0], v[2], v[3]))
        for k, v in ip.files.items()
    ]


def _stage_jobs(config, included: list[int], summaries: dict, qp, ip: IndexPlan, keys: KeyLayout) -> list:
    """The tasks of step 3: one per commit-log file with index pieces or late queue units, then
    (queues being built) one per queue to rebuild and the BatchCQ jobs."""
    jobs = _file_jobs(included, summaries, qp.late if qp else {}, ip, keys)
    if qp is not None:
        sums = [summaries[i] for i in included]
        jobs += [("queue", key, [s for s in sums if key in s.queues]) for key in qp.rebuild]
        jobs += batch_jobs(config, sums)
    return jobs


def _file_jobs(included: list[int], summaries: dict, late: dict, ip: IndexPlan, keys: KeyLayout) -> list:
    """One task per commit-log file with index pieces to write or late queue units to add."""
    return [
        ("file", i, (keys.floors[i], ip.pieces.get(i, []), ip.files, (summaries[i], late[i]) if i in late else None))
        for i in included
        if i in ip.pieces or i in late
    ]


def _finish_queues(staged: StagedSet, qp, cq_root: Path, done: list, cq_file_size: int) -> None:
    """The straight queues' pre-blank units, and the count of queues and consume-queue files
    written (those the queue tasks wrote, and those the straight queues span)."""
    from rmqstore_cli.store.files.below import Below
    from rmqstore_cli.store.write.rebuild import cq_file_count

    if any(first for first, _ in qp.straight.values()):
        with Below(cq_root, [cq_root.parent]) as below:
            for key, (first, _) in qp.straight.items():
                pre_blank(cq_root, key, first, cq_file_size, below)
    staged.cq_files = sum(r for kind, r in done if kind == "queue") + sum(
        cq_file_count(first, last, cq_file_size) for first, last in qp.straight.values()
    )
    staged.queues = len(qp.straight) + len(qp.rebuild)
