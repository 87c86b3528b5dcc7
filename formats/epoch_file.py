"""5.x controller mode's ``epochFileCheckpoint`` (docs/format/ha.md#epoch-file): a text file.

``CheckpointFile#write`` lays it out as the number of entries, the CRC of the entry lines and
one ``<epoch>-<start offset>`` line per entry (``EpochFileCache.EpochEntrySerializer#toLine``),
every line ended by ``System.lineSeparator()`` (``\\n`` on Linux), UTF-8.
"""

from __future__ import annotations

import re

#: ``MessageStoreConfig#getStorePathEpochFile``: in the store root by default.
EPOCH_FILE_NAME = "epochFileCheckpoint"
#: ``CheckpointFile#getBackFilePath``: the previous version (``MixAll#string2File``).
BACKUP_SUFFIX = ".bak"
#: ``System.lineSeparator()`` of a Linux broker.
LINE_SEPARATOR = "\n"
#: ``EpochEntrySerializer#toLine``: ``String.format("%d-%d", epoch, startOffset)``.
FIELD_SEPARATOR = "-"
#: ``CheckpointFile.NOT_CHECK_CRC_MAGIC_CODE``: a stored CRC of 0 is not checked.
NOT_CHECK_CRC = 0
#: ``UtilAll#crc32``: the CRC-32 with its top bit cleared.
CRC_MASK = 0x7FFFFFFF
#: Java's ``int`` (the count, the CRC and the epoch) and ``long`` (the start offset) ranges:
#: ``Integer#parseInt`` / ``Long#parseLong`` outside them throw NumberFormatException.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
#: What ``Integer#parseInt`` accepts: an optional sign and ASCII digits (this reader takes
#: only ASCII digits; Java also takes other Unicode digits, which no broker writes).
JAVA_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")
#: ``BufferedReader#readLine`` ends a line at ``\n``, ``\r`` or ``\r\n``.
READLINE_BREAKS = re.compile(r"\r\n|\r|\n")
