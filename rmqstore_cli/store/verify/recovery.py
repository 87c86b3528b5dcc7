"""Checkpoint, abort file and what the broker's recovery would do next (docs/format/checkpoint.md,
docs/format/recovery.md#recovery)."""

from __future__ import annotations

from rmqstore_cli.store.commitlog.dledger import header_of
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint


class RecoveryChecks:
    """The recovery part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_checkpoint(self) -> None:
        cp = self.checkpoint
        if cp is not None:
            self.files["checkpoint"] += 1
        if cp is None or self.messages == 0:
            return
        top = self.max_store_ts
        for name, v, off in (
            ("physicMsgTimestamp", cp.physic_msg_timestamp, 0),
            ("logicsMsgTimestamp", cp.logics_msg_timestamp, 8),
            ("indexMsgTimestamp", cp.index_msg_timestamp, 16),
        ):
            if v > top:
                self._add(
                    "checkpoint.ahead",
                    "checkpoint",
                    off,
                    f"{name} {v} is newer than the newest message ({top}): {v - top} ms of flushed data are missing",
                )

    def _normal_start(self, files: list) -> tuple:
        """The file ``CommitLog#recoverNormally`` starts from, for the broker version
        (``startup.normal_recovery_start``: the third-last file before 5.3.2; from 5.3.2 the
        last one starting at or before maxPhyOffsetOfConsumeQueue), and how to name it."""
        from rmqstore_cli.store.checks.startup import (
            normal_recovery_start,
            queue_ends,
            recovers_from_cq,
            resolve_version,
        )

        if header_of(self.config, files[-1]):  # DLedgerMmapFileStore#recover: the third-last file
            return files[max(0, len(files) - 3)], "normal"
        version = resolve_version(self.config.root, self.opt.broker_version)[0]
        if not recovers_from_cq(version):
            return files[max(0, len(files) - 3)], "normal"
        max_cq = self.rocksdb_dispatched()  # RocksDBConsumeQueueStore#getMaxPhyOffsetInConsumeQueue
        if max_cq is None:
            max_cq = queue_ends(self.config)[1]
        i = normal_recovery_start(version, [f.file_from_offset for f in files], max_cq)
        return files[i], f"5.3.2+ normal (maxPhyOffsetOfConsumeQueue {max_cq})"

    def _blank_advice(self, check: str, process: int) -> str:
        """A file before the last whose data ends in zeros without a BLANK (``commitlog.blank``):
        a BLANK written there sends recovery on to the next file instead (``repair --pad``),
        when nothing but zeros follows (stale bytes after them could be records: no advice)."""
        from rmqstore_cli.store.files.arrays import file_array
        from rmqstore_cli.store.verify.checks import first_nonzero

        f = self.mfq.find(process)
        if check != "commitlog.blank" or f is None:
            return ""
        buf = f.buffer()
        if first_nonzero(f.path, file_array(buf), process - f.file_from_offset) is not None:
            return ""
        return self._pad_advice(f, len(buf))

    def _abnormal_start(self, files: list, cp: StoreCheckpoint):
        """The file ``CommitLog#recoverAbnormally`` starts from: the last one whose first record
        passes ``isMappedFileMatchedRecover`` (the first file when none does)."""
        max_cq = self.rocksdb_dispatched()
        for f in reversed(files):
            if self.first_records.get(f.file_from_offset) == 0 and self._matches_recover(f, cp, max_cq):
                return f
        return files[0]

    def _matches_recover(self, f, cp: StoreCheckpoint, max_cq: int | None) -> bool:
        """``CommitLog#isMappedFileMatchedRecover`` for the file's first record: with the RocksDB
        consume queue (rocketmq-all-5.2.0, enableRocksDBStore) its offset is at or before the
        dispatch checkpoint; otherwise its store time is set and at or before the checkpoint's
        min timestamp."""
        c = self._check_at(f.file_from_offset)
        if c is None or c.message is None:
            return False
        if max_cq is not None:
            return c.message.physical_offset <= max_cq
        ts = c.message.store_timestamp
        return ts != 0 and ts <= cp.min_timestamp

    def check_recovery(self) -> None:
        """Which recovery the broker runs next (docs/format/recovery.md#recovery) and what it would truncate."""
        self.check_dledger()
        files = self.mfq.files
        if not files:
            return
        cp = self.checkpoint or StoreCheckpoint()
        start, kind = self._recovery_start(files, cp)
        cut = min((s for s in self.stops if s[0] >= start.file_from_offset), default=None)
        process = cut[0] if cut else self.cl_end
        self.recovery_cut = process  # the epoch file's check (verify/epochs.py) drops epochs from here
        if cut is not None:
            self._report_truncate(kind, start, files, cut)
        if self.abort:
            self._report_abort(cp, start, process)

    def _recovery_start(self, files: list, cp: StoreCheckpoint) -> tuple:
        """The file recovery starts from and the recovery's name: abnormal when the abort file
        is there, except on a DLedger log (``DLedgerCommitLog#recover`` has one way)."""
        if self.abort and not header_of(self.config, files[-1]):
            return self._abnormal_start(files, cp), "abnormal"
        return self._normal_start(files)

    def _report_truncate(self, kind: str, start, files: list, cut: tuple) -> None:
        """``recovery.truncate``: the first stop after the recovery start, when the log or a
        later file goes past it (``CommitLog#truncateDirtyFiles`` and the queues' truncation)."""
        process = cut[0]
        later = [f.name for f in files if f.file_from_offset > process]
        if process >= self.cl_end and not later:
            return
        off = process - self._cl_base(process)
        self._add(
            "recovery.truncate",
            cut[2],
            off,
            f"{kind} recovery (from file {start.name}) stops at {process} ({cut[1]}): the broker would "
            f"truncate the commit log there"
            + (f", delete {len(later)} later file(s)" if later else "")
            + f" and drop consume-queue units from {process} on; {max(0, self.cl_end - process)} bytes "
            "of data after it would be lost" + self._blank_advice(cut[1], process),
            physical_offset=process,
            recovery_start=start.file_from_offset,
        )

    def _report_abort(self, cp: StoreCheckpoint, start, process: int) -> None:
        """``abort.unclean-shutdown``: the abort file is present, so the broker recovers abnormally
        and deletes the index files newer than the checkpoint's indexMsgTimestamp."""
        db = self.rocksdb_dispatched()
        idx_del = [f.name for f in self.index_files if f.end_ts > cp.index_msg_timestamp]
        self._add(
            "abort.unclean-shutdown",
            "abort",
            None,
            f"the last shutdown was not clean: abnormal recovery from file {start.name} "
            + (
                f"(first record's store time <= checkpoint min time {cp.min_timestamp})"
                if db is None
                else f"(first record's offset <= the RocksDB dispatch checkpoint {db})"
            )
            + ", re-dispatching every "
            f"message from {start.file_from_offset}; the log would end at {process}"
            + ("" if process >= self.cl_end else f" (cutting {self.cl_end - process} bytes)")
            + f"; index files newer than indexMsgTimestamp {cp.index_msg_timestamp} deleted: "
            + (", ".join(idx_del) if idx_del else "none"),
            recovery_start=start.file_from_offset,
            truncate_at=process,
            index_deleted=idx_del,
        )
