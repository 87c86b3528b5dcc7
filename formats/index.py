"""Index file layout (docs/format/index.md#layout): 40-byte header, 4-byte slots, 20-byte entries."""

from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from .derive import fixed_fields_format, lazy_dtypes

#: ``IndexHeader``.
IndexHeader = Struct(
    "begin_timestamp" / Int64sb,
    "end_timestamp" / Int64sb,
    "begin_phy_offset" / Int64sb,
    "end_phy_offset" / Int64sb,
    "hash_slot_count" / Int32sb,
    "index_count" / Int32sb,
)
INDEX_HEADER_SIZE: int = IndexHeader.sizeof()
HEADER_FORMAT = fixed_fields_format(IndexHeader)

#: One hash slot: the number of the newest entry of the slot's chain, 0 = empty.
IndexSlot = Struct("entry" / Int32sb)
HASH_SLOT_SIZE: int = IndexSlot.sizeof()
SLOT_FORMAT = fixed_fields_format(IndexSlot)

#: ``IndexFile#putKey``'s entry.
IndexEntry = Struct(
    "key_hash" / Int32sb,
    "phy_offset" / Int64sb,
    "time_diff" / Int32sb,
    "prev_index" / Int32sb,
)
INDEX_ENTRY_SIZE: int = IndexEntry.sizeof()
ENTRY_FORMAT = fixed_fields_format(IndexEntry)


def index_file_size(max_hash_slot_num: int, max_index_num: int) -> int:
    return INDEX_HEADER_SIZE + max_hash_slot_num * HASH_SLOT_SIZE + max_index_num * INDEX_ENTRY_SIZE


#: ``HEADER_DTYPE``, ``ENTRY_DTYPE``, ``SLOT_DTYPE``: the index header, entry and hash slot
#: as big-endian numpy records (names of the declarations), made on first use (no numpy
#: for the per-record paths).
__getattr__ = lazy_dtypes(globals(), {"HEADER_DTYPE": IndexHeader, "ENTRY_DTYPE": IndexEntry, "SLOT_DTYPE": IndexSlot})


#: ``IndexFile#putKey`` clamps timeDiff to ``Integer.MAX_VALUE``: the largest value of its
#: signed 32-bit field.
TIME_DIFF_MAX: int = (1 << (8 * IndexEntry.time_diff.sizeof() - 1)) - 1
