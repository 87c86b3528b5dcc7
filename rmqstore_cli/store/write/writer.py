"""StoreWriter: append messages and dispatch them, as a running broker would.

Every appended record is re-read from the bytes just written (``check_message``) and
dispatched from that decode, so consume queues and index are by construction what a
reput over the commit log builds.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

import orjson
from rmqstore_cli.formats.sysflag import INNER_BATCH_FLAG
from rmqstore_cli.formats.timer import TIMER_TOPIC

from rmqstore_cli.errors import RefusedError, StoreError
from rmqstore_cli.store.commitlog import AppendResult, AppendSpec, CommitLog, Status, check_message
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.files.lock import StoreLock, refuse_if_live
from rmqstore_cli.store.files.mapped_files import MappedFileQueue, queue_dirs
from rmqstore_cli.store.files.safefs import check_inside, kind_of, load_json, make_dirs, os_error, replace_file
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue, ConsumeQueueWriter, unsafe_topic
from rmqstore_cli.store.queues.index import index_file_paths
from rmqstore_cli.store.write.compaction_writer import compaction_dispatch
from rmqstore_cli.store.write.dispatch import Dispatcher
from rmqstore_cli.store.write.keyblock import IndexKeyBlock
from rmqstore_cli.store.write.lmq import MultiDispatchAppender

TOPICS_JSON = Path("config") / "topics.json"


class StoreWriter:
    """Appends to the store at ``config.root`` while holding the broker's lock (taken in
    the constructor, after refusing a live broker; dropped by :meth:`close`). Everything it
    writes stays inside ``config.write_roots`` and is never written through a link; what
    it would have to write through one is refused before the first byte is written."""

    def __init__(self, config: StoreConfig, tz: _dt.tzinfo | None = None):
        self.config = config
        self.roots = config.write_roots
        #: generate --timer-ratio: a ``store.timer.writer.TimerWriter`` enqueueing timer messages.
        self.timer = None
        #: generate --compaction-topics: a ``store.compaction_writer.CompactionDispatch``.
        self.compaction = None
        try:
            config.root.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise StoreError("a file is where the store directory belongs", path=config.root) from None
        except OSError as e:
            raise os_error(e, config.root, "create the store directory") from None
        refuse_if_live(config.root)
        self.lock = StoreLock(
            config.root, hint="a broker or another rmqstore generate is using the store; try again when it is done"
        )
        self.lock.acquire()
        try:
            self._open(tz)
        except BaseException:
            self.lock.release()
            raise

    def _open(self, tz: _dt.tzinfo | None) -> None:
        config = self.config
        if config.index_geometry_error is not None and config.message_index_enable:
            raise config.index_geometry_error  # the index cannot be appended to at an unknown geometry
        self._preflight()
        #: No topics.json was there: the table holds only what generate puts (str, int, bool).
        self._topics_fresh = not os.path.lexists(self.config.root / TOPICS_JSON)
        self._topics_table = self._load_topics()
        cp_path = config.checkpoint_path
        self._checkpoint = StoreCheckpoint.read(cp_path) if os.path.lexists(cp_path) else StoreCheckpoint()
        self.commitlog = CommitLog(config, writable=True)
        existing = bool(self.commitlog.files)
        if existing:
            self.commitlog.queue.check_sizes()
            self._check_index_clean()
        self.commitlog.open_for_append()
        self._recover_topic_queue_table()
        #: INNER_MULTI_QUEUE_OFFSET assigned at append (store/write/lmq.py)
        self.multi = (
            MultiDispatchAppender(config, self.commitlog.topic_queue_table) if config.enable_multi_dispatch else None
        )
        self.dispatcher = Dispatcher(config, config.consumequeue_dir, config.index_dir, tz, roots=self.roots)
        if FAST_PATHS.key_block and self.dispatcher.index is not None:  # issue 23: keys put per block
            self.dispatcher.key_block = IndexKeyBlock(self.dispatcher.index, FAST_PATHS.key_block)
        self._resume_consume_queues()
        self.batch_topics: set[str] = set()
        if self.dispatcher.batch is not None:
            self.declare_batch_topics(self.dispatcher.batch.topics)
        self.compaction = compaction_dispatch(config, self.roots)  # continued by an append
        self.topics: dict[str, int] = {}
        #: Records whose topic cannot be a consume-queue directory (``unsafe_topic``), per topic:
        #: in the commit log and the index, but in no queue and not in config/topics.json.
        self.refused_records: dict[str, int] = {}
        #: Store times never go backwards within one broker process.
        self.last_store_timestamp = self.commitlog.last_store_timestamp
        self.messages = 0
        #: The last half/prepared record appended (physical offset, queue offset): what a
        #: commit, rollback or op send of the workload answers.
        self._pending: tuple[int, int] | None = None
        self._fast = None  # the block path's FastDispatcher, made on first use

    def _recover_topic_queue_table(self) -> None:
        """``DefaultMessageStore#recoverTopicQueueTable``: next offset = each CQ's max offset."""
        for topic, qid, _ in queue_dirs(self.config.consumequeue_dir):
            cq = ConsumeQueue(self.config.consumequeue_dir, topic, qid, self.config.cq_file_size)
            self.commitlog.topic_queue_table[f"{topic}-{qid}"] = cq.max_offset
            cq.close()

    def _resume_consume_queues(self) -> None:
        """Existing queues continue after their last unit."""
        for topic, qid, _ in queue_dirs(self.config.consumequeue_dir):
            cq = ConsumeQueue(self.config.consumequeue_dir, topic, qid, self.config.cq_file_size)
            self.dispatcher.writers[(topic, qid)] = ConsumeQueueWriter.resume(cq, roots=self.roots)
            cq.close()

    def _preflight(self) -> None:
        """Refuse (exit 4) before writing anything when a directory this run writes into
        leads out of the write roots, or a file it would append to is not a regular file
        (a symlink is never written through; safefs refuses it again at the open)."""
        cfg = self.config
        from rmqstore_cli.store.message_store import is_rocksdb_store

        if is_rocksdb_store(cfg):  # file units would land inside the database (exit 3)
            raise StoreError(
                "the consume queues are in RocksDB (storeType=defaultRocksDB), which generate does not write",
                path=cfg.consumequeue_dir,
            )
        for d in [*cfg.commitlog_dirs, cfg.consumequeue_dir, cfg.index_dir, cfg.root / "config"]:
            if os.path.lexists(d):
                check_inside(d, self.roots, f"write into {d.name}/")
        cl = MappedFileQueue(cfg.commitlog_dirs, 1)
        written = cl.files[-1:]  # appends go to the last file of each queue
        for _, _, qdir in queue_dirs(cfg.consumequeue_dir):
            check_inside(qdir, self.roots, f"write into {qdir.parent.name}/{qdir.name}/")
            written += MappedFileQueue(qdir, 1).files[-1:]
        paths = [f.path for f in written] + _index_files(cfg.index_dir)  # every index file is opened writable
        for p in paths:
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                raise RefusedError(
                    f"will not write to {kind_of(st.st_mode)}: a store file this run writes must be a regular file",
                    path=p,
                    hint="a symbolic link or special file was planted in the store; remove it or work on a copy",
                )

    def _load_topics(self) -> dict:
        """``config/topics.json`` as ``TopicConfigManager`` reads it, checked before anything
        is written: a file that is not the broker's topic table is refused with one line."""
        path = self.config.root / TOPICS_JSON
        if not os.path.lexists(path):
            return {"topicConfigTable": {}, "dataVersion": {"counter": 0, "timestamp": 0}}
        data = load_json(path, what="config/topics.json")
        why = _topics_problem(data)
        if why is not None:
            raise StoreError(
                f"config/topics.json is not the broker's topic table: {why}",
                path=path,
                hint="move it away (generate then writes a fresh one) or repair it",
            )
        data.setdefault("topicConfigTable", {})
        return data

    def _check_index_clean(self) -> None:
        if (self.config.root / "abort").exists():
            raise StoreError(
                "the store was not shut down cleanly (abort file)",
                path=self.config.root / "abort",
                hint="run rebuild-index or verify first",
            )

    def declare_batch_topics(self, topics: set[str]) -> None:
        """These topics are BatchCQ (``queue.type=BatchCQ``): their records go to
        batchconsumequeue/, each queue continuing after its recovered end."""
        from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue, batch_file_size
        from rmqstore_cli.store.write.batch_dispatch import BatchDispatch

        d = self.dispatcher
        if d.batch is None:
            d.batch = BatchDispatch(
                self.config.root / "batchconsumequeue",
                set(),
                batch_file_size(self.config, self.config.root),
                self.roots,
            )
        d.batch.topics |= topics
        self.batch_topics |= topics
        for topic, qid, qdir in queue_dirs(self.config.root / "batchconsumequeue"):
            bq = BatchConsumeQueue(qdir, topic, qid, d.batch.file_size)
            self.commitlog.topic_queue_table[f"{topic}-{qid}"] = bq.max_offset
            bq.close()

    def append(self, spec: AppendSpec) -> AppendResult:
        inner = self._inner_batch(spec)
        if self.multi is not None:
            self.multi.wrap(spec)
        res = self.commitlog.append(spec)
        if inner:  # BatchConsumeQueue#increaseQueueOffset: by the batch's message count
            self.commitlog.topic_queue_table[f"{spec.topic}-{spec.queue_id}"] = res.queue_offset + inner
        c = check_message(res.record, 0, res.size, res.physical_offset)
        if c.status is not Status.VALID:
            raise StoreError(f"wrote an invalid record: {c.reason}", offset=res.physical_offset)
        if self.multi is not None:
            self.multi.advance(spec, c.message.transaction_type)
        self._dispatch(res, c.message)
        t = c.message.topic
        if t in self.refused_records or unsafe_topic(t) is not None:
            self.refused_records[t] = self.refused_records.get(t, 0) + 1
        else:
            self.topics[spec.topic] = max(self.topics.get(spec.topic, 0), spec.queue_id + 1)
        self.last_store_timestamp = spec.store_timestamp
        self.messages += 1
        return res

    def _inner_batch(self, spec: AppendSpec) -> int:
        """An inner-batch send to a BatchCQ topic: its base offset assigned
        (``assign_inner_base``); returns its message count (0: not such a send)."""
        if spec.topic not in self.batch_topics or not spec.sys_flag & INNER_BATCH_FLAG or spec.queue_offset is not None:
            return 0
        from rmqstore_cli.store.queues.batch_queue import assign_inner_base

        return assign_inner_base(spec, self.commitlog.topic_queue_table)

    def _dispatch(self, res: AppendResult, msg) -> None:
        """The reput of the record just written: queues and index, compaction
        (``CommitLogDispatcherCompaction``), the timer (``TimerMessageStore#enqueue``)."""
        req = self.dispatcher.dispatch(msg)
        if self.compaction is not None:
            self.compaction.dispatch(req, res.record, msg)
        if self.timer is not None and msg.topic == TIMER_TOPIC:  # store/timer/writer.py
            self.timer.enqueue(msg)

    def append_linked(self, kind: str, spec: AppendSpec, floor: bool) -> AppendResult:
        """:meth:`append` with the workload's links: a commit or rollback answers the pending
        half/prepared record, an op record's body is its queue offset (before what the spec's
        body holds: 5.x's separator); ``floor``: the store
        time never goes below the previous record's."""
        if floor:
            spec.store_timestamp = max(spec.store_timestamp, self.last_store_timestamp)
        pending = self._pending
        if kind in ("commit", "rollback") and pending is not None:
            spec.prepared_transaction_offset = pending[0]
        if kind == "op" and pending is not None:  # the queue offset, then the profile's suffix
            spec.body = str(pending[1]).encode() + spec.body
        res = self.append(spec)
        if kind in ("half", "prepared"):
            self._pending = (res.physical_offset, res.queue_offset)
        return res

    def append_blocks(self, blocks: Iterable) -> int:
        """Append blocks of sends (:class:`~rmqstore_cli.store.commitlog.blocks.SendBlock`) a block at a time
        (encoded and written per file run, dispatched by :class:`FastDispatcher` over the
        bytes written) when ``FAST_PATHS.gen_block`` is on and the store and block allow it
        (no timer, compaction, multi-dispatch or BatchCQ topics here), else send by send."""
        size = FAST_PATHS.gen_block
        for whole in blocks:
            for i in range(0, len(whole), size or len(whole) or 1):
                block = whole.rows(i, i + size) if size and size < len(whole) else whole
                self._append_block(block, bool(size))
        return self.messages

    def _append_block(self, block, fast: bool) -> None:
        """One block: written at once when ``fast`` and the store and block allow it, else send by send."""
        got = None
        if fast and self._blocks_allowed():
            got = self.commitlog.append_block(
                block, self._pending, self.last_store_timestamp if block.floor_store_ts else None
            )
        if got is None:
            for kind, spec in block.specs():
                self.append_linked(kind, spec, block.floor_store_ts)
            return
        runs, self._pending, store_ts = got
        self._dispatch_runs(runs)
        self._count(block, store_ts)

    def _blocks_allowed(self) -> bool:
        """No timer, compaction, multi-dispatch or BatchCQ topic: :meth:`append`'s extra steps
        the block path does not take."""
        return self.timer is None and self.compaction is None and self.multi is None and not self.batch_topics

    def _dispatch_runs(self, runs: list) -> None:
        """The reput of records just written (``FastDispatcher``, as rebuild-index's)."""
        import numpy as np

        from rmqstore_cli.store.write.fastdispatch import FastDispatcher

        d = self.dispatcher
        if self._fast is None:
            self._fast = FastDispatcher(d)
        fd = self._fast
        if d.key_block is not None:  # keys of records put before, first
            d.key_block.flush()
        for data, starts, fields in runs:
            a = np.frombuffer(data, np.uint8)
            fd.units = d.units
            stop = fd.dispatch(data, a, starts, fields, np.arange(starts.size))
            if stop is not None:
                raise StoreError(
                    "wrote a record the broker's dispatch refuses (DELAY is not an int)",
                    offset=int(fields["phy"][stop]),
                )

    def _count(self, block, store_ts) -> None:
        """What :meth:`append` counts per record (topics and queues, refused topics), per block."""
        import numpy as np

        tids, inv, counts = np.unique(block.tid, return_inverse=True, return_counts=True)
        top = np.full(tids.size, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(top, inv.ravel(), block.queue_id)  # each topic's highest queue id, one pass
        for t, n, q in zip(tids.tolist(), counts.tolist(), top.tolist(), strict=True):
            name = block.topics[t]
            if name in self.refused_records or unsafe_topic(name) is not None:
                self.refused_records[name] = self.refused_records.get(name, 0) + n
            else:
                self.topics[name] = max(self.topics.get(name, 0), q + 1)
        self.last_store_timestamp = int(store_ts[-1])
        self.messages += len(block)

    def close(self) -> None:
        """Flush queues and index, write the checkpoint and config/topics.json, then drop
        the broker's lock."""
        try:
            self.dispatcher.close()
            self.commitlog.close()
            if self.timer is not None:
                self.timer.close()
            if self.compaction is not None:
                self.compaction.close()
            last = self.last_store_timestamp or self.dispatcher.last_store_timestamp
            cp = self._checkpoint
            if last:
                cp.physic_msg_timestamp = cp.logics_msg_timestamp = last
            if self.dispatcher.index is not None:
                cp.index_msg_timestamp = self.dispatcher.index.full_files_end_timestamp()
            cp.write(self.config.checkpoint_path, self.roots)
            self._write_topics()
        finally:
            self.lock.release()

    def _write_topics(self) -> None:
        """``TopicConfigManager``'s ``config/topics.json`` for the topics written (beside
        and renamed: a link planted at it or at a temp name is replaced, never followed)."""
        path = self.config.root / TOPICS_JSON
        make_dirs(path.parent, self.roots)
        data = self._topics_table
        table = data["topicConfigTable"]
        for topic, n in sorted(self.topics.items()):
            old = table.get(topic, {})
            q = max(n, old.get("readQueueNums", 0))
            table[topic] = {
                "topicName": topic,
                "readQueueNums": q,
                "writeQueueNums": q,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
            }
            attrs = dict(old["attributes"]) if isinstance(old.get("attributes"), dict) else {}  # kept by an append
            if topic in self.batch_topics:  # TopicAttributes.QUEUE_TYPE_ATTRIBUTE
                attrs["queue.type"] = "BatchCQ"
            if self.compaction is not None and topic in self.compaction.topics:
                attrs.update(self.compaction.attributes)
            if attrs:
                table[topic]["attributes"] = attrs
        replace_file(path, _topics_text(data, self._topics_fresh), self.roots)


def _topics_text(data: dict, fresh: bool) -> bytes:
    """The table as ``json.dumps(indent=2, ensure_ascii=False)`` writes it: by orjson (the
    same bytes for str, int and bool values, ~10x faster: 20 000 topics) when the table is
    generate's own; a table read from the store (any number it holds) and a name orjson
    refuses (a lone surrogate) by json."""
    if fresh:
        try:
            return orjson.dumps(data, option=orjson.OPT_INDENT_2)
        except orjson.JSONEncodeError:
            pass
    return json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8")


def _topics_problem(data) -> str | None:
    """Why ``data`` is not a topic table ``TopicConfigManager#decode`` would load, or None
    (the fields generate merges: an object of topic objects with integer queue counts)."""
    if not isinstance(data, dict):
        return f"the top level is {type(data).__name__}, not an object"
    table = data.get("topicConfigTable", {})
    if not isinstance(table, dict):
        return f"topicConfigTable is {type(table).__name__}, not an object"
    for name, tc in table.items():
        if not isinstance(tc, dict):
            return f"the entry of topic {name!r:.80} is {type(tc).__name__}, not an object"
        for k in ("readQueueNums", "writeQueueNums"):
            v = tc.get(k, 0)
            if type(v) is not int or not 0 <= v < 1 << 31:
                return f"{k} of topic {name!r:.80} is {v!r:.40}, not a queue count"
    return None


def _index_files(index_dir: Path) -> list[Path]:
    """The entries of ``index/`` IndexService loads (:func:`~rmqstore_cli.store.queues.index.index_file_paths`:
    links included), less sub-directories, which it refuses by name when it opens them."""
    return [p for p in index_file_paths(index_dir) if p.is_symlink() or not p.is_dir()]


def count_records(config: StoreConfig) -> int:
    """How many records the store's commit log holds (a read-only scan, bounded memory)."""
    cl = CommitLog(config)
    try:
        return sum(getattr(item, "n", 1) for item in cl.scan_blocks())
    finally:
        cl.close()
