"""Mapped reads that survive a file shrinking under them (issue 31).

A commit-log, consume-queue or index file truncated while rmqstore has it mapped (a store
copied while a broker or expire still runs, an rsync in flight) turns every read of a page
past its new end into a SIGBUS: the process died with exit 135 and no message, in the
middle of a C loop, a numpy gather or a slice. Every mapping of a store file is made here
(:func:`~rmqstore_cli.store.files.safefs.map_file` calls :func:`map_guarded`):

- **With the guard** (``_mapguard.c``, an optional extension of its own, built at install
  beside the speed paths but not one of them: it runs under ``RMQSTORE_PURE=1`` too): the
  mapping is a :class:`GuardedMap`, registered while it is mapped. A fault inside it maps
  anonymous zero pages over the rest of it and is logged; the read goes on and sees zeros,
  which every walk takes for the end of the data. The bytes between the new end and the
  end of its page read as zeros with no fault at all, so a mapping is also compared with
  its file's size (a ``stat``) when a walk of it ends, when it is released and at the end.
  The engine then raises one :class:`~rmqstore_cli.errors.ShrunkError` naming the file and
  the offset (the first byte it lost) at its next safe point (:func:`check`,
  :func:`check_all`): before the next file is mapped, at the end of a commit-log scan or of
  a file's dispatch, at the end of verify and of each Spark task, and before rebuild-index
  commits anything; the command wrapper looks once more (:func:`since`) before any exit,
  whatever the command returned or raised. A SIGBUS anywhere else keeps its old disposition.
- **Without it** (no C compiler at install): a read-only file is read with ``pread`` into
  private anonymous memory (a :class:`FileCopy`, shaped like the mapping), which cannot
  SIGBUS; a file shorter than its size at open is the same ShrunkError at once. The cost
  is memory: each file's data (its holes stay unread pages) is held while it is mapped,
  and passed pages are not released (``release_pages`` would drop the copy), so a walk
  holds up to every file it has passed (a 1 GiB commit-log file: 1 GiB).
  Writable mappings (a writer's own files, every range reserved first:
  ``safefs.reserve``) stay plain mappings.

``rmqstore --version`` says which (:func:`describe`).
"""

from __future__ import annotations

import itertools
import mmap
import os
import weakref
from typing import Any

from rmqstore_cli.errors import ShrunkError, StoreError
from rmqstore_cli.store.files.extload import load, phrase

#: Bytes a fallback copy reads per ``pread``.
COPY_CHUNK = 8 << 20

SHRUNK_HINT = (
    "the file was truncated while rmqstore read it (a broker, expire or a copy still writing the "
    "store?); read a stable copy (stop the broker or let the copy finish) and run again"
)


_LOADED = load("rmqstore_cli.store._mapguard")  # imported here only (its one user), as kernels.py does
_EXT: Any = _LOADED.module
#: True when mappings are guarded; False: read-only files are copied (:class:`FileCopy`).
BUILT = _EXT is not None
#: Why the guard is not here ("" when it is): "not built", "failed to import: ..."
PROBLEM = _LOADED.problem

_ids = itertools.count(1)
#: file id -> path of each registered mapping (the C log names files by id).
_paths: dict[int, str] = {}
#: Every shrink seen in this process, as (path, offset): faults pulled from the C log and
#: files found shorter than their mapping. Never cleared; :func:`mark` is an index into it.
_seen: list[tuple[str, int]] = []
#: Faults of the C log already pulled into :data:`_seen`.
_pulled = 0
#: Entries of :data:`_seen` that :func:`check` has raised already.
_raised = 0
#: The guarded mappings still mapped, by file id (for the size checks).
_live: weakref.WeakValueDictionary[int, GuardedMap] = weakref.WeakValueDictionary()


def describe() -> str:
    """How mapped reads are protected, in a few words (``rmqstore --version``)."""
    if BUILT:
        return "mapped reads guarded against SIGBUS"
    return f"files read into memory: the SIGBUS guard {phrase(PROBLEM)}"


class GuardedMap(mmap.mmap):
    """A mapping registered with the guard while it is mapped (unregistered before it goes).

    Besides faults, it can tell whether its file is now shorter than the mapping
    (:meth:`note_shrink`): the bytes between the new end and the end of its page read as
    zeros without any fault, so a reader that stopped there (a torn record, it seems) is
    caught only this way."""

    token: tuple[int, int] | None = None
    file_id: int = 0
    path: str = ""
    length: int = 0
    ident: tuple[int, int] = (0, 0)
    noted: bool = False

    def note_shrink(self) -> None:
        """If the same file (device and inode: a file renamed over it is another file, and
        this mapping still reads the old one) is now shorter than the mapping, note it once."""
        if self.noted:
            return
        try:
            st = os.stat(self.path)
        except OSError:  # deleted: the mapping keeps the data
            return
        if (st.st_dev, st.st_ino) == self.ident and st.st_size < self.length:
            self.noted = True
            _seen.append((self.path, st.st_size))

    def close(self) -> None:
        self.note_shrink()
        super().close()  # BufferError while a view uses it: still mapped, still guarded
        self._forget()

    def __del__(self) -> None:
        try:
            self.note_shrink()
        except Exception:  # interpreter shutdown: os may be gone already
            pass
        try:
            self._forget()
        except Exception:  # the same (and the process ends: no fault can come)
            pass

    def _forget(self) -> None:
        token, self.token = self.token, None
        if token is not None and _EXT is not None:
            _pull()  # its faults now carry its path: the id is no longer needed
            _EXT.unregister(token)
            _paths.pop(self.file_id, None)
            _live.pop(self.file_id, None)


class FileCopy(mmap.mmap):
    """A file's bytes in private anonymous memory, used like its mapping (no guard built)."""

    def madvise(self, option: int, *args) -> None:
        """``MADV_DONTNEED`` would drop the copy itself (the next read would see zeros): ignored."""
        if option == getattr(mmap, "MADV_DONTNEED", None):
            return None
        return super().madvise(option, *args)


def map_guarded(fd: int, length: int, path, write: bool):
    """``length`` bytes of ``fd`` (> 0) as a :class:`GuardedMap`, or without the guard a
    :class:`FileCopy` (read-only) or a plain mapping (``write``). Raises what ``mmap`` raises."""
    access = mmap.ACCESS_WRITE if write else mmap.ACCESS_READ
    if _EXT is not None:
        st = os.fstat(fd)
        mm = GuardedMap(fd, length, access=access)
        fid = next(_ids)
        _paths[fid] = str(path)
        token = _EXT.register(mm, fid, write)
        if token is not None:
            mm.token, mm.file_id, mm.path, mm.length, mm.ident = token, fid, str(path), length, (st.st_dev, st.st_ino)
            _live[fid] = mm
            return mm
        _paths.pop(fid, None)  # the table is full (more mappings than a process can have)
        mm.close()
    if write:
        return mmap.mmap(fd, length, access=access)
    return copy_file(fd, length, path)


def data_ranges(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The ``[a, b)`` ranges of ``[start, end)`` of ``fd`` holding data (``SEEK_DATA``/``SEEK_HOLE``;
    the whole range where the system cannot tell): holes are not read, so not held."""
    if not hasattr(os, "SEEK_DATA"):
        return [(start, end)]
    out, pos = [], start
    try:
        while pos < end:
            try:
                a = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            if a >= end:
                break
            b = min(os.lseek(fd, a, os.SEEK_HOLE), end)
            out.append((a, b))
            pos = b
    except OSError:
        return [(start, end)]
    return out


def copy_file(fd: int, length: int, path) -> FileCopy:
    """The first ``length`` bytes of ``fd`` read into a :class:`FileCopy`; a file that has
    fewer by now shrank while it was read (:class:`ShrunkError`, at the first missing byte)."""
    mm = FileCopy(-1, length, flags=mmap.MAP_PRIVATE)
    view = memoryview(mm)
    try:
        for a, b in data_ranges(fd, 0, length):
            pos = a
            while pos < b:
                n = os.preadv(fd, [view[pos : min(b, pos + COPY_CHUNK)]], pos)
                if n == 0:
                    raise shrunk(path, pos)
                pos += n
        size = os.fstat(fd).st_size
        if size < length:
            raise shrunk(path, size)
    except OSError as e:
        raise StoreError(f"cannot read: {e.strerror or e}", path=path) from None
    finally:
        view.release()
    return mm


def shrunk(path, offset: int) -> ShrunkError:
    """The error for a read of ``path`` that failed at ``offset``: the file shrank (it is no
    longer than that now, or is gone), or else the system could not read that page (an I/O
    error, a full tmpfs: the same SIGBUS)."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = None
    if size is not None and size > offset:
        return ShrunkError(
            f"{path} could not be read at offset {offset} (it has {size} bytes)",
            path=path,
            offset=offset,
            hint="an I/O error or a full tmpfs; check the disk (dmesg) or read a copy of the store on another one",
        )
    return ShrunkError(f"{path} shrank while it was read", path=path, offset=offset, hint=SHRUNK_HINT)


def _pull() -> None:
    """Move the C log's new faults into :data:`_seen` (named by path)."""
    global _pulled
    if _EXT is None or _EXT.count() <= _pulled:
        return
    n = _EXT.count()
    got = _EXT.faults(_pulled)
    if not got and n > _pulled:  # past the log's size (thousands of faults): files unknown
        _seen.append(("", 0))
    for fid, off in got:
        mm = _live.get(fid)
        if mm is not None:  # where the file ends now: the first byte lost, not its page
            mm.note_shrink()
        _seen.append((_paths.get(fid, f"a store file (mapping {fid})"), off))
    _pulled = n


def _error(seen: list[tuple[str, int]]) -> ShrunkError:
    """One error for shrinks seen: the first file, at the lowest offset seen in it."""
    path = seen[0][0]
    if not path:
        return ShrunkError("store files shrank while they were read", hint=SHRUNK_HINT)
    return shrunk(path, min(off for p, off in seen if p == path))


def mark() -> int:
    """Where the shrinks seen stand now (for :func:`since`)."""
    _pull()
    return len(_seen)


def since(at: int) -> ShrunkError | None:
    """The error for shrinks seen after :func:`mark` gave ``at``, raised already or not,
    with every live mapping's size checked first (the command wrapper's last look), or None."""
    for mm in list(_live.values()):
        mm.note_shrink()
    _pull()
    return _error(_seen[at:]) if len(_seen) > at else None


def check(*walked) -> None:
    """A safe point: raise :class:`ShrunkError` if a guarded mapping faulted, or one of the
    mappings just ``walked`` (buffers of files whose walk ended) is longer than its file
    now, since the last safe point. One C call when nothing happened (a ``stat`` per
    mapping walked)."""
    global _raised
    for mm in walked:
        if isinstance(mm, GuardedMap):
            mm.note_shrink()
    _pull()
    if len(_seen) > _raised:
        err = _error(_seen[_raised:])
        _raised = len(_seen)
        raise err


def check_all() -> None:
    """:func:`check` with every live mapping's size checked (before rebuild-index commits,
    at the end of verify and of each Spark task): a ``stat`` per live mapping."""
    check(*list(_live.values()))
