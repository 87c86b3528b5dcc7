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
