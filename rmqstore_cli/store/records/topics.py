"""Topic ids of many records at once: the one table a bulk reader keeps of the topics
it has seen (``TopicConfigManager`` has no ids; these are dense, in order of appearance):
with numpy (:class:`TopicIds`), or by the C loop ``topic_ids``'s hash table
(:class:`TopicTable`; its twin :func:`topic_ids` a dict look-up), verify's batch check and
rebuild-index's dispatch alike."""

from __future__ import annotations

import numpy as np

from rmqstore_cli.store.files.arrays import BE_U64, byte_rows, gather
from rmqstore_cli.store.files.fastpaths import FAST_PATHS

_MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


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
        self._synced = 0  # ids in the arrays above; later ones wait for :meth:`_sync`
        self._keyset: set[int] = set()  # the mixed keys registered (a colliding one is not)
        self._c_table = TopicTable()  # the same ids, for the C loop ``topic_ids``

    @staticmethod
    def _key_parts(a: np.ndarray, ta: np.ndarray, tl: np.ndarray):
        """(head, tail mixed with middle, length) of each topic, as uint64: the 8-byte reads
        masked to the topic's bytes by shifts (each by at most 32 bits, done twice: a shift
        by 64 is undefined), no (n, 8) byte rows."""
        L = np.maximum(tl, 0)
        c = np.minimum(L, 8).astype(np.uint64)
        half = (np.uint64(8) - c) * np.uint64(4)  # half the bits of the bytes past the topic's end
        head = gather(a, ta, 8, BE_U64)
        head = ((head >> half) >> half) << half << half
        keep = np.uint64(4) * c  # half the bits of the topic's last min(L, 8) bytes
        tail = gather(a, ta + L - 8, 8, BE_U64) & ~((_ALL << keep) << keep)
        if (L > 16).any():  # the middle: only topics longer than 16 bytes have one
            mid = np.where(L > 16, gather(a, ta + L // 2 - 4, 8, BE_U64), np.uint64(0))
            tail ^= mid * _MIX2
        return head, tail, L.astype(np.uint64)

    @staticmethod
    def _mix(h, t, L):
        return (h * _MIX1) ^ t ^ L

    def keys(self, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """The mixed uint64 key of each topic ``a[ta:ta+tl]`` (equal topics, equal keys)."""
        return self._mix(*self._key_parts(a, ta, tl))

    def add(self, raw: bytes, tid: int) -> None:
        """Register topic bytes ``raw`` as id ``tid`` (ids are dense, from 0, in order). Costs
        a dict entry: the arrays take the new topics in bulk at the next :meth:`lookup`, so
        a store of many topics registers each in microseconds, not a rebuild of every array."""
        self.ids[raw] = tid
        self._names.append(raw)

    def _sync(self) -> None:
        """Put the topics added since the last sync into the arrays, in id order: their key
        parts in one vectorized pass, their mixed keys merged into the sorted keys (a key
        already there, a collision, stays out: those topics are looked up one by one)."""
        new = self._names[self._synced :]
        if not new:
            return
        pad = bytes(8)  # zeros around each name: every 8-byte read of _key_parts stays inside
        buf = pad + b"".join(x + pad for x in new)
        lens = np.fromiter(map(len, new), np.int64, len(new))
        ta = 8 + np.concatenate(([0], np.cumsum(lens + 8)[:-1]))
        h, t, L = self._key_parts(np.frombuffer(buf, np.uint8), ta, lens)
        self._exact = np.concatenate([self._exact, np.stack([h, t, L], 1)])
        k = self._mix(h, t, L)
        fresh = []
        for i, key in enumerate(k.tolist()):
            if key not in self._keyset:
                self._keyset.add(key)
                fresh.append(i)
        if fresh:
            keys = np.concatenate([self._keys, k[fresh]])
            ids = np.concatenate([self._key_ids, self._synced + np.asarray(fresh, np.int64)])
            order = np.argsort(keys, kind="stable")
            self._keys, self._key_ids = keys[order], ids[order]
        w = max(self._name_rows.shape[1], max(map(len, new)))
        rows = np.frombuffer(b"".join(x.ljust(w, b"\0") for x in new), np.uint8).reshape(len(new), w)
        old = self._name_rows
        if old.shape[1] < w:
            old = np.pad(old, ((0, 0), (0, w - old.shape[1])))
        self._name_rows = np.concatenate([old, rows])
        self._synced = len(self._names)

    @property
    def names(self) -> list[bytes]:
        """Registered topic bytes by id."""
        return self._names

    def ids_of(self, buf, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """Topic id of each record, registering new topics (ids in order of appearance):
        those seen before by the C loop's hash table where built (:class:`TopicTable`,
        several times cheaper than the numpy keys of :meth:`lookup`), the others by their bytes."""
        kern = FAST_PATHS.kernels()
        if kern is None:
            tid = self.lookup(a, ta, tl)
        else:
            tt = self._c_table
            while tt.count < len(self._names):  # the topics registered since, in id order
                tt.add(self._names[tt.count])
            tid = tt.lookup(kern, a, ta, tl)
        for r in np.flatnonzero(tid < 0).tolist():
            raw = bytes(buf[int(ta[r]) : int(ta[r] + tl[r])])
            t = self.ids.get(raw)
            if t is None:
                t = len(self._names)
                self.add(raw, t)
            tid[r] = t
        return tid

    def lookup(self, a: np.ndarray, ta: np.ndarray, tl: np.ndarray) -> np.ndarray:
        """Topic id of each record (topic bytes ``a[ta:ta+tl]``), -1 where not registered."""
        self._sync()
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
