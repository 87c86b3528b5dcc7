"""``rmqstore consumer-progress``: who is behind (mqadmin consumerProgress, offline)."""

from __future__ import annotations

from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_topic,
)

EPILOG = """Examples:

  rmqstore consumer-progress --store ~/store

  rmqstore consumer-progress --group order-consumers --format jsonl | jq 'select(.lag > 1000)'

  rmqstore consumer-progress --topic OrderTopic --format json
"""

COLUMNS = [
    ("group", "group"),
    ("topic", "topic"),
    ("queue_id", "queue"),
    ("consumer_offset", "consumer offset"),
    ("min_offset", "min offset"),
    ("max_offset", "max offset"),
    ("lag", "lag"),
    ("next_store_time", "next message stored"),
    ("status", "status"),
]


def register(app: typer.Typer) -> None:
    app.command("consumer-progress", epilog=EPILOG)(consumer_progress)


@command
def consumer_progress(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this consumer group.")] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", "-t", help="Only this topic.", autocompletion=complete_topic)
    ] = None,
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Per consumer group, topic and queue: the committed offset against the queue's min and max.

    The offsets are read from config/consumerOffset.json exactly as the broker loads them
    (ConfigManager#load: fastjson's text, integer map keys unquoted; a missing, empty or
    undecodable file falls back to consumerOffset.json.bak, said on stderr), and so are
    lmqConsumerOffset.json (LmqConsumerOffsetManager: its offsetTable, and lmqOffsetTable's
    topic@group offsets of LMQ groups, in queue 0) and delayOffset.json (the delay service's progress
    in SCHEDULE_TOPIC_XXXX, queue = delay level - 1, group ScheduleMessageService). A 5.x
    broker's offsets kept in RocksDB are read too where present: config/consumerOffsets/
    (RocksDBConsumerOffsetManager) and config/rdb/ (ConsumerOffsetManagerV2), file
    consumerOffsets/ or rdb/ (the rocksdb extra). lag is the
    broker's diff, max offset - consumer offset. An offset below the queue's min offset
    (its messages expired: status behind-min) or above its max (the broker corrects it at
    the next pull: beyond-max) is flagged; no-queue: the store has no such consume queue.
    A BatchCQ topic's queue (batchconsumequeue/) counts in messages: min, max and lag are
    queue offsets (msgBaseOffset, batchSize), the next store time that of the inner batch
    holding the consumer offset.
    Exit 1 when no offset matches.

    JSON fields: group, topic, queue_id, consumer_offset, min_offset, max_offset, lag,
    next_store_timestamp (store time of the next message to consume: how old the backlog
    is; null when none is waiting), status (ok, behind-min, beyond-max, no-queue), file;
    delay_level on delayOffset.json's rows.
    """
    import sys

    from rmqstore_cli.commands.common import open_store

    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import Output, safe_text
    from rmqstore_cli.store import progress
    from rmqstore_cli.times import format_ms, parse_tz

    zone = parse_tz(tz)
    ms = open_store(
        store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size, cq_file_size=cq_file_size
    )
    config_dir = ms.config.root / "config"
    sources = progress.load_sources(config_dir)
    for loaded in sources:
        for w in loaded.warnings:
            print(f"rmqstore: warning: {safe_text(w)}", file=sys.stderr)
    progress.require_offsets(config_dir, sources)
    out = Output(fmt.value, COLUMNS, title=f"consumer progress ({config_dir})")
    try:
        for d, bad_key in progress.progress_rows(ms, sources, group, topic):
            if d is None:
                print(
                    f"rmqstore: warning: offset key {safe_text(bad_key)!r} is not TOPIC@GROUP; skipped",
                    file=sys.stderr,
                )
                continue
            if fmt is Fmt.table:
                ts = d["next_store_timestamp"]
                d["next_store_time"] = format_ms(ts, zone) if ts is not None else ""
            out.emit(d)
    finally:
        out.close()
    if not out.count:
        what = " and ".join(
            x
            for x in (f"group '{safe_text(group)}'" if group else "", f"topic '{safe_text(topic)}'" if topic else "")
            if x
        )
        raise NotFound(
            f"no consumer offset of {what}" if what else "no consumer offset",
            path=config_dir,
            hint="run without --group/--topic to list them all",
        )
