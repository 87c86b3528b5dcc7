"""A RocksDB database opened read-only (the 5.x consume queue, the config tables): through a
shadow directory of links (:func:`shadow_dir`), so that RocksDB's own LOCK and LOG files
are never written into the store; rocksdict is the optional binding."""

from __future__ import annotations

import os
import stat
import weakref
from pathlib import Path

from rmqstore_cli.formats import rocksdb_cq as fmt

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs

EXTRA_HINT = "install the rocksdb extra: pip install 'rmqstore[rocksdb]'"


class MissingBinding(StoreError):
    """rocksdict is not installed: the command cannot read the database at all (exit 3,
    naming the extra), which is not a finding about the store."""


class ReadOnlyDB:
    """A RocksDB database opened read-only through :func:`shadow_dir` (module
    docstring), every column family raw bytes; :meth:`close` removes the shadow."""

    #: Real directories in the database directory are left out of the shadow (only the
    #: consume queue: a double-writing broker's topic directories sit beside its files).
    skip_dirs = False

    def __init__(self, directory: Path, what: str):
        try:
            import rocksdict
        except ImportError:
            raise MissingBinding(
                f"reading {what} needs the rocksdict binding", path=directory, hint=EXTRA_HINT
            ) from None
        self.dir = Path(directory)
        self._shadow = shadow_dir(self.dir, self.skip_dirs)
        try:
            raw = rocksdict.Options(raw_mode=True)
            try:
                self.families = rocksdict.Rdict.list_cf(str(self._shadow), raw)
                cfs = {n: rocksdict.Options(raw_mode=True) for n in self.families if n != fmt.DEFAULT_CF}
                self.db = rocksdict.Rdict(
                    str(self._shadow), options=raw, column_families=cfs, access_type=rocksdict.AccessType.read_only()
                )
            except Exception as e:  # RocksDB's own message: corrupt MANIFEST, missing SST…
                said = str(e).splitlines()[0].replace(str(self._shadow), str(self.dir)) if str(e) else type(e).__name__
                raise StoreError(f"cannot open {what}: {said}", path=self.dir) from None  # named by the store's path
        except BaseException:
            remove_shadow(self._shadow)
            raise
        #: The shadow goes when this object does, or at exit, even if no one calls close().
        self._cleanup = weakref.finalize(self, remove_shadow, self._shadow)

    def family(self, name: str):
        """Column family ``name``, or None when the database has none of that name."""
        return self.db.get_column_family(name) if name in self.families else None

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            self._cleanup()


def shadow_dir(directory, skip_dirs: bool = False) -> Path:
    """A fresh private temp directory of symbolic links to each regular file of
    ``directory`` (a RocksDB database), for a library that opens the files itself and
    writes beside them even when opening read-only (rocksdict writes
    ``rocksdict-config.json``, RocksDB its info ``LOG``): those land in the temp directory,
    and no byte of the store changes. Anything but a regular file in the database (a FIFO,
    a device, a directory) is refused here, before the library could open it; with
    ``skip_dirs`` real directories are left out instead (the double-writing broker's
    ``consumequeue/<topic>/`` beside its database). The caller removes the directory
    (:func:`remove_shadow`)."""
    import tempfile

    directory = Path(directory)
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise safefs.os_error(e, directory, "list") from None
    shadow = Path(tempfile.mkdtemp(prefix="rmqstore-rocksdb-"))
    try:
        for name in names:
            if skip_dirs and stat.S_ISDIR(os.lstat(directory / name).st_mode):
                continue
            _, what = safefs.stat_regular(directory / name, "read")
            if what is not None:
                raise StoreError(f"{what} in a RocksDB database; only regular files are read", path=directory / name)
            os.symlink(os.path.abspath(directory / name), shadow / name)
    except BaseException:
        remove_shadow(shadow)
        raise
    return shadow


def remove_shadow(shadow) -> None:
    """Remove a :func:`shadow_dir`: its links and what the library wrote there (never
    followed into the store: ``shutil.rmtree`` unlinks links)."""
    import shutil

    shutil.rmtree(shadow, ignore_errors=True)
