"""Which kind of id a hex string is, and what it says (docs/format/message-ids.md).

An offset msgId (``MessageDecoder#createMessageId``: store address, int32 port, int64
offset) and a client UNIQ_KEY (``MessageClientIDSetter``: ip, short pid, int class-loader
hash, int time-in-month, short counter) have the *same* lengths: 32 hex digits with an
IPv4 address, 56 with an IPv6 one. The format cannot tell them apart, so each id is read
both ways and judged by plausibility:

* as an offset msgId, the port field must be 1…65535 and the offset 0 … 2^50 (1 PiB);
* as a UNIQ_KEY, the pid must not be 0 and the time-in-month below 31 days.

The two tests exclude each other in practice: an offset id read as a UNIQ_KEY has pid 0
(the port's high 16 bits), and a UNIQ_KEY read as an offset id has a port above 65535
(its pid in the high 16 bits) unless the process's ``(short) pid`` happens to be 0. When
both or neither reading is plausible the id is ``ambiguous`` and both readings are
shown. With a store, both readings are tried against it (the record at the offset; the
UNIQ_KEY through the index) and what is found decides.

No numpy here: ``decode-msgid`` must start fast.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from rmqstore_cli.formats.message_id import ID_HEX_LENGTHS

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.records.message import (
    Message,
    OffsetMsgId,
    UniqKey,
    decode_offset_msg_id,
    decode_uniq_key,
)

OFFSET_ID = "offset_msg_id"
UNIQ_KEY = "uniq_key"
AMBIGUOUS = "ambiguous"

MAX_PLAUSIBLE_OFFSET = 1 << 50
MAX_TIME_IN_MONTH_MS = 31 * 86_400_000
_HEX = set(string.hexdigits)


class BadId(ValueError):
    """Not a message id at all (length or characters)."""


@dataclass
class IdReading:
    """One id read both ways, with the verdict and why."""

    text: str  # as given
    id: str  # upper-case, as ids are stored and indexed
    offset: OffsetMsgId
    uniq: UniqKey
    offset_plausible: bool
    uniq_plausible: bool
    kind: str = AMBIGUOUS
    basis: str = ""
    #: Filled by a store look-up: the record at the offset, the records with this UNIQ_KEY.
    offset_message: Message | None = None
    offset_problem: str = ""
    uniq_messages: list[Message] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.offset_message is not None or bool(self.uniq_messages)


def parse_id(text: str) -> IdReading:
    """Read ``text`` both ways and judge by plausibility (see the module doc)."""
    s = text.strip()
    if not s:
        raise BadId("empty id")
    bad = next((c for c in s if c not in _HEX), None)
    if bad is not None:
        raise BadId(f"{bad!r} is not a hex digit")
    if len(s) not in ID_HEX_LENGTHS:
        raise BadId(f"it has {len(s)} hex digits; an offset msgId or UNIQ_KEY has 32 (IPv4) or 56 (IPv6)")
    u = s.upper()
    off = decode_offset_msg_id(u)
    uniq = decode_uniq_key(u)
    off_ok = 1 <= off.port <= 65535 and 0 <= off.physical_offset < MAX_PLAUSIBLE_OFFSET
    uniq_ok = uniq.pid != 0 and uniq.time_in_month_ms < MAX_TIME_IN_MONTH_MS
    r = IdReading(text, u, off, uniq, off_ok, uniq_ok)
    _judge_by_format(r)
    return r


def _judge_by_format(r: IdReading) -> None:
    o, q = r.offset, r.uniq
    why_not_uniq = "pid would be 0" if q.pid == 0 else f"time-in-month {q.time_in_month_ms} ms exceeds 31 days"
    why_not_offset = (
        f"port would be {o.port}" if not 1 <= o.port <= 65535 else f"offset {o.physical_offset} is implausibly large"
    )
    if r.offset_plausible and not r.uniq_plausible:
        r.kind, r.basis = OFFSET_ID, f"format: port {o.port}, offset {o.physical_offset}; as a UNIQ_KEY {why_not_uniq}"
    elif r.uniq_plausible and not r.offset_plausible:
        r.kind, r.basis = UNIQ_KEY, f"format: pid {q.pid}; as an offset msgId {why_not_offset}"
    elif r.uniq_plausible:
        r.kind, r.basis = AMBIGUOUS, "format: plausible both as an offset msgId and as a UNIQ_KEY"
    else:
        r.kind, r.basis = (
            AMBIGUOUS,
            (f"format: implausible both ways (as an offset msgId {why_not_offset}; as a UNIQ_KEY {why_not_uniq})"),
        )


def resolve_in_store(r: IdReading, store, topics: list[str]) -> None:
    """Try both readings against a store (a :class:`~rmqstore_cli.store.message_store.MessageStore`):
    the record at the offset, whose own offset field must agree; and the UNIQ_KEY through
    the index of every topic. What is found decides the kind."""
    if r.offset.physical_offset >= 0:
        _read_at_offset(r, store)
    index_problem = _look_up_uniq_key(r, store, topics)
    _decide_by_store(r)
    r.basis += index_problem


def _read_at_offset(r: IdReading, store) -> None:
    """The record at the offset reading's physical offset, kept only if its own offset field
    agrees (else the reason it is not the id's record)."""
    from rmqstore_cli.store.answers.lookup import read_record

    msg, why = read_record(store.commitlog, r.offset.physical_offset)
    if msg is not None and msg.offset != msg.physical_offset:
        msg, why = None, f"the record there says its offset is {msg.physical_offset}"
    r.offset_message, r.offset_problem = msg, why


def _look_up_uniq_key(r: IdReading, store, topics: list[str]) -> str:
    """The records carrying the id as UNIQ_KEY (index of every topic); returns the note to add
    when the index could not be read (the offset reading still stands)."""
    from rmqstore_cli.store.answers.lookup import lookup_key

    try:
        res = lookup_key(store.index, store.commitlog, topics, r.id, max_hits=0)
    except StoreError as e:
        return f"; the index could not be read ({e.message})"
    r.uniq_messages = [h.message for h in res.hits if h.match == "uniq_key"]
    return ""


def _decide_by_store(r: IdReading) -> None:
    """The kind from what the store holds: a record at the offset, records with the UNIQ_KEY, both."""
    by_offset = r.offset_message is not None
    if by_offset and r.uniq_messages:
        r.kind, r.basis = AMBIGUOUS, "store: a record lies at the offset and records carry it as UNIQ_KEY"
    elif by_offset:
        r.kind, r.basis = OFFSET_ID, f"store: a record starts at offset {r.offset.physical_offset}"
        if not store_host_matches(r):
            r.basis += f" but its store host is {r.offset_message.store_host}, not {r.offset.store_host}"
    elif r.uniq_messages:
        n = len(r.uniq_messages)
        r.kind, r.basis = (
            UNIQ_KEY,
            f"store: {n} record{'s' if n != 1 else ''} carr{'y' if n != 1 else 'ies'} it as UNIQ_KEY",
        )
    else:
        r.basis += "; not found in the store either way"


def store_host_matches(r: IdReading) -> bool | None:
    """Whether an offset id's store host is the store host of the record at its offset."""
    m = r.offset_message
    if m is None:
        return None
    return m.store_address == r.offset.address and m.store_port == r.offset.port


#: The UNIQ_KEY reading's fields in ``decode-msgid``'s JSON, None when the kind rules it out.
UNIQ_FIELDS = ("client_ip", "pid", "class_loader_hash", "time_in_month_ms", "nearly_time", "counter")


def describe_id(r: IdReading, now_ms: int, tz) -> dict:
    """An id after :func:`resolve_in_store` under ``decode-msgid``'s JSON names, each reading's
    fields None where the kind rules it out, ``messages`` the engine records found (the one
    at the offset first, each once)."""
    show_offset, show_uniq = r.kind != UNIQ_KEY, r.kind != OFFSET_ID
    uniq = _uniq_fields(r, now_ms, tz) if show_uniq else dict.fromkeys(UNIQ_FIELDS)
    return {
        "id": r.id,
        "kind": r.kind,
        "basis": r.basis,
        "store_host": r.offset.store_host if show_offset else None,
        "physical_offset": r.offset.physical_offset if show_offset else None,
        **uniq,
        "found": r.found,
        "host_matches_store": store_host_matches(r) if show_offset else None,
        "offset_problem": _offset_problem(r) if show_offset else None,
        "messages": _found_messages(r, show_offset, show_uniq),
    }


def _uniq_fields(r: IdReading, now_ms: int, tz) -> dict:
    """The UNIQ_KEY reading's fields (:data:`UNIQ_FIELDS`)."""
    q = r.uniq
    return {
        "client_ip": q.ip_str,
        "pid": q.pid,
        "class_loader_hash": f"{q.class_loader_hash & 0xFFFFFFFF:08X}",
        "time_in_month_ms": q.time_in_month_ms,
        "nearly_time": q.nearly_time(now_ms, tz),
        "counter": q.counter,
    }


def _offset_problem(r: IdReading) -> str | None:
    """Why no record stands at the offset (None when one does, or nothing was said)."""
    return r.offset_problem if r.offset_message is None and r.offset_problem else None


def _found_messages(r: IdReading, show_offset: bool, show_uniq: bool) -> list[Message]:
    """The records found by the readings the kind allows, the one at the offset first, each once."""
    msgs = [r.offset_message] if r.offset_message is not None and show_offset else []
    if show_uniq:
        msgs += r.uniq_messages
    once: dict[int, Message] = {}
    for m in msgs:
        once.setdefault(m.offset, m)
    return list(once.values())


def read_ids(texts: list[str], store=None, topics: list[str] | None = None):
    """Each text's reading, looked up in ``store`` when given (:func:`resolve_in_store`), as
    (text, reading or None, what went wrong or None): an id that is no id has no reading; one
    the store does not hold has its reading and a problem."""
    for text in texts:
        try:
            r = parse_id(text)
        except BadId as e:
            yield text, None, f"is not a message id: {e}"
            continue
        if store is not None:
            resolve_in_store(r, store, topics or [])
            if not r.found:
                yield text, r, "no message in the store by offset or UNIQ_KEY"
                continue
        yield text, r, None
