"""How much verify reads at a time: the sizes that bound its memory and choose its fast paths.

Read at run time (``limits.X``), so a test can shrink them to cross every boundary.
"""

from __future__ import annotations

#: Records walked and checked at a time (at most; about ``BATCH_BYTES`` of records after a first probe).
BATCH = 32768
BATCH_BYTES = 32 << 20
#: A commit-log file's mapped pages are released every this many bytes of the walk.
RELEASE_EVERY = 64 << 20
#: Index entries (and slots) the structure check reads at a time, and entries whose incoming
#: links it counts in one pass over the links: its memory does not grow with the file.
INDEX_CHUNK = 1 << 18
INDEX_TARGETS = 1 << 21
#: Units of a queue the finish reads (and whose mapped pages it releases) at a time:
#: verify's memory does not grow with a queue's length.
UNIT_CHUNK = 1 << 16
