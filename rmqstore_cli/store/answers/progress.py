"""Consumer progress: every committed offset the broker would load, against its queue's
bounds (``mqadmin consumerProgress``, offline), for ``consumer-progress`` and
``Store.consumer_progress``.

The offsets come from where the broker loads them (``ConsumerOffsetManager``,
``LmqConsumerOffsetManager``, the delay service's ``delayOffset.json`` and, on 5.x, the
RocksDB managers); ``store/layout/offsets.py`` reads each source, and each committed offset
is compared with its queue here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import NotFound
from rmqstore_cli.store.layout import offsets
from rmqstore_cli.store.layout.offsets import split_key
from rmqstore_cli.store.records.fields import fields_dict


def load_sources(config_dir: Path) -> list[offsets.OffsetTable]:
    """Every offset table the broker would load, in the order the rows are listed: RocksDB's
    (``config/consumerOffsets/``, ``config/rdb/``) when present, else ``consumerOffset.json``
    (optional beside RocksDB: the broker loads RocksDB first), then ``lmqConsumerOffset.json``
    and ``delayOffset.json``. Each carries its own warnings."""
    from rmqstore_cli.store.layout.rocksdb_config import consumer_offsets

    rocks = consumer_offsets(config_dir)
    return [
        offsets.load_consumer_offsets(config_dir, optional=bool(rocks)),
        *rocks,
        offsets.load_consumer_offsets(
            config_dir, offsets.LMQ_CONSUMER_OFFSET_FILE, offsets.decode_lmq_offset_table, optional=True
        ),
        offsets.load_consumer_offsets(config_dir, offsets.DELAY_OFFSET_FILE, offsets.decode_delay_table, optional=True),
    ]


def require_offsets(config_dir: Path, sources: list[offsets.OffsetTable]) -> None:
    """A store whose broker committed no offset (or whose offset files are absent) is a
    negative answer."""
    if not any(loaded.table for loaded in sources):
        raise NotFound(
            "no consumer offsets",
            path=config_dir / offsets.CONSUMER_OFFSET_FILE,
            hint="the broker has no committed offset (or the files are absent)",
        )


def source_name(path: Path | None) -> str | None:
    """Where a row's offset came from: the file's name, or a RocksDB config's directory with
    a slash (``consumerOffsets/``, ``rdb/``)."""
    if path is None:
        return None
    return path.name + "/" if path.is_dir() else path.name


def offset_rows(
    ms: Any, config_dir: Path, group: str | None, topic: str | None, warn: Callable[[str], None]
) -> list[ConsumerProgress]:
    """The rows of every offset file the broker loads (:func:`load_sources`), filtered; each
    file's warnings and each skipped key (the broker skips a key that is not TOPIC@GROUP
    too) handed to ``warn``; NotFound when the store holds no offset at all."""
    sources = load_sources(config_dir)
    for w in (w for loaded in sources for w in loaded.warnings):
        warn(w)
    require_offsets(config_dir, sources)
    rows = []
    for row, bad_key in progress_rows(ms, sources, group, topic):
        if row is None:
            warn(f"offset key {bad_key!r} is not TOPIC@GROUP; skipped")
        else:
            rows.append(row)
    return rows


def progress_rows(
    ms: Any, sources: list[offsets.OffsetTable], group: str | None = None, topic: str | None = None
) -> Iterator[tuple[ConsumerProgress | None, str | None]]:
    """(row, None) per group, topic and queue of every source (filtered), the row with its
    ``file`` (and ``delay_level`` for ``delayOffset.json``'s,
    ``ScheduleMessageService#queueId2DelayLevel``); (None, key) for a key that is not
    ``topic@group`` (the broker skips it)."""
    for loaded in sources:
        source = source_name(loaded.path)
        delay = source is not None and source.startswith(offsets.DELAY_OFFSET_FILE)
        yield from consumer_progress(ms, loaded.table, group, topic, source, delay)


def group_totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per consumer group (in the rows' order): its topics and queues, and its total lag, as
    ``ConsumeStats#computeTotalDiff`` sums the queues' lags once the broker has corrected
    an offset beyond its queue's max to the max (at the next pull: that queue counts 0, not a
    negative lag); a queue the store no longer has (``no-queue``: no lag) is counted apart
    in ``no_queue``, not in ``lag``."""
    out: dict[str, dict[str, Any]] = {}
    topics: dict[str, set[str]] = {}
    for r in rows:
        g = out.setdefault(r["group"], {"group": r["group"], "topics": 0, "queues": 0, "lag": 0, "no_queue": 0})
        topics.setdefault(r["group"], set()).add(r["topic"])
        g["queues"] += 1
        if r["lag"] is None:
            g["no_queue"] += 1
        else:
            g["lag"] += max(r["lag"], 0)
    for name, g in out.items():
        g["topics"] = len(topics[name])
    return list(out.values())


@dataclass(frozen=True, slots=True)
class ConsumerProgress:
    """One consumer group's committed offset in one queue against the queue's bounds
    (``mqadmin consumerProgress``, offline). ``lag`` is max_offset - consumer_offset
    (``ConsumeStats#computeTotalDiff``), None for a queue the store does not have; ``status``
    ok, behind-min, beyond-max or no-queue;
    ``file`` the offsets' source (``consumerOffset.json``, ``rdb/``, …); ``delay_level``
    for ``delayOffset.json``'s rows (queue id + 1). Its fields are the JSON keys
    ``consumer-progress`` prints (a record of the API too: ``rmqstore_cli.ConsumerProgress``)."""

    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    min_offset: int
    max_offset: int
    lag: int | None
    next_store_timestamp: int | None
    status: str
    file: str | None
    delay_level: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return fields_dict(self, "delay_level")


def consumer_progress(
    store,
    table: dict[str, dict[int, int]],
    group: str | None = None,
    topic: str | None = None,
    file: str | None = None,
    delay: bool = False,
) -> Iterator[tuple[ConsumerProgress | None, str | None]]:
    """Per ``topic@group`` key and queue of ``table`` (filtered): the consumer offset against the
    queue's min and max offsets (``ConsumeQueue#getMinOffsetInQueue``/``#getMaxOffsetInQueue``)
    and the store time of the next message to consume. An offset below min (the messages
    expired) or above max (the broker corrects it at the next pull) is flagged in ``status``.
    Yields (row, None), each row naming ``file`` (and, ``delay``: a ``delayOffset.json``
    row, its delay level), or (None, key) for a key that is not ``topic@group``."""
    queues = _QueueProgress(store, file, delay)
    for key in sorted(table):
        tg = split_key(key)
        if tg is None:
            yield None, key
            continue
        t, g = tg
        if _wanted(t, g, group, topic):
            for qid in sorted(table[key]):
                yield queues.progress(g, t, qid, table[key][qid]), None


def _wanted(t: str, g: str, group: str | None, topic: str | None) -> bool:
    """The key passes the ``group`` and ``topic`` filters (None: any)."""
    return (group is None or g == group) and (topic is None or t == topic)


class _QueueProgress:
    """The queues of the table, each opened once (its consume queue, else its BatchCQ queue),
    and the commit-log reader the next messages' store times come from (made on first need)."""

    def __init__(self, store, file: str | None, delay: bool):
        self.store = store
        self.file = file
        self.delay = delay
        self.reader = None
        self.queues: dict[tuple[str, int], tuple[object, int, int] | None] = {}

    def progress(self, g: str, t: str, qid: int, off: int) -> ConsumerProgress:
        """Consumer offset ``off`` of group ``g`` on queue ``t``/``qid`` against its bounds; the
        lag the broker's diff, max offset − consumer offset (``ConsumeStats#computeTotalDiff``),
        None when the store has no such queue (a max of 0 would make it minus the offset)."""
        if (t, qid) not in self.queues:
            self.queues[t, qid] = self._open(t, qid)
        level = qid + 1 if self.delay else None
        q = self.queues[t, qid]
        if q is None:
            return ConsumerProgress(g, t, qid, off, 0, 0, None, None, "no-queue", self.file, level)
        cq, lo, hi = q
        status = "behind-min" if off < lo else "beyond-max" if off > hi else "ok"
        ts = self._next_time(cq, off) if lo <= off < hi else None
        return ConsumerProgress(g, t, qid, off, lo, hi, hi - off, ts, status, self.file, level)

    def _open(self, t: str, qid: int) -> tuple[object, int, int] | None:
        """The queue and its min and max offsets; None when it has no file of either kind."""
        cq = self.store.consume_queue(t, qid) if qid >= 0 else None
        has_files = cq is not None and bool(cq.file_names())
        bq = None if has_files else _batch_queue(self.store, t, qid)
        if bq is not None:
            self._time_reader()
            return bq, bq.min_offset, bq.max_offset
        if not has_files:
            return None
        return cq, cq.min_offset(self._time_reader().min_offset), cq.max_offset

    def _time_reader(self):
        from rmqstore_cli.store.answers.search import TimeReader

        if self.reader is None:
            self.reader = TimeReader(self.store.commitlog)
        return self.reader

    def _next_time(self, cq, off: int) -> int | None:
        """The store time of the message at queue offset ``off`` (None: no unit or record there)."""
        from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue

        u = cq.find(off) if isinstance(cq, BatchConsumeQueue) else next(cq.units(off, off + 1), None)
        return None if u is None else self.reader.checked(u.commitlog_offset, u.size)[0]


def _batch_queue(store, topic: str, queue_id: int):
    """A BatchCQ queue's min and max are queue offsets of messages
    (``BatchConsumeQueue#getMinOffsetInQueue``/``#getMaxOffsetInQueue``); the next message
    is in the unit whose inner batch holds the offset (``#getBatchMsgIndexBuffer``)."""
    from rmqstore_cli.store.queues.batch_queue import batch_queue_of

    if queue_id < 0 or store.rocksdb_cq is not None:
        return None
    bq = batch_queue_of(store.config, topic, queue_id)
    return bq if bq is not None and bq.queue.files else None
