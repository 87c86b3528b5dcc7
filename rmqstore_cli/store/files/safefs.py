"""Every open, write and delete of a store file goes through here (README, Safety).

A store handed to rmqstore may be hostile: a symlink planted where a temp file will be
written, a FIFO where a checkpoint should be, ``/dev/zero`` as ``topics.json``, a data
directory that is a link to somewhere else, a full or read-only disk. The rules:

- **Reads** follow links (a snapshot may be assembled from links; reading changes nothing)
  but open only *regular files*: non-blocking, so a FIFO cannot hang the open, then
  ``fstat`` — a FIFO, device, socket or directory is a one-line error naming it. Small
  files (JSON, journal, checkpoint) are read under a size cap.
- **Writes** never follow a link: files are opened ``O_NOFOLLOW``, temp files are created
  ``O_EXCL`` under a fresh name, and every target's real directory must lie inside one of
  the *roots* (the real store root, and a commit-log directory the broker's configuration
  names explicitly). Replacing a file is write-beside, fsync, rename.
- **Deletes** remove only regular files (``lstat``: never a link) whose real directory lies
  inside a root.
- **Space**: :func:`reserve` allocates a range before a writer maps it, so a full disk is
  an ``ENOSPC`` error here and never a ``SIGBUS`` inside a mapping.
- **Shrinking**: every mapping is guarded (:func:`map_file`, ``store/files/mapguard.py``), so a
  file truncated while it is read is one ``ShrunkError`` naming it, never a ``SIGBUS``.

Every failure is a :class:`~rmqstore_cli.errors.StoreError` (exit 3) or, for a path that
leaves the store, a :class:`~rmqstore_cli.errors.RefusedError` (exit 4), naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rmqstore_cli.errors import RefusedError, StoreError
from rmqstore_cli.store.files.tmpfs import (
    check_mappable,
    reset_hole_budget as reset_hole_budget,  # commands/exits.py resets it per command
)

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_NOATIME = getattr(os, "O_NOATIME", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

#: Caps for the small files a store holds. The broker's own are far smaller (a topics.json
#: of 100 000 topics is ~25 MB); anything larger is hostile or not the broker's.
JSON_LIMIT = 256 << 20
#: A broker's topics.json is ~250 bytes a topic (100 000 topics: ~25 MB); a larger one is
#: not read (parsing costs ~10x its size in memory).
TOPICS_JSON_LIMIT = 32 << 20
JOURNAL_LIMIT = 64 << 20

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)

_ERRNO_TEXT = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ELOOP: "is a symbolic link, which rmqstore does not write or delete through",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOTDIR: "a path component is not a directory",
    errno.EISDIR: "is a directory",
    errno.EEXIST: "already exists",
    errno.ENOENT: "no such file or directory",
    errno.ENOMEM: "not enough memory or address space",
}


def kind_of(mode: int) -> str:
    """What a non-regular file is, for an error line ("a FIFO", "a directory", …)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def os_error(e: OSError, path: os.PathLike | str, doing: str) -> StoreError:
    """One error line for an ``OSError`` while ``doing`` something to ``path``."""
    text = _ERRNO_TEXT.get(e.errno, e.strerror or str(e))
    if e.errno == errno.ENOENT and os.path.islink(path):
        text = f"a symbolic link to nothing ({os.readlink(path)})"
    return StoreError(f"cannot {doing}: {text}", path=path)


def stat_regular(
    path, doing: str, follow_links: bool = True, missing_ok: bool = False
) -> tuple[os.stat_result | None, str | None]:
    """Whether a store file is a regular file, the one test of every reader and checker:
    ``(stat, None)`` for a regular file; ``(stat, what it is)`` — "a FIFO", "a directory",
    … (:func:`kind_of`) — for anything else in its place, which the caller refuses or
    reports (opening a FIFO could hang, mapping a device read forever); ``(None, None)``
    when nothing is there and ``missing_ok``. Links are followed unless ``follow_links`` is
    false (then a link is "a symbolic link"). Any other failure is :func:`os_error`'s
    ``cannot <doing>: …``."""
    try:
        st = os.stat(path) if follow_links else os.lstat(path)
    except FileNotFoundError as e:
        if missing_ok:
            return None, None
        raise os_error(e, path, doing) from None
    except OSError as e:
        raise os_error(e, path, doing) from None
    return st, None if stat.S_ISREG(st.st_mode) else kind_of(st.st_mode)


def _check_regular(fd: int, path) -> os.stat_result:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise StoreError(f"{kind_of(st.st_mode)} where a store file belongs; only regular files are read", path=path)
    return st


def open_read_only(path, flags: int = 0) -> int:
    """A read-only descriptor of a regular file (links followed).

    ``O_NONBLOCK`` keeps a FIFO from hanging the open; the file is then refused unless it
    is a regular file. ``O_NOATIME`` (Linux, the files' owner) keeps even access times
    unchanged; where it is not allowed (EPERM) the file is opened plainly."""
    return open_regular(path, flags)[0]


def open_regular(path, flags: int = 0) -> tuple[int, os.stat_result]:
    """:func:`open_read_only` and the ``fstat`` that found the file regular (its size, its
    blocks), for a reader that needs them: one ``fstat`` a file, not two."""
    base = os.O_RDONLY | O_NONBLOCK | O_CLOEXEC | flags
    try:
        if O_NOATIME:
            try:
                fd = os.open(path, base | O_NOATIME)
            except PermissionError:
                fd = os.open(path, base)
        else:
            fd = os.open(path, base)
    except OSError as e:
        raise os_error(e, path, "open for reading") from None
    return fd, _check_regular(fd, path)


def map_file(fd: int, length: int, path, write: bool = False, fresh: bool = False):
    """``mmap`` of ``length`` bytes of ``fd`` (read-only unless ``write``; ``b""`` for an
    empty file, which cannot be mapped). Its holes are checked first
    (:func:`~rmqstore_cli.store.files.tmpfs.check_mappable`)
    unless the file is ``fresh`` — made by this writer, whose every write reserves first.
    A mapping the process cannot have (ENOMEM under an address-space limit, a huge sparse
    file) is one StoreError naming the file instead of an OSError traceback.

    The mapping is guarded (:mod:`~rmqstore_cli.store.files.mapguard`): a file truncated while it
    is read is a ShrunkError, never a SIGBUS. Mapping the next file is one of the guard's
    safe points: a fault in an earlier mapping is raised here."""
    from rmqstore_cli.store.files import mapguard

    mapguard.check()
    if length == 0:
        return b""
    if not fresh:
        check_mappable(fd, path, length)
    try:
        return mapguard.map_guarded(fd, length, path, write)
    except (OSError, ValueError, OverflowError) as e:
        if isinstance(e, OSError):
            raise os_error(e, path, f"map {length} bytes") from None
        raise StoreError(f"cannot map {length} bytes: {e}", path=path) from None


def read_bounded(path, limit: int, what: str = "file") -> bytes:
    """All bytes of a small regular file, refusing one over ``limit`` bytes (checked on the
    size and again while reading, so a file that grows meanwhile is still bounded)."""
    fd = open_read_only(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise StoreError(f"{what} is {size} bytes, more than the {limit} rmqstore reads", path=path)
        chunks, total = [], 0
        while True:
            try:
                b = os.read(fd, min(1 << 20, limit + 1 - total))
            except OSError as e:
                raise os_error(e, path, "read") from None
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > limit:
                raise StoreError(f"{what} grew past the {limit} bytes rmqstore reads", path=path)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_json(path, limit: int = JSON_LIMIT, what: str = "JSON file"):
    """A JSON file parsed under a size cap and orjson's nesting limit (1024 levels: deeper
    input is an error, never a ``RecursionError``). Not UTF-8 or not JSON: StoreError."""
    import orjson

    data = read_bounded(path, limit, what)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise StoreError(f"{what} is not valid JSON: {e.msg}", path=path, offset=e.pos) from None


# ------------------------------------------------------------------------------ containment
def real(path) -> str:
    return os.path.realpath(path)


def is_inside(path, roots: Iterable) -> bool:
    """Whether ``path``'s real path is one of ``roots``' real paths or lies below one."""
    rp = real(path)
    for r in roots:
        rr = real(r)
        if rp == rr or rp.startswith(rr.rstrip(os.sep) + os.sep):
            return True
    return False


def check_inside(path, roots: Iterable, doing: str) -> None:
    """Refuse (exit 4) to ``doing`` at ``path`` when its real path leaves every root."""
    roots = list(roots)
    if not is_inside(path, roots):
        raise RefusedError(
            f"will not {doing}: the path resolves to {real(path)}, outside the store "
            f"({', '.join(real(r) for r in roots)})",
            path=path,
            hint="a symbolic link leads out of the store; remove it or work on a copy",
        )


# ------------------------------------------------------------------------------ writing
def open_for_write(
    path, roots: Iterable, create: bool = False, exclusive: bool = False, append: bool = False, checked: bool = False
) -> int:
    """A read-write descriptor of a regular file inside ``roots``, never through a link.

    ``create``: made if missing (``exclusive``: must not exist); ``append``: every write
    goes to the end (``O_APPEND``). The directory's real path is checked against
    ``roots`` (``checked``: the caller has just done so, :func:`make_dirs`); the last
    component is opened ``O_NOFOLLOW``."""
    path = path if isinstance(path, Path) else Path(path)  # no re-parse (one a new queue)
    if not checked:
        check_inside(path.parent, roots, f"write {path.name}")
    flags = os.O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (os.O_APPEND if append else 0)
    if create:
        flags |= os.O_CREAT | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        raise os_error(e, path, "open for writing") from None
    if not (create and exclusive):  # O_CREAT | O_EXCL made a new regular file: no fstat (one a new queue)
        _check_regular(fd, path)
    return fd


def create_sized(
    path,
    size: int,
    roots: Iterable,
    what: str,
    reserve_first: int = 0,
    dir_made: bool = False,
    first: tuple[int, bytes] | None = None,
) -> None:
    """A new store file of ``size`` bytes (sparse, as ``DefaultMappedFile#init`` makes it):
    its directory made inside ``roots`` (``dir_made``: the caller just made it, inside a
    directory it checked), the file created ``O_EXCL``/``O_NOFOLLOW``, and its first
    ``reserve_first`` bytes allocated (:func:`reserve`). ``first``: (byte offset, data)
    written through the same descriptor as :func:`write_range` writes it (a consume-queue
    writer's first units: one open a new file, not two). On any failure the file is
    removed and one StoreError says what could not be created."""
    path = path if isinstance(path, Path) else Path(path)  # no re-parse (one a new queue)
    if not dir_made:
        make_dirs(path.parent, roots)
    fd = open_for_write(path, roots, create=True, exclusive=True, checked=True)
    with written_or_removed(fd, path, path, f"create the {what} of {size} bytes"):
        os.ftruncate(fd, size)
        reserve(fd, 0, min(size, reserve_first), path)
        if first is not None:
            write_reserved(fd, first[0], first[1], path, f"write {what}")


@contextmanager
def written_or_removed(fd: int, made: Path, path: Path, what: str) -> Iterator[None]:
    """Close ``fd`` after the block writes through it; where the block fails, also remove the
    file it made (``made``), an OSError raised as one StoreError naming ``path`` and ``what``."""
    try:
        yield
    except BaseException as e:
        os.close(fd)
        _unlink_quietly(made)
        if isinstance(e, OSError):
            raise os_error(e, path, what) from None
        raise
    os.close(fd)


def temp_beside(path) -> Path:
    """A fresh name beside ``path`` for write-beside-and-rename (never a guessable name a
    planted link could wait at; created with ``O_EXCL`` anyway). ``os.urandom`` as
    ``secrets.token_hex`` draws it, without ``secrets``' import (random, hmac: a few ms of
    every command's start-up)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def replace_file(path, data: bytes, roots: Iterable) -> None:
    """Write ``data`` as ``path``: a new file beside it (``O_EXCL``), fsync, rename over.

    A link at ``path`` is replaced, not followed. On any failure the temp file is removed
    and one StoreError names the file and the reason (full disk, read-only file system…)."""
    path = Path(path)
    tmp = temp_beside(path)
    fd = open_for_write(tmp, roots, create=True, exclusive=True)
    try:
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        _unlink_quietly(tmp)
        raise os_error(e, path, "write") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def make_dirs(path, roots: Iterable) -> None:
    """``mkdir -p`` inside ``roots``: every existing component's real path must stay inside,
    so a planted link to a directory elsewhere is refused, not written through. A root that
    ``path`` lies in and that does not exist yet (a new store) is created first."""
    path = Path(path)
    roots = list(roots)
    for r in map(Path, roots):
        if (r == path or r in path.parents) and not os.path.lexists(r):
            try:
                r.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise os_error(e, r, "create directory") from None
    there = _existing_ancestor(path)
    check_inside(there, roots, f"create {path}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError("a file is where a directory belongs", path=path) from None
    except OSError as e:
        raise os_error(e, path, "create directory") from None
    if there != path:  # what was made is checked too (an existing ``path`` just was)
        check_inside(path, roots, f"write into {path}")


def _existing_ancestor(path: Path) -> Path:
    p = path
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    return p


def reserve(fd: int, offset: int, length: int, path) -> None:
    """Allocate ``[offset, offset + length)`` of a file before it is written through a
    mapping: on a full disk a write to a sparse page of a mapping raises SIGBUS, which
    nothing can turn into an error line; ``posix_fallocate`` says ENOSPC instead. File
    systems that cannot allocate (EOPNOTSUPP, EINVAL) are left as they are."""
    if length <= 0:
        return
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return
        raise os_error(e, path, f"reserve {length} bytes") from None


def write_reserved(fd: int, at: int, data: bytes, path, doing: str = "write") -> None:
    """``data`` at byte ``at`` of the open file ``fd``, its range allocated first
    (:func:`reserve`): a full disk is one error line before any byte is written, never a
    short write that leaves a record half there; ``pwrite`` repeated until every byte is
    written, an error naming ``path`` and what was ``doing`` otherwise."""
    reserve(fd, at, len(data), path)
    view = memoryview(data)
    while view:
        try:
            n = os.pwrite(fd, view, at)
        except OSError as e:
            raise os_error(e, path, doing) from None
        view, at = view[n:], at + n


#: A writer allocates this much ahead of what it writes through a mapping (one
#: ``posix_fallocate`` per 4 MiB; a tiny store never allocates a whole 1 GiB/420 MB file).
RESERVE_CHUNK = 4 << 20


def reserve_ahead(path, roots: Iterable, reserved: int, end: int, size: int) -> int:
    """Make sure bytes ``[0, end)`` of a file of ``size`` bytes are allocated, given that
    ``[0, reserved)`` are: allocates up to ``end`` and at least a :data:`RESERVE_CHUNK` more
    (never past ``size``) and returns the new reserved mark. What every writer through a
    mapping calls before it stores bytes (:func:`reserve`: ENOSPC, not SIGBUS)."""
    if end <= reserved:
        return reserved
    new = min(size, max(end, reserved + RESERVE_CHUNK))
    fd = open_for_write(path, roots)
    try:
        reserve(fd, reserved, new - reserved, path)
    finally:
        os.close(fd)
    return new


# ------------------------------------------------------------------------------ deleting
def unlink_inside(path, roots: Iterable) -> None:
    """Delete one regular file (``lstat``: a link is never followed or removed) whose real
    directory lies inside ``roots``."""
    path = Path(path)
    check_inside(path.parent, roots, f"delete {path.name}")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{kind_of(st.st_mode)} where a store file belongs; not deleted", path=path)
    remove_if_there(os.unlink, path, "delete")


def rmtree_inside(path, roots: Iterable) -> None:
    """Remove a directory tree that lies inside ``roots``; links in it are unlinked, never
    followed (``shutil.rmtree`` does the same for links below the top, and the top must not
    be a link at all)."""
    import shutil

    path = Path(path)
    if os.path.islink(path):
        raise RefusedError(
            "will not remove a directory through a symbolic link",
            path=path,
            hint="remove the link by hand if it is yours",
        )
    check_inside(path, roots, f"remove {path}")
    remove_if_there(shutil.rmtree, path, "remove")


def remove_if_there(remove: Callable[[Path], object], path: Path, verb: str) -> None:
    """``remove(path)``: a path already gone is what was asked for, another OSError one
    StoreError saying what could not be done (``verb``)."""
    try:
        remove(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise os_error(e, path, verb) from None


def _unlink_quietly(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


# -- verify-pkg
def data_extent(path) -> int | None:
    """Offset of the first hole of a sparse file (its length if none), or None if unknown:
    a preallocated store file's data ends there, and reading the hole only maps zero pages."""
    if not hasattr(os, "SEEK_HOLE"):
        return None
    try:
        fd = open_read_only(path)
    except StoreError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return None
    finally:
        os.close(fd)


def data_segments(path, start: int, end: int) -> list[tuple[int, int]]:
    """The ``[a, b)`` ranges of ``[start, end)`` of a sparse file that hold data
    (``SEEK_DATA``/``SEEK_HOLE``; the whole range when the system cannot tell): a search
    for non-zero bytes reads only these, so a 1 GiB file with a few MB of data costs a few MB."""
    if end - start <= 1 << 20 or not hasattr(os, "SEEK_DATA"):
        return [(start, end)]
    try:
        fd = open_read_only(path)
    except StoreError:
        return [(start, end)]
    from rmqstore_cli.store.files.mapguard import data_ranges

    try:
        return data_ranges(fd, start, end)
    finally:
        os.close(fd)


def rewrite_prefix(path, keep: int, tail: bytes, size: int, roots: Iterable) -> None:
    """Replace ``path`` by its first ``keep`` bytes, then ``tail``, then zeros to ``size``
    bytes: written beside it (``O_EXCL``, a fresh name), copied by the kernel
    (``copy_file_range``, holes cost nothing), fsynced, renamed over it and the directory
    fsynced. The file's mode is kept. On any failure the new file is removed and the old one
    is left as it was; one StoreError names the file and the reason (full disk, …)."""
    path = Path(path)
    src = open_read_only(path)
    try:
        mode = stat.S_IMODE(os.fstat(src).st_mode)
        tmp = temp_beside(path)
        fd = open_for_write(tmp, roots, create=True, exclusive=True)
        with written_or_removed(fd, tmp, path, f"rewrite ({size} bytes)"):
            _copy_range(src, fd, keep)
            os.pwrite(fd, tail, keep)
            os.ftruncate(fd, size)
            os.fchmod(fd, mode)
            os.fsync(fd)
    finally:
        os.close(src)
    try:
        os.replace(tmp, path)
        dfd = os.open(path.parent, os.O_RDONLY | O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        _unlink_quietly(tmp)
        raise os_error(e, path, "replace") from None


def _copy_range(src: int, dst: int, length: int) -> None:
    """``length`` bytes from the start of ``src`` to the start of ``dst``."""
    done = 0
    while done < length:
        try:
            n = os.copy_file_range(src, dst, length - done, done, done)
        except (AttributeError, OSError) as e:  # no copy_file_range here (or across these file systems)
            if isinstance(e, OSError) and e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            n = os.pwrite(dst, os.pread(src, min(length - done, 1 << 20), done), done)
        if n == 0:
            raise OSError(errno.EIO, "the file ended while it was copied")
        done += n


def write_range(
    path: Path,
    at: int,
    data: bytes,
    what: str = "consume-queue units",
    roots: list[Path] | None = None,
    checked: bool = False,
) -> None:
    """``data`` at byte ``at`` of an existing store file: the range allocated first
    (``reserve``), so a full disk is one error line before any byte is written,
    never a short write that leaves a unit half there; every byte written or an error.
    Opened through no link, inside ``roots`` (default: the file's own directory; ``checked``:
    the caller made its directory inside them, nothing to resolve)."""
    fd = open_for_write(path, roots or [path.parent], checked=checked)
    try:
        write_reserved(fd, at, data, path, f"write {what}")
    finally:
        os.close(fd)
