"""Which units and entries the scan accounted for, as runs (issue 22)."""

from __future__ import annotations

import numpy as np

_NO_RUNS = np.zeros(0, np.int64)
_NO_RUNS.flags.writeable = False


class Marks:
    """Which of ``size`` positions (a queue's units, an index file's entries) the scan
    accounted for: ``marks[idx] = True`` as :class:`numpy.ndarray` of bools would take it
    (an index array or a slice), read back by :meth:`unmarked`.

    Kept as sorted disjoint [start, end) runs, so a queue or index file the scan meets in
    order costs one run however many messages it holds (the bool array this replaces
    held a byte per message: ~1 MB per million messages, per queue and index file,
    issue 22). Marks that come in order extend the open run in place; others wait in
    ``_pending`` (at most ``PENDING`` positions) and are merged into the runs. Marks
    scattered over more runs than a byte per position would cost (a damaged store) turn
    the runs into such a byte array: bounded by the queue or index file either way."""

    PENDING = 1 << 16

    def __init__(self, size: int):
        self.size = size
        self.starts = self.ends = _NO_RUNS  # replaced, never written in place
        self.bits: np.ndarray | None = None
        self._open: list[int] | None = None  # the run marks in order extend: [start, end)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # runs not merged yet
        self._waiting = 0

    def __setitem__(self, idx, value) -> None:
        if value is not True:
            raise ValueError("marks are only ever set")
        if self.bits is not None:
            self.bits[idx] = True
            return
        if isinstance(idx, slice):
            a, b, step = idx.indices(self.size)
            if step != 1:
                idx = np.arange(a, b, step)
            else:
                if b > a:
                    self._add_run(a, b)
                return
        idx = np.asarray(idx, np.int64).ravel()
        if not idx.size:
            return
        a, b = int(idx[0]), int(idx[-1]) + 1
        if b - a == idx.size and (idx.size == 1 or bool(np.all(idx[1:] - idx[:-1] == 1))):
            self._add_run(a, b)
            return
        self._queue(idx, idx + 1)

    def _add_run(self, a: int, b: int) -> None:
        o = self._open
        if o is not None and o[0] <= a <= o[1]:
            o[1] = max(o[1], b)
            return
        if o is not None:
            self._queue(np.array([o[0]], np.int64), np.array([o[1]], np.int64))
        self._open = [a, b]

    def _queue(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self._pending.append((starts, ends))
        self._waiting += starts.size
        if self._waiting >= self.PENDING:
            self._merge()

    def _merge(self) -> None:
        """Fold the open run and the waiting marks into the runs (or the byte array)."""
        parts = [(self.starts, self.ends), *self._pending]
        if self._open is not None:
            parts.append((np.array([self._open[0]], np.int64), np.array([self._open[1]], np.int64)))
        self._open, self._pending, self._waiting = None, [], 0
        s = np.concatenate([p[0] for p in parts])
        e = np.concatenate([p[1] for p in parts])
        o = np.argsort(s, kind="stable")
        s, e = s[o], np.maximum.accumulate(e[o])
        new = np.ones(s.size, bool)
        new[1:] = s[1:] > e[:-1]  # a run that starts after all before it ended (adjacent runs join)
        first = np.flatnonzero(new)
        self.starts = s[first]
        self.ends = e[np.r_[first[1:] - 1, s.size - 1]] if s.size else e
        if self.starts.size > max(64, self.size // 16):  # 16 bytes a run: a byte a position is less
            bits = np.zeros(self.size, bool)
            for a, b in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
                bits[a:b] = True
            self.bits = bits
            self.starts = self.ends = _NO_RUNS

    def unmarked(self, a: int, b: int) -> np.ndarray:
        """Positions in ``[a, b)`` never marked, in order (none, without a merge, when the
        run marks in order extend covers the range: a queue the scan met whole)."""
        o = self._open
        if self.bits is None and o is not None and o[0] <= a and b <= o[1]:
            return np.zeros(0, np.intp)
        if self._open is not None or self._pending:
            self._merge()
        if self.bits is not None:
            return np.flatnonzero(~self.bits[a:b]) + a
        i0 = int(np.searchsorted(self.ends, a, "right"))
        i1 = int(np.searchsorted(self.starts, b, "left"))
        if i0 >= i1:
            return np.arange(a, b)
        d = np.zeros(b - a + 1, np.int32)
        d[np.maximum(self.starts[i0:i1], a) - a] += 1  # runs are disjoint and apart: no repeats
        d[np.minimum(self.ends[i0:i1], b) - a] -= 1
        return np.flatnonzero(np.cumsum(d[:-1]) == 0) + a

    def nbytes(self) -> int:
        """What the marks hold (for tests: it must not grow with marks made in order)."""
        held = self.starts.nbytes + self.ends.nbytes + sum(x.nbytes + y.nbytes for x, y in self._pending)
        return held + (self.bits.nbytes if self.bits is not None else 0)


class Sparse:
    """A retired index file's entry offsets: only some positions are kept (size stays)."""

    def __init__(self, size: int, idx: np.ndarray, values: np.ndarray):
        self.size, self._idx, self._values = size, idx, values

    def __getitem__(self, i):
        at = np.searchsorted(self._idx, i)
        if np.any(self._idx[np.minimum(at, self._idx.size - 1)] != i):
            raise IndexError("entry not kept by retire()")
        return self._values[at]
