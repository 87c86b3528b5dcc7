"""``rmqstore search-offset``: where in each queue is time T (the broker's searchOffset)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    BrokerVersion,
    Fmt,
    FormatOpt,
    TzOpt,
    command,
    complete_queue_id,
    complete_topic,
)
from rmqstore_cli.commands.grammar import NowOpt, clock, old_spelling, renamed
from rmqstore_cli.commands.source_options import FROM_OPTIONS, StoreSource, store_options

EPILOG = """Examples:

  rmqstore search-offset --store ~/store --topic OrderTopic --time 2026-11-22T10:00

  rmqstore search-offset --topic OrderTopic --queue-id 3 --time -2h --format jsonl | jq .offset

  rmqstore search-offset -t OrderTopic --time -2h --now 2026-11-22T10:00   # 08:00 that day

  rmqstore search-offset --topic OrderTopic --time 1795317650625 --broker --broker-version 4.9

  rmqstore search-offset --topic OrderTopic --time 2026-11-22T10:00 --broker --broker-version 5 --boundary upper

Without --broker the answer is the first unit of [min, max) stored at or after TIME (max
if none), found by binary search over the units' messages. --broker gives what the
broker's ConsumeQueue#getOffsetInQueueByTime returns: 4.9.x picks the consume-queue file
by its mtime (MappedFileQueue#getMappedFileByTime), returns whichever unit with exactly
TIME the bisection hits, else the nearer neighbour (so possibly a unit BEFORE TIME, and
the last unit rather than max when TIME is after every message), and 0 when a message
cannot be read; 5.x picks the file by its units' store times and answers the first unit
at or after TIME (lower) or the last at or before it (upper), clamped to [min, max].
"""


class Boundary(str, Enum):
    lower = "lower"
    upper = "upper"


def register(app: typer.Typer) -> None:
    app.command("search-offset", epilog=EPILOG)(search_offset)


@command
@store_options(cq_file_size=True)
def search_offset(
    topic: Annotated[str, typer.Option("--topic", "-t", help="The topic.", autocompletion=complete_topic)],
    when: Annotated[
        str,
        typer.Option(
            "--time",
            help="The time: ISO 8601 (local zone if none, or --tz), epoch seconds (10 digits) or "
            "milliseconds (13 digits), now, or -90m/-2h/-7d.",
        ),
    ],
    queue_id: Annotated[
        int | None,
        typer.Option("--queue-id", min=0, help="Only this queue (default: all).", autocompletion=complete_queue_id),
    ] = None,
    old_q: Annotated[int | None, old_spelling("-q", min=0)] = None,
    now: NowOpt = None,
    source: StoreSource = FROM_OPTIONS,
    broker: Annotated[
        bool,
        typer.Option(
            "--broker",
            help="Answer exactly what the broker's ConsumeQueue#getOffsetInQueueByTime returns for "
            "the store's version (see below), instead of the first unit at or after TIME.",
        ),
    ] = False,
    broker_version: Annotated[
        BrokerVersion | None,
        typer.Option(
            "--broker-version",
            help="With --broker: the broker version whose answer to give, when the store "
            "cannot tell (a 4.9 and a 5.x store are the same bytes unless timer files "
            "are there).",
        ),
    ] = None,
    boundary: Annotated[
        Boundary,
        typer.Option(help="With --broker --broker-version 5: the BoundaryType (LOWER is the broker's default)."),
    ] = Boundary.lower,
    scan: Annotated[
        bool,
        typer.Option(
            "--scan",
            help="Read every unit instead of bisecting: the first unit at or after TIME even where the "
            "store's clock stepped back (slow on big queues).",
        ),
    ] = False,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Per queue of TOPIC: the consume-queue offset of the first message stored at or after TIME.

    The number to reset consumers to after an incident (mqadmin resetOffsetByTime asks the
    broker the same). Units whose message has expired lie below the queue's min offset and
    are never the answer; a unit whose message cannot be read takes the time of the next
    readable one (so a consumer rewound there does not skip it). When no message was
    stored at or after TIME the offset is the max offset and store_timestamp is null.
    A 5.x RocksDB consume queue (storeType=defaultRocksDB; the rocksdb extra) is read the
    same way; with --broker its answer is RocksDBConsumeQueueTable#binarySearchInCQByTime's,
    from the units' store times, unclamped (it can be -1). A BatchCQ topic's queues
    (batchconsumequeue/) answer queue offsets of messages (a unit's msgBaseOffset), by the
    units' store times; with --broker as BatchConsumeQueue#getOffsetInQueueByTime (the file
    by its first unit's time, binarySearchRight; after the file's last unit, that unit's
    msgBaseOffset), clamped to [min, max].

    JSON fields: topic, queue_id, time, method (first, scan, broker-4.9, broker-5-lower,
    broker-5-upper), offset, store_timestamp (of the unit at offset; null at max),
    min_offset, max_offset, note (why, when something is worth saying).
    """
    from rmqstore_cli.commands.common import no_such_topic

    from rmqstore_cli.render_search import emit_answers
    from rmqstore_cli.store.answers import offset_query
    from rmqstore_cli.times import format_ms, parse_time, parse_tz

    zone = parse_tz(tz)
    queue_id = renamed(queue_id, old_q, "--queue-id", "-q")
    t = parse_time(when, "--time", now=clock(now, zone), tz=zone)
    given = broker_version.value if broker_version else None
    offset_query.check_options(scan, broker, given, boundary.value)
    ms = source.engine(tz)
    version = offset_query.store_version(ms, given, boundary.value) if broker else None
    queues, batch = offset_query.command_queues(ms, topic, queue_id, version)
    if not queues and not batch:
        raise no_such_topic(ms, topic) or offset_query.no_queue(ms, topic, queue_id)
    answers = offset_query.search_queues(ms, queues, batch, t, version, boundary.value, scan)
    emit_answers(answers, f"{topic} at {format_ms(t, zone)}", fmt.value, zone)
