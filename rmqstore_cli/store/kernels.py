"""Compiled loops of the engine: the record walk, small bodies' CRC, a join of byte ranges.

What would otherwise be a Python loop per record — the walk of STORE-FORMAT §7.1
(:func:`~rmqstore_cli.store.commitlog.bulk.walk_records`), one CRC call per body
(:func:`~rmqstore_cli.store.commitlog.bulk.body_crcs`), one slice per PROPERTIES — compiled by
numba, the results the same to the bit (tests compare). Only big jobs switch to them
(:data:`~rmqstore_cli.store.fastpaths.FAST_PATHS` decides), so small stores never pay
numba's import (~0.3 s), and the Python loops stay when numba is missing. Compiled on first
use and cached on disk (:data:`JIT`, shared with :mod:`~rmqstore_cli.jsonkernel`).
"""
from __future__ import annotations

import os
import tempfile

import numba
import numpy as np
from numba import njit

from rmqstore_cli.formats.commitlog import HEAD, MAGIC_V1, MAGIC_V2


def _cacheable() -> None:
    """Compiled code is cached beside this file, else in numba's user-wide cache; when
    neither is writable (a read-only install run by a user without a home), in the temp
    directory, so that no run compiles again."""
    try:
        njit(cache=True)(_cacheable)
    except RuntimeError:
        numba.config.CACHE_DIR = os.path.join(tempfile.gettempdir(), f"rmqstore-numba-{os.getuid()}")


_cacheable()
#: how every compiled loop of the project is compiled: cached, without bounds checks
JIT = njit(cache=True, nogil=True, boundscheck=False)

#: Bodies shorter than this get their CRC here; longer ones from zlib (faster per byte, and
#: its per-call cost no longer matters).
SMALL_BODY = 1024

# the walk reads TOTALSIZE and MAGICCODE (two big-endian ints, read by _be32)
_TOTAL_AT, _MAGIC_AT = HEAD["total_size"].offset, HEAD["magic"].offset
_PREFIX_SIZE = _MAGIC_AT + HEAD["magic"].size


def _crc_tables() -> np.ndarray:
    """Slicing-by-8 tables of the reflected CRC-32 polynomial (zlib's ``crc32``)."""
    t = np.zeros((8, 256), np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        t[0, i] = c
    for k in range(1, 8):
        t[k] = (t[k - 1] >> 8) ^ t[0][t[k - 1] & 0xFF]
    return t


CRC_TABLES = _crc_tables()


@JIT
def _be32(a, p):
    return (np.int64(a[p]) << 24) | (np.int64(a[p + 1]) << 16) | (np.int64(a[p + 2]) << 8) | np.int64(a[p + 3])


@JIT
def walk(a, pos, limit, max_n, min_total, out):
    """Record starts from ``pos`` into ``out``: a record starts where MAGICCODE is V1 or V2
    and ``min_total <= TOTALSIZE <= limit - start``; the next one TOTALSIZE bytes later.
    Returns (records, end): at most ``max_n``; ``end`` is where the walk stopped (the first
    position that starts no record, or after the last of ``max_n`` records)."""
    n = 0
    end = pos
    while n < max_n:
        if end + _PREFIX_SIZE > limit:
            break
        total = _be32(a, end + _TOTAL_AT)
        if total >= 2147483648:  # TOTALSIZE is signed
            total -= 4294967296
        magic = _be32(a, end + _MAGIC_AT)
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < min_total or total > limit - end:
            break
        out[n] = end
        n += 1
        end += total
    return n, end


@JIT
def walk_entries(a, pos, limit, max_n, min_total, header, out):
    """:func:`walk` over DLedger entries (``DLedgerMmapFileStore#recover``): at ``end`` an entry
    header of ``header`` bytes (magic 1, size = its record's TOTALSIZE + ``header``), its record
    right after it; ``out`` gets the record starts, ``end`` stays on entry starts."""
    n = 0
    end = pos
    while n < max_n:
        r = end + header
        if r + _PREFIX_SIZE > limit or _be32(a, end) != 1:
            break
        total = _be32(a, r + _TOTAL_AT)
        if total >= 2147483648:
            total -= 4294967296
        magic = _be32(a, r + _MAGIC_AT)
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < min_total or total > limit - r \
                or _be32(a, end + 4) != total + header:
            break
        out[n] = r
        n += 1
        end = r + total
    return n, end


@JIT
def _crc32(a, p, n, t):
    c = np.uint32(0xFFFFFFFF)
    end = p + n
    while p + 8 <= end:
        c ^= np.uint32(a[p]) | (np.uint32(a[p + 1]) << 8) | (np.uint32(a[p + 2]) << 16) | (np.uint32(a[p + 3]) << 24)
        c = (t[7, c & 0xFF] ^ t[6, (c >> 8) & 0xFF] ^ t[5, (c >> 16) & 0xFF] ^ t[4, c >> 24]
             ^ t[3, a[p + 4]] ^ t[2, a[p + 5]] ^ t[1, a[p + 6]] ^ t[0, a[p + 7]])
        p += 8
    while p < end:
        c = t[0, (c ^ a[p]) & 0xFF] ^ (c >> 8)
        p += 1
    return c ^ np.uint32(0xFFFFFFFF)


@JIT
def small_body_crcs(a, at, ln, small, t, out):
    """``crc32(body) & 0x7FFFFFFF`` into ``out`` for the bodies shorter than ``small``;
    returns how many were longer (left for zlib)."""
    big = 0
    for i in range(at.size):
        if ln[i] < small:
            out[i] = np.int64(_crc32(a, at[i], ln[i], t)) & 0x7FFFFFFF
        else:
            big += 1
    return big


@JIT
def copy_bytes(out, o, src, a, n):
    """``out[o:o+n] = src[a:a+n]``, returns ``o + n``; unsigned indexes spare numba's
    negative-index check, which keeps the loop from being vectorised."""
    for k in range(n):
        out[np.uint64(o + k)] = src[np.uint64(a + k)]
    return o + n


@JIT
def join_ranges(a, at, ln, out):
    """``out`` = the bytes ``a[at[i]:at[i]+ln[i]]`` one after another (``ln`` >= 0)."""
    o = np.int64(0)  # a literal 0 would compile copy_bytes once more, for that value
    for i in range(at.size):
        o = copy_bytes(out, o, a, at[i], ln[i])
    return o
