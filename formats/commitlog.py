"""CommitLog record layouts (STORE-FORMAT §2.2–§2.10).

The construct declarations below are the single truth for the record layout. They
are the tolerant, slow path (forensic decoding, building test data); the hot path in
``rmqstore_cli.store.commitlog`` uses ``struct`` formats *derived* from them by
:func:`fixed_fields_format`, and a test checks that both decode every field alike.
"""
from __future__ import annotations

import struct

from construct import (
    Bytes,
    Const,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    Rebuild,
    Struct,
    Switch,
    len_,
    this,
)

from .derive import field_format, fixed_fields_format

# The magic codes and flags are plain numbers (formats/sysflag.py), so code that only
# needs them (decode-msgid) does not import construct; they are re-exported here.
from .sysflag import (  # noqa: E402,F401 - re-exported for the record layout's users
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    CRC32_PROPERTY,
    CRC32_RESERVED_LEN,
    END_FILE_MIN_BLANK_LENGTH,
    INNER_BATCH_FLAG,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

HostV4 = Struct("address" / Bytes(4), "port" / Int32sb)
HostV6 = Struct("address" / Bytes(16), "port" / Int32sb)


def _host(v6_flag: int):
    return IfThenElse(lambda ctx: ctx.sys_flag & v6_flag, HostV6, HostV4)


def _host_len(sys_flag: int, v6_flag: int) -> int:
    return 20 if sys_flag & v6_flag else 8


def record_length(sys_flag: int, magic: int, body_len: int, topic_len: int, props_len: int) -> int:
    """``MessageExtEncoder#calMsgLength``: 74 + B + S + T + bodyLen + topicLen + propLen."""
    b = _host_len(sys_flag, BORNHOST_V6_FLAG)
    s = _host_len(sys_flag, STOREHOSTADDRESS_V6_FLAG)
    t = 2 if magic == MAGIC_V2 else 1
    return 74 + b + s + t + max(body_len, 0) + topic_len + max(props_len, 0)


def _total_size(ctx) -> int:
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


def middle_format(born_v6: bool, store_v6: bool) -> str:
    """BORNHOST … BODYLENGTH for the given host kinds, taken from :data:`MessageRecord`."""
    names = [sc.name for sc in MessageRecord.subcons]
    fields = MessageRecord.subcons[names.index("born_host"): names.index("body_length") + 1]
    out = ">"
    for sc in fields:
        sub = sc.subcon
        if isinstance(sub, IfThenElse):  # a host: v6 or v4 by its sysFlag bit
            v6 = born_v6 if sc.name == "born_host" else store_v6
            sub = sub.thensubcon if v6 else sub.elsesubcon
        out += field_format(sub)
    return out


_FIELDS = {sc.name: sc.subcon for sc in MessageRecord.subcons}
_TOPIC_SWITCH = _FIELDS["topic_length"].subcon
#: TOPICLENGTH: a signed byte in V1, a signed short in V2.
TOPIC_LENGTH_FORMAT = {MAGIC_V1: _TOPIC_SWITCH.default.fmtstr, MAGIC_V2: _TOPIC_SWITCH.cases[MAGIC_V2].fmtstr}
PROPERTIES_LENGTH_FORMAT = _FIELDS["properties_length"].subcon.fmtstr



# -- write-engine
#: STORETIMESTAMP on its own, read where BORNHOST ends (``isMappedFileMatchedRecover``).
STORE_TIMESTAMP_FORMAT = ">" + field_format(_FIELDS["store_timestamp"])
#: Widths of BODYLENGTH and PROPERTIESLENGTH: a record is cut short when its field does not fit.
BODY_LENGTH_SIZE = _FIELDS["body_length"].sizeof()
PROPERTIES_LENGTH_SIZE = _FIELDS["properties_length"].sizeof()
