"""numpy helpers every bulk reader of the store shares: bytes of a mapping as an array,
big-endian fields at many positions at once, rows of bytes, and two sorts.

Nothing here knows a layout: offsets, widths and dtypes come from ``formats/``.
"""

from __future__ import annotations

import numpy as np

#: In-memory keys made of raw bytes (not a store layout): a 4-byte and an 8-byte row read
#: as one number, big-endian so that numbers order as the bytes do.
BE_U32 = np.dtype(np.uint32).newbyteorder(">")
BE_U64 = np.dtype(np.uint64).newbyteorder(">")


def bytes_base(cat: np.ndarray) -> bytes | None:
    """The bytes object a uint8 array views whole, or None (for a caller that copies the
    array only on a rare path, e.g. malformed UTF-8)."""
    b = cat.base
    return b if isinstance(b, bytes) and len(b) == cat.size else None


def file_array(buf) -> np.ndarray:
    """A mapped file's bytes as a uint8 array (a view, never a copy; empty for an empty file)."""
    return np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.empty(0, np.uint8)


def gather(a: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian ints of ``width`` bytes at byte positions ``pos`` of the uint8 array ``a``,
    as native ints. Positions are clipped to ``a``: a field read past the end yields some
    in-bounds bytes, so callers mask such records by their own bounds checks."""
    native = np.dtype(dtype).newbyteorder("=")
    if not len(pos):
        return np.empty(0, dtype=native)
    if _in_bounds(a, pos, width):  # one typed read per position, no (n, width) byte copy
        return _windows(a, width)[pos].view(dtype).astype(native)
    return byte_rows(a, pos, width).view(dtype).ravel().astype(native)


def gather_field(a: np.ndarray, pos: np.ndarray, field) -> np.ndarray:
    """:func:`gather` of a ``formats`` field (its ``size`` and ``dtype``) at positions ``pos``."""
    return gather(a, pos, field.size, field.dtype)


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` for non-negative integers, faster: ties broken by
    position inside one unique key ``x * n + i``, which numpy's default (SIMD) sort orders
    several times faster than its stable merge sort; the stable sort when that key would
    not fit an int64. Values below 2^15 (lengths, record numbers of a block): numpy's radix
    sort of 16-bit ints, which is stable and faster still."""
    n = x.size
    if n > 1 and x.dtype.kind in "iu" and int(x.min()) >= 0 and int(x.max()) < (1 << 62) // n:
        if int(x.max()) < (1 << 15):
            return np.argsort(x.astype(np.int16), kind="stable")
        return np.argsort(x.astype(np.int64) * n + np.arange(n))
    return np.argsort(x, kind="stable")


def byte_rows(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each byte position ``pos`` of ``a``: a ``pos.shape + (width,)``
    uint8 array (byte indexes clipped to ``a``, as :func:`gather` says). When every row lies
    inside ``a`` they are rows of a sliding window: one copy of the bytes, no index array."""
    if _in_bounds(a, pos, width):
        return _windows(a, width)[pos].view(np.uint8).reshape(pos.shape + (width,))
    idx = pos[..., None] + np.arange(width)
    np.clip(idx, 0, a.size - 1, out=idx)
    return a[idx]


def _in_bounds(a: np.ndarray, pos: np.ndarray, width: int) -> bool:
    """Every ``width``-byte row at ``pos`` lies inside the contiguous uint8 array ``a``."""
    return (
        a.size >= width
        and a.flags.c_contiguous
        and len(pos) > 0
        and int(pos.min()) >= 0
        and int(pos.max()) <= a.size - width
    )


def _windows(a: np.ndarray, width: int) -> np.ndarray:
    """Every position of the contiguous uint8 array ``a`` as one ``width``-byte opaque item
    (items overlap, one byte apart): a view, so that a gather of rows is one copy per row
    instead of a byte-wise fancy index (several times faster for short rows). Indexed with
    ``[]`` only: ``take`` on this view copies the whole array first."""
    return np.ndarray((a.size - width + 1,), np.dtype((np.void, width)), buffer=a, strides=(1,))


def data_end_guess(arr: np.ndarray, page: int = 4096) -> int:
    """About where a file's data ends (``arr``: its bytes): after the last non-zero page, by a
    binary search that takes every page past a zero one for zeros, as in a file the broker
    preallocated; a few pages read. Only to share a file out in like parts (verify's and
    rebuild-index's tasks): a zero page inside the data makes the parts unlike, not wrong."""
    lo, hi = 0, -(-arr.size // page)  # pages [0, lo) hold data; [hi, ...) are zeros
    while lo < hi:
        mid = (lo + hi) // 2
        if arr[mid * page : (mid + 1) * page].any():
            lo = mid + 1
        else:
            hi = mid
    return min(arr.size, lo * page)
