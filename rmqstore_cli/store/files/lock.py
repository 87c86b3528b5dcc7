"""The broker's ``lock`` file and ``abort`` marker (docs/format/checkpoint.md#abort, docs/format/checkpoint.md#lock).

The broker takes an exclusive POSIX record lock on byte [0, 1) of ``<root>/lock``
(``FileChannel#tryLock`` is ``fcntl F_SETLK`` on Linux). ``F_GETLK`` asks who holds it
without taking it, so even the check leaves a live broker undisturbed.

A ``lock`` that is not a regular file (a symbolic link, a directory, a FIFO) cannot be
locked the broker's way, so it can never mean "no lock held": mutating commands refuse
such a store (exit 4). A missing ``lock`` is created as the broker creates it
(``DefaultMessageStore#start`` writes "lock") and then locked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
from pathlib import Path

from rmqstore_cli.errors import RefusedError, StoreError
from rmqstore_cli.store.files.safefs import (
    O_CLOEXEC,
    O_NOFOLLOW,
    O_NONBLOCK,
    kind_of,
    open_read_only,
    os_error,
    stat_regular,
)

_FLOCK = "hhqqi4x"  # struct flock on x86-64/aarch64 Linux
LOCK_CONTENT = b"lock"  # DefaultMessageStore#start writes these 4 bytes


def lock_holder(root: Path) -> int | None:
    """PID of the process holding the broker's lock on ``root``, or None if it is free
    (or if ``lock`` is missing or not a regular file: see :func:`check_lock_file`).

    Opened non-blocking, so a FIFO planted as ``lock`` cannot hang a read command."""
    path = root / "lock"
    try:
        fd = open_read_only(path)
    except StoreError:
        return None
    try:
        req = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        try:
            res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        except OSError:
            return None
        l_type, _, _, _, pid = struct.unpack(_FLOCK, res)
        return None if l_type == fcntl.F_UNLCK else pid
    finally:
        os.close(fd)


def check_lock_file(root: Path) -> None:
    """Refuse (exit 4) a ``lock`` that is a link, a directory, a FIFO or anything but a
    regular file: whether a broker holds the store cannot be told through it."""
    path = root / "lock"
    st, what = stat_regular(path, "inspect the store's lock", follow_links=False, missing_ok=True)
    if what is not None:
        raise _not_regular(path, st.st_mode)


def _not_regular(path: Path, mode: int) -> RefusedError:
    return RefusedError(
        f"the store's lock is {kind_of(mode)}, not a regular file, so whether a broker holds the store cannot be told",
        path=path,
        hint="a broker's lock is a regular file; remove this one if no broker uses the store",
    )


def refuse_if_live(root: Path, force: bool = False, hint: str | None = None) -> None:
    """Mutating commands call this first: exit 4 while a broker holds the store (unless
    ``force``), and always when ``lock`` is not a regular file."""
    check_lock_file(root)
    pid = lock_holder(root)
    if pid is not None and not force:
        raise RefusedError(
            f"a live broker (pid {pid}) holds the store's lock",
            path=root / "lock",
            hint=hint or "stop the broker, or work on a snapshot",
        )


def abort_exists(root: Path) -> bool:
    """``DefaultMessageStore#isTempFileExist``: the last shutdown was not clean."""
    return (root / "abort").exists()


class StoreLock:
    """Hold the broker's own lock (byte [0, 1) of ``<root>/lock``) while a mutating command
    changes files, so a broker started meanwhile fails with "Lock failed, MQ already
    started" instead of loading a half-changed store.

    A missing ``lock`` is created (``O_EXCL``, ``O_NOFOLLOW``: a dangling link planted
    there is refused, its target never created) and locked; a ``lock`` that is not a
    regular file is refused. Where the file cannot be opened for writing (a read-only
    file), a shared lock is taken instead: it still makes the broker's ``tryLock`` fail."""

    def __init__(self, root: Path, hint: str = "a broker or another rmqstore command is starting; try again"):
        self.path = root / "lock"
        self.hint = hint
        self.fd: int | None = None

    def acquire(self) -> bool:
        check_lock_file(self.path.parent)
        fd, created, write = self._open()
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _not_regular(self.path, st.st_mode)
            kind = fcntl.F_WRLCK if write else fcntl.F_RDLCK
            try:
                fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 1, 0))
            except OSError:
                raise RefusedError("another process holds the store's lock", path=self.path, hint=self.hint) from None
            if created:
                os.write(fd, LOCK_CONTENT)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return True

    def _open(self) -> tuple[int, bool, bool]:
        """(descriptor, created, writable) of the lock file, never through a link."""
        flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        try:
            return os.open(self.path, os.O_RDWR | flags), False, True
        except FileNotFoundError:
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o644), True, True
            except FileExistsError:  # planted (or created by a broker) meanwhile: look again
                return self._open()
            except OSError as e:
                raise os_error(e, self.path, "create the store's lock") from None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                check_lock_file(self.path.parent)  # names what it is
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                try:
                    return os.open(self.path, os.O_RDONLY | flags), False, False
                except OSError:
                    pass
            raise os_error(e, self.path, "open the store's lock") from None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the POSIX lock
            self.fd = None

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, *_exc) -> None:
        self.release()
