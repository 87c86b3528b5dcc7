"""``index-lookup``'s output: each index hit (store/answers/lookup.py) as JSON fields or a table row,
the message's body and properties on lines under it, and the words for what was left out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmqstore_cli.render import Output, extra_columns, message_extras
from rmqstore_cli.times import format_ms

TABLE_COLUMNS = [  # (key, header) pairs, or render.Col: topic and keys cut at 48/40 cells
    ("physical_offset", "offset"),
    ("store_time", "store time"),
    ("topic", "topic", 48),
    ("match", "match"),
    ("keys", "keys", 40),
    ("uniq_key", "uniq key"),
    ("index_file", "index file"),
]
#: What a hit that is not the key's is, in words (--show-collisions shows them).
OTHER_KINDS = {"collision": "hash collision", "stale": "stale index entry", "outside": "hit outside the window"}


def emit_hits(
    hits: Iterable[Any], commitlog: Any, title: str, fmt: str, body: str, properties: bool, zone: Any
) -> None:
    """Every hit, in the order given."""
    out = Output(fmt, TABLE_COLUMNS + extra_columns(body != "none", properties), title=title)
    try:
        for h in hits:
            out.emit(hit_dict(h, commitlog, body, properties, fmt == "table", zone))
    finally:
        out.close()


def left_out(others: Iterable[Any]) -> str:
    """``2 hash collisions, 1 stale index entry``: what the answer left out, by kind."""
    counts: dict[str, int] = {}
    for h in others:
        counts[h.match] = counts.get(h.match, 0) + 1
    return ", ".join(f"{n} {OTHER_KINDS.get(k, k)}{'s' if n != 1 else ''}" for k, n in counts.items())


def hit_dict(h: Any, commitlog: Any, body: str, properties: bool, table: bool, zone: Any) -> dict:
    """An index hit under DESIGN.md's names: key, topic, physical_offset, store_timestamp,
    index_file, and the decoded message under ``message``."""
    from rmqstore_cli.store.records.message import split_keys
    from rmqstore_cli.store.records.message_view import entry_fields, message_dict, table_properties, table_text

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
        if msg is not None:  # the record's bytes that are not UTF-8 as \xNN (message_view.table_text)
            props = table_properties(msg)
            d["keys"] = split_keys(props.get("KEYS"))
            d["uniq_key"] = props.get("UNIQ_KEY")
            if h.match == "collision" and msg.topic != h.topic:
                d["topic"] = f"{h.topic} (record: {table_text(msg.topic_bytes)})"
            elif msg.topic == h.topic:
                d["topic"] = table_text(msg.topic_bytes)
            d.update(message_extras(d["message"]))  # --body, --properties: lines under the row
    return d
