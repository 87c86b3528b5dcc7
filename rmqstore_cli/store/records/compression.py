"""Compressed message bodies (docs/format/commitlog.md#sysflag): sysFlag bit 0 ``COMPRESSED_FLAG`` and the
compression type in bits 8–10 (``MessageSysFlag#getCompressionType``: 1 LZ4, 2 ZSTD,
3 ZLIB, 0 ZLIB for old clients that set only bit 0).

Only zlib is decoded (the standard library has no LZ4/ZSTD). Decompression is capped
*while* it runs (``decompressobj().decompress(data, max_length)``), so a crafted body
that expands enormously costs at most ``cap`` bytes of memory, never more.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from rmqstore_cli.formats.commitlog import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK

COMPRESSION_TYPES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}
DEFAULT_CAP = 64 << 20


@dataclass(slots=True)
class Inflated:
    """The outcome: ``body`` when it decompressed within the cap, else ``error``."""

    body: bytes | None
    compression: str
    error: str | None = None


def compression_of(sys_flag: int) -> str | None:
    """None for an uncompressed body, else the compression type's name."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    return COMPRESSION_TYPES.get((sys_flag & COMPRESSION_TYPE_MASK) >> 8, "unknown")


def inflate(body: bytes, sys_flag: int, cap: int = DEFAULT_CAP) -> Inflated | None:
    """The decompressed body of a compressed record (None if the record is not compressed)."""
    kind = compression_of(sys_flag)
    if kind is None:
        return None
    if kind != "zlib":
        return Inflated(None, kind, f"{kind} bodies are not decompressed (zlib only)")
    d = zlib.decompressobj()
    try:
        out = d.decompress(body, cap)
    except zlib.error as e:
        return Inflated(None, kind, f"not valid zlib data: {e}")
    if d.unconsumed_tail:
        return Inflated(None, kind, f"decompresses to more than the {cap}-byte cap")
    if not d.eof:
        return Inflated(None, kind, "zlib stream is truncated")
    return Inflated(out, kind)
