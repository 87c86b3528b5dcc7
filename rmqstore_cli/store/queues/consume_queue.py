"""ConsumeQueue: 20-byte units per (topic, queueId), read vectorised, written as the broker does.

Reading ends a queue at its first invalid unit (``offset < 0 || size <= 0``,
``ConsumeQueue#recover``); writing is ``ConsumeQueue#putMessagePositionInfo`` with its
pre-blank fill for a queue whose first unit is not at offset 0 (docs/format/consume-queue.md#pre-blank-units).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.consume_queue import (
    CQ_STORE_UNIT_SIZE,
    PRE_BLANK_SIZE,
    UNIT_FORMAT,
    ConsumeQueueUnit,
)
from rmqstore_cli.formats.derive import numpy_dtype

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.below import Below
from rmqstore_cli.store.files.mapped_files import MappedFile, MappedFileQueue, offset2file_name, release_pages

UNIT_DTYPE = numpy_dtype(ConsumeQueueUnit)
_UNIT = struct.Struct(UNIT_FORMAT)
PRE_BLANK_UNIT = _UNIT.pack(0, PRE_BLANK_SIZE, 0)


@dataclass(slots=True)
class Unit:
    cq_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    file: str

    @property
    def pre_blank(self) -> bool:
        return is_pre_blank(self.commitlog_offset, self.size, self.tags_code)


def is_pre_blank(commitlog_offset, size, tags_code):
    """``ConsumeQueue#fillPreBlank``'s unit (0, Integer.MAX_VALUE, 0): for one unit's
    values, or element-wise for numpy columns of many."""
    return (commitlog_offset == 0) & (size == PRE_BLANK_SIZE) & (tags_code == 0)


class ConsumeQueue:
    """One queue's files, read-only."""

    def __init__(
        self,
        root: Path,
        topic: str,
        queue_id: int,
        file_size: int,
        directory: Path | None = None,
        skip: Callable[[Path], bool] | None = None,
        queue: MappedFileQueue | None = None,
        listed: list[os.DirEntry] | None = None,
    ):
        """``directory``: the queue's directory when its name is not ``str(queue_id)``.
        ``skip``: a file it answers True for is left out (a gap follows), and directories
        named like a file are handed to it instead of refused (``verify`` reports both); a
        file listed as a regular file is not asked about. :attr:`skipped` says whether it
        left anything out.
        ``queue``: the files, when they are not a directory's listing (:meth:`of_file`);
        ``listed``: the directory's entries, listed already (``mapped_files.queue_tree``)."""
        self.topic = topic
        self.queue_id = queue_id
        self.dir = directory if directory is not None else root / topic / str(queue_id)
        self.file_size = file_size
        self.queue = queue if queue is not None else MappedFileQueue(self.dir, file_size, listed=listed)
        #: Whether a file or a directory named like one was left out (``skip``).
        self.skipped = self._skip(skip)
        self._units_per_file = file_size // CQ_STORE_UNIT_SIZE
        self._end: int | None = None
        self._by_base = {f.file_from_offset // CQ_STORE_UNIT_SIZE: f for f in self.queue.files}
        #: By first unit, the units of each file read instead of mapped (:meth:`copied_units`),
        #: up to the last non-zero one (every unit after them is zero); None: the file is mapped.
        self._copies: dict[int, np.ndarray | None] = {}

    def _skip(self, skip: Callable[[Path], bool] | None) -> bool:
        """Leave out what ``skip`` answers True for (see ``__init__``); a directory named like a
        file is refused without it. Whether anything was left out."""
        for p in self.queue.not_regular:  # a directory named like a file: refused, not skipped
            if skip is None:
                raise StoreError("a directory where a store file belongs; only regular files are read", path=p)
            skip(p)
        listed = len(self.queue.files)
        if skip is not None:
            self.queue.files = [f for f in self.queue.files if f.plain or not skip(f.path)]
        return bool(self.queue.not_regular) or len(self.queue.files) < listed

    def file_names(self) -> list[str]:
        """The names of the queue's files (a RocksDB queue names its database instead)."""
        return [f.name for f in self.queue.files]

    @classmethod
    def of_file(cls, path: Path, length: int) -> ConsumeQueue:
        """One file read on its own (``dump-cq --file``), read-only: it starts at the offset its
        name says when that is 20 digits, else at 0; the directory it lies in is not listed."""
        name = path.name
        start = int(name) if name.isdigit() and name.isascii() and len(name) == 20 else 0
        return cls(
            path.parent, "", 0, length, directory=path.parent, queue=MappedFileQueue.of_file(path, start, length)
        )

    def _file_units(self, i: int) -> np.ndarray:
        f = self.queue.files[i]
        buf = f.buffer()
        n = len(buf) // CQ_STORE_UNIT_SIZE
        return np.frombuffer(buf, dtype=UNIT_DTYPE, count=n) if n else np.empty(0, UNIT_DTYPE)

    @property
    def max_offset(self) -> int:
        """``#getMaxOffsetInQueue`` after recovery: the unit index after the last valid unit."""
        if self._end is None:
            self._end = self._find_end()
        return self._end

    def _find_end(self) -> int:
        """``ConsumeQueue#recover``: from file n-3 on, the first invalid unit (offset < 0 or
        size <= 0) ends the queue; a fully valid file continues into the next one listed.
        A sparse file is read up to its first hole only (the hole holds zero units)."""
        files = self.queue.files
        end = self.min_file_offset
        for f in files[max(0, len(files) - 3) :]:
            base = f.file_from_offset // CQ_STORE_UNIT_SIZE
            units = self._units_to_hole(f, base)
            bad = self._first_invalid(f, units)
            if bad is None and self._copies.get(base) is not None and units.size < self._units_per_file:
                bad = units.size  # a copy ends before the file: a zero unit, invalid, follows
            if bad is not None:
                return base + bad
            end = base + len(units)
            if len(units) < self._units_per_file:
                return end
        return end

    def _units_to_hole(self, f: MappedFile, base: int) -> np.ndarray:
        """The file's units up to its first hole (the unit the hole starts in included): a
        copy's units, or its mapping's cut at ``safefs.data_extent``."""
        copy = self.copied_units(base)
        if copy is not None:
            return copy
        units = self.file_units(base)
        extent = safefs.data_extent(f.path)
        if extent is not None and extent < units.size * CQ_STORE_UNIT_SIZE:
            units = units[: extent // CQ_STORE_UNIT_SIZE + 1]  # a hole follows: zero units
        return units

    def _first_invalid(self, f, units: np.ndarray) -> int | None:
        """Index of the first unit with offset < 0 or size <= 0, read ``UNIT_CHUNK`` units at
        a time, their pages released (a queue's last three files are read whole: 18 MB a
        queue at the default size if the pages stayed). A copy of a few units (most queues
        of a many-queue store) is looked at in Python: numpy's calls cost more than that."""
        copied = self._copies.get(f.file_from_offset // CQ_STORE_UNIT_SIZE) is not None
        if copied and units.size <= FEW_UNITS:
            return next((j for j, (off, size, _) in enumerate(units.tolist()) if off < 0 or size <= 0), None)
        for a in range(0, units.size, UNIT_CHUNK):
            u = units[a : a + UNIT_CHUNK]
            bad = np.flatnonzero((u["commitlog_offset"] < 0) | (u["size"] <= 0))
            if not copied:
                release_pages(f.buffer(), a * CQ_STORE_UNIT_SIZE, (a + u.size) * CQ_STORE_UNIT_SIZE)
            if bad.size:
                return a + int(bad[0])
        return None

    @property
    def min_file_offset(self) -> int:
        files = self.queue.files
        return files[0].file_from_offset // CQ_STORE_UNIT_SIZE if files else 0

    def min_offset(self, commitlog_min_offset: int) -> int:
        """``#getMinOffsetInQueue`` after ``#correctMinOffset`` (4.9.7): the first unit of the
        first file whose commit-log offset is ≥ the commit log's minimum; else the file start."""
        if not self.queue.files:
            return 0
        units = self._file_units(0)
        base = self.min_file_offset
        limit = min(len(units), max(0, self.max_offset - base))
        hits = np.flatnonzero(units["commitlog_offset"][:limit] >= commitlog_min_offset)
        return base + int(hits[0]) if len(hits) else base

    def units(self, start: int = 0, stop: int | None = None) -> Iterator[Unit]:
        """Units with logical offsets in ``[start, stop)`` (default: up to the queue's end)."""
        stop = self.max_offset if stop is None else min(stop, self.max_offset)
        for arr, first, name in self.unit_arrays(start, stop):
            for j, (off, size, tags) in enumerate(arr.tolist()):
                yield Unit(first + j, off, size, tags, name)

    def unit_arrays(self, start: int, stop: int) -> Iterator[tuple[np.ndarray, int, str]]:
        """Numpy slices of units in ``[start, stop)``, one per file, with the first offset
        (from a file's copy when it was read, :meth:`copied_units`, else its mapping)."""
        per = self._units_per_file
        for i, f in enumerate(self.queue.files):
            base = f.file_from_offset // CQ_STORE_UNIT_SIZE
            if base + per <= start or base >= stop:
                continue
            copy = self._copies.get(base)
            units = self._file_units(i) if copy is None else copy
            count = len(units) if copy is None else per  # a copy: a file of the configured size
            lo, hi = max(start, base) - base, min(stop, base + count) - base
            if hi > lo:
                yield _zero_padded(units, lo, hi), base + lo, f.name

    # ---------------------------------------------------------------- bulk reads (verify)
    @property
    def units_per_file(self) -> int:
        return self._units_per_file

    def file_units(self, base: int) -> np.ndarray | None:
        """The units of the file whose first unit is ``base`` as a numpy view of its mapping
        (None: no such file)."""
        f = self._by_base.get(base)
        if f is None:
            return None
        buf = f.buffer()
        n = len(buf) // CQ_STORE_UNIT_SIZE
        return np.frombuffer(buf, UNIT_DTYPE, count=n) if n else np.zeros(0, UNIT_DTYPE)

    def map_files(self) -> None:
        """Read or map every file now: one that cannot be read is an error at open, not mid-scan."""
        for f in self.queue.files:
            base = f.file_from_offset // CQ_STORE_UNIT_SIZE
            if self.copied_units(base) is None:
                f.buffer()

    def copied_units(self, base: int) -> np.ndarray | None:
        """The units of the file whose first unit is ``base`` when it is read, not mapped: a
        preallocated file whose data is a prefix of at most ``READ_LIMIT`` bytes (most
        queues' last file; ``MappedFile#read_prefix``), its units kept up to the last
        non-zero one, every unit after them zero. None: no such file, or it is mapped."""
        if base in self._copies:
            return self._copies[base]
        f = self._by_base.get(base)
        if f is None:
            return None
        data = f.read_prefix(READ_LIMIT)
        copy = self._copies[base] = None if data is None else trimmed_units(data, self._units_per_file)
        return copy

    def unit_values(self, logical: int) -> tuple[int, int, int] | None:
        """(offset, size, tagsCode) of unit ``logical`` as :meth:`unit_arrays` reads it (zero past
        a copy's units), or None when no file holds it: one unit without a generator or a
        numpy slice when its file was read (a queue's last unit, ``startup_queues.recovered_end``)."""
        base = self.file_base(logical)
        copy = self._copies.get(base)
        if copy is None or base not in self._by_base:
            got = next(self.unit_arrays(logical, logical + 1), None)
            return None if got is None else tuple(got[0].tolist()[0])
        at = logical - base
        return copy[at].item() if at < copy.size else (0, 0, 0)

    def file_path(self, base: int) -> Path | None:
        """The path of the file whose first unit is ``base`` (None: no such file)."""
        f = self._by_base.get(base)
        return None if f is None else f.path

    def file_base(self, logical: int) -> int:
        """The first unit of the file that holds unit ``logical``."""
        return logical // self._units_per_file * self._units_per_file

    def file_of(self, logical: int) -> tuple[Path, int]:
        """(path of the file named for unit ``logical``, byte offset of the unit in it)."""
        b = self.file_base(logical)
        return self.dir / offset2file_name(b * CQ_STORE_UNIT_SIZE), (logical - b) * CQ_STORE_UNIT_SIZE

    def units_at(self, logical: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(found mask, offset, size, tagsCode) of the units at ``logical`` indices below the
        queue's end (``ConsumeQueue#getIndexBuffer`` in bulk). The units are copied and their
        mapped pages released: a scan that reads each unit once keeps none of them."""
        n = logical.size
        one = self._one_file(logical)
        if one is not None:
            return self._gather(one, logical - one)
        found = np.zeros(n, bool)
        off, size, tags = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
        inr = (logical >= self.min_file_offset) & (logical < self.max_offset)
        if not inr.any():
            return found, off, size, tags
        per = self._units_per_file
        fidx = np.where(inr, logical // per * per, -1)
        sel_f = fidx[inr]
        lo, hi = int(sel_f.min()), int(sel_f.max())
        for b in range(lo, hi + 1, per) if (hi - lo) // per < 64 else np.unique(sel_f).tolist():
            if b not in self._by_base:
                continue
            sel = np.flatnonzero(fidx == b)
            if sel.size:
                found[sel], off[sel], size[sel], tags[sel] = self._gather(b, logical[sel] - b)
        return found, off, size, tags

    def _one_file(self, logical: np.ndarray) -> int | None:
        """The first unit of the one file that holds every unit of ``logical``, all below the
        queue's end (the usual call: a few units of one queue); None: any other case."""
        if not logical.size:
            return None
        lo, hi = int(logical.min()), int(logical.max())
        b = self.file_base(lo)
        if lo < self.min_file_offset or hi >= self.max_offset or hi >= b + self._units_per_file:
            return None
        return b if b in self._by_base else None

    def _gather(self, b: int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(found, offset, size, tagsCode) of units ``at`` of the file whose first unit is ``b``:
        from its copy (zero after the copied units) or its mapping, whose pages are then released."""
        copy = self.copied_units(b)
        if copy is None:
            units = self.file_units(b)
            u = units[at]
            release_pages(
                self._by_base[b].buffer(), int(at.min()) * CQ_STORE_UNIT_SIZE, (int(at.max()) + 1) * CQ_STORE_UNIT_SIZE
            )
            return np.ones(at.size, bool), u["commitlog_offset"], u["size"], u["tags_code"]
        held = at < copy.size
        if held.all():
            u = copy[at]
            return at < self._units_per_file, u["commitlog_offset"], u["size"].astype(np.int64), u["tags_code"]
        u = copy[np.where(held, at, 0)] if copy.size else np.zeros(at.size, UNIT_DTYPE)
        zero = np.int64(0)
        return (
            at < self._units_per_file,
            np.where(held, u["commitlog_offset"], zero),
            np.where(held, u["size"], zero),
            np.where(held, u["tags_code"], zero),
        )

    def close(self) -> None:
        self.queue.close()


#: Units the end search reads (and whose mapped pages it releases) at a time.
UNIT_CHUNK = 1 << 16
#: Up to this many units, a read copy's end is found by a Python loop (:meth:`ConsumeQueue._first_invalid`).
FEW_UNITS = 64
#: The most data a consume-queue file is read (not mapped) with: a copy is kept while the
#: queue is open, trimmed to its non-zero units, so a queue holds at most this much of it
#: (a mapping holds a page table and a guard entry, and a page per read not yet released).
READ_LIMIT = 16 << 10
NAME_MAX = 255  #: NAME_MAX of Linux file systems: a longer topic cannot be a directory name


def _zero_padded(units: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``units[lo:hi]``, zero units making up what lies past ``units`` (a copy's end)."""
    part = units[lo:hi]
    if part.size == hi - lo:
        return part
    return np.concatenate([part, np.zeros(hi - lo - part.size, UNIT_DTYPE)])


def trimmed_units(data: bytes, count: int) -> np.ndarray:
    """The units of ``data`` (a file's first bytes; zeros follow them) up to the last one
    that is not all zeros, at most ``count``: what a read queue file keeps."""
    nonzero = (int.from_bytes(data, "little").bit_length() + 7) // 8  # its last non-zero byte + 1, in one C call
    keep = min(count, -(-nonzero // CQ_STORE_UNIT_SIZE))
    raw = data[: keep * CQ_STORE_UNIT_SIZE].ljust(keep * CQ_STORE_UNIT_SIZE, b"\0")
    return np.frombuffer(raw, UNIT_DTYPE, count=keep)


def unsafe_topic(topic: str) -> str | None:
    """Why a stored topic cannot be a ``consumequeue/<topic>`` directory, or None. The store
    joins any topic into the path (``ConsumeQueue`` constructor; the send-side
    ``TopicValidator#isTopicOrGroupIllegal`` is not applied to what is stored: the 4.9.7
    sample has ``Refund.Topic-2``), so only what is not one safe path component is refused."""
    if topic in ("", ".", ".."):
        return "not a directory name"
    if "/" in topic or "\0" in topic:
        return "contains '/' or NUL"
    if "\ufffd" in topic:
        return "not valid UTF-8"
    if len(topic.encode("utf-8", "surrogatepass")) > NAME_MAX:
        return f"longer than {NAME_MAX} bytes"
    return None


class ConsumeQueueWriter:
    """``ConsumeQueue#putMessagePositionInfo`` into fresh files, buffered, per queue.

    Holds only a small buffer and no open file, so memory and descriptors are bounded
    by the number of queues, not messages.
    """

    FLUSH_UNITS = 4096

    def __init__(
        self,
        root: Path,
        topic: str,
        queue_id: int,
        file_size: int,
        roots: list[Path] | None = None,
        *,
        write_offset: int = -1,
        file_starts: set[int] | None = None,
        max_physic_offset: int = -1,
        checked: dict[Path, bool] | None = None,
    ):
        why = unsafe_topic(topic)
        if why is not None:  # last guard: a name from the log never becomes a path outside root
            raise StoreError(f"topic {topic!r} cannot name a consume-queue directory: {why}", path=root)
        self.dir = root / topic / str(queue_id)
        self.file_size = file_size
        self.max_physic_offset = max_physic_offset
        self.write_offset = write_offset  # logical byte position of the next unit; -1: no file yet
        self._buf = bytearray()
        self._buf_start = max(write_offset, 0)
        #: Logical start of every file of the queue (made by this writer or there before).
        self.file_starts: set[int] = set(file_starts or ())
        self.files_created: list[Path] = []
        #: Where files may be created and written (``StoreConfig.write_roots``; default: the
        #: consume-queue root's parent): never through a link that leads out.
        self.roots = list(roots) if roots is not None else [root.parent]
        #: By consume-queue root, whether its real path lies inside ``roots``: shared by one
        #: dispatcher's writers (:meth:`_fresh_dirs`); None: ``safefs.make_dirs`` makes every directory.
        self.checked = checked
        #: This writer made the queue's directory (:meth:`_fresh_dirs`): its files need no resolving.
        self.made_dir = False

    @classmethod
    def resume(cls, cq: ConsumeQueue, roots: list[Path] | None = None) -> ConsumeQueueWriter:
        """A writer that appends after the last valid unit of an existing queue."""
        end = cq.max_offset
        max_phy = -1
        if end > cq.min_file_offset:
            last = next(cq.units(end - 1, end))
            max_phy = last.commitlog_offset + last.size
        return cls(
            cq.dir.parent.parent,
            cq.topic,
            cq.queue_id,
            cq.file_size,
            roots=roots,
            write_offset=end * CQ_STORE_UNIT_SIZE,
            file_starts={f.file_from_offset for f in cq.queue.files},
            max_physic_offset=max_phy,
        )

    def put(self, offset: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """``ConsumeQueue#putMessagePositionInfo`` for one unit (buffered)."""
        if offset + size <= self.max_physic_offset:  # already dispatched
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        if self.write_offset < 0:  # isFirstCreateInQueue: pre-blank up to the first unit
            self._buf_start, blank = pre_blank_fill(cq_offset, self.file_size)
            self._buf += blank
            self.write_offset = expect
        elif cq_offset != 0:
            if expect < self.write_offset:
                return True
            # expect > write_offset: "[BUG]logic queue order maybe wrong", appended anyway
        self.max_physic_offset = offset + size
        self._buf += _UNIT.pack(offset, size, tags_code)
        self.write_offset += CQ_STORE_UNIT_SIZE
        if len(self._buf) >= self.FLUSH_UNITS * CQ_STORE_UNIT_SIZE:
            self.flush()
        return True

    def put_many(self, phy, size, tags_code, cq_offset) -> None:
        """:meth:`put` for units of this queue in dispatch order (numpy columns): one append
        when every unit would be appended unchecked at the queue's end (consecutive cq
        offsets from it, rising ends), else unit by unit."""
        n = len(phy)
        i = 0
        if self.write_offset < 0 and n:
            self.put(int(phy[0]), int(size[0]), int(tags_code[0]), int(cq_offset[0]))
            i = 1
        if i >= n:
            return
        ends = phy[i:] + size[i:]
        if (
            int(cq_offset[i]) * CQ_STORE_UNIT_SIZE == self.write_offset
            and int(ends[0]) > self.max_physic_offset
            and (n - i == 1 or (np.all(np.diff(cq_offset[i:]) == 1) and np.all(np.diff(ends) > 0)))
        ):
            self._buf += pack_units(phy[i:], size[i:], tags_code[i:])
            self.write_offset += CQ_STORE_UNIT_SIZE * (n - i)
            self.max_physic_offset = int(ends[-1])
            if len(self._buf) >= self.FLUSH_UNITS * CQ_STORE_UNIT_SIZE:
                self.flush()
            return
        for j in range(i, n):
            self.put(int(phy[j]), int(size[j]), int(tags_code[j]), int(cq_offset[j]))

    def flush(self) -> None:
        data, pos = self._buf, self._buf_start
        while data:
            file_start = pos - pos % self.file_size
            path = self.dir / offset2file_name(file_start)
            n = min(len(data), file_start + self.file_size - pos)
            chunk = (pos - file_start, bytes(data[:n]))
            if file_start not in self.file_starts:
                self._create(path, file_start, chunk)
            else:
                safefs.write_range(path, *chunk, roots=self.roots, checked=self.made_dir)
            data = data[n:]
            pos += n
        self._buf = bytearray()
        self._buf_start = pos

    def _create(self, path: Path, file_start: int, first: tuple[int, bytes]) -> None:
        """The queue's file that starts at ``file_start``, created with its ``first`` units
        written (one open of a new file)."""
        made = not self.files_created and not self.file_starts and self._fresh_dirs()
        self.made_dir = self.made_dir or made
        safefs.create_sized(path, self.file_size, self.roots, "consume-queue file", dir_made=made, first=first)
        self.file_starts.add(file_start)
        self.files_created.append(path)

    def _fresh_dirs(self) -> bool:
        """Make the queue's directory with plain ``mkdir`` calls below a consume-queue root whose
        real path lies inside the roots (resolved once per dispatcher, :attr:`checked`): a
        directory ``mkdir`` made is no link, so nothing needs resolving (``safefs.make_dirs``
        walks two ``realpath`` a queue). False: not done (a new root, a link, an existing queue
        directory): ``make_dirs`` makes and checks it."""
        topic_dir = self.dir.parent
        root = topic_dir.parent
        if self.checked is None or (self.checked.get(root) is None and not os.path.isdir(root)):
            return False  # a new store's first queue: make_dirs makes the root
        inside = self.checked.get(root)
        if inside is None:
            inside = self.checked[root] = safefs.is_inside(root, self.roots)
        if not inside:
            return False
        try:
            os.mkdir(topic_dir)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(topic_dir).st_mode):  # a link or a file: make_dirs says which
                return False
        except OSError:
            return False
        try:
            os.mkdir(self.dir)
        except OSError:
            return False
        return True


# ---------------------------------------------------------------- units in bulk, at their offsets


def pack_units(phy, size, tags_code) -> bytes:
    """Units (commitLogOffset, size, tagsCode) of numpy columns as their bytes, in order."""
    u = np.empty(len(phy), dtype=UNIT_DTYPE)
    u["commitlog_offset"] = phy
    u["size"] = size
    u["tags_code"] = tags_code
    return u.tobytes()


def pre_blank_fill(first_unit: int, file_size: int) -> tuple[int, bytes]:
    """``ConsumeQueue#fillPreBlank`` for a queue whose first unit is ``first_unit``
    (``isFirstCreateInQueue``): (logical byte start of its first file, the blank units
    from there up to that unit)."""
    pos = first_unit * CQ_STORE_UNIT_SIZE
    start = pos - pos % file_size
    return start, PRE_BLANK_UNIT * ((pos - start) // CQ_STORE_UNIT_SIZE)


def write_units(
    cq_root: Path,
    topic: str,
    queue_id: int,
    pos: int,
    data: bytes | memoryview,
    file_size: int,
    below: Below | None = None,
) -> None:
    """Units ``data`` at logical byte ``pos`` of queue (topic, queueId), creating the zero-filled
    ``file_size`` files it falls in, as :class:`ConsumeQueueWriter` leaves them. Safe for writers
    of disjoint ranges (the rebuild's tasks): a file is only extended, never cut, and made inside
    ``cq_root``, never through a link; ``below``: ``cq_root`` checked and held open once
    (``store/files/below.py``) for a writer of many queues."""
    why = unsafe_topic(topic)
    if why is not None:
        raise StoreError(f"topic {topic!r} cannot name a consume-queue directory: {why}", path=cq_root)
    if below is None:
        d, roots = Path(cq_root) / topic / str(queue_id), [Path(cq_root)]
        safefs.make_dirs(d, roots)
    parts = (topic, str(queue_id))
    view = memoryview(data)
    while len(view):
        start = pos - pos % file_size
        n = min(len(view), start + file_size - pos)
        name, chunk = offset2file_name(start), bytes(view[:n])
        if below is not None:
            below.write_at(parts, name, file_size, pos - start, chunk)
        else:
            fd = safefs.open_for_write(d / name, roots, create=True)
            try:
                if os.fstat(fd).st_size < file_size:
                    os.ftruncate(fd, file_size)
            finally:
                os.close(fd)
            safefs.write_range(d / name, pos - start, chunk)
        view, pos = view[n:], pos + n
