"""Columnar reading of commit-log records: what the vectorised readers share.

Two readers take many records at once with numpy instead of one
:func:`~rmqstore_cli.store.commitlog.check_message` call per record: rebuild-index's
:mod:`fastdispatch` and :mod:`verify`. ``check_message`` stays the single source of
verdicts and reasons; this module holds the facts both columnar paths need, once:

* :func:`gather` — big-endian integers at many byte positions of a mapping, and
  :class:`RecordBatch` — every field position and length of many records at once (the
  layout of STORE-FORMAT §2.2, offsets from the ``formats`` declarations);
* Java ``String#hashCode`` of many strings or byte ranges (:class:`RangeHashes`,
  :func:`java_hashes`, :func:`concat_hashes`) and ``IndexFile#indexKeyHashMethod``
  (:func:`index_hash`), exact to the bit: uint32 arithmetic wraps as Java's int does;
* :func:`release_pages` — pages already read dropped from the process (re-exported from
  :mod:`mapped_files`, where the numpy-free per-record scan uses it too).
"""
from __future__ import annotations

import struct
from functools import cached_property
from typing import NamedTuple

import numpy as np

from rmqstore_cli.formats.commitlog import (
    BORNHOST_V6_FLAG,
    CRC32_PROPERTY,
    HEAD_SIZE,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    HostV4,
    HostV6,
    MessageHead,
    middle_format,
)
from rmqstore_cli.formats.derive import field_offset, numpy_dtype
from rmqstore_cli.formats.properties import parse_properties
from rmqstore_cli.store.crc import crc32
from rmqstore_cli.store.mapped_files import release_pages

__all__ = ["gather", "byte_rows", "distinct_rows", "stable_argsort", "RecordBatch", "walk_records", "compile_walk", "compile_for", "Walk", "stop_kind", "TopicIds", "body_crcs", "pow31", "pow31_tables", "RangeHashes", "java_hashes", "concat_hashes", "java_int",
           "index_hash", "index_hashes", "release_pages", "pick_property", "props_well_formed", "Properties",
           "IndexKeys", "CRC_MARK"]

_INT_MIN = -(1 << 31)
CRC_MARK = (CRC32_PROPERTY + "\x01").encode()  # the __CRC32# pair (§2.8)


def cat_bytes(cat: np.ndarray) -> bytes:
    """The bytes of a uint8 array: the bytes object it views when there is one (no copy)."""
    b = cat.base
    return b if isinstance(b, bytes) and len(b) == cat.size else cat.tobytes()


def file_array(buf) -> np.ndarray:
    """A mapped file's bytes as a uint8 array (a view, never a copy; empty for an empty file)."""
    return np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.empty(0, np.uint8)


def distinct_rows(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct row, each row's distinct number) of a uint8 (n, 4) or
    (n, 16) array (IPv4 / IPv6 addresses): 4-byte rows sorted as numbers; 16-byte rows
    through a 64-bit mix of their halves, checked exactly (a 16-byte sort when two mix alike)."""
    if raw.shape[1] == 4:
        key = raw.view("<u4").ravel()
    else:
        u = raw.view("<u8")
        key = u[:, 0] * np.uint64(0x9E3779B97F4A7C15) ^ u[:, 1]
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if raw.shape[1] != 4 and not (raw == raw[first[inv]]).all():  # two addresses mixed alike
        _, first, inv = np.unique(raw.view("V16").ravel(), return_index=True, return_inverse=True)
        inv = inv.ravel()
    return first, inv


def gather(a: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    """Big-endian ints of ``width`` bytes at byte positions ``pos`` of the uint8 array ``a``,
    as native ints. Positions are clipped to ``a``: a field read past the end yields some
    in-bounds bytes, so callers mask such records by their own bounds checks."""
    native = np.dtype(dtype).newbyteorder("=")
    if not len(pos):
        return np.empty(0, dtype=native)
    return byte_rows(a, pos, width).view(dtype).ravel().astype(native)


def stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")`` for non-negative integers, faster: ties broken by
    position inside one unique key ``x * n + i``, which numpy's default (SIMD) sort orders
    several times faster than its stable merge sort; the stable sort when that key would
    not fit an int64. Values below 2^15 (lengths, record numbers of a block): numpy's radix
    sort of 16-bit ints, which is stable and faster still."""
    n = x.size
    if n > 1 and x.dtype.kind in "iu" and int(x.min()) >= 0 and int(x.max()) < (1 << 62) // n:
        if int(x.max()) < (1 << 15):
            return np.argsort(x.astype(np.int16), kind="stable")
        return np.argsort(x.astype(np.int64) * n + np.arange(n))
    return np.argsort(x, kind="stable")


def byte_rows(a: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at each byte position ``pos`` of ``a``: a (len(pos), width) uint8
    array (byte indexes clipped to ``a``, as :func:`gather` says). When every row lies
    inside ``a`` they are rows of a sliding window: one copy of the bytes, no index array."""
    if a.size >= width and int(pos.min()) >= 0 and int(pos.max()) <= a.size - width:
        return np.lib.stride_tricks.sliding_window_view(a, width)[pos]
    idx = pos[:, None] + np.arange(width)
    np.clip(idx, 0, a.size - 1, out=idx)
    return a[idx]


_OFF = {name: field_offset(MessageHead, name) for name in
        ("total_size", "magic", "body_crc", "queue_id", "queue_offset", "physical_offset", "sys_flag")}
_HEAD_DTYPE = numpy_dtype(MessageHead)  # the fixed head as one big-endian record (formats/derive.py)
_V4_HOST, _V6_HOST = HostV4.sizeof(), HostV6.sizeof()
# CommitLog#calMsgLength without hosts, body, topic and properties: the head, store time,
# RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH and the PROPERTIES length (74)
_CAL_FIXED = HEAD_SIZE + struct.calcsize(middle_format(False, False)) - 2 * _V4_HOST + 2


class RecordBatch:
    """Columns of the records starting at byte positions ``pos`` of one file's bytes ``a``.

    Positions of the variable parts follow the record layout (``MessageDecoder#decode``):
    hosts are 8 or 20 bytes by SYSFLAG, TOPICLENGTH is 1 byte (V1) or 2 (V2), lengths are
    signed. Nothing is checked here: a field of a broken record may be read from other
    bytes (:func:`gather` clips), so each reader applies its own bounds (the file's end
    for ``checkMessageAndReturnSize``, the record's end for verify's findings) and uses
    only records that pass them. ``expected`` is ``CommitLog#calMsgLength`` of the fields.
    """

    def __init__(self, a: np.ndarray, pos: np.ndarray):
        self.a, self.pos = a, pos
        if len(pos):  # the fixed head (TOTALSIZE .. BORNTIMESTAMP) of every record in one gather
            self._head = byte_rows(a, pos, HEAD_SIZE).view(_HEAD_DTYPE).ravel()
        else:
            self._head = np.zeros(0, _HEAD_DTYPE)
        self.total = self._head["total_size"].astype(np.int64)
        self.magic = self._head["magic"].astype(np.uint32)
        self.sys_flag = self._head["sys_flag"].astype(np.int64)
        self.born_host_len = np.where(self.sys_flag & BORNHOST_V6_FLAG, _V6_HOST, _V4_HOST)
        self.store_host_len = np.where(self.sys_flag & STOREHOSTADDRESS_V6_FLAG, _V6_HOST, _V4_HOST)
        self.store_ts_at = pos + HEAD_SIZE + self.born_host_len
        # STORETIMESTAMP, STOREHOST, RECONSUMETIMES (4), PREPAREDTRANSACTIONOFFSET (8), BODYLENGTH
        self.body_len_at = self.store_ts_at + 8 + self.store_host_len + 4 + 8
        self.body_len = gather(a, self.body_len_at, 4, ">i4").astype(np.int64)
        self.body_at = self.body_len_at + 4
        body = np.maximum(self.body_len, 0)
        self.v2 = self.magic == MAGIC_V2
        self.topic_len_size = np.where(self.v2, 2, 1)
        self.topic_len_at = self.body_at + body
        if len(pos):  # TOPICLENGTH: 2 bytes (V2) or the first of them (V1), signed
            tl = byte_rows(a, self.topic_len_at, 2)
            self.topic_len = np.where(self.v2, tl.view(">i2").ravel(), tl[:, 0].view(np.int8)).astype(np.int64)
        else:
            self.topic_len = np.zeros(0, np.int64)
        self.topic_at = self.topic_len_at + self.topic_len_size
        self.props_len_at = self.topic_at + np.maximum(self.topic_len, 0)
        self.props_len = gather(a, self.props_len_at, 2, ">i2").astype(np.int64)
        self.props_at = self.props_len_at + 2
        self.expected = (_CAL_FIXED + self.born_host_len + self.store_host_len + self.topic_len_size + body
                         + np.maximum(self.topic_len, 0) + np.maximum(self.props_len, 0))

    def field(self, name: str, width: int, dtype: str, at: np.ndarray | None = None) -> np.ndarray:
        """A fixed field of every record: ``name`` of MessageHead, or bytes at positions ``at``."""
        return gather(self.a, (self.pos + _OFF[name]) if at is None else at, width, dtype)

    @property
    def body_crc(self) -> np.ndarray:
        return self._head["body_crc"].astype(np.int64)

    @property
    def queue_id(self) -> np.ndarray:
        return self._head["queue_id"].astype(np.int64)

    @property
    def queue_offset(self) -> np.ndarray:
        return self._head["queue_offset"].astype(np.int64)

    @property
    def physical_offset(self) -> np.ndarray:
        return self._head["physical_offset"].astype(np.int64)

    @property
    def store_timestamp(self) -> np.ndarray:
        return self.field("", 8, ">i8", self.store_ts_at)

    def head(self, n: int) -> "RecordBatch":
        """The first ``n`` records."""
        return self.take(slice(0, n))

    def take(self, idx) -> "RecordBatch":
        """The records at ``idx`` (an index array or a slice)."""
        out = RecordBatch.__new__(RecordBatch)
        for k, v in self.__dict__.items():
            out.__dict__[k] = v if k == "a" else v[idx]
        return out


# ---------------------------------------------------------------- the record walk

_TOTAL_UNPACK = struct.Struct(">i").unpack_from
_PREFIX_UNPACK = struct.Struct(">iI").unpack_from
_PREFIX_DTYPE = np.dtype([("total", ">i4"), ("magic", ">u4")])


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


def stop_kind(buf, pos: int, limit: int) -> str:
    """:class:`Walk`'s ``stop`` for bytes at ``pos`` that do not start a walkable record."""
    if limit - pos < 8:
        return "eof" if pos >= limit else "short"
    total, magic = _PREFIX_UNPACK(buf, pos)
    if magic == MAGIC_BLANK:
        return "blank"
    return "zero" if magic == 0 and total == 0 else "bad"


#: records walked in this process before :func:`walk_records` switches to the compiled loop
#: (:mod:`~rmqstore_cli.store.kernels`): numba's import and cached code cost ~0.3 s once,
#: the loop saves ~0.4–0.7 µs a record
WALK_COMPILE_AFTER = 500_000
_WALK: dict = {"walked": 0, "loop": None}  # loop: None (not yet), False (no numba), or the compiled walk


#: a task that reads a commit-log file at least this large (a pipeline task: one file) turns
#: the compiled loops on at once instead of after WALK_COMPILE_AFTER records: each task is
#: its own Verifier and each Spark worker its own process, so the record counts alone would
#: leave every task of a 1 GiB file on the interpreted loops
COMPILE_FOR_BYTES = 64 << 20


def compile_walk() -> bool:
    """Walk with the compiled loop from now on (a command that has loaded numba anyway asks
    for it at once); False without numba."""
    if _WALK["loop"] is None:
        try:
            from rmqstore_cli.store.kernels import walk
        except ImportError:  # pragma: no cover - numba is a dependency
            walk = False
        _WALK["loop"] = walk
    return bool(_WALK["loop"])


def compile_for(nbytes: int) -> bool:
    """A task about to read ``nbytes`` of commit log: the compiled loops from now on when
    that is :data:`COMPILE_FOR_BYTES` or more (True then, unless numba is missing)."""
    return nbytes >= COMPILE_FOR_BYTES and compile_walk()


def walk_records(buf, pos: int, limit: int, max_n: int, min_total: int = HEAD_SIZE,
                 a: np.ndarray | None = None) -> Walk:
    """The record walk of STORE-FORMAT §7.1 (TOTALSIZE and MAGICCODE only) from ``pos``.

    A record starts at ``pos`` when its MAGICCODE is V1 or V2 and ``min_total <= TOTALSIZE
    <= limit - pos``; the next one starts TOTALSIZE bytes later. Walks at most ``max_n``
    records; stops at the first position that does not start a record (see :class:`Walk`).
    ``buf`` is the file's mapping, ``a`` the same bytes as a uint8 array (made if None).
    rebuild-index uses ``min_total = HEAD_SIZE`` (``checkMessageAndReturnSize`` judges the
    rest), verify the smallest possible record.

    The loop is the one sequential part of reading a file, so it does the least per
    record: it reads TOTALSIZE only and follows it; MAGICCODE and the bounds of every
    record are then checked at once with numpy and the walk is cut at the first record
    that fails them, so the result is exactly that of checking each record before taking
    its size. A zero TOTALSIZE jumps to ``limit`` (ends the loop); garbage beyond the
    first failure costs at most ``max_n`` steps and is discarded. After
    :data:`WALK_COMPILE_AFTER` records in the process the same walk runs compiled, checking
    each record before following it (the same result, tested).
    """
    loop = _WALK["loop"]
    if loop is None and _WALK["walked"] >= WALK_COMPILE_AFTER:
        loop = compile_walk() and _WALK["loop"]
    if loop:
        if a is None:
            a = file_array(buf)
        starts = np.empty(max_n, np.int64)
        n, end = loop(a, pos, limit, max_n, min_total, starts)
        _WALK["walked"] += n
        return Walk(starts[:n], end, None if n == max_n else stop_kind(buf, end, limit))
    out: list[int] = []
    app = out.append
    unpack = _TOTAL_UNPACK
    end = pos
    try:
        for _ in range(max_n):
            app(end)
            end += unpack(buf, end)[0] or limit
    except struct.error:  # fewer than 4 bytes left (or a position past the mapping): not a record
        out.pop()
    P = np.array(out, np.int64)
    _WALK["walked"] += P.size
    if P.size:
        if a is None:
            a = file_array(buf)
        head = np.ascontiguousarray(byte_rows(a, P, 8)).view(_PREFIX_DTYPE).ravel()  # clipped like gather
        total = head["total"].astype(np.int64)
        magic = head["magic"]
        ok = ((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (total >= min_total) & (total <= limit - P)
        if not ok.all():
            k = int(np.argmin(ok))
            end = int(P[k])
            return Walk(P[:k], end, stop_kind(buf, end, limit))
    if len(out) == max_n:
        return Walk(P, end, None)
    return Walk(P, end, stop_kind(buf, end, limit))


# ---------------------------------------------------------------- topics

_MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)


class TopicIds:
    """Ids of the topics of many records at once, from the topics' bytes in the mapping.

    A topic's key is its first 8 bytes, its last 8 bytes (zero-filled when shorter), 8 bytes
    from its middle and its length, mixed into one uint64 looked up in the sorted keys of the topics registered so
    far; every match is then confirmed on the exact key, and topics longer than 16 bytes
    byte for byte. Records whose topic is not registered (or whose key collides) get -1:
    the caller registers those with :meth:`add`, in record order, as it would one by one.
    """

    def __init__(self):
        self.ids: dict[bytes, int] = {}
        self._keys = np.zeros(0, np.uint64)  # sorted mixed keys
        self._key_ids = np.zeros(0, np.int64)
        self._exact = np.zeros((0, 3), np.uint64)  # per id: head, tail, length
        self._names: list[bytes] = []
        self._name_rows = np.zeros((0, 0), np.uint8)  # per id: the topic's bytes, zero-padded

    @staticmethod
    def _key_parts(a: np.ndarray, ta: np.ndarray, tl: np.ndarray):
        cols = np.arange(8)
        L = np.maximum(tl, 0)
        head = np.where(cols < L[:, None], byte_rows(a, ta, 8), 0).astype(np.uint8)
        tail = np.where(cols >= 8 - L[:, None], byte_rows(a, ta + L - 8, 8), 0).astype(np.uint8)
        mid = np.where(L[:, None] > 16, byte_rows(a, ta + L // 2 - 4, 8), 0).astype(np.uint8) if (L > 16).any() \
            else np.zeros((L.size, 8), np.uint8)  # no topic longer than 16 bytes: no middle to read
        u64 = [np.ascontiguousarray(x).view(">u8").ravel().astype(np.uint64) for x in (head, tail, mid)]
        return u64[0], u64[1] ^ (u64[2] * _MIX2), L.astype(np.uint64)

    @staticmethod
    def _mix(h, t, L):
        return (h * _MIX1) ^ t ^ L

    def add(self, raw: bytes, tid: int) -> None:
        """Register topic bytes ``raw`` as id ``tid`` (ids are dense, from 0, in order)."""
        self.ids[raw] = tid
        self._names.append(raw)
        w = max(len(x) for x in self._names)
        self._name_rows = np.frombuffer(b"".join(x.ljust(w, b"\0") for x in self._names), np.uint8).reshape(-1, w) \
            if w else np.zeros((len(self._names), 0), np.uint8)
        a = np.frombuffer(raw + bytes(8), np.uint8)
        h, t, L = self._key_parts(a, np.zeros(1, np.int64), np.array([len(raw)], np.int64))
        self._exact = np.concatenate([self._exact, np.stack([h, t, L], 1)])
        k = self._mix(h, t, L)
        if not np.isin(k, self._keys).any():  # a colliding key stays unregistered: those go one by one
            keys = np.concatenate([self._keys, k])
            ids = np.concatenate([self._key_ids, [tid]])
            order = np.argsort(keys, kind="stable")
            self._keys, self._key_ids = keys[order], ids[order]

    @property
    def names(self) -> list[bytes]:
        """Registered topic bytes by id."""
        return self._names

    def ids_of(self, buf, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """Topic id of each record, registering new topics (ids in order of appearance)."""
        tid = self.lookup(a, ta, tl)
        for r in np.flatnonzero(tid < 0).tolist():
            raw = bytes(buf[int(ta[r]):int(ta[r] + tl[r])])
            t = self.ids.get(raw)
            if t is None:
                t = len(self._names)
                self.add(raw, t)
            tid[r] = t
        return tid

    def lookup(self, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """Topic id of each record (topic bytes ``a[ta:ta+tl]``), -1 where not registered."""
        n = ta.size
        out = np.full(n, -1, np.int64)
        if not n or not self._keys.size or not a.size:
            return out
        h, t, L = self._key_parts(a, ta, tl)
        k = self._mix(h, t, L)
        j = np.minimum(np.searchsorted(self._keys, k), self._keys.size - 1)
        cand = self._key_ids[j]
        ex = self._exact[cand]
        ok = (self._keys[j] == k) & (ex[:, 0] == h) & (ex[:, 1] == t) & (ex[:, 2] == L) & (tl >= 0)
        long_ = np.flatnonzero(ok & (tl > 16))
        if long_.size:  # the middle bytes of long topics: compared in full
            W = int(tl[long_].max())
            got = byte_rows(a, ta[long_], W)
            want = self._name_rows[cand[long_], :W]
            inside = np.arange(W) < tl[long_][:, None]
            ok[long_[((got != want) & inside).any(1)]] = False
        out[ok] = cand[ok]
        return out


def body_crcs(buf, body_at: np.ndarray, body_len: np.ndarray) -> np.ndarray:
    """``UtilAll#crc32`` of every body: ``crc32(body) & 0x7FFFFFFF`` (int64); ``body_len`` >= 0.
    The broker stores 0 for an empty body, which this also gives (crc32 of nothing is 0)."""
    mv = memoryview(buf)
    n = len(body_at)
    ends = (body_at + body_len).tolist()
    return np.fromiter(map(crc32, map(mv.__getitem__, map(slice, body_at.tolist(), ends))), np.int64,
                       n) & 0x7FFFFFFF


# ---------------------------------------------------------------- Java String#hashCode

_INV31 = pow(31, -1, 1 << 32)  # 31 is odd, so invertible mod 2^32
_POW: tuple[np.ndarray, np.ndarray] = (np.ones(1, np.uint32), np.ones(1, np.uint32))


def pow31_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``31^k`` and ``31^-k`` mod 2^32 (uint32) for k < n at least; cached, grown by doubling."""
    global _POW
    if _POW[0].size < n:
        size = 1 << max(10, (n - 1).bit_length())
        fw, bw = np.ones(1, np.uint32), np.ones(1, np.uint32)
        f_step, b_step = 31, _INV31
        while fw.size < size:
            fw = np.concatenate([fw, fw * np.uint32(f_step)])
            bw = np.concatenate([bw, bw * np.uint32(b_step)])
            f_step, b_step = f_step * f_step & 0xFFFFFFFF, b_step * b_step & 0xFFFFFFFF
        _POW = (fw, bw)
    return _POW


def pow31(n: int) -> np.ndarray:
    """``31^k`` mod 2^32 (uint32) for k < n at least."""
    return pow31_tables(n)[0]


class RangeHashes:
    """``String#hashCode`` (uint32) of any ranges ``units[a:b]`` of one array of code units.

    One prefix sum serves every range: ``hash(u[a:b]) = 31^(b-1) * (S[b] - S[a])`` with
    ``S[k] = sum(u_i * 31^-i, i < k)``, all mod 2^32. The units are UTF-16 code units, or
    bytes of ASCII text (where byte = code unit); non-ASCII UTF-8 must be re-hashed over its
    UTF-16 units (:func:`java_hashes`)."""

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


_MAX_LENGTH_GROUPS = 48


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
        if cuts.size >= _MAX_LENGTH_GROUPS:
            return None
        groups = [(int(Ls[c]), g) for c, g in zip(np.r_[0, cuts].tolist(), np.split(order, cuts))]
    fw = pow31(hi + 1)
    for length, g in groups:
        if length <= 0:
            continue
        rows = np.lib.stride_tricks.sliding_window_view(units, length)[a if g is None else a[g]]
        h = rows.astype(np.uint32) @ fw[length - 1::-1]  # integer matmul wraps mod 2^32
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


def java_hashes(strings: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``String#hashCode`` (uint32) and UTF-16 length of each UTF-8 byte string.

    Non-ASCII strings are decoded as the broker's decoder would (U+FFFD for bad bytes,
    ``new String(bytes, UTF_8)``) and hashed over their UTF-16 code units."""
    n = len(strings)
    lens = np.fromiter(map(len, strings), np.int64, n)
    joined = b"".join(strings)
    h = _segment_hashes(np.frombuffer(joined, np.uint8), lens)
    if not joined.isascii():
        idx = [i for i, x in enumerate(strings) if not x.isascii()]
        wide = [strings[i] for i in idx]
        cache = _UTF16_HASHES
        todo = list(dict.fromkeys(x for x in wide if x not in cache))
        if todo:
            if len(cache) + len(todo) > _UTF16_CACHE_MAX:
                cache.clear()
            u16 = [x.decode("utf-8", "replace").encode("utf-16-be", "surrogatepass") for x in todo]
            l16 = np.fromiter(map(len, u16), np.int64, len(u16)) // 2
            h16 = _segment_hashes(np.frombuffer(b"".join(u16), ">u2"), l16)
            cache.update(zip(todo, zip(h16.tolist(), l16.tolist())))
        got = np.array([cache[x] for x in wide], np.int64).reshape(-1, 2)
        h[idx] = got[:, 0]
        lens[idx] = got[:, 1]
    return h, lens


# hashCode and UTF-16 length of non-ASCII strings seen (TAGS and keys repeat): the
# decode/encode per string is the slow part of java_hashes
_UTF16_HASHES: dict[bytes, tuple[int, int]] = {}
_UTF16_CACHE_MAX = 1 << 16


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
    return np.where(s == _INT_MIN, 0, np.abs(s))


def index_hashes(keys: list[bytes]) -> np.ndarray:
    """``IndexFile#indexKeyHashMethod`` of many UTF-8 keys (``topic#key``) at once (int64, >= 0)."""
    return index_hash(java_hashes(keys)[0])


# ---------------------------------------------------------------- PROPERTIES

def pick_property(props: bytes, name: bytes) -> bytes | None:
    """The value ``MessageDecoder#string2messageProperties`` keeps for ``name`` (which ends
    with \\x01), picked out of the PROPERTIES bytes without a full parse when possible: the
    last pair of that name wins (\\x02 and \\x01 are single bytes in UTF-8, never inside a
    character); an empty last value is dropped by the parser, so an earlier pair may count
    and the full parse decides. None when absent."""
    i = props.rfind(b"\x02" + name)
    if i >= 0:
        i += 1
    elif props.startswith(name):
        i = 0
    else:
        return None
    j = props.find(b"\x02", i)
    v = props[i + len(name): j if j >= 0 else len(props)]
    if not v:  # an empty value is dropped by the parser; an earlier pair may still count
        return parse_properties(props.decode("utf-8", "replace")).get(name[:-1].decode(), "").encode() or None
    return v




_NOT_SEPARATOR = bytes(c for c in range(256) if c not in (1, 2))
_ALTERNATING = b"\x01\x02" * 16384  # PROPERTIES are at most 32767 bytes (a short length)


def props_well_formed(props: bytes) -> bool:
    """Cheap test that every pair is ``name\\x01value`` with both non-empty and one \\x01.

    False means "look closer" (a value may legally hold \\x01). Counting separators is not
    enough: in ``A\\x01x\\x01y\\x02junk`` the value's extra \\x01 hides a pair without
    one, which the broker's parser drops. So the separators, picked out by one
    ``translate`` (in C, no split), must run \\x01 \\x02 \\x01 ... pair by pair."""
    seps = props.translate(None, _NOT_SEPARATOR)
    n = len(seps)
    return (n <= len(_ALTERNATING) and seps == _ALTERNATING[:n] and (n % 2 == 0) == props.endswith(b"\x02")
            and not props.startswith(b"\x01") and not props.endswith(b"\x01")
            and b"\x02\x01" not in props and b"\x01\x02" not in props)




def _non_ascii_runs(cat: np.ndarray, hp: np.ndarray) -> bytes:
    """The non-ASCII bytes of ``cat`` (at the sorted positions ``hp``), each maximal run of
    them followed by a space: valid UTF-8 exactly when ``cat`` is (an ASCII byte never lies
    inside a multi-byte character, so each run must be whole characters on its own), and
    much shorter to decode."""
    brk = np.flatnonzero(hp[1:] != hp[:-1] + 1) + 1  # a run ends before each break
    vals = cat[hp]
    out = np.full(hp.size + brk.size + 1, 0x20, np.uint8)
    out[np.arange(hp.size) + np.searchsorted(brk, np.arange(hp.size), "right")] = vals
    return out.tobytes()


class IndexKeys:
    """Index keys of a batch: owner message, index hash, and the key text on demand."""

    def __init__(self, owner, hash_, cat, a, b, topic_of):
        self.owner, self.hash, self._cat, self._a, self._b, self._topic_of = owner, hash_, cat, a, b, topic_of

    def text(self, x: int) -> str:
        key = bytes(self._cat[self._a[x]:self._b[x]]).decode("utf-8", "backslashreplace")
        return f"{self._topic_of(int(self.owner[x]))}#{key}"




class Properties:
    """``MessageDecoder#string2messageProperties`` for a whole batch at once, on the bytes.

    Pair boundaries are the \x02 bytes; a pair's name runs to its first \x01 (both are
    single bytes in UTF-8, never inside a multi-byte character). The last pair of a name
    wins; empty names/values are dropped, as the broker's parser does.

    Java ``String#hashCode`` of any byte range comes from one prefix sum:
    ``hash(cat[a:b]) = 31^(b-1) * (S[b] - S[a])`` with ``S[k] = sum(c_i * 31^-i, i < k)``,
    all mod 2^32 (uint32 arithmetic wraps exactly like Java's int). Non-ASCII ranges are
    hashed over UTF-16 code units in Python instead.
    """

    def __init__(self, arr: np.ndarray, ps: np.ndarray, pl: np.ndarray, buf=None, checks: bool = True,
                 joined: np.ndarray | None = None):
        """``checks=False``: only pairs and values (what dispatch reads); no well-formedness
        marks, so :meth:`suspects` and :meth:`simple` are not available. ``joined``: the
        ranges' bytes already joined by the caller (verify's compiled loop)."""
        n = ps.size
        self.n = n
        self._prefix = None
        self._hashes: RangeHashes | None = None
        self.suspect = np.zeros(n, bool)
        tot = int(pl.sum())
        self.tot = tot
        self.hp = np.zeros(0, np.int64)
        if not tot:
            self.cat = np.zeros(0, np.uint8)
            return
        moff = np.cumsum(pl) - pl
        self.moff, self.mend = moff, moff + pl
        if joined is not None:
            cat = joined
        elif buf is not None:  # slicing the mapping and joining is cheaper than a numpy gather
            cat = np.frombuffer(b"".join(map(buf.__getitem__, map(slice, ps.tolist(), (ps + pl).tolist()))),
                                np.uint8)
        else:
            cat = arr[np.repeat(ps - moff, pl) + np.arange(tot)]
        self.cat = cat
        sep = np.flatnonzero(cat == 2)
        starts = np.concatenate([moff[pl > 0], sep + 1])
        starts.sort(kind="stable")
        if starts.size > 1:
            starts = starts[np.r_[True, starts[1:] != starts[:-1]]]
        starts = starts[starts < tot]
        owner = np.searchsorted(moff, starts, "right") - 1
        # a pair ends at the next pair's start, less the \x02 before it if there is one (the
        # next start is the byte after a \x02, or the next message's first byte)
        nxt = np.empty_like(starts)
        nxt[:-1] = starts[1:]
        nxt[-1] = tot
        end = nxt - (cat[nxt - 1] == 2)
        self.starts, self.owner, self.end = starts, owner, end
        self.hp = np.flatnonzero(cat >= 0x80)  # non-ASCII bytes: UTF-8 to validate, UTF-16 to hash
        if not checks:
            self.suspect = None
            return
        # well-formed pairs: name\x01value, both non-empty
        ones = np.flatnonzero(cat == 1)
        if ones.size == starts.size and (ones > starts).all() and (ones[:-1] < starts[1:]).all():
            first1 = ones  # one \x01 inside each pair (the usual case): no search needed
        else:
            k = np.searchsorted(ones, starts)
            first1 = np.where(k < ones.size, ones[np.minimum(k, max(ones.size - 1, 0))], tot) if ones.size else \
                np.full(starts.size, tot)
        good = (first1 > starts) & (first1 < end - 1)
        self.suspect[owner[~good]] = True
        self.ones, self.first1 = ones, first1  # every \x01; the first at or after each pair start

    @cached_property
    def non_ascii_msg(self) -> np.ndarray:
        """Messages with a non-ASCII byte in their PROPERTIES."""
        out = np.zeros(self.n, bool)
        if self.hp.size:
            out[np.searchsorted(self.moff, self.hp, "right") - 1] = True
        return out

    @cached_property
    def tags_code(self) -> np.ndarray:
        """``tagsString2tagsCode`` of each message's TAGS (0 without one), int64."""
        out = np.zeros(self.n, np.int64)
        m, a, b = self.value(b"TAGS\x01")
        if m.size:
            out[m] = java_int(self.hash_ranges(a, b))
            na = self.non_ascii(a, b)
            if na.size:  # hashCode runs over UTF-16 code units, not the UTF-8 bytes
                raw = cat_bytes(self.cat)
                out[m[na]] = java_int(java_hashes([raw[x:y] for x, y in zip(a[na].tolist(), b[na].tolist())])[0])
        return out

    @cached_property
    def prop_crc(self) -> np.ndarray:
        """Messages with a ``__CRC32#`` property."""
        out = np.zeros(self.n, bool)
        out[self.value(CRC_MARK)[0]] = True
        return out

    def owners(self, at: np.ndarray) -> np.ndarray:
        """The message holding each byte position ``at`` of :attr:`cat`."""
        return np.searchsorted(self.moff, at, "right") - 1

    def simple(self) -> np.ndarray:
        """Messages (bool) whose parse keeps every pair, in order: non-empty, well formed,
        valid UTF-8, one \x01 per pair (none inside a value) and no name twice (names
        compared by length and first four bytes: two names alike in those count as a
        repeat). For these the PROPERTIES bytes can be rewritten pair by pair."""
        out = self.mend > self.moff if self.tot else np.zeros(self.n, bool)
        if not self.tot:
            return out
        out[self.suspects()] = False
        out &= np.bincount(self.owners(self.ones), minlength=self.n) == np.bincount(self.owner, minlength=self.n)
        name_len = np.clip(self.first1 - self.starts, 0, 0xFFFF).astype(np.int64)
        head = self.prefix4.astype(np.int64) >> (8 * np.maximum(4 - name_len, 0))  # a short name's bytes only
        key = np.sort(self.owner.astype(np.int64) << 48 | name_len << 32 | head)
        out[key[1:][key[1:] == key[:-1]] >> 48] = False
        return out

    def suspects(self) -> np.ndarray:
        """Messages whose properties need a closer look: malformed pairs, or non-ASCII bytes
        that may not be UTF-8 (one decode of the whole batch clears them all when it is)."""
        bad = self.suspect.copy()
        if self.hp.size:
            cat = self.cat
            first = cat[self.moff[self.mend > self.moff]]
            cont = ((first & 0xC0) == 0x80).any()  # a character split across two messages
            try:
                if cont:
                    raise UnicodeDecodeError("utf-8", b"", 0, 1, "split")
                _non_ascii_runs(cat, self.hp).decode("utf-8")
            except UnicodeDecodeError:
                bad |= self.non_ascii_msg
        return np.flatnonzero(bad)

    def hash_ranges(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Java hashCode (uint32) of the ASCII byte ranges ``cat[a:b]``."""
        if self._hashes is None:
            h = window_hashes(self.cat, a, b)  # the ranges' bytes only
            if h is not None:
                return h
            self._hashes = RangeHashes(self.cat)  # many different lengths: one prefix sum serves all
        return self._hashes(a, b)

    def non_ascii(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if not self.hp.size:
            return np.zeros(0, np.int64)
        return np.flatnonzero(np.searchsorted(self.hp, b) > np.searchsorted(self.hp, a))

    @property
    def prefix4(self) -> np.ndarray:
        """The first four bytes of every pair as a big-endian uint32 (bytes past the end of
        all PROPERTIES read as the last byte)."""
        if self._prefix is None:
            self._prefix = np.ascontiguousarray(byte_rows(self.cat, self.starts, 4)).view(">u4").ravel()
        return self._prefix

    def value(self, name: bytes):
        """(message index, value start, value end) of the last non-empty pair ``name`` per message."""
        if not self.tot:
            z = np.zeros(0, np.int64)
            return z, z, z
        L = len(name)
        m = np.flatnonzero((self.prefix4 == int.from_bytes(name[:4], "big")) & (self.starts + L < self.end))
        if m.size and L > 4:
            pos = np.minimum(self.starts[m][:, None] + np.arange(4, L), self.tot - 1)
            m = m[(self.cat[pos] == np.frombuffer(name[4:], np.uint8)).all(1)]
        if not m.size:
            z = np.zeros(0, np.int64)
            return z, z, z
        own = self.owner[m]
        last = np.r_[own[1:] != own[:-1], True]
        m = m[last]
        return self.owner[m], self.starts[m] + L, self.end[m]

    def key_ranges(self, indexable: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(message, start, end) in ``cat`` of the keys ``IndexService#buildIndex`` indexes for
        the ``indexable`` messages: every UNIQ_KEY, then every non-empty word of KEYS split at
        spaces (each group in message order)."""
        cat = self.cat
        um, ua, ub = self.value(b"UNIQ_KEY\x01")
        km, ka, kb = self.value(b"KEYS\x01")
        if km.size:  # words of KEYS: split each value at its spaces, drop empty words
            # (value() gives pairs in byte order: ka is sorted)
            sp = np.flatnonzero(cat == 0x20)
            r = np.searchsorted(ka, sp, "right") - 1
            inside = (r >= 0) & (sp < kb[np.maximum(r, 0)])
            sp = sp[inside]
            wa = np.concatenate([ka, sp + 1])
            wb = np.concatenate([sp, kb])
            wa.sort()
            wb.sort()
            keep = wb > wa
            wa, wb = wa[keep], wb[keep]
            wm = km[np.searchsorted(ka, wa, "right") - 1]
        else:
            wa = wb = wm = np.zeros(0, np.int64)
        owner = np.concatenate([um, wm])
        a = np.concatenate([ua, wa])
        b = np.concatenate([ub, wb])
        keep = indexable[owner] if owner.size else np.zeros(0, bool)
        return owner[keep], a[keep], b[keep]

    def index_keys(self, tid: np.ndarray, prefix_hash: np.ndarray, indexable: np.ndarray,
                   topic_names: list[bytes]) -> IndexKeys:
        """``IndexService#buildIndex`` keys (topic#UNIQ_KEY, topic#k for each KEYS word) with their hashes."""
        cat = self.cat
        owner, a, b = self.key_ranges(indexable)
        pfx = prefix_hash[tid[owner]]
        h = self.hash_ranges(a, b)
        lens = b - a
        na = self.non_ascii(a, b)
        if na.size:  # hashCode runs over UTF-16 code units, not the UTF-8 bytes: re-hash those keys
            raw = cat_bytes(cat)
            h[na], lens[na] = java_hashes([raw[x:y] for x, y in zip(a[na].tolist(), b[na].tolist())])
        ih = index_hash(concat_hashes(pfx, lens, h))

        def topic_of(m: int) -> str:
            return topic_names[int(tid[m])].decode("utf-8", "backslashreplace")

        return IndexKeys(owner, ih, cat, a, b, topic_of)
