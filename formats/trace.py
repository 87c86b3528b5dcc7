"""Message trace bodies: the records a client's trace dispatcher writes to the trace topic.

A producer or consumer with message trace on (``enableMsgTrace``) hands a ``TraceContext``
per send, consume or transaction end to ``AsyncTraceDispatcher``, which encodes each
(``TraceDataEncoder#encoderFromContextBean``) and sends the encodings, concatenated, as the
body of one message to the trace topic (``AsyncTraceDispatcher#sendTraceDataByMQ``: the
topic ``RMQ_SYS_TRACE_TOPIC`` or the one the client names, the body UTF-8, the KEYS the
traced messages' ids and keys, space-separated). Layout (docs/format/trace.md):

- a body is contexts, each ended by ``TraceConstants.FIELD_SPLITOR`` (char 2);
- a context is fields separated by ``TraceConstants.CONTENT_SPLITOR`` (char 1), the first
  the ``TraceType`` name, the rest per type in the order of :data:`LAYOUTS`;
- a Java ``null`` is written as the text ``null`` (``StringBuilder#append``), kept here as
  written.

Clients differ in how many fields they write (``TraceDataEncoder#decoderFromTraceDataString``
reads them all): a Pub of 13 fields has no offset msgId, 15 adds the client host; a SubAfter
of 6 fields has no context code, 7 no time stamp, 9 adds the consumer group (and a cloud
client stops at 7). :func:`parse_trace_body` names what is there and keeps fields beyond
the known ones, unnamed, in ``extra``; a type it does not know (``PullAfter`` of 4.x
forks, a later one) keeps every field in ``extra``.

Everything here is a pure function of a body's bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: TopicValidator.RMQ_SYS_TRACE_TOPIC: the default trace topic (BrokerConfig#msgTraceTopicName)
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
#: TraceConstants.CONTENT_SPLITOR: between the fields of one context
CONTENT_SPLITOR = "\x01"
#: TraceConstants.FIELD_SPLITOR: after each context
FIELD_SPLITOR = "\x02"
#: MessageConst.KEY_SEPARATOR: between the trace message's KEYS
KEY_SEPARATOR = " "

#: Field names after the type, in ``TraceDataEncoder#encoderFromContextBean`` order (5.x,
#: the longest a released client writes).
LAYOUTS: dict[str, tuple[str, ...]] = {
    "Pub": (
        "timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host",
        "body_length", "cost_time", "msg_type", "offset_msg_id", "success", "client_host",
    ),
    "SubBefore": ("timestamp", "region_id", "group", "request_id", "msg_id", "retry_times", "keys"),
    "SubAfter": ("request_id", "msg_id", "cost_time", "success", "keys", "context_code", "timestamp", "group"),
    "EndTransaction": (
        "timestamp", "region_id", "group", "topic", "msg_id", "tags", "keys", "store_host", "msg_type",
        "transaction_id", "transaction_state", "from_transaction_check",
    ),
    "Recall": ("timestamp", "region_id", "group", "topic", "msg_id", "success"),
}  # fmt: skip
#: A Pub of 13 fields (clients before the offset msgId): success is the 13th.
PUB_WITHOUT_OFFSET_MSG_ID = LAYOUTS["Pub"][:11] + ("success",)
#: Fields read as Java long/int (``Long#parseLong``, ``Integer#parseInt``) and booleans
#: (``Boolean#parseBoolean``: "true" in any case is true).
INT_FIELDS = frozenset({"timestamp", "body_length", "cost_time", "msg_type", "retry_times", "context_code"})
BOOL_FIELDS = frozenset({"success", "from_transaction_check"})
#: MessageType by ordinal (``TraceBean#msgType`` is written as ``ordinal()``)
MESSAGE_TYPES = ("Normal_Msg", "Trans_Msg_Half", "Trans_msg_Commit", "Delay_Msg", "Order_Msg")


@dataclass(frozen=True)
class TraceEntry:
    """One context of a trace body: its type, its fields by name (numbers and booleans
    parsed, text as written, a number that does not parse kept as text), the fields past
    the known layout in ``extra``, and the count of fields the context had."""

    type: str
    fields: dict[str, str | int | bool]
    extra: tuple[str, ...] = ()
    field_count: int = 0
    problems: tuple[str, ...] = field(default=())


def layout_of(kind: str, count: int) -> tuple[str, ...]:
    """The names of a context's fields after its type, for a context of ``count`` fields
    (type included): ``TraceDataEncoder#decoderFromTraceDataString``'s length rules."""
    if kind == "Pub" and count == 13:
        return PUB_WITHOUT_OFFSET_MSG_ID
    return LAYOUTS.get(kind, ())


def parse_value(name: str, raw: str) -> tuple[str | int | bool, str | None]:
    """A field's value (int, bool, or the text) and a problem if a number did not parse."""
    if name in BOOL_FIELDS:
        return raw.lower() == "true", None
    if name in INT_FIELDS:
        try:
            return int(raw), None
        except ValueError:
            return raw, f"{name} {raw!r} is not a number"
    return raw, None


def parse_context(text: str) -> TraceEntry:
    """One context (its FIELD_SPLITOR removed) as a :class:`TraceEntry`."""
    parts = text.split(CONTENT_SPLITOR)
    kind, rest = parts[0], parts[1:]
    names = layout_of(kind, len(parts))
    values: dict[str, str | int | bool] = {}
    problems = []
    for name, raw in zip(names, rest[: len(names)], strict=False):
        values[name], problem = parse_value(name, raw)
        if problem:
            problems.append(problem)
    return TraceEntry(kind, values, tuple(rest[len(names) :]), len(parts), tuple(problems))


def parse_trace_body(body: bytes) -> list[TraceEntry]:
    """Every context of a trace message's body, in order (invalid UTF-8 replaced, empty
    contexts, as after the last FIELD_SPLITOR, skipped)."""
    text = body.decode("utf-8", "replace")
    return [parse_context(c) for c in text.split(FIELD_SPLITOR) if c]


def encode_context(kind: str, values: dict[str, object]) -> str:
    """A context as ``TraceDataEncoder#encoderFromContextBean`` writes it: ``values`` in
    :data:`LAYOUTS` order (only the names given, so a shorter older layout is a prefix;
    booleans as Java prints them), FIELD_SPLITOR after the last."""
    out = [kind]
    for name in LAYOUTS[kind]:
        if name in values:
            v = values[name]
            out.append(("true" if v else "false") if isinstance(v, bool) else str(v))
    return CONTENT_SPLITOR.join(out) + FIELD_SPLITOR


def trace_keys(entries: list[tuple[str, str | None]]) -> str:
    """The trace message's KEYS (``TraceTransferBean#getTransKey``, a set joined by
    ``Message#setKeys``): each traced message's msgId, then each of its keys, once each
    (the client's HashSet order is not kept: first seen first)."""
    seen: dict[str, None] = {}
    for msg_id, keys in entries:
        seen[msg_id] = None
        for k in (keys or "").split(KEY_SEPARATOR):
            if k:
                seen[k] = None
    return KEY_SEPARATOR.join(seen)
