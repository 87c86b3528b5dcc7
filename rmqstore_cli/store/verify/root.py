"""verify accounts for every entry of the store root (``store.unchecked-entry``,
``store.unknown-entry``), by the one table of :mod:`rmqstore_cli.store.layout.root_entries`."""

from __future__ import annotations

import os
from pathlib import Path

from rmqstore_cli.store.checks.findings import CHECKS, check_table
from rmqstore_cli.store.layout.root_entries import classify

CHECKS.update(
    check_table(
        """
store.unchecked-entry  info     a store-root entry a broker writes but verify does not check (named, with the broker
                                code that writes it)
store.unknown-entry    warning  a store-root entry no 4.9.x or 5.x broker writes: verify does not know it
"""
    )
)


class RootChecks:
    """The store-root part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def check_root_entries(self) -> None:
        """One finding per root entry verify does not read (the commit-log directories, which
        ``storePathCommitLog`` may name anything, are read)."""
        try:
            names = sorted(os.listdir(self.root))
        except OSError:
            return  # the store's own open names an unreadable root
        cl_dirs = [Path(d) for d in self.config.commitlog_dirs]
        for name in names:
            p = self.root / name
            if any(_same(p, d) for d in cl_dirs):
                continue
            e = classify(name)
            if e is None:
                self._add("store.unknown-entry", name, None, f"{name}: no broker writes this in a store root; not read")
            elif not e.checked:
                self._add("store.unchecked-entry", name, None, f"{name}: {e.what} ({e.source}); not checked")


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
