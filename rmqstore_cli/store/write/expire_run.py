"""The broker's file expiry run once (``DefaultMessageStore.CleanCommitLogService`` and
``CleanConsumeQueueService``): the store checked, the plan made (``store/write/cleanup.py``) and
carried out under the broker's lock, and the run's summary and journal; for ``expire`` and
``Store.expire``. The callers say what they must (notes, hints, the report)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rmqstore_cli.errors import RmqstoreError, setting
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write import cleanup


@dataclass
class ExpireRun:
    """One run: the plan, the files deleted (with ``dry_run``: that would be), the error that
    stopped it (None when it completed) and the journal that recorded each deletion (None
    when nothing was to go, or on a dry run)."""

    plan: cleanup.ExpiryPlan
    deleted: list[cleanup.Condemned]
    error: RmqstoreError | None
    journal: Any
    dry_run: bool


def check_lock(cfg: StoreConfig, dry_run: bool, force: bool, refuse_hint: str | None = None) -> int | None:
    """The broker's lock: a live broker refused unless ``force`` (``refuse_hint`` says what
    to do instead); allowed for a dry run, which only reads. Returns the live broker's pid
    when a dry run goes on under it."""
    from rmqstore_cli.store.files.lock import check_lock_file, lock_holder, refuse_if_live

    if dry_run:  # only reads: allowed under a live broker, which is when "what would go" matters
        check_lock_file(cfg.root)
        return lock_holder(cfg.root)
    refuse_if_live(cfg.root, force, hint=refuse_hint)
    return None


def check_files(cfg: StoreConfig, zone: _dt.tzinfo | None) -> list[str]:
    """Before anything is planned: the data directories (none a symlink out of the store)
    and the file sizes (inferred and checked; DLedger and RocksDB refused). Returns the
    notes on the sizes inferred."""
    from rmqstore_cli.store.message_store import MessageStore

    cleanup.check_data_dirs(cfg)
    ms = MessageStore.open(cfg, zone, rocksdb=False)
    try:
        ms.commitlog.queue.check_sizes()
    finally:
        ms.close()
    return list(ms.notes)


def run(
    cfg: StoreConfig,
    now_ms: int,
    hours: float,
    ratio: float | None = None,
    max_files: int | None = None,
    pause_ms: int = 0,
    dry_run: bool = True,
    on_action: Callable[[cleanup.Condemned], None] | None = None,
    on_forced: Callable[[], None] | None = None,
    on_plan: Callable[[int], None] | None = None,
) -> ExpireRun:
    """Plan the expiry and (unless ``dry_run``) carry it out holding the store's lock for the
    deletions only. ``on_action`` hears of each file deleted (or that would be) as it
    happens, after the journal has it; ``on_forced`` that a live broker holds the lock and
    the run deletes anyway (the caller checked ``force``); ``on_plan`` the bytes of the
    files planned to go, before the first goes (a progress bar's total)."""
    from rmqstore_cli.store.files.lock import StoreLock, lock_holder
    from rmqstore_cli.store.write.expire_journal import ExpiryJournal

    lock = StoreLock(cfg.root, hint="a broker or another rmqstore expire is starting; try again later")
    if not dry_run:
        if lock_holder(cfg.root) is None:
            lock.acquire()
        elif on_forced is not None:
            on_forced()
    try:
        plan = cleanup.plan_expiry(cfg, now_ms, hours, disk_ratio=ratio, max_files=max_files)
        journal = None if dry_run or not plan.actions else ExpiryJournal(cfg.root)
        if on_plan is not None:
            on_plan(sum(a.size for a in plan.actions))

        def said(a: cleanup.Condemned) -> None:
            if journal is not None:
                journal.add(a.as_dict())
            if on_action is not None:
                on_action(a)

        if dry_run:
            for a in plan.actions:
                said(a)
            return ExpireRun(plan, list(plan.actions), None, None, True)
        result = cleanup.execute_plan(plan, on_delete=said, pause_ms=pause_ms)
        return ExpireRun(plan, list(result.deleted), result.error, journal, False)
    finally:
        lock.release()


def summary(r: ExpireRun, cfg: StoreConfig) -> dict[str, Any]:
    """The run's summary (``expire``'s last JSON line): what went, by kind, the bytes freed,
    the minimum offsets after the run (where the commit log really starts when the run
    stopped early), the problems and notes."""
    from rmqstore_cli.store.write.cleanup import COMMITLOG, CONSUMEQUEUE, INDEX, KINDS

    plan, deleted, error = r.plan, r.deleted, r.error
    counts = {k: sum(1 for a in deleted if a.kind == k) for k in KINDS}
    cl_min = _commitlog_min(r, cfg)
    queues = _queue_mins(r)
    index_complete = counts[INDEX] == len(plan.of(INDEX))
    s: dict[str, Any] = {
        "store": str(cfg.root),
        "dry_run": r.dry_run,
        "completed": error is None and not plan.problems,
        "now": plan.now_ms,
        "reserved_hours": plan.reserved_hours,
        "disk_ratio": plan.disk_ratio,
        "max_files": plan.max_files,
        "files": len(deleted),
        "bytes": sum(a.size for a in deleted),
        "bytes_freed": sum(a.freed for a in deleted),
        "deleted": counts,
        "min_offsets": {
            COMMITLOG: cl_min,
            "commitlog_before": plan.commitlog_min_before,
            CONSUMEQUEUE: queues,
            INDEX: plan.index_first if index_complete else None,
        },
    }
    if plan.disk is not None:
        s["disk"] = plan.disk
    s["problems"] = _problems(plan.problems, error)
    s["notes"] = list(plan.notes)
    return s


def _problems(problems: list, error: RmqstoreError | None) -> list[str]:
    """The plan's problems, then the error that stopped the run."""
    return [str(p) for p in problems] + ([str(error)] if error is not None else [])


def _commitlog_min(r: ExpireRun, cfg: StoreConfig) -> int:
    """The commit log's minimum offset after the run: the plan's, or, when the run stopped
    early, where the commit log really starts now (-1: no file left)."""
    from rmqstore_cli.store.files.mapped_files import MappedFileQueue

    if r.dry_run or r.error is None:
        return r.plan.commitlog_min_after
    q = MappedFileQueue(cfg.commitlog_dirs, cfg.mapped_file_size_commit_log)
    return q.files[0].file_from_offset if q.files else -1


def _queue_mins(r: ExpireRun) -> list[dict[str, Any]]:
    """The queues whose planned files all went, with their new minimum offset (a queue the
    run stopped inside keeps its old one, so it is not named)."""
    from rmqstore_cli.store.write.cleanup import CONSUMEQUEUE

    done_q: dict[tuple[str, int], int] = {}
    for a in r.deleted:
        if a.kind == CONSUMEQUEUE:
            done_q[(a.topic, a.queue_id)] = done_q.get((a.topic, a.queue_id), 0) + 1
    return [
        {"topic": m.topic, "queue_id": m.queue_id, "files_deleted": m.files_deleted, "min_offset": m.min_offset}
        for m in r.plan.queue_mins
        if done_q.get((m.topic, m.queue_id)) == m.files_deleted
    ]


def record(journal: Any, summary: dict[str, Any]) -> str | None:
    """The run's summary into its journal, which the summary then names (``journal``: null
    when it could not be written). Returns why the journal could not be written, if so."""
    summary["journal"] = None
    if journal is None:
        return None
    if journal.error is None:
        summary["journal"] = str(journal.path)
    journal.add({"kind": "summary", **summary})
    journal.close()
    if journal.error is not None:
        summary["journal"] = None
        return str(journal.error)
    return None


def failure(problems: list[Any], error: RmqstoreError | None, verbose: bool) -> RmqstoreError | None:
    """The error that ends a run which had to leave files alone (exit 3): the one that stopped
    it, its hint counting the others; one file's own error; several files' count, kinds and
    first file. None when the run completed. ``verbose``: the files are listed elsewhere."""
    from rmqstore_cli.errors import StoreError

    if error is not None:
        if problems:
            more = f"{len(problems)} other file{'s' if len(problems) != 1 else ''} left alone" + (
                "" if verbose else " (--verbose lists them)"
            )
            error.hint = f"{error.hint}; {more}" if error.hint else more
        return error
    if len(problems) == 1:
        p = problems[0]
        return StoreError(
            p.message,
            path=p.path,
            hint="files before it were handled; move it away or fix the size options, then run again",
        )
    if problems:
        return _problems_error(problems, verbose)
    return None


#: Why a file was left alone (cleanup's messages), as (one, several, all of them) for the error line.
PROBLEM_KINDS = (
    ("is a symlink", ("symlink", "symlinks", "symlinks, not store files")),
    ("not a regular file", ("not a regular file", "not regular files", "not regular files")),
    ("bytes, expected", ("of the wrong size", "of the wrong size", "of the wrong size")),
    ("lies outside", ("outside its directory", "outside their directories", "outside their directories")),
    ("not a store file name", ("misnamed", "misnamed", "misnamed")),
)


def _problem_kind(message: str) -> tuple[str, str, str]:
    return next((k for needle, k in PROBLEM_KINDS if needle in message), ("unreadable",) * 3)


def _problems_error(problems: list[Any], verbose: bool) -> RmqstoreError:
    """Several files left alone: one line with the count, the kinds and the first file."""
    from collections import Counter

    from rmqstore_cli.errors import StoreError

    kinds = Counter(_problem_kind(p.message) for p in problems)
    n = len(problems)
    if len(kinds) == 1:
        what = f"{n} files are {next(iter(kinds))[2]}"
    else:
        what = (
            f"{n} files could not be proven store files ("
            + ", ".join(f"{c} {one if c == 1 else several}" for (one, several, _), c in kinds.items())
            + ")"
        )
    return StoreError(
        f"{what}; left alone",
        path=f"first: {problems[0].path}",
        hint="files before them were handled; move them away or fix the size options, then run "
        "again" + ("" if verbose else f" ({setting('verbose')} lists each)"),
    )
