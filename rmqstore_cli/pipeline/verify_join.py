"""verify's join (``pipeline/verify_tasks.py``): the commit-log files' scans joined on the
driver (:func:`join_files`: topic and queue order across files, queue offsets from one file
to the next), the queue and index-file tasks that finish them (:func:`finish_task`), and the
end on the driver (:func:`conclude`: checkpoint, recovery, the 5.x stores, config files,
then the findings in order, capped per check, and the summary)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmqstore_cli.pipeline.verify_plan import Recorder, StorePlan, mark_runs, task_result, task_verifier
from rmqstore_cli.pipeline.verify_scan import FileScan
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
from rmqstore_cli.store.verify import ERROR, INFO, WARNING, IndexScan, QueueState, Verifier, VerifyOptions

_MISSING_CHECKS = frozenset({"cq.missing-unit", "cq.not-dispatched", "cq.superseded"})  # runs of missing units


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
    scans = sorted(scans, key=lambda s: s.at)
    topic_first: dict = {}
    for s in scans:
        for tb, pos in s.topic_first.items():
            topic_first.setdefault(tb, (s.at, pos))
    rank = _queue_ranks(scans, topic_first)
    counts, sev = Counter(), Counter()
    kept: list = []
    once: set = set()
    for s in scans:
        counts.update(s.counts)
        sev.update(s.sev)
        for check, key, tag, d in s.kept:
            placed = _final_place(s.at, check, key, tag, once, topic_first, rank)
            if placed is None:  # said by an earlier file: the local engine says it once
                counts[check] -= 1
                sev[d["severity"]] -= 1
            else:
                kept.append((check, placed, d))
    tq_reset = _reset_points(scans)
    sh = _queue_offsets_across_files(plan, scans, rank, kept, tq_reset)
    counts.update(sh.counts)
    sev.update(sh.by_severity)
    cl_end = _log_end(plan, scans)
    lmq_mode = next((s.lmq_mode for s in scans if s.lmq_mode is not None), None)
    return FinishContext(plan, cl_end, rank, tq_reset, lmq_mode), _totals(scans, counts, sev), kept


def _queue_ranks(scans: list[FileScan], topic_first: dict) -> dict:
    """Each queue's place in the order the local scan numbers queues: the file (part) and
    batch that first met it, where its topic was first met, its queue id."""
    tq_first: dict = {}
    for s in scans:
        for tk, b in s.tq_first_batch.items():
            tq_first.setdefault(tk, (s.at, b))
    return {tk: (fb, topic_first[tk[0]], tk[1] & 0xFFFFFFFF) for tk, fb in tq_first.items()}


def _reset_points(scans: list[FileScan]) -> dict:
    """Where each queue's offsets last restarted inside a file (the latest physical offset)."""
    tq_reset: dict = {}
    for s in scans:
        for tk, p in s.tq_reset.items():
            tq_reset[tk] = max(tq_reset.get(tk, -1), p)
    return tq_reset


def _final_place(at: tuple, check: str, key: tuple, tag, once: set, topic_first: dict, rank: dict) -> tuple | None:
    """A scan finding's place in the whole store's order (a queue's findings by the queue's
    rank), or None for one the store says once and an earlier file (part) said already."""
    if tag is None:
        return key
    if tag[0] == "once":
        if check in once:
            return None
        once.add(check)
        return key
    if tag[0] == "topic":
        return key if topic_first[tag[1]][0] == at else None
    return key[:3] + (rank[tag[1]],) + key[4:]


def _queue_offsets_across_files(plan: StorePlan, scans: list[FileScan], rank: dict, kept: list, tq_reset: dict):
    """The first record of each queue in a file against the previous file's end
    (``check_queue_offsets`` on one record); its findings go to ``kept``, restarts to
    ``tq_reset``. Returns the Verifier that counted them."""
    shr = Recorder(None, 2)
    sh = Verifier(plan.config, VerifyOptions(crc=plan.crc, deep=plan.deep, max_findings=None), sink=shr)
    last: dict = {}
    for s in scans:
        for tk, (q, st, p, rel, base, batch) in s.tq_head.items():
            if tk not in last:
                continue
            sh.topic_names, sh.tq_list, sh.tq_last, sh.tq_reset = [tk[0]], [(0, tk[1])], [last[tk]], {}
            n0 = len(shr.kept)
            sh.check_queue_offsets(_one(0), _one(q), _one(st), np.ones(1, bool), _one(p), rel, base)
            kept.extend((check, (2, s.at, batch, rank[tk], -1), d) for check, _, _, d in shr.kept[n0:])
            if 0 in sh.tq_reset:
                tq_reset[tk] = max(tq_reset.get(tk, -1), sh.tq_reset[0])
        last.update(s.tq_tail)
    return sh


def _log_end(plan: StorePlan, scans: list[FileScan]) -> int:
    """Where the commit log's data ends: where the last file's scan (its last part) found
    it; when that part ended in bytes no record could be read from, the end of the last
    record any part of the file checked (``CommitLogScan#_valid_end``), or the file's start."""
    last = [s for s in scans if s.i == len(plan.files) - 1]
    if not last:
        return plan.cl_min
    if last[-1].cl_end is not None:
        return last[-1].cl_end
    return max((s.data_end for s in last if s.data_end is not None), default=int(plan.files[-1]))


def _one(x: int) -> np.ndarray:
    return np.array([x], np.int64)


def _totals(scans: list[FileScan], counts: Counter, sev: Counter) -> dict:
    """The store's totals summed over its files' scans."""
    return {
        "messages": sum(s.messages for s in scans),
        "bytes": sum(s.bytes for s in scans),
        "max_store_ts": max((s.max_store_ts for s in scans), default=0),
        "first_records": {k: v for s in scans for k, v in s.first_records.items()},
        "stops": [x for s in scans for x in s.stops],
        "counts": counts,
        "sev": sev,
        "first_indexable": min((s.first_indexable for s in scans if s.first_indexable is not None), default=None),
    }


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


def _commitlog(v: Verifier):
    """The commit-log files a task may read: one that is not a regular file was the plan's
    ``store.not-regular`` finding and is left out here without another (reading it could hang)."""
    from rmqstore_cli.store.files.mapped_files import MappedFileQueue

    cfg = v.config
    mfq = MappedFileQueue(cfg.commitlog_dirs, cfg.mapped_file_size_commit_log)
    with v.muted():
        mfq.files = [f for f in mfq.files if not v.not_regular(f.path)]
    return mfq


def finish_task(ctxs: dict, key: tuple, items: list, logs: dict | None = None) -> tuple[int, dict]:
    """One queue (``finish_queues``) or one index file (``finish_index``) of one store.
    ``logs``: by store, the commit-log files several tasks share (:func:`finish_tasks`
    closes them); without it the task lists and closes its own."""
    store, kind, k = key
    ctx = ctxs[store]
    plan = ctx.plan
    if kind == "q" and _all_matched(plan, k, items):
        return store, _settled_queue(ctx, k)
    items = sorted(items, key=lambda it: it[1])  # by commit-log file, as the local engine met them
    v, rec = _index_finish(plan, k, items) if kind == "i" else _queue_finish(ctx, k, items)
    v.cl_min, v.cl_end, v.checkpoint = plan.cl_min, ctx.cl_end, plan.checkpoint
    if logs is None:
        v.mfq = _commitlog(v)
    else:
        v.mfq = logs[store] if store in logs else logs.setdefault(store, _commitlog(v))
    try:
        v.finish_index() if kind == "i" else v.finish_queues()
    finally:
        for x in list(v.queues.values()) + v.index_files:
            x.close()
        if logs is None:
            v.mfq.close()
        v.close_rocksdb()
    return store, task_result(v, rec)


def finish_tasks(ctxs: dict, groups: list) -> list[tuple[int, dict]]:
    """Many finish tasks, ``(key, items)`` each, as one: each store's commit-log files are
    listed once for all of them, not once a queue (a store of 20 000 one-message queues
    would list its commit log 20 000 times). One part per store, the tasks' findings and
    counts together: each finding keeps the place its own task gave it, so the join's
    order and caps are the same as with one task a key."""
    logs: dict = {}
    parts: dict[int, dict] = {}
    try:
        for key, items in groups:
            store, got = finish_task(ctxs, key, items, logs)
            part = parts.setdefault(store, {"kept": [], "counts": Counter(), "sev": Counter()})
            part["kept"].extend(got["kept"])
            part["counts"].update(got["counts"])
            part["sev"].update(got["sev"])
    finally:
        for mfq in logs.values():
            mfq.close()
    return list(parts.items())


def _all_matched(plan: StorePlan, k: tuple, items: list) -> bool:
    """Whether queue ``k``'s finish has nothing but its tail to say: its files could be read
    (nothing skipped), the files sent it only matched units, and those cover every unit
    from its first to its end (``_report_unclaimed_units`` finds none unclaimed)."""
    facts = plan.queue_facts.get(k)
    if facts is None or plan.skipped or any(it[0] != "matched" for it in items):
        return False
    return _covers(items, facts.end - facts.base)


def _covers(items: list, n: int) -> bool:
    """Whether the runs the scans sent a finish task (``items``: (kind, at, runs)) cover
    every number in [0, ``n``)."""
    runs = sorted(r for it in items for r in it[2].tolist())
    covered = 0
    for a, b in runs:
        if a > covered or covered >= n:
            break
        covered = max(covered, b)
    return covered >= n


#: :func:`little_to_finish` says no above this many finish tasks: a store of many queues
#: (20 000) is worth its processes even when every queue is settled.
FEW_FINISH_TASKS = 256


def little_to_finish(ctxs: dict, groups: list) -> bool:
    """Whether the finish tasks (``(key, items)`` each) are few and each reads nothing: every
    queue settled (:func:`_all_matched`), every index file's entries all checked by the scans
    (nothing unchecked to read). Then forking processes for them costs more than they do
    (~0.02 s of wall for a 1 M-send store's 24 tasks, which take ~2 ms in one process)."""
    if len(groups) > FEW_FINISH_TASKS:
        return False
    for (store, kind, k), items in groups:
        plan = ctxs[store].plan
        if kind == "q" and not _all_matched(plan, k, items):
            return False
        if kind == "i" and (plan.skipped or any(it[0] != "checked" for it in items)):
            return False
        if kind == "i" and not _covers(items, plan.index_info[k].entries):
            return False
    return True


def _settled_queue(ctx: FinishContext, k: tuple) -> dict:
    """The finish of a queue :func:`_all_matched` passed: its ``cq.tail`` from the plan's
    facts, said as ``finish_queues`` says it (the queue's only finding, so its first)."""
    plan = ctx.plan
    facts = plan.queue_facts[k]
    if facts.tail is None:
        return {"kept": [], "counts": Counter(), "sev": Counter()}
    rec = QueueRecorder(plan, ctx.tq_rank.get(k), plan.queue_dirs[k][3], k)
    v = task_verifier(plan, rec)
    v.report_tail(facts.topic, facts.qid, facts.end, facts.tail)
    return task_result(v, rec)


def _index_finish(plan: StorePlan, k: int, items: list) -> tuple[Verifier, Recorder]:
    """A Verifier holding index file ``k`` alone, its entries marked as the scans checked them."""
    cfg = plan.config
    rec = Recorder(plan.cap, 4, (k,))
    v = task_verifier(plan, rec)
    f = IndexScan(Path(plan.index_paths[k]), cfg.max_hash_slot_num, cfg.max_index_num, cfg.root)
    mark_runs(f.checked, [it[2] for it in items])
    v.index_files, v.queues = [f], {}
    return v, rec


def _queue_finish(ctx: FinishContext, k: tuple, items: list) -> tuple[Verifier, Recorder]:
    """A Verifier holding queue ``k`` alone: its units matched by any file, the messages
    the files found without a unit, its offset restarts and multi-dispatch ends."""
    plan = ctx.plan
    qd = plan.queue_dirs.get(k)
    rec = QueueRecorder(plan, ctx.tq_rank.get(k), qd[3] if qd else None, k)
    v = task_verifier(plan, rec)
    mq = _queue_state(plan, v, qd)
    by_kind: dict = {"matched": [], "missing": [], "lmq_end": []}
    for it in items:
        by_kind[it[0]].append(it[2])
    if mq is not None:
        mark_runs(mq.matched, by_kind["matched"])
    v.queues = {k: mq} if mq is not None else {}
    v.topic_names, v.tq_list, v.tq_queue = [k[0]], [(0, k[1])], [mq]
    v.tq_reset = {0: ctx.tq_reset[k]} if k in ctx.tq_reset else {}
    v.missing = [(np.zeros(len(m[0]), np.int64), *m) for m in by_kind["missing"]]
    v.index_files = []
    v.lmq_mode = ctx.lmq_mode  # multi-dispatch ends and mode of the scans
    if by_kind["lmq_end"]:
        v.__dict__["lmq_ends"] = {(k[0].decode("utf-8", "surrogateescape"), k[1]): max(by_kind["lmq_end"])}
    return v, rec


def _queue_state(plan: StorePlan, v: Verifier, qd: tuple | None) -> QueueState | None:
    """One queue as the finish reads it: its directory, or its rows of the RocksDB
    consume queue, the database opened read-only on ``v`` (``RocksDBConsumeQueueTable``)."""
    cfg = plan.config
    if qd is None:
        return None
    if not plan.rocksdb:
        with v.muted():  # a file that is not regular: the plan's finding, skipped here
            cq = ConsumeQueue(
                cfg.consumequeue_dir, qd[0], qd[1], cfg.cq_file_size, directory=Path(qd[2]), skip=v.not_regular
            )
        return QueueState(cq, cfg.root)
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

    v.rocksdb = RocksDBConsumeQueues(cfg.consumequeue_dir)
    return QueueState(v.rocksdb.queue(qd[0], qd[1]), cfg.root)


def finish_keys(plans: list[StorePlan]) -> list[tuple]:
    """Every queue directory and index file gets a task, whatever the files sent it."""
    return [(s, "q", k) for s, p in enumerate(plans) for k in p.queue_dirs] + [
        (s, "i", k) for s, p in enumerate(plans) for k in range(len(p.index_paths))
    ]


def conclude(plan: StorePlan, ctx: FinishContext, totals: dict, parts: list[dict], kept: list) -> dict:
    """Checkpoint and recovery on the driver, then the capped findings and the summary, as
    the whole-store Verifier gives them (``Verifier.run``)."""
    rec = Recorder(plan.cap, 5)
    v = _driver_checks(plan, ctx, totals, rec)
    counts, sev = Counter(totals["counts"]), Counter(totals["sev"])
    allkept = list(kept)
    for part in parts + [task_result(v, rec)]:
        counts.update(part["counts"])
        sev.update(part["sev"])
        allkept.extend((c, k, d) for c, k, _, d in part["kept"])
    out = Verifier(plan.config, VerifyOptions())  # its summary property, on the joined numbers
    out.messages, out.bytes = totals["messages"], totals["bytes"]
    out.files = _files_read(plan, v)
    out.skipped = {**plan.skipped, **v.skipped}
    out.cl_min, out.cl_end, out.queues, out.notes = plan.cl_min, ctx.cl_end, plan.queue_dirs, plan.notes
    out.counts = +counts
    out.epochs = getattr(v, "epochs", None)
    out.by_severity = Counter({k: n for k, n in sev.items() if n and k in (ERROR, WARNING, INFO)})
    return {
        "store": plan.label,
        "findings": [dict(d, store=plan.label) for d in _in_order(allkept, plan.cap)],
        "summary": dict(out.summary, store=plan.label),
        "ok": out.ok,
    }


def _driver_checks(plan: StorePlan, ctx: FinishContext, totals: dict, rec: Recorder) -> Verifier:
    """The whole-store checks the driver runs on the joined numbers: the RocksDB dispatch
    checkpoint, the index as a whole, checkpoint, recovery, epochs, the 5.x stores, configs."""
    cfg = plan.config
    v = task_verifier(plan, rec)
    v.checkpoint, v.abort = plan.checkpoint, plan.abort
    v.messages, v.max_store_ts = totals["messages"], totals["max_store_ts"]
    v.mfq = _commitlog(v)
    v.first_records, v.stops, v.cl_end, v.cl_min = totals["first_records"], totals["stops"], ctx.cl_end, plan.cl_min
    v.index_files = plan.index_info
    v.first_indexable = totals["first_indexable"]
    try:
        if plan.rocksdb:  # the dispatch checkpoint against the queues' max rows and the log's end
            from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

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
    return v


def _in_order(kept: list, cap: int | None) -> list[dict]:
    """The findings in the order one pass over the store emits them, the first ``cap`` of
    each check."""
    by_check: dict = {}
    for c, k, d in kept:
        by_check.setdefault(c, []).append((k, d))
    shown = []
    for items in by_check.values():
        items.sort(key=lambda kd: kd[0])
        shown.extend(items if cap is None else items[:cap])
    shown.sort(key=lambda kd: kd[0])
    return [d for _, d in shown]


def _files_read(plan: StorePlan, v: Verifier) -> Counter:
    """The summary's files by kind: what the plan listed, then what the driver's checks read
    (batchconsumequeue/ and compaction/ files counted by check_batch_queues, …)."""
    files: Counter = Counter()  # in this order: the summary's keys are printed as they come
    if "consumequeue" in plan.files_count:
        files["consumequeue"] = plan.files_count["consumequeue"]
    if plan.index_paths:
        files["index"] = len(plan.index_paths)
    if "commitlog" in plan.files_count:
        files["commitlog"] = plan.files_count["commitlog"]
    files.update(v.files)
    return files
