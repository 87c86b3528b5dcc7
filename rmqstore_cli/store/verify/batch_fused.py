"""verify's per-batch columns and topic ids in one pass each: the reference twins of the C
loops ``record_cols`` and ``topic_ids`` (``store/_ckernels.c``), and the objects verify
keeps their results in.

:func:`record_cols` is :class:`~rmqstore_cli.store.commitlog.bulk.RecordBatch` (the fields
``MessageDecoder#decode`` lays out, ``CommitLog#calMsgLength``) plus the CRC of every small
body (``UtilAll#crc32``): the C loop reads each record once instead of some twenty numpy
gathers over the batch. :func:`topic_ids` is a dict look-up of each record's topic bytes;
the C loop keeps a hash table of the topics met so far. Each twin gives its loop's result
to the bit (tests/equivalence/test_ckernels_fused.py); ``RMQSTORE_PURE=1`` runs the twins
(:data:`~rmqstore_cli.store.files.fastpaths.FAST_PATHS`).
"""

from __future__ import annotations

import numpy as np
from rmqstore_cli.formats.commitlog import HEAD_SIZE, PROPERTIES_LENGTH

from rmqstore_cli.store.commitlog.bulk import RecordBatch
from rmqstore_cli.store.files.crc import body_crcs

#: record_cols' columns, in the order of its ``out`` (the C loop's ``REC_COLS``)
COLS = (
    "total",
    "sys_flag",
    "body_crc",
    "queue_id",
    "queue_offset",
    "physical_offset",
    "store_timestamp",
    "body_at",
    "body_len",
    "topic_len_size",
    "topic_len_at",
    "topic_len",
    "topic_at",
    "props_len_at",
    "props_len",
    "props_at",
    "expected",
    "crc",
)


def record_cols(a: np.ndarray, pos: np.ndarray, small: int, out: np.ndarray) -> int:
    """The reference of the C ``record_cols``: ``out`` (int64, ``len(COLS)`` columns of
    ``len(pos)`` items one after another) gets :data:`COLS` of the records at ``pos`` of the
    uint8 array ``a``, the last one the CRC of each body shorter than ``small`` (-1 for the
    others, or all with ``small`` <= 0); returns how many bodies were not (0 with ``small``
    <= 0), or -1 when a field of some record lies outside ``a`` (``out`` then partly written)."""
    n = pos.size
    if out.size != n * len(COLS):
        raise ValueError(f"record_cols: out holds {out.size} items, need {n * len(COLS)}")
    if n and not ((pos >= 0) & (pos <= a.size - HEAD_SIZE)).all():
        return -1
    r = RecordBatch(a, pos)
    # every position grows along a record, PROPERTIESLENGTH last: when it lies inside, every
    # read before it did (and RecordBatch's clipped reads gave the exact bytes)
    if n and not (r.props_len_at + PROPERTIES_LENGTH.size <= a.size).all():
        return -1
    cols = out.reshape(len(COLS), n)
    for k, name in enumerate(COLS[:-1]):
        cols[k] = getattr(r, name)
    crc = cols[-1]
    crc[:] = -1
    if small <= 0:
        return 0
    bl = np.maximum(r.body_len, 0)
    sm = np.flatnonzero(bl < small)
    crc[sm] = body_crcs(a, r.body_at[sm], bl[sm])
    return n - sm.size


class RecordColumns:
    """The fields verify's batch check reads, by :data:`COLS` name (:class:`RecordBatch`'s
    names), of the records at ``pos``; ``crc``: the computed body CRCs (-1 where zlib is
    still to compute them), or None when nothing was computed."""

    def __init__(self, pos: np.ndarray, cols: dict[str, np.ndarray], crc: np.ndarray | None):
        self.pos, self.crc = pos, crc
        self.__dict__.update(cols)

    @classmethod
    def read(cls, kern, a: np.ndarray, pos: np.ndarray, small: int) -> RecordColumns:
        """The columns by the C loop (``kern``) or its twin (None); when a field lies outside
        ``a`` (a broken record near the file's end), RecordBatch's clipped reads instead,
        no CRC computed: verify's bounds checks then stop at that record."""
        pos = np.ascontiguousarray(pos, np.int64)
        out = np.empty(len(COLS) * pos.size, np.int64)
        big = (record_cols if kern is None else kern.record_cols)(a, pos, small, out)
        if big < 0:
            r = RecordBatch(a, pos)
            return cls(pos, {name: getattr(r, name) for name in COLS[:-1]}, None)
        cols = out.reshape(len(COLS), pos.size)
        crc = cols[-1] if small > 0 else None
        return cls(pos, dict(zip(COLS[:-1], cols[:-1], strict=True)), crc)

    def head(self, n: int) -> RecordColumns:
        """The first ``n`` records."""
        cols = {name: self.__dict__[name][:n] for name in COLS[:-1]}
        return RecordColumns(self.pos[:n], cols, None if self.crc is None else self.crc[:n])


def topic_ids(a, ta: np.ndarray, tl: np.ndarray, names, noff: np.ndarray, slots: np.ndarray, out: np.ndarray) -> int:
    """The reference of the C ``topic_ids``: ``out[i]`` = the id ``k`` of the name
    ``names[noff[k]:noff[k+1]]`` equal to the topic ``a[ta[i]:ta[i]+tl[i]]``, -1 when none is
    (or ``tl[i]`` < 0, or the range lies outside ``a``); returns how many -1. ``slots`` is the
    C loop's own hash table: the reference needs none."""
    raw = bytes(names)
    ids = {raw[s:e]: k for k, (s, e) in enumerate(zip(noff[:-1].tolist(), noff[1:].tolist(), strict=True))}
    mv, size = memoryview(a).cast("B"), len(a)
    for i, (at, ln) in enumerate(zip(ta.tolist(), tl.tolist(), strict=True)):
        ok = ln >= 0 and 0 <= at <= size and ln <= size - at
        out[i] = ids.get(bytes(mv[at : at + ln]), -1) if ok else -1
    return int((out[: ta.size] < 0).sum())


class TopicTable:
    """The topics verify has numbered, joined for the C loop ``topic_ids``, with its hash
    table (grown to a power of two above twice the topics)."""

    def __init__(self):
        self._names = bytearray()
        self._noff = [0]
        self.count = 0
        self._slots = np.full(17, -1, np.int64)
        self._slots[0] = 0
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None  # names and noff as arrays, until an add

    def add(self, name: bytes) -> None:
        """Register the next id's topic bytes."""
        self._names += name
        self._noff.append(len(self._names))
        self.count += 1
        self._arrays = None

    def lookup(self, kern, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """The id of each record's topic ``a[ta:ta+tl]``, -1 where not registered, by the C
        loop (``kern``) or its twin (None)."""
        size = self._slots.size - 1
        if size <= 2 * self.count:
            while size <= 2 * self.count:
                size *= 2
            self._slots = np.full(size + 1, -1, np.int64)
            self._slots[0] = 0
        out = np.empty(ta.size, np.int64)
        if self._arrays is None:
            self._arrays = (np.frombuffer(bytes(self._names), np.uint8), np.asarray(self._noff, np.int64))
        names, noff = self._arrays
        loop = topic_ids if kern is None else kern.topic_ids
        loop(a, np.ascontiguousarray(ta, np.int64), np.ascontiguousarray(tl, np.int64), names, noff, self._slots, out)
        return out
