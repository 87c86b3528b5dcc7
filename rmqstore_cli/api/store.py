"""``open_store`` and :class:`Store`: one broker store directory, for a script.

The command line is a thin layer over these calls (DESIGN.md, layer 4): what ``rmqstore
dump-commitlog --topic T --begin B`` prints is ``Store.messages(topic=T, begin=B)``, each
message's ``as_dict()``. A store opens read-only: nothing here changes a byte of it.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqstore_cli.api.base import TimeLike, at_ms, check_range, positive_counts, to_ms
from rmqstore_cli.api.incidents import IncidentQueries
from rmqstore_cli.api.jobs import StoreJobs
from rmqstore_cli.api.records import (
    ConsumerProgress,
    IndexHit,
    Message,
    MessageId,
    OffsetAtTime,
    QueueInfo,
    QueueUnit,
)
from rmqstore_cli.api.timers import TimerQueries
from rmqstore_cli.errors import UsageError
from rmqstore_cli.store.message_store import MessageStore
from rmqstore_cli.store.records.filters import MessageFilter
from rmqstore_cli.times import LONG_MAX, check_window, parse_tz

if TYPE_CHECKING:
    from rmqstore_cli.store.layout.config import StoreConfig


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
        from rmqstore_cli.store.layout.config import StoreConfig

        cfg = StoreConfig.load(self.path, self.broker_conf, **self.sizes)
        cfg.allow_odd_size = self.allow_odd_size
        return cfg


class Store(IncidentQueries, TimerQueries, StoreJobs):
    """One store directory, opened read-only (:func:`open_store`).

    Every reader follows the broker's rules: messages are the records the broker's recovery
    would keep (``CommitLog#checkMessageAndReturnSize``), queues end where
    ``ConsumeQueue#recover`` ends them, and key look-ups check each hit's real key, as the
    client's ``queryMessage`` filter does."""

    # The mixins' answers are bound here again by name, so that they are Store's own
    # members (``vars(Store)``): documented in full in the API reference and by ``help``.

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
        at a big store (store/answers/sampling.py).
        The same messages, in the same order, as ``rmqstore dump-commitlog`` (with
        ``--sample``, ``--max-bytes``)."""
        flt = self.filter(topic, begin, end, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag)
        check_range(from_offset, to_offset)
        positive_counts(sample=sample, max_bytes=max_bytes)
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
        check_range(from_offset, to_offset)
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
        from rmqstore_cli.store.answers.log_range import Range
        from rmqstore_cli.store.answers.sampling import Narrowing, narrowed

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
        from rmqstore_cli.store.answers.lookup import read_record

        rec, _why = read_record(self.engine.commitlog, offset)
        if rec is not None and check_crc:
            rec = self.engine.commitlog.get(offset, check_crc=True)
        return None if rec is None else Message.of(rec, self._file_name(rec.offset))

    # ------------------------------------------------------------------ consume queues
    def queues(self) -> list[QueueInfo]:
        """Every consume queue (file or RocksDB; and 5.x batch queues), sorted by topic and
        queue id, with its logical bounds (``#getMinOffsetInQueue``, ``#getMaxOffsetInQueue``)."""
        from rmqstore_cli.store.queues.batch_queue import store_batch_queues

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

    compare_consume_queues = IncidentQueries.compare_consume_queues

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
        b, e = to_ms(begin, "begin", self.tz), to_ms(end, "end", self.tz)
        check_window(b, e, self.tz)
        window = (b or 0, LONG_MAX if e is None else e)
        topics = [topic] if topic is not None else (self.topics() or self.engine.topics_from_commitlog())
        hits = query_index(self.engine, topics, key, window, max_hits, broker_window)
        if not hits and lower_uniq_key(key):
            hits = query_index(self.engine, topics, key.upper(), window, max_hits, broker_window)
        return [self._index_hit(h) for h in hits]

    def _index_hit(self, h: Any) -> IndexHit:
        m = h.message
        msg = None if m is None else Message.of(m, self._file_name(m.offset))
        return IndexHit(h.key, h.topic, h.physical_offset, h.store_timestamp, h.index_file, h.match, msg)

    def message_by_id(self, msg_id: str, *, now: TimeLike | None = None) -> MessageId:
        """Read ``msg_id`` both ways, as ``decode-msgid --store`` does: as an offset msgId (the
        record at its physical offset, whose own offset field must agree) and as a UNIQ_KEY
        (through the index of every topic). What the store holds decides ``kind``.
        ``now`` dates a UNIQ_KEY's ``nearly_time`` (it holds only the time within its month).
        Raises :class:`~rmqstore_cli.errors.UsageError` for what is no message id."""
        from rmqstore_cli.store.answers.msgid import BadId, describe_id, parse_id, resolve_in_store

        try:
            r = parse_id(msg_id)
        except BadId as e:
            raise UsageError(f"{msg_id!r} is not a message id: {e}") from None
        ms = self.engine
        resolve_in_store(r, ms, self.topics() or ms.topics_from_commitlog())
        at = at_ms(now, self.tz)
        d = describe_id(r, at, self.tz)
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
        from rmqstore_cli.store.answers import offset_query

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
        from rmqstore_cli.store.answers import progress

        return progress.offset_rows(self.engine, self.path / "config", group, topic, self.engine.warnings.append)

    # ------------------------------------------------------------------ incidents (api/incidents.py)
    transactions = IncidentQueries.transactions
    traces = IncidentQueries.traces
    epochs = IncidentQueries.epochs
    pop = IncidentQueries.pop
    stats = IncidentQueries.stats

    # ------------------------------------------------------------------ the 5.x timer (api/timers.py)
    timer_slots = TimerQueries.timer_slots
    timer_units = TimerQueries.timer_units
    timer_next = TimerQueries.timer_next
    timer_summary = TimerQueries.timer_summary
    overdue = TimerQueries.overdue

    # ------------------------------------------------------------------ mutating jobs
    def _reopen(self) -> None:
        """Forget every mapping after files were deleted or replaced: the next read maps the
        store as it is now."""
        self._store.close()
        self._store = MessageStore.open(self.opener.config(), self.tz, infer_sizes=False)
        self._sized = False

    # ------------------------------------------------------------------ jobs and checks (api/jobs.py)
    expire = StoreJobs.expire
    rebuild_index = StoreJobs.rebuild_index
    export = StoreJobs.export
    verify = StoreJobs.verify


def query_index(
    ms: MessageStore, topics: list[str], key: str, window: tuple[int, int], max_hits: int, broker_window: bool
) -> list[Any]:
    """The index's hits for ``key`` in ``window`` (store/answers/lookup.py); with ``broker_window``
    what ``DefaultMessageStore#queryMessage`` returns, kept by the client's key filter."""
    from rmqstore_cli.store.answers.lookup import INT_MAX, broker_query_message, lookup_key

    b, e = window
    if not broker_window:
        return lookup_key(ms.index, ms.commitlog, topics, key, b, e, max_hits).hits
    cap = max_hits or INT_MAX
    return [h for t in topics for h in broker_query_message(ms.index, ms.commitlog, t, key, cap, b, e) if h.true]


def lower_uniq_key(key: str) -> bool:
    """A UNIQ_KEY (32 or 56 hex digits) given in lower case: the index holds it upper-case."""
    return key != key.upper() and len(key) in (32, 56) and all(c in "0123456789abcdef" for c in key)
