"""Where a DLedger commit log lies (``DLedgerConfig``): the broker's config decides it, and
the store's paths (``StoreConfig.commitlog_dirs``) need it before any file is read; the
entry format itself is ``store/commitlog/dledger.py``'s."""

from __future__ import annotations

from pathlib import Path

from rmqstore_cli.errors import StoreError


def dledger_dir(config) -> Path | None:
    """``DLedgerConfig#getDefaultPath``: ``<storePathRootDir>/dledger-<dLegerSelfId>``, when the
    config enables DLedger, or (``enableDLegerCommitLog`` not set) the one ``dledger-*``
    directory holding ``data/`` on disk. An explicit ``false`` reads the plain log."""
    root = config.root
    if config.enable_dleger_commit_log:
        if config.dleger_self_id:
            return root / f"dledger-{config.dleger_self_id}"
    elif "enable_dleger_commit_log" in config.explicit:
        return None
    try:
        found = sorted(p for p in root.glob("dledger-*") if (p / "data").is_dir())
    except OSError:
        return None
    if len(found) > 1:
        raise StoreError(
            f"{len(found)} DLedger directories ({', '.join(p.name for p in found)})",
            path=root,
            hint="pass ⟦broker_conf⟧ with dLegerSelfId",
        )
    return found[0] if found else None


def data_dir(config) -> Path | None:
    """``DLedgerConfig#getDataStorePath``: ``storePathDLedgerCommitLog`` or ``<dledger dir>/data``."""
    d = dledger_dir(config)
    if d is None:
        return None
    if config.store_path_dledger_commit_log:
        return Path(config.store_path_dledger_commit_log)
    return d / "data"
