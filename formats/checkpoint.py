"""``StoreCheckpoint`` (docs/format/checkpoint.md#checkpoint): big-endian longs in a 4096-byte file."""

from __future__ import annotations

from construct import Int64sb, Struct

from .derive import fixed_fields_format

CHECKPOINT_FILE_SIZE = 4096  # mapped with OS_PAGE_SIZE

#: 4.9.x writes the first three fields; 5.x adds two more.
CheckpointV4 = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
)
CheckpointV5 = Struct(
    "physic_msg_timestamp" / Int64sb,
    "logics_msg_timestamp" / Int64sb,
    "index_msg_timestamp" / Int64sb,
    "master_flushed_offset" / Int64sb,
    "confirm_phy_offset" / Int64sb,
)
CHECKPOINT_V5_FORMAT = fixed_fields_format(CheckpointV5)
