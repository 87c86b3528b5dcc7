"""The whole-store rebuild (one walk over the commit log, in order, through one
:class:`~rmqstore_cli.store.write.dispatch.Dispatcher`): the reference the rebuild engine's
tests compare the plan, tasks and join with (pipeline/rebuild_tasks.py ``rebuild_staged``);
the command and the library run the engine (``pipeline/local.rebuild_build``, Spark's)."""

from __future__ import annotations

import time
from pathlib import Path

from rmqstore_cli.store.commitlog import CommitLog, ScanEnd
from rmqstore_cli.store.files.lock import abort_exists
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.dispatch import Dispatcher
from rmqstore_cli.store.write.fastdispatch import FastDispatcher
from rmqstore_cli.store.write.rebuild import (
    BATCH,
    DispatchReport,
    Progress,
    RebuildOptions,
    classify_stop,
    cq_file_count,
    dispatch_file_records,
    recovery_start,
)


def build_set(
    config: StoreConfig, dest: Path, opts: RebuildOptions, progress: Progress | None = None
) -> DispatchReport:
    """Dispatch the store's commit log into ``dest/consumequeue`` and ``dest/index``."""
    root = config.root
    ck = StoreCheckpoint.read(config.checkpoint_path) if config.checkpoint_path.exists() else None
    d = Dispatcher(
        config,
        dest / "consumequeue",
        dest / "index",
        opts.tz,
        build_cq=opts.build_cq,
        build_index=opts.build_index,
        topics=opts.topics,
    )
    rep = dispatch_log(config, d, abort=abort_exists(root), checkpoint=ck, progress=progress, dry_run=opts.dry_run)
    rep.refused_topics = dict(d.topics.refused)
    rep.multi_dispatch_problems = dict(d.multi_problems)
    return rep


def dispatch_log(
    config: StoreConfig,
    dispatcher: Dispatcher,
    *,
    abort: bool,
    checkpoint: StoreCheckpoint | None,
    progress: Progress | None = None,
    dry_run: bool = False,
    batch: int = BATCH,
) -> DispatchReport:
    """Dispatch the whole commit log as the broker's recovery + reput would; see the module doc."""
    t0 = time.perf_counter()
    rep = DispatchReport()
    cl = CommitLog(config)
    cl.queue.check_sizes()
    files = cl.files
    fd = FastDispatcher(dispatcher)
    fd.dry = dry_run
    rec = recovery_start(files, abort, checkpoint, bool(files) and cl.header_of(files[-1]) > 0)
    rep.recovery = "abnormal (abort file present)" if abort else "normal"
    rep.recovery_first_file = files[rec].name if files else None
    total_bytes = (files[-1].end_offset - files[0].file_from_offset) if files else 0
    try:
        _dispatch_files(cl, rec, fd, dispatcher, rep, progress, batch, total_bytes)
    finally:
        cl.close()
    if progress:
        progress(rep.files, total_bytes, total_bytes, fd.messages)
    rep.messages = fd.messages
    rep.units = fd.units
    rep.last_store_timestamp = fd.last_store_timestamp
    if dry_run:
        _dry_totals(rep, fd, dispatcher, config)
    else:
        _written_totals(rep, dispatcher)
    rep.bytes = (rep.stop.offset - files[0].file_from_offset) if files and rep.stop else 0
    rep.seconds = time.perf_counter() - t0
    return rep


def _dispatch_files(
    cl: CommitLog,
    rec: int,
    fd: FastDispatcher,
    dispatcher: Dispatcher,
    rep: DispatchReport,
    progress: Progress | None,
    batch: int,
    total_bytes: int,
) -> None:
    """Every file in order (``rec`` on: the recovery region) until the log ends: a gap between
    files, or a stop recovery makes; ``rep.stop`` says where, ``rep.skipped`` what the reput skipped."""
    files = cl.files
    check_crc = cl.config.check_crc_on_recover
    force_prop_crc = cl.config.force_verify_prop_crc
    done_bytes = 0
    for i, f in enumerate(files):
        if i > 0 and f.file_from_offset != files[i - 1].end_offset:
            rep.stop = ScanEnd(
                files[i - 1].end_offset,
                f"gap: no file between {files[i - 1].end_offset} and {f.file_from_offset}",
                f.name,
                clean=False,
            )
            return
        recovering = i >= rec
        header = cl.header_of(f)

        def after_block(end_pos: int, done_bytes: int = done_bytes) -> None:
            if dispatcher.index is not None:
                dispatcher.index.release_pages()
            if progress:
                progress(rep.files, done_bytes + end_pos, total_bytes, fd.messages)

        stop_at, reason = dispatch_file_records(
            fd, f, recovering, check_crc and not header, force_prop_crc, rep.skipped, batch, after_block, header
        )
        rep.files += 1
        done_bytes += f.file_size
        if stop_at is not None:
            end, skip = classify_stop(f, stop_at, reason, recovering, last_file=i == len(files) - 1)
            if end is not None:
                rep.stop = end
                return
            rep.skipped.append(skip)
        f.close()
    last = files[-1] if files else None
    rep.stop = ScanEnd(last.end_offset if last else 0, "end of the last file", last.name if last else None)


def _dry_totals(rep: DispatchReport, fd: FastDispatcher, dispatcher: Dispatcher, config: StoreConfig) -> None:
    """A dry run's queues, consume-queue files and index files: what would have been written."""
    F = config.cq_file_size
    rep.queues = len(fd.dry_queues)
    rep.cq_files = sum(cq_file_count(first, last, F) for first, last, _ in fd.dry_queues.values())
    rep.index_keys = fd.keys
    per = max(1, config.max_index_num - 1)
    rep.index_files = -(-fd.keys // per) if dispatcher.build_index else 0
    dispatcher.close()


def _written_totals(rep: DispatchReport, dispatcher: Dispatcher) -> None:
    """The queues, consume-queue files and index files written (the dispatcher closed first)."""
    dispatcher.close()
    rep.queues = len(dispatcher.writers)
    rep.cq_files = sum(len(w.file_starts) for w in dispatcher.writers.values())
    if dispatcher.index is not None:
        rep.index_files = len(dispatcher.index.files)
        rep.index_keys = dispatcher.index.keys_put
        rep.index_msg_timestamp = dispatcher.index.full_files_end_timestamp()
        rep.fallback_index_names = list(dispatcher.index.fallback_names)
