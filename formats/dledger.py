"""DLedger commit-log layouts (openmessaging/dledger 0.3.1.2, the version RocketMQ 4.9.7 pins).

A DLedger broker (``enableDLegerCommitLog=true``) keeps its log in
``<storePathRootDir>/dledger-<selfId>/data/``: each entry is a 48-byte header
(``DLedgerEntryCoder#encode``) followed by the entry body, which is a standard commit-log
record (``DLedgerCommitLog#putMessage``). ``index/`` holds one 32-byte unit per entry index
(``DLedgerEntryCoder#encodeIndex``, ``DLedgerMmapFileStore.INDEX_UNIT_SIZE``). A data file
ends with a blank of ``MmapFileList#preAppend``: ``BLANK_MAGIC_CODE`` (-1) and the bytes left.
"""

from __future__ import annotations

import struct

from construct import Int32sb, Int64sb, Struct

from .derive import field_offset, fixed_fields_format, lazy_dtypes

#: ``DLedgerEntry`` as ``DLedgerEntryCoder#encode`` writes it before the body.
EntryHeader = Struct(
    "magic" / Int32sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
    "pos" / Int64sb,
    "channel" / Int32sb,
    "chain_crc" / Int32sb,
    "body_crc" / Int32sb,
    "body_size" / Int32sb,
)
ENTRY_HEADER_FORMAT = fixed_fields_format(EntryHeader)
#: ``DLedgerEntry.BODY_OFFSET``: the commit-log record starts this many bytes after the entry.
BODY_OFFSET = struct.calcsize(ENTRY_HEADER_FORMAT)
#: ``DLedgerEntry.HEADER_SIZE`` (BODY_OFFSET without bodySize): an entry is larger than this.
HEADER_SIZE = field_offset(EntryHeader, "body_size")

#: One unit of ``index/`` (``DLedgerEntryCoder#encodeIndex``).
IndexUnit = Struct(
    "magic" / Int32sb,
    "pos" / Int64sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
)
INDEX_UNIT_FORMAT = fixed_fields_format(IndexUnit)
#: ``DLedgerMmapFileStore.INDEX_UNIT_SIZE``
INDEX_UNIT_SIZE = struct.calcsize(INDEX_UNIT_FORMAT)
#: ``DLedgerConfig#mappedFileSizeForEntryIndex``: 32 * 5 * 1024 * 1024 bytes per index file.
INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024

#: ``DLedgerMmapFileStore.MAGIC_1`` / ``CURRENT_MAGIC``
ENTRY_MAGIC = 1
#: ``MmapFileList.BLANK_MAGIC_CODE``, then an int: the bytes left in the file.
BLANK_MAGIC = -1
#: ``MmapFileList.MIN_BLANK_LEN``: an entry is followed by at least this much room or a blank.
MIN_BLANK_LEN = 8
#: The blank's prefix: magic, size (``MmapFileList#preAppend``).
BLANK_FORMAT = ENTRY_HEADER_FORMAT[:3]
#: The bytes a blank starts with (its magic), what a search for the next entry looks for.
BLANK_MAGIC_BYTES = struct.pack(BLANK_FORMAT[:2], BLANK_MAGIC)
#: The blank's prefix length: what must remain for its size field to be read.
BLANK_PREFIX_SIZE = struct.calcsize(BLANK_FORMAT)

#: ``DLedgerMmapFileStore.CHECK_POINT_FILE`` keys (``persistCheckPoint``), and ``currterm``'s
#: (``MemberState#persistTerm``: ``currTerm``, ``voteLeader``).
CHECKPOINT_FILE = "checkpoint"
END_INDEX_KEY = "endIndex"
COMMITTED_INDEX_KEY = "committedIndex"
TERM_FILE = "currterm"
TERM_KEY = "currTerm"
VOTE_KEY = "voteLeader"

__getattr__ = lazy_dtypes(globals(), {"ENTRY_DTYPE": EntryHeader, "INDEX_DTYPE": IndexUnit})
