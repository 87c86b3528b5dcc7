"""``rmqstore generate``: write a realistic store through the engine's append + dispatch path."""

from __future__ import annotations

import typer
from rmqstore_cli.commands import generate_options as o
from rmqstore_cli.commands.common import (
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    QuietOpt,
    TzOpt,
    command,
    work_done,
)
from rmqstore_cli.commands.generate_checks import check_5x_topics, check_outcomes, check_version
from rmqstore_cli.commands.grammar import renamed
from rmqstore_cli.commands.lines import say, warn

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


def register(app: typer.Typer) -> None:
    app.command("generate", epilog=EPILOG)(generate)


@command(mutating=True)
def generate(
    store: o.StoreOpt,
    append: o.AppendOpt = False,
    messages: o.MessagesOpt = None,
    old_messages: o.OldMessagesOpt = None,
    seed: o.SeedOpt = 1,
    topics: o.TopicsOpt = 4,
    queues: o.QueuesOpt = 4,
    body_size: o.BodySizeOpt = "64-512",
    keys_per_message: o.KeysPerMessageOpt = 2,
    shared_key_ratio: o.SharedKeyRatioOpt = 0.2,
    delay_ratio: o.DelayRatioOpt = 0.05,
    transaction_ratio: o.TransactionRatioOpt = 0.05,
    transaction_outcomes: o.TransactionOutcomesOpt = None,
    pop_messages: o.PopMessagesOpt = 0,
    trace_messages: o.TraceMessagesOpt = 0,
    retry_ratio: o.RetryRatioOpt = 0.0,
    ipv6_ratio: o.Ipv6RatioOpt = 0.05,
    compress_ratio: o.CompressRatioOpt = 0.0,
    timer_ratio: o.TimerRatioOpt = 0.0,
    overdue_timer_ratio: o.OverdueTimersOpt = 0.0,
    delay_offset_lag: o.DelayOffsetLagOpt = None,
    bcq_topics: o.BcqTopicsOpt = 0,
    compaction_topics: o.CompactionTopicsOpt = 0,
    compaction_run: o.CompactionRunOpt = False,
    lmq_ratio: o.LmqRatioOpt = 0.0,
    lmq_queues: o.LmqQueuesOpt = 4,
    start: o.StartOpt = None,
    span: o.SpanOpt = "1h",
    broker_version: o.BrokerVersionOpt = "4.9",
    append_prop_crc: o.AppendPropCrcOpt = False,
    dledger: o.DledgerOpt = False,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    broker_conf: o.GenBrokerConfOpt = None,
    from_jsonl: o.FromJsonlOpt = None,
    epoch_file: o.EpochFileOpt = None,
    tz: TzOpt = None,
    fmt: FormatOpt = Fmt.table,
    quiet: QuietOpt = False,
) -> None:
    """Write a realistic store: commitlog, consume queues, index, checkpoint, config/topics.json.

    Messages go through the append and dispatch path every command uses: the store is what
    a broker writes. --store is required and must be a new or empty directory; a non-empty
    one is refused (exit 4) unless --append is given, a file there is a usage error (exit
    2). Appending continues the store's queue offsets and says "appended N to a store of M
    records" on stderr (--quiet: nothing on stderr but errors). --messages was -n, still
    accepted with a note. The broker's lock is checked first (a live broker: exit 4) and
    held while writing; nothing is written through a symbolic link or outside the store.

    A replayed record whose topic is not one safe directory name (empty, '.', '..', '/',
    NUL, invalid UTF-8, over 255 bytes) is kept in the commit log and the index but gets
    no consume queue and no entry in config/topics.json, as rebuild-index does: stderr has
    one warning per such topic with its record count, the summary lists them under
    refused_topics, and the exit code stays 0 (the store holds every record).
    A store written whose summary then cannot be (stdout full, closed, a pipe cut) is exit
    6; with stdout closed from the start nothing is written (exit 5).
    """
    from rmqstore_cli.job_reports import refused_topic_lines
    from rmqstore_cli.render import ProgressBar, print_summary
    from rmqstore_cli.store.write import generate_run
    from rmqstore_cli.times import now_ms, parse_duration, parse_time, parse_tz

    messages = renamed(messages, old_messages, "--messages", "-n")
    workload = dict(
        messages=1000 if messages is None else messages,
        seed=seed,
        topics=topics,
        queues=queues,
        delay_ratio=delay_ratio,
        transaction_ratio=transaction_ratio,
        transaction_outcomes=transaction_outcomes,
        pop_messages=pop_messages,
        trace_messages=trace_messages,
        retry_ratio=retry_ratio,
        ipv6_ratio=ipv6_ratio,
        shared_key_ratio=shared_key_ratio,
        keys_per_message=keys_per_message,
        compress_ratio=compress_ratio,
        bcq_topics=bcq_topics,
        compaction_topics=compaction_topics,
        lmq_queues=lmq_queues,
        overdue_timer_ratio=overdue_timer_ratio,
    )
    sizes = o.size_settings(commitlog_file_size, cq_file_size, index_slots, index_max)
    job = generate_run.GenerateJob(store, append, broker_conf, sizes, broker_version, append_prop_crc, timer_ratio,
        dledger, lmq_ratio, compaction_run, from_jsonl, workload, delay_offset_lag)  # fmt: skip
    check_version(broker_version)
    check_outcomes(transaction_outcomes)
    check_5x_topics(broker_version, topics, bcq_topics, compaction_topics or compaction_run, not job.new_store)
    zone = parse_tz(tz)
    cfg, existing = generate_run.prepare(job)
    workload["body_min"], workload["body_max"] = generate_run.body_sizes(body_size)
    workload["start_ms"] = parse_time(start, "--start", tz=zone) if start is not None else None
    workload["span_ms"] = parse_duration(span, "--span")
    t0 = now_ms()
    with ProgressBar("generating", total=workload["messages"], enabled=not quiet, unit="messages") as bar:
        writer, before = generate_run.write(job, cfg, zone, existing, bar.advance)
    generate_run.epoch_file(cfg, epoch_file)
    work_done(f"the store it wrote in {store} is complete (verify and stats read it)")
    seconds = round((now_ms() - t0) / 1000, 3)
    print_summary(fmt.value, generate_run.summary(store, writer, seconds, fmt is Fmt.table), "generated")
    if append and not quiet:
        say(None, f"appended {writer.messages} to a store of {before} records")
    for line in [] if quiet else refused_topic_lines(writer.refused_records):
        warn(line)
