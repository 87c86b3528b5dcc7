"""Consume-queue units (docs/format/consume-queue.md#unit, docs/format/consume-queue.md#consume-queue-ext)."""

from __future__ import annotations

from construct import Bytes, Int16sb, Int32sb, Int64sb, Struct

from .derive import field_offset, fixed_fields_format

#: ``ConsumeQueue#putMessagePositionInfo``: one 20-byte unit per dispatched message.
ConsumeQueueUnit = Struct(
    "commitlog_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
)
CQ_STORE_UNIT_SIZE: int = ConsumeQueueUnit.sizeof()
UNIT_FORMAT = fixed_fields_format(ConsumeQueueUnit)

#: ``ConsumeQueue#fillPreBlank``: the unit written below the first real unit of a queue.
PRE_BLANK_SIZE = 0x7FFFFFFF

#: ``ConsumeQueueExt.CqExtUnit#write`` (read side).
ConsumeQueueExtUnit = Struct(
    "size" / Int16sb,
    "tags_code" / Int64sb,
    "msg_store_time" / Int64sb,
    "bitmap_size" / Int16sb,
    "filter_bitmap" / Bytes(lambda ctx: max(ctx.bitmap_size, 0)),
)
CQ_EXT_HEADER_SIZE = 20
#: ``ConsumeQueueExt#isExtAddr``: addresses are <= Integer.MIN_VALUE - 1.
EXT_ADDR_MAX = -(1 << 31) - 1

#: Where TAGSCODE starts in a unit: the bytes of COMMITLOGOFFSET and SIZE before it
#: (``ConsumeQueue#getOffsetInQueueByTime`` reads only those: ``getLong(); getInt()``).
UNIT_TAGS_CODE_AT = field_offset(ConsumeQueueUnit, "tags_code")
