"""``rmqstore index-lookup``: the broker's query by key, answered from the files, with the
real-key check and time window a person means."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_topic,
)
from rmqstore_cli.commands.dump_commitlog import BodyMode

from rmqstore_cli.render import BODY_CAP, PROPERTIES_CAP

EPILOG = """Examples:

  rmqstore index-lookup order-42 --store ~/store --topic OrderTopic

  rmqstore index-lookup order-42 --begin 2026-11-22T03:10 --end 2026-11-22T03:40 --format jsonl | jq .physical_offset

  rmqstore index-lookup AC100A0748FF5FFD2B276CDD6CD90004 --show-collisions --max 0

  rmqstore index-lookup AaAa --topic PaymentTopic --broker-window --broker-conf broker.conf
"""

TABLE_COLUMNS = [  # (key, header) pairs, or render.Col: topic and keys cut at 48/40 cells
    ("physical_offset", "offset"),
    ("store_time", "store time"),
    ("topic", "topic", 48),
    ("match", "match"),
    ("keys", "keys", 40),
    ("uniq_key", "uniq key"),
    ("index_file", "index file"),
]


def register(app: typer.Typer) -> None:
    app.command("index-lookup", epilog=EPILOG)(index_lookup)


@command
def index_lookup(
    key: Annotated[str, typer.Argument(help="The key: a KEYS element or a UNIQ_KEY, exactly as sent.")],
    topic: Annotated[
        list[str] | None,
        typer.Option(
            "--topic",
            "-t",
            help="Topic to look in (repeatable); default every topic the store knows "
            "(config/topics.json and consumequeue/; if neither names one, every topic "
            "the commit log's records name, found by a walk of the log).",
            autocompletion=complete_topic,
        ),
    ] = None,
    begin: Annotated[
        str | None,
        typer.Option(
            help="Store time from (ISO 8601, epoch seconds if 10 digits, epoch ms "
            "if 13 or more, now, -2h); default all time."
        ),
    ] = None,
    end: Annotated[
        str | None, typer.Option(help="Store time up to, inclusive (the forms of --begin); default all time.")
    ] = None,
    max_hits: Annotated[
        int,
        typer.Option(
            "--max",
            min=0,
            help="At most this many hits per look-up, the newest; 0 = no cap (the broker caps at maxMsgsNumBatch).",
        ),
    ] = 64,
    broker_window: Annotated[
        bool,
        typer.Option(
            "--broker-window",
            help="Answer exactly as DefaultMessageStore#queryMessage plus the client's key "
            "check would (whole-second index times, up to 3 rounds, maxMsgsNumBatch cap).",
        ),
    ] = False,
    show_collisions: Annotated[
        bool,
        typer.Option(
            "--show-collisions",
            help="Also print index entries whose hash matched but whose message does not "
            "carry the key (collisions), points at no valid record (stale), or lies "
            "outside the window.",
        ),
    ] = False,
    body: Annotated[
        BodyMode,
        typer.Option(
            help="Include each message's body: none, text (escaped), hex or base64; the table shows it on a line "
            f"under each hit, cut at {BODY_CAP} characters (--format jsonl has it whole)."
        ),
    ] = BodyMode.none,
    properties: Annotated[
        bool | None,
        typer.Option(
            "--properties/--no-properties",
            show_default="with --format json or jsonl",
            help="Include message properties; the table shows them on a line under each hit as NAME=VALUE pairs, "
            f"cut at {PROPERTIES_CAP} characters.",
        ),
    ] = None,
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Find messages by key through the index files, and check each one's real key.

    The index stores only a hash of topic#key and a whole-second time, so the broker's
    answer includes hash collisions and can miss messages at the edges of a time window.
    This command reads every hit's message and keeps it only if its topic is the
    topic and KEYS.split(" ") contains the key or its UNIQ_KEY equals it; the window is
    the messages' real store time. --broker-window gives the broker's own answer instead
    (plus the client's key check). Exit 1 when nothing is found.

    JSON fields: key, topic, physical_offset, store_timestamp, index_file, match (keys or
    uniq_key; with --show-collisions also collision, stale, outside), message.
    """
    from rmqstore_cli.commands.common import load_config, warn_odd_files, warn_store

    from rmqstore_cli.render import Output, extra_columns
    from rmqstore_cli.store.lookup import LONG_MAX
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.times import check_window, format_ms, parse_time, parse_tz

    zone = parse_tz(tz)
    b = parse_time(begin, "--begin", tz=zone) if begin else 0
    e = parse_time(end, "--end", tz=zone) if end else LONG_MAX
    check_window(b, e, zone)
    cfg = load_config(
        store, broker_conf, commitlog_file_size=commitlog_file_size, index_slots=index_slots, index_max=index_max
    )
    cfg.allow_odd_size = allow_odd_size
    st = MessageStore.open(cfg, zone)
    warn_odd_files(cfg)
    try:
        topics = list(dict.fromkeys(topic)) if topic else st.topics()
        if not topics:  # no consume queues, no topics.json: the records name their topics
            topics = st.topics_from_commitlog()
            print(
                f"rmqstore: note: no consume queues or config/topics.json: searching the {len(topics)} "
                "topic(s) named in the commit log",
                file=sys.stderr,
            )
        no_index = not st.index.files
        hits, others, capped = _lookup(st, topics, key, b, e, max_hits, broker_window)
        shown = hits + others if show_collisions else hits
        if show_collisions:
            shown.sort(key=lambda h: h.physical_offset)
        if properties is None:
            properties = fmt is not Fmt.table  # the table has the keys; the JSON formats every property
        out = Output(
            fmt.value, TABLE_COLUMNS + extra_columns(body is not BodyMode.none, properties), title=f"{cfg.root}: {key}"
        )
        try:
            for h in shown:
                out.emit(hit_dict(h, st.commitlog, body.value, properties, fmt is Fmt.table, zone, format_ms))
        finally:
            out.close()
    finally:
        st.close()
    warn_store(st)
    if capped:
        print(
            f"rmqstore: note: more than {max_hits} messages match; showing the newest {max_hits} (--max 0 shows all)",
            file=sys.stderr,
        )
    if others and not show_collisions:
        kinds = _count(others)
        print(f"rmqstore: note: left out {kinds} (--show-collisions shows them)", file=sys.stderr)
    if not hits:
        raise _not_found(st, topics, bool(topic), key, b != 0 or e != LONG_MAX, no_index)


def _lookup(st, topics: list[str], key: str, begin: int, end: int, max_hits: int, broker_window: bool):
    """(hits, others, capped) of ``key`` in ``topics`` (``store.lookup``); a lower-case
    UNIQ_KEY that finds nothing is looked up again in upper case (as it is indexed)."""
    from rmqstore_cli.store.lookup import INT_MAX, broker_query_message, lookup_key

    def query(k: str):
        if broker_window:
            hits, others = [], []
            for t in topics:
                for h in broker_query_message(st.index, st.commitlog, t, k, max_hits or INT_MAX, begin, end):
                    (hits if h.true else others).append(h)
            return hits, others, False
        r = lookup_key(st.index, st.commitlog, topics, k, begin, end, max_hits)
        return r.hits, r.others, r.capped

    hits, others, capped = query(key)
    if not hits and key != key.upper() and len(key) in (32, 56) and _is_hex(key):
        # UNIQ_KEYs are stored and indexed in upper case; a pasted lower-case id means that
        hits, others, capped = query(key.upper())
        if hits:
            print("rmqstore: note: found as the upper-case UNIQ_KEY", file=sys.stderr)
    return hits, others, capped


def _not_found(st, topics: list[str], topic_given: bool, key: str, windowed: bool, no_index: bool):
    """Why nothing was found (exit 1): no topic at all, no such topic, a key with a space
    (never indexed), or simply no message with that key."""
    from rmqstore_cli.errors import NotFound

    if not topics:
        return NotFound(
            "the store knows no topic: no consume queue, config/topics.json or commit-log record names one",
            path=st.config.root,
            hint="pass --topic",
        )
    if topic_given:
        from rmqstore_cli.commands.common import no_such_topic

        for t in topics:
            nf = no_such_topic(st, t)
            if nf is not None:
                return nf
    if " " in key:
        return NotFound(
            f"no message with key {key!r}",
            hint="KEYS are split on spaces when they are indexed "
            "(IndexService#buildIndex), so a key with a space in it is never in the index: look up "
            "one word of it",
        )
    return NotFound(
        f"no message with key {key!r}"
        + (f" in topic {topics[0]!r}" if len(topics) == 1 else "")
        + (" in that time window" if windowed else ""),
        hint="the store has no index files (messageIndexEnable=false?)" if no_index else None,
    )


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in s)


def _count(others) -> str:
    names = {"collision": "hash collision", "stale": "stale index entry", "outside": "hit outside the window"}
    counts: dict[str, int] = {}
    for h in others:
        counts[h.match] = counts.get(h.match, 0) + 1
    return ", ".join(f"{n} {names.get(k, k)}{'s' if n != 1 else ''}" for k, n in counts.items())


def hit_dict(h, commitlog, body: str, properties: bool, table: bool, zone, format_ms) -> dict:
    """An index hit under DESIGN.md's names: key, topic, physical_offset, store_timestamp,
    index_file, and the decoded message under ``message``."""
    from rmqstore_cli.render import message_extras
    from rmqstore_cli.store.message_view import entry_fields, message_dict

    msg = h.message
    d: dict = {
        "key": h.key,
        "topic": h.topic,
        "physical_offset": h.physical_offset,
        "store_timestamp": h.store_timestamp,
        "index_file": h.index_file,
        "match": h.match,
    }
    if h.reason:
        d["reason"] = h.reason
    if msg is not None:
        f = commitlog.queue.find(msg.offset)
        d["message"] = {
            **message_dict(msg, body, properties, f.name if f else ""),
            **entry_fields(commitlog.entry_of(msg.offset)),
        }
    else:
        d["message"] = None
    if table:
        d["store_time"] = format_ms(h.store_timestamp, zone) if h.store_timestamp is not None else h.reason
        if msg is not None:
            d["keys"] = msg.keys
            d["uniq_key"] = msg.uniq_key
            if h.match == "collision" and msg.topic != h.topic:
                d["topic"] = f"{h.topic} (record: {msg.topic})"
            d.update(message_extras(d["message"]))  # --body, --properties: lines under the row
    return d
