"""Mapped reads that survive a file shrinking under them (issue 31).

A commit-log, consume-queue or index file truncated while rmqstore has it mapped (a store
copied while a broker or expire still runs, an rsync in flight) turns every read of a page
past its new end into a SIGBUS: the process died with exit 135 and no message, in the
middle of a C loop, a numpy gather or a slice. Every mapping of a store file is made here
(:func:`~rmqstore_cli.store.safefs.map_file` calls :func:`map_guarded`):

- **With the guard** (``_mapguard.c``, an optional extension of its own, built at install
  beside the speed paths but not one of them: it runs under ``RMQSTORE_PURE=1`` too): the
  mapping is a :class:`GuardedMap`, registered while it is mapped. A fault inside it maps
  anonymous zero pages over the rest of it and is logged; the read goes on and sees zeros,
  which every walk takes for the end of the data. The engine then raises one
  :class:`~rmqstore_cli.errors.ShrunkError` naming the file and the offset at its next safe
  point (:func:`check`): before the next file is mapped, at the end of a commit-log scan,
  of verify and of each Spark task, and before rebuild-index commits anything; the command
  wrapper looks once more (:func:`since`) before any exit. A SIGBUS anywhere else keeps
  its old disposition.
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

import importlib
import itertools
import mmap
import os

from rmqstore_cli.errors import ShrunkError, StoreError

#: Bytes a fallback copy reads per ``pread``.
COPY_CHUNK = 8 << 20

SHRUNK_HINT = ("the file was truncated while rmqstore read it (a broker, expire or a copy still writing the "
               "store?); read a stable copy (stop the broker or let the copy finish) and run again")


def _load():
    """The built guard, or None. Imported here only (its one user), as kernels.py does."""
    try:
        return importlib.import_module("rmqstore_cli.store._mapguard")
    except ImportError:
        return None


_EXT = _load()
#: True when mappings are guarded; False: read-only files are copied (:class:`FileCopy`).
BUILT = _EXT is not None

_ids = itertools.count(1)
#: file id -> path of each guarded mapping (kept after a fault: the log names files by id).
_paths: dict[int, str] = {}
#: Faults of the log that :func:`check` has raised already.
_raised = 0


def describe() -> str:
    """How mapped reads are protected, in a few words (``rmqstore --version``)."""
    if BUILT:
        return "mapped reads guarded against SIGBUS"
    return "files read into memory: the SIGBUS guard is not built"


class GuardedMap(mmap.mmap):
    """A mapping registered with the guard while it is mapped (unregistered before it goes)."""

    token: tuple[int, int] | None = None
    file_id: int = 0

    def close(self) -> None:
        super().close()  # BufferError while a view uses it: still mapped, still guarded
        self._forget()

    def __del__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        token, self.token = self.token, None
        if token is not None and _EXT is not None:
            _EXT.unregister(token)
            if not _EXT.count():  # no fault in this process: no log entry can name it
                _paths.pop(self.file_id, None)


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
        mm = GuardedMap(fd, length, access=access)
        fid = next(_ids)
        _paths[fid] = str(path)
        token = _EXT.register(mm, fid, write)
        if token is not None:
            mm.token, mm.file_id = token, fid
            return mm
        _paths.pop(fid, None)  # the table is full (more mappings than a process can have)
        mm.close()
    if write:
        return mmap.mmap(fd, length, access=access)
    return copy_file(fd, length, path)


def _data_ranges(fd: int, length: int) -> list[tuple[int, int]]:
    """The ``[a, b)`` ranges of ``[0, length)`` holding data (``SEEK_DATA``/``SEEK_HOLE``;
    the whole range where the system cannot tell): holes are not read, so not held."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, length)]
    out, pos = [], 0
    try:
        while pos < length:
            try:
                a = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole remains
                break
            if a >= length:
                break
            b = min(os.lseek(fd, a, os.SEEK_HOLE), length)
            out.append((a, b))
            pos = b
    except OSError:
        return [(0, length)]
    return out


def copy_file(fd: int, length: int, path) -> FileCopy:
    """The first ``length`` bytes of ``fd`` read into a :class:`FileCopy`; a file that has
    fewer by now shrank while it was read (:class:`ShrunkError`, at the first missing byte)."""
    mm = FileCopy(-1, length, flags=mmap.MAP_PRIVATE)
    view = memoryview(mm)
    try:
        for a, b in _data_ranges(fd, length):
            pos = a
            while pos < b:
                n = os.preadv(fd, [view[pos:min(b, pos + COPY_CHUNK)]], pos)
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
        return ShrunkError(f"{path} could not be read at offset {offset} (it has {size} bytes)", path=path,
                           offset=offset, hint="an I/O error or a full tmpfs; check the disk (dmesg) or read a "
                                               "copy of the store on another one")
    return ShrunkError(f"{path} shrank while it was read", path=path, offset=offset, hint=SHRUNK_HINT)


def _error(faults: list[tuple[int, int]]) -> ShrunkError:
    """One error for logged faults: the first file, at its lowest faulting offset."""
    if not faults:  # the log overflowed (thousands of faults): the files are not known
        return ShrunkError("store files shrank while they were read", hint=SHRUNK_HINT)
    fid = faults[0][0]
    offset = min(off for i, off in faults if i == fid)
    return shrunk(_paths.get(fid, f"a store file (mapping {fid})"), offset)


def mark() -> int:
    """Where the fault log stands now (for :func:`since`)."""
    return _EXT.count() if _EXT is not None else 0


def since(at: int) -> ShrunkError | None:
    """The error for faults logged after :func:`mark` gave ``at``, raised already or not
    (the command wrapper's last look), or None."""
    if _EXT is None or _EXT.count() <= at:
        return None
    return _error(_EXT.faults(at))


def pending() -> ShrunkError | None:
    """The error for faults not raised yet by :func:`check` (then counted as raised), or None."""
    global _raised
    if _EXT is None:
        return None
    n = _EXT.count()
    if n <= _raised:
        return None
    err = _error(_EXT.faults(_raised))
    _raised = n
    return err


def check() -> None:
    """A safe point: raise :class:`ShrunkError` if a guarded mapping faulted since the last one.
    One C call when nothing happened."""
    err = pending()
    if err is not None:
        raise err
