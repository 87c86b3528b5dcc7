"""Work units of the pipeline and what one unit does; no Spark in here.

A unit is one commit-log file of one store (the broker never splits a record across
files). Units are small picklable tuples, so Spark ships them to executors, which open
the store themselves and run the same engine code as the local engine.
"""
from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.errors import UsageError


@dataclass(frozen=True)
class StoreSpec:
    """How to open one store: its path, broker.conf and size overrides; ``label`` names it
    in every row and finding."""

    path: str
    label: str
    broker_conf: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()

    def open(self):
        from rmqstore_cli.store.config import StoreConfig
        from rmqstore_cli.store.message_store import MessageStore

        cfg = StoreConfig.load(self.path, self.broker_conf, **dict(self.sizes))
        return MessageStore.open(cfg)


@dataclass(frozen=True)
class FileTask:
    store: StoreSpec
    file_name: str
    file_from_offset: int
    file_size: int


def expand_stores(patterns: list[str], broker_conf: str | None, sizes: dict[str, int | None]) -> list[StoreSpec]:
    """``--store`` values: paths or globs; labels are the paths as given (unique)."""
    paths: list[str] = []
    for p in patterns:
        hits = sorted(glob.glob(os.path.expanduser(p))) if any(c in p for c in "*?[") else [os.path.expanduser(p)]
        if not hits:
            raise UsageError(f"--store {p!r} matches no directory")
        paths.extend(hits)
    if len(set(paths)) != len(paths):
        raise UsageError("a store is named twice")
    sz = tuple(sorted((k, v) for k, v in sizes.items() if v is not None))
    return [StoreSpec(str(Path(p)), p.rstrip("/"), broker_conf, sz) for p in paths]


def file_tasks(stores: list[StoreSpec]) -> list[FileTask]:
    """One task per commit-log file, each store opened (and checked) once on the driver."""
    out = []
    for s in stores:
        ms = s.open()
        for f in ms.commitlog.files:
            out.append(FileTask(s, f.name, f.file_from_offset, ms.commitlog.file_size))
        ms.close()
    return out


def export_rows(task: FileTask, body: bool, stops: list | None = None) -> Iterator[tuple]:
    """The rows of one commit-log file, as dump-commitlog --format jsonl records (body as
    raw bytes), in :data:`~rmqstore_cli.pipeline.schema.COLUMN_NAMES` order. Where the
    file could not be read is appended to ``stops``."""
    from rmqstore_cli.pipeline.schema import COLUMN_NAMES
    from rmqstore_cli.render import message_dict

    ms = task.store.open()
    cl = ms.commitlog
    try:
        for m in cl.scan(task.file_from_offset, task.file_from_offset + task.file_size, every_file=True):
            d = message_dict(m, "none", True, task.file_name)
            d["body"] = m.body if body else None
            d["store"] = task.store.label
            yield tuple(d.get(c) for c in COLUMN_NAMES)
        if stops is not None:
            stops.extend({"store": task.store.label, "file": x.file, "offset": x.offset, "detail": x.reason}
                         for x in cl.stops)
    finally:
        ms.close()
