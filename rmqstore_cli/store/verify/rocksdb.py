"""verify on a RocksDB consume queue (``storeType=defaultRocksDB``, docs/format/rocksdb.md).

Each queue of the database becomes a :class:`~rmqstore_cli.store.verify.queues.QueueState`
(a :class:`~rmqstore_cli.store.queues.rocksdb_cq.RocksDBQueue` has the file queue's read views),
so the commit-log scan checks its units as it checks a file queue's (``cq.*``: a unit
pointing past the log is ``cq.unit-target``). What only the database has is checked here
(``rocksdb.*``): the column families, keys and values in the broker's layout, and the
``offset`` family against the keys (``RocksDBConsumeQueueOffsetTable``) and the commit log.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rmqstore_cli.formats.rocksdb_cq import CQ_VALUE_SIZE, OFFSET_CF

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.checks.findings import CHECKS, ERROR, INFO, check_table

if TYPE_CHECKING:  # loaded by open_rocksdb_queues, for a RocksDB store only (start-up)
    from rmqstore_cli.store.checks.cq_compare import QueueComparison

#: The ``rocksdb.*`` checks, merged into ``findings.CHECKS``.
ROCKSDB_CHECKS: dict[str, tuple[str, str]] = check_table(
    """
rocksdb.unreadable        error    the RocksDB consume queue cannot be opened (corrupt or missing CURRENT, MANIFEST or
                                   SST): no unit is checked
rocksdb.offset-family     error    the database has no 'offset' column family: the broker knows no queue's min or max
                                   (RocksDBConsumeQueueOffsetTable#load)
rocksdb.key               error    a key is not in the broker's layout (RocksDBConsumeQueueTable / OffsetTable)
rocksdb.value-size        error    a value is not 28 bytes (a unit) or 16 bytes (an offset row)
rocksdb.offset-row        error    a queue's min or max row of the offset family is missing or disagrees with its units
rocksdb.gap               error    a queue has no unit for cq offsets between its first and its max
cq.double-write-mismatch  error    with rocksdbCQDoubleWriteEnable, a unit of the file consume queue and the RocksDB one
                                   differ at one cq offset (commit-log offset, size or tags code): readers of the two
                                   disagree
cq.double-write-extent    warning  with rocksdbCQDoubleWriteEnable, one consume queue holds units the other does not
                                   (one dispatched further, or cleaned further)
rocksdb.checkpoint        warning  the dispatch checkpoint (CHECKPOINT_TOPIC) is missing or disagrees with the queues
                                   and the commit log
"""
)
CHECKS.update(ROCKSDB_CHECKS)


#: The part :attr:`Verifier.skipped` names when rocksdict is missing.
ROCKSDB_SKIP = "rocksdb consume queue"


class RocksDBChecks:
    """The RocksDB part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def open_rocksdb_queues(self) -> bool:
        """When the store's consume queue is a RocksDB database: open it, check its rows and
        register each queue for the scan; True (then there are no file queues to open)."""
        from rmqstore_cli.store.message_store import is_rocksdb_store

        if not is_rocksdb_store(self.config):
            return False
        from rmqstore_cli.store.checks.cq_compare import compare_stores, has_file_queues
        from rmqstore_cli.store.verify.queues import QueueState

        cq_dir = self.config.consumequeue_dir
        rel = self.rel(cq_dir)
        if not self._open_rocksdb(cq_dir, rel):
            return True
        self.files["consumequeue"] += sum(1 for e in os.scandir(cq_dir) if e.is_file())
        if OFFSET_CF not in self.rocksdb.families:
            self._add(
                "rocksdb.offset-family",
                rel,
                None,
                f"column families {self.rocksdb.families}: no "
                f"'{OFFSET_CF}'; every queue's max offset is read from its keys",
            )
        for q in self.rocksdb.queues():
            self.queues[(q.topic.encode("utf-8", "surrogateescape"), q.queue_id)] = QueueState(q, self.root)
            self._rocksdb_queue_rows(q, rel)
        if has_file_queues(cq_dir):  # rocksdbCQDoubleWriteEnable: the file queues beside it
            for c in compare_stores(cq_dir, self.config.cq_file_size, self.rocksdb):
                self._double_write(c, rel)
        self._rocksdb_bad_rows(rel)
        return True

    def _rocksdb_bad_rows(self, rel: str) -> None:
        """The rows the database's readers could not take: a key of another shape
        (``rocksdb.key``) or a value of another length (``rocksdb.value-size``)."""
        for row in self.rocksdb.bad_rows:
            self._add(
                "rocksdb.key" if "key" in row.problem else "rocksdb.value-size",
                rel,
                None,
                f"{row.family} family, key {row.key[:80].hex()}: {row.problem}",
            )

    def _open_rocksdb(self, cq_dir, rel: str) -> bool:
        """Open the database as :attr:`rocksdb`; False when it cannot be (rocksdict missing:
        not the store's fault, the rest is checked and this named as skipped; or unreadable)."""
        from rmqstore_cli.store.files.rocksdb_db import MissingBinding
        from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

        self.rocksdb = None
        try:
            self.rocksdb = RocksDBConsumeQueues(cq_dir)
        except MissingBinding as e:
            self.skipped[ROCKSDB_SKIP] = f"{rel} is a RocksDB consume queue; {e.message}: {e.hint}"
            return False
        except StoreError as e:
            self._add("rocksdb.unreadable", rel, None, str(e))
            return False
        return True

    def _double_write(self, c: QueueComparison, rel: str) -> None:
        """One queue of both consume queues (``CombineConsumeQueueStore#checkSelf``'s question)."""
        name = f"{c.topic}/{c.queue_id}"
        where = {"topic": c.topic, "queue_id": c.queue_id}
        if c.differing:
            self._add(
                "cq.double-write-mismatch",
                rel,
                None,
                f"{name}: {c.differing} units differ; first at cq offset {c.first_difference}: "
                f"file {c.file_unit}, rocksdb {c.rocksdb_unit} (commit-log offset, size, tags code)",
                count=c.differing,
                **where,
            )
        if c.only_file or c.only_rocksdb:
            self._add(
                "cq.double-write-extent",
                rel,
                None,
                f"{name}: file units {c.file_first}..{c.file_end - 1}, rocksdb units "
                f"{c.rocksdb_first}..{c.rocksdb_end - 1}: {c.only_file} only in the files, "
                f"{c.only_rocksdb} only in rocksdb",
                count=c.only_file + c.only_rocksdb,
                **where,
            )

    def _rocksdb_queue_rows(self, q, rel: str) -> None:
        """One queue's keys, values and offset rows (``#getMaxCqOffset``, ``#getMinCqOffset``)."""
        name = f"{q.topic}/{q.queue_id}"
        first, end = q.key_bounds
        units = sum(a.size for a, _ in q.value_blocks(first, end))
        for off, n in q.bad_values:
            self._add(
                "rocksdb.value-size",
                rel,
                None,
                f"{name}: the value of cq offset {off} has {n} bytes, not {CQ_VALUE_SIZE}",
                topic=q.topic,
                queue_id=q.queue_id,
            )
        holes = end - first - units - len(q.bad_values)
        if holes > 0:
            self._add(
                "rocksdb.gap",
                rel,
                None,
                f"{name}: {holes} cq offsets in {first}..{end - 1} have no unit "
                "(the broker's rangeQuery stops at the first)",
                topic=q.topic,
                queue_id=q.queue_id,
                count=holes,
            )
        if self.rocksdb.offsets is None:
            return
        self._rocksdb_max_row(q, rel)
        self._rocksdb_min_row(q, rel)

    def _offset_row(self, q, rel: str, text: str, **more) -> None:
        """A ``rocksdb.offset-row`` finding of queue ``q``."""
        self._add(
            "rocksdb.offset-row",
            rel,
            None,
            f"{q.topic}/{q.queue_id}: {text}",
            **more,
            topic=q.topic,
            queue_id=q.queue_id,
        )

    def _rocksdb_max_row(self, q, rel: str) -> None:
        """The ``max`` row (``RocksDBConsumeQueueOffsetTable#getMaxCqOffset``): present when the
        queue has units, naming the last unit and its commit-log offset."""
        first, end = q.key_bounds
        top = q.offset_rows.get("max")
        if top is None:
            if end > first:
                self._offset_row(
                    q,
                    rel,
                    f"no max row, but units {first}..{end - 1}: the broker "
                    "reads the queue as empty (getMaxOffsetInQueue = 0)",
                )
            return
        v = q.value(top.cq_offset)
        if top.cq_offset + 1 != end:
            self._offset_row(q, rel, f"max row says cq offset {top.cq_offset}, the last unit is {end - 1}")
        elif v is not None and v[0] != top.commitlog_offset:
            self._offset_row(
                q,
                rel,
                f"max row says commit-log offset {top.commitlog_offset}, unit {top.cq_offset} points at {v[0]}",
            )

    def _rocksdb_min_row(self, q, rel: str) -> None:
        """The ``min`` row (``#getMinCqOffset``): without it the broker corrects the min offset
        at start (info); it must not name a cq offset before the first unit."""
        first, end = q.key_bounds
        low = q.offset_rows.get("min")
        if end <= first:
            return
        if low is None:
            self._offset_row(
                q, rel, "no min row: the broker corrects the min offset from the commit log at start", severity=INFO
            )
        elif low.cq_offset < first:
            self._offset_row(q, rel, f"min row says cq offset {low.cq_offset}, the first unit is {first}")

    def rocksdb_dispatched(self) -> int | None:
        """For a RocksDB consume queue, the commit-log offset dispatch has reached
        (``CHECKPOINT_TOPIC``, ``RocksDBConsumeQueueOffsetTable#getMaxPhyOffset``; 0 without
        the row, so the broker dispatches everything again): a message below it should have
        its unit, one at or past it is dispatched at start. The store checkpoint's
        logicsMsgTimestamp is not kept by this queue. None for file queues."""
        db = getattr(self, "rocksdb", None)
        if db is None:
            return None
        db.offset_table()
        return db.max_phy_offset if db.max_phy_offset is not None else 0

    def check_rocksdb(self) -> None:
        """The dispatch checkpoint (``RocksDBConsumeQueueOffsetTable#getMaxPhyOffset``) against
        the queues' max rows and the commit log's end, after the scan."""
        db = getattr(self, "rocksdb", None)
        if db is None or db.offsets is None:
            return
        rel = self.rel(self.config.consumequeue_dir)
        cp = db.max_phy_offset
        tops = [r["max"].commitlog_offset for r in db.offset_table().values() if "max" in r]
        if cp is None:
            if tops:
                self._add(
                    "rocksdb.checkpoint",
                    rel,
                    None,
                    "no CHECKPOINT_TOPIC row: the broker re-dispatches the commit log from its start into the queues",
                )
            return
        if cp > self.cl_end:
            self._add(
                "rocksdb.checkpoint",
                rel,
                None,
                f"the checkpoint says dispatch reached {cp}, past the commit "
                f"log's end {self.cl_end}: the broker truncates the queues to the log at start",
                severity=ERROR,
            )
        elif tops and max(tops) >= cp:
            self._add(
                "rocksdb.checkpoint",
                rel,
                None,
                f"a queue's max row points at {max(tops)}, at or past the checkpoint {cp}",
            )

    def close_rocksdb(self) -> None:
        db = getattr(self, "rocksdb", None)
        if db is not None:
            db.close()
