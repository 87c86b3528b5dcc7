"""verify's per-batch columns in one pass: the reference twin of the C loop ``record_cols``
(``store/_ckernels.c``), and the object verify keeps its results in (the topic ids' loop
``topic_ids``, its twin and table: ``store/records/topics.py``, shared with rebuild-index's
dispatch).

:func:`record_cols` is :class:`~rmqstore_cli.store.commitlog.bulk.RecordBatch` (the fields
``MessageDecoder#decode`` lays out, ``CommitLog#calMsgLength``) plus the CRC of every small
body (``UtilAll#crc32``): the C loop reads each record once instead of some twenty numpy
gathers over the batch. The twin gives its loop's result to the bit
(tests/equivalence/test_ckernels_fused.py); ``RMQSTORE_PURE=1`` runs the twins
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
