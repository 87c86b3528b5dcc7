"""One commit-log record read and judged: ``CommitLog#checkMessageAndReturnSize``.

A record is *valid*, the *BLANK* end-of-file marker, *invalid* (the log ends) or a *size
mismatch* (dispatch skips it, recovery ends): docs/format/commitlog.md#record-check. Every read
is bounded by the file's end, so a corrupted length is a verdict, never a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from rmqstore_cli.formats.commitlog import (
    CRC32_PROPERTY,
    CRC32_RESERVED_LEN,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    record_length,
)
from rmqstore_cli.formats.properties import NAME_VALUE_SEPARATOR

from rmqstore_cli.store.commitlog.layout import (
    FIXED_STRUCTS,
    FIXED_V4,
    HEAD_STRUCT,
    MIDDLE_STRUCTS,
    PREFIX_STRUCT,
    PROPERTIES_LENGTH_SIZE,
    PROPERTIES_LENGTH_STRUCT,
    SYS_FLAG_FIELD,
    TOPIC_LENGTH_STRUCTS,
    TOPIC_LENGTH_V1_SIZE,
    TOPIC_LENGTH_V2_SIZE,
    V6_FLAGS,
    host_kinds,
)
from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.records.message import Message

END_OF_DATA = "no message here (end of data)"


class Status(Enum):
    VALID = "valid"
    BLANK = "blank"
    INVALID = "invalid"
    SIZE_MISMATCH = "size-mismatch"


@dataclass(slots=True)
class Blank:
    """The BLANK end-of-file record: its size field counts the bytes to the file's end."""

    physical_offset: int
    total_size: int
    file: str


@dataclass(slots=True)
class Check:
    """The verdict on the bytes at one position; ``message`` is set when they decoded."""

    status: Status
    size: int
    reason: str = ""
    message: Message | None = None


def check_message(
    buf, pos: int, limit: int, file_from: int, check_crc: bool = False, force_prop_crc: bool = False
) -> Check:
    """``CommitLog#checkMessageAndReturnSize`` over ``buf[pos:limit]``.

    Bounds every read by ``limit`` (the file's end) the way a Java buffer does, so a
    corrupted length is an *invalid* record, never a crash or a huge allocation.

    The fast path decodes a well-formed record with one ``unpack`` (two for IPv6 hosts);
    anything else (or any doubt) goes to :func:`_check_exact`, which gives every verdict
    and reason.
    """
    if limit - pos >= FIXED_V4.size and not (check_crc and force_prop_crc):
        quick = _check_quick(buf, pos, limit, file_from, check_crc)
        if quick is not None:
            return quick
    return _check_exact(buf, pos, limit, file_from, check_crc, force_prop_crc)


def _check_quick(buf, pos: int, limit: int, file_from: int, check_crc: bool) -> Check | None:
    """The fast path: a VALID verdict for a well-formed record, None when in any doubt (the
    careful decode then gives the verdict and its reason)."""
    fixed, fields = _fixed_fields(buf, pos, limit)
    total, magic, crc, body_len = fields[0], fields[1], fields[2], fields[-1]
    if not _plausible(magic, body_len, fixed.size, total, limit - pos):
        return None
    parts = _variable_parts(buf, pos + fixed.size, pos + total, magic, body_len)
    if parts is None or not _body_crc_ok(check_crc, parts[0], crc):
        return None
    return Check(Status.VALID, total, "", _message(fields, parts, file_from + pos))


def _plausible(magic: int, body_len: int, fixed_size: int, total: int, room: int) -> bool:
    """A known MAGICCODE, a non-negative BODYLENGTH and a TOTALSIZE that holds the fixed fields
    and fits in the ``room`` left in the file."""
    return (magic == MAGIC_V1 or magic == MAGIC_V2) and body_len >= 0 and fixed_size <= total <= room


def _body_crc_ok(check_crc: bool, body: bytes, crc: int) -> bool:
    """BODYCRC against the body (``checkCRC``); an empty body is never checked."""
    return not check_crc or not body or crc32(body) & 0x7FFFFFFF == crc


def _message(fields: tuple, parts: tuple[bytes, bytes, bytes], offset: int) -> Message:
    """The :class:`Message` of the fixed fields (TOTALSIZE … BODYLENGTH, in record order) and
    the variable parts (BODY, TOPIC, PROPERTIES) of the record at ``offset``."""
    total, magic, crc, queue_id, flag, queue_offset, phy, *host_to_prepared, _body_len = fields
    return Message(phy, total, magic, crc, queue_id, flag, queue_offset, *host_to_prepared, *parts, offset)


def _fixed_fields(buf, pos: int, limit: int) -> tuple:
    """The fixed fields, TOTALSIZE to BODYLENGTH, and the layout SYSFLAG names: read with
    IPv4 hosts first (the common case, one ``unpack``), again with the IPv6 widths when
    SYSFLAG says a host is IPv6 and the record can hold them (``MessageDecoder#decode``: the
    flags choose 4 or 16 address bytes)."""
    fixed = FIXED_V4
    fields = fixed.unpack_from(buf, pos)
    total, sys_flag = fields[0], fields[SYS_FLAG_FIELD]
    if sys_flag & V6_FLAGS and 0 < total <= limit - pos:
        fixed = FIXED_STRUCTS[host_kinds(sys_flag)]
        if fixed.size <= total:
            fields = fixed.unpack_from(buf, pos)
    return fixed, fields  # a wide layout larger than TOTALSIZE: the caller's size check fails


def _variable_parts(buf, start: int, end: int, magic: int, body_len: int) -> tuple[bytes, bytes, bytes] | None:
    """BODY, TOPIC and PROPERTIES between the fixed fields (``start``) and the record's end
    (``end``, from TOTALSIZE), or None unless their lengths are sane and add up to the end
    exactly; a V1 record's topic length is a signed byte, a V2 record's a short
    (``MessageVersion``). Every read stays below ``end``."""
    p = start + body_len
    if magic == MAGIC_V1:
        topic_len = buf[p] if p < end else -1
        if topic_len > 127:
            topic_len = -1  # a signed byte: negative, invalid
        p += TOPIC_LENGTH_V1_SIZE
    else:
        topic_len = (
            int.from_bytes(buf[p : p + TOPIC_LENGTH_V2_SIZE], "big", signed=True)
            if p + TOPIC_LENGTH_V2_SIZE <= end
            else -1
        )
        p += TOPIC_LENGTH_V2_SIZE
    if topic_len < 0 or p + topic_len + PROPERTIES_LENGTH_SIZE > end:
        return None
    topic = buf[p : p + topic_len]
    p += topic_len
    props_len = int.from_bytes(buf[p : p + PROPERTIES_LENGTH_SIZE], "big", signed=True)
    p += PROPERTIES_LENGTH_SIZE
    if props_len < 0 or p + props_len != end:
        return None
    return buf[start : start + body_len], topic, buf[p : p + props_len]


class _Invalid(Exception):
    """The careful decode met bytes that cannot be a record; the message is the reason."""


def _check_exact(buf, pos: int, limit: int, file_from: int, check_crc: bool, force_prop_crc: bool) -> Check:
    """The careful decode: every read bounded, every verdict with its reason."""
    early = _check_prefix(buf, pos, limit)
    if early is not None:
        return early
    try:
        fields, parts, props_len = _read_exact(buf, pos, limit, check_crc and not force_prop_crc)
    except _Invalid as e:
        return Check(Status.INVALID, -1, str(e))
    msg = _message(fields, parts, file_from + pos)
    total, magic, sys_flag, body_len = fields[0], fields[1], fields[SYS_FLAG_FIELD], fields[-1]
    if check_crc and force_prop_crc and not _prop_crc_ok(buf, pos, total, parts[2]):
        return Check(Status.INVALID, -1, "whole-record CRC (__CRC32#) missing or wrong", msg)
    expected = record_length(sys_flag, magic, body_len, len(parts[1]), props_len)
    if expected != total:
        return Check(Status.SIZE_MISMATCH, total, f"total size {total} but fields add up to {expected}", msg)
    return Check(Status.VALID, total, "", msg)


def _check_prefix(buf, pos: int, limit: int) -> Check | None:
    """The verdict TOTALSIZE and MAGICCODE alone give (a BLANK, a bad magic code, a size that
    cannot fit), or None when the record must be read on."""
    if limit - pos < 8:
        return Check(Status.INVALID, -1, "fewer than 8 bytes left in the file")
    total, magic = PREFIX_STRUCT.unpack_from(buf, pos)
    if magic == MAGIC_BLANK:
        return Check(Status.BLANK, 0)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return Check(Status.INVALID, -1, END_OF_DATA if magic == 0 and total == 0 else f"bad magic code 0x{magic:08X}")
    if total < HEAD_STRUCT.size or total - 4 > limit - pos - 4:
        return Check(Status.INVALID, -1, f"total size {total} does not fit in the {limit - pos} bytes left")
    return None


def _read_exact(buf, pos: int, limit: int, body_crc: bool) -> tuple[tuple, tuple[bytes, bytes, bytes], int]:
    """The fixed fields, (BODY, TOPIC, PROPERTIES) and the stored PROPERTIESLENGTH (the size
    check counts it even when negative) of the record at ``pos``; raises :class:`_Invalid` at
    the first read that would pass ``limit``, or on a body CRC mismatch (``body_crc``)."""
    head = HEAD_STRUCT.unpack_from(buf, pos)
    mid = MIDDLE_STRUCTS[host_kinds(head[SYS_FLAG_FIELD])]
    p = pos + HEAD_STRUCT.size
    if p + mid.size > limit:
        raise _Invalid("record truncated in its fixed fields")
    fields = head + mid.unpack_from(buf, p)
    magic, crc, body_len = fields[1], fields[2], fields[-1]
    body, p = _exact_body(buf, p + mid.size, limit, body_len, crc if body_crc else None)
    topic, p = _exact_topic(buf, p, limit, magic)
    props, props_len = _exact_props(buf, p, limit)
    return fields, (body, topic, props), props_len


def _exact_body(buf, p: int, limit: int, body_len: int, crc: int | None) -> tuple[bytes, int]:
    """BODY at ``p`` and the position after it; ``crc``: the BODYCRC to check it against."""
    if body_len <= 0:
        return b"", p
    if p + body_len > limit:
        raise _Invalid(f"body length {body_len} runs past the file's end")
    body = buf[p : p + body_len]
    if crc is not None and (crc32(body) & 0x7FFFFFFF) != crc:
        raise _Invalid(f"body CRC mismatch (stored {crc}, computed {crc32(body) & 0x7FFFFFFF})")
    return body, p + body_len


def _exact_topic(buf, p: int, limit: int, magic: int) -> tuple[bytes, int]:
    """TOPICLENGTH (its width by MAGICCODE) and TOPIC at ``p``, and the position after them."""
    tl = TOPIC_LENGTH_STRUCTS[magic]
    if p + tl.size > limit:
        raise _Invalid("record truncated before its topic")
    (topic_len,) = tl.unpack_from(buf, p)
    p += tl.size
    if topic_len < 0 or p + topic_len > limit:
        raise _Invalid(f"bad topic length {topic_len}")
    return buf[p : p + topic_len], p + topic_len


def _exact_props(buf, p: int, limit: int) -> tuple[bytes, int]:
    """PROPERTIES at ``p`` (empty unless PROPERTIESLENGTH is positive) and the stored length."""
    if p + PROPERTIES_LENGTH_SIZE > limit:
        raise _Invalid("record truncated before its properties")
    (props_len,) = PROPERTIES_LENGTH_STRUCT.unpack_from(buf, p)
    p += PROPERTIES_LENGTH_SIZE
    if props_len <= 0:
        return b"", props_len
    if p + props_len > limit:
        raise _Invalid(f"properties length {props_len} runs past the file's end")
    return buf[p : p + props_len], props_len


def _prop_crc_ok(buf, pos: int, total: int, props: bytes) -> bool:
    """``__CRC32#`` value (digits least significant first) vs CRC of the record less 20 bytes."""
    marker = (CRC32_PROPERTY + NAME_VALUE_SEPARATOR).encode()
    i = props.rfind(marker)
    if i < 0:
        return False
    digits = props[i + len(marker) : i + len(marker) + 10]
    if len(digits) != 10 or not digits.isdigit():
        return False
    stored = int(digits[::-1])
    return stored == crc32(buf[pos : pos + total - CRC32_RESERVED_LEN]) & 0x7FFFFFFF


def is_clean_end(buf, pos: int, reason: str, last_file: bool) -> bool:
    """The log ends cleanly where the last file's preallocated zero tail begins
    (docs/format/store-layout.md#the-end-of-the-data); anything else is a torn or damaged end."""
    return last_file and reason == END_OF_DATA and not any(buf[pos : pos + 4096])


def check_framed(
    buf, pos: int, limit: int, file_from: int, header: int, check_crc: bool = False, force_prop_crc: bool = False
) -> Check:
    """:func:`check_message` for the record framed at ``pos``: itself (``header`` 0), or inside
    the DLedger entry starting there (:func:`_check_entry`)."""
    if not header:
        return check_message(buf, pos, limit, file_from, check_crc, force_prop_crc)
    return _check_entry(buf, pos, limit, file_from, header, check_crc, force_prop_crc)


def _check_entry(
    buf, pos: int, limit: int, file_from: int, header: int, check_crc: bool, force_prop_crc: bool
) -> Check:
    """``DLedgerCommitLog#checkMessageAndReturnSize``: the entry's blank is BLANK, a record is
    read ``header`` bytes on and the size includes the header. An entry that
    ``DLedgerMmapFileStore#recover`` would reject is INVALID."""
    from rmqstore_cli.store.commitlog.dledger import entry_stop_kind, read_entry

    if limit - pos >= 8 and entry_stop_kind(buf, pos) == "blank":
        return Check(Status.BLANK, 0)
    e = read_entry(buf, pos)
    problem = _entry_refusal(e, file_from + pos, limit - pos)
    if problem:
        return Check(Status.INVALID, -1, problem)
    c = check_message(buf, pos + header, limit, file_from, check_crc, force_prop_crc)
    if c.status is Status.VALID and c.size + header != e.size:
        return Check(Status.INVALID, -1, f"DLedger entry size {e.size} != record size {c.size} + {header}", c.message)
    if c.size > 0:
        c.size += header
    return c


def _entry_refusal(e, offset: int, room: int) -> str:
    """Why the DLedger entry ``e`` (None: unreadable) at ``offset`` ends the log: a zeroed
    entry is the end of data, else ``dledger.entry_problem``'s reason ("" when it is sound)."""
    from rmqstore_cli.store.commitlog.dledger import entry_problem

    if e is not None and e.magic == 0 and e.size == 0:
        return END_OF_DATA
    return entry_problem(e, offset, room)
