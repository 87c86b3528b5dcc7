"""IndexFile: one file of the hash index queried by ``topic#key`` and a time range.

Reading touches only the header, one slot and the chain's entries, so a look-up in a
420 MB file reads a few pages. Writing is ``IndexFile#putKey`` with the broker's chain,
timeDiff and counter rules (docs/format/index.md); the files together are
``index_service.py``'s ``IndexService``, their geometry read back ``index_geometry.py``'s.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rmqstore_cli.formats import index as index_layout

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import release_pages
from rmqstore_cli.store.files.safefs import map_file, open_for_write, open_read_only
from rmqstore_cli.store.javahash import index_key_hash
from rmqstore_cli.store.layout.index_geometry import infer_index_geometry as infer_index_geometry

_HEADER = struct.Struct(index_layout.HEADER_FORMAT)
_SLOT = struct.Struct(index_layout.SLOT_FORMAT)
_ENTRY = struct.Struct(index_layout.ENTRY_FORMAT)


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
        self.size = (
            index_layout.INDEX_HEADER_SIZE
            + slot_num * index_layout.HASH_SLOT_SIZE
            + index_num * index_layout.INDEX_ENTRY_SIZE
        )
        # a writable file never through a link, and only inside roots (default: its index dir's parent)
        fd = open_for_write(path, roots or [path.parent.parent]) if writable else open_read_only(path)
        try:
            length = os.fstat(fd).st_size
            self._check_length(length, lenient)
            self.mm = map_file(fd, length, path, write=writable, fresh=writable and fresh)
        finally:
            os.close(fd)
        self.length = length
        #: Bytes from the start already allocated on disk (:meth:`reserve_entries`).
        self.reserved = 0
        h = (
            IndexHeaderValues(*_HEADER.unpack_from(self.mm, 0))
            if length >= index_layout.INDEX_HEADER_SIZE
            else IndexHeaderValues(index_count=0)
        )
        self._set_header(h)

    def _check_length(self, length: int, lenient: bool) -> None:
        """A file shorter than its header is an error (but read leniently); a file written must
        be exactly the size its slot and entry counts give, so every slot and entry lies in it."""
        if length < index_layout.INDEX_HEADER_SIZE and not (lenient and not self.writable):
            raise StoreError(f"index file has {length} bytes, less than its 40-byte header", path=self.path)
        if self.writable and length != self.size:
            raise StoreError(
                f"index file has {length} bytes, not the {self.size} of maxHashSlotNum={self.slot_num} "
                f"and maxIndexNum={self.index_num}",
                path=self.path,
                hint="pass the broker's ⟦index_slots⟧/⟦index_max⟧ or ⟦broker_conf⟧",
            )

    def _set_header(self, h: IndexHeaderValues) -> None:
        """The header as ``IndexHeader#load`` holds it, the count as stored kept aside."""
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
        return index_layout.INDEX_HEADER_SIZE + self.slot_num * index_layout.HASH_SLOT_SIZE

    def slot_pos(self, key_hash: int) -> int:
        return index_layout.INDEX_HEADER_SIZE + (key_hash % self.slot_num) * index_layout.HASH_SLOT_SIZE

    def entry_pos(self, n: int) -> int:
        return self.entries_base + n * index_layout.INDEX_ENTRY_SIZE

    def read_slot(self, key_hash: int) -> int:
        pos = self.slot_pos(key_hash)
        if pos + index_layout.HASH_SLOT_SIZE > self.length:  # a truncated file
            raise StoreError(
                f"index slot {key_hash % self.slot_num} lies past the end of the file", path=self.path, offset=pos
            )
        return _SLOT.unpack_from(self.mm, pos)[0]

    def read_entry(self, n: int) -> tuple[int, int, int, int]:
        """(keyHash, phyOffset, timeDiff, prevIndex) of entry ``n``."""
        pos = self.entry_pos(n)
        if pos + index_layout.INDEX_ENTRY_SIZE > self.length:
            raise StoreError(f"index entry {n} lies past the end of the file", path=self.path, offset=pos)
        return _ENTRY.unpack_from(self.mm, pos)

    @property
    def chain_limit(self) -> int:
        """Most steps a hash chain can take: the entries that fit in the file, so a crafted
        count with a cycle of prevIndex links cannot make a walk run for 2^31 steps."""
        fit = max(0, (self.length - self.entries_base) // index_layout.INDEX_ENTRY_SIZE)
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
        if not self._links_to(v):
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
            if not self._links_to(prev, n) or t < begin:
                break
            n = prev
        return out

    def _links_to(self, v: int, current: int = 0) -> bool:
        """Slot value or prevIndex ``v`` names an entry of the chain (1 to indexCount, not
        ``current`` itself) in a file that holds entries."""
        count = self.header.index_count
        return 0 < v <= count and v != current and count > 1

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
        out, ss, hn, tn = chained_entries(hashes, phy, diff, c0, self.slot_num)
        slots = self._slots()
        old = slots[ss].astype(np.int64)  # a slot's old value counts only if it is a valid entry (putKey)
        old = np.where((old > 0) & (old <= hn), old, 0)
        entries = out.view(entry_dtype())
        entries["prev_index"][hn - c0] = old  # each slot's first entry of the block links to it
        self._entries(c0, k)[:] = entries
        slots[ss] = tn
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
        The pages of the blocks done are released as it goes: resident memory is a block,
        not the file (420 MB a full default file, issue 35).
        Returns how many slots got a first entry (hashSlotCount)."""
        import numpy as np

        last_of = np.zeros(self.slot_num, dtype=np.int32)  # entry numbers: an int's, as the table's
        prev = self._entries(0, self.index_num)["prev_index"]
        used = 0
        for slot, head, tail in blocks:
            old = last_of[slot]
            used += int(np.count_nonzero(old == 0))
            prev[head] = old
            last_of[slot] = tail
            if len(head):  # later blocks write later entries only: the pages below are done
                self.release_pages(int(head.min()))
        del prev
        slots = self._slots()
        slots[:] = last_of
        del slots
        return used

    def _slots(self):
        """The slot table as a writable numpy view of the mapping."""
        import numpy as np

        return np.frombuffer(self.mm, dtype=slot_dtype(), count=self.slot_num, offset=index_layout.INDEX_HEADER_SIZE)

    def _entries(self, n0: int, k: int):
        """Entries ``n0 .. n0 + k - 1`` as a writable numpy view of the mapping."""
        import numpy as np

        return np.frombuffer(self.mm, dtype=entry_dtype(), count=k, offset=self.entry_pos(n0))

    def release_pages(self, upto_entry: int | None = None) -> None:
        """Written pages out of this process (they stay in the page cache and the file):
        the entries below ``upto_entry``, or, with None, every page of the mapping."""
        import mmap

        from rmqstore_cli.store.files.mapped_files import release_pages

        if upto_entry is None:
            release_pages(self.mm, 0, self.length + (-self.length) % mmap.PAGESIZE)
        else:
            release_pages(self.mm, self.entries_base, self.entries_base + upto_entry * index_layout.INDEX_ENTRY_SIZE)

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
        size = index_layout.index_file_size(slot_num, index_num)
        # header and slot table (written anywhere), and a first chunk of entries, allocated
        # before the file is mapped: even reading a hole of a mapping faults on a full tmpfs
        first = min(
            size, index_layout.INDEX_HEADER_SIZE + slot_num * index_layout.HASH_SLOT_SIZE + safefs.RESERVE_CHUNK
        )
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
        room = max(0, (self.length - self.entries_base) // index_layout.INDEX_ENTRY_SIZE)
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
        release_pages(self.mm, start, start + (b - a) * index_layout.INDEX_ENTRY_SIZE)
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

        start = index_layout.INDEX_HEADER_SIZE + a * index_layout.HASH_SLOT_SIZE
        raw = np.frombuffer(self.mm, slot_dtype(), count=b - a, offset=start)
        # the zero test needs no byte swap; nonzero of a bool array is ~7 times faster than of ints
        nz = np.flatnonzero(raw.view(raw.dtype.newbyteorder("=")) != 0)
        vals = raw[nz].astype(np.int64)
        del raw
        release_pages(self.mm, start, start + (b - a) * index_layout.HASH_SLOT_SIZE)
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
    return (
        0 if d < 0 else index_layout.TIME_DIFF_MAX if d > index_layout.TIME_DIFF_MAX else d
    )  # no min/max calls: once a key


def time_diffs(ts, begin_timestamp: int):
    """:func:`time_diff` of every store time of ``ts`` (an int64 array)."""
    import numpy as np

    if begin_timestamp <= 0:
        return np.zeros(len(ts), np.int64)
    return np.clip((np.asarray(ts, dtype=np.int64) - begin_timestamp) // 1000, 0, index_layout.TIME_DIFF_MAX)


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


def index_entries(hashes, phy, diff, n0: int, slot_num: int, out, slots, heads, tails) -> int:
    """The reference of the C ``index_entries``: entries ``n0 ..`` of a block of keys as
    :func:`entry_block` lays them out, into ``out`` (uint8), each chained to the previous
    entry of its slot in the block (0 for the first); into ``slots``, ``heads`` and
    ``tails`` the slots used, ascending, with their first and last entry. Returns how many."""
    import numpy as np

    if not (len(phy) == len(diff) == len(slots) == len(heads) == len(tails) == len(hashes)) or slot_num < 1:
        raise ValueError("index_entries: the arrays differ in length, or slot_num < 1")
    ss, order, nn, head, tail, prev_sorted = slot_chains(np.asarray(hashes, dtype=np.int64) % slot_num, n0)
    prev_sorted[head] = 0
    prev = np.empty(len(hashes), dtype=np.int64)
    prev[order] = prev_sorted
    out[:] = np.frombuffer(entry_block(hashes, phy, diff, prev).tobytes(), np.uint8)
    u = int(np.count_nonzero(head))
    slots[:u], heads[:u], tails[:u] = ss[head], nn[head], nn[tail]
    return u


def write_entries(path: Path, slot_num: int, n0: int, hashes, phy, diff):
    """Entries ``n0 ..`` of the (existing, full-size) index file ``path`` from one block of
    keys, by ``pwrite`` (``write_range``: allocated first), each chained to the previous
    entry of its slot in the block and its slot's first one left 0 for
    :meth:`IndexFile.link_blocks` (laid out by the C loop ``index_entries``, one pass, or
    its twin: :func:`chained_entries`). Returns that block's (slot, head, tail) per slot."""
    from rmqstore_cli.store.files.safefs import write_range

    out, slots, heads, tails = chained_entries(hashes, phy, diff, n0, slot_num)
    at = index_layout.INDEX_HEADER_SIZE + slot_num * index_layout.HASH_SLOT_SIZE + n0 * index_layout.INDEX_ENTRY_SIZE
    write_range(path, at, out, "index entries")
    return slots, heads, tails


def chained_entries(hashes, phy, diff, n0: int, slot_num: int) -> tuple:
    """Entries ``n0 ..`` of a block of keys laid out (uint8), each chained to the previous
    entry of its slot in the block and a slot's first one left 0, with the slots used
    (ascending) and their first and last entry: the C loop ``index_entries`` (one pass) or
    its twin, :func:`index_entries`."""
    import numpy as np

    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    kern = FAST_PATHS.kernels()
    k = len(hashes)
    cols = [np.ascontiguousarray(c, dtype=np.int64) for c in (hashes, phy, diff)]
    out = np.empty(k * index_layout.INDEX_ENTRY_SIZE, np.uint8)
    slots, heads, tails = (np.empty(k, np.int64) for _ in range(3))
    used = (index_entries if kern is None else kern.index_entries)(*cols, n0, slot_num, out, slots, heads, tails)
    return out, slots[:used], heads[:used], tails[:used]


def index_file_paths(index_dir: Path) -> list[Path]:
    """What ``IndexService#load`` lists in ``index/``, in name order: every entry but hidden
    ones, not just regular files — a FIFO, device or directory in place of an index file is
    refused by name when opened (or reported by verify), never skipped into a false "not
    found"."""
    try:
        return sorted(p for p in index_dir.iterdir() if not p.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
