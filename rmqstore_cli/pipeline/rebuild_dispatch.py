"""rebuild-index decomposed, its first half: each commit-log file dispatched on its own
(``dispatch_file``: what the engine would write, captured instead of written), and the
driver's plan over the files' summaries (which files the broker would dispatch, each
queue's units and each index key's place); the tasks that write from it are
``rebuild_tasks.py``'s. No Spark in here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# ===================================================================== rebuild-index
#
# The local engine (store/write/rebuild.py ``dispatch_log``) walks the commit log once, in order.
# Decomposed, with results identical byte for byte:
#
# 1. ``dispatch_file``: one task per commit-log file walks it with the reput's rules
#    (recovery region or not, decided on the driver by ``recovery_start``) and the engine's
#    vectorised dispatch, capturing what would be written instead of writing it: the
#    consume-queue units per queue and the index keys (hash, phy, store time) in order.
# 2. The driver keeps the files the broker would dispatch (up to a gap or the first stop
#    inside the recovery region) and reduces per-file summaries (``FileSummary``).
# 3. Consume queues: each queue must end up as the engine's ``ConsumeQueueWriter`` writes
#    its units, file by file (same dedupe and pre-blank rules; CQ files are per queue).
# 4. Index: ``IndexService#buildIndex`` skips a key whose offset is below the last file's
#    endPhyOffset, i.e. below the largest offset of any earlier key; each file's count of
#    keys put follows from the largest key offset of the files before it (``KeyCount``).
#    Prefix sums of those counts say which index file (``maxIndexNum - 1`` entries each;
#    entry 0 is never used) and entry number each key gets. Names (the first entry's store
#    time, each after the previous) are given on the driver.
# How the files are written from there: "rebuild-index without shuffles" below.


@dataclass
class FileSummary:
    """What the driver needs of one dispatched commit-log file (no per-message rows)."""

    position: int
    file: str
    bytes: int = 0
    messages: int = 0
    units: int = 0
    last_store_timestamp: int = 0
    skipped: list = None  # [rebuild.Skipped]
    stop: object = None  # ScanEnd: a stop inside the recovery region ends the dispatch
    queues: dict = None  # (topic, qid) -> (first qoff, last qoff, units)
    keys: int = 0  # keys captured (before the endPhyOffset rule)
    key_max_phy: int = -1
    local_put: int = 0  # keys kept by the rule within this file alone
    local_put_min_phy: int = 0
    refused_topics: dict = None  # topic -> why it cannot be a consumequeue/ directory
    multi_problems: dict = None  # malformed multi-dispatch properties: problem -> messages (store/write/lmq.py)
    simple: dict = None  # (topic, qid) -> its units are consecutive (dispatch_and_spill)
    ends: dict = None  # (topic, qid) -> (first, last) unit's end (offset + size)
    direct: list = None  # queues whose units the file's task wrote in place
    batch: dict = None  # BatchCQ (topic, qid) -> its units captured (spilled as <n>.bcq.npy)
    halted: bool = False  # dispatch stopped inside it (the end of the log, or the rest of the file skipped)


@dataclass
class FileDispatch:
    summary: FileSummary
    units: dict  # (topic, qid) -> (phy, size, tags_code, qoff) int64 arrays, in dispatch order
    keys: tuple  # (index hash, phy, store timestamp) int64 arrays, in dispatch order
    batch: dict  # BatchCQ (topic, qid) -> (6, n) int64: phy, size, tagsCode, store time, msgBaseOffset, batchSize


def _capture_dispatcher_class():
    """A FastDispatcher whose two sinks record instead of writing (same walk, fields,
    properties parse and tagsCode as the local engine)."""
    import numpy as np

    from rmqstore_cli.store.javahash.bulk import concat_hashes, index_hash, java_hashes
    from rmqstore_cli.store.write.fastdispatch import FastDispatcher

    class CaptureDispatcher(FastDispatcher):
        def __init__(self, d):
            super().__init__(d)
            self.cq_parts: list = []
            self.key_parts: list = []

        def _consume_queues(self, idx, tids, qid, phy, size, tags_code, qoff):
            if len(idx):
                self.units += len(idx)
                self.cq_parts.append((tids[idx], qid[idx], phy[idx], size[idx], tags_code[idx], qoff[idx]))

        def _index(self, key_list, owner, tid, phy, store_ts):
            hs = getattr(key_list, "hashes", None)  # BatchKeys of the block path: hashed already
            if hs is None:  # hashCode("topic#" + key), as FastDispatcher._index
                kh, klen = java_hashes(list(key_list))
                hs = index_hash(concat_hashes(self._prefix_hashes()[tid], klen, kh))
            self.key_parts.append(
                (np.asarray(hs, dtype=np.int64), phy[owner].astype(np.int64), store_ts[owner].astype(np.int64))
            )
            self.keys += len(key_list)

    return CaptureDispatcher


def dispatch_file(
    config, position: int, recovering: bool, build_cq: bool, build_index: bool, topics: list | None, part=None
) -> FileDispatch:
    """Dispatch commit-log file number ``position`` as ``rebuild.dispatch_log`` does for it;
    or, ``part`` (file number, first record, next part's first record or None: a tuple),
    that part of a file (``position`` then numbers the part; ``pipeline/rebuild_parts.py``)."""
    import numpy as np

    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.write.batch_dispatch import BatchCapture
    from rmqstore_cli.store.write.dispatch import Dispatcher

    cl = CommitLog(config)
    file_no, span = (position, (0, None)) if part is None else (part[0], part[1:])
    f = cl.files[file_no]
    d = Dispatcher(
        config,
        Path("/nonexistent-rmqstore-capture"),
        Path("/nonexistent-rmqstore-capture"),
        build_cq=build_cq,
        build_index=build_index,
        topics=topics,
    )
    if d.batch is not None:
        d.batch = BatchCapture(d.batch.topics)
    fd = _capture_dispatcher_class()(d)
    s = FileSummary(position, f.name, skipped=[], queues={})
    try:
        _dispatch_one(cl, f, fd, s, recovering, span)
    finally:
        cl.close()
    s.messages = fd.messages
    s.refused_topics = dict(d.topics.refused)
    s.multi_problems = dict(d.multi_problems)
    s.units = fd.units
    s.last_store_timestamp = fd.last_store_timestamp
    units = _group_units(fd, s)
    keys = tuple(
        np.concatenate([p[i] for p in fd.key_parts]) if fd.key_parts else np.empty(0, np.int64) for i in range(3)
    )
    _summarize_keys(s, keys[1])
    batch = d.batch.arrays() if d.batch is not None else {}
    s.batch = {k: v.shape[1] for k, v in batch.items()}
    return FileDispatch(s, units, keys, batch)


def _dispatch_one(cl, f, fd, s: FileSummary, recovering: bool, part: tuple) -> None:
    """``rebuild.dispatch_file_records`` over file ``f`` (a DLedger data file: records inside
    entries) or its ``part``, its stop classified: the end of the log (``s.stop``) or the
    rest skipped."""
    from rmqstore_cli.store.write.rebuild import classify_stop, dispatch_file_records

    config = cl.config
    header = cl.header_of(f)
    stop_at, reason = dispatch_file_records(
        fd,
        f,
        recovering,
        config.check_crc_on_recover and not header,
        config.force_verify_prop_crc,
        s.skipped,
        header=header,
        part=part,
    )
    if stop_at is None:
        return
    s.halted = True
    end, skip = classify_stop(f, stop_at, reason, recovering, last_file=f is cl.files[-1])
    if end is not None:
        s.stop = end
    else:
        s.skipped.append(skip)


def _summarize_keys(s: FileSummary, phy) -> None:
    """The file's index keys: how many, the greatest offset, and those this file puts itself
    (``kept_mask`` from 0) with their least offset."""
    s.keys = len(phy)
    if not s.keys:
        return
    s.key_max_phy = int(phy.max())
    kept = phy[kept_sel(phy, 0)]
    s.local_put = len(kept)
    s.local_put_min_phy = int(kept.min()) if len(kept) else 0


def _group_units(fd, s: FileSummary) -> dict:
    """The captured units by queue, each queue's in dispatch order (slices of the units
    sorted once); into ``s`` per queue its cq offsets' span, its first and last unit's end
    and whether its units are consecutive (:func:`simple_runs`), for all queues at once."""
    import numpy as np

    if not fd.cq_parts:
        s.queues, s.ends, s.simple = {}, {}, {}
        return {}
    cols = (np.concatenate([p[i] for p in fd.cq_parts]).astype(np.int64, copy=False) for i in range(6))
    tid, qid, phy, size, tags, qoff = cols
    key = tid * (1 << 32) + (qid & 0xFFFFFFFF)
    order = queue_order(tid, qid & 0xFFFFFFFF, key)
    phy, size, tags, qoff, key = phy[order], size[order], tags[order], qoff[order], key[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(key)) + 1))
    bounds = np.append(starts, len(key)).tolist()
    names = [fd.topic_list[t].name for t in (key[starts] >> 32).tolist()]
    qids = qid[order][starts].tolist()
    out = {}
    for j, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        out[(names[j], int(qids[j]))] = (phy[a:b], size[a:b], tags[a:b], qoff[a:b])
    last, end = np.asarray(bounds[1:]) - 1, phy + size
    spans = zip(qoff[starts].tolist(), qoff[last].tolist(), np.diff(bounds).tolist(), strict=True)
    s.queues = dict(zip(out, spans, strict=True))
    s.ends = dict(zip(out, zip(end[starts].tolist(), end[last].tolist(), strict=True), strict=True))
    s.simple = dict(zip(out, simple_runs(phy, size, qoff, starts).tolist(), strict=True))
    return out


#: Queues (topic ids x queue ids) whose units :func:`queue_order` sorts by a 16-bit code.
SMALL_CODES = 1 << 16


def queue_order(tid, uqid, key):
    """``argsort(key, kind="stable")``: the units by queue (topic id, then queue id as an
    unsigned int), dispatch order kept within each. When topic ids x queue ids fit in 16
    bits (a store of a few topics), by a code that orders as ``key`` does, which numpy's
    stable sort takes by radix (~5x faster than its merge of 64-bit keys on a million units)."""
    import numpy as np

    if not len(key):
        return np.zeros(0, dtype=np.intp)
    span = int(uqid.max()) + 1
    if (int(tid.max()) + 1) * span > SMALL_CODES or int(tid.min()) < 0:
        return np.argsort(key, kind="stable")
    return np.argsort((tid * span + uqid).astype(np.uint16), kind="stable")


def simple_runs(phy, size, qoff, starts):
    """Per run of units (a queue's, from each of ``starts`` to the next): units that
    ``putMessagePositionInfo`` appends one after another unchecked: consecutive cq offsets
    (the first ≥ 0) and growing ends. All runs at once, no numpy call per queue."""
    import numpy as np

    end = phy + size
    bad = np.zeros(len(qoff), dtype=np.int64)  # bad[i]: unit i does not follow unit i - 1
    bad[1:] = (np.diff(qoff) != 1) | (np.diff(end) <= 0)
    bad[starts] = 0  # a run's first unit follows nothing of its run
    return (np.add.reduceat(bad, starts) == 0) & (qoff[starts] >= 0) if len(starts) else np.zeros(0, dtype=bool)


def kept_mask(phy, last_end_phy: int):
    """``IndexService#buildIndex``: a key is put when its offset is ≥ the last file's
    endPhyOffset, i.e. ≥ every earlier key's offset (and ≥ ``last_end_phy``)."""
    import numpy as np

    if not len(phy):
        return np.zeros(0, dtype=bool)
    if rising(phy, last_end_phy):
        return np.ones(len(phy), dtype=bool)
    return _at_least_every_earlier(phy, last_end_phy)


def _at_least_every_earlier(phy, last_end_phy: int):
    """:func:`kept_mask`'s rule itself, by the running maximum (``phy`` not empty)."""
    import numpy as np

    prev = np.empty(len(phy), dtype=np.int64)
    prev[0] = last_end_phy
    if len(phy) > 1:
        prev[1:] = np.maximum(np.maximum.accumulate(phy[:-1]), last_end_phy)
    return phy >= prev


def rebuild_inputs(config) -> tuple[list, int, list[int]]:
    """(commit-log file names, recovery region's first position, positions after a gap),
    read on the driver: file names and each file's first record only."""
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.files.lock import abort_exists
    from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
    from rmqstore_cli.store.write.rebuild import recovery_start

    cl = CommitLog(config)
    try:
        cl.queue.check_sizes()
        files = cl.files
        ck = StoreCheckpoint.read(config.checkpoint_path) if config.checkpoint_path.exists() else None
        rec = recovery_start(files, abort_exists(config.root), ck, bool(files) and cl.header_of(files[-1]) > 0)
        gaps = [i for i in range(1, len(files)) if files[i].file_from_offset != files[i - 1].end_offset]
        names = [(f.name, f.file_from_offset, f.end_offset) for f in files]
    finally:
        cl.close()
    return names, rec, gaps


def plan_dispatch(
    names: list, gaps: list[int], summaries: list[FileSummary], files: list[int] | None = None
) -> tuple[list[int], object]:
    """The files dispatched and where dispatch ends (``dispatch_log``'s stop rules). With
    ``files`` (the file of each position, positions being parts of files in order), the
    parts dispatched: none of a file after one that stopped inside it."""
    from rmqstore_cli.store.commitlog import ScanEnd

    by_pos = {s.position: s for s in summaries}
    included, stop = _dispatched(names, gaps, by_pos, list(range(len(names))) if files is None else files)
    if stop is None and names:
        stop = ScanEnd(names[-1][2], "end of the last file", names[-1][0])
    return included, stop


def _dispatched(names: list, gaps: list[int], by_pos: dict, files: list[int]) -> tuple[list[int], object]:
    """The positions dispatched, up to a gap or a stop in the recovery region (that stop, or
    None)."""
    included: list[int] = []
    after_gap = {files.index(i) for i in gaps if i in files}  # the first part of a file after a gap
    halted = None  # a file dispatch stopped inside: its later parts are skipped with it
    for p, i in enumerate(files):
        if i == halted:
            continue
        if p in after_gap:
            return included, _gap_end(names, i)
        included.append(p)
        if by_pos[p].stop is not None:
            return included, by_pos[p].stop
        if by_pos[p].halted:
            halted = i
    return included, None


def _gap_end(names: list, i: int):
    """Dispatch's end at the gap before file ``i``."""
    from rmqstore_cli.store.commitlog import ScanEnd

    a, b = names[i - 1][2], names[i][1]
    return ScanEnd(a, f"gap: no file between {a} and {b}", names[i][0], clean=False)


def key_floors(included: list[int], summaries: dict) -> dict:
    """endPhyOffset before each file: the largest key offset of every earlier file (or 0)."""
    floor, out = 0, {}
    for i in included:
        out[i] = floor
        floor = max(floor, summaries[i].key_max_phy)
    return out


def rising(phy, last_end_phy: int) -> bool:
    """Whether every key is kept (:func:`kept_mask`): offsets that never go back, from
    ``last_end_phy`` on (a log dispatched in order: the usual case), told by one comparison
    of neighbours, not the running maximum."""
    return not len(phy) or (int(phy[0]) >= last_end_phy and not (phy[1:] < phy[:-1]).any())


def kept_sel(phy, last_end_phy: int):
    """The keys :func:`kept_mask` keeps, as what indexes them: every one (``slice(None)``,
    no copy taken of 3 million keys) when offsets never go back, else their indexes."""
    import numpy as np

    return slice(None) if rising(phy, last_end_phy) else np.flatnonzero(_at_least_every_earlier(phy, last_end_phy))


def kept_count_if_simple(s: FileSummary, floor: int) -> int | None:
    """Keys put from a file, from its summary alone when every key it keeps on its own is
    also ≥ the floor (always, unless offsets go backwards across files); else None."""
    if s.local_put == 0 or s.local_put_min_phy >= floor:
        return s.local_put
    return None


def kept_keys(fd: FileDispatch, floor: int) -> tuple:
    m = kept_mask(fd.keys[1], floor)
    return tuple(k[m] for k in fd.keys)


def name_index_files(index_dir: Path, built: list[dict], tz) -> list[str]:
    """Rename ``<k>.part`` files in order, as ``IndexService`` names them: the first entry's
    store time in ``tz``, each strictly after the previous."""
    from rmqstore_cli.store.queues.index_service import IndexService

    namer = IndexService(index_dir / ".no-such-dir", 1, 2, tz=tz)
    names: list[str] = []
    for b in sorted(built, key=lambda b: b["k"]):
        name = namer.next_name(b["first_ts"], names[-1] if names else None)
        os.rename(index_dir / f"{b['k']:010d}.part", index_dir / name)
        names.append(name)
    return names


def build_queue(cq_root: str, key: tuple[str, int], parts: list, cq_file_size: int) -> int:
    """One queue from its units, file by file in commit-log order, through the engine's
    ``ConsumeQueueWriter`` (``putMessagePositionInfo``). Returns the files created."""
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueueWriter

    w = ConsumeQueueWriter(Path(cq_root), key[0], key[1], cq_file_size)
    for _, (phy, size, tags, qoff) in sorted(parts, key=lambda p: p[0]):
        w.put_many(phy, size, tags, qoff)
    w.flush()
    return len(w.files_created)


def plan_keys(included: list[int], summaries: dict, exact_counts=None) -> tuple[dict, dict, dict, int]:
    """(floor, kept count, first global key number) per included file, and the total.
    ``exact_counts(need: {position: floor}) -> {position: count}`` is asked only for files
    whose count the summaries cannot tell (key offsets going backwards across files)."""
    floors = key_floors(included, summaries)
    counts = {i: kept_count_if_simple(summaries[i], floors[i]) for i in included}
    need = {i: floors[i] for i, c in counts.items() if c is None}
    if need:
        counts.update(exact_counts(need))
    start, total = {}, 0
    for i in included:
        start[i] = total
        total += counts[i]
    return floors, counts, start, total


def rebuild_report(
    config,
    opts,
    names,
    rec: int,
    included: list[int],
    stop,
    summaries: dict,
    cq_files: int,
    queues: int,
    index_built: list[dict],
    total_keys: int,
    seconds: float,
    files: list[int] | None = None,
):
    """The local engine's DispatchReport, from the per-file summaries and what was built
    (``files``: the file of each position, when positions are parts of files)."""
    from rmqstore_cli.store.files.lock import abort_exists
    from rmqstore_cli.store.write.rebuild import DispatchReport

    rep = DispatchReport()
    rep.recovery = "abnormal (abort file present)" if abort_exists(config.root) else "normal"
    rep.recovery_first_file = names[rec][0] if names else None
    for i in included:
        _add_summary(rep, summaries[i])
    rep.files = len(included) if files is None else len({files[p] for p in included})
    rep.stop = stop
    rep.bytes = (stop.offset - names[0][1]) if names and stop else 0
    rep.queues = queues
    rep.cq_files = cq_files
    if opts.build_index:
        _add_index(rep, index_built, total_keys)
    rep.seconds = seconds
    return rep


def _add_summary(rep, s: FileSummary) -> None:
    """One included file's counts, skips, refused topics and multi-dispatch problems; its last
    store time when it dispatched any message (files come in order)."""
    rep.messages += s.messages
    rep.units += s.units
    rep.skipped.extend(s.skipped)
    for topic, why in (s.refused_topics or {}).items():
        rep.refused_topics.setdefault(topic, why)
    for problem, n in (s.multi_problems or {}).items():
        rep.multi_dispatch_problems[problem] = rep.multi_dispatch_problems.get(problem, 0) + n
    if s.messages:
        rep.last_store_timestamp = s.last_store_timestamp


def _add_index(rep, index_built: list[dict], total_keys: int) -> None:
    """The index files built, their keys, and the end time of the last full one (0: none full)."""
    rep.index_files = len(index_built)
    rep.index_keys = total_keys
    full = [b for b in sorted(index_built, key=lambda b: b["k"]) if b["full"]]
    rep.index_msg_timestamp = full[-1]["end_ts"] if full else 0


def dry_counts(config, included: list[int], summaries: dict) -> tuple[int, int]:
    """(queues, consume-queue files) a dry run reports, from the per-file queue summaries."""
    spans: dict = {}
    for i in included:
        for key, (first, last, _) in summaries[i].queues.items():
            spans.setdefault(key, [first, last])[1] = last
    from rmqstore_cli.store.write.rebuild import cq_file_count

    F = config.cq_file_size
    return len(spans), sum(cq_file_count(first, last, F) for first, last in spans.values())
