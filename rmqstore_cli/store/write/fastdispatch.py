"""Vectorised dispatch: many commit-log records at once into the same writers as :mod:`dispatch`.

The per-record :class:`~rmqstore_cli.store.write.dispatch.Dispatcher` is the reference; this
module produces the same bytes for a batch of records whose layout makes that safe,
and falls back to the per-record path otherwise:

* record fields are gathered with numpy from the file's mapping (positions from the
  record walk, field offsets from the ``formats`` declarations:
  :class:`~rmqstore_cli.store.commitlog.bulk.RecordBatch`);
* ``TAGS``/``KEYS``/``UNIQ_KEY``/``DELAY`` are taken from the block's PROPERTIES bytes
  parsed at once as ``MessageDecoder#string2messageProperties`` would
  (:class:`~rmqstore_cli.store.records.properties.Properties`);
* ``String#hashCode`` of every tag and ``topic#key`` is computed for the whole block at
  once by :mod:`batch` (``h(a+b) = h(a)·31^len(b) + h(b) mod 2^32``);
* consume-queue units go to each queue's writer in one call
  (:meth:`~rmqstore_cli.store.queues.consume_queue.ConsumeQueueWriter.put_many`), index keys to
  the index in blocks (:meth:`~rmqstore_cli.store.queues.index_service.IndexService.put_keys`): the
  writers own their bytes at both speeds; this module only decides what goes where.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rmqstore_cli.formats.commitlog import (
    BODY_LENGTH_SIZE,
    BORNHOST_V6_FLAG,
    HOST_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    PROPERTIES_LENGTH_SIZE,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_LENGTH,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from rmqstore_cli.store.commitlog.bulk import RecordBatch
from rmqstore_cli.store.files.arrays import byte_rows, stable_argsort
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.javahash import java_hash
from rmqstore_cli.store.javahash.bulk import concat_hashes, index_hash, java_hashes, java_int, java_range_hashes
from rmqstore_cli.store.queues.consume_queue import ConsumeQueueWriter
from rmqstore_cli.store.queues.index import build_key
from rmqstore_cli.store.records.kinds import deliver_timestamp, parse_java_int
from rmqstore_cli.store.records.message import SCHEDULE_TOPIC
from rmqstore_cli.store.records.properties import Properties
from rmqstore_cli.store.records.props_fused import FusedProperties
from rmqstore_cli.store.records.topics import TopicIds, TopicTable
from rmqstore_cli.store.write.dispatch import Dispatcher
from rmqstore_cli.store.write.lmq import MULTI_DISPATCH, MULTI_QUEUE_OFFSET, fan_out, fan_out_units, multi_ranges

_SCHEDULE = SCHEDULE_TOPIC.encode()
#: DELAY values up to this many bytes are told apart by their bytes at once (``_delay_values``).
_DELAY_ROW = 15
_NO_DELAYS = (np.zeros(0, np.int64), [], np.zeros(0, np.int64))
#: The values dispatch reads of the PROPERTIES besides TAGS and the keys (the C loop's one
#: pass gives them): the schedule topic's DELAY, the multi-dispatch listing.
_VALUES = (b"DELAY\x01", *(f"{k}\x01".encode() for k in (MULTI_DISPATCH, MULTI_QUEUE_OFFSET)))


class BatchKeys:
    """The index keys of a block in ``IndexService#buildIndex`` order (per record its
    UNIQ_KEY, then its KEYS words) as byte ranges ``[a, b)`` of the block's PROPERTIES
    bytes ``cat``, with their index hashes (``topic#key``; None when no index is built)
    computed once for the block. A sequence of ``bytes``: a key's bytes are made only
    when asked for (the per-key paths)."""

    def __init__(
        self, cat: np.ndarray, a: np.ndarray, b: np.ndarray, hashes: np.ndarray | None, raw: bytes | None = None
    ):
        self.cat, self.a, self.b, self.hashes = cat, a, b, hashes
        self._raw = raw  # cat's bytes, made once when first asked for

    def _bytes(self) -> bytes:
        if self._raw is None:
            self._raw = self.cat.tobytes()
        return self._raw

    def __len__(self) -> int:
        return len(self.a)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return BatchKeys(self.cat, self.a[i], self.b[i], None if self.hashes is None else self.hashes[i], self._raw)
        return self._bytes()[int(self.a[i]) : int(self.b[i])]

    def __iter__(self):
        raw = self._bytes()
        return iter([raw[x:y] for x, y in zip(self.a.tolist(), self.b.tolist(), strict=True)])


@dataclass(frozen=True, slots=True)
class _QueueColumns:
    """The columns a block's dispatched records give their consume-queue units."""

    tids: np.ndarray
    qid: np.ndarray
    phy: np.ndarray
    size: np.ndarray
    tags_code: np.ndarray
    store_ts: np.ndarray
    qoff: np.ndarray


@dataclass
class Topic:
    id: int
    name: str
    raw: bytes
    schedule: bool
    cq: bool  # selected for consume queues
    prefix_hash: int  # hashCode of "topic#" as uint32


def _compiled_fields(kern, a: np.ndarray, pos: np.ndarray, crc_small: int) -> dict[str, np.ndarray] | None:
    """:meth:`FastDispatcher.fields` by the C loop ``record_cols``; None when a field of some
    record lies outside ``a`` (:class:`RecordBatch`'s clipped reads then, as the layout check
    wants). The walk read MAGICCODE: V2 exactly where TOPICLENGTH takes two bytes."""
    pos = np.ascontiguousarray(pos, np.int64)
    out = np.empty(len(kern.REC_COLS) * pos.size, np.int64)
    if kern.record_cols(a, pos, crc_small, out) < 0:
        return None
    c = dict(zip(kern.REC_COLS, out.reshape(len(kern.REC_COLS), pos.size), strict=True))
    sysf = c["sys_flag"]
    return {
        "total": c["total"],
        "magic": np.where(c["topic_len_size"] == TOPIC_LENGTH[True].size, MAGIC_V2, MAGIC_V1).astype(np.uint32),
        "crc": c["body_crc"],
        "queue_id": c["queue_id"],
        "queue_offset": c["queue_offset"],
        "phy": c["physical_offset"],
        "sys_flag": sysf,
        "bh": np.where(sysf & BORNHOST_V6_FLAG, HOST_SIZE[True], HOST_SIZE[False]),
        "sh": np.where(sysf & STOREHOSTADDRESS_V6_FLAG, HOST_SIZE[True], HOST_SIZE[False]),
        "store_ts": c["store_timestamp"],
        "body_len_at": c["body_at"] - BODY_LENGTH_SIZE,
        **{k: c[k] for k in ("body_len", "body_at", "topic_len_size", "topic_len", "topic_at")},
        **{k: c[k] for k in ("props_len_at", "props_len", "props_at", "expected")},
        **({"body_crc_of": c["crc"]} if crc_small > 0 else {}),
    }


class FastDispatcher:
    """Dispatch batches of records of one mapped commit-log file through a :class:`Dispatcher`."""

    def __init__(self, dispatcher: Dispatcher):
        self.d = dispatcher
        self.topics: dict[bytes, Topic] = {}
        self.topic_table = TopicIds()
        self.topic_c = TopicTable()  # the same ids, for the C loop ``topic_ids``
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
    def fields(a: np.ndarray, pos: np.ndarray, crc_small: int = 0) -> dict[str, np.ndarray]:
        """Every field dispatch needs, for records starting at ``pos`` (already walked:
        magic V1/V2 and TOTALSIZE within the file), as columns: by the C loop ``record_cols``
        (one pass over each record; with ``crc_small`` > 0 also ``body_crc_of``, the CRC of
        each body under that size, -1 for the others), else of a :class:`RecordBatch`."""
        kern = FAST_PATHS.kernels()
        got = _compiled_fields(kern, a, pos, crc_small) if kern is not None else None
        if got is not None:
            return got
        r = RecordBatch(a, pos)
        return {
            "total": r.total,
            "magic": r.magic,
            "crc": r.body_crc,
            "queue_id": r.queue_id,
            "queue_offset": r.queue_offset,
            "phy": r.physical_offset,
            "sys_flag": r.sys_flag,
            "bh": r.born_host_len,
            "sh": r.store_host_len,
            "store_ts": r.store_timestamp,
            "body_len_at": r.body_len_at,
            "body_len": r.body_len,
            "body_at": r.body_at,
            "topic_len_size": r.topic_len_size,
            "topic_len": r.topic_len,
            "topic_at": r.topic_at,
            "props_len_at": r.props_len_at,
            "props_len": r.props_len,
            "props_at": r.props_at,
            "expected": r.expected,
        }  # columns only: no reference to the mapping survives the batch (the file is closed after it)

    @staticmethod
    def layout(a: np.ndarray, pos: np.ndarray, f: dict, limit: int) -> int:
        """The index of the first record ``checkMessageAndReturnSize`` finds *invalid*: a
        read past the file's end (every read is bounded by ``limit``, as a Java buffer's),
        a negative topic length; or ``len(pos)``. Sets ``f['mismatch']`` (size mismatch)."""
        body_end = f["body_at"] + np.maximum(f["body_len"], 0)
        bad = f["body_len_at"] + BODY_LENGTH_SIZE > limit
        bad |= body_end > limit
        bad |= body_end + f["topic_len_size"] > limit
        bad |= (f["topic_len"] < 0) | (f["topic_at"] + f["topic_len"] > limit)
        bad |= f["props_len_at"] + PROPERTIES_LENGTH_SIZE > limit
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
        tl = f["topic_len"][take]
        pl = f["props_len"][take]
        pa = f["props_at"][take]
        sysf = f["sys_flag"][take]
        store_ts = f["store_ts"][take]
        rollback = (sysf & TRANSACTION_MASK) == TRANSACTION_ROLLBACK_TYPE
        tids_a, tags_code, key_list, key_owner, delay_fix, multi_at = self._extract(
            buf, a, f["topic_at"][take], tl, pa, pl, rollback
        )
        stop = self._delay_tags(delay_fix, tags_code, store_ts)
        m = len(tl) if stop is None else stop
        if stop is not None:
            nk = int(np.searchsorted(key_owner, stop)) if len(key_owner) else 0
            key_list = key_list[:nk]
            key_owner = key_owner[:nk]
        if m == 0:
            return None if stop is None else int(take[stop])
        sel = take[:m]
        phy = f["phy"][sel]
        tids_a = tids_a[:m]
        if d.build_cq:
            cols = _QueueColumns(
                tids_a,
                f["queue_id"][sel].astype(np.int64),
                phy,
                f["total"][sel].astype(np.int64),
                tags_code[:m],
                store_ts[:m],
                f["queue_offset"][sel],
            )
            self._dispatch_queues(buf, cols, sysf[:m] & TRANSACTION_MASK, multi_at, pa[:m], pl[:m])
        if key_list:
            self._dispatch_keys(key_list, key_owner, tids_a, phy, store_ts[:m])
        self.messages += m
        self.last_store_timestamp = int(store_ts[m - 1])
        d.last_store_timestamp = self.last_store_timestamp
        return None if stop is None else int(take[stop])

    def _delay_tags(self, delay_fix: tuple, tags_code: np.ndarray, store_ts: np.ndarray) -> int | None:
        """The schedule topic's tagsCode: the delivery time of the DELAY level, capped at the
        highest level (``CommitLog#checkMessageAndReturnSize``). Returns the index of the first
        record whose DELAY is not an int (invalid for dispatch: it and what follows are not
        dispatched in this batch), or None. Each distinct DELAY text is parsed once."""
        rec, texts, inv = delay_fix
        if not rec.size:
            return None
        delay_table = self.d.delay_table
        max_level = max(delay_table) if delay_table else 0
        parsed = [parse_java_int(t) for t in texts]
        bad = np.array([v is None for v in parsed], dtype=bool)[inv]
        stop = int(rec[np.argmax(bad)]) if bad.any() else None
        level = np.array([min(v, max_level) if v is not None else 0 for v in parsed], dtype=np.int64)
        add = np.array([deliver_timestamp(int(v), 0, delay_table) for v in level], dtype=np.int64)
        sel = level[inv] > 0
        if stop is not None:
            sel &= rec < stop
        tags_code[rec[sel]] = store_ts[rec[sel]] + add[inv[sel]]
        return stop

    def _dispatch_queues(
        self, buf, c: _QueueColumns, tran: np.ndarray, multi_at, pa: np.ndarray, pl: np.ndarray
    ) -> None:
        """The consume-queue units of the dispatched records: NOT and COMMIT transaction types
        of selected topics only, batch queues apart, plus the multi-dispatch units of
        ``INNER_MULTI_DISPATCH`` (:meth:`Dispatcher.dispatch_request`)."""
        d = self.d
        to_cq = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
        multi = self._multi(multi_at, to_cq, c.tids, c.qid) if multi_at is not None else None
        sel_topics = np.fromiter((t.cq for t in self.topic_list), dtype=bool, count=len(self.topic_list))
        to_cq &= sel_topics[c.tids]
        if d.batch is not None:
            to_cq = self._batch_queues(
                buf, to_cq, c.tids, c.qid, c.phy, c.size, c.tags_code, c.store_ts, pa, pl, c.qoff
            )
        if multi is not None:
            multi = multi[:, sel_topics[multi[1]]]  # names selected and safe as directories
        args = (c.tids, c.qid, c.phy, c.size, c.tags_code, c.qoff)
        if multi is None or not multi.shape[1]:
            self._consume_queues(np.flatnonzero(to_cq), *args)
        else:
            self._consume_queues(*fan_out_units(np.flatnonzero(to_cq), multi, *args))

    def _dispatch_keys(
        self, key_list, key_owner: np.ndarray, tids: np.ndarray, phy: np.ndarray, store_ts: np.ndarray
    ) -> None:
        """The index entries of the dispatched records' keys; a dry run only counts the keys of
        records past the last one counted (a batch may be read again)."""
        d = self.d
        if self.dry and d.build_index:
            kphy = phy[key_owner]
            self.keys += int(np.count_nonzero(kphy >= self.dry_last_phy))
            self.dry_last_phy = max(self.dry_last_phy, int(kphy.max()))
        elif d.index is not None:
            self._index(key_list, key_owner, tids[key_owner], phy, store_ts)

    def _topic_ids(self, buf, a, ta, tl) -> np.ndarray:
        """Topic id per record: topics seen before found by the C loop's hash table
        (:class:`TopicTable`) or with numpy (:class:`TopicIds`), the others (new ones,
        registered in record order, and any whose key collides) by their bytes."""
        tid = self._lookup_topics(a, ta, tl)
        miss, step = np.flatnonzero(tid < 0), 64
        topics, topic = self.topics, self.topic
        while miss.size:  # a few misses by their bytes, then the rest looked up again: a block
            now, miss = miss[:step], miss[step:]  # of one new topic costs no bytes per record
            raws = (bytes(buf[x : x + n]) for x, n in zip(ta[now].tolist(), tl[now].tolist(), strict=True))
            tid[now] = [(topics.get(raw) or topic(raw)).id for raw in raws]
            if miss.size:
                tid[miss] = self._lookup_topics(a, ta[miss], tl[miss])
                miss, step = miss[tid[miss] < 0], step * 2
        return tid

    def _lookup_topics(self, a, ta, tl) -> np.ndarray:
        """Topic id per record, -1 where the topic is not registered (or its key collides)."""
        kern = FAST_PATHS.kernels()
        if kern is None:
            return self.topic_table.lookup(a, ta, tl)
        tt = self.topic_c
        while tt.count < len(self.topic_list):  # the topics registered since, in id order
            tt.add(self.topic_list[tt.count].raw)
        return tt.lookup(kern, a, ta, tl)

    def _extract(self, buf, a, ta, tl, pa, pl, rollback):
        """Per record of a block: topic id, tagsCode (hashCode of TAGS), the index keys
        (UNIQ_KEY, then the KEYS words; none for ROLLBACK) and their owners, and the DELAY
        values of the schedule topic's records. The block's PROPERTIES are parsed at once by
        :class:`~rmqstore_cli.store.records.properties.Properties` with
        ``MessageDecoder#string2messageProperties``'s rules (last non-empty pair of a name
        wins); the reference is :meth:`Dispatcher.dispatch` record by record."""
        tids = self._topic_ids(buf, a, ta, tl)
        pl0 = np.maximum(pl, 0)
        kern = FAST_PATHS.kernels()
        if kern is not None:  # the C loop: values, tagsCodes and keys in one pass
            pr: Properties | FusedProperties = FusedProperties(
                kern, a, pa, pl0, ~rollback, tids, self._prefix_hashes(), _VALUES
            )
        else:
            pr = Properties(a, pa, pl0, buf, checks=False)  # values only
        delay_fix = self._delay_values(pr, tids)
        multi_at = multi_ranges(pr) if self.d.config.enable_multi_dispatch else None
        got = pr.put_keys() if isinstance(pr, FusedProperties) else None
        if got is not None:
            with_keys = self.d.index is not None and not self.dry and got[0].size
            return (
                tids,
                pr.tags_code,
                BatchKeys(pr.cat, got[1], got[2], got[3] if with_keys else None),
                got[0],
                delay_fix,
                multi_at,
            )
        tags_code, keys, owner = self._hashed_keys(pr, tids, len(tl), rollback)
        return tids, tags_code, keys, owner, delay_fix, multi_at

    def _delay_values(self, pr: Properties, tids: np.ndarray) -> tuple:
        """The block's schedule-topic records that carry a DELAY: (their record numbers, the
        distinct DELAY texts, each record's text among them); a block's delays are a few
        levels, so each distinct value's bytes are decoded once, not once a record."""
        sch = np.fromiter((t.schedule for t in self.topic_list), dtype=bool, count=len(self.topic_list))
        if not sch[tids].any():
            return _NO_DELAYS
        o, x, y = pr.value(b"DELAY\x01")
        keep = sch[tids[o]]
        o, x, y = o[keep], x[keep], y[keep]
        cat = pr.cat  # each value's bytes alone: not the whole block's PROPERTIES copied
        n = y - x
        if not o.size or int(n.max()) > _DELAY_ROW:  # long values: each by itself
            texts = [cat[u:v].tobytes().decode("utf-8", "replace") for u, v in zip(x.tolist(), y.tolist(), strict=True)]
            return o, texts, np.arange(len(texts))
        rows = np.zeros((o.size, _DELAY_ROW + 1), np.uint8)  # the value's bytes, zero-padded, then its length
        got = byte_rows(cat, x, _DELAY_ROW) if cat.size else rows[:, :_DELAY_ROW]
        rows[:, :_DELAY_ROW] = np.where(np.arange(_DELAY_ROW) < n[:, None], got, 0)
        rows[:, _DELAY_ROW] = n
        uniq, inv = np.unique(rows.view(f"V{_DELAY_ROW + 1}").ravel(), return_inverse=True)
        texts = [
            r[: r[_DELAY_ROW]].decode("utf-8", "replace")
            for r in map(bytes, uniq.view(np.uint8).reshape(-1, _DELAY_ROW + 1))
        ]
        return o, texts, inv.ravel()

    def _hashed_keys(self, pr: Properties, tids: np.ndarray, n: int, rollback: np.ndarray):
        """tagsCode per record, the keys and their owners, hashed with numpy where the C loop
        (``Properties.compiled_keys``) is not there."""
        owner, ka, kb = pr.key_ranges(~rollback)
        order = stable_argsort(owner)  # per record: UNIQ_KEY, then the KEYS words
        owner, ka, kb = owner[order], ka[order], kb[order]
        # TAGS (tagsString2tagsCode) and the keys hashed together, over UTF-16 units
        tm, t_a, t_b = pr.value(b"TAGS\x01")
        with_keys = self.d.index is not None and not self.dry and owner.size
        nt = t_a.size
        raw = pr.cat.base if isinstance(pr.cat.base, bytes) else None
        ra, rb, rm = (
            (np.concatenate([t_a, ka]), np.concatenate([t_b, kb]), np.concatenate([tm, owner]))
            if with_keys
            else (t_a, t_b, tm)
        )
        wide = np.flatnonzero(pr.non_ascii_msg[rm]) if pr.hp.size else None  # only these may be non-ASCII
        h, lens = java_range_hashes(pr.cat, ra, rb, raw, pr.hp, wide)
        tags_code = np.zeros(n, np.int64)
        tags_code[tm] = java_int(h[:nt])
        hashes = None
        if with_keys:
            hashes = index_hash(concat_hashes(self._prefix_hashes()[tids[owner]], lens[nt:], h[nt:]))  # "topic#" + key
        return tags_code, BatchKeys(pr.cat, ka, kb, hashes), owner

    def _multi(self, multi_at: tuple, to_cq: np.ndarray, tids: np.ndarray, qid: np.ndarray):
        """The multi-dispatch units of the block's records that get a unit of their own
        (:meth:`Dispatcher.dispatch_request`): (record, target topic id, queue id, cq offset)
        arrays, in dispatch order; None when there are none."""
        rows: list[tuple[int, int, int, int]] = []
        problems = self.d.multi_problems
        for i, names, offsets in zip(multi_at[0].tolist(), multi_at[1], multi_at[2], strict=True):
            if i >= len(to_cq) or not to_cq[i]:
                continue
            t = self.topic_list[int(tids[i])]
            fo = fan_out(
                t.name, int(qid[i]), names, offsets, enable_lmq=self.d.config.enable_lmq, broker5=self.d.broker5
            )
            if fo is None:
                continue
            if fo.problem:
                problems[fo.problem] = problems.get(fo.problem, 0) + 1
            rows.extend(
                (i, self.topic(x.name.encode("utf-8", "surrogatepass")).id, x.queue_id, x.offset) for x in fo.targets
            )
        if not rows:
            return None
        return np.array(rows, dtype=np.int64).T

    def _prefix_hashes(self) -> np.ndarray:
        """hashCode of ``topic + "#"`` (uint32) per topic id."""
        pfx = getattr(self, "_pfx", None)
        if pfx is None or pfx.size != len(self.topic_list):
            pfx = self._pfx = np.fromiter(
                (t.prefix_hash for t in self.topic_list), dtype=np.uint32, count=len(self.topic_list)
            )
        return pfx

    def _batch_queues(self, buf, to_cq, tids, qid, phy, size, tags_code, store_ts, pa, pl, qoff) -> np.ndarray:
        """The records of BatchCQ topics to the dispatcher's ``BatchDispatch`` (one by one:
        INNER_BASE and INNER_NUM are read from each one's properties); the rest of ``to_cq``."""
        topics = self.d.batch.topics
        is_batch = (
            np.fromiter((t.name in topics for t in self.topic_list), dtype=bool, count=len(self.topic_list))[tids]
            & to_cq
        )
        for i in np.flatnonzero(is_batch).tolist():
            self.units += 1
            if not self.dry:
                at = int(pa[i])
                self.d.batch.put(
                    self.topic_list[int(tids[i])].name,
                    int(qid[i]),
                    int(phy[i]),
                    int(size[i]),
                    int(tags_code[i]),
                    int(store_ts[i]),
                    bytes(buf[at : at + int(pl[i])]),
                    int(qoff[i]),
                )
        self.d.units = self.units
        return to_cq & ~is_batch

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
                w = d.writers[key] = ConsumeQueueWriter(
                    d.cq_root, t.name, q, d.config.cq_file_size, roots=d.roots, checked=d.checked_roots
                )
            w.put_many(phy[grp], size[grp], tags_code[grp], qoff[grp])
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
        svc.put_keys(hs, kphy, kts)
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
