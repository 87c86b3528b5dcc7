"""``rmqstore stats --exact``: counted from one walk of the commit log (the ``commitlog`` method).

One columnar walk of every commit-log file (``CommitLog#scan_blocks``, the records
``checkMessageAndReturnSize`` calls valid; a damaged stretch ends its file, the next file is
read); every record counts, and those no consume queue holds are counted in ``not_in_cq`` by
reason. ``--sample``/``--max-bytes`` narrow the walk (:func:`from_sampled_walk`).
"""

from __future__ import annotations

import numpy as np
from rmqstore_cli.formats.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

from rmqstore_cli.store.answers.stats import Row, Stats, commitlog_total, tree_sizes, unread_entries
from rmqstore_cli.store.answers.stats_queues import PerFile, batch_keys, cq_file_rows, rocksdb_queues
from rmqstore_cli.store.files.mapped_files import queue_dirs
from rmqstore_cli.store.records.message import Message

#: The transactional records no consume queue holds (``CommitLogDispatcherBuildConsumeQueue``
#: dispatches NOT and COMMIT only), by the name ``not_in_cq`` gives them.
_NOT_IN_CQ_TX = {TRANSACTION_PREPARED_TYPE: "prepared", TRANSACTION_ROLLBACK_TYPE: "rollback"}


class _Groups:
    """Per (topic, queue) accumulators over the blocks of a scan, and per commit-log file."""

    def __init__(self, commitlog):
        self.rows: dict[tuple[str, int], Row] = {}
        self.not_in_cq: dict[str, int] = {}
        self.files = PerFile(commitlog)  # store times per file, as the walk has them

    def add(
        self,
        names: list[str],
        tid: np.ndarray,
        qid: np.ndarray,
        total: np.ndarray,
        ts: np.ndarray,
        sys_flag: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        """A run of records: topic ids into ``names``, queue ids, sizes, store times, sysflags."""
        key = (tid.astype(np.int64) << 32) | (qid.astype(np.int64) & 0xFFFFFFFF)
        uniq, inv, counts = np.unique(key, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, weights=total, minlength=uniq.size)
        lo = np.full(uniq.size, np.iinfo(np.int64).max, np.int64)
        hi = np.full(uniq.size, np.iinfo(np.int64).min, np.int64)
        np.minimum.at(lo, inv, ts)
        np.maximum.at(hi, inv, ts)
        tx = sys_flag & TRANSACTION_MASK
        skipped = np.zeros(uniq.size, np.int64)
        for value, reason in _NOT_IN_CQ_TX.items():
            hit = tx == value
            if hit.any():
                self.not_in_cq[reason] = self.not_in_cq.get(reason, 0) + int(hit.sum())
                skipped += np.bincount(inv, weights=hit, minlength=uniq.size).astype(np.int64)
        for k, c, s, a, b, x in zip(
            uniq.tolist(), counts.tolist(), sums.tolist(), lo.tolist(), hi.tolist(), skipped.tolist(), strict=True
        ):
            q = k & 0xFFFFFFFF
            q = q - (1 << 32) if q >= 1 << 31 else q
            r = self.rows.setdefault((names[k >> 32], q), Row(names[k >> 32], q, not_in_cq=0))
            r.messages += c
            r.bytes += int(s)
            r.not_in_cq += x
            r.times(a, b)
        self.files.add(offsets, total, ts)

    def no_consume_queue(self, on_disk: set[tuple[str, int]]) -> None:
        """Queues with no consume queue on disk: none of their records is held by one, and those
        not already counted (PREPARED/ROLLBACK) count as ``no_consume_queue``."""
        for key, r in self.rows.items():
            if key in on_disk:
                continue
            lost = r.messages - r.not_in_cq
            if lost:
                self.not_in_cq["no_consume_queue"] = self.not_in_cq.get("no_consume_queue", 0) + lost
            r.not_in_cq = r.messages


def _add_record(g: _Groups, m: Message) -> None:
    """One record the columnar walk left to the per-record check (same accounting)."""

    def one(v: int) -> np.ndarray:
        return np.array([v], np.int64)

    g.add([m.topic], one(0), one(m.queue_id), one(m.total_size), one(m.store_timestamp), one(m.sys_flag), one(m.offset))


def from_commit_log(store, topic: str | None = None, by_file: bool = False, records=None) -> Stats:
    """Counts from one walk of the whole commit log (``--exact``): every valid record, and
    ``not_in_cq`` for those no consume queue holds (PREPARED/ROLLBACK, a queue not on disk);
    ``records``: a narrowed walk's records and blocks instead (:func:`from_sampled_walk`)."""
    commitlog = store.commitlog
    total = commitlog_total(commitlog)
    g = _Groups(commitlog)
    walked = commitlog.scan_blocks(skip_mismatch=True, every_file=True) if records is None else records
    _count_walk(g, walked, topic)
    g.no_consume_queue(_queues_on_disk(store, topic))
    _cq_bytes(store, g.rows, topic)
    st = Stats("commitlog", g.rows, total, not_in_cq=g.not_in_cq)
    st.notes += unread_entries(store)
    _batch_queue_bytes(store, topic, st)
    st.notes += [f"the commit log's data stops at {s.offset} in {s.file}: {s.reason}" for s in commitlog.stops]
    if by_file:
        st.files = g.files.rows(store.config.root, times=lambda lo, hi: (lo, hi)) + cq_file_rows(store, topic)
    return st


def _count_walk(g: _Groups, walked, topic: str | None) -> None:
    """Every record and block of the walk (of ``topic`` alone when given) into ``g``."""
    names_seen: list[str] = []
    for rec in walked:
        if not isinstance(rec, Message):
            _add_block(g, rec, names_seen, topic)
        elif topic is None or rec.topic == topic:
            _add_record(g, rec)


def _add_block(g: _Groups, rec, names_seen: list[str], topic: str | None) -> None:
    """A block of the columnar walk (its rows of ``topic`` alone when given); ``names_seen``:
    the walk's topic names by topic id, grown as blocks meet new ones."""
    names_b, tid = rec.topics
    learn_topic_names(names_seen, names_b)
    rb = rec.rb
    cols = (tid, rb.queue_id, rb.total, rec.store_timestamp, rb.sys_flag, rec.offsets)
    if topic is not None:
        keep = topic_mask(names_seen, tid, topic)
        if not keep.any():
            return
        cols = tuple(c[keep] for c in cols)
    g.add(names_seen, *cols)


def learn_topic_names(names: list[str], names_b: list[bytes]) -> None:
    """Extend ``names`` (the walk's topic names by topic id, decoded) with the ones a block's
    topic table adds: ids are given in the order topics are first met."""
    if len(names) < len(names_b):
        names += [n.decode("utf-8", "replace") for n in names_b[len(names) :]]


def topic_mask(names: list[str], tid: np.ndarray, topic: str) -> np.ndarray:
    """A block's rows of ``topic`` (none when the walk has not met it)."""
    return tid == (names.index(topic) if topic in names else -1)


def _queues_on_disk(store, topic: str | None) -> set[tuple[str, int]]:
    """The queues a consume queue holds: file queues, RocksDB queues and BatchCQ queues (a
    BatchCQ topic's records are in its batch queues)."""
    on_disk = {(t, q) for t, q, _ in queue_dirs(store.config.consumequeue_dir) if topic is None or t == topic}
    on_disk |= {(q.topic, q.queue_id) for q in rocksdb_queues(store, topic)}
    on_disk |= batch_keys(store, topic)
    return on_disk


def _batch_queue_bytes(store, topic: str | None, st: Stats) -> None:
    """Each BatchCQ queue's files' bytes on its row (as :func:`_cq_bytes` for consume queues),
    and a note that ``--exact`` counts their batch records, one each."""
    keys = batch_keys(store, topic)
    for t, q in keys:
        r = st.queues.setdefault((t, q), Row(t, q, not_in_cq=0))
        r.cq_bytes = tree_sizes(store.config.root / "batchconsumequeue" / t / str(q), [])[1]
    if keys:
        st.notes.append(
            "BatchCQ queues (batchconsumequeue/): --exact counts their batch records, one each; "
            "without --exact their inner messages are counted"
        )


def _cq_bytes(store, rows: dict[tuple[str, int], Row], topic: str | None) -> None:
    """The consume-queue files' size of each queue (a queue with no record gets a row too)."""
    for t, q, d in queue_dirs(store.config.consumequeue_dir):
        if topic is not None and t != topic:
            continue
        r = rows.setdefault((t, q), Row(t, q, not_in_cq=0))
        r.cq_bytes = tree_sizes(d, [])[1]


def from_sampled_walk(store, topic: str | None, by_file: bool, narrowing) -> Stats:
    """:func:`from_commit_log` over the walk ``narrowing`` narrows (``--sample``,
    ``--max-bytes``: store/answers/sampling.py): the counts are of the records kept, not scaled."""
    from rmqstore_cli.store.answers.log_range import Range
    from rmqstore_cli.store.answers.sampling import narrowed

    cl = store.commitlog

    def walk_one(r: Range):
        for b in cl.scan_blocks(r.start, r.stop, skip_mismatch=True, every_file=True):
            yield b, None if isinstance(b, Message) else np.arange(b.n)

    def records():
        for rec, take in narrowed(cl, Range(None, None), walk_one, narrowing, None):
            yield rec if take is None else rec.take(take)

    return from_commit_log(store, topic, by_file, records())
