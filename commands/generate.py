"""``rmqstore generate``: write a realistic store through the engine's append + dispatch path."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    TzOpt,
    command,
    work_done,
)

# one example a line (tests/docs/test_docs.py parses each line as a command)
EPILOG = "\n\n".join(
    [
        "Examples:",
        '  rmqstore generate --store "$(mktemp -d)" --messages 10000 --seed 7',
        "  rmqstore generate --store /tmp/small --messages 2000 --commitlog-file-size 65536 --cq-file-size 2000"
        " --index-slots 64 --index-max 400",
        "  rmqstore generate --store /tmp/small --messages 500 --append",
        "  rmqstore dump-commitlog --store A --format jsonl --body base64"
        " | rmqstore generate --store B --from-jsonl -\n",
    ]
)

#: generate's own --broker-conf: never from RMQSTORE_BROKER_CONF, since its
#: storePathCommitLog would choose where synthetic records are written.
GenBrokerConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--broker-conf",
        help="A broker.conf to take sizes and paths from (never from RMQSTORE_BROKER_CONF: a "
        "test-data writer takes no target from the environment).",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("generate", epilog=EPILOG)(generate)


@command(mutating=True)
def generate(
    store: Annotated[
        Path,
        typer.Option(
            "--store",
            "-s",
            help="New or empty directory to write the store into (created if missing). Required: "
            "never taken from RMQSTORE_STORE or ~/store. A non-empty one only with --append.",
        ),
    ],
    append: Annotated[
        bool,
        typer.Option(
            "--append",
            help="Add to the store already in --store (its lock is checked and held); without it a "
            "non-empty directory is refused (exit 4).",
        ),
    ] = False,
    messages: Annotated[int, typer.Option("--messages", "-n", min=0, help="How many sends.")] = 1000,
    seed: Annotated[int, typer.Option(help="Random seed: same options and seed, same bytes.")] = 1,
    topics: Annotated[int, typer.Option(min=1, help="Number of topics.")] = 4,
    queues: Annotated[int, typer.Option(min=1, help="Queues per topic.")] = 4,
    body_size: Annotated[str, typer.Option(help="Body size in bytes: N, or MIN-MAX (uniform).")] = "64-512",
    keys_per_message: Annotated[int, typer.Option(min=1, help="KEYS entries per message.")] = 2,
    shared_key_ratio: Annotated[
        float, typer.Option(min=0, max=1, help="Share of extra keys shared by many messages.")
    ] = 0.2,
    delay_ratio: Annotated[
        float, typer.Option(min=0, max=1, help="Share of delayed sends (SCHEDULE_TOPIC_XXXX).")
    ] = 0.05,
    transaction_ratio: Annotated[float, typer.Option(min=0, max=1, help="Share of transactional sends.")] = 0.05,
    transaction_outcomes: Annotated[
        str | None,
        typer.Option(
            metavar="C:R:P",
            help="Weights of half transactions committed, rolled back, left pending (8:1:1); default: all committed.",
        ),
    ] = None,
    retry_ratio: Annotated[
        float,
        typer.Option(
            min=0, max=1, help="Share of consumer retries (%RETRY% topic; a 141-char V2 topic with --broker-version 5)."
        ),
    ] = 0.0,
    ipv6_ratio: Annotated[float, typer.Option(min=0, max=1, help="Share of IPv6 born and store hosts.")] = 0.05,
    compress_ratio: Annotated[float, typer.Option(min=0, max=1, help="Share of zlib-compressed bodies.")] = 0.0,
    timer_ratio: Annotated[
        float,
        typer.Option(
            min=0,
            max=1,
            help="Share of 5.x timer sends (TIMER_DELIVER_MS, stored "
            "under rmq_sys_wheel_timer; writes timerwheel, timerlog/, "
            "config/timercheck and timermetrics; needs --broker-version 5).",
        ),
    ] = 0.0,
    bcq_topics: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --broker-version 5: make this many of the topics BatchCQ topics (queue.type=BatchCQ): "
            "each send to one is an inner batch of 1-8 messages, in batchconsumequeue/.",
        ),
    ] = 0,
    compaction_topics: Annotated[
        int,
        typer.Option(
            min=0,
            help="With --broker-version 5, on a new store: make this many topics after the BatchCQ ones "
            "compaction topics (cleanup.policy=COMPACTION): their sends carry one of 16 keys and are "
            "dispatched to compaction/ as a broker that has not compacted yet does.",
        ),
    ] = 0,
    compaction_run: Annotated[
        bool,
        typer.Option(
            "--compaction-run",
            help="With --compaction-topics: then compact each queue once, as the broker's "
            "schedule does (CompactionLog#doCompaction): all log files but the last "
            "rewritten, keeping each key's latest message; position-checkpoint and .bak "
            "name the last offsets compacted.",
        ),
    ] = False,
    lmq_ratio: Annotated[
        float,
        typer.Option(
            min=0,
            max=1,
            help="Share of sends listing LMQ queues "
            "(INNER_MULTI_DISPATCH); turns on enableLmq and enableMultiDispatch.",
        ),
    ] = 0.0,
    lmq_queues: Annotated[int, typer.Option(min=1, help="How many %LMQ% queue names --lmq-ratio uses.")] = 4,
    start: Annotated[
        str | None,
        typer.Option(
            help="Store time of the first message (ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more, now, "
            "-2h); default "
            "2026-01-01T00:00:00Z, or 1 s after the last message of an existing store."
        ),
    ] = None,
    span: Annotated[str, typer.Option(help="Store times spread over this long (e.g. 90m, 6h, 2d).")] = "1h",
    broker_version: Annotated[
        str, typer.Option(help="Write as a 4.9 or a 5 broker (property order, WAIT, V2 records).")
    ] = "4.9",
    append_prop_crc: Annotated[bool, typer.Option(help="5.x enabledAppendPropCRC: whole-record CRC property.")] = False,
    dledger: Annotated[
        bool,
        typer.Option(
            "--dledger",
            help="Write a DLedger commit log (enableDLegerCommitLog): entries in dledger-<dLegerSelfId, "
            "default n0>/data, index/, checkpoint and currterm; appended to a plain store, the old "
            "commitlog/ stays below it.",
        ),
    ] = False,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    broker_conf: GenBrokerConfOpt = None,
    from_jsonl: Annotated[
        str | None,
        typer.Option(
            help="Append the messages of a dump-commitlog --format jsonl --body base64 file ('-' = stdin), "
            "keeping offsets, times, hosts, flags and properties. A record whose topic cannot be a "
            "directory name is written to the commit log and the index but gets no consume queue: "
            "one warning per such topic."
        ),
    ] = None,
    tz: TzOpt = None,
    fmt: FormatOpt = Fmt.table,
) -> None:
    """Write a realistic store: commitlog, consume queues, index, checkpoint, config/topics.json.

    Messages go through the same append and dispatch path as every other command, so the
    store is what a broker would have written. --store is required and must be a new or
    empty directory; a non-empty one is refused (exit 4) unless --append is given, a file
    there is a usage error (exit 2). Appending continues the store's queue offsets and
    says "appended N to a store of M records" on stderr. The broker's lock is checked
    first (a live broker: exit 4) and held while writing; nothing is written through a
    symbolic link or outside the store.

    A replayed record whose topic is not one safe directory name (empty, '.', '..', '/',
    NUL, invalid UTF-8, over 255 bytes) is kept in the commit log and the index but gets
    no consume queue and no entry in config/topics.json, as rebuild-index does: stderr has
    one warning per such topic with its record count, the summary lists them under
    refused_topics, and the exit code stays 0 (the store holds every record).
    A store written whose summary then cannot be (stdout full, closed, a pipe cut) is exit
    6; with stdout closed from the start nothing is written (exit 5).
    """
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.render import print_summary
    from rmqstore_cli.store.lock import refuse_if_live
    from rmqstore_cli.store.producer import Workload, WorkloadOptions
    from rmqstore_cli.store.writer import StoreWriter, count_records
    from rmqstore_cli.times import now_ms, parse_duration, parse_time, parse_tz

    if broker_version not in ("4.9", "5"):
        raise UsageError(f"--broker-version must be 4.9 or 5, not {broker_version!r}")
    _check_5x_topics(
        broker_version, topics, bcq_topics, compaction_topics or compaction_run, append or from_jsonl is not None
    )
    zone = parse_tz(tz)
    cfg, existing = _load_config(store, append, broker_conf, commitlog_file_size, cq_file_size, index_slots, index_max)
    _apply_broker_options(
        cfg,
        broker_version,
        append_prop_crc=append_prop_crc,
        timer_ratio=timer_ratio,
        new_store=not (append or from_jsonl is not None),
        dledger=dledger,
        lmq_ratio=lmq_ratio,
    )
    if existing:
        refuse_if_live(store)
        cfg.infer_sizes()
    body_min, body_max = _body_sizes(body_size)
    start_ms = parse_time(start, "--start", tz=zone) if start is not None else None
    span_ms = parse_duration(span, "--span")
    t0 = now_ms()
    writer = StoreWriter(cfg, zone)  # takes the broker's lock
    try:
        if timer_ratio:
            from rmqstore_cli.store.timer.writer import TimerWriter

            writer.timer = TimerWriter(cfg, writer.roots)
        before = count_records(cfg) if existing else 0
        if from_jsonl is not None:
            _replay(writer, from_jsonl)
        else:
            opts = WorkloadOptions(
                messages=messages,
                seed=seed,
                topics=topics,
                queues=queues,
                body_min=body_min,
                body_max=body_max,
                start_ms=_start_ms(start_ms, writer),
                span_ms=span_ms,
                delay_ratio=delay_ratio,
                transaction_ratio=transaction_ratio,
                transaction_outcomes=transaction_outcomes,
                retry_ratio=retry_ratio,
                ipv6_ratio=ipv6_ratio,
                shared_key_ratio=shared_key_ratio,
                keys_per_message=keys_per_message,
                compress_ratio=compress_ratio,
                broker_version=broker_version,
                cluster=cfg.broker_cluster_name,
                tz=zone,
                timer_ratio=timer_ratio,
                timer_precision_ms=cfg.timer_precision_ms,
                bcq_topics=bcq_topics,
                compaction_topics=compaction_topics,
                lmq_ratio=lmq_ratio,
                lmq_queues=lmq_queues,
            )
            workload = Workload(opts)
            _declare_topics(writer, workload, cfg, compaction_run)
            writer.append_blocks(workload.blocks())
    finally:
        writer.close()
    work_done(f"the store it wrote in {store} is complete (verify and stats read it)")
    print_summary(fmt.value, _summary(store, writer, round((now_ms() - t0) / 1000, 3), fmt is Fmt.table), "generated")
    if append:
        print(f"rmqstore: appended {writer.messages} to a store of {before} records", file=sys.stderr)
    _warn_refused(writer.refused_records)


def _load_config(
    store: Path,
    append: bool,
    broker_conf: Path | None,
    commitlog_file_size: int | None,
    cq_file_size: int | None,
    index_slots: int | None,
    index_max: int | None,
):
    """The config to write under (the size options, never the environment's) and whether
    there is a store to append to: the root, or a commit-log directory that
    storePathCommitLog puts elsewhere, not empty (each checked by :func:`_check_target`)."""
    from rmqstore_cli.store.config import StoreConfig

    existing = _check_target(store, append, "--store")
    cfg = StoreConfig.load(
        store,
        broker_conf,
        mapped_file_size_commit_log=commitlog_file_size,  # never the env's
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )
    for d in cfg.commitlog_dirs:  # storePathCommitLog may put the commit log elsewhere
        if d != cfg.root / "commitlog":
            existing = _check_target(d, append, "storePathCommitLog") or existing
    return cfg, existing


def _apply_broker_options(
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
    from rmqstore_cli.errors import UsageError

    if broker_version == "4.9":
        cfg.auto_message_version_on_topic_len = False
    if append_prop_crc:
        cfg.enabled_append_prop_crc = True
    if timer_ratio and not cfg.timer_wheel_enable:
        raise UsageError(
            "--timer-ratio: the broker config says timerWheelEnable=false, so the broker rejects timer "
            "messages (WHEEL_TIMER_NOT_ENABLE, HookUtils#handleScheduleMessage)"
        )
    if timer_ratio and (broker_version != "5" or not new_store):
        raise UsageError(
            "--timer-ratio writes a 5.x timer store: it needs --broker-version 5 and a new store "
            "(not --append or --from-jsonl)"
        )
    if dledger:
        cfg.enable_dleger_commit_log = True
        cfg.dleger_self_id = cfg.dleger_self_id or "n0"
    if lmq_ratio:  # the store assigns the LMQ offsets and dispatches the units (store/lmq.py)
        cfg.enable_lmq = cfg.enable_multi_dispatch = True


def _replay(writer, from_jsonl: str) -> None:
    """--from-jsonl: the records of a dump-commitlog file ('-': stdin) appended as they were."""
    from rmqstore_cli.store.replay import read_dump_blocks

    src = sys.stdin if from_jsonl == "-" else open(from_jsonl, encoding="utf-8")
    with src:
        writer.append_blocks(read_dump_blocks(src, from_jsonl if from_jsonl != "-" else "<stdin>"))


def _check_5x_topics(
    broker_version: str, topics: int, bcq_topics: int, compaction_topics: int | bool, appending: bool
) -> None:
    """--bcq-topics and --compaction-topics: 5.x topic kinds, at most --topics of them; a
    compaction topic is declared by a new store only (an append continues the compaction
    logs the store has: ``store.compaction_writer.compaction_dispatch``)."""
    from rmqstore_cli.errors import UsageError

    if bcq_topics and (broker_version != "5" or bcq_topics > topics):
        raise UsageError("--bcq-topics needs --broker-version 5 and at most --topics topics")
    if compaction_topics and (broker_version != "5" or bcq_topics + compaction_topics > topics or appending):
        raise UsageError(
            "--compaction-topics needs --broker-version 5, a new store (not --append or --from-jsonl) "
            "and at most --topics topics with --bcq-topics"
        )
    if compaction_topics is True:
        raise UsageError("--compaction-run needs --compaction-topics")


def _declare_topics(writer, workload, cfg, compaction_run: bool) -> None:
    """The workload's BatchCQ topics (batchconsumequeue/) and compaction topics (compaction/,
    ``CommitLogDispatcherCompaction``) made known to the writer before the first send."""
    if workload.batch_topics:
        writer.declare_batch_topics(workload.batch_topics)
    if workload.compaction_topics:
        from rmqstore_cli.store.compaction_writer import CompactionDispatch

        writer.compaction = CompactionDispatch(
            cfg.root,
            workload.compaction_topics,
            cfg.compaction_mapped_file_size,
            cfg.compaction_cq_mapped_file_size,
            writer.roots,
            compaction_run,
        )


def _body_sizes(body_size: str) -> tuple[int, int]:
    """--body-size N or MIN-MAX as (min, max)."""
    from rmqstore_cli.errors import UsageError

    lo, _, hi = body_size.partition("-")
    try:
        body_min, body_max = int(lo), int(hi or lo)
    except ValueError:
        raise UsageError(f"--body-size: cannot read {body_size!r}", hint="use N or MIN-MAX") from None
    if not 0 <= body_min <= body_max:
        raise UsageError(f"--body-size: {body_size!r} is not a range of sizes")
    return body_min, body_max


def _summary(store: Path, writer, seconds: float, table: bool) -> dict:
    """What was written (refused_topics left out of a table when there are none)."""
    from rmqstore_cli.store.consume_queue import unsafe_topic

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


def _check_target(path: Path, append: bool, what: str) -> bool:
    """Whether ``path`` is a non-empty directory to append to. A new or empty directory is
    fine; a non-empty one needs ``--append`` (exit 4 without); anything that is not a
    directory is a usage error (exit 2). A test-data writer must never add synthetic
    records to a real store by accident."""
    from rmqstore_cli.errors import RefusedError, UsageError
    from rmqstore_cli.store.safefs import kind_of, os_error

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
            hint="pass --append to add messages to the store there",
        )
    return not empty


def _warn_refused(refused: dict[str, int], limit: int = 10) -> None:
    """One stderr line per topic whose records got no consume queue (the first ``limit``)."""
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store.consume_queue import unsafe_topic

    for t, n in sorted(refused.items())[:limit]:
        print(
            f"rmqstore: warning: {n} record{'s' if n != 1 else ''} of topic {safe_text(repr(t))} got no consume "
            f"queue, the name cannot be a directory ({unsafe_topic(t)}); they are in the commit log and the index",
            file=sys.stderr,
        )
    if len(refused) > limit:
        print(
            f"rmqstore: warning: {len(refused) - limit} more topics got no consume queue (see refused_topics)",
            file=sys.stderr,
        )


def _start_ms(start_ms: int | None, writer) -> int:
    """Default start: after the last message of an existing store, else 2026-01-01Z."""
    if start_ms is not None:
        return start_ms
    if writer.last_store_timestamp:
        return writer.last_store_timestamp + 1000
    return 1_767_225_600_000
