"""generate's own options (``rmqstore generate``: a realistic store written as a broker would)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.grammar import old_spelling

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

StoreOpt = Annotated[
    Path,
    typer.Option(
        "--store",
        "-s",
        help="New or empty directory to write the store into (created if missing). Required: "
        "never taken from RMQSTORE_STORE or ~/store. A non-empty one only with --append.",
    ),
]

AppendOpt = Annotated[
    bool,
    typer.Option(
        "--append",
        help="Add to the store already in --store (its lock is checked and held); without it a "
        "non-empty directory is refused (exit 4).",
    ),
]
MessagesOpt = Annotated[
    int | None, typer.Option("--messages", "-m", min=0, show_default="1000", help="How many sends.")
]
#: --messages' old spelling: -n is --dry-run in every other command (docs/conventions.md "One grammar").
OldMessagesOpt = Annotated[int | None, old_spelling("-n", min=0)]
SeedOpt = Annotated[int, typer.Option(help="Random seed: same options and seed, same bytes.")]
TopicsOpt = Annotated[int, typer.Option(min=1, help="Number of topics.")]
QueuesOpt = Annotated[int, typer.Option(min=1, help="Queues per topic.")]
BodySizeOpt = Annotated[str, typer.Option(help="Body size in bytes: N, or MIN-MAX (uniform).")]
KeysPerMessageOpt = Annotated[int, typer.Option(min=1, help="KEYS entries per message.")]
SharedKeyRatioOpt = Annotated[float, typer.Option(min=0, max=1, help="Share of extra keys shared by many messages.")]
DelayRatioOpt = Annotated[float, typer.Option(min=0, max=1, help="Share of delayed sends (SCHEDULE_TOPIC_XXXX).")]
TransactionRatioOpt = Annotated[float, typer.Option(min=0, max=1, help="Share of transactional sends.")]
TransactionOutcomesOpt = Annotated[
    str | None,
    typer.Option(
        metavar="C:R:P",
        help="Weights of half transactions committed, rolled back, left pending (8:1:1); default: all committed.",
    ),
]
PopMessagesOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Messages popped by POP group pop-group (5): checkpoints, acks, batch acks, some never acked, "
        "the due ones revived into the retry topic, the revive offsets in consumerOffset.json.",
    ),
]
TraceMessagesOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="Messages sent and consumed with message trace on: their Pub, SubBefore and SubAfter trace "
        "messages in the trace topic (msgTraceTopicName, default RMQ_SYS_TRACE_TOPIC); the --transaction-ratio "
        "share sent as transactions, with their EndTransaction records.",
    ),
]

RetryRatioOpt = Annotated[
    float,
    typer.Option(
        min=0, max=1, help="Share of consumer retries (%RETRY% topic; a 141-char V2 topic with --broker-version 5)."
    ),
]
Ipv6RatioOpt = Annotated[float, typer.Option(min=0, max=1, help="Share of IPv6 born and store hosts.")]
CompressRatioOpt = Annotated[float, typer.Option(min=0, max=1, help="Share of zlib-compressed bodies.")]

TimerRatioOpt = Annotated[
    float,
    typer.Option(
        min=0,
        max=1,
        help="Share of 5.x timer sends (TIMER_DELIVER_MS, stored "
        "under rmq_sys_wheel_timer; writes timerwheel, timerlog/, "
        "config/timercheck and timermetrics; needs --broker-version 5).",
    ),
]

BcqTopicsOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="With --broker-version 5: make this many of the topics BatchCQ topics (queue.type=BatchCQ): "
        "each send to one is an inner batch of 1-8 messages, in batchconsumequeue/.",
    ),
]

CompactionTopicsOpt = Annotated[
    int,
    typer.Option(
        min=0,
        help="With --broker-version 5, on a new store: make this many topics after the BatchCQ ones "
        "compaction topics (cleanup.policy=COMPACTION): their sends carry one of 16 keys and are "
        "dispatched to compaction/ as a broker that has not compacted yet does.",
    ),
]

CompactionRunOpt = Annotated[
    bool,
    typer.Option(
        "--compaction-run",
        help="With --compaction-topics: then compact each queue once, as the broker's "
        "schedule does (CompactionLog#doCompaction): all log files but the last "
        "rewritten, keeping each key's latest message; position-checkpoint and .bak "
        "name the last offsets compacted.",
    ),
]

LmqRatioOpt = Annotated[
    float,
    typer.Option(
        min=0,
        max=1,
        help="Share of sends listing LMQ queues (INNER_MULTI_DISPATCH); turns on enableLmq and enableMultiDispatch.",
    ),
]
LmqQueuesOpt = Annotated[int, typer.Option(min=1, help="How many %LMQ% queue names --lmq-ratio uses.")]

StartOpt = Annotated[
    str | None,
    typer.Option(
        help="Store time of the first message (ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more, now, "
        "-2h); default 2026-01-01T00:00:00Z, or 1 s after the last message of an existing store."
    ),
]
SpanOpt = Annotated[str, typer.Option(help="Store times spread over this long (e.g. 90m, 6h, 2d).")]
BrokerVersionOpt = Annotated[str, typer.Option(help="Write as a 4.9 or a 5 broker (property order, WAIT, V2 records).")]
AppendPropCrcOpt = Annotated[bool, typer.Option(help="5.x enabledAppendPropCRC: whole-record CRC property.")]

DledgerOpt = Annotated[
    bool,
    typer.Option(
        "--dledger",
        help="Write a DLedger commit log (enableDLegerCommitLog): entries in dledger-<dLegerSelfId, "
        "default n0>/data, index/, checkpoint and currterm; appended to a plain store, the old "
        "commitlog/ stays below it.",
    ),
]

FromJsonlOpt = Annotated[
    str | None,
    typer.Option(
        help="Append the messages of a dump-commitlog --format jsonl --body base64 file ('-' = stdin), "
        "keeping offsets, times, hosts, flags and properties. A record whose topic cannot be a "
        "directory name is written to the commit log and the index but gets no consume queue: "
        "one warning per such topic."
    ),
]
OverdueTimersOpt = Annotated[
    float,
    typer.Option(
        min=0,
        max=1,
        help="Share of timer sends due 1-30 s after their store time, with config/timercheck's read time "
        "stalled at the first of them: overdue timer messages (needs --timer-ratio).",
    ),
]
DelayOffsetLagOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Write config/delayOffset.json with each delay level this many messages behind its queue's end "
        "(0: all delivered); default: no file.",
    ),
]


def _epoch_spec(value: str | None) -> str | None:
    """Refuse a bad --epoch-file before anything is written (exit 2)."""
    from rmqstore_cli.errors import UsageError, spell
    from rmqstore_cli.store.write.epoch_generate import parse_spec

    if value is not None:
        try:
            parse_spec(value)
        except UsageError as e:
            raise typer.BadParameter(spell(e.message, lambda _: "--epoch-file")) from None
    return value


EpochFileOpt = Annotated[
    str | None,
    typer.Option(
        "--epoch-file",
        help="After writing, an epochFileCheckpoint (5.x controller mode) with these entries: comma-separated "
        "<epoch>-<start>, start a byte offset, @N (the Nth record's offset, from 0) or end, e.g. 1-0,2-@500,3-end.",
        callback=_epoch_spec,
    ),
]


def size_settings(
    commitlog: int | None, cq: int | None, slots: int | None, index_max: int | None
) -> dict[str, int | None]:
    """The size options under the broker's setting names (MessageStoreConfig), as the writer takes them."""
    return dict(
        mapped_file_size_commit_log=commitlog,
        mapped_file_size_consume_queue=cq,
        max_hash_slot_num=slots,
        max_index_num=index_max,
    )
