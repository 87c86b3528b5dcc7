"""Java ``String#hashCode`` of many UTF-8 byte ranges at once, non-ASCII text included.

rebuild-index hashes every TAGS value and every index key (``topic#key``) of a block.
``String#hashCode`` runs over the UTF-16 code units of the decoded string
(``new String(bytes, UTF_8)``), so a range with non-ASCII bytes cannot be hashed over its
bytes; :func:`batch.java_hashes` decodes such strings one by one in Python. Here:

* ranges of one length are rows of a sliding window over the bytes (only their own bytes
  are read), hashed as ``sum(c_j * 31^(L-1-j))`` mod 2^32 (uint32 wraps like Java's int);
  ranges holding a byte >= 0x80 are found among the positions of such bytes;
* those non-ASCII ranges are joined and decoded by one ``bytes.decode("utf-8")`` (strict:
  RFC 3629, what ``new String`` decodes without replacement) and encoded to UTF-16 at
  once, then hashed by one prefix sum over the code units (:class:`batch.RangeHashes`).
  The join decodes only if every range is whole characters, given that no range starts
  with a continuation byte (a range ending inside a character makes the next range's
  first byte a continuation byte, or the join fails);
* malformed UTF-8 (where the decoder's U+FFFD replacement rules matter) goes through the
  reference :func:`batch.java_hashes`.
"""
from __future__ import annotations

import numpy as np

from rmqstore_cli.store.batch import RangeHashes, java_hashes, window_hashes


def java_range_hashes(units: np.ndarray, a: np.ndarray, b: np.ndarray, raw: bytes | None = None,
                      high: np.ndarray | None = None, maybe_wide: np.ndarray | None = None
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
        h[na], lens[na] = _utf8_hashes(units, a[na], b[na], raw)
    return h, lens


def _utf8_hashes(units: np.ndarray, a: np.ndarray, b: np.ndarray, raw: bytes | None):
    """hashCode and UTF-16 length of non-ASCII ranges: their bytes joined and decoded at once
    when every range is well-formed UTF-8 (the join decodes and no range starts with a
    continuation byte: then every range is whole characters), else one by one by the
    reference :func:`batch.java_hashes` (the decoder's U+FFFD rules)."""
    L = b - a
    off = np.cumsum(L) - L
    stream = units[np.repeat(a - off, L) + np.arange(int(L.sum()))]
    if not ((stream[off[L > 0]] & 0xC0) == 0x80).any():
        try:
            u16 = np.frombuffer(stream.tobytes().decode("utf-8").encode("utf-16-be"), ">u2")
        except UnicodeDecodeError:
            pass
        else:
            per_byte = ((stream & 0xC0) != 0x80).astype(np.int64) + (stream >= 0xF0)  # a 4-byte char: 2 units
            cum = np.zeros(stream.size + 1, np.int64)
            np.cumsum(per_byte, out=cum[1:])
            a16, b16 = cum[off], cum[off + L]
            return RangeHashes(u16)(a16, b16), b16 - a16
    if raw is None:
        raw = units.tobytes()
    return java_hashes([raw[x:y] for x, y in zip(a.tolist(), b.tolist())])
