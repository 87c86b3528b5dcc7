"""One batch of records checked vectorised (docs/format/commitlog.md#record-check
and the forensic checks).

Every field of a batch is gathered at once with numpy at offsets derived from
``formats.commitlog`` (:class:`~rmqstore_cli.store.commitlog.bulk.RecordBatch`, shared with
rebuild-index) and checked vectorised: PHYSICALOFFSET against the real position, queue-offset
continuity, units and index entries by look-ups. Only what must be per record stays in a
Python loop: body CRC, topic and properties syntax, the extraction of TAGS/KEYS/UNIQ_KEY.
"""

from __future__ import annotations

import re
import struct

import numpy as np
from rmqstore_cli.formats.commitlog import (
    CRC32_PROPERTY,
    CRC32_RESERVED_LEN,
    INNER_BATCH_FLAG,
    PROPERTIES_LENGTH_FORMAT,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqstore_cli.formats.properties import parse_properties

from rmqstore_cli.store.checks.findings import ERROR
from rmqstore_cli.store.files import kernels
from rmqstore_cli.store.files.arrays import stable_argsort
from rmqstore_cli.store.files.crc import body_crcs, crc32
from rmqstore_cli.store.javahash import java_hash
from rmqstore_cli.store.records.message import SCHEDULE_TOPIC
from rmqstore_cli.store.records.properties import CRC_MARK, Properties, pick_property
from rmqstore_cli.store.records.props_fused import FusedProperties
from rmqstore_cli.store.records.topics import TopicIds, TopicTable
from rmqstore_cli.store.verify.batch_fused import RecordColumns
from rmqstore_cli.store.verify.checks import Delayed, props_problem
from rmqstore_cli.store.write.dispatch import InvalidForDispatch, compute_tags_code
from rmqstore_cli.store.write.lmq import MULTI_DISPATCH, MULTI_QUEUE_OFFSET

TOPIC_OK_DOT = re.compile(rb"[A-Za-z0-9%|_.\-]+")  # '.' seen in real stores
#: The values verify reads of the PROPERTIES (the C loop's one pass gives them): the whole-record
#: CRC, the schedule topic's DELAY, the multi-dispatch listing (queues and offsets).
_VALUES = (CRC_MARK, b"DELAY\x01", *(f"{k}\x01".encode() for k in (MULTI_DISPATCH, MULTI_QUEUE_OFFSET)))
#: PROPERTIESLENGTH's size: a record's last length field.
PROPS_LEN_SIZE = struct.calcsize(PROPERTIES_LENGTH_FORMAT)


def _first_broken(r: RecordColumns) -> tuple[tuple[int, str, str] | None, int]:
    """(position, check, why) of the first record whose length fields run past its end or
    disagree with its TOTALSIZE (None: none), and how many records come before it."""
    P, total, body_len, topic_len, props_len, expected = (
        r.pos,
        r.total,
        r.body_len,
        r.topic_len,
        r.props_len,
        r.expected,
    )
    rec_end = P + total
    ok_fixed = r.body_at <= rec_end
    ok_body = r.topic_len_at + r.topic_len_size <= rec_end
    ok_topic = (topic_len >= 0) & (r.props_len_at + PROPS_LEN_SIZE <= rec_end)
    ok_props = r.props_at + np.maximum(props_len, 0) <= rec_end
    good = ok_fixed & ok_body & ok_topic & ok_props & (expected == total)
    if good.all():
        return None, P.size
    i = int(np.flatnonzero(~good)[0])
    p = int(P[i])
    if not (ok_fixed[i] and ok_body[i] and ok_topic[i] and ok_props[i]):
        what = (
            "fixed fields"
            if not ok_fixed[i]
            else f"body length {int(body_len[i])}"
            if not ok_body[i]
            else f"topic length {int(topic_len[i])}"
            if not ok_topic[i]
            else f"properties length {int(props_len[i])}"
        )
        return (p, "commitlog.field-bounds", f"{what} runs past the record's end (total size {int(total[i])})"), i
    return (p, "commitlog.total-size", f"total size {int(total[i])} but the fields add up to {int(expected[i])}"), i


def _queue_steps(buf, r: RecordColumns) -> np.ndarray:
    """How far each record moves its queue's offset: 1, or INNER_NUM for a 5.x inner batch."""
    step = np.ones(r.pos.size, np.int64)
    sysf = r.sys_flag
    if not (sysf & INNER_BATCH_FLAG).any():
        return step
    pl, props_start = np.maximum(r.props_len, 0), r.props_at
    for i in np.flatnonzero(sysf & INNER_BATCH_FLAG).tolist():
        v = pick_property(buf[int(props_start[i]) : int(props_start[i] + pl[i])], b"INNER_NUM\x01")
        if v is not None and v.isdigit():
            step[i] = int(v)
    return step


def _unusable_topic(tb: bytes) -> str | None:
    """Why a topic cannot name a consume-queue directory (empty, not UTF-8, ``.``/``..``, a
    ``/``, NUL or control character), or None."""
    if not tb:
        return "empty"
    try:
        text = tb.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8"
    if tb in (b".", b"..") or any(c in tb for c in b"/\x00") or any(ord(ch) < 0x20 for ch in text):
        return "not usable as a directory name"
    return None


class RecordChecks:
    """The per-batch part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_batch(self, buf, arr, P: np.ndarray, base: int, rel: str, limit: int) -> int | None:
        """Check records at file positions ``P``; return (position, check, why) of the first
        structurally broken record (its successors are unreliable) or None."""
        self.sink.batch_started()
        # every field and the small bodies' CRCs, one pass over each record
        r = RecordColumns.read(self.kernel(), arr, P, kernels.SMALL_BODY if self.opt.crc else 0)
        stop, n = _first_broken(r)
        if n == 0:
            return stop
        if n < P.size:
            r = r.head(n)
        P, total, sysf = r.pos, r.total, r.sys_flag
        self.messages += n
        self.bytes += int(total.sum())  # the summary's bytes: of the records checked, not the files
        self.ranges.append((base + int(P[0]), base + int(P[-1] + total[-1])))
        qid, qoff, phy, store_ts = r.queue_id, r.queue_offset, r.physical_offset, r.store_timestamp
        absP = P + base
        self._check_physical_offsets(phy, absP, P, rel)
        self.max_store_ts = max(self.max_store_ts, int(store_ts.max()))
        # per-record Python work: CRC, topic, properties, keys
        if self.opt.crc:
            self._check_body_crcs(buf, arr, r, base, rel)
        tid = self._topic_lookup(buf, arr, r.topic_at, r.topic_len, P, rel, base)
        tran = sysf & TRANSACTION_MASK
        pr = self._check_properties(buf, arr, r, base, rel, tid, tran != TRANSACTION_ROLLBACK_TYPE)
        keys = None
        if self.want_keys:  # (on the C path this gives the tagsCodes too)
            keys = pr.index_keys(tid, self._topic_prefix_hashes(), tran != TRANSACTION_ROLLBACK_TYPE, self.topic_names)
        tags_code = self._tags_codes(pr, tid, store_ts, P, base, rel)
        if self.index_empty and self.first_indexable is None:
            self._note_first_indexable(pr, keys, tran, absP)
        step = _queue_steps(buf, r)
        # NOT and COMMIT records get a unit; 5.x inner-batch records go to the batch consume
        # queue (batchconsumequeue/, not checked here) instead
        dispatch = ((tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)) & (
            (sysf & INNER_BATCH_FLAG) == 0
        )
        tq = self._tq_ids(tid, qid)
        self.check_queue_offsets(tq, qoff, step, dispatch, absP, rel, base)
        self._check_units(tq, qoff, dispatch, absP, total, tags_code, store_ts, rel, base)
        self.check_lmq_batch(pr, tid, qid, dispatch, absP, (total, tags_code, store_ts), rel, base)
        if keys is not None:
            self.check_index_batch(absP, total, keys, base, rel)
        return stop

    def _check_physical_offsets(self, phy: np.ndarray, absP: np.ndarray, P: np.ndarray, rel: str) -> None:
        """``commitlog.physical-offset``: PHYSICALOFFSET is the record's position in the log."""
        for i in np.flatnonzero(phy != absP).tolist():
            self._add(
                "commitlog.physical-offset",
                rel,
                int(P[i]),
                f"stored PHYSICALOFFSET {int(phy[i])}, but the record lies at {int(absP[i])}",
                physical_offset=int(absP[i]),
            )

    def _note_first_indexable(self, pr, keys, tran: np.ndarray, absP: np.ndarray) -> None:
        """The first record ``IndexService#buildIndex`` would put a key of (UNIQ_KEY or KEYS;
        none for ROLLBACK), for ``index.missing`` when the index holds no entry."""
        owner = keys.owner if keys is not None else pr.key_ranges(tran != TRANSACTION_ROLLBACK_TYPE)[0]
        if owner.size:
            self.first_indexable = int(absP[int(owner.min())])

    def _check_body_crcs(self, buf, arr, r: RecordColumns, base: int, rel: str) -> None:
        """BODYCRC against crc32(body) & 0x7FFFFFFF: small bodies with the columns
        (:meth:`RecordColumns.read`), long ones by zlib; all of them here when the columns
        came without (a field outside the file)."""
        P, crc, n = r.pos, r.body_crc, r.pos.size
        bl, body_start = np.maximum(r.body_len, 0), r.body_at
        kern = self.kernel()
        if r.crc is not None:
            got = r.crc
            big = np.flatnonzero(got < 0)
            if big.size:
                got[big] = body_crcs(buf, body_start[big], bl[big])
        elif kern is None:
            got = body_crcs(buf, body_start, bl)
        else:
            got = np.empty(n, np.int64)
            if kern.small_body_crcs(arr, body_start, bl, kern.SMALL_BODY, got):
                big = np.flatnonzero(bl >= kern.SMALL_BODY)
                got[big] = body_crcs(buf, body_start[big], bl[big])
        for i in np.flatnonzero((got != crc) & (bl > 0)).tolist():
            p = int(P[i])
            self._add(
                "commitlog.body-crc",
                rel,
                p,
                f"stored body CRC {int(crc[i])}, computed {int(got[i])} over {int(bl[i])} body bytes",
                physical_offset=p + base,
            )
            if self.config.check_crc_on_recover:
                self.stops.append((p + base, "commitlog.body-crc", rel))

    def _check_properties(
        self, buf, arr, r: RecordColumns, base: int, rel: str, tid: np.ndarray, indexable: np.ndarray
    ) -> Properties | FusedProperties:
        """PROPERTIES syntax and the __CRC32# property (docs/format/commitlog.md#whole-record-crc);
        the batch's properties (by the C loop: flags, the values verify reads, tagsCodes and,
        when the index is checked, the keys of the ``indexable`` records, in one pass)."""
        P, total, pl, props_start = r.pos, r.total, np.maximum(r.props_len, 0), r.props_at
        kern = self.kernel()
        if kern is not None:
            want = indexable if self.want_keys else np.zeros(P.size, bool)
            pr = FusedProperties(kern, arr, props_start, pl, want, tid, self._topic_prefix_hashes(), _VALUES)
        else:
            pr = Properties(arr, props_start, pl, buf)
        for i in pr.suspects().tolist():
            problem = props_problem(buf[int(props_start[i]) : int(props_start[i] + pl[i])])
            if problem:
                self._add("commitlog.properties", rel, int(P[i]), problem, physical_offset=int(P[i]) + base)
        if self.opt.crc and pr.tot and pr.has_pair(CRC_MARK):
            for i in np.flatnonzero(pr.prop_crc).tolist():
                self._check_prop_crc(
                    buf, int(P[i]), int(total[i]), buf[int(props_start[i]) : int(props_start[i] + pl[i])], rel, base
                )
        return pr

    def _tags_codes(
        self, pr: Properties, tid: np.ndarray, store_ts: np.ndarray, P: np.ndarray, base: int, rel: str
    ) -> np.ndarray:
        """The tagsCode dispatch computes per record: the TAGS hash, or on the schedule topic
        the delivery time of its DELAY level (``CommitLog#checkMessageAndReturnSize``)."""
        tags_code = pr.tags_code
        sched_tid = self.topic_ids.get(SCHEDULE_TOPIC.encode())
        if sched_tid is None or not (tid == sched_tid).any():
            return tags_code
        dm, da, db = pr.value(b"DELAY\x01")
        sel = np.flatnonzero(tid[dm] == sched_tid)
        if not sel.size:
            return tags_code
        cb = pr.cat.tobytes()  # one copy; slicing bytes is several times cheaper than the array
        rules = self.__dict__.setdefault("_delay_rules", {})
        vals = list(map(cb.__getitem__, map(slice, da[sel].tolist(), db[sel].tolist())))
        for v in dict.fromkeys(vals):  # each distinct value asked once, in order of appearance
            if v not in rules:
                rules[v] = self._delay_rule(v)
        got = [rules[v] for v in vals]
        if not self._add_delays(tags_code, store_ts, dm[sel], got):
            self._delay_one_by_one(tags_code, store_ts, dm[sel], got, P, base, rel)
        return tags_code

    def _delay_one_by_one(self, tags_code, store_ts, m: np.ndarray, got: list, P, base: int, rel: str) -> None:
        """tagsCode = store time + delay record by record; a rule that throws is a finding
        and a stop (``CommitLog#checkMessageAndReturnSize``)."""
        for i, rule in zip(m.tolist(), got, strict=True):
            if rule is False:
                continue
            if isinstance(rule, InvalidForDispatch):
                self._add(
                    "commitlog.properties",
                    rel,
                    int(P[i]),
                    f"{rule}: the broker's check throws, so it "
                    "treats the record as invalid (dispatch and recovery stop here)",
                    severity=ERROR,
                    physical_offset=int(P[i]) + base,
                )
                self.stops.append((int(P[i]) + base, "commitlog.properties", rel))
                continue
            tags_code[i] = int(store_ts[i]) + rule

    @staticmethod
    def _add_delays(tags_code: np.ndarray, store_ts: np.ndarray, m: np.ndarray, got: list) -> bool:
        """tagsCode = store time + delay of the records ``m`` at once (a rule False: level
        <= 0, the TAGS hash stays), when no rule is an exception and no sum leaves int64;
        False (nothing done) otherwise: the caller's loop reports each record."""
        keep = [j for j, r in enumerate(got) if r is not False]
        if not keep:
            return True
        add = [got[j] for j in keep]
        if any(isinstance(r, InvalidForDispatch) for r in add):
            return False
        idx = m[keep]
        ts = store_ts[idx]
        lo, hi = min(add), max(add)
        if min(lo, int(ts.min()) + lo) < -(1 << 63) or max(hi, int(ts.max()) + hi) >= 1 << 63:
            return False
        tags_code[idx] = ts + np.asarray(add, np.int64)
        return True

    def _delay_rule(self, delay: bytes):
        """What ``compute_tags_code`` makes of a DELAY value on the schedule topic, asked
        once per distinct value: the exception it throws, False when the tagsCode stays the
        TAGS hash (level <= 0), else the delay added to the store time (the code at store
        time 0, told apart from level <= 0 by asking at store time 1 too)."""
        props = {"DELAY": delay.decode("utf-8", "replace")}
        try:
            at0, at1 = (compute_tags_code(Delayed(props, SCHEDULE_TOPIC.encode(), t), self.delay_table) for t in (0, 1))
        except InvalidForDispatch as e:
            return e
        return False if at0 == at1 else at0

    def _check_prop_crc(self, buf, pos: int, total: int, props: bytes, rel: str, base: int) -> None:
        """docs/format/commitlog.md#whole-record-crc: the __CRC32# digits (least significant first)
        against crc32(record[:total-20])."""
        if props.endswith(b"\x02") and props.startswith(CRC_MARK, len(props) - CRC32_RESERVED_LEN):
            digits = props[-11:-1]
        else:
            v = parse_properties(props.decode("utf-8", "replace")).get(CRC32_PROPERTY, "")
            digits = v.encode()
        want = crc32(memoryview(buf)[pos : pos + total - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
        if len(digits) != 10 or not digits.isdigit() or int(digits[::-1]) != want:
            self._add(
                "commitlog.prop-crc",
                rel,
                pos,
                f"__CRC32# is {digits.decode('ascii', 'replace')!r}, the "
                f"record's CRC is {want} (stored reversed as {str(want).zfill(10)[::-1]})",
                physical_offset=base + pos,
            )

    def _topic_prefix_hashes(self) -> np.ndarray:
        """Java hashCode of ``topic + "#"`` per topic id (uint64, mod 2^32)."""
        have = getattr(self, "_prefix_h", None)
        if have is None or have.size < len(self.topic_names):
            self._prefix_h = np.array(
                [java_hash(t.decode("utf-8", "replace") + "#") & 0xFFFFFFFF for t in self.topic_names], np.uint64
            )
        return self._prefix_h

    def _topic_lookup(self, buf, arr, ta: np.ndarray, tl: np.ndarray, P: np.ndarray, rel: str, base: int) -> np.ndarray:
        """Topic id per record: topics seen before found by the C loop's hash table
        (:class:`TopicTable`) or with numpy (:class:`TopicIds`, the reference path); new ones
        registered one by one in record order (:meth:`_new_topic`, its findings)."""
        kern = self.kernel()
        if kern is not None:
            tid, tbl = self._topic_table_c().lookup(kern, arr, ta, tl), None
        else:
            tbl = self.__dict__.get("_topic_table")
            if tbl is None or len(tbl.ids) != len(self.topic_names):
                tbl = self._topic_table = TopicIds()
                for i, name in enumerate(self.topic_names):
                    tbl.add(name, i)
            tid = tbl.lookup(arr, ta, tl)
        unknown = np.flatnonzero(tid < 0)
        if unknown.size:
            get = self.topic_ids.get
            for i in unknown.tolist():
                at = int(ta[i])
                tb = buf[at : at + int(tl[i])]
                t = get(tb)
                if t is None:
                    t = self._new_topic(tb, rel, int(P[i]), base)
                    if tbl is not None and len(tbl.ids) == t:
                        tbl.add(tb, t)
                tid[i] = t
        return tid

    def _topic_table_c(self) -> TopicTable:
        """The C loop's table of the topics numbered so far (the new ones added in id order)."""
        if getattr(self, "_topic_fused", None) is None or self._topic_fused.count > len(self.topic_names):
            self._topic_fused = TopicTable()
        tt = self._topic_fused
        while tt.count < len(self.topic_names):
            tt.add(self.topic_names[tt.count])
        return tt

    def _new_topic(self, tb: bytes, rel: str, pos: int, base: int) -> int:
        """Number a topic met for the first time; its name checked once."""
        self.sink.topic_seen(tb, base + pos)
        t = len(self.topic_names)
        self.topic_ids[tb] = t
        self.topic_names.append(tb)
        shown = tb.decode("utf-8", "backslashreplace")
        why = _unusable_topic(tb)
        if why is not None:
            self._add(
                "commitlog.topic",
                rel,
                pos,
                f"topic {shown!r} is {why} (first seen here)",
                physical_offset=base + pos,
                subject=("topic", tb),
            )
        elif not TOPIC_OK_DOT.fullmatch(tb):
            self._add(
                "commitlog.topic-chars",
                rel,
                pos,
                f"topic {shown!r} has characters outside [A-Za-z0-9%|_.-] (first seen here)",
                physical_offset=base + pos,
                subject=("topic", tb),
            )
        return t

    def _tq_ids(self, tid: np.ndarray, qid: np.ndarray) -> np.ndarray:
        """A dense id per (topic, queue id): a lookup table for the usual small queue ids."""
        small = (qid >= 0) & (qid < 1024)
        lut = self._tq_table(len(self.topic_names), int(qid[small].max()) + 1 if small.any() else 1)
        if small.all():
            ids = lut[tid, qid]
            if (ids >= 0).all():
                return ids
        ids = self._tq_ids_slow(tid, qid)
        lut[tid[small], qid[small]] = ids[small]
        return ids

    def _tq_table(self, rows: int, cols: int) -> np.ndarray:
        """The (topic, queue id) lookup table, grown to ``rows`` topics and ``cols`` queue
        ids: rows doubling, columns to a power of two (at most 1024), so 20 000 one-queue
        topics cost a narrow table, not 20 000 × 1024 ids copied at each growth."""
        lut = getattr(self, "_tq_lut", None)
        if lut is not None and lut.shape[0] >= rows and lut.shape[1] >= cols:
            return lut
        old_rows, old_cols = lut.shape if lut is not None else (0, 0)
        new = np.full((max(rows + 16, 2 * old_rows), max(16, old_cols, 1 << (cols - 1).bit_length())), -1, np.int64)
        if lut is not None:
            new[:old_rows, :old_cols] = lut
        self._tq_lut = new
        return new

    def _tq_ids_slow(self, tid: np.ndarray, qid: np.ndarray) -> np.ndarray:
        combo = tid * (1 << 32) + (qid & 0xFFFFFFFF)
        uniq, inv = np.unique(combo, return_inverse=True)
        ids = np.empty(uniq.size, np.int64)
        n0 = len(self.tq_list)
        for j, c in enumerate(uniq.tolist()):
            t, q = c >> 32, c & 0xFFFFFFFF
            q = q - (1 << 32) if q >= 1 << 31 else q
            key = (t, q)
            v = self.tq_ids.get(key)
            if v is None:
                v = self.tq_ids[key] = len(self.tq_list)
                self.tq_list.append(key)
                self.tq_queue.append(self.queues.get((self.topic_names[t], q)))
                self.tq_last.append(None)
            ids[j] = v
        if len(self.tq_list) > n0:
            self.sink.queues_numbered([self.queue_key(t) for t in range(n0, len(self.tq_list))])
        return ids[inv.ravel()]

    def check_queue_offsets(self, tq, qoff, step, dispatch, absP, rel, base) -> None:
        """QUEUEOFFSET continuity per queue: a skip ahead is missing messages, a repeat or
        restart a broker restart without its consume queue (docs/format/commitlog.md#append)."""
        idx = np.flatnonzero(dispatch)
        if not idx.size:
            return
        if self.sink.wants_queue_heads:
            self.sink.queue_heads(self._queue_heads(tq, qoff, step, idx, absP, rel, base))
        order = idx[stable_argsort(tq[idx])]
        g = tq[order]
        q = qoff[order]
        st = step[order]
        first = np.ones(order.size, bool)
        first[1:] = g[1:] != g[:-1]
        exp = np.empty(order.size, np.int64)
        exp[1:] = q[:-1] + st[:-1]
        heads = np.flatnonzero(first)
        for h in heads.tolist():
            prev = self.tq_last[int(g[h])]
            exp[h] = q[h] if prev is None else prev
        last = np.flatnonzero(np.append(first[1:], True))
        for li in last.tolist():
            self.tq_last[int(g[li])] = int(q[li] + st[li])
        for j in np.flatnonzero(q != exp).tolist():
            i = int(order[j])
            t, qi = self.tq_list[int(g[j])]
            topic = self.topic_names[t].decode("utf-8", "backslashreplace")
            e, got, tq_j = int(exp[j]), int(q[j]), int(g[j])
            if got > e:
                check, what = "commitlog.queue-offset", f"queue offset {got}, expected {e} ({got - e} missing)"
            else:  # a restart: the queue's units before it are another run's (verify/queues.py)
                self.tq_reset[tq_j] = max(self.tq_reset.get(tq_j, -1), int(absP[i]))
                check = "commitlog.queue-offset-reset"
                what = f"queue offset {got} after {e - 1} (restart without its consume queue?)"
            self._add(
                check,
                rel,
                int(absP[i]) - base,
                f"{topic}/{qi}: {what}",
                physical_offset=int(absP[i]),
                topic=topic,
                queue_id=qi,
                subject=("queue", self.queue_key(tq_j)),
            )

    def _queue_heads(self, tq, qoff, step, idx, absP, rel, base) -> dict:
        """(topic, queue id) -> (queue offset, step, physical offset, file, base) of the first
        dispatched record of each queue the scan has not met before."""
        heads = {}
        uniq, first = np.unique(tq[idx], return_index=True)
        for t, j in zip(uniq.tolist(), first.tolist(), strict=True):
            if self.tq_last[t] is None:
                i = int(idx[j])
                heads[self.queue_key(t)] = (int(qoff[i]), int(step[i]), int(absP[i]), rel, base)
        return heads
