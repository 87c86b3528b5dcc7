"""What is eating the disk: messages and bytes per topic, queue and file, and the size of
every part of the store root (``rmqstore stats``).

Two ways to count, named in the answer's ``method``:

* ``consumequeue`` (the default, :func:`~rmqstore_cli.store.answers.stats_queues.from_consume_queues`):
  each queue's units read as numpy arrays, the commit log probed for a few store times;
* ``commitlog`` (``--exact``, :func:`~rmqstore_cli.store.answers.stats_exact.from_commit_log`): one
  columnar walk of every commit-log file.

Both give per-queue :class:`Row` objects and per-file :class:`FileRow` objects (commit-log,
consume-queue and index files: time range and fill). This module holds those records, the
sizes on disk (:func:`disk_usage` accounts for every entry of the store root as a
:class:`Component`, the unknown ones named), the index files' rows and the rows as asked.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.derive import numpy_dtype
from rmqstore_cli.formats.index import INDEX_HEADER_SIZE, IndexHeader

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.layout.root_entries import classify
from rmqstore_cli.store.queues.index import index_file_paths
from rmqstore_cli.store.records.fields import fields_dict, keys_dict

_INDEX_HEADER = numpy_dtype(IndexHeader)


@dataclass
class Row:
    """One queue's (or, summed, one topic's) messages and bytes in the commit log."""

    topic: str
    queue_id: int | None
    messages: int = 0
    bytes: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    cq_bytes: int = 0
    not_in_cq: int | None = None
    #: Units pointing where no commit-log file is, past the first (not in the output: a note).
    dangling: int = 0
    #: A queue of multi-dispatch units (store/write/lmq.py): its messages are other queues' too.
    multi_dispatch: bool = False
    #: Of ``bytes``, those of multi-dispatch queues folded in (a topic's): counted elsewhere.
    shared_bytes: int = 0

    def add(self, other: Row) -> None:
        """Fold another queue's counts into this row (a topic's total)."""
        self.messages += other.messages
        self.bytes += other.bytes
        self.shared_bytes += other.bytes if other.multi_dispatch else other.shared_bytes
        self.cq_bytes += other.cq_bytes
        self.multi_dispatch |= other.multi_dispatch
        if other.not_in_cq is not None:
            self.not_in_cq = (self.not_in_cq or 0) + other.not_in_cq
        self.times(other.first_store_timestamp, other.last_store_timestamp)

    def times(self, first: int | None, last: int | None) -> None:
        """Widen the time range to include ``[first, last]``."""
        if first is not None:
            self.first_store_timestamp = (
                first if self.first_store_timestamp is None else min(self.first_store_timestamp, first)
            )
        if last is not None:
            self.last_store_timestamp = (
                last if self.last_store_timestamp is None else max(self.last_store_timestamp, last)
            )

    @property
    def once_bytes(self) -> int:
        """The bytes of records no other row counts first: none for a multi-dispatch queue
        (its units point at another topic's records, ``ConsumeQueue#multiDispatchLmqQueue``)."""
        return 0 if self.multi_dispatch and self.queue_id is not None else self.bytes - self.shared_bytes

    def share(self, total_once: int) -> float | None:
        """This row's part of the message bytes counted once (``total_once``): the rows'
        shares add up to 1; None for a row of multi-dispatch units alone."""
        if self.multi_dispatch and not self.once_bytes:
            return None
        return round(self.once_bytes / total_once, 6) if total_once else 0.0

    def to_dict(self, total_once: int) -> dict:
        d = {"topic": self.topic}
        if self.queue_id is not None:
            d["queue_id"] = self.queue_id
        d.update(
            messages=self.messages,
            bytes=self.bytes,
            first_store_timestamp=self.first_store_timestamp,
            last_store_timestamp=self.last_store_timestamp,
            share=self.share(total_once),
            cq_bytes=self.cq_bytes,
        )
        if self.not_in_cq is not None:
            d["not_in_cq"] = self.not_in_cq
        if self.multi_dispatch:
            d["multi_dispatch"] = True
        return d


@dataclass
class FileRow:
    """One commit-log, consume-queue or index file: its size, what it holds, and how full it is.
    ``entries``: records (commit log), live units (consume queue) or index entries."""

    component: str
    file: str
    bytes: int
    disk_bytes: int
    entries: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    fill: float | None = None
    topic: str | None = None
    queue_id: int | None = None

    def to_dict(self) -> dict:
        d = keys_dict(self, "component file topic queue_id bytes disk_bytes entries")
        d.update(first_store_timestamp=self.first_store_timestamp, last_store_timestamp=self.last_store_timestamp)
        d["fill"] = None if self.fill is None else round(self.fill, 6)
        return d


@dataclass
class Component:
    """One part of the store: a component directory, or another entry of the store root."""

    component: str  # commitlog, consumequeue, index, config or other
    path: str
    files: int = 0
    bytes: int = 0
    disk_bytes: int = 0
    known: bool = True

    def to_dict(self) -> dict:
        return fields_dict(self)


@dataclass
class Stats:
    """What :func:`from_consume_queues` or :func:`from_commit_log` found."""

    method: str
    queues: dict[tuple[str, int], Row]
    commitlog_bytes: int
    files: list[FileRow] = field(default_factory=list)
    not_in_cq: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ sizes on disk


def file_sizes(path: Path) -> tuple[int, int]:
    """(apparent size, allocated bytes) of one file, links followed (a sparse, preallocated
    file takes less disk than its size)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise safefs.os_error(e, path, "stat") from None
    return st.st_size, st.st_blocks * 512


def tree_sizes(path: Path, warnings: list[str]) -> tuple[int, int, int]:
    """(files, bytes, allocated bytes) below ``path`` without following links (a link is
    counted as itself); the top ``path`` itself is followed. Unreadable directories are
    warned about, not skipped silently."""
    files = size = disk = 0
    try:
        st = os.stat(path)
    except OSError as e:
        warnings.append(f"{path}: cannot stat: {e.strerror}")
        return 0, 0, 0
    if not stat.S_ISDIR(st.st_mode):
        return 1, st.st_size, st.st_blocks * 512
    stack = [path]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError as e:
            warnings.append(f"{d}: cannot list: {e.strerror}; its files are not counted")
            continue
        for e in entries:
            try:
                est = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(est.st_mode):
                stack.append(Path(e.path))
            else:
                files += 1
                size += est.st_size
                disk += est.st_blocks * 512
    return files, size, disk


def disk_usage(config, warnings: list[str]) -> list[Component]:
    """Every entry of the store root as a :class:`Component`, the commit log's directories
    (``storePathCommitLog`` may lie elsewhere) included; entries no broker writes are
    ``known: false``. Biggest first."""
    root = config.root
    cl_dirs = [Path(d) for d in config.commitlog_dirs]
    out = [_commitlog_component(d, root, warnings) for d in cl_dirs]
    for name in _root_names(root):
        p = root / name
        if not any(_same(p, d) for d in cl_dirs):
            out.append(_root_component(config, p, name, cl_dirs, warnings))
    out.sort(key=lambda c: (-c.bytes, c.path))
    return out


def _commitlog_component(d: Path, root: Path, warnings: list[str]) -> Component:
    """One commit-log directory (a missing one is listed, empty: the config names it)."""
    if not d.exists():
        return Component("commitlog", rel_path(d, root))
    return Component("commitlog", rel_path(d, root), *tree_sizes(d, warnings))


def _root_names(root: Path) -> list[str]:
    """The store root's entries, sorted; an unreadable root is an error (nothing to count)."""
    try:
        return sorted(e.name for e in os.scandir(root))
    except OSError as e:
        raise safefs.os_error(e, root, "list the store directory") from None


def _root_component(config, p: Path, name: str, cl_dirs: list[Path], warnings: list[str]) -> Component:
    """An entry of the store root other than a commit-log directory, named by what a broker
    writes there (store/layout/root_entries.py); unknown entries are ``other``, ``known: false``."""
    dl = config.dledger_dir
    if dl is not None and _same(p, dl):
        return _dledger_component(p, name, dl, cl_dirs, warnings)
    e = classify(name)
    return Component(e.component if e else "other", name, *tree_sizes(p, warnings), known=e is not None)


def _dledger_component(p: Path, name: str, dl: Path, cl_dirs: list[Path], warnings: list[str]) -> Component:
    """DLedger's directory less its data/ when that is the commit log (counted there): its
    index/, checkpoint and currterm."""
    whole = tree_sizes(p, warnings)
    data = tree_sizes(p / "data", warnings) if any(d.parent == dl for d in cl_dirs) else (0, 0, 0)
    return Component("other", name, *(a - b for a, b in zip(whole, data, strict=True)), known=True)


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def rel_path(p: Path, root: Path) -> str:
    try:
        return str(Path(p).relative_to(root))
    except ValueError:
        return str(p)


def commitlog_total(commitlog) -> int:
    """The commit-log files' size (the summary's ``commitlog_bytes``)."""
    return sum(file_sizes(f.path)[0] for f in commitlog.files)


def unread_entries(store) -> list[str]:
    """Notes naming what lies in the store's data directories but is not read as a store file
    (its bytes still count in the components): commit-log files and consume-queue entries
    whose names the broker would not load, files where queue directories belong."""
    notes = [f"{p}: not a commit-log file name; not read" for p in store.commitlog.queue.strays]
    cq_dir = store.config.consumequeue_dir
    if store.rocksdb_cq is not None:  # the directory is the database: its files are read through it
        return notes
    try:
        topics = sorted(os.scandir(cq_dir), key=lambda e: e.name)
    except OSError:
        return notes
    for t in topics:
        notes += _unread_below(t)
    return notes


def _unread_below(t: os.DirEntry) -> list[str]:
    """Notes for one entry of the consume-queue directory: not a topic directory, unlistable, or
    entries in it that are not queue directories (a queue id is ASCII digits)."""
    if not t.is_dir():
        return [f"{t.path}: not a topic directory; not read"]
    try:
        queues = sorted(os.scandir(t.path), key=lambda e: e.name)
    except OSError as e:
        return [f"{t.path}: cannot list: {e.strerror}; not read"]
    return [f"{q.path}: not a queue directory; not read" for q in queues if not _is_queue_dir(q)]


def _is_queue_dir(q: os.DirEntry) -> bool:
    return q.is_dir() and q.name.isdigit() and q.name.isascii()


# ------------------------------------------------------------------ index files


def index_file_rows(config) -> list[FileRow]:
    """Each index file from its 40-byte header (``IndexHeader#load``): time range, and fill =
    indexCount / maxIndexNum (``IndexFile#isWriteFull``)."""
    out = []
    for p in index_file_paths(config.index_dir):
        fd = safefs.open_read_only(p)
        try:
            raw = os.pread(fd, INDEX_HEADER_SIZE, 0)
        except OSError as e:
            raise safefs.os_error(e, p, "read") from None
        finally:
            os.close(fd)
        size, disk = file_sizes(p)
        if len(raw) < INDEX_HEADER_SIZE:
            raise StoreError(f"index file has {len(raw)} bytes, less than its {INDEX_HEADER_SIZE}-byte header", path=p)
        h = np.frombuffer(raw, _INDEX_HEADER)[0]
        count = max(int(h["index_count"]), 1)  # IndexHeader#load: a stored count <= 0 reads as 1
        begin, end = int(h["begin_timestamp"]), int(h["end_timestamp"])
        out.append(
            FileRow(
                "index",
                rel_path(p, config.root),
                size,
                disk,
                count - 1,
                begin or None,
                end or None,
                None if config.index_geometry_error is not None else count / config.max_index_num,
            )
        )
    return out


# ------------------------------------------------------------------ rows as asked


def once_total(queues: dict[tuple[str, int], Row]) -> int:
    """The message bytes the queues count, each record once (multi-dispatch queues left out):
    the denominator of every row's ``share``."""
    return sum(r.once_bytes for r in queues.values())


def topic_rows(queues: dict[tuple[str, int], Row]) -> list[Row]:
    """Queue rows summed per topic."""
    out: dict[str, Row] = {}
    for (t, _), r in queues.items():
        out.setdefault(t, Row(t, None, not_in_cq=None if r.not_in_cq is None else 0)).add(r)
    return list(out.values())


def biggest_first(rows: list, top: int | None) -> list:
    """Rows by bytes, biggest first (ties: by name), the first ``top`` of them."""
    key = (
        (lambda r: (-r.bytes, r.component, r.file))
        if rows and isinstance(rows[0], FileRow)
        else (lambda r: (-r.bytes, -r.messages, r.topic, r.queue_id if r.queue_id is not None else -1))
    )
    rows = sorted(rows, key=key)
    return rows if top is None else rows[:top]
