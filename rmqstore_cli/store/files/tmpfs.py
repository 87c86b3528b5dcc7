"""Mapping a sparse file on tmpfs: a read fault on a hole there allocates a page, and on a
full tmpfs that fault is a SIGBUS that kills the reader with no message. :func:`check_mappable`
(called by ``safefs.map_file`` before every mapping) turns it into a one-line error, counting
the holes already promised to mappings per file system."""

from __future__ import annotations

import os

from rmqstore_cli.errors import StoreError

TMPFS_MAGIC = 0x01021994
#: Hole bytes already promised to read-only mappings, per tmpfs device (see check_mappable).
_hole_budget: dict[int, int] = {}


def reset_hole_budget() -> None:
    """Start a command's accounting afresh (pages read by an earlier command in the same
    process are already counted in the file system's free space)."""
    _hole_budget.clear()


_FS_TYPES: dict[int, int | None] = {}


def _fs_type(fd: int, dev: int) -> int | None:
    """``fstatfs(fd).f_type`` (Linux; asked once per device), or None where it cannot be."""
    if dev in _FS_TYPES:
        return _FS_TYPES[dev]
    import ctypes

    kind = None
    try:
        libc = ctypes.CDLL(None, use_errno=True)  # the process's own libc: no library search
        buf = ctypes.create_string_buffer(256)  # struct statfs; f_type (a long) comes first
        if libc.fstatfs(fd, buf) == 0:
            kind = ctypes.c_long.from_buffer(buf).value
    except (OSError, AttributeError):
        pass
    _FS_TYPES[dev] = kind
    return kind


def check_mappable(fd: int, path, length: int) -> None:
    """Refuse to map a sparse file where reading its holes would SIGBUS.

    On tmpfs a read fault on a hole allocates a page; on a full tmpfs the fault is a SIGBUS
    that kills the process with no message (issue 22: verify on a full tmpfs). So on tmpfs a
    file whose holes (plus those already mapped on the same file system) exceed the free
    space is a one-line error instead. Other file systems map holes to the zero page."""
    st = os.fstat(fd)
    holes = max(0, min(length, st.st_size) - st.st_blocks * 512)
    if not holes or _fs_type(fd, st.st_dev) != TMPFS_MAGIC:
        return
    vfs = os.fstatvfs(fd)
    free = vfs.f_bavail * vfs.f_frsize
    promised = _hole_budget.get(st.st_dev, 0)
    if holes + promised > free:
        raise StoreError(
            f"cannot map the file: it has {holes} bytes of holes on a tmpfs with "
            f"{max(0, free - promised)} bytes free, and reading a hole there allocates memory "
            "(a full tmpfs kills the reader with SIGBUS)",
            path=path,
            hint="free space on that file system, or copy the store to a disk",
        )
    _hole_budget[st.st_dev] = promised + holes
