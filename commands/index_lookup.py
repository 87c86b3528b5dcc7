"""``rmqstore index-lookup``: the broker's query by key, answered from the files, with the
real-key check and time window a person means."""

from __future__ import annotations

from typing import Annotated

import typer
from rmqstore_cli.commands import grammar, lines
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

EPILOG = """Examples:

  rmqstore index-lookup order-42 --store ~/store --topic OrderTopic

  rmqstore index-lookup order-42 --begin 2026-11-22T03:10 --end 2026-11-22T03:40 --format jsonl | jq .physical_offset

  rmqstore index-lookup AC100A0748FF5FFD2B276CDD6CD90004 --show-collisions --limit 0

  rmqstore index-lookup AaAa --topic PaymentTopic --broker-window --broker-conf broker.conf

  rmqstore index-lookup order-42 --begin -1h --now 2026-11-22T04:00   # stored from 03:00 on
"""


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
    begin: Annotated[str | None, grammar.begin_option("Store time", "; default all time")] = None,
    end: Annotated[str | None, grammar.end_option("Store time", "; default all time")] = None,
    limit: Annotated[
        int | None,
        grammar.limit_option(
            "At most this many hits per look-up, the newest (default 64); 0 = no cap (the broker caps at "
            "maxMsgsNumBatch)."
        ),
    ] = None,
    old_max: Annotated[int | None, grammar.old_spelling("--max", min=0)] = None,
    now: grammar.NowOpt = None,
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
    body: Annotated[grammar.BodyMode, grammar.body_option("each hit's message")] = grammar.BodyMode.none,
    properties: Annotated[bool | None, grammar.properties_option("each hit's message")] = None,
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
    from rmqstore_cli.commands.common import no_such_topic, warn_store
    from rmqstore_cli.commands.readers import open_indexed

    from rmqstore_cli.render_lookup import emit_hits, left_out
    from rmqstore_cli.store.answers.lookup import LONG_MAX, find_key, not_found, search_topics
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    cap, show = _cap(limit, old_max)
    b, e = grammar.window(begin, end, grammar.clock(now, zone), zone)
    b, e = 0 if b is None else b, LONG_MAX if e is None else e
    st = open_indexed(store, broker_conf, commitlog_file_size, index_slots, index_max, allow_odd_size, zone)
    no_index = not st.index.files
    try:
        topics, why = search_topics(st, topic)
        if why:
            lines.note(why)
        a = find_key(st, topics, key, b, e, cap, broker_window)
        if a.upper:
            lines.note("found as the upper-case UNIQ_KEY")
        shown = sorted(a.hits + a.others, key=lambda h: h.physical_offset) if show_collisions else a.hits
        properties = fmt is not Fmt.table if properties is None else properties  # the table has the keys
        emit_hits(shown[:show], st.commitlog, f"{st.config.root}: {key}", fmt.value, body.value, properties, zone)
    finally:
        st.close()
    warn_store(st)
    if a.capped and show is None:
        lines.note(f"more than {cap} messages match; showing the newest {cap} (a larger --limit shows more)")
    if a.others and not show_collisions:
        lines.note(f"left out {left_out(a.others)} (--show-collisions shows them)")
    if not a.hits:
        for t in topics if topic else []:
            if (nf := no_such_topic(st, t)) is not None:
                raise nf
        raise not_found(st, topics, key, b != 0 or e != LONG_MAX, no_index)


def _cap(limit: int | None, old_max: int | None) -> tuple[int, int | None]:
    """(the look-up's cap, 0 none; how many hits to print, None all): --limit N is N (default
    64), and 0 prints none, as everywhere; the old --max 0 meant every hit, and still does."""
    n = grammar.renamed(limit, old_max, "--limit", "--max")
    if n is None or old_max == 0:
        return 64 if n is None else 0, None
    return (1, 0) if n == 0 else (n, None)
