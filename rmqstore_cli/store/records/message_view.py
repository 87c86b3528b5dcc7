"""A commit-log record under the JSON field names (DESIGN.md, "Record field names"): the one
shape dump-commitlog's JSON Lines, the library's ``Message.as_dict``, index hits, dump-cq's
``message`` and export's rows are built from."""

from __future__ import annotations

import base64
from typing import Any

from rmqstore_cli.formats.properties import parse_properties

from rmqstore_cli.store.records.message import format_host, offset_msg_id, split_keys

#: how a table reads store bytes: a byte that is not UTF-8 kept as a lone surrogate, which
#: render.safe_text shows as ``\\xNN`` (the JSON formats replace it with U+FFFD and add the
#: exact bytes as ``topic_base64`` / ``properties_base64``)
TABLE_DECODE = "surrogateescape"


def text_or_b64(raw: bytes) -> tuple[str, bool]:
    """(text, exact): the UTF-8 text, and whether it decoded without replacement."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace"), False


def table_text(raw: bytes) -> str:
    """Store bytes as a table shows them: UTF-8, each byte that is not as a surrogate
    (render.safe_text shows it as ``\\xNN``, as a text body shows it)."""
    return raw.decode("utf-8", TABLE_DECODE)


def table_properties(msg) -> dict[str, str]:
    """A message's properties as a table shows them: the library's (U+FFFD for bytes that
    are not UTF-8) when the PROPERTIES are UTF-8, else parsed from :func:`table_text`."""
    raw = msg.properties_bytes
    if raw.isascii():
        return msg.properties
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return table_properties_of(raw)
    return msg.properties


def table_properties_of(raw: bytes) -> dict[str, str]:
    """PROPERTIES bytes parsed from :func:`table_text` (``MessageDecoder#string2messageProperties``)."""
    return parse_properties(table_text(raw)) if raw else {}


def encode_body(body: bytes, mode: str) -> str | None:
    if mode == "none":
        return None
    if mode == "base64":
        return base64.b64encode(body).decode()
    if mode == "hex":
        return body.hex()
    return body.decode("utf-8", "backslashreplace")


def entry_fields(entry) -> dict:
    """A DLedger record's entry (``DLedgerEntry``): index, term and the entry's position,
    48 bytes before the record; nothing for a record of a plain commit-log file."""
    if entry is None:
        return {}
    return {"dledger_index": entry.index, "dledger_term": entry.term, "dledger_pos": entry.pos}


def message_dict(msg, body: str = "none", properties: bool = True, file: str | None = None) -> dict:
    """A message under DESIGN.md's field names, in the order dump-commitlog prints them."""
    try:
        topic, topic_exact = msg.topic_bytes.decode("utf-8"), True
    except UnicodeDecodeError:
        topic, topic_exact = msg.topic_bytes.decode("utf-8", "replace"), False
    d: dict[str, Any] = {
        "physical_offset": msg.physical_offset,
        "total_size": msg.total_size,
        "magic": msg.version,
        "body_crc": msg.body_crc,
        "queue_id": msg.queue_id,
        "flag": msg.flag,
        "queue_offset": msg.queue_offset,
        "sys_flag": msg.sys_flag,
        "born_timestamp": msg.born_timestamp,
        "born_host": format_host(msg.born_address, msg.born_port),
        "store_timestamp": msg.store_timestamp,
        "store_host": format_host(msg.store_address, msg.store_port),
        "reconsume_times": msg.reconsume_times,
        "prepared_transaction_offset": msg.prepared_transaction_offset,
        "topic": topic,
    }
    if not topic_exact:
        d["topic_base64"] = base64.b64encode(msg.topic_bytes).decode()
    props = msg.properties
    if properties:
        d["properties"] = props
        text, exact = text_or_b64(msg.properties_bytes)
        if exact:
            d["properties_string"] = text
        else:
            d["properties_base64"] = base64.b64encode(msg.properties_bytes).decode()
    d["tags"] = props.get("TAGS")
    d["keys"] = split_keys(props.get("KEYS"))
    d["uniq_key"] = props.get("UNIQ_KEY")
    d["msg_id"] = offset_msg_id(msg.store_address, msg.store_port, msg.physical_offset)
    d["body_size"] = len(msg.body)
    b = encode_body(msg.body, body) if body != "none" else None
    if b is not None:
        d["body"] = b
        d["body_encoding"] = body
    d["file"] = file if file is not None else ""
    return d
