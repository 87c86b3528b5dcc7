"""A queue of fixed-size files named by their start offset (``MappedFileQueue``).

Commit logs and consume queues are such queues: file name = 20-digit start offset,
every file created at its full size (sparse), a new one at ``last + size``. Readers map
files read-only and never change a byte; writers map them read-write.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.errors import FileSizeError, StoreError
from rmqstore_cli.store.files import mapguard
from rmqstore_cli.store.files.safefs import (
    create_sized,
    map_file,
    open_for_write,
    open_regular,
    reserve_ahead,
    stat_regular,
)

#: The largest start offset a file name can have: ``Long.parseLong`` refuses a larger one.
MAX_FILE_OFFSET = (1 << 63) - 1


def regular_size(path: Path) -> int:
    """The size of a data file (links followed); a FIFO, device, socket or directory in its
    place is a StoreError naming it (its ``st_size`` of 0 would otherwise read as "0 bytes")."""
    st, what = stat_regular(path, "stat")
    if what is not None:
        raise StoreError(f"{what} where a store file belongs; only regular files are read", path=path)
    return st.st_size


def offset2file_name(offset: int) -> str:
    """``UtilAll#offset2FileName``: 20-digit zero-padded decimal."""
    return f"{offset:020d}"


@dataclass
class MappedFile:
    path: Path
    file_from_offset: int
    file_size: int
    writable: bool = False
    _mm: mmap.mmap | None = field(default=None, repr=False)
    #: Where a writable file may lie (``StoreConfig.write_roots``); None: its own directory.
    roots: list[Path] | None = field(default=None, repr=False)
    #: Bytes from the start already allocated on disk (:meth:`write`).
    reserved: int = field(default=0, repr=False)
    #: Created by this writer (holes only where nothing was written yet, and every write
    #: reserves first); an existing file's holes may be read, which on a full tmpfs is a SIGBUS.
    fresh: bool = field(default=False, repr=False)
    #: The largest length the file was seen with (``check_sizes``, an earlier mapping): a
    #: shorter one now means it shrank while the command read it (mapguard.py).
    seen: int = field(default=0, repr=False)
    #: Its length when it was last opened (mapped, read or ``check_sizes``); None: not yet.
    length: int | None = field(default=None, repr=False)
    #: Listed as a regular file, not a link (its directory entry's type, known without a
    #: ``stat``): a check for what is not a regular file can pass it by.
    plain: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def buffer(self) -> mmap.mmap | bytes:
        """The file's bytes as a mapping (read-only unless the queue is writable).

        A writable file is opened through ``safefs.open_for_write``: never through a link,
        and only inside the roots, so a planted symlink is refused, not written through."""
        if self._mm is None:
            if self.writable:
                fd = open_for_write(self.path, self.roots or [self.path.parent])
                length = os.fstat(fd).st_size
            else:
                fd, st = open_regular(self.path)
                length = st.st_size
            try:
                if length < self.seen:  # what was read of it before no longer holds
                    raise mapguard.shrunk(self.path, length)
                self.seen = self.length = length
                if length == 0:
                    return b""
                self._mm = map_file(fd, length, self.path, write=self.writable, fresh=self.writable and self.fresh)
            finally:
                os.close(fd)
        return self._mm

    def read_prefix(self, limit: int) -> bytes | None:
        """The data of a preallocated read-only file, read with one ``pread`` instead of mapped:
        when the file has its configured size and its data is one extent of at most ``limit``
        bytes from its start, followed by a hole to its end (every byte after the result is
        zero). A copy cannot SIGBUS and needs no guard, no page table and no mapping kept; a
        file cut shorter while it is read is a ShrunkError at once (mapguard's ``FileCopy``
        does the same). None for any other file (full, data after a hole, another length,
        no ``SEEK_HOLE``): :meth:`buffer` maps it, and says what fails."""
        if self.writable or self._mm is not None or not hasattr(os, "SEEK_HOLE"):
            return None
        fd, st = open_regular(self.path)
        try:
            hole = self._prefix_end(fd, st.st_size, limit)
            if hole is None:
                return None
            data = os.pread(fd, hole, 0)
        except OSError:  # whatever the system cannot tell, the mapping reads (and names)
            return None
        finally:
            os.close(fd)
        if len(data) < hole:
            raise mapguard.shrunk(self.path, len(data))
        self.seen = self.length = st.st_size
        return data

    def _prefix_end(self, fd: int, length: int, limit: int) -> int | None:
        """Where the data of :meth:`read_prefix`'s file ends (its one hole starts), or None
        when it is not such a file (another length than its size, shorter than seen before:
        :meth:`buffer` says it shrank)."""
        if length != self.file_size or length < self.seen:
            return None
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
        if hole > limit or hole >= length or not _hole_to_end(fd, hole):
            return None
        return hole

    def write(self, pos: int, data: bytes) -> None:
        """``data`` at ``pos`` of a writable file, through its mapping. The range is allocated
        first (``safefs.reserve``, a chunk ahead): on a full disk a store to a hole of a shared
        mapping is a SIGBUS no handler turns into an error line; this says ENOSPC instead."""
        end = pos + len(data)
        self.reserved = reserve_ahead(self.path, self.roots or [self.path.parent], self.reserved, end, self.file_size)
        self.buffer()[pos:end] = data

    def close(self) -> None:
        if self._mm is not None:
            if self.writable:
                self._mm.flush()
            try:
                self._mm.close()
            except BufferError:  # a view (a MessageBlock's columns) still uses it: unmapped when that goes
                pass
            self._mm = None


def _hole_to_end(fd: int, hole: int) -> bool:
    """Whether no data follows offset ``hole`` of ``fd`` (``SEEK_DATA`` finds none: ENXIO)."""
    try:
        os.lseek(fd, hole, os.SEEK_DATA)
    except OSError as e:
        return e.errno == errno.ENXIO
    return False


class MappedFileQueue:
    """The files of one directory (or several, for a multi-path commit log), by offset."""

    def __init__(
        self,
        dirs: list[Path] | Path,
        file_size: int,
        writable: bool = False,
        roots: list[Path] | None = None,
        listed: list[os.DirEntry] | None = None,
    ):
        """``listed``: the entries of the one directory ``dirs``, listed already (:func:`queue_tree`)."""
        self.dirs = [dirs] if isinstance(dirs, Path) else [Path(d) for d in dirs]
        self.file_size = file_size
        self.writable = writable
        #: Where a writer may create and write files (``StoreConfig.write_roots``); not given:
        #: the directories holding the queue's (nothing planted below them may lead out), or
        #: None for a read-only queue (20 000 queues opened: no ``Path.parent`` each).
        self.roots = list(roots) if roots is not None else ([d.parent for d in self.dirs] if writable else None)
        self.files: list[MappedFile] = []
        #: Names found that are not 20-digit offsets (the broker would refuse to load).
        self.strays: list[Path] = []
        #: Directories named like a data file (``check_sizes`` refuses them).
        self.not_regular: list[Path] = []
        self.load(listed if len(self.dirs) == 1 else None)

    @classmethod
    def of_file(cls, path: Path, file_from_offset: int, file_size: int) -> MappedFileQueue:
        """A read-only queue of this one file, whatever its name or directory (``dump-cq
        --file``): no directory is listed."""
        q = cls([], file_size)
        q.files = [MappedFile(path, file_from_offset, file_size)]
        return q

    def load(self, listed: list[os.DirEntry] | None = None) -> None:
        found: dict[int, Path] = {}
        plain: set[int] = set()
        for d in self.dirs:
            try:
                entries = sorted(os.scandir(d) if listed is None else listed, key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                offset = self._offset_of(e)
                if offset is None:
                    continue
                if offset in found:
                    raise StoreError(
                        f"two files start at offset {offset}", path=e.path, hint=f"the other is {found[offset]}"
                    )
                found[offset] = d / e.name  # a child of a parsed Path: no parse of the whole path
                if e.is_file(follow_symlinks=False):
                    plain.add(offset)
        self.files = [
            MappedFile(p, off, self.file_size, self.writable, roots=self.roots, plain=off in plain)
            for off, p in sorted(found.items())
        ]

    def _offset_of(self, e: os.DirEntry) -> int | None:
        """The start offset a listed entry names, or None: hidden, a directory (one named
        like a file is kept in :attr:`not_regular`) or a name ``Long.parseLong`` refuses
        (kept in :attr:`strays`: the broker cannot load it)."""
        if e.name.startswith("."):
            return None
        digits = e.name.isdigit() and e.name.isascii()
        if e.is_dir(follow_symlinks=False):
            if digits:
                self.not_regular.append(Path(e.path))
            return None
        if not digits or int(e.name) > MAX_FILE_OFFSET:
            self.strays.append(Path(e.path))
            return None
        return int(e.name)

    # ------------------------------------------------------------- lookups
    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file holding ``offset`` (``MappedFileQueue#findMappedFileByOffset``)."""
        lo, hi = 0, len(self.files) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            f = self.files[mid]
            if offset < f.file_from_offset:
                hi = mid - 1
            elif offset >= f.end_offset:
                lo = mid + 1
            else:
                return f
        return None

    def files_from(self, offset: int) -> list[MappedFile]:
        return [f for f in self.files if f.end_offset > offset]

    def check_sizes(self, allow_odd: bool = False) -> None:
        """``MappedFileQueue#doLoad`` refuses a file whose length is not the configured size
        (``allow_odd``: read commands' --allow-odd-size reads it up to its real length)."""
        for p in self.not_regular:
            raise StoreError("a directory where a store file belongs; only regular files are read", path=p)
        for f in self.files:
            size = regular_size(f.path)
            f.seen, f.length = max(f.seen, size), size
            if size != self.file_size and not allow_odd:
                raise FileSizeError(
                    f"file has {size} bytes, expected {self.file_size}",
                    path=f.path,
                    hint="pass the broker's file size options or ⟦broker_conf⟧",
                )

    # ------------------------------------------------------------- writing
    def create_file(self, start_offset: int) -> MappedFile:
        """A new full-size (sparse) file, as ``DefaultMappedFile#init`` preallocates it."""
        if not self.writable:
            raise RuntimeError("read-only queue")
        d = self.dirs[(start_offset // self.file_size) % len(self.dirs)]
        path = d / offset2file_name(start_offset)
        create_sized(path, self.file_size, self.roots, "file")
        f = MappedFile(path, start_offset, self.file_size, True, roots=self.roots, fresh=True)
        self.files.append(f)
        return f

    def get_last_mapped_file(self, start_offset: int) -> MappedFile:
        """``MappedFileQueue#getLastMappedFile(startOffset, true)`` for a writer that never
        leaves a file part-full: the file holding ``start_offset``, created if missing."""
        if self.files and self.files[-1].file_from_offset <= start_offset < self.files[-1].end_offset:
            return self.files[-1]
        if self.files:
            nxt = self.files[-1].end_offset
            if start_offset < nxt:
                found = self.find(start_offset)
                if found is None:
                    raise StoreError(f"offset {start_offset} falls in a gap", path=self.dirs[0])
                return found
            return self.create_file(start_offset - start_offset % self.file_size)
        return self.create_file(start_offset - start_offset % self.file_size)

    def close(self) -> None:
        for f in self.files:
            f.close()


def queue_dirs(consumequeue_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """Every ``<topic>/<queueId>`` directory on disk, sorted (topics by name, a topic's queues
    by id, in listing order where two names are one id); non-numeric queue ids skipped."""
    for topic, qid, path in queue_dir_paths(consumequeue_dir):
        yield topic, qid, Path(path)


def queue_dir_paths(consumequeue_dir: Path | str) -> Iterator[tuple[str, int, str]]:
    """:func:`queue_dirs` with each directory as a string: no ``Path`` a queue for a caller
    that only names or looks up most of them (20 000 queues: 20 000 ``Path`` objects)."""
    for t in subdir_entries(consumequeue_dir):
        for q in topic_queue_dirs(t.path):
            yield t.name, int(q.name), q.path


def topic_queue_dirs(topic_dir: str) -> list[os.DirEntry]:
    """The queue directories of one topic directory as :func:`queue_dir_paths` orders them
    (by queue id, in listing order where two names are one id)."""
    queues = [q for q in entries(topic_dir) if q.name.isdigit() and q.name.isascii() and is_dir_entry(q)]
    queues.sort(key=lambda q: int(q.name))
    return queues


#: :func:`queue_tree`'s listing: each topic directory with its queue directories, each with its entries.
QueueTree = list[tuple[os.DirEntry, list[tuple[os.DirEntry, list[os.DirEntry]]]]]


def queue_tree(consumequeue_dir: Path | str) -> QueueTree:
    """Every ``<topic>/<queue>`` directory (:func:`subdir_entries`, by name) with its entries
    (:func:`entries`): one listing of a store's consume queues that sizing them and opening
    them both read (verify: 20 000 queue directories listed once, not twice)."""
    return [(t, [(q, entries(q.path)) for q in subdir_entries(t.path)]) for t in subdir_entries(consumequeue_dir)]


def entries(path: Path | str) -> list[os.DirEntry]:
    """The entries of directory ``path`` in listing order (none when it is missing or not a
    directory): ``Path.iterdir`` without a ``Path`` an entry, their types without a ``stat``."""
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError):
        return []


def subdir_entries(path: Path | str) -> list[os.DirEntry]:
    """The directories in ``path`` (links followed) by name: what ``sorted(p for p in
    path.iterdir() if p.is_dir())`` finds, a ``stat`` only for a link."""
    found = [e for e in entries(path) if is_dir_entry(e)]
    found.sort(key=lambda e: e.name)
    return found


def is_dir_entry(e: os.DirEntry) -> bool:
    """``Path.is_dir`` of a listed entry: False where it (or what it links to) is gone, a loop
    or not a directory; any other error raised."""
    try:
        return e.is_dir()
    except OSError as err:
        if err.errno in IGNORED_ERRNOS:
            return False
        raise


def is_file_entry(e: os.DirEntry) -> bool:
    """``Path.is_file`` of a listed entry, as :func:`is_dir_entry`."""
    try:
        return e.is_file()
    except OSError as err:
        if err.errno in IGNORED_ERRNOS:
            return False
        raise


#: What ``Path.is_dir``/``is_file`` take for "no" (pathlib's ``_IGNORED_ERRNOS``).
IGNORED_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def fsync_dir(path: Path) -> None:
    """Make renames and unlinks in ``path`` durable (a file system without directory
    fsync, EINVAL, is accepted)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def release_pages(mm, start: int, stop: int) -> int:
    """Drop the whole pages of ``[start, stop)`` of a mapping from this process's memory
    (``madvise(MADV_DONTNEED)``; the data stays in the page cache and the file), so a long
    scan's resident memory stays bounded. Returns the new released mark, ``max(start,
    stop rounded down to a page)``. A no-op for anything that is not an ``mmap``."""
    lo = start - start % mmap.PAGESIZE
    hi = stop - stop % mmap.PAGESIZE
    if hi > lo and isinstance(mm, mmap.mmap):
        try:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
        except (OSError, ValueError, AttributeError):
            pass
    return max(start, hi)
