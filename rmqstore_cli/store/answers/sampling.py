"""A quick look at a terabyte store: the commit-log walk narrowed (``--sample N``: every Nth
record; ``--max-bytes N``: the first N bytes of each commit-log file) and what the narrowed
walk passed, summed (``dump-commitlog --summary``, ``stats``).

Both narrowings are exact, so a test can hold them against the full walk:

- ``every`` keeps the records at positions 0, N, 2N, ... of the records the walk passes
  (after the filters), the first always kept: the Nth of what the full output prints;
- ``max_bytes`` reads each commit-log file only from its start (or the walk's start, in the
  first file) up to N bytes in, and keeps the records that end within it, as kafka-dump-log's
  ``--max-bytes`` stops each log file; the rest of each file is never read.

The ``Narrowing`` counts what it passed and what it read, and ``estimate`` scales a count by
the share kept (``every``), or by the log's size over the bytes read (``max_bytes``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Narrowing:
    """``every``: keep every Nth passed record (None: all); ``max_bytes``: read at most this
    many bytes of each commit-log file (None: all). The counters fill as the walk runs."""

    every: int | None = None
    max_bytes: int | None = None
    passed: int = 0  #: records the (byte-limited) walk passed, before sampling
    kept: int = 0  #: records kept
    files: int = 0  #: commit-log files read (in part with max_bytes)
    read_bytes: int = 0  #: bytes of the log the walk covered (max_bytes: the windows' sizes)
    log_bytes: int = 0  #: bytes of the log in the walk's range
    _file: Any = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        return self.every is not None or self.max_bytes is not None

    def scale(self) -> float:
        """How many records of the whole range one kept record stands for."""
        s = float(self.every or 1)
        if self.max_bytes is not None and self.read_bytes:
            s *= self.log_bytes / self.read_bytes
        return s

    def estimate(self, n: int) -> int:
        return round(n * self.scale())

    def describe(self) -> str:
        """The stderr line: what was sampled and how the counts were extrapolated."""
        parts = []
        if self.every is not None:
            parts.append(f"every {self.every}th record ({self.kept} of {self.passed} passed)")
        if self.max_bytes is not None:
            parts.append(
                f"the first {self.max_bytes} bytes of each of {self.files} commit-log file(s) "
                f"({self.read_bytes} of {self.log_bytes} bytes)"
            )
        return "sampled " + " and ".join(parts) + f"; counts scaled by {self.scale():.4g} are estimates"

    def as_dict(self) -> dict:
        return {
            "every": self.every,
            "max_bytes": self.max_bytes,
            "records_passed": self.passed,
            "records_kept": self.kept,
            "files_read": self.files,
            "bytes_read": self.read_bytes,
            "bytes_in_range": self.log_bytes,
            "scale": round(self.scale(), 6),
        }


def windows(cl: Any, start: int | None, stop: int | None, max_bytes: int | None) -> list[tuple[int, int]]:
    """[start, stop) of each file's part the walk reads: the whole range (one window) unless
    ``max_bytes``, else each file's first ``max_bytes`` bytes within [start, stop)."""
    files = cl.files
    lo = cl.min_offset if start is None else start
    hi = (files[-1].end_offset if files else lo) if stop is None else stop
    if max_bytes is None:
        return [(lo, hi)]
    out = []
    for f in files:
        a = max(lo, f.file_from_offset)
        b = min(hi, f.end_offset, a + max_bytes)
        if a < b:
            out.append((a, b))
    return out


def data_in_range(cl: Any, start: int | None, stop: int | None) -> int:
    """The bytes of log data in [start, stop): up to the end of the last file's data
    (``CommitLog.max_offset``, which reads the last file's records), not its zero tail."""
    lo = cl.min_offset if start is None else start
    end = cl.max_offset()
    hi = end if stop is None else min(stop, end)
    return max(0, hi - lo)


def narrowed(cl: Any, rng: Any, walk_one, n: Narrowing, limit: int | None) -> Iterator[tuple]:
    """The walk's (record, take) pairs (``store.log_range.walk`` shape), narrowed by ``n``;
    ``walk_one(range)`` walks one window without a limit, ``limit`` caps the records kept."""
    from rmqstore_cli.store.answers.log_range import Range

    wins = windows(cl, rng.start, rng.stop, n.max_bytes)
    n.log_bytes = data_in_range(cl, rng.start, rng.stop)
    data_end = (cl.min_offset if rng.start is None else rng.start) + n.log_bytes
    n.files = len(wins) if n.max_bytes is not None else len(cl.files)
    for a, b in wins:
        n.read_bytes += max(0, min(b, data_end) - a)
        end = b if n.max_bytes is not None else None
        if (yield from _narrow_window(walk_one(Range(a, rng.stop if end is None else end)), n, end, limit)):
            return


def _narrow_window(walked: Iterator[tuple], n: Narrowing, end: int | None, limit: int | None) -> Iterator[tuple]:
    """One window's (record, take) pairs: records that end past the window's ``end`` are the
    next window's, every ``n.every``-th record is kept; returns True once ``limit`` is reached."""
    from rmqstore_cli.store.commitlog import Blank

    for rec, take in walked:
        if limit is not None and n.kept >= limit:
            return True
        if isinstance(rec, Blank):
            if _ends_by(rec.physical_offset + rec.total_size, end):
                yield rec, None
        elif take is None:  # one record
            if _ends_by(rec.physical_offset + rec.total_size, end) and _keep_one(n):
                yield rec, None
        else:
            yield rec, _take_block(n, rec, take, end, limit)
    return False


def _ends_by(record_end: int, end: int | None) -> bool:
    """A record ending at ``record_end`` lies in a window ending at ``end`` (None: no end)."""
    return end is None or record_end <= end


def _keep_one(n: Narrowing) -> bool:
    """Count one record passed; whether the sampling keeps it (counted as kept)."""
    keep = n.every is None or n.passed % n.every == 0
    n.passed += 1
    if keep:
        n.kept += 1
    return keep


def _take_block(n: Narrowing, rec: Any, take: Any, end: int | None, limit: int | None) -> Any:
    """The rows of a block the sampling keeps, as :func:`_keep_one` keeps single records: rows
    in the window, every ``n.every``-th of those passed, up to ``limit`` kept."""
    import numpy as np

    if end is not None:
        take = take[(rec.offsets[take] + rec.rb.total[take]) <= end]
    idx = n.passed + np.arange(take.size)
    n.passed += int(take.size)
    if n.every is not None:
        take = take[idx % n.every == 0]
    if limit is not None:
        take = take[: limit - n.kept]
    n.kept += int(take.size)
    return take
