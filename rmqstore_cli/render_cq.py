"""``dump-cq``'s output: consume-queue units (store/answers/cq_dump.py) as JSON fields or table rows,
with the message behind each (--messages), the 46-byte units of a BatchCQ or compaction
queue, and the queues' --summary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rmqstore_cli.render import Col, Output
from rmqstore_cli.times import format_ms

#: --messages, in the table: the message behind each unit (mqadmin queryMsgByOffset's fields).
MESSAGE_KEYS = ("msg_id", "born_host", "body_size")
SUMMARY_COLUMNS = [
    ("topic", "topic"),
    ("queue_id", "queue"),
    ("min_offset", "min offset"),
    ("max_offset", "max offset"),
    ("max_physic_offset", "max physic offset"),
    ("pre_blank_units", "pre-blank"),
    ("files", "files"),
]
BATCH_COLUMNS = (
    ("unit_index", "unit"),
    ("msg_base_offset", "base offset"),
    ("batch_size", "batch"),
    ("commitlog_offset", "commitlog offset"),
    ("size", "size"),
    ("tags_code", "tags code"),
    ("store_time", "store time"),
    ("status", "status"),
    ("problems", "problems"),
)


def table_columns(messages: bool = False) -> list[Col]:
    """Numbers right-aligned and wide enough for a size (maxMessageSize: 7 digits) and a tags
    hash (11); keys cut at 40 cells; the problems last, unpadded. ``messages`` (--messages):
    the message behind each unit as well, mqadmin queryMsgByOffset's fields (an offset msgId
    has 32 hex digits, 40 for an IPv6 store host)."""
    cols = [
        Col("cq_offset", "cq offset", right=True),
        Col("commitlog_offset", "commitlog offset", right=True),
        Col("size", "size", right=True, width=7),
        Col("tags_code", "tags code", right=True, width=11),
        Col("store_time", "store time", width=23, cap=23, least=23),
        Col("keys", "keys", cap=40, slack=8),
        Col("status", "status", width=9),
        Col("problems", "problems"),
    ]
    if messages:  # before the unpadded problems column
        cols[-1:-1] = [
            Col(MESSAGE_KEYS[0], "msgId", width=32, cap=40),
            Col(MESSAGE_KEYS[1], "born host", cap=47),
            Col(MESSAGE_KEYS[2], "body size", right=True, width=9),
        ]
    return cols


def emit_units(units: Iterable[Any], title: str, fmt: str, zone: Any, ms: Any = None) -> int:
    """Every unit (``cq_dump.UnitRead``); with ``ms`` (--messages) the message behind each.
    The count printed."""
    out = Output(fmt, table_columns(ms is not None), title=title)
    try:
        for u in units:
            out.emit(unit_dict(u, fmt == "table", zone, ms))
    finally:
        out.close()  # the queue's read-only mappings close with the process (numpy views hold them)
    return out.count


def unit_dict(u: Any, table: bool, zone: Any, ms: Any = None) -> dict:
    """A unit's JSON fields, and what its check found; ``ms``: also the message behind it
    (--messages), as dump-commitlog prints it."""
    from rmqstore_cli.store.queues.consume_queue import is_pre_blank

    off, check = u.commitlog_offset, u.check
    d = {
        "topic": u.topic,
        "queue_id": u.queue_id,
        "cq_offset": u.cq_offset,
        "commitlog_offset": off,
        "size": u.size,
        "tags_code": u.tags_code,
        "file": u.file,
        "pre_blank": is_pre_blank(off, u.size, u.tags_code),
    }
    if check is not None:
        check_fields(d, check, table, zone)
        if ms is not None:
            add_message(d, check, off, ms, table)
    elif table:
        d["status"] = "pre-blank" if d["pre_blank"] else ""
    return d


def check_fields(d: dict, check: Any, table: bool, zone: Any) -> None:
    """What a unit's check found, and the message it points at: its time, keys, tags and
    UNIQ_KEY (None, or an empty time in a table, where no message is there)."""
    m = check.message
    d["status"] = check.status
    d["agrees"] = check.agrees
    d["problems"] = check.problems
    d["store_timestamp"] = m.store_timestamp if m is not None else None
    d["keys"] = m.keys if m is not None else None
    d["tags"] = m.tags if m is not None else None
    d["uniq_key"] = m.uniq_key if m is not None else None
    if table:
        d["store_time"] = format_ms(m.store_timestamp, zone) if m is not None else ""
        if m is not None:  # bytes that are not UTF-8 as \xNN, as every table shows them
            from rmqstore_cli.store.records.message import split_keys
            from rmqstore_cli.store.records.message_view import table_properties

            d["keys"] = split_keys(table_properties(m).get("KEYS"))
        d["problems"] = "; ".join(check.problems)


def add_message(d: dict, check: Any, off: int, ms: Any, table: bool) -> None:
    """``DefaultMessageStore#lookMessageByOffset`` for --messages: the record when it is a
    valid message (ok or mismatch), else null."""
    from rmqstore_cli.store.records.message_view import entry_fields, message_dict

    m = check.message if check.status in ("ok", "mismatch") else None
    if m is None:
        d["message"] = None
        return
    f = ms.commitlog.queue.find(off)
    d["message"] = {
        **message_dict(m, "none", True, f.name if f is not None else ""),
        **entry_fields(ms.commitlog.entry_of(off)),
    }
    if table:
        for key in MESSAGE_KEYS:
            d[key] = d["message"].get(key)


def emit_batch_units(bq: Any, rows: Iterable[dict], fmt: str, zone: Any) -> int:
    """The units of a BatchCQ or compaction queue (``cq_dump.batch_rows``); the count printed."""
    kind = "compaction" if bq.sparse else "BatchCQ"
    out = Output(fmt, BATCH_COLUMNS, title=f"{bq.topic}/{bq.queue_id} ({kind})")
    try:
        for d in rows:
            if fmt == "table":
                d["store_time"] = format_ms(d["store_time_ms"], zone)
                d["problems"] = "; ".join(d.get("problems", []))
            out.emit(d)
    finally:
        out.close()
    return out.count


def emit_summary(rows: Iterable[dict], root: Any, fmt: str) -> int:
    """The queues' --summary rows (``cq_dump.summary_rows``); the count printed. The table
    names a BatchCQ or compaction queue's kind after its topic and the first of many files."""
    out = Output(fmt, SUMMARY_COLUMNS, title=f"{root}: consume queues")
    try:
        for d in rows:
            if fmt == "table":
                if "cq_type" in d:
                    d["topic"] = f"{d['topic']} ({d['cq_type']})"
                d["files"] = f"{len(d['files'])}: {d['files'][0]}…" if len(d["files"]) > 1 else d["files"]
            out.emit(d)
    finally:
        out.close()
    return out.count


def emit_file(
    path: Path, topic: str | None, queue_id: int | None, ms: Any, window: tuple, fmt: str, zone: Any, messages: bool
) -> int:
    """One queue file read on its own (``cq_dump``), its units resolved against ``ms`` when
    given; the count printed."""
    from rmqstore_cli.store.answers import cq_dump

    kind = cq_dump.file_kind(path)
    if kind in ("batchconsumequeue", "compactionCq"):  # a 46-byte-unit file
        bq, rows = cq_dump.batch_file_rows(path, kind == "compactionCq", ms, window)
        try:
            return emit_batch_units(bq, rows, fmt, zone)
        finally:
            bq.close()
    topic, queue_id = cq_dump.file_queue_id(path, topic, queue_id)
    cq = cq_dump.open_file_queue(path)
    try:
        units = cq_dump.queue_rows(cq, ms, topic, queue_id, window)
        return emit_units(units, str(path), fmt, zone, ms if messages else None)
    finally:
        cq.close()
