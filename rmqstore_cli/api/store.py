"""``open_store`` and :class:`Store`: one broker store directory, for a script.

The command line is a thin layer over these calls (DESIGN.md, layer 4): what ``rmqstore
dump-commitlog --topic T --begin B`` prints is ``Store.messages(topic=T, begin=B)``, each
message's ``as_dict()``. A store opens read-only: nothing here changes a byte of it.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqstore_cli.api.epoch_records import EpochReport
from rmqstore_cli.api.incident_records import (
    DelayLevel,
    OverdueMessage,
    OverdueReport,
    OverdueTopic,
    PopGroup,
    PopMessage,
    PopReport,
    ReviveQueue,
    Transaction,
    TransactionGroup,
    TransactionReport,
)
from rmqstore_cli.api.records import (
    ConsumerProgress,
    ExpireAction,
    ExpireReport,
    ExportReport,
    Finding,
    IndexHit,
    Message,
    MessageId,
    OffsetAtTime,
    QueueComparison,
    QueueInfo,
    QueueUnit,
    RebuildReport,
    StatsFile,
    StatsInterval,
    StatsReport,
    StatsRow,
    TimerNext,
    TimerSlot,
    TimerSummary,
    TimerUnit,
    VerifyReport,
)
from rmqstore_cli.errors import StoreError, UsageError
from rmqstore_cli.store.filters import MessageFilter
from rmqstore_cli.store.message_store import MessageStore
from rmqstore_cli.times import LONG_MAX, check_window, parse_time, parse_tz

if TYPE_CHECKING:
    from rmqstore_cli.api.trace_records import TraceRecord
    from rmqstore_cli.store.config import StoreConfig

#: What a time argument may be: epoch milliseconds, an aware (or local) datetime, or a string
#: in the command line's forms (ISO 8601, epoch seconds/milliseconds by digits, now, -2h).
TimeLike = int | _dt.datetime | str


def to_ms(value: TimeLike | None, name: str, tz: _dt.tzinfo | None = None) -> int | None:
    """Epoch milliseconds of a time argument (None stays None). A naive datetime is in
    ``tz`` (or the local zone), as a time without a zone is on the command line."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"{name}: {value!r} is not a time")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=tz) if tz else value.astimezone()
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        return parse_time(value, name, tz=tz)
    raise UsageError(f"{name}: {value!r} is not a time", hint="give epoch milliseconds, a datetime or a string")


def open_store(
    path: str | os.PathLike[str] | None = None,
    broker_conf: str | os.PathLike[str] | None = None,
    *,
    tz: str | _dt.tzinfo | None = None,
    allow_odd_size: bool = False,
    commitlog_file_size: int | None = None,
    cq_file_size: int | None = None,
    index_slots: int | None = None,
    index_max: int | None = None,
) -> Store:
    """Open the store at ``path`` read-only (or the one ``broker_conf``'s ``storePathRootDir``
    names; else ``~/store``, the broker's default). File sizes come from ``broker_conf``, the
    keyword arguments, or the files themselves, checked as the broker's
    ``MappedFileQueue#load`` checks them when something is first read (a torn store can
    still be verified: :meth:`Store.verify` reports odd sizes as findings). Raises
    :class:`~rmqstore_cli.errors.StoreError` for what is not a store. Use it as a context
    manager, or call ``close()``."""
    sizes = {
        "mapped_file_size_commit_log": commitlog_file_size,
        "mapped_file_size_consume_queue": cq_file_size,
        "max_hash_slot_num": index_slots,
        "max_index_num": index_max,
    }
    opener = StoreOpener(
        None if path is None else Path(path), None if broker_conf is None else Path(broker_conf), sizes, allow_odd_size
    )
    return Store(opener, parse_tz(tz) if isinstance(tz, str) or tz is None else tz)


@dataclass(frozen=True)
class StoreOpener:
    """How a store was named, so a fresh configuration can be made from it: verify infers
    sizes its own tolerant way (a disagreeing file is a finding), the readers strictly."""

    path: Path | None
    broker_conf: Path | None
    sizes: dict[str, int | None]
    allow_odd_size: bool = False

    def config(self) -> StoreConfig:
        from rmqstore_cli.store.config import StoreConfig

        cfg = StoreConfig.load(self.path, self.broker_conf, **self.sizes)
        cfg.allow_odd_size = self.allow_odd_size
        return cfg


class Store:
    """One store directory, opened read-only (:func:`open_store`).

    Every reader follows the broker's rules: messages are the records the broker's recovery
    would keep (``CommitLog#checkMessageAndReturnSize``), queues end where
    ``ConsumeQueue#recover`` ends them, and key look-ups check each hit's real key, as the
    client's ``queryMessage`` filter does."""

    def __init__(self, opener: StoreOpener, tz: _dt.tzinfo | None = None):
        self.opener = opener
        self.tz = tz
        self._store = MessageStore.open(opener.config(), tz, infer_sizes=False)
        self._sized = False

    @property
    def engine(self) -> MessageStore:
        """The engine's store (``store.message_store.MessageStore``), its file sizes inferred
        and checked on first use (``StoreConfig.infer_sizes``)."""
        if not self._sized:
            self._store.notes = self._store.config.infer_sizes(defer_index=True)
            self._sized = True
        return self._store

    # ------------------------------------------------------------------ the store itself
    @property
    def path(self) -> Path:
        """The store root (``storePathRootDir``)."""
        return self._store.config.root

    @property
    def config(self) -> StoreConfig:
        """The sizes, paths and rules in force (``store.config.StoreConfig``)."""
        return self.engine.config

    @property
    def warnings(self) -> list[str]:
        """Optional things skipped while reading (an unreadable ``topics.json``, …)."""
        return self.engine.warnings

    def close(self) -> None:
        """Release every mapping and descriptor the store holds."""
        self._store.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def topics(self) -> list[str]:
        """The topics the store knows (consume queues and ``config/topics.json``)."""
        return self.engine.topics()

    # ------------------------------------------------------------------ messages
    def messages(
        self,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        *,
        queue_id: int | None = None,
        key: str | None = None,
        uniq_key: str | None = None,
        tag: str | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
        check_crc: bool = False,
        limit: int | None = None,
        sample: int | None = None,
        max_bytes: int | None = None,
    ) -> Iterator[Message]:
        """Messages in commit-log order that pass every filter given: ``topic``, store time in
        ``[begin, end]`` (both inclusive), ``queue_id``, ``key`` (one of its KEYS), ``uniq_key``,
        ``tag`` (its TAGS), physical offsets in ``[from_offset, to_offset)``. ``check_crc``
        checks each body's CRC, a mismatch ending its file as in the broker's recovery.
        ``sample`` keeps every Nth of them (the first always), ``max_bytes`` reads only the
        first N bytes of each commit-log file (the records ending within them): a quick look
        at a big store (store/sampling.py).
        The same messages, in the same order, as ``rmqstore dump-commitlog`` (with
        ``--sample``, ``--max-bytes``)."""
        flt = self.filter(topic, begin, end, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag)
        _check_range(from_offset, to_offset)
        for name, v in (("sample", sample), ("max_bytes", max_bytes)):
            if v is not None and v < 1:
                raise UsageError(f"{name} {v}: not a positive count")
        shown = 0
        walk = self._walk(flt, from_offset, to_offset, check_crc)
        if sample is not None or max_bytes is not None:
            walk = self._narrowed(flt, from_offset, to_offset, check_crc, sample, max_bytes)
        for blk, take in walk:
            for rec in blk.messages(take) if take is not None else (blk,):
                if limit is not None and shown >= limit:
                    return
                shown += 1
                yield Message.of(rec, self._file_name(rec.offset))

    def batches(
        self,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        *,
        queue_id: int | None = None,
        key: str | None = None,
        uniq_key: str | None = None,
        tag: str | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
        check_crc: bool = False,
        body: bool = False,
    ) -> Iterator[Any]:
        """The messages of :meth:`messages` (same filters, same order) as ``pyarrow.RecordBatch``
        es, for speed: a run of records is converted a column at a time, not a message at a
        time. The columns are the export dataset's (``rmqstore export``): the JSON Lines keys,
        ``properties`` as a map, ``body`` as binary (with ``body``, else null), plus ``store``
        (this store's path) and ``topic_dir``. Needs pyarrow (``pip install 'rmqstore[export]'``):
        without it, a :class:`~rmqstore_cli.errors.UsageError` before any work."""
        from rmqstore_cli.pipeline.message_batches import message_batches, require_pyarrow

        require_pyarrow()
        flt = self.filter(topic, begin, end, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag)
        _check_range(from_offset, to_offset)
        walk = self._walk(flt, from_offset, to_offset, check_crc)
        yield from message_batches(walk, str(self.path), body, self._file_name)

    def filter(
        self,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        *,
        queue_id: int | None = None,
        key: str | None = None,
        uniq_key: str | None = None,
        tag: str | None = None,
    ) -> MessageFilter:
        """The engine's filter for these arguments (times read as :meth:`messages` reads them)."""
        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        return MessageFilter(topic, queue_id, key, uniq_key, tag, b, e)

    def _walk(
        self, flt: MessageFilter, start: int | None, stop: int | None, check_crc: bool
    ) -> Iterator[tuple[Any, Any]]:
        """(block, indices) for runs of records filtered by their columns, (record, None) for
        a record the per-record path decoded; only records that pass ``flt``."""
        columnar = flt.columnar() and not self.engine.commitlog.is_dledger
        for rec in self.engine.commitlog.scan_blocks(
            start, stop, check_crc=check_crc, every_file=True, blocks=columnar
        ):
            if hasattr(rec, "rb"):  # a MessageBlock
                take = flt.select(rec)
                if take.size:
                    yield rec, take
            elif flt.matches(rec):
                yield rec, None

    def _narrowed(
        self,
        flt: MessageFilter,
        start: int | None,
        stop: int | None,
        check_crc: bool,
        every: int | None,
        max_bytes: int | None,
    ) -> Iterator[tuple[Any, Any]]:
        """:meth:`_walk` narrowed (``store.sampling.narrowed``): every Nth, the first bytes of each file."""
        from rmqstore_cli.store.log_range import Range
        from rmqstore_cli.store.sampling import Narrowing, narrowed

        n = Narrowing(every, max_bytes)
        cl = self.engine.commitlog
        for rec, take in narrowed(
            cl, Range(start, stop), lambda r: self._walk(flt, r.start, r.stop, check_crc), n, None
        ):
            if take is None or take.size:
                yield rec, take

    def _file_name(self, offset: int) -> str:
        f = self.engine.commitlog.queue.find(offset)
        return f.name if f is not None else ""

    def message_at(self, offset: int, check_crc: bool = False) -> Message | None:
        """The message whose record starts at physical ``offset``, or None where no valid
        record starts there (expired, truncated, or not a record start)."""
        from rmqstore_cli.store.lookup import read_record

        rec, _why = read_record(self.engine.commitlog, offset)
        if rec is not None and check_crc:
            rec = self.engine.commitlog.get(offset, check_crc=True)
        return None if rec is None else Message.of(rec, self._file_name(rec.offset))

    # ------------------------------------------------------------------ consume queues
    def queues(self) -> list[QueueInfo]:
        """Every consume queue (file or RocksDB; and 5.x batch queues), sorted by topic and
        queue id, with its logical bounds (``#getMinOffsetInQueue``, ``#getMaxOffsetInQueue``)."""
        from rmqstore_cli.store.batch_queue import store_batch_queues

        clmin = self.engine.commitlog.min_offset
        kind = "rocksdb" if self.engine.rocksdb_cq is not None else "cq"
        out = [
            QueueInfo(cq.topic, cq.queue_id, kind, cq.min_offset(clmin), cq.max_offset)
            for cq in self.engine.consume_queues()
        ]
        if self.engine.rocksdb_cq is None:
            out += [
                QueueInfo(bq.topic, bq.queue_id, "bcq", bq.min_offset, bq.max_offset)
                for bq in store_batch_queues(self.config)
            ]
        return sorted(out, key=lambda q: (q.topic, q.queue_id, q.kind))

    def units(self, topic: str, queue_id: int, start: int = 0, stop: int | None = None) -> Iterator[QueueUnit]:
        """The units of one consume queue with logical offsets in ``[start, stop)`` (default:
        up to the queue's recovered end)."""
        cq = self.engine.consume_queue(topic, queue_id)
        for u in cq.units(start, stop):
            yield QueueUnit(topic, queue_id, u.cq_offset, u.commitlog_offset, u.size, u.tags_code, u.file)

    def compare_consume_queues(self, topic: str | None = None, queue_id: int | None = None) -> list[QueueComparison]:
        """A double-writing 5.x store (``rocksdbCQDoubleWriteEnable``; ``CombineConsumeQueueStore``
        from 5.3.2) keeps the file consume queue and the RocksDB one in the same
        ``consumequeue/`` directory: compare them unit by unit, per queue of either (or those
        of ``topic`` / ``queue_id``), sorted (store/cq_compare.py). A store without both is a
        StoreError naming what is missing."""
        from rmqstore_cli.store.cq_compare import compare_stores, has_file_queues

        cq_dir = self.engine.config.consumequeue_dir
        if self.engine.rocksdb_cq is None or not has_file_queues(cq_dir):
            what = "RocksDB database" if self.engine.rocksdb_cq is None else "<topic>/<queueId> directories"
            raise StoreError(f"not a double-writing store: consumequeue/ holds no {what}", path=cq_dir)
        got = compare_stores(cq_dir, self.engine.config.cq_file_size, self.engine.rocksdb_cq, topic, queue_id)
        return [QueueComparison(**asdict(c)) for c in got]

    # ------------------------------------------------------------------ look-ups
    def lookup(
        self,
        key: str,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        max_hits: int = 64,
        broker_window: bool = False,
    ) -> list[IndexHit]:
        """Messages whose real key (a KEYS word or the UNIQ_KEY) is ``key``, found through the
        index files and checked against each record, of ``topic`` or of every topic the
        store knows; in physical-offset order. ``max_hits`` keeps the newest (0: all).

        The window is what a person means: store time in ``[begin, end]``, the index asked a
        little wider. ``broker_window`` instead gives exactly what the broker's
        ``DefaultMessageStore#queryMessage`` returns and the client's key filter keeps (the
        index's whole-second times: a window of one millisecond may find nothing). A
        lower-case UNIQ_KEY that finds nothing is looked up in upper case, as it is indexed."""
        from rmqstore_cli.store.lookup import INT_MAX, broker_query_message, lookup_key

        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        b, e = b or 0, LONG_MAX if e is None else e
        ms = self.engine
        topics = [topic] if topic is not None else (self.topics() or ms.topics_from_commitlog())

        def query(k: str) -> list[Any]:
            if broker_window:
                return [
                    h
                    for t in topics
                    for h in broker_query_message(ms.index, ms.commitlog, t, k, max_hits or INT_MAX, b, e)
                    if h.true
                ]
            return lookup_key(ms.index, ms.commitlog, topics, k, b, e, max_hits).hits

        hits = query(key)
        if not hits and key != key.upper() and len(key) in (32, 56) and all(c in "0123456789abcdef" for c in key):
            hits = query(key.upper())
        return [
            IndexHit(
                h.key,
                h.topic,
                h.physical_offset,
                h.store_timestamp,
                h.index_file,
                h.match,
                None if (m := h.message) is None else Message.of(m, self._file_name(m.offset)),
            )
            for h in hits
        ]

    def message_by_id(self, msg_id: str, *, now: TimeLike | None = None) -> MessageId:
        """Read ``msg_id`` both ways, as ``decode-msgid --store`` does: as an offset msgId (the
        record at its physical offset, whose own offset field must agree) and as a UNIQ_KEY
        (through the index of every topic). What the store holds decides ``kind``.
        ``now`` dates a UNIQ_KEY's ``nearly_time`` (it holds only the time within its month).
        Raises :class:`~rmqstore_cli.errors.UsageError` for what is no message id."""
        from rmqstore_cli.store.msgid import BadId, describe_id, parse_id, resolve_in_store
        from rmqstore_cli.times import now_ms

        try:
            r = parse_id(msg_id)
        except BadId as e:
            raise UsageError(f"{msg_id!r} is not a message id: {e}") from None
        ms = self.engine
        resolve_in_store(r, ms, self.topics() or ms.topics_from_commitlog())
        at = to_ms(now, "now", self.tz)
        d = describe_id(r, now_ms() if at is None else at, self.tz)
        msgs = [Message.of(m, self._file_name(m.offset)) for m in d.pop("messages")]
        return MessageId(**d, messages=msgs)

    # ------------------------------------------------------------------ queue positions
    def search_offset(
        self,
        topic: str,
        time: TimeLike,
        *,
        queue_id: int | None = None,
        broker_version: str | None = None,
        boundary: str = "lower",
        scan: bool = False,
    ) -> list[OffsetAtTime]:
        """Per queue of ``topic`` (or one ``queue_id``): the consume-queue offset of the first
        message stored at or after ``time`` (every unit read with ``scan``, else bisected), as
        ``search-offset`` answers. ``broker_version`` "4.9" or "5" gives instead what that
        broker's ``ConsumeQueue#getOffsetInQueueByTime`` returns ("5" with ``boundary``
        lower or upper). Raises :class:`~rmqstore_cli.errors.NotFound` when the topic has no
        queue."""
        from rmqstore_cli.errors import NotFound
        from rmqstore_cli.store import offset_query

        offset_query.check_request(broker_version, boundary, scan)
        when = to_ms(time, "time", self.tz)
        assert when is not None
        ms = self.engine
        queues, batch = offset_query.pick_queues(ms, topic, queue_id)
        if not queues and not batch:
            which = topic + (f"/{queue_id}" if queue_id is not None else "")
            raise NotFound(f"no consume queue {which}", path=ms.config.consumequeue_dir / topic)
        return [
            OffsetAtTime(**r.to_dict())
            for r in offset_query.search_queues(ms, queues, batch, when, broker_version, boundary, scan)
        ]

    def consumer_progress(self, group: str | None = None, topic: str | None = None) -> list[ConsumerProgress]:
        """Every committed consumer offset (of ``group``, of ``topic``) against its queue's min
        and max offsets, as ``consumer-progress`` lists them: from ``config/consumerOffset.json``
        (or its ``.bak``, or 5.x's RocksDB managers), ``lmqConsumerOffset.json`` and
        ``delayOffset.json``, read as the broker's ``ConfigManager#load`` reads them. Keys
        that are not ``topic@group`` are skipped (said in :attr:`warnings`). Raises
        :class:`~rmqstore_cli.errors.NotFound` when the store holds no offset at all."""
        from rmqstore_cli.store import progress

        config_dir = self.path / "config"
        sources = progress.load_sources(config_dir)
        self.engine.warnings.extend(w for loaded in sources for w in loaded.warnings)
        progress.require_offsets(config_dir, sources)
        rows = []
        for d, bad_key in progress.progress_rows(self.engine, sources, group, topic):
            if d is None:
                self.engine.warnings.append(f"offset key {bad_key!r} is not TOPIC@GROUP; skipped")
            else:
                rows.append(ConsumerProgress(**d))
        return rows

    def transactions(
        self,
        *,
        topic: str | None = None,
        group: str | None = None,
        state: str | list[str] | None = None,
        now: TimeLike | None = None,
        limit: int | None = None,
    ) -> TransactionReport:
        """What happened to the store's transactional messages, from the files alone (what
        ``mqadmin`` answers only from a live broker): per producer group and real topic, the
        transactions committed, rolled back, still pending (their age at ``now``, default
        now, and check count) and those the broker's next check gives up
        (``TransactionalMessageServiceImpl#needDiscard``: ``transactionCheckMax`` from the
        broker config, default 15; ``#needSkip``: ``fileReservedTime``). ``topic`` is the
        real topic, ``group`` the producer group; ``state`` (committed, rolled-back,
        pending, discard, or a list) and ``limit`` choose the transactions kept, not the
        counts. One walk of the commit log (store/transactions.py); op records the broker
        would skip in part are noted in :attr:`warnings`."""
        from rmqstore_cli.store import transactions as tx
        from rmqstore_cli.times import now_ms

        states = (state,) if isinstance(state, str) else None if state is None else tuple(state)
        for s in states or ():
            if s not in tx.STATES:
                raise UsageError(f"state {s!r}: not {', '.join(tx.STATES)}")
        if limit is not None and limit < 0:
            raise UsageError(f"limit {limit}: not a count")
        at = to_ms(now, "now", self.tz)
        cfg = self.engine.config
        rules = tx.Rules(now_ms() if at is None else at, cfg.transaction_check_max, cfg.file_reserved_time)
        got = tx.answer(self.engine.commitlog, rules, topic, group, states, limit)
        self.engine.warnings.extend(got.warnings)
        return TransactionReport(
            [Transaction(**r) for r in got.rows],
            [TransactionGroup(**g) for g in got.groups],
            {"store": str(self.path), **got.summary, "groups": len(got.groups)},
        )

    def traces(
        self,
        topic: str | None = None,
        msg_id: str | None = None,
        key: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
    ) -> list[TraceRecord]:
        """What message trace says happened: the trace records (sends, consumes before and
        after, transaction ends; ``TraceDataEncoder#decoderFromTraceDataString``) of the trace
        topics' messages (``topic``, else ``RMQ_SYS_TRACE_TOPIC`` and the broker's
        ``msgTraceTopicName``) stored in ``[begin, end]``, only those about ``msg_id`` and
        ``key`` when given, in the time order each record gives (store/trace.py). ``msg_id``
        is the client's msgId (UNIQ_KEY, any case): only the trace messages KEYed by it are
        read, as the client keys them (``TraceDataEncoder#encoderFromContextBean``); an
        offset msgId, which no trace message is keyed by, is found in its Pub record by a
        walk of every trace message, then answered as the msgId that Pub names."""
        from rmqstore_cli.api.trace_records import TraceRecord
        from rmqstore_cli.store import trace

        topics = trace.trace_topics(self.engine.config, topic)
        one = next(iter(topics)) if len(topics) == 1 else None

        def rows(narrow: str | None, about: str | None) -> list[dict[str, Any]]:
            flt = self.filter(one, begin, end, key=narrow)
            return list(trace.trace_rows(trace.messages_of(self._walk(flt, None, None, False)), topics, about, key))

        mid = None if msg_id is None else msg_id.upper()  # createUniqID: upper-case hex
        got = rows(mid if mid is not None else key, mid)
        if mid is not None and not got:  # an offset msgId: no trace message is KEYed by it, its Pub names it
            pubs = {r["msg_id"] for r in rows(key, mid) if r["offset_msg_id"] == mid}
            got = [r for p in pubs for r in rows(p, p)]
        return [TraceRecord(**r) for r in trace.time_order(got)]

    def epochs(self, *, messages: bool = False) -> EpochReport | None:
        """The 5.x controller-mode epoch file (``epochFileCheckpoint``, or its ``.bak`` where
        the broker would read that: ``CheckpointFile#read``) against the commit log: each
        epoch's [start, end) (the last ending at the log's end), and what is wrong with the
        file (docs/format/ha.md#epoch-file); ``messages`` counts each epoch's records (one
        walk of the log). None when the store has no epoch file (not controller mode).
        ``verify`` also holds it against where the next start's recovery cuts the log."""
        from rmqstore_cli.api.epoch_records import Epoch, EpochFinding, EpochReport
        from rmqstore_cli.store.epoch_check import check_epoch_file, tally_log
        from rmqstore_cli.store.epoch_file import epoch_spans, read_epoch_file

        ef = read_epoch_file(self.path)
        if not (ef.main.exists or ef.backup.exists):
            return None
        cl = self.engine.commitlog
        lo, end = cl.min_offset, cl.max_offset()
        got = check_epoch_file(ef, lo, end)
        spans = epoch_spans(ef.entries, end)
        rows = tally_log(cl, spans).rows() if messages else [dict(s, messages=None) for s in got.summary["epochs"]]
        return EpochReport(
            got.summary["file"],
            [Epoch(**r) for r in rows],
            [EpochFinding(i.check, i.file, i.line, i.detail) for i in got.issues],
            lo,
            end,
        )

    # ------------------------------------------------------------------ jobs
    def pop(
        self,
        *,
        topic: str | None = None,
        group: str | None = None,
        state: str | list[str] | None = None,
        now: TimeLike | None = None,
        limit: int | None = None,
    ) -> PopReport:
        """What became of the messages POP consumers popped, from the files alone: per group
        and topic, those acked, revived into the retry topic, still invisible (revived at pop
        time + invisible time, after ``now``, default now) or overdue (due, not revived);
        and each revive queue's progress (the revive group's offset in
        ``config/consumerOffset.json`` against the queue's end). From the checkpoints, acks
        and batch acks in ``rmq_sys_REVIVE_LOG_<cluster>`` (and those still in the timer
        topic), ``PopReviveService#consumeReviveMessage``'s merge. ``topic`` and ``group``
        filter; ``state`` (acked, revived, invisible, overdue, or a list) and ``limit``
        choose the messages kept, not the counts. Bodies the broker could not read are
        noted in :attr:`warnings`."""
        from rmqstore_cli.store import pop as engine, progress
        from rmqstore_cli.times import now_ms

        states = (state,) if isinstance(state, str) else None if state is None else tuple(state)
        for s in states or ():
            if s not in engine.STATES:
                raise UsageError(f"state {s!r}: not {', '.join(engine.STATES)}")
        if limit is not None and limit < 0:
            raise UsageError(f"limit {limit}: not a count")
        at = to_ms(now, "now", self.tz)
        sources = progress.load_sources(self.path / "config")
        self.engine.warnings.extend(w for loaded in sources for w in loaded.warnings)
        rules = engine.Rules(now_ms() if at is None else at, engine.revive_offsets([t.table for t in sources]))
        got = engine.answer(self.engine, rules, topic, group, states, limit)
        self.engine.warnings.extend(got.warnings)
        return PopReport(
            [PopMessage(**r) for r in got.rows],
            [PopGroup(**g) for g in got.groups],
            [ReviveQueue(**q) for q in got.queues],
            {"store": str(self.path), **got.summary, "groups": len(got.groups)},
        )

    def stats(
        self,
        by: str = "topic",
        *,
        topic: str | None = None,
        exact: bool = False,
        top: int | None = None,
        sample: int | None = None,
        max_bytes: int | None = None,
    ) -> StatsReport:
        """What is eating the disk, as ``stats`` counts it: messages and bytes per topic,
        per queue (``by="queue"``) or per file (``by="file"``), biggest first (the ``top``
        biggest), and the store root's components. The counts come from the consume queues,
        or with ``exact`` from the whole commit log (also the records no consume queue
        holds). ``sample`` (every Nth record) and ``max_bytes`` (the first N bytes of each
        commit-log file) walk part of the commit log instead: the rows' and the summary's
        counts are then estimates, scaled (the summary's ``sampling`` and ``sampled_messages``
        say what was read). Raises :class:`~rmqstore_cli.errors.NotFound` when ``topic`` has no queue.
        ``by="minute"`` or ``"hour"``: traffic over time instead, :class:`StatsInterval`
        records oldest first (the ``top`` latest), counted from the commit log by store
        timestamp, the empty intervals between the first and the last as zero records (every
        record counts: not with ``sample`` or ``max_bytes``)."""
        from rmqstore_cli.errors import NotFound
        from rmqstore_cli.store import stats_report, stats_series
        from rmqstore_cli.store.sampling import Narrowing

        if by not in stats_report.BY and by not in stats_series.INTERVALS:
            raise UsageError(f"by={by!r}: not topic, queue, file, minute or hour")
        ms = self.engine
        stats_report.require_commitlog(ms.config)
        for name, v in (("sample", sample), ("max_bytes", max_bytes)):
            if v is not None and v < 1:
                raise UsageError(f"{name} {v}: not a positive count")
        if by in stats_series.INTERVALS:
            if sample is not None or max_bytes is not None:
                raise UsageError(f"by={by!r} counts every record: not with sample or max_bytes")
            return self._traffic(by, topic, top)
        rep = stats_report.stats_report(ms, by, topic, exact, top, Narrowing(sample, max_bytes))
        if rep.topic_missing:
            raise NotFound(f"topic {topic!r} has no consume queue", path=ms.config.consumequeue_dir / str(topic))
        rows: list[StatsRow | StatsFile] = [StatsFile(**d) if by == "file" else StatsRow.of(d) for d in rep.rows]
        return StatsReport(rows, rep.summary)

    def _traffic(self, by: str, topic: str | None, last: int | None) -> StatsReport:
        """``stats(by="minute"|"hour")``: the intervals of store time, oldest first (the
        ``last`` latest), the empty ones between the first and the last as zero records."""
        from rmqstore_cli.errors import NotFound
        from rmqstore_cli.store import stats_series

        rep = stats_series.traffic_report(self.engine, by, topic, last)
        if rep.topic_missing:
            raise NotFound(f"topic {topic!r} has no record in the commit log", path=self.config.root)
        return StatsReport([StatsInterval(**d) for d in rep.rows], rep.summary)

    # ------------------------------------------------------------------ the 5.x timer
    def _timer(self) -> tuple[Any, Any]:
        """(the timer store, its loaded view); NotFound for a store without timer files."""
        from rmqstore_cli.store import timer_report
        from rmqstore_cli.store.timer import schedule

        ts = timer_report.open_timer(self.config)
        if not self.config.timer_wheel_path.exists() and timer_report.NO_WHEEL not in self.engine.warnings:
            self.engine.warnings.append(timer_report.NO_WHEEL)
        return ts, schedule.load(ts)

    def timer_slots(self, begin: TimeLike | None = None, end: TimeLike | None = None) -> list[TimerSlot]:
        """The timer wheel's non-empty slots by due time in ``[begin, end]``, as ``dump-timer``
        lists them (``begin == end``: the one slot ``TimerWheel#getSlot`` reads for that time).
        Raises :class:`~rmqstore_cli.errors.NotFound` for a store without timer files."""
        from rmqstore_cli.store import timer_report
        from rmqstore_cli.store.timer import schedule

        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        if b is not None and b == e:
            return [TimerSlot(**d) for d in timer_report.one_slot(timer_report.open_timer(self.config), b)]
        _ts, view = self._timer()
        return [TimerSlot(**d) for d in schedule.slot_records(view, b, e)]

    def timer_units(
        self, begin: TimeLike | None = None, end: TimeLike | None = None, *, topic: str | None = None
    ) -> Iterator[TimerUnit]:
        """The timer log's units in log order (due time in ``[begin, end]``, real topic
        ``topic``) with the message each points at, as ``dump-timer --units`` lists them."""
        from rmqstore_cli.store.timer import schedule

        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        _ts, view = self._timer()
        for d in schedule.unit_records(view, self.engine.commitlog, b, e, topic):
            yield TimerUnit(**d)

    def timer_next(self, limit: int, *, now: TimeLike | None = None, topic: str | None = None) -> list[TimerNext]:
        """What the broker does next with the timer after it starts at ``now`` (default now),
        up to ``limit`` messages (of real topic ``topic``), as ``dump-timer --next``: its
        ``TimerMessageStore#recover``, then ``#enqueue`` and ``#dequeue``. The recovery's
        notes go to :attr:`warnings`."""
        from rmqstore_cli.store import timer_report
        from rmqstore_cli.times import now_ms

        if limit < 1:
            raise UsageError(f"limit {limit}: at least one")
        at = to_ms(now, "now", self.tz)
        _ts, view = self._timer()
        rows, notes = timer_report.next_rows(view, self.engine, limit, now_ms() if at is None else at, topic)
        out = [TimerNext(**d) for d in rows]
        self.engine.warnings.extend(notes)
        return out

    def timer_summary(self, *, now: TimeLike | None = None) -> TimerSummary:
        """The checkpoint, the wheel, the timer-log files and the broker's recovery at ``now``
        (default now), as ``dump-timer --summary``."""
        from rmqstore_cli.store import timer_report
        from rmqstore_cli.times import now_ms

        at = to_ms(now, "now", self.tz)
        ts, view = self._timer()
        return TimerSummary(**timer_report.summary(ts, view, self.engine, now_ms() if at is None else at))

    def overdue(self, *, now: TimeLike | None = None, topic: str | None = None) -> OverdueReport:
        """Delayed messages past their delivery time at ``now`` (default now) and not
        delivered, as ``dump-timer --overdue``: the 5.x timer wheel's (judged against
        config/timercheck) and the delay levels' (against config/delayOffset.json), of real
        topic ``topic`` when given; a store without either has none (store/overdue.py
        defines each state). The notes also go to :attr:`warnings`."""
        from rmqstore_cli.store import overdue
        from rmqstore_cli.times import now_ms

        at = to_ms(now, "now", self.tz)
        s = overdue.scan(self.engine, now_ms() if at is None else at)
        rows = list(overdue.rows_of(s, topic))
        self.engine.warnings.extend(n for n in s.notes if n not in self.engine.warnings)
        return OverdueReport(
            s.now_ms,
            [OverdueMessage(**r) for r in rows],
            [DelayLevel(**lv.as_dict()) for lv in s.levels],
            [OverdueTopic(**g) for g in overdue.topic_summary(rows, s.now_ms)],
            s.timer.as_dict() if s.timer is not None else None,
            s.delay_offsets_file,
            list(s.notes),
        )

    # ------------------------------------------------------------------ mutating jobs
    def _reopen(self) -> None:
        """Forget every mapping after files were deleted or replaced: the next read maps the
        store as it is now."""
        self._store.close()
        self._store = MessageStore.open(self.opener.config(), self.tz, infer_sizes=False)
        self._sized = False

    def expire(
        self,
        reserved_hours: float | None = None,
        *,
        dry_run: bool = True,
        now: TimeLike | None = None,
        disk_ratio: float | None = None,
        max_files: int | None = None,
        pause_ms: int = 0,
        force: bool = False,
    ) -> ExpireReport:
        """The broker's file expiry run once, as ``rmqstore expire``: commit-log files last
        modified ``reserved_hours`` ago or more (default: the broker config's
        ``fileReservedTime``, else 72), oldest first, never the newest (or, past
        ``disk_ratio`` of the partition, the oldest whatever their age), then the
        consume-queue and index files that only point below the commit log's new minimum.

        A dry run (the default here) only reads and lists what would go. Otherwise the
        broker's lock is held while files are deleted, and a live broker holding it is
        refused (:class:`~rmqstore_cli.errors.RefusedError`) unless ``force``; each deletion
        is appended to ``rmqstore-expire.jsonl`` in the store root as it happens. A run that
        had to leave files alone returns with ``completed`` False and the ``problems``."""
        from rmqstore_cli.store import expire_run
        from rmqstore_cli.times import now_ms

        if disk_ratio is not None and not 0 < disk_ratio <= 1:
            raise UsageError(f"disk_ratio {disk_ratio:g} is not a share of the disk", hint="give a fraction: 0.85")
        if reserved_hours is not None and reserved_hours < 0:
            raise UsageError(f"reserved_hours {reserved_hours:g} is negative")
        if max_files is not None and max_files < 1:
            raise UsageError(f"max_files {max_files}: at least one")
        at = to_ms(now, "now", self.tz)
        cfg = self.opener.config()
        hours = reserved_hours if reserved_hours is not None else float(cfg.file_reserved_time)
        expire_run.check_lock(cfg, dry_run, force, refuse_hint="stop the broker or work on a snapshot")
        self.engine.warnings.extend(expire_run.check_files(cfg, self.tz))
        try:
            run = expire_run.run(cfg, now_ms() if at is None else at, hours, disk_ratio, max_files, pause_ms, dry_run)
        finally:
            if not dry_run:
                self._reopen()
        summary = expire_run.summary(run, cfg)
        lost = expire_run.record(run.journal, summary)
        if lost is not None:
            self.engine.warnings.append(f"this run's deletions are not recorded: {lost}")
        self.engine.warnings.extend(run.plan.notes)
        return ExpireReport([ExpireAction.of(a.as_dict()) for a in run.deleted], summary)

    def rebuild_index(
        self,
        output: str | os.PathLike[str] | None = None,
        *,
        dry_run: bool = False,
        only: str | None = None,
        topics: list[str] | None = None,
        copy_commitlog: bool = False,
        no_backup: bool = False,
    ) -> RebuildReport:
        """Regenerate consume queues and index files from the commit log, as the broker's
        dispatch builds them (``rebuild-index``): to ``output`` (a directory outside the store,
        which is only read; its commit log linked, or copied with ``copy_commitlog``), or with
        ``output`` None in place (the old sets kept in ``rmqstore-backup/`` unless
        ``no_backup``; a live broker refused, and the broker's lock held for the swap).
        ``only`` "cq" or "index" rebuilds one set; ``topics`` only those topics' queues.
        ``dry_run`` scans and reports what would be written. Index files are named by their
        first entry's store time in the store's ``tz``."""
        from rmqstore_cli.errors import UsageError as _Usage
        from rmqstore_cli.store import rebuild_plan
        from rmqstore_cli.store.consume_queue import unsafe_topic
        from rmqstore_cli.store.lock import refuse_if_live

        if only is not None and only not in rebuild_plan.ONLY:
            raise _Usage(f"only={only!r}: not cq or index")
        if topics and only == "index":
            raise _Usage("topics select consume queues; they do not go with only='index'")
        if output is not None and no_backup:
            raise _Usage("no_backup goes with an in-place rebuild")
        if output is None and copy_commitlog:
            raise _Usage("copy_commitlog goes with an output directory")
        for t in topics or ():
            if unsafe_topic(t):
                raise _Usage(f"topic {t!r} cannot be a consume-queue directory: {unsafe_topic(t)}")
        if output is None:
            refuse_if_live(self.path)
        cfg = self.opener.config()
        rebuild_plan.refuse_index_disabled(cfg, only)
        opts = rebuild_plan.options(cfg, only, topics, self.tz, dry_run)
        sources = rebuild_plan.check_sizes(cfg, opts, self.opener.sizes, self.opener.broker_conf)
        picked = rebuild_plan.batch_topics_picked(cfg, opts)
        if picked:
            raise _Usage(
                f"{', '.join(picked)}: BatchCQ topics (batchconsumequeue/) are rebuilt only with all the queues"
            )
        out = None if output is None else Path(output)
        try:
            rep, plan = rebuild_plan.rebuild(cfg, out, opts, no_backup, copy_commitlog)
        finally:
            if output is None and not dry_run:
                self._reopen()
        return RebuildReport.of(rebuild_plan.summary(self.path, rep, dict(plan, sizes=sources), opts))

    def export(
        self,
        out_dir: str | os.PathLike[str],
        *,
        body: bool = False,
        compression: str = "snappy",
        overwrite: bool = False,
        store_name: str | None = None,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        queue_id: int | None = None,
        key: str | None = None,
        uniq_key: str | None = None,
        tag: str | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
    ) -> ExportReport:
        """Write the store's commit-log messages as a Parquet dataset in ``out_dir`` (the
        columns of :meth:`batches`, partitioned ``store=…/topic_dir=…``), as ``rmqstore
        export`` does on its local engine; ``body`` includes message bodies, ``compression``
        is snappy, zstd, lz4, gzip or none. ``store_name`` is the ``store`` column's value
        (default: the broker.conf's brokerName, else the store directory's name, the
        parent's for one named ``store``). Only the messages that pass the filters of
        :meth:`messages` (the same keywords) are written. A non-empty ``out_dir`` is refused
        unless ``overwrite``. The store is only read. Needs pyarrow (the ``export`` extra); a
        dataset that cannot be written is an :class:`~rmqstore_cli.errors.OutputError`."""
        import time

        from rmqstore_cli.pipeline import export_run
        from rmqstore_cli.pipeline.stores import StoreSpec, file_tasks

        export_run.require_parquet()
        flt = self.filter(topic, begin, end, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag)
        _check_range(from_offset, to_offset)
        if compression not in ("snappy", "zstd", "lz4", "gzip", "none"):
            raise UsageError(f"compression {compression!r}: not snappy, zstd, lz4, gzip or none")
        output = Path(out_dir)
        blocker = export_run.output_blocker(output)
        if blocker is not None:
            raise UsageError("a file is where the dataset's directory belongs", path=blocker)
        if output.exists() and any(output.iterdir()) and not overwrite:
            raise UsageError(f"output directory {output} is not empty", hint="overwrite=True replaces it")
        sizes = tuple(sorted((k, v) for k, v in self.opener.sizes.items() if v is not None))
        conf = None if self.opener.broker_conf is None else str(self.opener.broker_conf)
        spec = StoreSpec(str(self.path), str(self.path), conf, sizes)
        (spec,) = export_run.store_names([spec], None if store_name is None else [store_name])
        tasks = file_tasks([spec], body, flt, from_offset, to_offset)
        t0 = time.monotonic()
        export_run.make_output_dir(output)
        result = export_run.write_local(tasks, output, compression)
        s = export_run.summary(output, "local", 1, tasks, result, time.monotonic() - t0)
        return ExportReport(**s, unreadable=list(result["unreadable"]))

    # ------------------------------------------------------------------ checks
    def verify(
        self,
        *,
        crc: bool = True,
        deep: bool = False,
        max_findings: int | None = None,
        broker_version: str | None = None,
        jobs: int = 1,
    ) -> VerifyReport:
        """Check the commit log, consume queues, index, checkpoint, config files and the 5.x
        stores against each other, and predict whether the broker starts on the store
        (``broker_version``: "4.9", "5.3.1" or "5"; else the store's, else 4.9 assumed).
        ``max_findings`` caps the findings kept per check (all are counted in the summary).
        ``jobs``: run the checks on this many processes (0: every core this process may use),
        one task per commit-log file, then per queue and index file; the same summary and
        findings as one process."""
        from rmqstore_cli.pipeline.stores import StoreSpec
        from rmqstore_cli.pipeline.verify_job import verify_one
        from rmqstore_cli.store.verify import VerifyOptions

        opts = VerifyOptions(crc=crc, deep=deep, max_findings=max_findings, broker_version=broker_version)
        root = str(self.opener.config().root)
        conf = None if self.opener.broker_conf is None else str(self.opener.broker_conf)
        spec = StoreSpec(root, root, conf, tuple((k, v) for k, v in self.opener.sizes.items() if v is not None))
        # one store, not a fleet: the findings without ``store``, the summary naming the path
        got = verify_one(spec, opts, jobs=jobs)
        return VerifyReport([Finding.of(f) for f in got["findings"]], got["summary"], got["ok"])


def _check_range(start: int | None, stop: int | None) -> None:
    if start is not None and stop is not None and start > stop:
        raise UsageError(f"from_offset {start} lies after to_offset {stop}", hint="the range is [from, to)")
