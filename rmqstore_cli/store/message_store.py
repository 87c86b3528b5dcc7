"""MessageStore: one store directory opened for reading (or writing), like
``DefaultMessageStore``: config with sizes checked, commit log, queues, index, checkpoint."""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterator
from functools import cached_property
from typing import TYPE_CHECKING

from rmqstore_cli.errors import StoreError, UsageError
from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import queue_dirs
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.index_service import IndexService

if TYPE_CHECKING:  # numpy-backed readers: imported where a queue is opened, not at start-up
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBQueue

STORE_MARKERS = ("commitlog", "consumequeue", "index", "checkpoint")
#: Most topics a look-up without a topic asks the index about, one by one.
MAX_SEARCH_TOPICS = 10_000


class MessageStore:
    def __init__(self, config: StoreConfig, tz: _dt.tzinfo | None = None):
        self.config = config
        self.tz = tz
        self.notes: list[str] = []
        #: Optional things skipped (an unreadable topics.json…): one stderr warning line each.
        self.warnings: list[str] = []

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        tz: _dt.tzinfo | None = None,
        defer_index: bool = False,
        infer_sizes: bool = True,
        rocksdb: bool = True,
    ) -> MessageStore:
        """Open an existing store read-only; refuse what is not a store or not readable.
        ``defer_index``: index files that disagree on their size fail only ``.index``.
        ``infer_sizes=False``: the sizes are left to the caller (``verify`` infers them
        itself, a disagreeing file being a finding there, not the end). ``rocksdb=False``:
        a command that writes queues or deletes files refuses a RocksDB consume queue."""
        root = config.root
        if not root.is_dir():
            raise StoreError(
                "no such store directory",
                path=root,
                hint="pass ⟦path⟧, or a ⟦broker_conf⟧ that names storePathRootDir",
            )
        if not any((root / m).exists() for m in STORE_MARKERS) and not any(d.is_dir() for d in config.commitlog_dirs):
            raise StoreError("not a RocketMQ store (no commitlog/, consumequeue/, index/ or checkpoint)", path=root)
        refuse_unsupported(config)
        if not rocksdb and is_rocksdb_store(config):
            raise StoreError(
                "the consume queues are in RocksDB (storeType=defaultRocksDB), which this command does not write",
                path=config.consumequeue_dir,
                hint="rebuild-index --output DIR writes file consume queues beside it",
            )
        store = cls(config, tz)
        if infer_sizes:
            store.notes = config.infer_sizes(defer_index=defer_index)
        return store

    @cached_property
    def commitlog(self) -> CommitLog:
        cl = CommitLog(self.config)
        cl.queue.check_sizes(allow_odd=self.config.allow_odd_size)
        return cl

    @cached_property
    def rocksdb_cq(self):
        """The RocksDB consume queue (``RocksDBConsumeQueueStore``) opened read-only, or None
        for file consume queues."""
        if not is_rocksdb_store(self.config):
            return None
        from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

        return RocksDBConsumeQueues(self.config.consumequeue_dir)

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | RocksDBQueue:
        """One queue, read-only (numpy is imported here, not at start-up): a file
        ``ConsumeQueue``, or a ``RocksDBQueue`` with the same read views."""
        if self.rocksdb_cq is not None:
            return self.rocksdb_cq.queue(topic, queue_id)
        from rmqstore_cli.store.queues.consume_queue import ConsumeQueue

        return ConsumeQueue(self.config.consumequeue_dir, topic, queue_id, self.config.cq_file_size)

    def consume_queues(self) -> Iterator[ConsumeQueue | RocksDBQueue]:
        """Every consume queue of the store: the RocksDB ones, else one per queue directory."""
        if self.rocksdb_cq is not None:
            yield from self.rocksdb_cq.queues()
            return
        for topic, qid, _ in queue_dirs(self.config.consumequeue_dir):
            yield self.consume_queue(topic, qid)

    @cached_property
    def index(self) -> IndexService:
        if self.config.index_geometry_error is not None:
            raise self.config.index_geometry_error
        return IndexService(
            self.config.index_dir,
            self.config.max_hash_slot_num,
            self.config.max_index_num,
            self.config.max_msgs_num_batch,
            tz=self.tz,
        )

    @cached_property
    def checkpoint(self) -> StoreCheckpoint | None:
        p = self.config.checkpoint_path
        return StoreCheckpoint.read(p) if p.exists() else None

    def topics(self) -> list[str]:
        """Topics the store knows: ``config/topics.json`` and ``consumequeue/`` directories,
        searched one by one when no topic is given (index-lookup, decode-msgid's UNIQ_KEYs).

        Bounded: ``topics.json`` is optional, so one that cannot be read (not a regular file,
        over :data:`safefs.TOPICS_JSON_LIMIT`, not JSON) is skipped with a warning. More than
        :data:`MAX_SEARCH_TOPICS` topics: only those with consume queues on disk are
        searched (a warning says so); more than that many of those is a UsageError (pass
        ``--topic``). Warnings go to :attr:`warnings` for the command to print."""
        found = (
            {t for t, _ in self.rocksdb_cq.queue_ids()}
            if self.rocksdb_cq is not None
            else {t for t, _, _ in queue_dirs(self.config.consumequeue_dir)}
        )
        on_disk = len(found)
        if on_disk > MAX_SEARCH_TOPICS:
            raise UsageError(
                f"the store has {on_disk} topics with consume queues, more than the "
                f"{MAX_SEARCH_TOPICS} searched one by one without a topic",
                path=self.config.consumequeue_dir,
                hint="pass ⟦topic⟧",
            )
        found |= self._rocksdb_config_topics()
        found |= self._topics_json(found, on_disk)
        return sorted(found)

    def _topics_json(self, found: set[str], on_disk: int) -> set[str]:
        """The topics ``config/topics.json`` names, when it can be read and they keep the search
        within :data:`MAX_SEARCH_TOPICS` (else a warning, and none)."""
        p = self.config.root / "config" / "topics.json"
        if not os.path.lexists(p):
            return set()
        table = None
        try:
            table = safefs.load_json(p, limit=safefs.TOPICS_JSON_LIMIT, what="topics.json").get("topicConfigTable")
        except StoreError as e:  # optional: unreadable or not the broker's, the queues still count
            self.warnings.append(f"{e}; config/topics.json skipped")
        except AttributeError:
            pass
        if not isinstance(table, dict):
            return set()
        named = {k for k in table if isinstance(k, str)}
        if len(found | named) > MAX_SEARCH_TOPICS:
            self.warnings.append(
                f"config/topics.json names {len(named)} topics, more than the "
                f"{MAX_SEARCH_TOPICS} searched one by one: searching only the {on_disk} "
                "with consume queues on disk (pass --topic to search another)"
            )
            return set()
        return named

    def _rocksdb_config_topics(self) -> set[str]:
        """5.x topics kept in RocksDB (``config/topics/``, ``config/rdb/``): optional like
        topics.json, so one that cannot be read is a warning."""
        from rmqstore_cli.store.layout.rocksdb_config import topics

        try:
            return topics(self.config.root / "config")
        except StoreError as e:
            self.warnings.append(f"{e}; skipped")
            return set()

    def topics_from_commitlog(self) -> list[str]:
        """Every topic a record of the commit log names, from one columnar walk of the log (per
        block of records only the topic bytes are looked up, nothing else is decoded): the
        topics the index holds keys of when ``consumequeue/`` and ``topics.json`` are gone
        (an index key is the hash of ``topic#key``, so a look-up needs the topic's name)."""
        from rmqstore_cli.store.records.message import Message

        names: set[str] = set()
        table = None
        for rec in self.commitlog.scan_blocks(every_file=True):
            if isinstance(rec, Message):
                names.add(rec.topic)
            else:  # a MessageBlock: register its topics in the scan's shared table
                _ = rec.topics
                table = rec.topic_table
        if table is not None:
            names.update(n.decode("utf-8", "replace") for n in table.names)
        return sorted(names)

    def close(self) -> None:
        if "commitlog" in self.__dict__:
            self.commitlog.close()
        if "index" in self.__dict__:
            self.index.close()
        if self.__dict__.get("rocksdb_cq") is not None:
            self.rocksdb_cq.close()


def refuse_unsupported(config: StoreConfig) -> None:
    """A DLedger commit log is read through its framing (``commitlog.dledger``); one enabled in
    the config must be on disk."""
    if config.enable_dleger_commit_log and config.dledger_dir is None:
        raise StoreError(
            "enableDLegerCommitLog=true but no dLegerSelfId and no dledger-*/data directory",
            path=config.root,
            hint="pass ⟦broker_conf⟧ with dLegerSelfId",
        )


def is_rocksdb_store(config: StoreConfig) -> bool:
    """The consume queues are a RocksDB database (``storeType=defaultRocksDB``:
    ``RocksDBMessageStore``, docs/format/rocksdb.md), told by the broker config or the
    database's own files in ``consumequeue/``: its ``CURRENT`` or a ``MANIFEST-*``
    (``DBImpl#Recover`` reads CURRENT to find the MANIFEST). The broker compares storeType
    ignoring case (``MessageStoreConfig#isEnableRocksDBStore``)."""
    cq = config.consumequeue_dir
    return str(config.store_type).lower() == "defaultrocksdb" or (cq / "CURRENT").exists() or any(cq.glob("MANIFEST-*"))
