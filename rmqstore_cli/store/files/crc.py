"""CRC-32 of bodies and records: ``UtilAll#crc32`` (``java.util.zip.CRC32``, zlib's polynomial).

zlib-ng's ``crc32`` gives the same numbers as ``zlib.crc32`` three times as fast on this
machine's CPUs (carry-less multiply: 11 GB/s against 3.7 for 16 KiB bodies, 95 ns against
340 ns a call for 256-byte ones), which is what lets verify and rebuild check bodies at
the broker's own speed; the standard library's is the fallback when it is not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy only for the bulk function: per-record readers (decode-msgid) never load it
    import numpy as np

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - the package is a dependency; any platform without a wheel
    from zlib import crc32

__all__ = ["body_crcs", "crc32"]


def body_crcs(buf, body_at: np.ndarray, body_len: np.ndarray) -> np.ndarray:
    """``UtilAll#crc32`` of every body: ``crc32(body) & 0x7FFFFFFF`` (int64); ``body_len`` >= 0.
    The broker stores 0 for an empty body, which this also gives (crc32 of nothing is 0)."""
    import numpy as np

    mv = memoryview(buf)
    n = len(body_at)
    ends = (body_at + body_len).tolist()
    return np.fromiter(map(crc32, map(mv.__getitem__, map(slice, body_at.tolist(), ends))), np.int64, n) & 0x7FFFFFFF
