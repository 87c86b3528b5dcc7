"""Files written below one directory resolved once: :class:`Below`.

:func:`~rmqstore_cli.store.files.safefs.open_for_write` and ``make_dirs`` check each path's
real path against the roots, so every file written costs a ``realpath`` of its directory and
of each root (a ``lstat`` per component): 20 000 one-queue topics cost 140 000 of them. A
rebuild writes every consume-queue file below one directory it made itself, so that
directory is checked once, held open, and each file is reached from it one component at a
time with ``openat(O_NOFOLLOW)``: a link planted anywhere below is refused, never followed,
and nothing is resolved per file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import (
    O_CLOEXEC,
    O_NOFOLLOW,
    O_NONBLOCK,
    check_inside,
    kind_of,
    make_dirs,
    os_error,
    write_reserved,
)

O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class Below:
    """The directory ``root`` (made inside ``roots`` and checked there once, as
    ``safefs.make_dirs`` does) held open; :meth:`write_at` writes into files below it."""

    def __init__(self, root: str | os.PathLike[str], roots: Iterable):
        self.root = Path(root)
        roots = list(roots)
        make_dirs(self.root, roots)
        try:
            self.fd = os.open(self.root, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        except OSError as e:
            raise os_error(e, self.root, "open directory") from None
        check_inside(self.root, roots, f"write into {self.root}")  # what was opened is still inside

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Below:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def _dir(self, parent: int, name: str, parts: tuple[str, ...]) -> int:
        """Directory ``name`` in ``parent`` (made if missing), opened through no link;
        ``parts``: its path below the root, named only in an error (no path built per file)."""
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as e:
            raise os_error(e, self.root.joinpath(*parts), "create directory") from None
        try:
            return os.open(name, os.O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, dir_fd=parent)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StoreError(
                    "a link or file is where a directory belongs; nothing is written through it",
                    path=self.root.joinpath(*parts),
                ) from None
            raise os_error(e, self.root.joinpath(*parts), "open directory") from None

    def write_at(self, parts: tuple[str, ...], name: str, size: int, at: int, data: bytes) -> None:
        """``data`` at byte ``at`` of file ``name`` in directory ``parts`` below the root, the
        file created (regular, through no link) and extended to ``size`` if shorter, never cut;
        the range allocated first (``safefs.write_reserved``), so a full disk is one error line."""
        fds: list[int] = []
        path = _LazyPath(self.root, (*parts, name))  # built only when an error names it
        try:
            d = self.fd
            for i, part in enumerate(parts):
                d = self._dir(d, part, parts[: i + 1])
                fds.append(d)
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o644, dir_fd=d)
            except OSError as e:
                raise os_error(e, path, "open for writing") from None
            fds.append(fd)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise StoreError(f"{kind_of(st.st_mode)} where a store file belongs", path=path.path())
            if st.st_size < size:
                try:
                    os.ftruncate(fd, size)
                except OSError as e:
                    raise os_error(e, path, "extend") from None
            write_reserved(fd, at, data, path)
        finally:
            for f in reversed(fds):
                os.close(f)


class _LazyPath(os.PathLike):
    """A file's path below a root, made into a :class:`Path` only when an error names it
    (``os.fspath``/``str``): 20 000 queues' files written cost no ``joinpath`` each."""

    __slots__ = ("root", "parts")

    def __init__(self, root: Path, parts: tuple[str, ...]):
        self.root, self.parts = root, parts

    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    def __fspath__(self) -> str:
        return str(self.path())

    def __str__(self) -> str:
        return str(self.path())
