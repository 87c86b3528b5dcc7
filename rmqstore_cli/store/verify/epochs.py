"""The 5.x controller-mode epoch file against the commit log (docs/format/ha.md#epoch-file):
checked after recovery, whose cut decides which epochs the broker's next truncation drops."""

from __future__ import annotations

import os

from rmqstore_cli.formats.epoch_file import BACKUP_SUFFIX, EPOCH_FILE_NAME

from rmqstore_cli.store.checks.findings import CHECKS, check_table

CHECKS.update(
    check_table(
        """
epoch.unreadable    error    an epoch-file number Integer#parseInt refuses: the broker's read throws
epoch.rejected      warning  an epoch file CheckpointFile#read rejects (count or CRC): the .bak is read
epoch.skipped-line  warning  an epoch-file line that is not <epoch>-<offset>: the broker skips it
epoch.order         error    an epoch not greater than the one before it (EpochFileCache#appendEntry)
epoch.start-order   error    an epoch's start offset not after the previous epoch's start
epoch.beyond-end    error    an epoch starting past the commit log's end
epoch.truncated     warning  epochs the next start's truncation removes (truncateSuffixByOffset)
"""
    )
)


class EpochChecks:
    """The epoch-file part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_epochs(self) -> None:
        """Findings about ``epochFileCheckpoint`` and its summary (``self.epochs``); nothing
        when the store has neither the file nor its ``.bak`` (not controller mode)."""
        path = self.root / EPOCH_FILE_NAME
        bak = path.with_name(path.name + BACKUP_SUFFIX)
        if not os.path.lexists(path) and not os.path.lexists(bak):
            return  # not controller mode: the epoch modules are not loaded (start-up)
        from rmqstore_cli.store.checks.epoch_check import check_epoch_file
        from rmqstore_cli.store.layout.epoch_file import read_epoch_file

        if self.not_regular(path) or self.not_regular(bak):
            return
        ef = read_epoch_file(self.root)
        if not (ef.main.exists or ef.backup.exists):
            return
        self.files["epochFileCheckpoint"] += int(ef.main.exists) + int(ef.backup.exists)
        log_end = self.cl_end if self.cl_end is not None else 0
        report = check_epoch_file(ef, self.cl_min, log_end, getattr(self, "recovery_cut", None))
        for i in report.issues:
            self._add(i.check, i.file, i.line, i.detail, **i.extra)
        self.epochs = report.summary
