"""``rmqstore consumer-progress``: who is behind (mqadmin consumerProgress, offline)."""

from __future__ import annotations

from datetime import tzinfo
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rmqstore_cli.commands.common import Fmt, FormatOpt, TzOpt, command, complete_topic
from rmqstore_cli.commands.lines import warn
from rmqstore_cli.commands.source_options import FROM_OPTIONS, StoreSource, nothing_matched, store_options

EPILOG = """Examples:

  rmqstore consumer-progress --store ~/store

  rmqstore consumer-progress --group order-consumers --format jsonl | jq 'select(.lag > 1000)'

  rmqstore consumer-progress --topic OrderTopic --format json

  rmqstore consumer-progress --by group --format jsonl | jq -c '{group, lag}'
"""


#: The hint of an empty answer with no filter given (a filter given: "run without" it):
#: the broker writes the file every ``flushConsumerOffsetInterval`` (5 s) once a consumer
#: has committed (``BrokerController`` scheduling ``ConsumerOffsetManager#persist``).
NO_OFFSET_HINT = "no consumer has committed an offset that the broker persisted (keys skipped are warned above)"


class By(str, Enum):
    queue = "queue"
    group = "group"


def register(app: typer.Typer) -> None:
    app.command("consumer-progress", epilog=EPILOG)(consumer_progress)


@command
@store_options(cq_file_size=True)
def consumer_progress(
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this consumer group.")] = None,
    by: Annotated[
        By, typer.Option("--by", help="One row per queue (the table adds the lag per group), or per group.")
    ] = By.queue,
    topic: Annotated[
        str | None, typer.Option("--topic", "-t", help="Only this topic.", autocompletion=complete_topic)
    ] = None,
    source: StoreSource = FROM_OPTIONS,
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
    the next pull: beyond-max) is flagged; no-queue: the store has no such consume queue
    (any more), and the row has no lag (null).
    A BatchCQ topic's queue (batchconsumequeue/) counts in messages: min, max and lag are
    queue offsets (msgBaseOffset, batchSize), the next store time that of the inner batch
    holding the consumer offset.
    After the rows, the lag per group: its topics, queues and total lag (the sum of its
    queues' lags as ConsumeStats#computeTotalDiff sums them, a beyond-max queue counting 0
    as the broker corrects it) and how many of its queues the store no longer has
    (no_queue, not in the total); --by group lists only those.
    Exit 1 when no offset matches.

    JSON fields: group, topic, queue_id, consumer_offset, min_offset, max_offset, lag
    (null for no-queue), next_store_timestamp (store time of the next message to consume:
    how old the backlog is; null when none is waiting), status (ok, behind-min, beyond-max,
    no-queue), file; delay_level on delayOffset.json's rows. --by group: group, topics,
    queues, lag, no_queue.
    """
    from rmqstore_cli import reports
    from rmqstore_cli.store.answers import progress
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    ms = source.engine(tz)
    config_dir = ms.config.root / "config"
    rows = _offset_rows(ms, config_dir, group, topic)
    if fmt is Fmt.table:
        _add_store_times(rows, zone)
    groups = progress.group_totals(rows) if by is By.group else None
    reports.progress(fmt.value, rows, groups, f"consumer progress ({config_dir})")


def _offset_rows(ms: Any, config_dir: Path, group: str | None, topic: str | None) -> list[dict[str, Any]]:
    """The rows of every offset file the broker loads, filtered, each file's warnings and each
    skipped key said on stderr first (the broker skips a key that is not TOPIC@GROUP too);
    NotFound when none is left, so the exit status says the filters matched nothing."""
    from rmqstore_cli.store.answers import progress

    rows = [r.as_dict() for r in progress.offset_rows(ms, config_dir, group, topic, warn)]
    if not rows:
        raise nothing_matched("consumer offset", config_dir, NO_OFFSET_HINT, group=group, topic=topic)
    return rows


def _add_store_times(rows: list[dict[str, Any]], zone: tzinfo | None) -> None:
    """The table's next_store_time column: the next message's store time in --tz, empty where
    no message is waiting (JSON keeps the raw next_store_timestamp instead)."""
    from rmqstore_cli.times import format_ms

    for d in rows:
        ts = d["next_store_timestamp"]
        d["next_store_time"] = format_ms(ts, zone) if ts is not None else ""
