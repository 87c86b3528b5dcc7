"""CommitLog record layouts (docs/format/commitlog.md#record-layout).

The construct declarations below are the single truth for the record layout. They
are the tolerant, slow path (forensic decoding, building test data); the hot path in
``rmqstore_cli.store.commitlog`` uses ``struct`` formats *derived* from them by
:func:`fixed_fields_format`, and a test checks that both decode every field alike.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from construct import (
    Bytes,
    Const,
    Construct,
    Container,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Rebuild,
    Struct,
    Subconstruct,
    Switch,
    len_,
    this,
)

from .derive import field_format, fixed_fields_format, lazy_dtypes, numpy_code

# The magic codes and flags are plain numbers (formats/sysflag.py), so code that only
# needs them (decode-msgid) does not import construct; they are re-exported here.
from .sysflag import (  # re-exported for the record layout's users (``X as X``: explicitly)
    BORNHOST_V6_FLAG as BORNHOST_V6_FLAG,
    COMPRESSED_FLAG as COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK as COMPRESSION_TYPE_MASK,
    CRC32_PROPERTY as CRC32_PROPERTY,
    CRC32_RESERVED_LEN as CRC32_RESERVED_LEN,
    END_FILE_MIN_BLANK_LENGTH as END_FILE_MIN_BLANK_LENGTH,
    INNER_BATCH_FLAG as INNER_BATCH_FLAG,
    MAGIC_BLANK as MAGIC_BLANK,
    MAGIC_V1 as MAGIC_V1,
    MAGIC_V2 as MAGIC_V2,
    MULTI_TAGS_FLAG as MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG as NEED_UNWRAP_FLAG,
    STOREHOSTADDRESS_V6_FLAG as STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_COMMIT_TYPE as TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK as TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE as TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE as TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE as TRANSACTION_ROLLBACK_TYPE,
)

HostV4 = Struct("address" / Bytes(4), "port" / Int32sb)
HostV6 = Struct("address" / Bytes(16), "port" / Int32sb)


def _host(v6_flag: int) -> Construct:
    return IfThenElse(lambda ctx: ctx.sys_flag & v6_flag, HostV6, HostV4)


def record_length(sys_flag: int, magic: int, body_len: int, topic_len: int, props_len: int) -> int:
    """``MessageExtEncoder#calMsgLength``: the fixed fields (:data:`RECORD_FIXED_SIZE`), the
    two hosts and TOPICLENGTH by their kinds, then the body, topic and properties."""
    return (
        RECORD_FIXED_SIZE
        + HOST_SIZE[bool(sys_flag & BORNHOST_V6_FLAG)]
        + HOST_SIZE[bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)]
        + TOPIC_LENGTH[magic == MAGIC_V2].size
        + max(body_len, 0)
        + topic_len
        + max(props_len, 0)
    )


def _total_size(ctx: Container) -> int:
    return record_length(ctx.sys_flag, ctx.magic, len(ctx.body), len(ctx.topic), len(ctx.properties))


#: A whole message record, V1 or V2, IPv4 or IPv6 hosts (``DefaultAppendMessageCallback``).
MessageRecord = Struct(
    "total_size" / Rebuild(Int32sb, _total_size),
    "magic" / Int32ub,
    "body_crc" / Int32sb,
    "queue_id" / Int32sb,
    "flag" / Int32sb,
    "queue_offset" / Int64sb,
    "physical_offset" / Int64sb,
    "sys_flag" / Int32sb,
    "born_timestamp" / Int64sb,
    "born_host" / _host(BORNHOST_V6_FLAG),
    "store_timestamp" / Int64sb,
    "store_host" / _host(STOREHOSTADDRESS_V6_FLAG),
    "reconsume_times" / Int32sb,
    "prepared_transaction_offset" / Int64sb,
    "body_length" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(lambda ctx: max(ctx.body_length, 0)),
    "topic_length" / Rebuild(Switch(this.magic, {MAGIC_V2: Int16sb}, default=Int8sb), len_(this.topic)),
    "topic" / Bytes(this.topic_length),
    "properties_length" / Rebuild(Int16sb, len_(this.properties)),
    "properties" / Bytes(lambda ctx: max(ctx.properties_length, 0)),
)

#: The fixed head of every record, TOTALSIZE … BORNTIMESTAMP (48 bytes): the first nine
#: fields of :data:`MessageRecord`, which the broker reads at fixed positions.
MessageHead = Struct(*MessageRecord.subcons[:9])

#: The 8-byte end-of-file marker (``CommitLog.DefaultAppendMessageCallback#doAppend``).
BlankRecord = Struct(
    "total_size" / Int32sb,
    "magic" / Const(MAGIC_BLANK, Int32ub),
)

#: The two ints every scan reads first: TOTALSIZE, MAGICCODE.
RecordPrefix = Struct("total_size" / Int32sb, "magic" / Int32ub)

HEAD_FORMAT = fixed_fields_format(MessageHead)
HEAD_SIZE = struct.calcsize(HEAD_FORMAT)
PREFIX_FORMAT = fixed_fields_format(RecordPrefix)
#: numpy record dtypes, made on first use (numpy is not imported for the per-record paths):
#: ``HEAD_DTYPE``, the head (names of :data:`MessageHead`); ``PREFIX_DTYPE``, TOTALSIZE and
#: MAGICCODE (``total_size``, ``magic``).
__getattr__ = lazy_dtypes(globals(), {"HEAD_DTYPE": MessageHead, "PREFIX_DTYPE": RecordPrefix})


def middle_format(born_v6: bool, store_v6: bool) -> str:
    """BORNHOST … BODYLENGTH for the given host kinds, taken from :data:`MessageRecord`."""
    out = ">"
    for sc in _subcons("born_host", "body_length"):
        sub = sc.subcon
        if isinstance(sub, IfThenElse):  # a host: v6 or v4 by its sysFlag bit
            v6 = born_v6 if sc.name == "born_host" else store_v6
            sub = sub.thensubcon if v6 else sub.elsesubcon
        out += field_format(sub)
    return out


# ---------------------------------------------------------------- named positions
# ``MessageDecoder#decode`` reads a record as parts of fixed layout separated by parts
# whose size depends on the record: the head (48 bytes), BORNHOST (8 or 20 by SYSFLAG),
# STORETIMESTAMP, STOREHOST (8 or 20), the tail RECONSUMETIMES … BODYLENGTH, the body,
# TOPICLENGTH (1 byte in V1, 2 in V2), the topic, PROPERTIESLENGTH, the properties. Each
# fixed field is named below with its offset from the start of its part, so a reader adds
# the sizes of the variable parts before it and never writes a number of its own.


class FieldAt(NamedTuple):
    """One fixed-size field: ``offset`` from the start of its part, ``size`` in bytes, its
    ``struct`` format (with byte order) and big-endian numpy ``dtype`` string."""

    offset: int
    size: int
    fmt: str
    dtype: str


def _subcons(first: str, last: str) -> list[Subconstruct]:
    every: list[Subconstruct] = MessageRecord.subcons
    names = [sc.name for sc in every]
    return every[names.index(first) : names.index(last) + 1]


def _fields(part: list[Subconstruct]) -> dict[str, FieldAt]:
    out, at = {}, 0
    for sc in part:
        size = sc.subcon.sizeof()
        out[sc.name] = FieldAt(at, size, ">" + field_format(sc.subcon), numpy_code(sc.subcon))
        at += size
    return out


#: TOTALSIZE … BORNTIMESTAMP, from the record's start (``MessageDecoder.SYSFLAG_POSITION`` …).
HEAD: dict[str, FieldAt] = _fields(MessageHead.subcons)
#: The part after BORNHOST: STORETIMESTAMP, from the end of BORNHOST.
AFTER_BORN_HOST: dict[str, FieldAt] = _fields(_subcons("store_timestamp", "store_timestamp"))
AFTER_BORN_HOST_SIZE = sum(f.size for f in AFTER_BORN_HOST.values())
#: The part after STOREHOST: RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH, from the
#: end of STOREHOST; the body follows it.
AFTER_STORE_HOST: dict[str, FieldAt] = _fields(_subcons("reconsume_times", "body_length"))
AFTER_STORE_HOST_SIZE = sum(f.size for f in AFTER_STORE_HOST.values())
BODY_LENGTH = AFTER_STORE_HOST["body_length"]

#: A host (BORNHOST, STOREHOST) is its address then its port: its size and its address's
#: size by kind (False: IPv4, True: IPv6, the SYSFLAG bit); PORT's offset is from the end
#: of the address.
HOST_SIZE: dict[bool, int] = {False: HostV4.sizeof(), True: HostV6.sizeof()}
HOST_ADDRESS_SIZE = {v6: _fields(h.subcons)["port"].offset for v6, h in ((False, HostV4), (True, HostV6))}
PORT: FieldAt = _fields(HostV4.subcons[1:])["port"]

_FIELDS = {sc.name: sc.subcon for sc in MessageRecord.subcons}
_TOPIC_SWITCH = _FIELDS["topic_length"].subcon
#: TOPICLENGTH after the body, by ``magic == MAGIC_V2``: a signed byte in V1, a signed short in V2.
TOPIC_LENGTH: dict[bool, FieldAt] = {
    v2: FieldAt(0, sub.sizeof(), sub.fmtstr, numpy_code(sub))
    for v2, sub in ((False, _TOPIC_SWITCH.default), (True, _TOPIC_SWITCH.cases[MAGIC_V2]))
}
#: TOPICLENGTH's ``struct`` format by magic code.
TOPIC_LENGTH_FORMAT = {MAGIC_V1: TOPIC_LENGTH[False].fmt, MAGIC_V2: TOPIC_LENGTH[True].fmt}
#: PROPERTIESLENGTH after the topic; the properties follow it.
PROPERTIES_LENGTH: FieldAt = _fields(_subcons("properties_length", "properties_length"))["properties_length"]
PROPERTIES_LENGTH_FORMAT = PROPERTIES_LENGTH.fmt

#: ``CommitLog#calMsgLength`` without the hosts, TOPICLENGTH and the variable parts: every
#: other fixed field of :data:`MessageRecord` (4.9.x writes it as the literal 4+4+…+2).
RECORD_FIXED_SIZE = HEAD_SIZE + AFTER_BORN_HOST_SIZE + AFTER_STORE_HOST_SIZE + PROPERTIES_LENGTH.size

#: The fixed fields any record has, in order, by host kinds: TOTALSIZE … BODYLENGTH.
FIXED_FORMAT = {(b, s): HEAD_FORMAT + middle_format(b, s)[1:] for b in (False, True) for s in (False, True)}
#: The smallest possible record: IPv4 hosts, V1, empty body, topic and properties.
MIN_RECORD_SIZE = record_length(0, MAGIC_V1, 0, 0, 0)

#: STORETIMESTAMP on its own, read where BORNHOST ends (``isMappedFileMatchedRecover``).
STORE_TIMESTAMP_FORMAT = AFTER_BORN_HOST["store_timestamp"].fmt
#: Widths of BODYLENGTH and PROPERTIESLENGTH: a record is cut short when its field does not fit.
BODY_LENGTH_SIZE = BODY_LENGTH.size
PROPERTIES_LENGTH_SIZE = PROPERTIES_LENGTH.size
