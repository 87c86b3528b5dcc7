"""Message trace records out of the trace topics' messages (formats/trace.py parses a body).

The trace topics are ``RMQ_SYS_TRACE_TOPIC`` and the broker's ``msgTraceTopicName``
(``BrokerConfig#msgTraceTopicName``, where ``TraceTopicEnable`` puts the clients' traces),
or the one topic a caller names (a client's own ``customizedTraceTopic``). A trace message's
KEYS hold each traced message's msgId and keys (``TraceDataEncoder#encoderFromContextBean``'s
key set), so a question about one message id or key reads only the trace messages keyed
so: the walk's key filter does the narrowing, each body's contexts are then matched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rmqstore_cli.formats.trace import (
    KEY_SEPARATOR,
    MESSAGE_TYPES,
    RMQ_SYS_TRACE_TOPIC,
    TraceEntry,
    parse_trace_body,
)

#: The names of a trace record's fields (api.trace_records.TraceRecord's, in order).
RECORD_FIELDS = (
    "type", "timestamp", "msg_id", "offset_msg_id", "topic", "group", "keys", "tags", "region_id",
    "request_id", "store_host", "client_host", "body_length", "cost_time", "msg_type", "success",
    "retry_times", "context_code", "transaction_id", "transaction_state", "from_transaction_check",
)  # fmt: skip


def trace_topics(config: Any, topic: str | None) -> frozenset[str]:
    """The topics read as trace topics: ``topic`` if given, else ``RMQ_SYS_TRACE_TOPIC`` and
    the config's ``msgTraceTopicName``."""
    if topic is not None:
        return frozenset({topic})
    return frozenset({RMQ_SYS_TRACE_TOPIC, config.msg_trace_topic_name})


def messages_of(items: Iterable[tuple[Any, Any]]) -> Iterator[Any]:
    """The records of a walk's (record or block, take) pairs, one at a time."""
    for rec, take in items:
        if take is None:
            yield rec
        else:
            yield from rec.messages(take)


def entry_row(rec: Any, entry: TraceEntry) -> dict[str, Any]:
    """One context of trace message ``rec`` as a row of :data:`RECORD_FIELDS` plus the
    context's shape (extra fields, field count, problems) and the trace message's place."""
    row: dict[str, Any] = {name: entry.fields.get(name) for name in RECORD_FIELDS}
    row["type"] = entry.type
    mt = row["msg_type"]
    row["msg_type"] = MESSAGE_TYPES[mt] if isinstance(mt, int) and 0 <= mt < len(MESSAGE_TYPES) else mt
    if row["msg_type"] is not None:
        row["msg_type"] = str(row["msg_type"])
    row["extra"] = list(entry.extra)
    row["field_count"] = entry.field_count
    row["problems"] = list(entry.problems)
    row["trace_offset"] = rec.offset
    row["trace_topic"] = rec.topic
    row["trace_store_timestamp"] = rec.store_timestamp
    return row


def wanted(row: dict[str, Any], msg_id: str | None, key: str | None) -> bool:
    """Whether a row is about ``msg_id`` (its msgId or offset msgId, any case) and ``key``
    (one of its keys); None: any."""
    if msg_id is not None and msg_id.upper() not in {str(row["msg_id"]).upper(), str(row["offset_msg_id"]).upper()}:
        return False
    return key is None or key in str(row["keys"] or "").split(KEY_SEPARATOR)


def about_key(row: dict[str, Any], key: str) -> bool:
    """``dump-commitlog --trace --key``: whether ``key`` is the row's msgId or one of its
    keys (``KEYS`` split on ``MessageConst.KEY_SEPARATOR``), exactly and case included: a
    prefix (``k1`` of ``k10``) is another message's key."""
    return key == row["msg_id"] or key in str(row["keys"] or "").split(KEY_SEPARATOR)


def trace_rows(
    records: Iterable[Any], topics: frozenset[str], msg_id: str | None = None, key: str | None = None
) -> Iterator[dict[str, Any]]:
    """The trace rows of the records in ``topics``, in commit-log then body order, only
    those about ``msg_id`` and ``key`` when given."""
    for rec in records:
        if rec.topic not in topics:
            continue
        for entry in parse_trace_body(rec.body):
            row = entry_row(rec, entry)
            if wanted(row, msg_id, key):
                yield row


def time_order(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by the time each context records (a SubAfter of an old client has none: the
    trace message's store time stands in), stable otherwise: what happened, in order."""
    return sorted(rows, key=lambda r: r["timestamp"] if isinstance(r["timestamp"], int) else r["trace_store_timestamp"])
