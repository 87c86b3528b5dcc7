"""``rmqstore decode-msgid``: what an offset msgId or a client UNIQ_KEY says, and (with a
store) the message it names. Imports stay light: no numpy."""

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

TABLE_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("host", "host"),
    ("detail", "detail"),
    ("in_store", "in store"),
    ("basis", "basis"),
]


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
    now: Annotated[
        str | None,
        typer.Option(
            help="Evaluate a UNIQ_KEY's nearly time as of this time (default now; ISO 8601, epoch seconds if 10 "
            "digits, epoch ms if 13 or more, -2h): the id holds only the time within its month."
        ),
    ] = None,
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
    from rmqstore_cli.errors import NotFound, UsageError
    from rmqstore_cli.render import Output, safe_text
    from rmqstore_cli.store.msgid import BadId, parse_id
    from rmqstore_cli.times import now_ms, parse_time, parse_tz

    if body not in ("none", "text", "hex", "base64"):
        raise UsageError(f"--body must be none, text, hex or base64, not {body!r}")
    if body != "none" and fmt is Fmt.table:
        raise UsageError("--body shows in --format json or jsonl only", hint="the table has one line per id")
    zone = parse_tz(tz)
    now_v = parse_time(now, "--now", tz=zone) if now else now_ms()
    texts = _read_ids(ids)
    if not texts:
        raise UsageError("no id given", hint="pass ids as arguments, or '-' to read them from stdin")
    from rmqstore_cli.commands.common import pick_store

    st = topics = None
    if pick_store(store, broker_conf, required=False)[0] is None:
        if body != "none":
            raise UsageError("--body reads the messages from a store", hint="add --store DIR")
    else:  # a store named somewhere: never ~/store
        from rmqstore_cli.commands.common import load_config, warn_odd_files, warn_store

        from rmqstore_cli.store.message_store import MessageStore

        cfg = load_config(
            store, broker_conf, commitlog_file_size=commitlog_file_size, index_slots=index_slots, index_max=index_max
        )
        cfg.allow_odd_size = allow_odd_size
        st = MessageStore.open(cfg, zone)
        warn_odd_files(cfg)
        topics = st.topics()
        if not topics:  # no consume queues, no topics.json: a UNIQ_KEY is indexed under its record's topic
            topics = st.topics_from_commitlog()
            print(
                f"rmqstore: note: no consume queues or config/topics.json: searching the {len(topics)} "
                "topic(s) named in the commit log",
                file=sys.stderr,
            )
        warn_store(st)
    failed = 0
    out = Output(fmt.value, TABLE_COLUMNS, title="message ids")
    try:
        for text in texts:
            try:
                r = parse_id(text)
            except BadId as e:
                failed += 1
                print(f"rmqstore: error: {safe_text(text)!r} is not a message id: {e}", file=sys.stderr)
                continue
            if st is not None:
                from rmqstore_cli.store.msgid import resolve_in_store

                resolve_in_store(r, st, topics)
                if not r.found:
                    failed += 1
                    print(f"rmqstore: {r.id}: no message in the store by offset or UNIQ_KEY", file=sys.stderr)
            out.emit(id_dict(r, st, now_v, zone, body, fmt is Fmt.table))
    finally:
        out.close()
        if st is not None:
            st.close()
    if failed:
        raise NotFound(
            f"{failed} of {len(texts)} id{'s' if len(texts) != 1 else ''} "
            f"{'were' if failed != 1 else 'was'} invalid or not found"
        )


def _read_ids(args: list[str]) -> list[str]:
    out: list[str] = []
    for a in args:
        if a == "-":
            out.extend(sys.stdin.read().split())
        else:
            out.append(a)
    return out


def id_dict(r, st, now_v: int, zone, body: str, table: bool) -> dict:
    """One id: kind and basis, the offset reading and/or the UNIQ_KEY reading, and with a
    store whether it was found, whether the host matches, and the messages."""
    from rmqstore_cli.store.message_view import entry_fields, message_dict
    from rmqstore_cli.store.msgid import OFFSET_ID, UNIQ_KEY, store_host_matches
    from rmqstore_cli.times import format_ms

    d: dict = {"id": r.id, "kind": r.kind, "basis": r.basis}
    show_offset = r.kind != UNIQ_KEY
    show_uniq = r.kind != OFFSET_ID
    if show_offset:
        d["store_host"] = r.offset.store_host
        d["physical_offset"] = r.offset.physical_offset
    if show_uniq:
        q = r.uniq
        d["client_ip"] = q.ip_str
        d["pid"] = q.pid
        d["class_loader_hash"] = f"{q.class_loader_hash & 0xFFFFFFFF:08X}"
        d["time_in_month_ms"] = q.time_in_month_ms
        d["nearly_time"] = q.nearly_time(now_v, zone)
        d["counter"] = q.counter
    if st is not None:
        d["found"] = r.found
        if show_offset:
            d["host_matches_store"] = store_host_matches(r)
            if r.offset_message is None and r.offset_problem:
                d["offset_problem"] = r.offset_problem
        msgs = ([r.offset_message] if r.offset_message is not None and show_offset else []) + [
            m for m in r.uniq_messages if show_uniq
        ]
        seen: set[int] = set()
        d["messages"] = []
        for m in msgs:
            if m.offset in seen:
                continue
            seen.add(m.offset)
            f = st.commitlog.queue.find(m.offset)
            d["messages"].append(
                {**message_dict(m, body, True, f.name if f else ""), **entry_fields(st.commitlog.entry_of(m.offset))}
            )
    if table:
        hosts, details = [], []
        if show_offset:
            hosts.append(r.offset.store_host)
            details.append(f"offset {r.offset.physical_offset}")
        if show_uniq:
            hosts.append(d["client_ip"])
            details.append(
                f"pid {d['pid']}, class loader {d['class_loader_hash']}, "
                f"nearly {format_ms(d['nearly_time'], zone)}, counter {d['counter']}"
            )
        d["host"] = " | ".join(hosts)
        d["detail"] = " | ".join(details)
        if st is not None:
            found = [f"{m['topic']}@{m['physical_offset']}" for m in d["messages"]]
            d["in_store"] = ", ".join(found) if found else "not found"
            if d.get("host_matches_store") is False:
                d["in_store"] += " (store host differs)"
    return d
