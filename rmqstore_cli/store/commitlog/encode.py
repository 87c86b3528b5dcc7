"""One commit-log record encoded: ``MessageExtEncoder#encode``, and the BLANK that closes a file.

The writer (:mod:`~rmqstore_cli.store.commitlog.writing`) fills in QUEUEOFFSET and
PHYSICALOFFSET once it knows where the record goes; the bulk twin is
:mod:`~rmqstore_cli.store.commitlog.blocks`.
"""

from __future__ import annotations

from rmqstore_cli.formats.commitlog import (
    BORNHOST_V6_FLAG,
    CRC32_PROPERTY,
    HOST_ADDRESS_SIZE,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    record_length,
)
from rmqstore_cli.formats.properties import MAX_PROPERTIES_LENGTH, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.commitlog.append import AppendSpec
from rmqstore_cli.store.commitlog.layout import (
    HEAD_STRUCT,
    MIDDLE_STRUCTS,
    PREFIX_STRUCT,
    PROPERTIES_LENGTH_SIZE,
    PROPERTIES_LENGTH_STRUCT,
    TOPIC_LENGTH_STRUCTS,
    host_kinds,
)
from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.layout.config import StoreConfig


def crc_property_value(crc: int) -> str:
    """``MessageDecoder#createCrc32``: 10 decimal digits, least significant first."""
    return str(crc).zfill(10)[::-1]


def blank_record(left: int) -> bytes:
    """The BLANK end-of-file record ``CommitLog.DefaultAppendMessageCallback#doAppend`` writes
    when the next message does not fit: int32 ``maxBlank`` (the bytes left in the file),
    int32 ``BLANK_MAGIC_CODE``, 8 bytes ("the remaining space may be any value")."""
    return PREFIX_STRUCT.pack(left, MAGIC_BLANK)


def choose_magic(topic: str, config: StoreConfig) -> int:
    """5.x: V2 when ``autoMessageVersionOnTopicLen`` and the topic has > 127 UTF-16 units."""
    units = len(topic.encode("utf-16-le", "surrogatepass")) // 2
    return MAGIC_V2 if config.auto_message_version_on_topic_len and units > 127 else MAGIC_V1


def encode_record(spec: AppendSpec, config: StoreConfig) -> bytearray:
    """``MessageExtEncoder#encode``: the record with QUEUEOFFSET and PHYSICALOFFSET still 0.

    With ``enabledAppendPropCRC`` the properties get a ``\\x02`` if they lack one and a
    20-byte ``__CRC32#`` placeholder; :meth:`CommitLog.append` fills in its digits.
    """
    magic = spec.magic if spec.magic is not None else choose_magic(spec.topic, config)
    sys_flag = _host_flags(spec)
    topic_b = spec.topic.encode("utf-8", "surrogatepass")
    props_b = _properties_bytes(spec, config)
    _refuse_oversized(magic, topic_b, props_b)
    return _pack_record(spec, magic, sys_flag, topic_b, props_b)


def _host_flags(spec: AppendSpec) -> int:
    """SYSFLAG with its two IPv6 flags set from the hosts' address widths, whatever the spec said."""
    sys_flag = spec.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if len(spec.born_host[0]) == HOST_ADDRESS_SIZE[True]:
        sys_flag |= BORNHOST_V6_FLAG
    if len(spec.store_host[0]) == HOST_ADDRESS_SIZE[True]:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return sys_flag


def _properties_bytes(spec: AppendSpec, config: StoreConfig) -> bytes:
    """The stored PROPERTIES: with ``enabledAppendPropCRC`` (and properties not given raw) a
    separator if missing and the ``__CRC32#`` placeholder the writer fills in."""
    props = spec.properties
    if config.enabled_append_prop_crc and not spec.raw_properties:
        if props and not props.endswith(PROPERTY_SEPARATOR):
            props += PROPERTY_SEPARATOR
        props += CRC32_PROPERTY + NAME_VALUE_SEPARATOR + "0" * 10 + PROPERTY_SEPARATOR
    return props if isinstance(props, bytes) else props.encode("utf-8", "surrogatepass")


def _refuse_oversized(magic: int, topic_b: bytes, props_b: bytes) -> None:
    """The broker's refusals: properties past ``PROPERTIES_SIZE_EXCEEDED``, a long topic in V1."""
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise StoreError(
            f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH} (PROPERTIES_SIZE_EXCEEDED)"
        )
    if magic == MAGIC_V1 and len(topic_b) > 127:
        raise StoreError(f"topic of {len(topic_b)} bytes needs a V2 record")


def _pack_record(spec: AppendSpec, magic: int, sys_flag: int, topic_b: bytes, props_b: bytes) -> bytearray:
    """The record's bytes in field order; QUEUEOFFSET and PHYSICALOFFSET 0."""
    body = spec.body
    total = record_length(sys_flag, magic, len(body), len(topic_b), len(props_b))
    crc = crc32(body) & 0x7FFFFFFF if body else 0
    out = bytearray(total)
    HEAD_STRUCT.pack_into(out, 0, total, magic, crc, spec.queue_id, spec.flag, 0, 0, sys_flag, spec.born_timestamp)
    mid = MIDDLE_STRUCTS[host_kinds(sys_flag)]
    p = HEAD_STRUCT.size
    mid.pack_into(
        out,
        p,
        spec.born_host[0],
        spec.born_host[1],
        spec.store_timestamp,
        spec.store_host[0],
        spec.store_host[1],
        spec.reconsume_times,
        spec.prepared_transaction_offset,
        len(body),
    )
    p += mid.size
    out[p : p + len(body)] = body
    p += len(body)
    tl = TOPIC_LENGTH_STRUCTS[magic]
    tl.pack_into(out, p, len(topic_b))
    p += tl.size
    out[p : p + len(topic_b)] = topic_b
    p += len(topic_b)
    PROPERTIES_LENGTH_STRUCT.pack_into(out, p, len(props_b))
    p += PROPERTIES_LENGTH_SIZE
    out[p : p + len(props_b)] = props_b
    return out
