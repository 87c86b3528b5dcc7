"""The ``struct`` layouts of one commit-log record, derived once from ``formats.commitlog``.

Shared by the per-record read (:mod:`~rmqstore_cli.store.commitlog.record`), the encoder
(:mod:`~rmqstore_cli.store.commitlog.encode`) and the writer, so that each layout is built in
one place and every offset and width still comes from ``formats/``.
"""

from __future__ import annotations

import struct

from rmqstore_cli.formats import commitlog as F

#: TOTALSIZE … BORNTIMESTAMP.
HEAD_STRUCT = struct.Struct(F.HEAD_FORMAT)
#: TOTALSIZE and MAGICCODE: all a BLANK holds.
PREFIX_STRUCT = struct.Struct(F.PREFIX_FORMAT)
#: BORNHOST … BODYLENGTH, keyed by (born host is IPv6, store host is IPv6).
MIDDLE_STRUCTS = {(b, s): struct.Struct(F.middle_format(b, s)) for b in (False, True) for s in (False, True)}
#: TOPICLENGTH by MAGICCODE: a signed byte in V1, a short in V2 (``MessageVersion``).
TOPIC_LENGTH_STRUCTS = {magic: struct.Struct(fmt) for magic, fmt in F.TOPIC_LENGTH_FORMAT.items()}
PROPERTIES_LENGTH_STRUCT = struct.Struct(F.PROPERTIES_LENGTH_FORMAT)
TOPIC_LENGTH_V1_SIZE = F.TOPIC_LENGTH[False].size
TOPIC_LENGTH_V2_SIZE = F.TOPIC_LENGTH[True].size
PROPERTIES_LENGTH_SIZE = F.PROPERTIES_LENGTH.size
#: TOTALSIZE … BODYLENGTH in one ``unpack``, keyed like :data:`MIDDLE_STRUCTS`.
FIXED_STRUCTS = {kinds: struct.Struct(fmt) for kinds, fmt in F.FIXED_FORMAT.items()}
FIXED_V4 = FIXED_STRUCTS[(False, False)]
V6_FLAGS = F.BORNHOST_V6_FLAG | F.STOREHOSTADDRESS_V6_FLAG
QUEUE_OFFSET_FIELD = F.HEAD["queue_offset"]  # MessageDecoder.QUEUE_OFFSET_POSITION
PHY_FIELD = F.HEAD["physical_offset"]  # MessageDecoder.PHY_POS_POSITION
#: SYSFLAG's place among the fixed fields an ``unpack`` of :data:`FIXED_STRUCTS` returns.
SYS_FLAG_FIELD = [sc.name for sc in F.MessageHead.subcons].index("sys_flag")


def host_kinds(sys_flag: int) -> tuple[bool, bool]:
    """Whether the born and the store host are IPv6: SYSFLAG's two flags choose 4 or 16 address
    bytes (``MessageDecoder#decode``)."""
    return bool(sys_flag & F.BORNHOST_V6_FLAG), bool(sys_flag & F.STOREHOSTADDRESS_V6_FLAG)
