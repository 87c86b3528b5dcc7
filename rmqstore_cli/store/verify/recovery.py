"""Checkpoint, abort file and what the broker's recovery would do next (STORE-FORMAT §6, §8)."""
from __future__ import annotations

from rmqstore_cli.store.checkpoint import StoreCheckpoint
from rmqstore_cli.store.commitlog.dledger import header_of

class RecoveryChecks:
    """The recovery part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_checkpoint(self) -> None:
        cp = self.checkpoint
        if cp is None or self.messages == 0:
            return
        top = self.max_store_ts
        for name, v, off in (("physicMsgTimestamp", cp.physic_msg_timestamp, 0),
                             ("logicsMsgTimestamp", cp.logics_msg_timestamp, 8),
                             ("indexMsgTimestamp", cp.index_msg_timestamp, 16)):
            if v > top:
                self._add("checkpoint.ahead", "checkpoint", off, f"{name} {v} is newer than the newest message "
                          f"({top}): {v - top} ms of flushed data are missing")

    def check_recovery(self) -> None:
        """Which recovery the broker runs next (§8) and what it would truncate."""
        self.check_dledger()
        files = self.mfq.files
        if not files:
            return
        cp = self.checkpoint or StoreCheckpoint()
        if self.abort and not header_of(self.config, files[-1]):  # DLedgerCommitLog#recover: one way
            start = None
            for f in reversed(files):
                pos = self.first_records.get(f.file_from_offset)
                if pos != 0:
                    continue
                c = self._check_at(f.file_from_offset)
                if c is None or c.message is None:
                    continue
                ts = c.message.store_timestamp
                if ts != 0 and ts <= cp.min_timestamp:
                    start = f
                    break
            start = start or files[0]
            kind = "abnormal"
        else:
            start = files[max(0, len(files) - 3)]
            kind = "normal"
        stops = sorted(s for s in self.stops if s[0] >= start.file_from_offset)
        cut = stops[0] if stops else None
        process = cut[0] if cut else self.cl_end
        later = [f.name for f in files if f.file_from_offset > process]
        if cut is not None and (process < self.cl_end or later):
            off = process - self._cl_base(process)
            self._add("recovery.truncate", cut[2], off,
                      f"{kind} recovery (from file {start.name}) stops at {process} ({cut[1]}): the broker would "
                      f"truncate the commit log there" + (f", delete {len(later)} later file(s)" if later else "")
                      + f" and drop consume-queue units from {process} on; {max(0, self.cl_end - process)} bytes "
                      "of data after it would be lost", physical_offset=process)
        if self.abort:
            idx_del = [f.name for f in self.index_files if f.end_ts > cp.index_msg_timestamp]
            self._add("abort.unclean-shutdown", "abort", None,
                      f"the last shutdown was not clean: abnormal recovery from file {start.name} "
                      f"(first record's store time <= checkpoint min time {cp.min_timestamp}), re-dispatching every "
                      f"message from {start.file_from_offset}; the log would end at {process}"
                      + ("" if process >= self.cl_end else f" (cutting {self.cl_end - process} bytes)")
                      + f"; index files newer than indexMsgTimestamp {cp.index_msg_timestamp} deleted: "
                      + (", ".join(idx_del) if idx_del else "none"),
                      recovery_start=start.file_from_offset, truncate_at=process, index_deleted=idx_del)

