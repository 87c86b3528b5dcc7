"""Java ``String#hashCode`` and ``IndexFile#indexKeyHashMethod``: the one owner.

The broker hashes TAGS (``MessageExtBrokerInner#tagsString2tagsCode``) and index keys
(``topic#key``) with ``String#hashCode``: a wrapping ``31*h + c`` over the UTF-16 code
units of the decoded string (``new String(bytes, UTF_8)``). Here per string (this module,
numpy-free, for the per-record paths) and for many byte ranges at once
(:mod:`~rmqstore_cli.store.javahash.bulk`, numpy), the same names reachable from here.

One non-ASCII strategy everywhere: ASCII text is hashed over its bytes (byte = code unit);
text with a byte >= 0x80 is decoded as UTF-8 and hashed over its UTF-16 code units; in
bulk such ranges are joined and decoded at once when they are well-formed UTF-8, and one by
one with the decoder's U+FFFD replacement otherwise.
"""

from __future__ import annotations

import struct

#: ``Integer.MIN_VALUE``: ``Math.abs`` leaves it negative, so ``IndexService#indexKeyHashMethod`` uses 0.
INT_MIN = -(1 << 31)
_UNITS = "H"  # UTF-16 code units: unsigned shorts (big-endian by the encoding below)


def java_hash(s: str) -> int:
    """``java.lang.String#hashCode``: wrapping ``31*h + c`` over UTF-16 code units."""
    if s.isascii():
        units: bytes | tuple[int, ...] = s.encode("ascii")
    else:
        b = s.encode("utf-16-be", "surrogatepass")
        units = struct.unpack(f">{len(b) // 2}{_UNITS}", b)
    h = 0
    for u in units:
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_key_hash(key: str) -> int:
    """``IndexFile#indexKeyHashMethod``: ``abs(hashCode)``, and 0 for ``Integer.MIN_VALUE``."""
    h = java_hash(key)
    return 0 if h == INT_MIN else abs(h)


_BULK = (
    "pow31",
    "pow31_tables",
    "RangeHashes",
    "window_hashes",
    "java_hashes",
    "java_range_hashes",
    "utf8_hashes",
    "concat_hashes",
    "java_int",
    "index_hash",
    "index_hashes",
    "MAX_LENGTH_GROUPS",
)


def __getattr__(name: str):
    """The bulk (numpy) routines under this module's names, imported on first use so that
    the per-record paths never load numpy."""
    if name in _BULK:
        from rmqstore_cli.store.javahash import bulk

        return getattr(bulk, name)
    raise AttributeError(name)
