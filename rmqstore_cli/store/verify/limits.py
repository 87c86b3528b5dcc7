"""How much verify reads at a time: the sizes that bound its memory and choose its fast paths.

Read at run time (``limits.X``), so a test can shrink them to cross every boundary.
"""

from __future__ import annotations

#: Records walked and checked at a time (at most; about ``BATCH_BYTES`` of records after a first probe).
#: 64 MiB: a store of 16 KiB bodies is checked in half as many batches as with 32 (each
#: batch's per-queue numpy work is the same for 2 000 records as for 4 000: -0.07 s CPU of
#: 0.75 s, measured), and released every 32 MiB its peak RSS fell 155 -> 124 MB.
BATCH = 32768
BATCH_BYTES = 64 << 20
#: A commit-log file's mapped pages are released every this many bytes of the walk.
RELEASE_EVERY = 32 << 20
#: Index entries (and slots) the structure check reads at a time, and entries whose incoming
#: links it counts in one pass over the links (8 bytes each: a hash, a count; the used slots
#: are kept, 8 bytes each, while as few): its memory does not grow with the file. 4 Mi
#: targets: the default index file's 20 M entries in five ranges; the 3 M entries of a 1 M-send
#: store in one (with 2 Mi, two: the slot table read three times, 0.1 s more of 0.35 s).
INDEX_CHUNK = 1 << 18
INDEX_TARGETS = 1 << 22
#: Units of a queue the finish reads (and whose mapped pages it releases) at a time:
#: verify's memory does not grow with a queue's length.
UNIT_CHUNK = 1 << 16
