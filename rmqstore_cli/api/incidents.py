"""Store's incident answers (:class:`IncidentQueries`, a mixin Store inherits): what became
of the transactional and POP-consumed messages, what message trace says, the controller's
epochs, the file against the RocksDB consume queue, and what fills the disk (``stats``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmqstore_cli.api.base import StoreView, TimeLike, at_ms, chosen_states, positive_counts
from rmqstore_cli.api.incident_records import (
    PopGroup,
    PopMessage,
    PopReport,
    ReviveQueue,
    Transaction,
    TransactionGroup,
    TransactionReport,
)
from rmqstore_cli.api.records import QueueComparison, StatsFile, StatsInterval, StatsReport, StatsRow
from rmqstore_cli.errors import StoreError, UsageError
from rmqstore_cli.store.answers.keyed_rows import Wanted

JSON = dict[str, Any]

if TYPE_CHECKING:
    from rmqstore_cli.api.epoch_records import EpochReport
    from rmqstore_cli.api.trace_records import TraceRecord


class IncidentQueries(StoreView):
    """Store's answers for an incident (api/store.py binds each public one in Store's body)."""

    def compare_consume_queues(self, topic: str | None = None, queue_id: int | None = None) -> list[QueueComparison]:
        """A double-writing 5.x store (``rocksdbCQDoubleWriteEnable``; ``CombineConsumeQueueStore``
        from 5.3.2) keeps the file consume queue and the RocksDB one in the same
        ``consumequeue/`` directory: compare them unit by unit, per queue of either (or those
        of ``topic`` / ``queue_id``), sorted (store/checks/cq_compare.py). A store without both is a
        StoreError naming what is missing."""
        from rmqstore_cli.store.checks.cq_compare import compare_stores, has_file_queues

        cq_dir = self.engine.config.consumequeue_dir
        if self.engine.rocksdb_cq is None or not has_file_queues(cq_dir):
            what = "RocksDB database" if self.engine.rocksdb_cq is None else "<topic>/<queueId> directories"
            raise StoreError(f"not a double-writing store: consumequeue/ holds no {what}", path=cq_dir)
        return list(compare_stores(cq_dir, self.engine.config.cq_file_size, self.engine.rocksdb_cq, topic, queue_id))

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
        counts. One walk of the commit log (store/answers/transactions.py); op records the broker
        would skip in part are noted in :attr:`warnings`."""
        from rmqstore_cli.store.answers import transactions as tx

        states = chosen_states(state, tx.STATES, limit)
        at = at_ms(now, self.tz)
        cfg = self.engine.config
        rules = tx.Rules(at, cfg.transaction_check_max, cfg.file_reserved_time)
        got = tx.answer(self.engine.commitlog, rules, Wanted(topic, group, states, limit))
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
        ``key`` when given, in the time order each record gives (store/answers/trace.py). ``msg_id``
        is the client's msgId (UNIQ_KEY, any case): only the trace messages KEYed by it are
        read, as the client keys them (``TraceDataEncoder#encoderFromContextBean``); an
        offset msgId, which no trace message is keyed by, is found in its Pub record by a
        walk of every trace message, then answered as the msgId that Pub names."""
        from rmqstore_cli.api.trace_records import TraceRecord
        from rmqstore_cli.store.answers import trace

        topics = trace.trace_topics(self.engine.config, topic)
        one = next(iter(topics)) if len(topics) == 1 else None

        def rows(narrow: str | None, about: str | None) -> list[JSON]:
            flt = self.filter(one, begin, end, key=narrow)
            return list(trace.trace_rows(trace.messages_of(self._walk(flt, None, None, False)), topics, about, key))

        mid = None if msg_id is None else msg_id.upper()  # createUniqID: upper-case hex
        got = rows(mid if mid is not None else key, mid)
        if mid is not None and not got:
            got = rows_by_offset_msg_id(rows, key, mid)
        return [TraceRecord(**r) for r in trace.time_order(got)]

    def epochs(self, *, messages: bool = False) -> EpochReport | None:
        """The 5.x controller-mode epoch file (``epochFileCheckpoint``, or its ``.bak`` where
        the broker would read that: ``CheckpointFile#read``) against the commit log: each
        epoch's [start, end) (the last ending at the log's end), and what is wrong with the
        file (docs/format/ha.md#epoch-file); ``messages`` counts each epoch's records (one
        walk of the log). None when the store has no epoch file (not controller mode).
        ``verify`` also holds it against where the next start's recovery cuts the log."""
        from rmqstore_cli.api.epoch_records import Epoch, EpochFinding, EpochReport
        from rmqstore_cli.store.checks.epoch_check import check_epoch_file, tally_log
        from rmqstore_cli.store.layout.epoch_file import epoch_spans, read_epoch_file

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
        from rmqstore_cli.store.answers import pop as engine, progress

        states = chosen_states(state, engine.STATES, limit)
        at = at_ms(now, self.tz)
        sources = progress.load_sources(self.path / "config")
        self.engine.warnings.extend(w for loaded in sources for w in loaded.warnings)
        rules = engine.Rules(at, engine.revive_offsets([t.table for t in sources]))
        got = engine.answer(self.engine, rules, Wanted(topic, group, states, limit))
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
        from rmqstore_cli.store.answers import stats_report, stats_series
        from rmqstore_cli.store.answers.sampling import Narrowing

        if by not in stats_report.BY and by not in stats_series.INTERVALS:
            raise UsageError(f"by={by!r}: not topic, queue, file, minute or hour")
        ms = self.engine
        stats_report.require_commitlog(ms.config)
        positive_counts(sample=sample, max_bytes=max_bytes)
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
        from rmqstore_cli.store.answers import stats_series

        rep = stats_series.traffic_report(self.engine, by, topic, last)
        if rep.topic_missing:
            raise NotFound(f"topic {topic!r} has no record in the commit log", path=self.config.root)
        return StatsReport([StatsInterval(**d) for d in rep.rows], rep.summary)


def rows_by_offset_msg_id(
    rows: Callable[[str | None, str | None], list[JSON]], key: str | None, mid: str
) -> list[JSON]:
    """The trace rows of an offset msgId ``mid``: no trace message is KEYed by it, so the Pub
    records naming it give the client's msgId, whose rows are the answer. ``rows(narrow,
    about)`` reads the trace messages KEYed by ``narrow`` (all: None), rows about ``about``."""
    pubs = {r["msg_id"] for r in rows(key, mid) if r["offset_msg_id"] == mid}
    return [r for p in pubs for r in rows(p, p)]
