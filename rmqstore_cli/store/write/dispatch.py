"""The reput path: commit-log records -> consume-queue units and index keys.

``DefaultMessageStore.ReputMessageService#doReput`` hands each valid record to
``CommitLogDispatcherBuildConsumeQueue`` and ``CommitLogDispatcherBuildIndex``; this
module decides exactly what each of them writes (docs/format/consume-queue.md#tags-code,
docs/format/consume-queue.md#which-records-get-a-unit, docs/format/index.md#which-keys).
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.consume_queue import ConsumeQueueWriter, unsafe_topic
from rmqstore_cli.store.queues.index import build_key
from rmqstore_cli.store.queues.index_service import IndexService
from rmqstore_cli.store.records.kinds import delay_level, deliver_timestamp, parse_java_int
from rmqstore_cli.store.records.message import (
    PROPERTY_DELAY,
    PROPERTY_TAGS,
    SCHEDULE_TOPIC,
    Message,
    java_hash,
)
from rmqstore_cli.store.write.batch_dispatch import batch_dispatch
from rmqstore_cli.store.write.lmq import MULTI_DISPATCH, MULTI_QUEUE_OFFSET, FanOut, broker5_store, fan_out

_SCHEDULE = SCHEDULE_TOPIC.encode()


_short_tags_hash = functools.lru_cache(maxsize=4096)(java_hash)


def _tags_hash(tags: str) -> int:
    """``String#hashCode`` of TAGS: short ones repeat record after record, so each is
    hashed once (the cache bounded in count and size: a hostile store's long tags are not kept)."""
    return _short_tags_hash(tags) if len(tags) <= 64 else java_hash(tags)


class InvalidForDispatch(ValueError):
    """The broker's check throws for this record (e.g. a non-integer DELAY), so it is invalid."""


def parse_delay(delay: str) -> int:
    """The DELAY property as ``Integer#parseInt`` reads it in ``CommitLog#checkMessageAndReturnSize``;
    anything else throws there, which makes the record invalid for dispatch."""
    level = parse_java_int(delay)
    if level is None:
        raise InvalidForDispatch(f"DELAY {delay!r} is not an int")
    return level


@dataclass(slots=True)
class DispatchRequest:
    """``DispatchRequest``: what the dispatchers need of one record."""

    topic: str
    queue_id: int
    commitlog_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: list[str]
    uniq_key: str | None
    sys_flag: int
    #: The multi-dispatch units (``store/write/lmq.py``), None when there are none.
    multi: FanOut | None = None

    @property
    def to_consume_queue(self) -> bool:
        """``CommitLogDispatcherBuildConsumeQueue``: NOT and COMMIT records only."""
        return self.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)

    @property
    def index_keys(self) -> list[str]:
        """``IndexService#buildIndex``: ``topic#UNIQ_KEY`` then ``topic#k`` per KEYS entry,
        none for ROLLBACK records."""
        if self.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
            return []
        out = [build_key(self.topic, self.uniq_key)] if self.uniq_key else []
        out.extend(build_key(self.topic, k) for k in self.keys)
        return out


def compute_tags_code(msg: Message, delay_table: dict[int, int]) -> int:
    """``CommitLog#checkMessageAndReturnSize``'s tagsCode: TAGS hashCode (sign-extended),
    or, on the schedule topic with a DELAY, the delivery time."""
    props = msg.properties
    tags = props.get(PROPERTY_TAGS)
    code = _tags_hash(tags) if tags else 0
    if msg.topic_bytes == _SCHEDULE:
        delay = props.get(PROPERTY_DELAY)
        if delay is not None:
            parse_delay(delay)
            level = delay_level(delay, delay_table)
            if level:
                code = deliver_timestamp(level, msg.store_timestamp, delay_table)
    return code


def dispatch_request(
    msg: Message, delay_table: dict[int, int], config: StoreConfig | None = None, broker5: bool = False
) -> DispatchRequest:
    """``CommitLog#checkMessageAndReturnSize``'s request; with a ``config`` enabling
    multi-dispatch, its fan-out too (``DefaultMessageStore#checkMultiDispatchQueue``)."""
    multi = None
    if config is not None and config.enable_multi_dispatch:
        props = msg.properties
        multi = fan_out(
            msg.topic,
            msg.queue_id,
            props.get(MULTI_DISPATCH),
            props.get(MULTI_QUEUE_OFFSET),
            enable_lmq=config.enable_lmq,
            broker5=broker5,
        )
    return DispatchRequest(
        msg.topic,
        msg.queue_id,
        msg.physical_offset,
        msg.total_size,
        compute_tags_code(msg, delay_table),
        msg.store_timestamp,
        msg.queue_offset,
        msg.keys,
        msg.uniq_key,
        msg.sys_flag,
        multi,
    )


class QueueTopics:
    """``name in topics``: the topic is selected and can be a ``consumequeue/`` directory
    (:func:`~rmqstore_cli.store.queues.consume_queue.unsafe_topic`); refused names are recorded."""

    def __init__(self, selected: Iterable[str] | None):
        self.selected = set(selected) if selected is not None else None
        self.refused: dict[str, str] = {}  # topic -> why

    def __contains__(self, topic: str) -> bool:
        why = unsafe_topic(topic)
        if why is not None:
            self.refused[topic] = why
            return False
        return self.selected is None or topic in self.selected


class Dispatcher:
    """Builds consume queues and index files from dispatch requests, in physical order.

    ``cq_root``/``index_dir`` may differ from the store's own (rebuild beside it).
    ``topics`` limits which queues are built; ``build_cq``/``build_index`` pick the halves.
    """

    def __init__(
        self,
        config: StoreConfig,
        cq_root: Path,
        index_dir: Path,
        tz: _dt.tzinfo | None = None,
        build_cq: bool = True,
        build_index: bool = True,
        topics: Iterable[str] | None = None,
        roots: list[Path] | None = None,
    ):
        self.config = config
        self.cq_root = cq_root
        #: Where queues and index files may be written (``StoreConfig.write_roots`` for a
        #: store's own; None: the directories holding ``cq_root`` and ``index_dir``).
        self.roots = roots
        #: Whether each consume-queue root lies inside the roots, resolved once for all its
        #: writers (``ConsumeQueueWriter(checked=...)``): a new queue's directories are made
        #: without resolving a path.
        self.checked_roots: dict[Path, bool] = {}
        self.delay_table = config.delay_level_table
        self.writers: dict[tuple[str, int], ConsumeQueueWriter] = {}
        self.build_cq = build_cq
        self.build_index = build_index and config.message_index_enable
        #: Which topics get queues: the selection, less names that cannot be a directory
        #: (those are kept in ``self.topics.refused``: findings, never paths).
        self.topics = QueueTopics(topics)
        self.index = (
            IndexService(
                index_dir,
                config.max_hash_slot_num,
                config.max_index_num,
                config.max_msgs_num_batch,
                writable=True,
                tz=tz,
                roots=roots,
            )
            if self.build_index
            else None
        )
        self.last_store_timestamp = 0
        self.units = 0
        # the BatchCQ topics' records go to batchconsumequeue/ beside cq_root instead
        self.batch = batch_dispatch(config, cq_root, roots) if build_cq and topics is None else None
        #: 5.x multi-dispatch rules (``store/write/lmq.py``): the store holds a 5.x-only file.
        self.broker5 = config.enable_multi_dispatch and broker5_store(config.root)
        #: Messages whose multi-dispatch properties are malformed: FanOut.problem -> count.
        self.multi_problems: dict[str, int] = {}
        #: The append path's index keys, put a block at a time (``store/write/keyblock.py``); None: per key.
        self.key_block = None

    def dispatch(self, msg: Message) -> DispatchRequest:
        req = dispatch_request(msg, self.delay_table, self.config, self.broker5)
        if self.batch is not None and req.topic in self.batch.topics and req.to_consume_queue:
            self.batch.put(
                req.topic,
                req.queue_id,
                req.commitlog_offset,
                req.msg_size,
                req.tags_code,
                req.store_timestamp,
                msg.properties_bytes,
                req.consume_queue_offset,
            )
        self.dispatch_request(req)
        return req

    def _put(self, topic: str, queue_id: int, req: DispatchRequest, cq_offset: int) -> None:
        """``ConsumeQueue#putMessagePositionInfo`` into queue ``topic``/``queue_id``."""
        key = (topic, queue_id)
        w = self.writers.get(key)
        if w is None:
            w = self.writers[key] = ConsumeQueueWriter(
                self.cq_root, topic, queue_id, self.config.cq_file_size, roots=self.roots, checked=self.checked_roots
            )
        w.put(req.commitlog_offset, req.msg_size, req.tags_code, cq_offset)
        self.units += 1

    def dispatch_request(self, req: DispatchRequest) -> None:
        """``CommitLogDispatcherBuildConsumeQueue`` then ``CommitLogDispatcherBuildIndex`` for
        one request (the index only from where its files end)."""
        if self.build_cq and req.to_consume_queue:
            self._dispatch_units(req)
        if self.index is not None and req.commitlog_offset >= self.index.last_end_phy_offset:
            if self.key_block is not None:
                self.key_block.add(req.index_keys, req.commitlog_offset, req.store_timestamp)
                self.last_store_timestamp = req.store_timestamp
                return
            for key in req.index_keys:
                self.index.put_key(key, req.commitlog_offset, req.store_timestamp)
        self.last_store_timestamp = req.store_timestamp

    def _dispatch_units(self, req: DispatchRequest) -> None:
        """The message's own unit (not for a topic of the batch consume queue), then its
        multi-dispatch units (``ConsumeQueue#multiDispatchLmqQueue``), selected topics only."""
        if req.topic in self.topics and (self.batch is None or req.topic not in self.batch.topics):
            self._put(req.topic, req.queue_id, req, req.consume_queue_offset)
        if req.multi is None:
            return
        if req.multi.problem:
            self.multi_problems[req.multi.problem] = self.multi_problems.get(req.multi.problem, 0) + 1
        for t in req.multi.targets:
            if t.name in self.topics:
                self._put(t.name, t.queue_id, req, t.offset)

    def close(self) -> None:
        for w in self.writers.values():
            w.flush()
        if self.batch is not None:
            self.batch.flush()
        if self.key_block is not None:
            self.key_block.flush()
        if self.index is not None:
            self.index.close()
