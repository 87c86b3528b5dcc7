"""IndexFile and IndexService: the hash index queried by ``topic#key`` and a time range.

Reading touches only the header, one slot and the chain's entries, so a look-up in a
420 MB file reads a few pages. Writing is ``IndexFile#putKey`` with the broker's chain,
timeDiff and counter rules, and ``IndexService``'s roll (docs/format/index.md).
"""

from __future__ import annotations

import datetime as _dt
import os
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rmqstore_cli.formats import index as index_layout
from rmqstore_cli.formats.index import (
    ENTRY_FORMAT,
    HASH_SLOT_SIZE,
    HEADER_FORMAT,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
    SLOT_FORMAT,
    TIME_DIFF_MAX,
    index_file_size,
)

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store import safefs
from rmqstore_cli.store.javahash import index_key_hash
from rmqstore_cli.store.mapped_files import release_pages
from rmqstore_cli.store.safefs import make_dirs, map_file, open_for_write, open_read_only, os_error

_HEADER = struct.Struct(HEADER_FORMAT)
_SLOT = struct.Struct(SLOT_FORMAT)
_ENTRY = struct.Struct(ENTRY_FORMAT)


def entry_dtype():
    """An entry as numpy reads entries in bulk: ``formats.index.ENTRY_DTYPE``, made on first
    use (numpy is not imported at start-up)."""
    return index_layout.ENTRY_DTYPE


@cache
def slot_dtype():
    """A slot's value as numpy reads slots in bulk (``formats.index.SLOT_DTYPE``'s one field)."""
    return index_layout.SLOT_DTYPE["entry"]


def build_key(topic: str, key: str) -> str:
    """``IndexService#buildKey``."""
    return f"{topic}#{key}"


@dataclass(slots=True)
class IndexHeaderValues:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    def as_tuple(self) -> tuple[int, ...]:
        return (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )


class IndexFile:
    """One index file; read-only unless ``writable``."""

    def __init__(
        self,
        path: Path,
        slot_num: int,
        index_num: int,
        writable: bool = False,
        roots: list[Path] | None = None,
        fresh: bool = False,
        lenient: bool = False,
    ):
        """``lenient`` (read-only): a file shorter than its header reads as a zero header
        instead of an error (``verify`` reports it)."""
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.writable = writable
        self.size = INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE
        # a writable file never through a link, and only inside roots (default: its index dir's parent)
        fd = open_for_write(path, roots or [path.parent.parent]) if writable else open_read_only(path)
        try:
            length = os.fstat(fd).st_size
            if length < INDEX_HEADER_SIZE and not (lenient and not writable):
                raise StoreError(f"index file has {length} bytes, less than its 40-byte header", path=path)
            if writable and length != self.size:  # every slot and entry written must lie in the file
                raise StoreError(
                    f"index file has {length} bytes, not the {self.size} of maxHashSlotNum={slot_num} "
                    f"and maxIndexNum={index_num}",
                    path=path,
                    hint="pass the broker's ⟦index_slots⟧/⟦index_max⟧ or ⟦broker_conf⟧",
                )
            self.mm = map_file(fd, length, path, write=writable, fresh=writable and fresh)
        finally:
            os.close(fd)
        self.length = length
        #: Bytes from the start already allocated on disk (:meth:`reserve_entries`).
        self.reserved = 0
        h = (
            IndexHeaderValues(*_HEADER.unpack_from(self.mm, 0))
            if length >= INDEX_HEADER_SIZE
            else IndexHeaderValues(index_count=0)
        )
        #: indexCount as stored (the header's ``index_count`` reads a count <= 0 as 1).
        self.stored_count = h.index_count
        if h.index_count <= 0:  # IndexHeader#load: a stored count <= 0 reads as 1
            h.index_count = 1
        self.header = h

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def entries_base(self) -> int:
        return INDEX_HEADER_SIZE + self.slot_num * HASH_SLOT_SIZE

    def slot_pos(self, key_hash: int) -> int:
        return INDEX_HEADER_SIZE + (key_hash % self.slot_num) * HASH_SLOT_SIZE

    def entry_pos(self, n: int) -> int:
        return self.entries_base + n * INDEX_ENTRY_SIZE

    def read_slot(self, key_hash: int) -> int:
        pos = self.slot_pos(key_hash)
        if pos + HASH_SLOT_SIZE > self.length:  # a truncated file
            raise StoreError(
                f"index slot {key_hash % self.slot_num} lies past the end of the file", path=self.path, offset=pos
            )
        return _SLOT.unpack_from(self.mm, pos)[0]

    def read_entry(self, n: int) -> tuple[int, int, int, int]:
        """(keyHash, phyOffset, timeDiff, prevIndex) of entry ``n``."""
        pos = self.entry_pos(n)
        if pos + INDEX_ENTRY_SIZE > self.length:
            raise StoreError(f"index entry {n} lies past the end of the file", path=self.path, offset=pos)
        return _ENTRY.unpack_from(self.mm, pos)

    @property
    def chain_limit(self) -> int:
        """Most steps a hash chain can take: the entries that fit in the file, so a crafted
        count with a cycle of prevIndex links cannot make a walk run for 2^31 steps."""
        fit = max(0, (self.length - self.entries_base) // INDEX_ENTRY_SIZE)
        return min(self.header.index_count, fit)

    def reserve_entries(self, upto: int) -> None:
        """Allocate the file on disk up to entry ``upto`` (exclusive; header and slot table
        included) before those bytes are written through the mapping: on a full disk a
        store to a hole of a shared mapping is a SIGBUS, which no handler turns into an
        error line; ``safefs.reserve`` (``posix_fallocate``) says ENOSPC instead."""
        end = min(self.length, max(self.entries_base, self.entry_pos(upto)))
        self.reserved = safefs.reserve_ahead(self.path, [self.path.parent], self.reserved, end, self.length)

    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``IndexFile#isTimeMatched``."""
        b, e = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    def select_phy_offset(
        self, key: str, max_num: int, begin: int, end: int, out: list[int] | None = None
    ) -> list[int]:
        """``IndexFile#selectPhyOffset``: hash matches along the slot's chain, newest first."""
        out = [] if out is None else out
        h = index_key_hash(key)
        v = self.read_slot(h)
        count = self.header.index_count
        if v <= 0 or v > count or count <= 1:
            return out
        n = v
        base = self.header.begin_timestamp
        steps = 0
        limit = self.chain_limit
        while len(out) < max_num and steps <= limit:  # a chain can't be longer than the file
            steps += 1
            key_hash, phy, diff, prev = self.read_entry(n)
            if diff < 0:
                break
            t = base + diff * 1000
            if key_hash == h and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == n or t < begin:
                break
            n = prev
        return out

    # ------------------------------------------------------------- writing
    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """``IndexFile#putKey``, writing the header through after every put."""
        h = self.header
        if h.index_count >= self.index_num:
            return False
        self.reserve_entries(h.index_count + 1)
        key_hash = index_key_hash(key)
        slot_pos = self.slot_pos(key_hash)
        slot_value = _SLOT.unpack_from(self.mm, slot_pos)[0]
        if slot_value <= 0 or slot_value > h.index_count:
            slot_value = 0
        diff = time_diff(store_timestamp, h.begin_timestamp)
        _ENTRY.pack_into(self.mm, self.entry_pos(h.index_count), key_hash, phy_offset, diff, slot_value)
        _SLOT.pack_into(self.mm, slot_pos, h.index_count)
        if h.index_count <= 1:
            h.begin_phy_offset = phy_offset
            h.begin_timestamp = store_timestamp
        if slot_value == 0:  # an AtomicInteger: a crafted count at Integer.MAX_VALUE wraps, as in Java
            h.hash_slot_count = (h.hash_slot_count + 1 + (1 << 31)) % (1 << 32) - (1 << 31)
        h.index_count += 1
        h.end_phy_offset = phy_offset
        h.end_timestamp = store_timestamp
        self.write_header()
        return True

    # ------------------------------------------------------------- writing, in blocks
    def write_header(self) -> None:
        """The header as :attr:`header` holds it (``IndexHeader#updateByteBuffer``): after
        every put of :meth:`put_key`, once per block of :meth:`put_keys`."""
        _HEADER.pack_into(self.mm, 0, *self.header.as_tuple())

    def put_keys(self, hashes, phy, ts) -> None:
        """``IndexFile#putKey`` for ``k`` keys (index hashes given) that all fit in the file:
        the bytes of ``k`` :meth:`put_key` calls. Entry numbers are consecutive, each
        entry's prevIndex is the previous entry of its slot in the block or the slot's old
        value, hashSlotCount grows once per slot that was empty, and the header is written
        once, as the last put would leave it (docs/format/index.md#putting-a-key)."""
        import numpy as np

        hdr = self.header
        k = len(hashes)
        c0 = hdr.index_count
        if c0 + k > self.index_num:
            raise StoreError(f"{k} index keys do not fit after entry {c0}", path=self.path)
        self.reserve_entries(c0 + k)  # allocated before the mapping writes them (no SIGBUS on a full disk)
        b0 = hdr.begin_timestamp
        if c0 <= 1:  # the first put of a file sets beginTimestamp: later keys count from it
            diff = time_diffs(ts, int(ts[0]))
            diff[0] = time_diff(int(ts[0]), b0)
        else:
            diff = time_diffs(ts, b0)
        ss, order, nn, head, tail, prev_sorted = slot_chains(np.asarray(hashes, dtype=np.int64) % self.slot_num, c0)
        slots = self._slots()
        hs, hn = ss[head], nn[head]
        old = slots[hs].astype(np.int64)  # a slot's old value counts only if it is a valid entry (putKey)
        old = np.where((old > 0) & (old <= hn), old, 0)
        prev_sorted[head] = old
        prev = np.empty(k, dtype=np.int64)
        prev[order] = prev_sorted
        self._entries(c0, k)[:] = entry_block(hashes, phy, diff, prev)
        slots[ss[tail]] = nn[tail]
        del slots
        if c0 <= 1:
            hdr.begin_phy_offset = int(phy[0])
            hdr.begin_timestamp = int(ts[0])
        # an AtomicInteger, as in put_key: a crafted count at Integer.MAX_VALUE wraps
        hdr.hash_slot_count = (hdr.hash_slot_count + int(np.count_nonzero(old == 0)) + (1 << 31)) % (1 << 32) - (
            1 << 31
        )
        hdr.index_count = c0 + k
        hdr.end_phy_offset = int(phy[-1])
        hdr.end_timestamp = int(ts[-1])
        self.write_header()

    def link_blocks(self, blocks) -> int:
        """Chain blocks of entries written by :func:`write_entries` (each slot's first link
        in a block left 0), given in entry order as their (slot, head, tail) arrays: a
        block's first entry of a slot gets the slot's last entry in earlier blocks (or 0),
        and the slot table is written whole: :meth:`put_keys`'s bytes over all keys at
        once. The table is made from the blocks alone, so a retry writes the same bytes.
        Returns how many slots got a first entry (hashSlotCount)."""
        import numpy as np

        last_of = np.zeros(self.slot_num, dtype=np.int64)
        prev = self._entries(0, self.index_num)["prev_index"]
        used = 0
        for slot, head, tail in blocks:
            old = last_of[slot]
            used += int(np.count_nonzero(old == 0))
            prev[head] = old
            last_of[slot] = tail
        del prev
        slots = self._slots()
        slots[:] = last_of
        del slots
        return used

    def _slots(self):
        """The slot table as a writable numpy view of the mapping."""
        import numpy as np

        return np.frombuffer(self.mm, dtype=slot_dtype(), count=self.slot_num, offset=INDEX_HEADER_SIZE)

    def _entries(self, n0: int, k: int):
        """Entries ``n0 .. n0 + k - 1`` as a writable numpy view of the mapping."""
        import numpy as np

        return np.frombuffer(self.mm, dtype=entry_dtype(), count=k, offset=self.entry_pos(n0))

    def release_pages(self, upto_entry: int | None = None) -> None:
        """Written pages out of this process (they stay in the page cache and the file):
        the entries below ``upto_entry``, or, with None, every page of the mapping."""
        import mmap

        from rmqstore_cli.store.mapped_files import release_pages

        if upto_entry is None:
            release_pages(self.mm, 0, self.length + (-self.length) % mmap.PAGESIZE)
        else:
            release_pages(self.mm, self.entries_base, self.entries_base + upto_entry * INDEX_ENTRY_SIZE)

    @classmethod
    def create(
        cls,
        path: Path,
        slot_num: int,
        index_num: int,
        prev_end_phy: int = 0,
        prev_end_ts: int = 0,
        roots: list[Path] | None = None,
    ) -> IndexFile:
        """A new full-size file; a rolled file starts from the previous file's end values
        (``IndexService#getAndCreateLastIndexFile``). Created ``O_EXCL``/``O_NOFOLLOW``
        inside ``roots`` (default: its index dir's parent)."""
        size = index_file_size(slot_num, index_num)
        # header and slot table (written anywhere), and a first chunk of entries, allocated
        # before the file is mapped: even reading a hole of a mapping faults on a full tmpfs
        first = min(size, INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE + safefs.RESERVE_CHUNK)
        safefs.create_sized(path, size, roots or [path.parent.parent], "index file", reserve_first=first)
        f = cls(path, slot_num, index_num, writable=True, roots=roots, fresh=True)
        f.reserved = first
        if prev_end_phy > 0:
            f.header.begin_phy_offset = f.header.end_phy_offset = prev_end_phy
        if prev_end_ts > 0:
            f.header.begin_timestamp = f.header.end_timestamp = prev_end_ts
        return f

    # ------------------------------------------------------------- bulk reads (verify)
    @property
    def entry_limit(self) -> int:
        """Entries 1..entry_limit-1 are readable: the header's count as ``IndexHeader#load``
        reads it, bounded by the entries the file's length and maxIndexNum hold."""
        room = max(0, (self.length - self.entries_base) // INDEX_ENTRY_SIZE)
        return max(0, min(self.header.index_count, room, self.index_num))

    @property
    def readable_entries(self) -> int:
        """How many entries (numbers 1..n) can be read: entry 0 is never written."""
        return max(self.entry_limit - 1, 0)

    def entry_columns(self, a: int, b: int, *names: str) -> list:
        """Fields ``names`` of entries number a+1..b (the readable entries' array indices
        a..b-1) as native arrays (offsets int64, the rest int32); the mapped pages they
        were read from are released, so reading a whole file this way keeps only the arrays."""
        import numpy as np

        start = self.entry_pos(a + 1)
        e = np.frombuffer(self.mm, entry_dtype(), count=b - a, offset=start)
        out = [e[k].astype(np.int64 if k == "phy_offset" else np.int32) for k in names]
        del e
        release_pages(self.mm, start, start + (b - a) * INDEX_ENTRY_SIZE)
        return out

    def entry_phys(self, idx):
        """Offsets of the entries at array indices ``idx`` (a few), the pages released."""
        import numpy as np

        e = np.frombuffer(self.mm, entry_dtype(), count=self.readable_entries, offset=self.entry_pos(1))
        out = e["phy_offset"][idx].astype(np.int64)
        del e
        release_pages(self.mm, 0, self.length)
        return out

    def slot_values(self, a: int, b: int) -> tuple:
        """(slot numbers, values) of the non-zero slots among slots a..b-1; pages released."""
        import numpy as np

        start = INDEX_HEADER_SIZE + a * HASH_SLOT_SIZE
        raw = np.frombuffer(self.mm, slot_dtype(), count=b - a, offset=start)
        nz = np.flatnonzero(raw.view(raw.dtype.newbyteorder("=")))  # the zero test needs no byte swap
        vals = raw[nz].astype(np.int64)
        del raw
        release_pages(self.mm, start, start + (b - a) * HASH_SLOT_SIZE)
        return nz + a, vals

    def drop_pages(self) -> None:
        """Release every mapped page (the data stays in the page cache and the file)."""
        release_pages(self.mm, 0, self.length)

    def close(self) -> None:
        if self.writable:
            self.mm.flush()
        if not isinstance(self.mm, bytes):
            self.mm.close()


def time_diff(store_timestamp: int, begin_timestamp: int) -> int:
    """``IndexFile#putKey``'s timeDiff: seconds since the file's beginTimestamp, clamped
    to [0, Integer.MAX_VALUE], 0 while that is ≤ 0 (a negative delta ends at 0 whether
    Java's truncating division or floor division makes it)."""
    if begin_timestamp <= 0:
        return 0
    d = (store_timestamp - begin_timestamp) // 1000
    return 0 if d < 0 else TIME_DIFF_MAX if d > TIME_DIFF_MAX else d  # no min/max calls: once a key


def time_diffs(ts, begin_timestamp: int):
    """:func:`time_diff` of every store time of ``ts`` (an int64 array)."""
    import numpy as np

    if begin_timestamp <= 0:
        return np.zeros(len(ts), np.int64)
    return np.clip((np.asarray(ts, dtype=np.int64) - begin_timestamp) // 1000, 0, TIME_DIFF_MAX)


def slot_chains(s, c0: int):
    """Keys with slots ``s`` put as entries ``c0, c0 + 1, …``, grouped by slot in put order
    (one sort of ``slot * k + position``): (slot, put position, entry number) in that order,
    the first (``head``) and last (``tail``) of each slot's group, and each entry's previous
    entry in its slot (for a group's first one: left to the caller, the slot's old head)."""
    import numpy as np

    k = len(s)
    key = np.sort(np.asarray(s, dtype=np.int64) * k + np.arange(k))
    ss = key // k
    order = key - ss * k
    nn = c0 + order
    head = np.ones(k, dtype=bool)
    head[1:] = ss[1:] != ss[:-1]
    tail = np.ones(k, dtype=bool)
    tail[:-1] = head[1:]
    prev_sorted = np.empty(k, dtype=np.int64)
    prev_sorted[1:] = nn[:-1]
    return ss, order, nn, head, tail, prev_sorted


def entry_block(hashes, phy, diff, prev):
    """Index entries (keyHash, phyOffset, timeDiff, prevIndex) as one numpy array of
    :func:`entry_dtype`, in entry order."""
    import numpy as np

    e = np.empty(len(hashes), dtype=entry_dtype())
    e["key_hash"] = hashes
    e["phy_offset"] = phy
    e["time_diff"] = diff
    e["prev_index"] = prev
    return e


def write_entries(path: Path, slot_num: int, n0: int, hashes, phy, diff):
    """Entries ``n0 ..`` of the (existing, full-size) index file ``path`` from one block of
    keys, by ``pwrite`` (``write_range``: allocated first), each chained to the previous
    entry of its slot in the block and its slot's first one left 0 for
    :meth:`IndexFile.link_blocks`. Returns that block's (slot, head, tail) per slot."""
    import numpy as np

    from rmqstore_cli.store.consume_queue import write_range

    ss, order, nn, head, tail, prev_sorted = slot_chains(np.asarray(hashes, dtype=np.int64) % slot_num, n0)
    prev_sorted[head] = 0
    prev = np.empty(len(hashes), dtype=np.int64)
    prev[order] = prev_sorted
    at = INDEX_HEADER_SIZE + slot_num * HASH_SLOT_SIZE + n0 * INDEX_ENTRY_SIZE
    write_range(path, at, entry_block(hashes, phy, diff, prev).tobytes(), "index entries")
    return ss[head], nn[head], nn[tail]


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


def index_file_paths(index_dir: Path) -> list[Path]:
    """What ``IndexService#load`` lists in ``index/``, in name order: every entry but hidden
    ones, not just regular files — a FIFO, device or directory in place of an index file is
    refused by name when opened (or reported by verify), never skipped into a false "not
    found"."""
    try:
        return sorted(p for p in index_dir.iterdir() if not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def infer_index_geometry(files: list[Path], size: int) -> tuple[int, int]:
    """Find (maxHashSlotNum, maxIndexNum) for index files of a non-default ``size``.

    The header does not store them. For each geometry that fits the size, the newest
    entry of a file must head its own slot's chain (``slot[hash % S] == indexCount-1``)
    and its predecessor must be older; the unique geometry all files agree on wins.
    Each file is read by ``pread`` of the few pages a candidate touches (a small cache),
    never whole: a 420 MB file costs a few MB, and a hole on a full tmpfs is never mapped.
    """
    body = size - INDEX_HEADER_SIZE
    max_slots = body // HASH_SLOT_SIZE
    if max_slots > 2_000_000:
        raise StoreError(
            f"index files of {size} bytes are not the default size",
            path=files[0],
            hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
        )
    samples = []
    try:
        for p in files:
            data = _PageReader(p, size)
            samples.append(data)
            count = data.unpack(_HEADER, 0)[5]
            if count > 1:
                data.count = count
            else:
                samples.pop().close()
        if body < 0 or not samples:
            raise StoreError(
                f"cannot tell the index geometry of {size}-byte files",
                path=files[0],
                hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
            )
        candidates = []
        for s in range(1, max_slots + 1):
            rest = body - s * HASH_SLOT_SIZE
            if rest <= 0 or rest % INDEX_ENTRY_SIZE:
                continue
            n = rest // INDEX_ENTRY_SIZE
            if all(_geometry_fits(data, data.count, s, n) for data in samples):
                candidates.append((s, n))
    finally:
        for data in samples:
            data.close()
    if len(candidates) != 1:
        raise StoreError(
            f"cannot tell the index geometry of {size}-byte files ({len(candidates)} candidates)",
            path=files[0],
            hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
        )
    return candidates[0]


class _PageReader:
    """``unpack`` at any position of a file through ``pread`` of whole pages, the last
    :attr:`PAGES` kept: bounded memory however large the file, and no mapping."""

    PAGE = 4096
    PAGES = 256

    def __init__(self, path: Path, size: int):
        from collections import OrderedDict

        self.path, self.size = path, size
        self.fd = open_read_only(path)
        self.pages: OrderedDict[int, bytes] = OrderedDict()
        self.count = 0

    def _page(self, n: int) -> bytes:
        b = self.pages.get(n)
        if b is None:
            try:
                b = os.pread(self.fd, self.PAGE, n * self.PAGE)
            except OSError as e:
                raise os_error(e, self.path, "read") from None
            self.pages[n] = b
            if len(self.pages) > self.PAGES:
                self.pages.popitem(last=False)
        return b

    def unpack(self, st: struct.Struct, pos: int) -> tuple:
        if pos < 0 or pos + st.size > self.size:
            raise StoreError(f"read past the end of the {self.size}-byte file", path=self.path, offset=pos)
        first, last = pos // self.PAGE, (pos + st.size - 1) // self.PAGE
        raw = b"".join(self._page(n) for n in range(first, last + 1))
        off = pos - first * self.PAGE
        if off + st.size > len(raw):  # the file is shorter than its stat said
            raise StoreError("index file ends early", path=self.path, offset=pos)
        return st.unpack_from(raw, off)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _geometry_fits(data: _PageReader, count: int, s: int, n: int) -> bool:
    """Entries of one chain share a slot: ``hash(prev) % S == hash(entry) % S`` for the
    newest entries, and the newest entry heads its slot's chain."""
    if count > n:
        return False
    base = INDEX_HEADER_SIZE + s * HASH_SLOT_SIZE
    for k in range(count - 1, max(0, count - 257), -1):
        key_hash, _, diff, prev = data.unpack(_ENTRY, base + k * INDEX_ENTRY_SIZE)
        if key_hash < 0 or diff < 0 or not 0 <= prev < k:
            return False
        if k == count - 1 and data.unpack(_SLOT, INDEX_HEADER_SIZE + (key_hash % s) * HASH_SLOT_SIZE)[0] != k:
            return False
        if prev > 0:
            prev_hash = data.unpack(_ENTRY, base + prev * INDEX_ENTRY_SIZE)[0]
            if prev_hash % s != key_hash % s:
                return False
    return True
