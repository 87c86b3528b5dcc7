"""``rmqstore decode-msgid``: what a msgId or UNIQ_KEY says, and the message it names (imports: no numpy)."""

from __future__ import annotations

import sys
from pathlib import Path
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
    TzOpt,
    command,
)
from rmqstore_cli.commands.grammar import NowOpt, clock
from rmqstore_cli.commands.lines import note, say

from rmqstore_cli.errors import NotFound, UsageError

EPILOG = """Examples:

  rmqstore decode-msgid 0A00000500002A9F0000000040001000

  rmqstore decode-msgid C0A8010A30391B6D358647B760000001 --store ~/store --format jsonl

  grep -o '[0-9A-F]\\{32\\}' app.log | rmqstore decode-msgid - --store ~/store --format jsonl

How the kind is decided: a 32- or 56-digit id is read both as an offset msgId (address,
port, offset) and as a UNIQ_KEY (ip, pid, class-loader hash, time, counter). Without a
store, the plausible reading wins (an offset msgId has a port of 1-65535, so as a
UNIQ_KEY its pid would be 0; a UNIQ_KEY has a pid, so as an offset msgId its port would
exceed 65535); if both or neither are plausible the kind is "ambiguous" and both
readings are printed. With --store both readings are tried against the files and what
is found decides. The UNIQ_KEY time is only the time within a month ("nearly time",
computed like MessageClientIDSetter#getNearlyTimeFromID relative to --now in --tz).
"""


def register(app: typer.Typer) -> None:
    app.command("decode-msgid", epilog=EPILOG)(decode_msgid)


@command
def decode_msgid(
    ids: Annotated[
        list[str],
        typer.Argument(
            help="Offset msgIds or UNIQ_KEYs (32 or 56 hex digits); '-' reads whitespace-separated ids from stdin."
        ),
    ],
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            "-s",
            show_default=False,
            help="Also fetch each message from this store and check the id's host against it (without it: the store "
            "--broker-conf's storePathRootDir, $RMQSTORE_STORE or $RMQSTORE_BROKER_CONF names, if any; never "
            "~/store).",
        ),
    ] = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    now: NowOpt = None,
    body: Annotated[
        str,
        typer.Option(
            help="With --store and --format json or jsonl: include the messages' bodies: none, text, hex or base64."
        ),
    ] = "none",
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Tell offset msgIds from client UNIQ_KEYs and decode them.

    An offset msgId gives the store host and the commit-log offset; a UNIQ_KEY gives the
    client's IP, pid (low 16 bits), class-loader hash, approximate creation time and
    counter. With --store the message is fetched (by offset, or through the index across
    all topics for a UNIQ_KEY). Exit 1 if any id is invalid or, with --store, not found.

    JSON fields: id, kind (offset_msg_id, uniq_key, ambiguous), basis; store_host,
    physical_offset; client_ip, pid, class_loader_hash, time_in_month_ms, nearly_time,
    counter; with --store: found, host_matches_store, messages.
    """
    from rmqstore_cli.render import Output, safe_text
    from rmqstore_cli.render_msgid import TABLE_COLUMNS, id_dict
    from rmqstore_cli.store.answers.msgid import read_ids
    from rmqstore_cli.times import parse_tz

    if body not in ("none", "text", "hex", "base64"):
        raise UsageError(f"--body must be none, text, hex or base64, not {body!r}")
    if body != "none" and fmt is Fmt.table:
        raise UsageError("--body shows in --format json or jsonl only", hint="the table has one line per id")
    zone = parse_tz(tz)
    now_v = clock(now, zone)
    texts = [w for a in ids for w in (sys.stdin.read().split() if a == "-" else [a])]
    if not texts:
        raise UsageError("no id given", hint="pass ids as arguments, or '-' to read them from stdin")
    st, topics = _open(store, broker_conf, commitlog_file_size, index_slots, index_max, allow_odd_size, zone, body)
    failed = 0
    out = Output(fmt.value, TABLE_COLUMNS, title="message ids")
    try:
        for text, r, problem in read_ids(texts, st, topics):
            failed += problem is not None
            if r is None:
                say("error", f"{safe_text(text)!r} {problem}")
                continue
            if problem:
                say(None, f"{r.id}: {problem}")
            out.emit(id_dict(r, st, now_v, zone, body, fmt is Fmt.table))
    finally:
        out.close()
        if st is not None:
            st.close()
    if failed:
        n = len(texts)
        raise NotFound(f"{failed} of {n} id{'s' * (n != 1)} {'were' if failed != 1 else 'was'} invalid or not found")


def _open(store, broker_conf, commitlog_file_size, index_slots, index_max, allow_odd_size, zone, body: str):
    """(the store, the topics a UNIQ_KEY is looked up in) when a store is named somewhere
    (never ~/store), else (None, None)."""
    from rmqstore_cli.commands.common import pick_store, warn_store
    from rmqstore_cli.commands.readers import open_indexed

    if pick_store(store, broker_conf, required=False)[0] is None:
        if body != "none":
            raise UsageError("--body reads the messages from a store", hint="add --store DIR")
        return None, None
    from rmqstore_cli.store.answers.lookup import search_topics  # a store: the commit log and the index

    st = open_indexed(store, broker_conf, commitlog_file_size, index_slots, index_max, allow_odd_size, zone)
    topics, why = search_topics(st, None)
    if why:
        note(why)
    warn_store(st)
    return st, topics
