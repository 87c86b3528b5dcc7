"""``String#hashCode`` of many strings or byte ranges at once (numpy), exact to the bit:
uint32 arithmetic wraps as Java's int does. Non-ASCII text: see the package docstring.

* ranges of one length are rows of a sliding window over the bytes (only their own bytes
  are read), hashed as ``sum(c_j * 31^(L-1-j))`` mod 2^32 (:func:`window_hashes`); ranges of
  many lengths come from one prefix sum (:class:`RangeHashes`);
* ranges holding a byte >= 0x80 are joined and decoded by one strict
  ``bytes.decode("utf-8")`` (RFC 3629, what ``new String`` decodes without replacement) and
  encoded to UTF-16 at once (:func:`utf8_hashes`); the join decodes only if every range is
  whole characters, given that no range starts with a continuation byte;
* malformed UTF-8 (where the decoder's U+FFFD replacement rules matter) is decoded one
  string at a time with replacement.
"""

from __future__ import annotations

import numpy as np

from rmqstore_cli.store.files.arrays import byte_rows, stable_argsort

_INV31 = pow(31, -1, 1 << 32)  # 31 is odd, so invertible mod 2^32
_POW: list[np.ndarray] = [np.ones(1, np.uint32), np.ones(1, np.uint32)]
#: UTF-16 code units as numpy reads ``str.encode("utf-16-be")``
UTF16_UNITS = np.dtype(np.uint16).newbyteorder(">")
#: more distinct range lengths than this: one prefix sum instead of a window per length
MAX_LENGTH_GROUPS = 48


def pow31_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``31^k`` and ``31^-k`` mod 2^32 (uint32) for k < n at least; cached, grown by doubling."""
    if _POW[0].size < n:
        size = 1 << max(10, (n - 1).bit_length())
        fw, bw = np.ones(1, np.uint32), np.ones(1, np.uint32)
        f_step, b_step = 31, _INV31
        while fw.size < size:
            fw = np.concatenate([fw, fw * np.uint32(f_step)])
            bw = np.concatenate([bw, bw * np.uint32(b_step)])
            f_step, b_step = f_step * f_step & 0xFFFFFFFF, b_step * b_step & 0xFFFFFFFF
        _POW[:] = [fw, bw]
    return _POW[0], _POW[1]


def pow31(n: int) -> np.ndarray:
    """``31^k`` mod 2^32 (uint32) for k < n at least."""
    return pow31_tables(n)[0]


class RangeHashes:
    """``String#hashCode`` (uint32) of any ranges ``units[a:b]`` of one array of code units.

    One prefix sum serves every range: ``hash(u[a:b]) = 31^(b-1) * (S[b] - S[a])`` with
    ``S[k] = sum(u_i * 31^-i, i < k)``, all mod 2^32. The units are UTF-16 code units, or
    bytes of ASCII text (where byte = code unit)."""

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


def window_hashes(units: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``String#hashCode`` (uint32) of the ranges ``units[a:b]`` of a uint8 array, touching
    only the ranges' own bytes: ranges of one length ``L`` are rows of a sliding window,
    each row times ``31^(L-1) .. 31^0`` summed mod 2^32 (uint32 wraps like Java's int).
    Cheaper than a prefix sum over all of ``units`` when the ranges are a small part of it
    (TAGS, keys); None when the lengths are too varied for the grouping to pay."""
    n = a.size
    out = np.zeros(n, np.uint32)
    if not n:
        return out
    L = b - a
    lo, hi = int(L.min()), int(L.max())
    if lo == hi:
        groups = [(lo, None)]
    else:
        order = stable_argsort(L)
        Ls = L[order]
        cuts = np.flatnonzero(Ls[1:] != Ls[:-1]) + 1
        if cuts.size >= MAX_LENGTH_GROUPS:
            return None
        groups = [(int(Ls[c]), g) for c, g in zip(np.r_[0, cuts].tolist(), np.split(order, cuts), strict=True)]
    fw = pow31(hi + 1)
    for length, g in groups:
        if length <= 0:
            continue
        at = a if g is None else a[g]
        rows = (
            byte_rows(units, at, length)
            if units.dtype == np.uint8
            else np.lib.stride_tricks.sliding_window_view(units, length)[at]
        )
        h = rows.astype(np.uint32) @ fw[length - 1 :: -1]  # integer matmul wraps mod 2^32
        if g is None:
            out = h
        else:
            out[g] = h
    return out


def _segment_hashes(units: np.ndarray, lens: np.ndarray) -> np.ndarray:
    if not units.size:
        return np.zeros(lens.size, np.uint32)
    b = np.cumsum(lens)
    return RangeHashes(units)(b - lens, b)


# hashCode and UTF-16 length of malformed strings seen (TAGS and keys repeat): the
# decode/encode per string is the slow part
_REPLACED: dict[bytes, tuple[int, int]] = {}
_REPLACED_MAX = 1 << 16


def _replaced_hashes(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """hashCode and UTF-16 length of each string decoded as ``new String(bytes, UTF_8)``
    (U+FFFD for bad bytes), one at a time, remembered."""
    cache = _REPLACED
    todo = list(dict.fromkeys(x for x in strings if x not in cache))
    if todo:
        if len(cache) + len(todo) > _REPLACED_MAX:  # start afresh, with every string of this call
            cache.clear()
            todo = list(dict.fromkeys(strings))
        u16 = [x.decode("utf-8", "replace").encode("utf-16-be", "surrogatepass") for x in todo]
        l16 = np.fromiter(map(len, u16), np.int64, len(u16)) // 2
        h16 = _segment_hashes(np.frombuffer(b"".join(u16), UTF16_UNITS), l16)
        cache.update(zip(todo, zip(h16.tolist(), l16.tolist(), strict=True), strict=True))
    got = np.array([cache[x] for x in strings], np.int64).reshape(-1, 2)
    return got[:, 0], got[:, 1]


def utf8_hashes(
    units: np.ndarray, a: np.ndarray, b: np.ndarray, raw: bytes | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """hashCode (uint32) and UTF-16 length of non-ASCII ranges ``units[a:b]``: their bytes
    joined and decoded at once when every range is well-formed UTF-8 (the join decodes and
    no range starts with a continuation byte: then every range is whole characters), else
    one by one with the decoder's replacement rules."""
    L = b - a
    off = np.cumsum(L) - L
    stream = units[np.repeat(a - off, L) + np.arange(int(L.sum()))]
    if not ((stream[off[L > 0]] & 0xC0) == 0x80).any():
        try:
            u16 = np.frombuffer(stream.tobytes().decode("utf-8").encode("utf-16-be"), UTF16_UNITS)
        except UnicodeDecodeError:
            pass
        else:
            per_byte = ((stream & 0xC0) != 0x80).astype(np.int64) + (stream >= 0xF0)  # a 4-byte char: 2 units
            cum = np.zeros(stream.size + 1, np.int64)
            np.cumsum(per_byte, out=cum[1:])
            a16, b16 = cum[off], cum[off + L]
            return RangeHashes(u16)(a16, b16).astype(np.uint32), b16 - a16
    if raw is None:
        raw = units.tobytes()
    h, n16 = _replaced_hashes([raw[x:y] for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    return h.astype(np.uint32), n16


def java_range_hashes(
    units: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    raw: bytes | None = None,
    high: np.ndarray | None = None,
    maybe_wide: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``String#hashCode`` (uint32) and UTF-16 length (int64) of the UTF-8 text ``units[a:b]``
    for each range (``units``: uint8). Optional, when the caller has them: ``raw``, the same
    bytes as ``bytes``; ``high``, the sorted positions of the bytes >= 0x80 in ``units``;
    ``maybe_wide``, indexes of the only ranges that may hold such bytes."""
    n = a.size
    lens = (b - a).astype(np.int64)
    if not n or not units.size:
        return np.zeros(n, np.uint32), lens
    h = window_hashes(units, a, b)
    if h is None:  # lengths too varied for rows: one prefix sum over the units
        h = RangeHashes(units)(a, b)
    if high is None:
        high = np.flatnonzero(units >= 0x80)
    if not high.size:
        return h, lens
    cand = np.arange(n) if maybe_wide is None else maybe_wide
    na = cand[np.searchsorted(high, b[cand]) > np.searchsorted(high, a[cand])]
    if na.size:
        h[na], lens[na] = utf8_hashes(units, a[na], b[na], raw)
    return h, lens


def java_hashes(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``String#hashCode`` (uint32) and UTF-16 length of each UTF-8 byte string."""
    n = len(strings)
    lens = np.fromiter(map(len, strings), np.int64, n)
    joined = b"".join(strings)
    if joined.isascii():
        return _segment_hashes(np.frombuffer(joined, np.uint8), lens), lens
    b = np.cumsum(lens)
    units = np.frombuffer(joined, np.uint8)
    h = _segment_hashes(units, lens)
    na = np.array([i for i, x in enumerate(strings) if not x.isascii()], np.int64)
    h[na], lens[na] = utf8_hashes(units, (b - lens)[na], b[na], joined)
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
    return np.where(s == np.iinfo(np.int32).min, 0, np.abs(s))  # Integer.MIN_VALUE: 0 (index_key_hash)


def index_hashes(keys: list[bytes]) -> np.ndarray:
    """``IndexFile#indexKeyHashMethod`` of many UTF-8 keys (``topic#key``) at once (int64, >= 0)."""
    return index_hash(java_hashes(keys)[0])
