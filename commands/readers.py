"""Opening a store the way the read commands that use the index do (index-lookup, decode-msgid)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def open_indexed(
    store: Path | None,
    broker_conf: Path | None,
    commitlog_file_size: int | None,
    index_slots: int | None,
    index_max: int | None,
    allow_odd_size: bool,
    zone: Any,
) -> Any:
    """The store (``MessageStore``) with its index, its sizes from broker.conf and the
    options; stderr says where it came from and which files are of an odd size."""
    from rmqstore_cli.commands.common import load_config, warn_odd_files

    from rmqstore_cli.store.message_store import MessageStore

    cfg = load_config(
        store, broker_conf, commitlog_file_size=commitlog_file_size, index_slots=index_slots, index_max=index_max
    )
    cfg.allow_odd_size = allow_odd_size
    st = MessageStore.open(cfg, zone)
    warn_odd_files(cfg)
    return st
