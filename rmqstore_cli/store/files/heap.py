"""The C allocator told to keep the blocks a batch frees for the next batch.

verify's scan allocates the same few arrays for every batch of records (a column per field,
~32 768 records: 256 KiB-1 MiB each) and frees them when the batch is checked. glibc's
malloc serves blocks that large from fresh ``mmap`` pages (or gives the heap's free top back
with ``trim``), so each batch's arrays were new pages the kernel zeroed first: 13-15 % of a
``verify --jobs 1`` of 1 M records was ``clear_page_erms`` (``perf``), more than the record
walk. With mapping raised to :data:`MAP_ABOVE` and trimming to :data:`TRIM_ABOVE`
(``mallopt``, what the ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` variables set),
a freed column is reused by the next batch's: the same bytes, ~10 % less CPU, the same peak
memory (the heap holds at most what one batch's arrays did, plus :data:`TRIM_ABOVE` free).

The command line sets it as a command starts (``commands/exits.command``: the CLI owns its
process; ``--help`` does not pay the ``ctypes`` import); a library never changes its
caller's allocator, so a script that verifies big stores through the API may call
:func:`reuse_freed_blocks` itself. Only glibc has ``mallopt``; elsewhere (or if
``ctypes`` cannot find it) nothing changes. ``ctypes`` costs ~3 ms (numpy loads it anyway).
"""

from __future__ import annotations

import ctypes

#: ``malloc.h``'s parameter numbers
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: Blocks below this come from the heap (glibc's ceiling for it on 64 bits: 32 MiB).
MAP_ABOVE = 32 << 20
#: The heap's free top is given back to the system only above this.
TRIM_ABOVE = 256 << 20


def reuse_freed_blocks() -> bool:
    """Freed blocks below :data:`MAP_ABOVE` kept for reuse (glibc's ``mallopt``) for the rest
    of the process and its forks; whether the allocator took both settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): its defaults stay
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MAP_ABOVE)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_ABOVE))
