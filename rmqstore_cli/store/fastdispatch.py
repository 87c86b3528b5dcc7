"""Vectorised dispatch: many commit-log records at once into the same writers as :mod:`dispatch`.

The per-record :class:`~rmqstore_cli.store.dispatch.Dispatcher` is the reference; this
module produces the same bytes for a batch of records whose layout makes that safe,
and falls back to the per-record path otherwise:

* record fields are gathered with numpy from the file's mapping (positions from the
  record walk, field offsets from the ``formats`` declarations: :class:`~rmqstore_cli.store.batch.RecordBatch`);
* ``TAGS``/``KEYS``/``UNIQ_KEY``/``DELAY`` are taken from the block's PROPERTIES bytes
  parsed at once as ``MessageDecoder#string2messageProperties`` would
  (:class:`~rmqstore_cli.store.batch.Properties`; per record, :func:`~rmqstore_cli.store.batch.pick_property`);
* ``String#hashCode`` of every tag and ``topic#key`` is computed for the whole block at
  once by :mod:`batch` (``h(a+b) = h(a)·31^len(b) + h(b) mod 2^32``);
* consume-queue units of a queue go in one append when their queue offsets are
  consecutive from the queue's end and their end offsets rise (``putMessagePositionInfo``
  would append each one unchecked); anything else goes unit by unit;
* index keys go into ``IndexFile`` in blocks: entry numbers are consecutive, each entry's
  ``prevIndex`` is the previous entry of the same slot in the block or the slot's old
  value, ``hashSlotCount`` grows once per slot that was empty, and the header ends as the
  last per-key put would leave it (``IndexFile#putKey``, STORE-FORMAT §5.3).
"""
from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from rmqstore_cli.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE
from rmqstore_cli.formats.index import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE
from rmqstore_cli.store.batch import (
    Properties,
    RecordBatch,
    TopicIds,
    stable_argsort,
    concat_hashes,
    gather,
    index_hash,
    java_hashes,
    java_int,
    pick_property,
    release_pages,
)
from rmqstore_cli.store.consume_queue import UNIT_DTYPE, ConsumeQueueWriter
from rmqstore_cli.store.dispatch import Dispatcher, DispatchRequest, InvalidForDispatch
from rmqstore_cli.store.index import _HEADER, IndexFile, build_key
from rmqstore_cli.store.message import SCHEDULE_TOPIC, java_hash
from rmqstore_cli.store.rangehash import java_range_hashes

_ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")])
_INT_MAX = (1 << 31) - 1
_SCHEDULE = SCHEDULE_TOPIC.encode()

class BatchKeys:
    """The index keys of a block in ``IndexService#buildIndex`` order (per record its
    UNIQ_KEY, then its KEYS words) as byte ranges ``[a, b)`` of the block's PROPERTIES
    bytes ``cat``, with their index hashes (``topic#key``; None when no index is built)
    computed once for the block. A sequence of ``bytes``: a key's bytes are made only
    when asked for (the per-key paths)."""

    def __init__(self, cat: np.ndarray, a: np.ndarray, b: np.ndarray, hashes: np.ndarray | None):
        self.cat, self.a, self.b, self.hashes = cat, a, b, hashes
        self._raw: bytes | None = None

    def _bytes(self) -> bytes:
        if self._raw is None:
            self._raw = self.cat.tobytes()
        return self._raw

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, i):
        if isinstance(i, slice):
            out = BatchKeys(self.cat, self.a[i], self.b[i], None if self.hashes is None else self.hashes[i])
            out._raw = self._raw
            return out
        return self._bytes()[int(self.a[i]):int(self.b[i])]

    def __iter__(self):
        raw = self._bytes()
        return iter([raw[x:y] for x, y in zip(self.a.tolist(), self.b.tolist())])


@dataclass
class Topic:
    id: int
    name: str
    raw: bytes
    schedule: bool
    cq: bool  # selected for consume queues
    prefix_hash: int  # hashCode of "topic#" as uint32


class FastDispatcher:
    """Dispatch batches of records of one mapped commit-log file through a :class:`Dispatcher`."""

    def __init__(self, dispatcher: Dispatcher):
        self.d = dispatcher
        self.topics: dict[bytes, Topic] = {}
        self.topic_table = TopicIds()
        self.topic_list: list[Topic] = []
        self.units = 0
        self.keys = 0
        self.messages = 0
        self.last_store_timestamp = 0
        #: Dry run: count what would be written, write nothing.
        self.dry = False
        self.dry_queues: dict[tuple[str, int], list[int]] = {}  # (topic, qid) -> [first, last, units]
        self.dry_last_phy = 0

    def topic(self, raw: bytes) -> Topic:
        t = self.topics.get(raw)
        if t is None:
            name = raw.decode("utf-8", "replace")
            sel = self.d.build_cq and (self.d.topics is None or name in self.d.topics)
            pfx = name + "#"
            t = Topic(len(self.topic_list), name, raw, raw == _SCHEDULE, sel, java_hash(pfx) & 0xFFFFFFFF)
            self.topics[raw] = t
            self.topic_list.append(t)
            self.topic_table.add(raw, t.id)
        return t

    # ------------------------------------------------------------- fields
    @staticmethod
    def fields(a: np.ndarray, pos: np.ndarray) -> dict[str, np.ndarray]:
        """Every field dispatch needs, for records starting at ``pos`` (already walked:
        magic V1/V2 and TOTALSIZE within the file), as columns of a :class:`RecordBatch`."""
        r = RecordBatch(a, pos)
        return {
            "total": r.total, "magic": r.magic, "crc": r.body_crc, "queue_id": r.queue_id,
            "queue_offset": r.queue_offset, "phy": r.physical_offset, "sys_flag": r.sys_flag,
            "bh": r.born_host_len, "sh": r.store_host_len, "store_ts_at": r.store_ts_at,
            "body_len_at": r.body_len_at, "body_len": r.body_len, "body_at": r.body_at,
            "topic_len_size": r.topic_len_size, "topic_len": r.topic_len, "topic_at": r.topic_at,
            "props_len_at": r.props_len_at, "props_len": r.props_len, "props_at": r.props_at, "expected": r.expected,
        }  # columns only: no reference to the mapping survives the batch (the file is closed after it)

    @staticmethod
    def layout(a: np.ndarray, pos: np.ndarray, f: dict, limit: int) -> int:
        """The index of the first record ``checkMessageAndReturnSize`` finds *invalid*: a
        read past the file's end (every read is bounded by ``limit``, as a Java buffer's),
        a negative topic length; or ``len(pos)``. Sets ``f['mismatch']`` (size mismatch)."""
        body_end = f["body_at"] + np.maximum(f["body_len"], 0)
        bad = f["body_len_at"] + 4 > limit
        bad |= body_end > limit
        bad |= body_end + f["topic_len_size"] > limit
        bad |= (f["topic_len"] < 0) | (f["topic_at"] + f["topic_len"] > limit)
        bad |= f["props_len_at"] + 2 > limit
        bad |= (f["props_len"] > 0) & (f["props_at"] + f["props_len"] > limit)
        f["mismatch"] = f["expected"] != f["total"]
        first_bad = np.flatnonzero(bad)
        return int(first_bad[0]) if len(first_bad) else len(pos)

    # ------------------------------------------------------------- dispatch
    def dispatch(self, buf, a: np.ndarray, pos: np.ndarray, f: dict, take: np.ndarray) -> int | None:
        """Dispatch records ``take`` (indexes into ``pos``; valid, in order). Returns the index
        (into ``pos``) of a record found invalid for dispatch (non-int DELAY), which was not
        dispatched and ends the batch, or None."""
        d = self.d
        delay_table = d.delay_table
        max_level = max(delay_table) if delay_table else 0
        tl = f["topic_len"][take]
        ta = f["topic_at"][take]
        pl = f["props_len"][take]
        pa = f["props_at"][take]
        sysf = f["sys_flag"][take]
        store_ts = gather(a, f["store_ts_at"][take], 8, ">i8")
        rollback = (sysf & TRANSACTION_MASK) == TRANSACTION_ROLLBACK_TYPE
        ex = self._extract_fast(buf, a, ta, tl, pa, pl, rollback)
        if ex is None:
            ex = self._extract_slow(buf, ta.tolist(), tl.tolist(), pa.tolist(), pl.tolist(), rollback.tolist())
        tids_a, tags_code, key_list, key_owner_a, delay_fix = ex
        key_owner = key_owner_a
        stop = None
        # tagsCode: hashCode of TAGS, sign-extended; the schedule topic's delivery time
        for i, delay in delay_fix:
            s = delay
            try:
                level = _java_int(s)
            except InvalidForDispatch:
                stop = i
                break
            level = min(level, max_level)
            if level > 0:
                tags_code[i] = int(store_ts[i]) + delay_table.get(level, 1000)
        m = len(tl) if stop is None else stop
        if stop is not None:
            nk = int(np.searchsorted(key_owner, stop)) if len(key_owner) else 0
            key_list = key_list[:nk]
            key_owner = key_owner[:nk]
        if m == 0:
            return None if stop is None else int(take[stop])
        sel = take[:m]
        phy = f["phy"][sel]
        size = f["total"][sel].astype(np.int64)
        qid = f["queue_id"][sel].astype(np.int64)
        qoff = f["queue_offset"][sel]
        tids_a = tids_a[:m]
        tran = sysf[:m] & TRANSACTION_MASK
        if d.build_cq:
            to_cq = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
            sel_topics = np.fromiter((t.cq for t in self.topic_list), dtype=bool, count=len(self.topic_list))
            to_cq &= sel_topics[tids_a]
            self._consume_queues(np.flatnonzero(to_cq), tids_a, qid, phy, size, tags_code[:m], qoff)
        if self.dry and d.build_index and key_list:
            kphy = phy[key_owner]
            self.keys += int(np.count_nonzero(kphy >= self.dry_last_phy))
            self.dry_last_phy = max(self.dry_last_phy, int(kphy.max()))
        elif d.index is not None and key_list:
            self._index(key_list, key_owner, tids_a[key_owner], phy, store_ts[:m])
        self.messages += m
        self.last_store_timestamp = int(store_ts[m - 1])
        d.last_store_timestamp = self.last_store_timestamp
        return None if stop is None else int(take[stop])

    def _extract_slow(self, buf, ta, tl, pa, pl, rollback):
        """Per record: topic, hashCode of TAGS, UNIQ_KEY + KEYS, DELAY (the reference for
        :meth:`_extract_fast`)."""
        tids = []
        tags_list: list[bytes] = []
        key_list: list[bytes] = []
        key_owner: list[int] = []
        delay_fix: list[tuple[int, str]] = []
        topic = self.topic
        topics = self.topics
        for i in range(len(tl)):
            raw = buf[ta[i]:ta[i] + tl[i]]
            t = topics.get(raw) or topic(raw)
            tids.append(t.id)
            n = pl[i]
            if n > 0:
                props = buf[pa[i]:pa[i] + n]
                tags = pick_property(props, b"TAGS\x01")
                keys = pick_property(props, b"KEYS\x01")
                uniq = pick_property(props, b"UNIQ_KEY\x01")
                delay = pick_property(props, b"DELAY\x01") if t.schedule else None
            else:
                tags = keys = uniq = delay = None
            tags_list.append(tags or b"")
            if delay is not None:
                delay_fix.append((i, delay.decode("utf-8", "replace")))
            if not rollback[i]:
                if uniq:
                    key_list.append(uniq)
                    key_owner.append(i)
                if keys:
                    for k in keys.split(b" "):
                        if k:
                            key_list.append(k)
                            key_owner.append(i)
        return (np.asarray(tids, dtype=np.int64), java_int(java_hashes(tags_list)[0]), key_list,
                np.asarray(key_owner, dtype=np.int64),
                delay_fix)

    def _topic_ids(self, buf, a, ta, tl) -> np.ndarray:
        """Topic id per record: topics seen before found with numpy (:class:`batch.TopicIds`),
        new ones registered one by one in record order."""
        table = self.topic_table
        tid = table.lookup(a, ta, tl)
        miss = np.flatnonzero(tid < 0)
        if miss.size > 64:  # new topics (the first block): each registered once, then looked up again
            k = table._mix(*table._key_parts(a, ta[miss], tl[miss]))
            _, first = np.unique(k, return_index=True)
            for i in np.sort(miss[first]).tolist():
                raw = bytes(buf[int(ta[i]):int(ta[i]) + int(tl[i])])
                if raw not in self.topics:
                    self.topic(raw)
            tid[miss] = table.lookup(a, ta[miss], tl[miss])
        for i in np.flatnonzero(tid < 0).tolist():
            raw = bytes(buf[int(ta[i]):int(ta[i]) + int(tl[i])])
            tid[i] = (self.topics.get(raw) or self.topic(raw)).id
        return tid

    def _extract_fast(self, buf, a, ta, tl, pa, pl, rollback):
        """:meth:`_extract_slow` for a whole block: the block's PROPERTIES parsed at once by
        :class:`~rmqstore_cli.store.batch.Properties` (the parser's rules: last non-empty pair
        of a name wins); None when topics need the per-record path."""
        tids = self._topic_ids(buf, a, ta, tl)
        pr = Properties(a, pa, np.maximum(pl, 0), buf, checks=False)  # dispatch reads values only
        delay_fix = []
        sch = np.fromiter((t.schedule for t in self.topic_list), dtype=bool, count=len(self.topic_list))
        if sch[tids].any():
            raw = pr.cat.tobytes()
            o, x, y = pr.value(b"DELAY\x01")
            keep = sch[tids[o]]
            delay_fix = [(i, raw[u:v].decode("utf-8", "replace"))
                         for i, u, v in zip(o[keep].tolist(), x[keep].tolist(), y[keep].tolist())]
        owner, ka, kb = pr.key_ranges(~rollback)
        order = stable_argsort(owner)  # per record: UNIQ_KEY, then the KEYS words
        owner, ka, kb = owner[order], ka[order], kb[order]
        # TAGS (tagsString2tagsCode) and the keys hashed together, over UTF-16 units
        tm, t_a, t_b = pr.value(b"TAGS\x01")
        with_keys = self.d.index is not None and not self.dry and owner.size
        nt = t_a.size
        raw = pr.cat.base if isinstance(pr.cat.base, bytes) else None
        ra, rb, rm = (np.concatenate([t_a, ka]), np.concatenate([t_b, kb]), np.concatenate([tm, owner])) \
            if with_keys else (t_a, t_b, tm)
        wide = np.flatnonzero(pr.non_ascii_msg[rm]) if pr.hp.size else None  # only these may be non-ASCII
        h, lens = java_range_hashes(pr.cat, ra, rb, raw, pr.hp, wide)
        tags_code = np.zeros(len(tl), np.int64)
        tags_code[tm] = java_int(h[:nt])
        hashes = None
        if with_keys:
            hashes = index_hash(concat_hashes(self._prefix_hashes()[tids[owner]], lens[nt:], h[nt:]))  # "topic#" + key
        return tids, tags_code, BatchKeys(pr.cat, ka, kb, hashes), owner, delay_fix

    def _prefix_hashes(self) -> np.ndarray:
        """hashCode of ``topic + "#"`` (uint32) per topic id."""
        pfx = getattr(self, "_pfx", None)
        if pfx is None or pfx.size != len(self.topic_list):
            pfx = self._pfx = np.fromiter((t.prefix_hash for t in self.topic_list), dtype=np.uint32,
                                          count=len(self.topic_list))
        return pfx

    def _consume_queues(self, idx, tids, qid, phy, size, tags_code, qoff) -> None:
        if not len(idx):
            return
        d = self.d
        qkey = tids[idx] * (1 << 32) + (qid[idx] & 0xFFFFFFFF)
        order = np.argsort(qkey, kind="stable")
        sk = qkey[order]
        cuts = np.flatnonzero(np.diff(sk)) + 1
        for grp in np.split(idx[order], cuts):
            t = self.topic_list[int(tids[grp[0]])]
            q = int(qid[grp[0]])
            key = (t.name, q)
            self.units += len(grp)
            if self.dry:
                st = self.dry_queues.setdefault(key, [int(qoff[grp[0]]), 0, 0])
                st[1] = int(qoff[grp[-1]])
                st[2] += len(grp)
                continue
            w = d.writers.get(key)
            if w is None:
                w = d.writers[key] = ConsumeQueueWriter(d.cq_root, t.name, q, d.config.cq_file_size, roots=d.roots)
            put_units(w, phy[grp], size[grp], tags_code[grp], qoff[grp])
        d.units = self.units

    def _index(self, key_list, owner, tid, phy, store_ts) -> None:
        d = self.d
        svc = d.index
        hs = getattr(key_list, "hashes", None)  # BatchKeys from the block path: hashed already
        if hs is None:
            kh, klen = java_hashes(list(key_list))
            hs = index_hash(concat_hashes(self._prefix_hashes()[tid], klen, kh))  # hashCode("topic#" + key)
        kphy = phy[owner]
        kts = store_ts[owner]
        # IndexService#buildIndex skips a record below the last file's endPhyOffset: in
        # a block that can only happen for the first records, unless offsets go backwards.
        if len(kphy) > 1 and np.any(np.diff(kphy) < 0):
            self._index_slow(key_list, tid, kphy, kts)
            return
        first_ok = int(np.searchsorted(kphy, svc.last_end_phy_offset, side="left"))
        if first_ok:
            # offsets below endPhyOffset: per key, exactly as the broker checks them
            self._index_slow(key_list[:first_ok], tid[:first_ok], kphy[:first_ok], kts[:first_ok])
            if first_ok >= len(kphy):
                return
            hs, kphy, kts = hs[first_ok:], kphy[first_ok:], kts[first_ok:]
        put_keys(svc, hs, kphy, kts)
        self.keys += len(hs)

    def _index_slow(self, key_list, tid, kphy, kts) -> None:
        svc = self.d.index
        for j in range(len(key_list)):
            p = int(kphy[j])
            if p < svc.last_end_phy_offset:
                continue
            t = self.topic_list[int(tid[j])]
            svc.put_key(build_key(t.name, key_list[j].decode("utf-8", "replace")), p, int(kts[j]))
            self.keys += 1

    def dispatch_message(self, msg) -> DispatchRequest:
        """The per-record reference path (used for records the batch path does not take)."""
        req = self.d.dispatch(msg)
        self.messages += 1
        self.units = self.d.units
        self.keys = self.d.index.keys_put if self.d.index is not None else 0
        self.last_store_timestamp = req.store_timestamp
        return req


def _java_int(s: str) -> int:
    from rmqstore_cli.store.dispatch import _INT_MAX as imax, _INT_MIN as imin, _JAVA_INT

    if not _JAVA_INT.fullmatch(s) or not imin <= int(s) <= imax:
        raise InvalidForDispatch(f"DELAY {s!r} is not an int")
    return int(s)


def put_units(w: ConsumeQueueWriter, phy, size, tags_code, cq_offset) -> None:
    """``putMessagePositionInfo`` for units of one queue in order: one append when every
    unit would be appended unchecked at the queue's end, else unit by unit."""
    n = len(phy)
    i = 0
    if w.write_offset < 0 and n:
        w.put(int(phy[0]), int(size[0]), int(tags_code[0]), int(cq_offset[0]))
        i = 1
    if i < n:
        ends = phy[i:] + size[i:]
        ok = (int(cq_offset[i]) * CQ_STORE_UNIT_SIZE == w.write_offset
              and int(ends[0]) > w.max_physic_offset
              and (n - i == 1 or (np.all(np.diff(cq_offset[i:]) == 1) and np.all(np.diff(ends) > 0))))
        if ok:
            units = np.empty(n - i, dtype=UNIT_DTYPE)
            units["commitlog_offset"] = phy[i:]
            units["size"] = size[i:]
            units["tags_code"] = tags_code[i:]
            w._buf += units.tobytes()
            w.write_offset += CQ_STORE_UNIT_SIZE * (n - i)
            w.max_physic_offset = int(ends[-1])
            w.units_written += n - i
            if len(w._buf) >= w.FLUSH_UNITS * CQ_STORE_UNIT_SIZE:
                w.flush()
            return
        for j in range(i, n):
            w.put(int(phy[j]), int(size[j]), int(tags_code[j]), int(cq_offset[j]))


def put_keys(svc, hashes: np.ndarray, phy: np.ndarray, ts: np.ndarray) -> None:
    """``IndexService#putKey`` for many keys (index hashes given), rolling files as needed."""
    i, n = 0, len(hashes)
    while i < n:
        f = svc._last_writable(int(ts[i]))
        k = min(f.index_num - f.header.index_count, n - i)
        if k <= 0:  # a fresh file that cannot take a key: let the scalar path raise
            raise RuntimeError("index file full right after creation")
        put_block(f, hashes[i:i + k], phy[i:i + k], ts[i:i + k])
        i += k
        if f.is_write_full():  # its pages leave before the next file fills
            release_whole(f)
    svc.keys_put += n


def slot_chains(s: np.ndarray, c0: int):
    """Keys with slots ``s`` put as entries ``c0, c0 + 1, …``, grouped by slot in put order
    (one sort of ``slot * k + position``): (slot, put position, entry number) in that order,
    the first (``head``) and last (``tail``) of each slot's group, and each entry's previous
    entry in its slot (for a group's first one: left to the caller, the slot's old head)."""
    k = len(s)
    key = np.sort(np.asarray(s, dtype=np.int64) * k + np.arange(k))
    ss = key // k
    order = key - ss * k
    nn = c0 + order
    head = np.ones(k, dtype=bool)
    head[1:] = ss[1:] != ss[:-1]
    tail = np.ones(k, dtype=bool)
    tail[:-1] = head[1:]
    prev_sorted = np.empty(k, dtype=np.int64)
    prev_sorted[1:] = nn[:-1]
    return ss, order, nn, head, tail, prev_sorted


def put_block(f: IndexFile, h: np.ndarray, phy: np.ndarray, ts: np.ndarray) -> None:
    """``IndexFile#putKey`` for ``k`` keys that all fit in ``f``; same bytes as k single puts."""
    hdr = f.header
    k = len(h)
    c0 = hdr.index_count
    f.reserve_entries(c0 + k)  # allocated before the mapping writes them (no SIGBUS on a full disk)
    s = h % f.slot_num
    first = c0 <= 1
    # timeDiff: (storeTimestamp - beginTimestamp) / 1000 clamped to [0, Integer.MAX_VALUE],
    # 0 while beginTimestamp <= 0; a negative delta ends at 0 whether it is truncated (Java)
    # or floored, so floor division serves. The first put of a file sets beginTimestamp.
    b0 = hdr.begin_timestamp
    if first and k > 1:
        begin = np.full(k, ts[0], dtype=np.int64)
        begin[0] = b0
        diff = np.where(begin <= 0, 0, np.clip((ts - begin) // 1000, 0, _INT_MAX))
    elif b0 <= 0:
        diff = np.zeros(k, np.int64)
    else:
        diff = np.clip((ts - b0) // 1000, 0, _INT_MAX)
    slots = np.frombuffer(f.mm, dtype=">i4", count=f.slot_num, offset=INDEX_HEADER_SIZE)
    ss, order, nn, head, tail, prev_sorted = slot_chains(s, c0)
    hs, hn = ss[head], nn[head]
    old = slots[hs].astype(np.int64)  # a slot's old value counts only if it is a valid entry
    old = np.where((old > 0) & (old <= hn), old, 0)
    prev_sorted[head] = old
    at = f.entries_base + c0 * INDEX_ENTRY_SIZE
    entries = np.frombuffer(f.mm, dtype=_ENTRY_DTYPE, count=k, offset=at)  # written in place
    entries["key_hash"] = h
    entries["phy_offset"] = phy
    entries["time_diff"] = diff
    entries["prev_index"][order] = prev_sorted
    slots[ss[tail]] = nn[tail]
    del slots, entries
    if first:
        hdr.begin_phy_offset = int(phy[0])
        hdr.begin_timestamp = int(ts[0])
    hdr.hash_slot_count += int(np.count_nonzero(old == 0))
    hdr.index_count = c0 + k
    hdr.end_phy_offset = int(phy[-1])
    hdr.end_timestamp = int(ts[-1])
    _HEADER.pack_into(f.mm, 0, *hdr.as_tuple())


def release_index(f: IndexFile, upto_entry: int) -> None:
    release_pages(f.mm, f.entries_base, f.entries_base + upto_entry * INDEX_ENTRY_SIZE)


def release_whole(f: IndexFile) -> None:
    """Every page of ``f``'s mapping, its last partial page too."""
    release_pages(f.mm, 0, f.length + (-f.length) % mmap.PAGESIZE)


def release_index_pages(svc) -> None:
    """After a block: the written pages of the index files leave this process (the data
    stays in the page cache and the files), the last file's entries so far and every full
    file whole, its slots too (20 MB a default file, touched at random: without this they
    stayed resident, one more set per 20 M keys, issue 22). Each full file is released once."""
    files = svc.files
    if not files:
        return
    last = files[-1]
    release_index(last, last.header.index_count)
    done = getattr(svc, "released_files", 0)
    for f in files[done:len(files) - 1]:
        release_whole(f)
    svc.released_files = max(done, len(files) - 1)


