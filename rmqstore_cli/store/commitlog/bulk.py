"""The commit log read in bulk: many records at once (numpy), beside the per-record read.

:func:`walk_records` finds where records start (TOTALSIZE and MAGICCODE only:
docs/format/commitlog.md#reading-a-commit-log-file); :class:`RecordBatch` gives every field
position and length of those records at once (their body CRCs: :func:`~rmqstore_cli.store.files.crc.body_crcs`).
``check_message`` stays the single source of verdicts and reasons; every offset, size and
dtype here comes from ``formats.commitlog``. The reference loop or its compiled twin is
chosen by :data:`~rmqstore_cli.store.files.fastpaths.FAST_PATHS` (or forced by ``compiled``).
"""

from __future__ import annotations

import struct
from functools import cached_property
from typing import NamedTuple

import numpy as np
from rmqstore_cli.formats.commitlog import (
    AFTER_BORN_HOST,
    AFTER_BORN_HOST_SIZE,
    AFTER_STORE_HOST,
    BODY_LENGTH,
    BORNHOST_V6_FLAG,
    HEAD,
    HEAD_DTYPE,
    HEAD_SIZE,
    HOST_SIZE,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    PREFIX_DTYPE,
    PREFIX_FORMAT,
    PROPERTIES_LENGTH,
    RECORD_FIXED_SIZE,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_LENGTH,
)

from rmqstore_cli.store.files.arrays import byte_rows, file_array, gather_field
from rmqstore_cli.store.files.fastpaths import FAST_PATHS

_V1_TOPIC_LENGTH, _V2_TOPIC_LENGTH = TOPIC_LENGTH[False], TOPIC_LENGTH[True]


class RecordBatch:
    """Columns of the records starting at byte positions ``pos`` of one file's bytes ``a``.

    Positions of the variable parts follow the record layout (``MessageDecoder#decode``):
    hosts are 8 or 20 bytes by SYSFLAG, TOPICLENGTH is 1 byte (V1) or 2 (V2), lengths are
    signed. Nothing is checked here: a field of a broken record may be read from other
    bytes (:func:`~rmqstore_cli.store.files.arrays.gather` clips), so each reader applies its own
    bounds (the file's end for ``checkMessageAndReturnSize``, the record's end for verify's
    findings) and uses only records that pass them. ``expected`` is ``CommitLog#calMsgLength``.
    """

    def __init__(self, a: np.ndarray, pos: np.ndarray):
        self.a, self.pos = a, pos
        self.total = self._head["total_size"].astype(np.int64)
        self.sys_flag = self._head["sys_flag"].astype(np.int64)
        self._hosts()
        self.body_len = gather_field(a, self.body_len_at, BODY_LENGTH).astype(np.int64)
        self.body_at = self.body_len_at + BODY_LENGTH.size
        body = np.maximum(self.body_len, 0)
        self.v2 = self.magic == MAGIC_V2
        self.topic_len_size = np.where(self.v2, _V2_TOPIC_LENGTH.size, _V1_TOPIC_LENGTH.size)
        self.topic_len_at = self.body_at + body
        if len(pos):  # TOPICLENGTH: a signed short (V2) or a signed byte (V1)
            tl = byte_rows(a, self.topic_len_at, _V2_TOPIC_LENGTH.size)
            self.topic_len = np.where(
                self.v2,
                tl.view(_V2_TOPIC_LENGTH.dtype).ravel(),
                tl[:, : _V1_TOPIC_LENGTH.size].view(_V1_TOPIC_LENGTH.dtype).ravel(),
            ).astype(np.int64)
        else:
            self.topic_len = np.zeros(0, np.int64)
        self.topic_at = self.topic_len_at + self.topic_len_size
        self.props_len_at = self.topic_at + np.maximum(self.topic_len, 0)
        self.props_len = gather_field(a, self.props_len_at, PROPERTIES_LENGTH).astype(np.int64)
        self.props_at = self.props_len_at + PROPERTIES_LENGTH.size
        self.expected = (
            RECORD_FIXED_SIZE
            + self.born_host_len
            + self.store_host_len
            + self.topic_len_size
            + body
            + np.maximum(self.topic_len, 0)
            + np.maximum(self.props_len, 0)
        )

    @classmethod
    def read(cls, a: np.ndarray, pos: np.ndarray) -> RecordBatch:
        """``RecordBatch(a, pos)``, its columns read by the C loop ``record_cols`` in one pass
        over the records where it is built and every field lies inside ``a`` (the numpy
        gathers, one pass per field, cost ~2.5x as much: a block that a dump or an export
        walks); the fixed head and MAGICCODE then only when asked for. Else (the reference
        loops, or a record cut by the file's end: the gathers' clipped reads) the numpy reads."""
        k = FAST_PATHS.kernels()
        if k is None or not len(pos):
            return cls(a, pos)
        pos = np.ascontiguousarray(pos, np.int64)
        cols = np.empty((len(k.REC_COLS), pos.size), np.int64)
        if k.record_cols(a, pos, 0, cols.reshape(-1)) < 0:
            return cls(a, pos)
        rb = cls.__new__(cls)
        rb.a, rb.pos = a, pos
        c = dict(zip(k.REC_COLS, cols, strict=True))
        rb.total, rb.sys_flag = c["total"], c["sys_flag"]
        cls._hosts(rb)
        names = k.REC_COLS  # from BODY's start to calMsgLength, as they are (the head's when asked for)
        for name in names[names.index("body_at") : names.index("expected") + 1]:
            setattr(rb, name, c[name])
        rb.v2 = rb.topic_len_size == _V2_TOPIC_LENGTH.size  # record_cols: 2 bytes exactly for V2
        return rb

    @cached_property
    def _head(self) -> np.ndarray:
        """The fixed head (TOTALSIZE .. BORNTIMESTAMP) of every record, in one gather."""
        if not len(self.pos):
            return np.zeros(0, HEAD_DTYPE)
        return byte_rows(self.a, self.pos, HEAD_SIZE).view(HEAD_DTYPE).ravel()

    @cached_property
    def magic(self) -> np.ndarray:
        return self._head["magic"].astype(np.uint32)

    def _hosts(self) -> None:
        """The hosts' sizes (by SYSFLAG) and the positions after them, to BODYLENGTH's."""
        pos = self.pos
        self.born_host_len = np.where(self.sys_flag & BORNHOST_V6_FLAG, HOST_SIZE[True], HOST_SIZE[False])
        self.store_host_len = np.where(self.sys_flag & STOREHOSTADDRESS_V6_FLAG, HOST_SIZE[True], HOST_SIZE[False])
        self.store_ts_at = pos + HEAD_SIZE + self.born_host_len + AFTER_BORN_HOST["store_timestamp"].offset
        self.store_host_at = pos + HEAD_SIZE + self.born_host_len + AFTER_BORN_HOST_SIZE
        #: where RECONSUMETIMES … BODYLENGTH begin (after STOREHOST)
        self.tail_at = self.store_host_at + self.store_host_len
        self.body_len_at = self.tail_at + BODY_LENGTH.offset

    def head_field(self, name: str) -> np.ndarray:
        """A field of the fixed head of every record (a name of ``MessageHead``), as int64."""
        return self._head[name].astype(np.int64)

    def tail_field(self, name: str) -> np.ndarray:
        """RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET or BODYLENGTH of every record (int64)."""
        f = AFTER_STORE_HOST[name]
        return gather_field(self.a, self.tail_at + f.offset, f).astype(np.int64)

    @property
    def body_crc(self) -> np.ndarray:
        return self.head_field("body_crc")

    @property
    def queue_id(self) -> np.ndarray:
        return self.head_field("queue_id")

    @property
    def queue_offset(self) -> np.ndarray:
        return self.head_field("queue_offset")

    @property
    def physical_offset(self) -> np.ndarray:
        return self.head_field("physical_offset")

    @property
    def store_timestamp(self) -> np.ndarray:
        return gather_field(self.a, self.store_ts_at, AFTER_BORN_HOST["store_timestamp"])

    def head(self, n: int) -> RecordBatch:
        """The first ``n`` records."""
        return self.take(slice(0, n))

    def take(self, idx) -> RecordBatch:
        """The records at ``idx`` (an index array or a slice)."""
        out = RecordBatch.__new__(RecordBatch)
        for k, v in self.__dict__.items():
            if k == "a":
                out.__dict__[k] = v
            elif k == "_head":  # rows as opaque items: numpy copies each whole, not field by field (~10x)
                out.__dict__[k] = v.view(np.dtype((np.void, v.dtype.itemsize)))[idx].view(v.dtype)
            else:
                out.__dict__[k] = v[idx]
        return out


# ---------------------------------------------------------------- the record walk

_TOTAL_UNPACK = struct.Struct(HEAD["total_size"].fmt).unpack_from
_PREFIX_UNPACK = struct.Struct(PREFIX_FORMAT).unpack_from
_PREFIX_SIZE = PREFIX_DTYPE.itemsize


class Walk(NamedTuple):
    """What :func:`walk_records` found: record ``starts`` (int64 file positions), ``end``
    (the position after the last record, where the walk stopped) and ``stop``, why it
    stopped there: None (``max_n`` records walked; the walk goes on from ``end``), or

    * ``"blank"`` — MAGICCODE is BLANK (the end-of-file record; its size is not checked);
    * ``"zero"`` — TOTALSIZE and MAGICCODE both 0 (the zero tail of a preallocated file);
    * ``"bad"`` — anything else that cannot start a record: a MAGICCODE that is neither
      V1 nor V2, or a TOTALSIZE below ``min_total`` or past ``limit``;
    * ``"short"`` — 1 to 7 bytes left before ``limit``, too few for TOTALSIZE + MAGICCODE;
    * ``"eof"`` — ``end == limit``.
    """

    starts: np.ndarray
    end: int
    stop: str | None


def stop_kind(buf, pos: int, limit: int, header: int = 0) -> str:
    """:class:`Walk`'s ``stop`` for bytes at ``pos`` that do not start a walkable record
    (``header``: a DLedger entry's there, whose blank is ``MmapFileList``'s)."""
    if limit - pos < _PREFIX_SIZE:
        return "eof" if pos >= limit else "short"
    if header:
        from rmqstore_cli.store.commitlog.dledger import entry_stop_kind

        return entry_stop_kind(buf, pos)
    total, magic = _PREFIX_UNPACK(buf, pos)
    if magic == MAGIC_BLANK:
        return "blank"
    return "zero" if magic == 0 and total == 0 else "bad"


def walk_records(
    buf,
    pos: int,
    limit: int,
    max_n: int,
    min_total: int = HEAD_SIZE,
    a: np.ndarray | None = None,
    compiled: bool | None = None,
    header: int = 0,
) -> Walk:
    """The record walk of docs/format/commitlog.md#reading-a-commit-log-file (TOTALSIZE and
    MAGICCODE only) from ``pos``.

    A record starts at ``pos`` when its MAGICCODE is V1 or V2 and ``min_total <= TOTALSIZE
    <= limit - pos``; the next one starts TOTALSIZE bytes later. Walks at most ``max_n``
    records; stops at the first position that does not start a record (see :class:`Walk`).
    ``buf`` is the file's mapping, ``a`` the same bytes as a uint8 array (made if None).
    rebuild-index uses ``min_total = HEAD_SIZE`` (``checkMessageAndReturnSize`` judges the
    rest), verify the smallest possible record. ``compiled``: True or False forces the
    C or the reference loop; None lets :data:`FAST_PATHS` choose.

    ``header`` > 0 walks a DLedger data file (:mod:`~rmqstore_cli.store.commitlog.dledger`):
    ``pos`` and ``end`` are entry starts, ``starts`` the records ``header`` bytes after them,
    and an entry counts only with magic 1 and its size TOTALSIZE + ``header``.
    """
    loop = FAST_PATHS.walk_loop(compiled, entries=bool(header))
    if loop is not None:
        if a is None:
            a = file_array(buf)
        starts = np.empty(max_n, np.int64)
        if header:
            n, end = loop(a, pos, limit, max_n, min_total, header, starts)
        else:
            n, end = loop(a, pos, limit, max_n, min_total, starts)
        return Walk(starts[:n], end, None if n == max_n else stop_kind(buf, end, limit, header))
    return _walk_reference(buf, pos, limit, max_n, min_total, a, header)


def _walk_reference(
    buf, pos: int, limit: int, max_n: int, min_total: int, a: np.ndarray | None, header: int = 0
) -> Walk:
    """The loop is the one sequential part of reading a file, so it does the least per
    record: it reads TOTALSIZE only and follows it; MAGICCODE and the bounds of every
    record are then checked at once with numpy and the walk is cut at the first record
    that fails them, so the result is exactly that of checking each record before taking
    its size. A zero TOTALSIZE jumps to ``limit`` (ends the loop); garbage beyond the
    first failure costs at most ``max_n`` steps and is discarded. ``header`` > 0: DLedger
    entries (the twin of ``kernels.walk_entries``), each record ``header`` bytes after its
    entry's start, whose magic and size are checked with the records'."""
    out, end = _follow_sizes(buf, pos, limit, max_n, header)
    P = np.array(out, np.int64)
    if P.size:
        if a is None:
            a = file_array(buf)
        k = _first_bad(a, P, limit, min_total, header)
        if k is not None:
            end = int(P[k]) - header
            return Walk(P[:k], end, stop_kind(buf, end, limit, header))
    if len(out) == max_n:
        return Walk(P, end, None)
    return Walk(P, end, stop_kind(buf, end, limit, header))


def _follow_sizes(buf, pos: int, limit: int, max_n: int, header: int) -> tuple[list[int], int]:
    """Record starts by TOTALSIZE alone from ``pos``, at most ``max_n`` (a zero size jumps to
    ``limit``), and where the last one ends; two loops, so the plain one does not pay for the
    entry header."""
    out: list[int] = []
    app = out.append
    unpack = _TOTAL_UNPACK
    end = pos
    try:
        if header:
            for _ in range(max_n):
                r = end + header
                app(r)
                end = r + (unpack(buf, r)[0] or limit)
        else:
            for _ in range(max_n):
                app(end)
                end += unpack(buf, end)[0] or limit
    except struct.error:  # fewer than 4 bytes left (or a position past the mapping): not a record
        out.pop()
    return out, end


def _first_bad(a: np.ndarray, P: np.ndarray, limit: int, min_total: int, header: int) -> int | None:
    """The first of the starts ``P`` whose MAGICCODE or TOTALSIZE (or DLedger entry) fails,
    all checked at once; None when every one holds."""
    head = np.ascontiguousarray(byte_rows(a, P, _PREFIX_SIZE)).view(PREFIX_DTYPE).ravel()  # clipped like gather
    total = head["total_size"].astype(np.int64)
    magic = head["magic"]
    ok = ((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (total >= min_total) & (total <= limit - P)
    if header:
        from rmqstore_cli.store.commitlog.dledger import entries_ok

        ok &= entries_ok(a, P, total, header)
    return None if ok.all() else int(np.argmin(ok))
