"""IndexService: a store's index files in name order, queried newest first
(``IndexService#queryOffset``) and, for writers, rolled and named as the broker does
(``IndexService#getAndCreateLastIndexFile``, ``UtilAll#timeMillisToHumanString``); each
file is an :class:`~rmqstore_cli.store.queues.index.IndexFile` (docs/format/index.md).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import make_dirs
from rmqstore_cli.store.queues.index import IndexFile, build_key, index_file_paths

#: Store times that name an index file as themselves: 1970-01-01 up to 9999-12-28 23:59:59.999
#: UTC, so a 17-digit ``yyyyMMddHHmmssSSS`` name exists in every zone (with days of
#: millisecond steps after the last one). A first entry's time outside (negative, 2^63−1,
#: year > 9999: crafted or bit rot) is no name: see :meth:`IndexService.next_name`.
NAME_MIN_MS = 0
NAME_MAX_MS = 253_402_041_599_999


def name_time(ts_ms: int) -> int:
    """``ts_ms`` clamped into [:data:`NAME_MIN_MS`, :data:`NAME_MAX_MS`]: equal to it when
    the time can name an index file."""
    return min(max(ts_ms, NAME_MIN_MS), NAME_MAX_MS)


def index_file_name(ts_ms: int, tz: _dt.tzinfo | None) -> str:
    """``UtilAll#timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in the given zone (of
    :func:`name_time`: a time no date can show never fails the name)."""
    return _format_name(name_time(ts_ms), tz)


def _format_name(ts_ms: int, tz: _dt.tzinfo | None) -> str:
    t = _dt.datetime.fromtimestamp(ts_ms / 1000, tz) if tz else _dt.datetime.fromtimestamp(ts_ms / 1000)
    return t.strftime("%Y%m%d%H%M%S") + f"{ts_ms % 1000:03d}"


class IndexService:
    """The index files of a store in name order; query and (for writers) build."""

    def __init__(
        self,
        index_dir: Path,
        slot_num: int,
        index_num: int,
        max_msgs_num_batch: int = 64,
        writable: bool = False,
        tz: _dt.tzinfo | None = None,
        roots: list[Path] | None = None,
    ):
        self.dir = index_dir
        #: Where a writer may create and write index files (default: the index dir's parent).
        self.roots = list(roots) if roots is not None else [index_dir.parent]
        self.slot_num = slot_num
        self.index_num = index_num
        self.max_msgs_num_batch = max_msgs_num_batch
        self.writable = writable
        self.tz = tz
        self.files: list[IndexFile] = []
        for p in index_file_paths(index_dir):
            self.files.append(IndexFile(p, slot_num, index_num, writable, roots=self.roots))
        self.keys_put = 0
        #: Full files whose pages :meth:`release_pages` let go already.
        self.released_files = 0
        #: Files this writer could not name after their first entry's time (:meth:`next_name`):
        #: (name, that store time).
        self.fallback_names: list[tuple[str, int]] = []

    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int, cap: bool = True) -> list[int]:
        """``IndexService#queryOffset``: newest file first; stops at a file older than ``begin``."""
        if cap:
            max_num = min(max_num, self.max_msgs_num_batch)
        out: list[int] = []
        k = build_key(topic, key)
        for f in reversed(self.files):
            last = f is self.files[0]
            if f.is_time_matched(begin, end):
                f.select_phy_offset(k, max_num, begin, end, out)
            if f.header.begin_timestamp < begin or len(out) >= max_num or last:
                break
        return out

    # ------------------------------------------------------------- writing
    def _last_writable(self, store_timestamp: int) -> IndexFile:
        """``IndexService#getAndCreateLastIndexFile``, naming a new file by the store time
        of its first entry (the broker's creation wall time cannot be known offline)."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full():
            return last
        prev_phy = last.header.end_phy_offset if last else 0
        prev_ts = last.header.end_timestamp if last else 0
        make_dirs(self.dir, self.roots)
        name = self.next_name(store_timestamp, last.name if last is not None else None)
        while (self.dir / name).exists():
            name = self._name_after(name)
        if name_time(store_timestamp) != store_timestamp:
            self.fallback_names.append((name, store_timestamp))
        f = IndexFile.create(self.dir / name, self.slot_num, self.index_num, prev_phy, prev_ts, roots=self.roots)
        self.files.append(f)
        return f

    def next_name(self, first_ts: int, last_name: str | None) -> str:
        """The name of a new file whose first entry was stored at ``first_ts``, after the
        file ``last_name`` (names sort in creation order: never at or before it). A time
        that is no date (:func:`name_time`) names nothing: the file is named one
        millisecond after the previous one, or, for the first file, at 1970-01-01 UTC —
        deterministic, and later files keep their own times."""
        if name_time(first_ts) != first_ts:
            if last_name is None:
                return index_file_name(NAME_MIN_MS, _dt.timezone.utc)
            return self._name_after(last_name)
        name = index_file_name(first_ts, self.tz)
        if last_name is not None and name <= last_name:
            name = self._name_after(last_name)
        return name

    def _name_after(self, name: str) -> str:
        """The name one millisecond after ``name`` (``yyyyMMddHHmmssSSS``, this zone)."""
        try:
            t = _dt.datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=self.tz)
            ms = int(t.timestamp() * 1000) + int(name[14:17]) + 1
            after = _format_name(ms, self.tz)  # not clamped: always later than name
        except (ValueError, OverflowError, OSError):
            raise StoreError(
                f"index file name {name!r} is not yyyyMMddHHmmssSSS with a later one", path=self.dir / name
            ) from None
        if len(after) != 17:
            raise StoreError(f"no index file name after {name!r}", path=self.dir / name)
        return after

    @property
    def last_end_phy_offset(self) -> int:
        return self.files[-1].header.end_phy_offset if self.files else 0

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> None:
        """``IndexService#putKey`` with its retry on a new file when the last one is full."""
        f = self._last_writable(store_timestamp)
        if not f.put_key(key, phy_offset, store_timestamp):
            f = self._last_writable(store_timestamp)
            if not f.put_key(key, phy_offset, store_timestamp):
                raise StoreError("index put failed on a fresh file", path=f.path)
        self.keys_put += 1

    def put_keys(self, hashes, phy, ts) -> None:
        """``IndexService#putKey`` for many keys (index hashes given) in put order, file by
        file (:meth:`IndexFile.put_keys`), rolling files as :meth:`put_key` does; a file
        that fills leaves this process's memory before the next one fills."""
        i, n = 0, len(hashes)
        while i < n:
            f = self._last_writable(int(ts[i]))
            k = min(f.index_num - f.header.index_count, n - i)
            if k <= 0:
                raise StoreError("index put failed on a fresh file", path=f.path)
            f.put_keys(hashes[i : i + k], phy[i : i + k], ts[i : i + k])
            i += k
            if f.is_write_full():
                f.release_pages()
        self.keys_put += n

    def release_pages(self) -> None:
        """The written pages of the index files out of this process: the last file's
        entries so far and every full file whole, its slots too (20 MB a default file,
        touched at random: they stayed resident, one more set per 20 M keys, issue 22).
        Each full file is released once."""
        files = self.files
        if not files:
            return
        last = files[-1]
        last.release_pages(last.header.index_count)
        for f in files[self.released_files : len(files) - 1]:
            f.release_pages()
        self.released_files = max(self.released_files, len(files) - 1)

    def full_files_end_timestamp(self) -> int:
        """The checkpoint's indexMsgTimestamp: endTimestamp of the last full file, or 0."""
        full = [f for f in self.files if f.is_write_full()]
        return full[-1].header.end_timestamp if full else 0

    def close(self) -> None:
        for f in self.files:
            f.close()
