"""Columnar reading of commit-log records: what the vectorised readers share.

Two readers take many records at once with numpy instead of one
:func:`~rmqstore_cli.store.commitlog.check_message` call per record: rebuild-index's
:mod:`fastdispatch` and :mod:`verify`. ``check_message`` stays the single source of
verdicts and reasons; this module holds the facts both columnar paths need, once:

* :func:`gather` — big-endian integers at many byte positions of a mapping;
* Java ``String#hashCode`` of many strings or byte ranges (:class:`RangeHashes`,
  :func:`java_hashes`, :func:`concat_hashes`) and ``IndexFile#indexKeyHashMethod``
  (:func:`index_hash`), exact to the bit: uint32 arithmetic wraps as Java's int does;
* :func:`release_pages` — pages already read dropped from the process (re-exported from
  :mod:`mapped_files`, where the numpy-free per-record scan uses it too).
"""
from __future__ import annotations

import numpy as np

from rmqstore_cli.store.mapped_files import release_pages

__all__ = ["gather", "pow31", "pow31_tables", "RangeHashes", "java_hashes", "concat_hashes", "java_int",
           "index_hash", "index_hashes", "release_pages"]

_INT_MIN = -(1 << 31)


def gather(a: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian ints of ``width`` bytes at byte positions ``pos`` of the uint8 array ``a``,
    as native ints. Positions are clipped to ``a``: a field read past the end yields some
    in-bounds bytes, so callers mask such records by their own bounds checks."""
    native = np.dtype(dtype).newbyteorder("=")
    if not len(pos):
        return np.empty(0, dtype=native)
    idx = pos[:, None] + np.arange(width)
    np.clip(idx, 0, a.size - 1, out=idx)
    return a[idx].view(dtype).ravel().astype(native)


# ---------------------------------------------------------------- Java String#hashCode

_INV31 = pow(31, -1, 1 << 32)  # 31 is odd, so invertible mod 2^32
_POW: tuple[np.ndarray, np.ndarray] = (np.ones(1, np.uint32), np.ones(1, np.uint32))


def pow31_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``31^k`` and ``31^-k`` mod 2^32 (uint32) for k < n at least; cached, grown by doubling."""
    global _POW
    if _POW[0].size < n:
        size = 1 << max(10, (n - 1).bit_length())
        fw, bw = np.ones(1, np.uint32), np.ones(1, np.uint32)
        f_step, b_step = 31, _INV31
        while fw.size < size:
            fw = np.concatenate([fw, fw * np.uint32(f_step)])
            bw = np.concatenate([bw, bw * np.uint32(b_step)])
            f_step, b_step = f_step * f_step & 0xFFFFFFFF, b_step * b_step & 0xFFFFFFFF
        _POW = (fw, bw)
    return _POW


def pow31(n: int) -> np.ndarray:
    """``31^k`` mod 2^32 (uint32) for k < n at least."""
    return pow31_tables(n)[0]


class RangeHashes:
    """``String#hashCode`` (uint32) of any ranges ``units[a:b]`` of one array of code units.

    One prefix sum serves every range: ``hash(u[a:b]) = 31^(b-1) * (S[b] - S[a])`` with
    ``S[k] = sum(u_i * 31^-i, i < k)``, all mod 2^32. The units are UTF-16 code units, or
    bytes of ASCII text (where byte = code unit); non-ASCII UTF-8 must be re-hashed over its
    UTF-16 units (:func:`java_hashes`)."""

    def __init__(self, units: np.ndarray):
        n = units.size
        bw = pow31_tables(n + 1)[1]
        w = units.astype(np.uint32)
        w *= bw[:n]
        self.S = np.zeros(n + 1, np.uint32)
        np.cumsum(w, dtype=np.uint32, out=self.S[1:])

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        S = self.S
        return pow31(S.size)[np.maximum(b - 1, 0)] * (S[b] - S[a])


def _segment_hashes(units: np.ndarray, lens: np.ndarray) -> np.ndarray:
    if not units.size:
        return np.zeros(lens.size, np.uint32)
    b = np.cumsum(lens)
    return RangeHashes(units)(b - lens, b)


def java_hashes(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``String#hashCode`` (uint32) and UTF-16 length of each UTF-8 byte string.

    Non-ASCII strings are decoded as the broker's decoder would (U+FFFD for bad bytes,
    ``new String(bytes, UTF_8)``) and hashed over their UTF-16 code units."""
    n = len(strings)
    lens = np.fromiter(map(len, strings), np.int64, n)
    joined = b"".join(strings)
    h = _segment_hashes(np.frombuffer(joined, np.uint8), lens)
    if not joined.isascii():
        idx = np.array([i for i, x in enumerate(strings) if not x.isascii()], np.int64)
        u16 = [strings[i].decode("utf-8", "replace").encode("utf-16-be", "surrogatepass") for i in idx.tolist()]
        l16 = np.fromiter(map(len, u16), np.int64, len(u16)) // 2
        h[idx] = _segment_hashes(np.frombuffer(b"".join(u16), ">u2"), l16)
        lens[idx] = l16
    return h, lens


def concat_hashes(h_a: np.ndarray, len_b: np.ndarray, h_b: np.ndarray) -> np.ndarray:
    """``hashCode(a + b) = hashCode(a) * 31^len(b) + hashCode(b)`` (uint32; ``len_b`` in UTF-16 units)."""
    if not len_b.size:
        return np.zeros(0, np.uint32)
    return h_a.astype(np.uint32) * pow31(int(len_b.max()) + 1)[len_b] + h_b.astype(np.uint32)


def java_int(h: np.ndarray) -> np.ndarray:
    """uint32 hashes as Java ints (int64 array)."""
    return h.astype(np.uint32).view(np.int32).astype(np.int64)


def index_hash(h: np.ndarray) -> np.ndarray:
    """``IndexFile#indexKeyHashMethod`` of uint32 hashCodes: ``abs``, ``Integer.MIN_VALUE`` -> 0 (int64)."""
    s = java_int(h)
    return np.where(s == _INT_MIN, 0, np.abs(s))


def index_hashes(keys: list[bytes]) -> np.ndarray:
    """``IndexFile#indexKeyHashMethod`` of many UTF-8 keys (``topic#key``) at once (int64, >= 0)."""
    return index_hash(java_hashes(keys)[0])
