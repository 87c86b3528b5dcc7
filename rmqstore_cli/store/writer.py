"""StoreWriter: append messages and dispatch them, as a running broker would.

Every appended record is re-read from the bytes just written (``check_message``) and
dispatched from that decode, so consume queues and index are by construction what a
reput over the commit log builds.
"""
from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.checkpoint import StoreCheckpoint
from rmqstore_cli.store.commitlog import AppendResult, AppendSpec, CommitLog, Status, check_message
from rmqstore_cli.store.config import StoreConfig
from rmqstore_cli.store.consume_queue import ConsumeQueue, ConsumeQueueWriter, queue_dirs, unsafe_topic
from rmqstore_cli.store.dispatch import Dispatcher


class StoreWriter:
    def __init__(self, config: StoreConfig, tz: _dt.tzinfo | None = None):
        self.config = config
        config.root.mkdir(parents=True, exist_ok=True)
        self.commitlog = CommitLog(config, writable=True)
        existing = bool(self.commitlog.files)
        if existing:
            self.commitlog.queue.check_sizes()
            self._check_index_clean()
        self.commitlog.open_for_append()
        self._recover_topic_queue_table()
        self.dispatcher = Dispatcher(config, config.consumequeue_dir, config.index_dir, tz)
        self._resume_consume_queues()
        self.topics: dict[str, int] = {}
        #: Records whose topic cannot be a consume-queue directory (``unsafe_topic``), per topic:
        #: in the commit log and the index, but in no queue and not in config/topics.json.
        self.refused_records: dict[str, int] = {}
        #: Store times never go backwards within one broker process.
        self.last_store_timestamp = self.commitlog.last_store_timestamp
        self.messages = 0

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
            self.dispatcher.writers[(topic, qid)] = ConsumeQueueWriter.resume(cq)
            cq.close()

    def _check_index_clean(self) -> None:
        if (self.config.root / "abort").exists():
            raise StoreError("the store was not shut down cleanly (abort file)", path=self.config.root / "abort",
                             hint="run rebuild-index or verify first")

    def append(self, spec: AppendSpec) -> AppendResult:
        res = self.commitlog.append(spec)
        c = check_message(res.record, 0, res.size, res.physical_offset)
        if c.status is not Status.VALID:
            raise StoreError(f"wrote an invalid record: {c.reason}", offset=res.physical_offset)
        self.dispatcher.dispatch(c.message)
        t = c.message.topic
        if t in self.refused_records or unsafe_topic(t) is not None:
            self.refused_records[t] = self.refused_records.get(t, 0) + 1
        else:
            self.topics[spec.topic] = max(self.topics.get(spec.topic, 0), spec.queue_id + 1)
        self.last_store_timestamp = spec.store_timestamp
        self.messages += 1
        return res

    def append_workload(self, sends: Iterable[tuple[str, AppendSpec]]) -> int:
        """Append a workload, linking transaction answers to the record they answer."""
        pending = None
        for kind, spec in sends:
            spec.store_timestamp = max(spec.store_timestamp, self.last_store_timestamp)
            if kind in ("commit", "rollback") and pending is not None:
                spec.prepared_transaction_offset = pending.physical_offset
            if kind == "op" and pending is not None:
                spec.body = str(pending.queue_offset).encode()
            res = self.append(spec)
            if kind in ("half", "prepared"):
                pending = res
        return self.messages

    def close(self) -> None:
        """Flush queues and index, write the checkpoint and config/topics.json."""
        self.dispatcher.close()
        self.commitlog.close()
        last = self.last_store_timestamp or self.dispatcher.last_store_timestamp
        cp_path = self.config.checkpoint_path
        cp = StoreCheckpoint.read(cp_path) if cp_path.exists() else StoreCheckpoint()
        if last:
            cp.physic_msg_timestamp = cp.logics_msg_timestamp = last
        if self.dispatcher.index is not None:
            cp.index_msg_timestamp = self.dispatcher.index.full_files_end_timestamp()
        cp.write(cp_path)
        lock = self.config.root / "lock"
        if not lock.exists():
            lock.write_bytes(b"lock")
        self._write_topics()

    def _write_topics(self) -> None:
        """``TopicConfigManager``'s ``config/topics.json`` for the topics written."""
        path = self.config.root / "config" / "topics.json"
        path.parent.mkdir(exist_ok=True)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {"topicConfigTable": {}, "dataVersion": {"counter": 0, "timestamp": 0}}
        table = data.setdefault("topicConfigTable", {})
        for topic, n in sorted(self.topics.items()):
            old = table.get(topic, {})
            q = max(n, old.get("readQueueNums", 0))
            table[topic] = {"topicName": topic, "readQueueNums": q, "writeQueueNums": q, "perm": 6,
                            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
        tmp = path.with_name("topics.json.tmp")
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        tmp.replace(path)

