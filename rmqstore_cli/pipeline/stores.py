"""The pipeline's units of work: stores (``--store`` paths, ``--store-glob`` patterns), one
task per commit-log file; no Spark in here.

A unit is one commit-log file of one store (the broker never splits a record across
files). Units are small picklable tuples, so Spark ships them to executors, which open
the store themselves and run the same engine code as the local engine.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rmqstore_cli.errors import UsageError

if TYPE_CHECKING:  # a hint only: verify and rebuild-index never filter (start-up)
    from rmqstore_cli.store.records.filters import MessageFilter

#: ``scheme:/…`` with a scheme of two or more characters (one would be a drive letter): a
#: Hadoop file system URI (hdfs:, s3a:, gs:, abfs:, oss:, viewfs:, …), which only Spark's
#: writer reaches; ``file:`` names a local path.
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")


def hadoop_uri(text: str) -> bool:
    """``text`` (an ``--output`` as typed) is a URI for Hadoop's file systems, not a local path."""
    return URI.match(text) is not None and not text.lower().startswith("file:")


def local_path(text: str) -> Path:
    """A local ``--output`` as a path: a ``file:`` URI's path, or ``text`` itself."""
    if text.lower().startswith("file:"):
        from urllib.parse import unquote, urlsplit

        return Path(unquote(urlsplit(text).path))
    return Path(text)


@dataclass(frozen=True)
class StoreSpec:
    """How to open one store: its path, broker.conf and size overrides; ``label`` names it
    in every row and finding."""

    path: str
    label: str
    broker_conf: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    #: export's ``store`` column and partition value (:func:`~rmqstore_cli.pipeline.export_run.store_names`);
    #: None: the label
    name: str | None = None

    @property
    def partition(self) -> str:
        """The value of export's ``store`` column for this store's rows."""
        return self.label if self.name is None else self.name

    def open(self):
        from rmqstore_cli.store.layout.config import StoreConfig
        from rmqstore_cli.store.message_store import MessageStore

        cfg = StoreConfig.load(self.path, self.broker_conf, **dict(self.sizes))
        return MessageStore.open(cfg)


@dataclass(frozen=True)
class FileTask:
    """One commit-log file of one store; for export, the records of
    [``start``, ``stop``) in it (None: the file's bounds) that pass ``flt``."""

    store: StoreSpec
    file_name: str
    file_from_offset: int
    file_size: int
    body: bool = False  # export: include message bodies
    flt: MessageFilter | None = None
    start: int | None = None
    stop: int | None = None


def store_specs(
    paths: list[str], broker_conf: str | None, sizes: dict[str, int | None], patterns: list[str] = ()
) -> list[StoreSpec]:
    """The stores of ``--store`` (each a path, taken as it is: ``s[1]`` or ``a*b`` is a directory
    of that name) then of ``--store-glob`` (each a shell pattern, ``~`` expanded, its matching
    directories in sorted order). Labels are the paths as given, or as matched. A pattern
    matching no directory, or a store named twice (same real path), is a usage error."""
    named = [_named(p) for p in paths]
    for pattern in patterns:
        named += [_named(h) for h in _glob_dirs(pattern)]
    seen: dict[str, str] = {}
    for p, label in named:
        key = os.path.realpath(p)
        if key in seen:
            raise UsageError(f"a store is named twice: {seen[key]} and {label}")
        seen[key] = label
    sz = tuple(sorted((k, v) for k, v in sizes.items() if v is not None))
    return [StoreSpec(str(Path(p)), label, broker_conf, sz) for p, label in named]


def _named(path: str) -> tuple[str, str]:
    """A store's path and its label: the path as given, without a trailing slash."""
    return path, path.rstrip("/") or path


def _glob_dirs(pattern: str) -> list[str]:
    """The directories a ``--store-glob`` pattern matches, sorted; none is a usage error."""
    hits = sorted(h for h in glob.glob(os.path.expanduser(pattern)) if os.path.isdir(h))
    if not hits:
        raise UsageError(
            f"⟦store_glob⟧ {pattern!r} matches no directory",
            hint="check the pattern; a store whose name holds * ? or [ is given with ⟦store⟧",
        )
    return hits


def file_tasks(
    stores: list[StoreSpec],
    body: bool = False,
    flt: MessageFilter | None = None,
    from_offset: int | None = None,
    to_offset: int | None = None,
) -> list[FileTask]:
    """One task per commit-log file, each store opened (and checked) once on the driver.
    ``from_offset``/``to_offset``: physical offsets [from, to) in each store, the start a
    message start as dump-commitlog requires (``log_range.walk_range``); files outside the
    range get no task."""
    from rmqstore_cli.store.answers.log_range import walk_range

    flt = flt if flt is not None and flt.any() else None
    out = []
    for s in stores:
        ms = s.open()
        try:
            cl = ms.commitlog
            start = walk_range(cl, from_offset, to_offset, None).start if from_offset is not None else None
            for f in cl.files:
                bounds = _file_bounds(f.file_from_offset, cl.file_size, from_offset, to_offset, start)
                if bounds is not None:
                    out.append(FileTask(s, f.name, f.file_from_offset, cl.file_size, body, flt, *bounds))
        finally:
            ms.close()
    return out


def _file_bounds(
    lo: int, size: int, from_offset: int | None, to_offset: int | None, start: int | None
) -> tuple[int | None, int | None] | None:
    """A file's [start, stop) inside the range (None: the file's own bound), or None when the
    file lies outside it; ``start`` is the range's first message (``walk_range``)."""
    hi = lo + size
    if (from_offset is not None and hi <= from_offset) or (to_offset is not None and lo >= to_offset):
        return None
    first = start if start is not None and start > lo else None
    stop = to_offset if to_offset is not None and to_offset < hi else None
    return first, stop
