"""The broker's ``lock`` file and ``abort`` marker (STORE-FORMAT §6.2, §6.3).

The broker takes an exclusive POSIX record lock on byte [0, 1) of ``<root>/lock``
(``FileChannel#tryLock`` is ``fcntl F_SETLK`` on Linux). ``F_GETLK`` asks who holds it
without taking it, so even the check leaves a live broker undisturbed.
"""
from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

from rmqstore_cli.errors import RefusedError

_FLOCK = "hhqqi4x"  # struct flock on x86-64/aarch64 Linux


def lock_holder(root: Path) -> int | None:
    """PID of the process holding the broker's lock on ``root``, or None if it is free."""
    path = root / "lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
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


def refuse_if_live(root: Path, force: bool = False) -> None:
    """Mutating commands call this first: exit 4 while a broker holds the store."""
    pid = lock_holder(root)
    if pid is not None and not force:
        raise RefusedError(f"a live broker (pid {pid}) holds the store's lock", path=root / "lock",
                           hint="stop the broker, or work on a snapshot")


def abort_exists(root: Path) -> bool:
    """``DefaultMessageStore#isTempFileExist``: the last shutdown was not clean."""
    return (root / "abort").exists()


class StoreLock:
    """Hold the broker's own lock (byte [0, 1) of ``<root>/lock``) while a mutating command
    changes files, so a broker started meanwhile fails with "Lock failed, MQ already
    started" instead of loading a half-changed store. No lock file: nothing is held."""

    def __init__(self, root: Path, hint: str = "a broker or another rmqstore command is starting; try again"):
        self.path = root / "lock"
        self.hint = hint
        self.fd: int | None = None

    def acquire(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise RefusedError("another process holds the store's lock", path=self.path, hint=self.hint) from None
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the POSIX lock
            self.fd = None

    def __enter__(self) -> "StoreLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
