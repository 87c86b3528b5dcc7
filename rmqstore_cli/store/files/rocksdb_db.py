"""A RocksDB database opened read-only (the 5.x consume queue, the config tables): through a
shadow directory of links (``safefs.shadow_dir``), so that RocksDB's own LOCK and LOG files
are never written into the store; rocksdict is the optional binding."""

from __future__ import annotations

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
    """A RocksDB database opened read-only through :func:`safefs.shadow_dir` (module
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
        self._shadow = safefs.shadow_dir(self.dir, self.skip_dirs)
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
            safefs.remove_shadow(self._shadow)
            raise
        #: The shadow goes when this object does, or at exit, even if no one calls close().
        self._cleanup = weakref.finalize(self, safefs.remove_shadow, self._shadow)

    def family(self, name: str):
        """Column family ``name``, or None when the database has none of that name."""
        return self.db.get_column_family(name) if name in self.families else None

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            self._cleanup()
