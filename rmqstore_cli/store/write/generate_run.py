"""``rmqstore generate``'s job: a realistic store written through the engine's append and
dispatch path (``store/write/writer.py``, ``store/write/producer.py``), as a broker so configured writes
it; or a dump-commitlog file replayed into one. The options' checks, the target's (a new or
empty directory, or --append), the broker settings, the writing and the summary."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import setting
from rmqstore_cli.store.layout.config import StoreConfig


@dataclass
class GenerateJob:
    """What to write: where (``store``; ``append`` to a store there), under which broker.conf
    and size options (``sizes``: StoreConfig.load's keywords), as which broker, and either
    the workload (``workload``: WorkloadOptions' fields the options give) or ``from_jsonl``."""

    store: Path
    append: bool
    broker_conf: Path | None
    sizes: dict[str, int | None]
    broker_version: str
    append_prop_crc: bool
    timer_ratio: float
    dledger: bool
    lmq_ratio: float
    compaction_run: bool
    from_jsonl: str | None
    workload: dict[str, Any] = field(default_factory=dict)
    #: --delay-offset-lag: write config/delayOffset.json this many messages behind each level's end
    delay_offset_lag: int | None = None

    @property
    def new_store(self) -> bool:
        return not (self.append or self.from_jsonl is not None)


def prepare(job: GenerateJob) -> tuple[StoreConfig, bool]:
    """The config to write under and whether there is a store to
    append to (its lock checked: a live broker refused, exit 4; its sizes inferred)."""
    from rmqstore_cli.store.files.lock import refuse_if_live

    check_overdue_options(job)
    cfg, existing = target_config(job.store, job.append, job.broker_conf, job.sizes)
    check_pop(job)
    apply_broker_options(
        cfg,
        job.broker_version,
        append_prop_crc=job.append_prop_crc,
        timer_ratio=job.timer_ratio,
        new_store=job.new_store,
        dledger=job.dledger,
        lmq_ratio=job.lmq_ratio,
    )
    if existing:
        refuse_if_live(job.store)
        cfg.infer_sizes()
    return cfg, existing


def write(
    job: GenerateJob,
    cfg: StoreConfig,
    zone: _dt.tzinfo | None,
    existing: bool,
    progress: Callable[[int], None] | None = None,
) -> tuple[Any, int]:
    """The store written (the broker's lock held meanwhile): the writer, closed, and how
    many records the store had before; ``progress`` hears of each block's messages as
    they are appended."""
    from rmqstore_cli.store.write.producer import Workload, WorkloadOptions
    from rmqstore_cli.store.write.writer import StoreWriter, count_records

    writer = StoreWriter(cfg, zone)  # takes the broker's lock
    try:
        if job.timer_ratio:
            from rmqstore_cli.store.timer.writer import TimerWriter

            writer.timer = TimerWriter(cfg, writer.roots)
        before = count_records(cfg) if existing else 0
        if job.from_jsonl is not None:
            replay(writer, job.from_jsonl, progress)
        else:
            w = dict(job.workload, start_ms=start_ms(job.workload.get("start_ms"), writer))
            pop_messages = w.pop("pop_messages", 0)
            trace_messages = w.pop("trace_messages", 0)
            opts = WorkloadOptions(
                **w,
                broker_version=job.broker_version,
                cluster=cfg.broker_cluster_name,
                tz=zone,
                timer_ratio=job.timer_ratio,
                timer_precision_ms=cfg.timer_precision_ms,
                lmq_ratio=job.lmq_ratio,
            )
            workload = Workload(opts)
            declare_topics(writer, workload, cfg, job.compaction_run)
            writer.append_blocks(ticking(workload.blocks(), progress))
            if pop_messages:  # generate --pop-messages (store/write/pop_generate.py)
                from rmqstore_cli.store.write.pop_generate import append_pop

                start = max(writer.last_store_timestamp or 0, opts.start_ms + opts.span_ms)
                append_pop(writer, pop_messages, opts.seed, pop_topics(workload), opts.queues, start, zone)
            if trace_messages:  # generate --trace-messages (store/write/trace_generate.py)
                from rmqstore_cli.store.write.trace_generate import append_traces

                start = max(writer.last_store_timestamp or 0, opts.start_ms + opts.span_ms)
                topics = pop_topics(workload)
                args = (writer, trace_messages, opts.seed, topics, opts.queues, start, zone, job.broker_version)
                append_traces(*args, transaction_ratio=opts.transaction_ratio)
    finally:
        writer.close()
    if job.delay_offset_lag is not None:  # the delay service left behind (store/write/delay_offsets.py)
        from rmqstore_cli.store.write.delay_offsets import write_lagging_offsets

        write_lagging_offsets(cfg, job.delay_offset_lag, writer.roots, writer.last_store_timestamp)
    return writer, before


def check_overdue_options(job: GenerateJob) -> None:
    """--overdue-timers needs timer messages to make overdue; --delay-offset-lag a workload
    (a replayed store's levels are what the dump held)."""
    from rmqstore_cli.errors import UsageError

    if job.workload.get("overdue_timer_ratio") and not job.timer_ratio:
        raise UsageError(
            f"{setting('overdue_timer_ratio')} makes timer messages overdue: it needs {setting('timer_ratio')}"
        )


def check_pop(job: GenerateJob) -> None:
    """POP consumption (5.0+) written only as a 5.x broker writes it, and never into a
    replayed dump; nor traced sends into one."""
    from rmqstore_cli.errors import UsageError

    if job.workload.get("pop_messages") and (job.broker_version != "5" or job.from_jsonl is not None):
        raise UsageError(
            f"{setting('pop_messages')}: POP consumption is a 5.x broker's; it needs {setting('broker_version')} 5 "
            f"(and no {setting('from_jsonl')})"
        )
    if job.workload.get("trace_messages") and job.from_jsonl is not None:
        raise UsageError(f"{setting('trace_messages')} traces a workload's sends: not with {setting('from_jsonl')}")


def pop_topics(workload) -> list[str]:
    """The topics POP consumers read: the workload's plain ones (not BatchCQ or compaction)."""
    plain = [t for t in workload.topic_names if t not in workload.batch_topics | workload.compaction_topics]
    return plain or list(workload.topic_names)


def target_config(store: Path, append: bool, broker_conf: Path | None, sizes: dict[str, int | None]):
    """The config to write under (the size options, never the environment's) and whether
    there is a store to append to: the root, or a commit-log directory that
    storePathCommitLog puts elsewhere, not empty (each checked by :func:`check_target`)."""
    existing = check_target(store, append, "--store")
    cfg = StoreConfig.load(store, broker_conf, **sizes)  # the size options, never the env's
    for d in cfg.commitlog_dirs:  # storePathCommitLog may put the commit log elsewhere
        if d != cfg.root / "commitlog":
            existing = check_target(d, append, "storePathCommitLog") or existing
    return cfg, existing


def apply_broker_options(
    cfg,
    broker_version: str,
    *,
    append_prop_crc: bool,
    timer_ratio: float,
    new_store: bool,
    dledger: bool,
    lmq_ratio: float,
) -> None:
    """The options that are broker settings, set on ``cfg`` so the store is what a broker so
    configured writes: a 4.9 broker never chooses V2 records by topic length,
    enabledAppendPropCRC, DLedger (``n0`` unless dLegerSelfId says), enableLmq with
    enableMultiDispatch. --timer-ratio is refused where a broker would reject timer messages
    or a 5.x timer store cannot be written."""
    if broker_version == "4.9":
        cfg.auto_message_version_on_topic_len = False
    if append_prop_crc:
        cfg.enabled_append_prop_crc = True
    if timer_ratio:
        _check_timer_writable(cfg, broker_version, new_store)
    if dledger:
        cfg.enable_dleger_commit_log = True
        cfg.dleger_self_id = cfg.dleger_self_id or "n0"
    if lmq_ratio:  # the store assigns the LMQ offsets and dispatches the units (store/write/lmq.py)
        cfg.enable_lmq = cfg.enable_multi_dispatch = True


def _check_timer_writable(cfg, broker_version: str, new_store: bool) -> None:
    """Timer messages only where the broker takes them (timerWheelEnable,
    ``HookUtils#handleScheduleMessage``) and into a new 5.x store (its timer files are written
    whole)."""
    from rmqstore_cli.errors import UsageError

    if not cfg.timer_wheel_enable:
        raise UsageError(
            f"{setting('timer_ratio')}: the broker config says timerWheelEnable=false, so the broker rejects timer "
            "messages (WHEEL_TIMER_NOT_ENABLE, HookUtils#handleScheduleMessage)"
        )
    if broker_version != "5" or not new_store:
        raise UsageError(
            f"{setting('timer_ratio')} writes a 5.x timer store: it needs {setting('broker_version')} 5 and a "
            f"new store (not {setting('append')} or {setting('from_jsonl')})"
        )


def replay(writer, from_jsonl: str, progress: Callable[[int], None] | None = None) -> None:
    """--from-jsonl: the records of a dump-commitlog file ('-': stdin) appended as they were."""
    from rmqstore_cli.store.write.replay import read_dump_blocks

    # 64 KiB reads: a dump is read line by line, and 8 KiB reads cost twice the CPU (issue 35)
    src = sys.stdin if from_jsonl == "-" else open(from_jsonl, encoding="utf-8", buffering=1 << 16)
    with src:
        writer.append_blocks(ticking(read_dump_blocks(src, from_jsonl if from_jsonl != "-" else "<stdin>"), progress))


def ticking(blocks: Iterable, progress: Callable[[int], None] | None) -> Iterator:
    """``blocks`` as they are, ``progress`` told how many sends (``--messages`` counts them)
    each held once the writer has taken the next one, so appended it (``SendBlock.sends``: a
    block without kinds, a replayed dump's, counts its records)."""
    for b in blocks:
        yield b
        if progress is not None:
            progress(b.sends())


def declare_topics(writer, workload, cfg, compaction_run: bool) -> None:
    """The workload's BatchCQ topics (batchconsumequeue/) and compaction topics (compaction/,
    ``CommitLogDispatcherCompaction``) made known to the writer before the first send."""
    if workload.batch_topics:
        writer.declare_batch_topics(workload.batch_topics)
    if workload.compaction_topics:
        from rmqstore_cli.store.write.compaction_writer import CompactionDispatch

        writer.compaction = CompactionDispatch(
            cfg.root,
            workload.compaction_topics,
            cfg.compaction_mapped_file_size,
            cfg.compaction_cq_mapped_file_size,
            writer.roots,
            compaction_run,
        )


def body_sizes(body_size: str) -> tuple[int, int]:
    """--body-size N or MIN-MAX as (min, max)."""
    from rmqstore_cli.errors import UsageError

    lo, _, hi = body_size.partition("-")
    try:
        body_min, body_max = int(lo), int(hi or lo)
    except ValueError:
        raise UsageError(f"{setting('body_size')}: cannot read {body_size!r}", hint="use N or MIN-MAX") from None
    if not 0 <= body_min <= body_max:
        raise UsageError(f"{setting('body_size')}: {body_size!r} is not a range of sizes")
    return body_min, body_max


def summary(store: Path, writer, seconds: float, table: bool) -> dict:
    """What was written (refused_topics left out of a table when there are none)."""
    from rmqstore_cli.store.queues.consume_queue import unsafe_topic

    d = writer.dispatcher
    summary = {
        "store": str(store),
        "messages": writer.messages,
        "commitlog_files": len(writer.commitlog.files),
        "commitlog_max_offset": writer.commitlog.write_offset,
        "consume_queues": len(d.writers),
        "consume_queue_units": d.units,
        "index_files": len(d.index.files) if d.index else 0,
        "index_keys": d.index.keys_put if d.index else 0,
        "seconds": seconds,
        "refused_topics": [
            {"topic": t, "reason": unsafe_topic(t), "records": n} for t, n in sorted(writer.refused_records.items())
        ],
    }
    if table and not summary["refused_topics"]:
        del summary["refused_topics"]
    return summary


def check_target(path: Path, append: bool, what: str) -> bool:
    """Whether ``path`` is a non-empty directory to append to. A new or empty directory is
    fine; a non-empty one needs ``--append`` (exit 4 without); anything that is not a
    directory is a usage error (exit 2). A test-data writer must never add synthetic
    records to a real store by accident."""
    from rmqstore_cli.errors import RefusedError, UsageError
    from rmqstore_cli.store.files.safefs import kind_of, os_error

    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UsageError(
                f"{what} is a dangling symbolic link, not a directory", path=path, hint="give a new or empty directory"
            ) from None
        return False
    except OSError as e:
        raise os_error(e, path, "inspect the target directory") from None
    if not os.path.isdir(path):
        raise UsageError(
            f"{what} is {'a regular file' if os.path.isfile(path) else kind_of(st.st_mode)}, not a directory",
            path=path,
            hint="give a new or empty directory",
        )
    try:
        with os.scandir(path) as it:
            empty = next(it, None) is None
    except OSError as e:
        raise os_error(e, path, "list the target directory") from None
    if not empty and not append:
        raise RefusedError(
            f"{what} is not empty; generate writes only into a new or empty directory",
            path=path,
            hint=f"pass {setting('append')} to add messages to the store there",
        )
    return not empty


def start_ms(start_ms: int | None, writer) -> int:
    """Default start: after the last message of an existing store, else 2026-01-01Z."""
    if start_ms is not None:
        return start_ms
    if writer.last_store_timestamp:
        return writer.last_store_timestamp + 1000
    return 1_767_225_600_000


def epoch_file(cfg: StoreConfig, spec: str | None) -> None:
    """``--epoch-file``: the controller-mode epoch file over the store just written (store/write/epoch_generate.py)."""
    if spec is not None:
        from rmqstore_cli.store.write.epoch_generate import write_epoch_file

        write_epoch_file(cfg, spec)
