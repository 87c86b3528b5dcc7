"""Message trace records (``Store.traces``, ``dump-commitlog --trace``): frozen dataclasses
whose ``as_dict()`` is the JSON the command prints for each (docs/format/trace.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One context of a trace message's body (``TraceDataEncoder#decoderFromTraceDataString``):
    ``type`` the ``TraceType`` (Pub, SubBefore, SubAfter, EndTransaction, Recall, or another
    a client wrote), the fields it carries (None where its type or client version writes none;
    text as written, a Java null as ``"null"``), ``msg_type`` the ``MessageType`` name,
    ``extra`` the fields past the known layout, ``problems`` numbers that did not parse; and
    the trace message holding it: its commit-log offset, topic and store time."""

    type: str
    timestamp: int | None
    msg_id: str | None
    offset_msg_id: str | None
    topic: str | None
    group: str | None
    keys: str | None
    tags: str | None
    region_id: str | None
    request_id: str | None
    store_host: str | None
    client_host: str | None
    body_length: int | None
    cost_time: int | None
    msg_type: str | None
    success: bool | None
    retry_times: int | None
    context_code: int | None
    transaction_id: str | None
    transaction_state: str | None
    from_transaction_check: bool | None
    extra: list[str]
    field_count: int
    problems: list[str]
    trace_offset: int
    trace_topic: str
    trace_store_timestamp: int

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def key_list(self) -> list[str]:
        """The traced message's keys (``keys`` split on spaces, a Java null none)."""
        return [k for k in (self.keys or "").split(" ") if k and self.keys != "null"]
