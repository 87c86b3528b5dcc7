"""Consistency checks of a whole store, as findings (``rmqstore verify``).

The engine proves a store consistent or says exactly where it is not. It knows nothing of
terminals: :class:`Verifier` yields :class:`Finding` objects (a stable check id, a
severity, the file relative to the store root, the byte offset in that file, a detail)
and keeps a summary.

How it reads, fast and in bounded memory:

* Each commit-log file is walked record by record (TOTALSIZE and MAGICCODE only, the
  walk of STORE-FORMAT §7.1), then every field of a batch of records is gathered at once
  with numpy at offsets derived from ``formats.commitlog`` (:class:`~rmqstore_cli.store.batch.RecordBatch`,
  :class:`~rmqstore_cli.store.batch.Properties`, shared with rebuild-index) and checked vectorised
  (§2.2, §2.3, §7.2 plus the forensic checks the broker never makes: PHYSICALOFFSET
  against the real position, queue-offset continuity). Only what must be per record
  stays in a Python loop: body CRC (``crc.crc32``), topic and properties syntax, and the
  extraction of TAGS/KEYS/UNIQ_KEY.
* Damage does not stop the scan: after a bad record the walk resynchronises on the next
  plausible record (valid magic, sane TOTALSIZE, PHYSICALOFFSET equal to its position)
  and reports the unreadable byte range.
* Consume-queue units and index entries are checked against each batch as it passes
  (numpy look-ups by queue offset and by physical offset), so the store is read once.
* Memory is bounded by a file, not by the store (issue 22): index entries are read as a
  window as the scan passes them (:meth:`IndexScan.entries_in`), consume-queue pages
  are released as read, and which units and entries were accounted for is kept as runs
  (:class:`Marks`), not a byte per message.

Broker-normal artefacts (STORE-FORMAT §10.10) are info, never errors.
"""
from __future__ import annotations

import os
import re
import stat
import struct
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rmqstore_cli.errors import StoreError
from rmqstore_cli.formats.commitlog import (
    CRC32_PROPERTY,
    CRC32_RESERVED_LEN,
    END_FILE_MIN_BLANK_LENGTH,
    HEAD_SIZE,
    INNER_BATCH_FLAG,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    TRANSACTION_MASK,
    TRANSACTION_ROLLBACK_TYPE,
    MessageHead,
    RecordPrefix,
    middle_format,
)
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, PRE_BLANK_SIZE
from rmqstore_cli.formats.derive import field_offset, fixed_fields_format
from rmqstore_cli.formats.index import (
    HASH_SLOT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER_SIZE,
)
from rmqstore_cli.formats.properties import parse_properties
from rmqstore_cli.store.checkpoint import StoreCheckpoint
from rmqstore_cli.store.batch import (
    CRC_MARK,
    cat_bytes,
    IndexKeys,
    Properties,
    RecordBatch,
    body_crcs,
    file_array,
    pick_property,
    TopicIds,
    props_well_formed,
    stable_argsort,
    walk_records,
    compile_walk,
)
from rmqstore_cli.store.batch import Properties as _Props, index_hashes  # noqa: F401  (tests import them here)
from rmqstore_cli.store.commitlog import Status, check_message
from rmqstore_cli.store.config import StoreConfig
from rmqstore_cli.store.consume_queue import ConsumeQueue
from rmqstore_cli.store.crc import crc32
from rmqstore_cli.store.dispatch import InvalidForDispatch, compute_tags_code
from rmqstore_cli.store.index import IndexFile, index_file_paths
from rmqstore_cli.store.lock import abort_exists, lock_holder
from rmqstore_cli.store.mapped_files import MappedFileQueue, release_pages
from rmqstore_cli.store.safefs import data_segments, kind_of
from rmqstore_cli.store.message import SCHEDULE_TOPIC, java_hash

ERROR, WARNING, INFO = "error", "warning", "info"

#: Every check id, its severity when it fires, and what it means. Ids are stable.
CHECKS: dict[str, tuple[str, str]] = {
    "store.live-broker": (WARNING, "a live broker holds the store's lock; files change under the check"),
    "store.not-regular": (ERROR, "a FIFO, device, socket, directory or dangling link where a store file belongs: the broker "
                                 "cannot load it, and verify skips it"),
    "commitlog.file-name": (ERROR, "a commit-log file name is not a 20-digit offset aligned to the file size"),
    "commitlog.file-size": (ERROR, "a commit-log file's length is not mappedFileSizeCommitLog (§10.3)"),
    "commitlog.gap": (ERROR, "no file holds a range between two commit-log files (expired or lost middle file)"),
    "commitlog.magic": (ERROR, "no valid MAGICCODE where a record must start"),
    "commitlog.total-size": (ERROR, "TOTALSIZE does not fit the file or disagrees with the fields (calMsgLength)"),
    "commitlog.field-bounds": (ERROR, "a length field runs past the record's end or is negative"),
    "commitlog.truncated": (ERROR, "the file ends inside a record"),
    "commitlog.physical-offset": (ERROR, "PHYSICALOFFSET stored in the record differs from its position"),
    "commitlog.body-crc": (ERROR, "BODYCRC differs from crc32(body) & 0x7FFFFFFF"),
    "commitlog.prop-crc": (ERROR, "the __CRC32# whole-record CRC property is wrong (§2.8)"),
    "commitlog.properties": (WARNING, "PROPERTIES are not valid UTF-8 or hold pairs the broker's parser drops"),
    "commitlog.topic": (ERROR, "the topic is empty, not UTF-8, or cannot be a consume-queue directory name"),
    "commitlog.topic-chars": (WARNING, "the topic has characters outside the broker's topic character set"),
    "commitlog.blank": (ERROR, "a BLANK end-of-file record is wrong, or a full file lacks one (§2.7)"),
    "commitlog.tail": (WARNING, "non-zero bytes after the end of data (stale data after truncation, §10.2)"),
    "commitlog.queue-offset": (ERROR, "QUEUEOFFSET skips ahead within a (topic, queue): messages are missing"),
    "commitlog.queue-offset-reset": (INFO, "QUEUEOFFSET repeats or restarts (broker restart without its CQ, §2.6)"),
    "cq.file-name": (ERROR, "a consume-queue file or directory name is not what the broker writes"),
    "cq.file-size": (ERROR, "a consume-queue file's length is not mappedFileSizeConsumeQueue"),
    "cq.gap": (ERROR, "a consume-queue file is missing between two others"),
    "cq.unit-target": (ERROR, "a unit points where no message of its queue starts"),
    "cq.unit-mismatch": (ERROR, "a unit's size or tagsCode disagrees with its message, or points elsewhere"),
    "cq.missing-unit": (ERROR, "a dispatched message (store time <= checkpoint) has no consume-queue unit"),
    "cq.not-dispatched": (INFO, "messages newer than the checkpoint have no unit yet; the broker dispatches them"),
    "cq.superseded": (INFO, "messages whose queue offsets were used again after a restart lost their units (§2.6)"),
    "cq.pre-blank": (INFO, "pre-blank units below a queue's first unit (§4.3)"),
    "cq.expired": (INFO, "units point below the commit log's first offset (expired files, §9)"),
    "cq.tail": (WARNING, "non-zero units after a queue's logical end (stale after truncation, §10.2)"),
    "index.file-name": (WARNING, "an index file name is not a yyyyMMddHHmmssSSS time"),
    "index.file-size": (ERROR, "an index file's length is not 40 + 4*maxHashSlotNum + 20*maxIndexNum"),
    "index.header": (ERROR, "the index header disagrees with its entries (count, begin/end offset and time)"),
    "index.slot-count": (WARNING, "hashSlotCount differs from the number of used slots (older writer?)"),
    "index.slot": (ERROR, "a slot points outside the written entries or at an entry of another slot"),
    "index.chain": (ERROR, "an entry's chain leaves the file, its slot, or does not terminate (loop, branch)"),
    "index.orphan": (ERROR, "an entry no slot chain reaches: its key cannot be found"),
    "index.entry": (ERROR, "an entry has a negative hash or time difference"),
    "index.order": (WARNING, "entries' physical offsets go backwards"),
    "index.tail": (WARNING, "non-zero entries after indexCount"),
    "index.entry-target": (ERROR, "an entry points where no readable message starts"),
    "index.entry-hash": (ERROR, "an entry's hash is none of its message's index keys"),
    "index.expired": (INFO, "entries point below the commit log's first offset (expired, §5.11)"),
    "index.beyond-end": (WARNING, "entries point beyond the end of the commit log's data (§8)"),
    "index.missing-key": (ERROR, "an indexed key of a message is not in the index (--deep)"),
    "index.missing": (ERROR, "messageIndexEnable=true, but no index file holds an entry while messages carry "
                             "keys: every index-lookup finds nothing"),
    "checkpoint.missing": (WARNING, "no checkpoint file"),
    "checkpoint.ahead": (ERROR, "a checkpoint time is newer than any message: flushed data is missing"),
    "abort.unclean-shutdown": (WARNING, "an abort file: the broker will run abnormal recovery (§6.2, §8)"),
    "recovery.truncate": (ERROR, "the broker's recovery would stop here and truncate the commit log after it"),
}

_POS_PHY = field_offset(MessageHead, "physical_offset")
# BORNHOST .. BODYLENGTH: store timestamp after the born host, body length at the end.
_MID_V4 = struct.calcsize(middle_format(False, False))
_MIN_RECORD = HEAD_SIZE + _MID_V4 + 1 + 2  # empty body, topic and properties, IPv4, V1
_MAGIC_BYTES = [m.to_bytes(4, "big") for m in (MAGIC_V1, MAGIC_V2, MAGIC_BLANK)]
_BATCH = 32768
#: Index entries (and slots) the structure check reads at a time, and entries whose incoming
#: links it counts in one pass over the links: its memory does not grow with the file.
INDEX_CHUNK = 1 << 18
#: Records checked before the walk and small bodies' CRC switch to the compiled loops of
#: :mod:`kernels` (about 0.6 µs a record less; numba's import costs about 0.3 s).
KERNEL_AFTER = 500_000
INDEX_TARGETS = 1 << 21
_RELEASE_EVERY = 64 << 20
_BATCH_BYTES = 32 << 20
_EXT_ADDR_MAX = -(1 << 31) - 1  # ConsumeQueueExt#isExtAddr
_TOPIC_OK_DOT = re.compile(rb"[A-Za-z0-9%|_.\-]+")  # '.' seen in real stores
_INDEX_NAME = re.compile(r"\d{17}")


@dataclass(slots=True)
class Finding:
    check: str
    severity: str
    file: str
    offset: int | None
    detail: str
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = {"check": self.check, "severity": self.severity, "file": self.file, "offset": self.offset,
             "detail": self.detail}
        d.update(self.extra)
        return d


@dataclass
class VerifyOptions:
    crc: bool = True
    deep: bool = False
    #: Findings emitted per check (all are counted); None = no limit.
    max_findings: int | None = None


# ---------------------------------------------------------------- helpers

def _member(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(x, set)`` by binary search in an already sorted array."""
    if not sorted_set.size:
        return np.zeros(x.size, bool)
    i = np.searchsorted(sorted_set, x)
    return sorted_set[np.minimum(i, sorted_set.size - 1)] == x


def _props_problem(props: bytes) -> str | None:
    try:
        text = props.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"properties are not valid UTF-8 (byte {e.start})"
    if props_well_formed(props):
        return None
    parts = text.split("\x02")
    if parts and parts[-1] == "":
        parts.pop()
    dropped = [p for p in parts if not (0 < p.find("\x01") < len(p) - 1)]
    if dropped:
        shown = ", ".join(repr(p)[:40] for p in dropped[:3])
        return f"{len(dropped)} property pair(s) the broker's parser drops: {shown}"
    return None  # values holding \x01: legal, the value keeps them


def first_nonzero(path: Path | str, arr: np.ndarray, start: int, end: int | None = None) -> int | None:
    """Position of the first non-zero byte of ``arr[start:end]`` (a mapping of ``path``), or None.

    Preallocated store files are sparse: only their data segments are read
    (:func:`safefs.data_segments`), so a 1 GiB file with a few MB of data costs a few MB."""
    end = arr.size if end is None else min(end, arr.size)
    step = 1 << 22
    for a, b in data_segments(path, start, end):
        for c in range(a, b, step):
            chunk = arr[c:min(b, c + step)]
            if chunk.any():
                return c + int(np.flatnonzero(chunk)[0])
    return None


# ---------------------------------------------------------------- properties, vectorised

@dataclass(slots=True)
class _Delayed:
    """What ``compute_tags_code`` reads of a message on the schedule topic."""

    properties: dict
    topic_bytes: bytes
    store_timestamp: int


def _text(s: str) -> str:
    """A file or topic name from disk as valid UTF-8 text: bytes that are not UTF-8 (held
    as surrogates by ``os.fsdecode``) become ``\\xNN`` escapes, so JSON output cannot fail."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


# ---------------------------------------------------------------- marks

class Marks:
    """Which of ``size`` positions (a queue's units, an index file's entries) the scan
    accounted for: ``marks[idx] = True`` as :class:`numpy.ndarray` of bools would take it
    (an index array or a slice), read back by :meth:`unmarked`.

    Kept as sorted disjoint [start, end) runs, so a queue or index file the scan meets in
    order costs one run however many messages it holds (the bool array this replaces
    held a byte per message: ~1 MB per million messages, per queue and index file,
    issue 22). Marks that come in order extend the open run in place; others wait in
    ``_pending`` (at most ``PENDING`` positions) and are merged into the runs. Marks
    scattered over more runs than a byte per position would cost (a damaged store) turn
    the runs into such a byte array: bounded by the queue or index file either way."""

    PENDING = 1 << 16

    def __init__(self, size: int):
        self.size = size
        self.starts = np.zeros(0, np.int64)
        self.ends = np.zeros(0, np.int64)
        self.bits: np.ndarray | None = None
        self._open: list[int] | None = None  # the run marks in order extend: [start, end)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []  # runs not merged yet
        self._waiting = 0

    def __setitem__(self, idx, value) -> None:
        if value is not True:
            raise ValueError("marks are only ever set")
        if self.bits is not None:
            self.bits[idx] = True
            return
        if isinstance(idx, slice):
            a, b, step = idx.indices(self.size)
            if step != 1:
                idx = np.arange(a, b, step)
            else:
                if b > a:
                    self._add_run(a, b)
                return
        idx = np.asarray(idx, np.int64).ravel()
        if not idx.size:
            return
        a, b = int(idx[0]), int(idx[-1]) + 1
        if b - a == idx.size and (idx.size == 1 or bool(np.all(idx[1:] - idx[:-1] == 1))):
            self._add_run(a, b)
            return
        self._queue(idx, idx + 1)

    def _add_run(self, a: int, b: int) -> None:
        o = self._open
        if o is not None and o[0] <= a <= o[1]:
            o[1] = max(o[1], b)
            return
        if o is not None:
            self._queue(np.array([o[0]], np.int64), np.array([o[1]], np.int64))
        self._open = [a, b]

    def _queue(self, starts: np.ndarray, ends: np.ndarray) -> None:
        self._pending.append((starts, ends))
        self._waiting += starts.size
        if self._waiting >= self.PENDING:
            self._merge()

    def _merge(self) -> None:
        """Fold the open run and the waiting marks into the runs (or the byte array)."""
        parts = [(self.starts, self.ends), *self._pending]
        if self._open is not None:
            parts.append((np.array([self._open[0]], np.int64), np.array([self._open[1]], np.int64)))
        self._open, self._pending, self._waiting = None, [], 0
        s = np.concatenate([p[0] for p in parts])
        e = np.concatenate([p[1] for p in parts])
        o = np.argsort(s, kind="stable")
        s, e = s[o], np.maximum.accumulate(e[o])
        new = np.ones(s.size, bool)
        new[1:] = s[1:] > e[:-1]  # a run that starts after all before it ended (adjacent runs join)
        first = np.flatnonzero(new)
        self.starts = s[first]
        self.ends = e[np.r_[first[1:] - 1, s.size - 1]] if s.size else e
        if self.starts.size > max(64, self.size // 16):  # 16 bytes a run: a byte a position is less
            bits = np.zeros(self.size, bool)
            for a, b in zip(self.starts.tolist(), self.ends.tolist()):
                bits[a:b] = True
            self.bits = bits
            self.starts = self.ends = np.zeros(0, np.int64)

    def unmarked(self, a: int, b: int) -> np.ndarray:
        """Positions in ``[a, b)`` never marked, in order."""
        if self._open is not None or self._pending:
            self._merge()
        if self.bits is not None:
            return np.flatnonzero(~self.bits[a:b]) + a
        i0 = int(np.searchsorted(self.ends, a, "right"))
        i1 = int(np.searchsorted(self.starts, b, "left"))
        if i0 >= i1:
            return np.arange(a, b)
        d = np.zeros(b - a + 1, np.int32)
        d[np.maximum(self.starts[i0:i1], a) - a] += 1  # runs are disjoint and apart: no repeats
        d[np.minimum(self.ends[i0:i1], b) - a] -= 1
        return np.flatnonzero(np.cumsum(d[:-1]) == 0) + a

    def nbytes(self) -> int:
        """What the marks hold (for tests: it must not grow with marks made in order)."""
        held = self.starts.nbytes + self.ends.nbytes + sum(x.nbytes + y.nbytes for x, y in self._pending)
        return held + (self.bits.nbytes if self.bits is not None else 0)


# ---------------------------------------------------------------- per-queue state

#: Units of a queue the finish reads (and whose mapped pages it releases) at a time:
#: verify's memory does not grow with a queue's length.
UNIT_CHUNK = 1 << 16


class QueueState:
    """One consume queue as verify reads it: the queue itself (:class:`ConsumeQueue` reads its
    units and finds its end) and which of its units the scan accounted for."""

    def __init__(self, cq: ConsumeQueue, root: Path):
        self.cq, self.root = cq, root
        self.topic, self.qid, self.dir = cq.topic, cq.queue_id, cq.dir
        self.per = cq.units_per_file
        cq.map_files()
        self.base = cq.min_file_offset
        self.end = cq.max_offset
        self.matched = Marks(max(0, self.end - self.base))

    def units_at(self, logical: np.ndarray):
        """(found mask, offset, size, tags) for logical unit indices below the end."""
        return self.cq.units_at(logical)

    def file_of(self, logical: int) -> tuple[str, int]:
        path, at = self.cq.file_of(logical)
        return os.path.relpath(path, self.root), at

    def has_file(self, logical: int) -> bool:
        """Whether the file that would hold unit ``logical`` is there."""
        return self.cq.file_path(self.cq.file_base(logical)) is not None

    def close(self) -> None:
        self.cq.close()


class IndexScan:
    """One index file as verify reads it (:class:`IndexFile` reads the header, slots and
    entries in bulk): which entries the scan accounted for, and the entries read as the
    scan passes them."""

    def __init__(self, path: Path, slots: int, max_num: int, root: Path):
        self.file = IndexFile(path, slots, max_num, lenient=True)
        self.path = path
        self.name = path.name
        self.rel = os.path.relpath(path, root)
        self.slots, self.max_num = slots, max_num
        self.size = self.file.size
        self.length = self.file.length
        h = self.file.header
        self.begin_ts, self.end_ts, self.begin_phy, self.end_phy = (h.begin_timestamp, h.end_timestamp,
                                                                    h.begin_phy_offset, h.end_phy_offset)
        self.hash_slot_count, self.stored_count = h.hash_slot_count, self.file.stored_count
        self.entries_base = self.file.entries_base
        self.n = self.file.entry_limit  # entries 1 .. n-1 are readable
        self.entry_count = self.file.readable_entries
        self.entries = self.phy = self.hash = self.sorted_phy = self.order = None
        #: (min, max) entry offset once known: read by :meth:`phy_range`, or set by the
        #: structure check (or a pipeline task) that has read them already.
        self.known_range: tuple[int, int] | None = None
        self.phy_ordered: bool | None = None  # entries in offset order (known once phy_range read them)
        self.checked = Marks(self.entry_count)
        #: Entries in offset order read as the scan passes them (:meth:`entries_in`), never
        #: all at once: the window [_wa, _wa + len(_wphy)) and the next entry to read.
        self.stream = False
        self.retired = False
        self._wa = self._next = 0
        self._wphy = np.zeros(0, np.int64)
        self._whash = np.zeros(0, np.int32)
        self._wlo: int | None = None

    @property
    def mm(self):
        return self.file.mm

    @property
    def phy_min(self) -> int:
        return self.phy_range()[0]

    @property
    def phy_max(self) -> int:
        return self.phy_range()[1]

    def phy_range(self) -> tuple[int, int]:
        """(smallest, largest) offset of the entries ((-1, -1) without entries), read in
        chunks the first time unless the structure check has set it."""
        if self.known_range is None:
            lo, hi, last, ordered = None, -1, None, True
            for a in range(0, self.entry_count, INDEX_CHUNK):
                phy = self.columns(a, min(self.entry_count, a + INDEX_CHUNK), "phy_offset")[0]
                lo = int(phy.min()) if lo is None else min(lo, int(phy.min()))
                hi = max(hi, int(phy.max()))
                ordered = ordered and (last is None or last <= int(phy[0])) and bool(np.all(phy[1:] >= phy[:-1]))
                last = int(phy[-1])
            self.known_range = (-1 if lo is None else lo, hi)
            self.phy_ordered = ordered
        return self.known_range

    def columns(self, a: int, b: int, *names: str) -> list[np.ndarray]:
        """Fields ``names`` of entries array index a..b-1 (entry numbers a+1..b), pages released."""
        return self.file.entry_columns(a, b, *names)

    def entry_phys(self, idx: np.ndarray) -> np.ndarray:
        """Offsets of the entries at array indices ``idx`` (a few: findings' details)."""
        return self.file.entry_phys(idx)

    def slot_values(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(slot numbers, values) of the non-zero slots among slots a..b-1; pages released."""
        return self.file.slot_values(a, b)

    def load(self) -> None:
        """The entries' offsets and hashes as arrays (again, after :meth:`unload`), read in
        chunks: the mapped pages are released, the arrays (12 bytes an entry) stay."""
        E = self.entry_count
        self.read_entries(0, E)
        self.order = None if self.phy.size < 2 or bool(np.all(self.phy[1:] >= self.phy[:-1])) \
            else np.argsort(self.phy, kind="stable")
        self.sorted_phy = self.phy if self.order is None else self.phy[self.order]
        if self.known_range is None:
            self.known_range = (int(self.sorted_phy[0]), int(self.sorted_phy[-1])) if E else (-1, -1)

    def read_entries(self, a: int, b: int) -> None:
        """Offsets and hashes of entries a..b-1 into arrays sized for the whole file (the
        rest allocated, not read), in chunks, the mapped pages released."""
        self.phy = np.empty(self.entry_count, np.int64)
        self.hash = np.empty(self.entry_count, np.int32)
        for s in range(a, b, INDEX_CHUNK):
            e = min(b, s + INDEX_CHUNK)
            self.phy[s:e], self.hash[s:e] = self.columns(s, e, "phy_offset", "key_hash")

    def unload(self) -> None:
        """Drop the arrays and the mapped pages until the scan reaches this file's entries
        (:meth:`ensure_loaded`): index files are checked one after another, not all at once."""
        self.entries = self.phy = self.hash = self.sorted_phy = self.order = None
        self.file.drop_pages()

    def ensure_loaded(self) -> None:
        if self.phy is None and not self.stream:
            self.load()

    def entries_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(entry array indices, offsets, hashes) of the entries pointing into ``[lo, hi)``.

        Streaming (entries in offset order, the scan's ``lo`` never going back): a window
        read ``INDEX_CHUNK`` entries at a time, entries below ``lo`` dropped, so memory is
        what one batch of records points at, not 12 bytes an entry of the whole index file
        (240 MB for a full default file, issue 22). Otherwise the whole file's arrays."""
        if not self.stream:
            self.ensure_loaded()
            sel = self.in_range(lo, hi)
            if not sel.size or self.order is not None:
                return sel, self.phy[sel], self.hash[sel]
            run = slice(int(sel[0]), int(sel[-1]) + 1)  # entries in offset order: a run of them, sliced
            return sel, self.phy[run], self.hash[run]
        if self._wlo is not None and lo < self._wlo:  # the scan went back: read again from the start
            self._wa = self._next = 0
            self._wphy, self._whash = self._wphy[:0], self._whash[:0]
        self._wlo = lo
        k = int(np.searchsorted(self._wphy, lo, "left"))
        wphy, whash = self._wphy[k:], self._whash[k:]
        self._wa += k
        E = self.entry_count
        while self._next < E and (not wphy.size or wphy[-1] < hi):
            a = self._next
            b = min(E, a + INDEX_CHUNK)
            p, h = self.columns(a, b, "phy_offset", "key_hash")
            self._next = b
            if wphy.size:
                wphy, whash = np.concatenate([wphy, p]), np.concatenate([whash, h])
            else:  # the window was empty (it starts at a): skip what lies below lo
                k = int(np.searchsorted(p, lo, "left"))
                self._wa = a + k
                wphy, whash = p[k:], h[k:]
        self._wphy, self._whash = wphy, whash
        n = int(np.searchsorted(wphy, hi, "left"))
        return np.arange(self._wa, self._wa + n), wphy[:n], whash[:n]

    def entry_phy(self, i: int) -> int:
        """Offset of entries array index ``i`` (from the arrays if loaded, else read)."""
        if self.phy is not None:
            return int(self.phy[i])
        return int(self.columns(i, i + 1, "phy_offset")[0][0])

    def unchecked(self):
        """(first index, unchecked entry indices, their offsets) per chunk of ``INDEX_CHUNK``
        entries that has any: offsets from the arrays if loaded, else read from the file."""
        for a in range(0, self.entry_count, INDEX_CHUNK):
            b = min(self.entry_count, a + INDEX_CHUNK)
            un = self.checked.unmarked(a, b)
            if not un.size:
                continue
            phy = self.phy[un] if self.phy is not None else self.columns(a, b, "phy_offset")[0][un - a]
            yield a, un, np.asarray(phy, np.int64)

    def entry_offset(self, i: int) -> int:
        """Byte offset of entry number ``i + 1`` (entries array index i)."""
        return self.entries_base + (i + 1) * INDEX_ENTRY_SIZE

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        a = np.searchsorted(self.sorted_phy, lo, "left")
        b = np.searchsorted(self.sorted_phy, hi, "left")
        idx = np.arange(a, b)
        return idx if self.order is None else self.order[idx]

    def retire(self) -> None:
        """The scan has passed every entry's offset: keep what ``_finish_index`` reads (the
        entries never matched, the first and the last), free the rest and the mapping, so
        verify's memory does not grow with the number of index files. A streaming file
        drops its window (its pages are released as read; the finish reads what it needs)."""
        if self.stream:
            self._wphy, self._whash = self._wphy[:0], self._whash[:0]
            self.retired = True
            return
        keep = np.union1d(self.checked.unmarked(0, self.phy.size), [0, self.phy.size - 1])
        self.phy = _Sparse(self.phy.size, keep, self.phy[keep])
        self.entries = self.hash = self.sorted_phy = self.order = None
        self.retired = True
        self.close_file()

    def close_file(self) -> None:
        """Unmap the file once (a view still alive: the GC unmaps it)."""
        if self.file is not None:
            try:
                self.file.close()
            except BufferError:
                pass
            self.file = None

    def close(self) -> None:
        self.entries = self.phy = self.hash = self.sorted_phy = None
        self.close_file()


class _Sparse:
    """A retired index file's entry offsets: only some positions are kept (size stays)."""

    def __init__(self, size: int, idx: np.ndarray, values: np.ndarray):
        self.size, self._idx, self._values = size, idx, values

    def __getitem__(self, i):
        at = np.searchsorted(self._idx, i)
        if np.any(self._idx[np.minimum(at, self._idx.size - 1)] != i):
            raise IndexError("entry not kept by retire()")
        return self._values[at]


class _Deferred:
    """Findings of one kind met out of their emission order: arrays of (key, values...),
    handed out sorted by key. With a cap on findings only the ``cap`` smallest keys are
    kept (the rest are counted in :attr:`dropped`), so memory is bounded by the cap."""

    def __init__(self, cap: int | None):
        self.cap = cap
        self.parts: list[list[np.ndarray]] = []
        self.kept = self.total = 0

    def add(self, key: np.ndarray, *cols: np.ndarray) -> None:
        if not key.size:
            return
        self.parts.append([np.asarray(x, np.int64) for x in (key, *cols)])
        self.kept += key.size
        self.total += key.size
        if self.cap is not None and self.kept > 2 * self.cap + 1024:
            self.parts = [self._sorted()]
            self.kept = self.parts[0][0].size

    def _sorted(self) -> list[np.ndarray]:
        cols = [np.concatenate(c) for c in zip(*self.parts)]
        o = np.argsort(cols[0], kind="stable")
        if self.cap is not None:
            o = o[:self.cap]
        return [c[o] for c in cols]

    def rows(self):
        if not self.parts:
            return iter(())
        cols = self._sorted()
        self.kept = cols[0].size
        return zip(*(c.tolist() for c in cols))

    @property
    def dropped(self) -> int:
        return self.total - self.kept


# ---------------------------------------------------------------- the verifier

class Verifier:
    """Run every check over one store; iterate :meth:`run` for findings, then read ``summary``."""

    #: Free an index file's arrays and mapping once the scan has passed all its entries.
    retire_index_files = True
    #: Read the entries of an index file in offset order as the scan passes them
    #: (:meth:`IndexScan.entries_in`) instead of loading the whole file.
    stream_index_files = True
    #: the compiled loops from the first record (a pipeline task over one large file)
    big_job = False

    def __init__(self, config: StoreConfig, options: VerifyOptions | None = None, progress=None):
        self.config = config
        self.opt = options or VerifyOptions()
        self.root = config.root
        self.counts: Counter[str] = Counter()
        self.by_severity: Counter[str] = Counter()
        self.messages = 0
        self.bytes = 0  # total size of the records counted in messages (not of the files)
        self.files = Counter()
        self.progress = progress  # callable(bytes_done) or None
        self._pending: list[Finding] = []
        self.notes: list[str] = []

    # -------------------------------------------------------- findings
    def _add(self, check: str, file: str, offset: int | None, detail: str, severity: str | None = None,
             **extra) -> None:
        sev = severity or CHECKS[check][0]
        self.counts[check] += 1
        self.by_severity[sev] += 1
        if self.opt.max_findings is None or self.counts[check] <= self.opt.max_findings:
            file, detail = _text(file), _text(detail)  # a non-UTF-8 name on disk: shown escaped
            extra = {k: _text(v) if isinstance(v, str) else v for k, v in extra.items()}
            self._pending.append(Finding(check, sev, file, offset, detail, extra))

    def _drain(self) -> Iterator[Finding]:
        out, self._pending = self._pending, []
        yield from out

    def rel(self, p: Path | str) -> str:
        return os.path.relpath(p, self.root)

    @property
    def summary(self) -> dict:
        return {
            "store": str(self.root),
            "messages": self.messages,
            "bytes": self.bytes,
            "files": dict(self.files),
            "commitlog_min_offset": getattr(self, "cl_min", 0),
            "commitlog_end_offset": getattr(self, "cl_end", 0),
            "consume_queues": len(getattr(self, "queues", {})),
            "errors": self.by_severity.get(ERROR, 0),
            "warnings": self.by_severity.get(WARNING, 0),
            "infos": self.by_severity.get(INFO, 0),
            "findings": dict(sorted(self.counts.items())),
            "notes": self.notes,
        }

    @property
    def ok(self) -> bool:
        return self.by_severity.get(ERROR, 0) == 0

    # -------------------------------------------------------- driver
    def run(self) -> Iterator[Finding]:
        cfg = self.config
        self._infer_sizes()
        yield from self._drain()
        pid = None if self._not_regular(self.root / "lock") else lock_holder(self.root)
        if pid is not None:
            self._add("store.live-broker", "lock", 0, f"pid {pid} holds the lock: the broker is running, "
                      "so files may change while they are checked")
        p = cfg.checkpoint_path
        self.checkpoint = None
        if self._not_regular(p):
            pass
        elif p.exists():
            try:
                self.checkpoint = StoreCheckpoint.read(p)
            except StoreError as e:
                self._add("checkpoint.missing", "checkpoint", 0, f"unreadable checkpoint: {e.message}")
        else:
            self._add("checkpoint.missing", "checkpoint", None, "no checkpoint file: the broker starts from zero "
                      "times and recovers from the first commit-log file", severity=WARNING)
        self.abort = abort_exists(self.root)
        self._open_queues()
        self._open_index()
        yield from self._drain()
        yield from self._scan_commitlog()
        self._finish_queues()
        yield from self._drain()
        self._finish_index()
        yield from self._drain()
        self._check_index_missing()
        self._check_checkpoint()
        self._check_recovery()
        yield from self._drain()
        for q in self.queues.values():
            q.close()
        for f in self.index_files:
            f.close()

    def _not_regular(self, path: Path) -> bool:
        """Whether ``path`` exists (links followed) but is not a regular file: then it is a
        ``store.not-regular`` finding, and the caller skips it (opening a FIFO could hang,
        mapping a device could read forever)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if not os.path.islink(path):
                return False
            what = f"a symbolic link to nothing ({os.readlink(path)})"
        except OSError as e:
            what = f"unreadable ({e.strerror})"
        else:
            if stat.S_ISREG(st.st_mode):
                return False
            what = kind_of(st.st_mode)
        self._add("store.not-regular", self.rel(path), None, f"{what} where a store file belongs")
        return True

    # -------------------------------------------------------- sizes
    def _infer_sizes(self) -> None:
        """Like ``StoreConfig.infer_sizes`` but a disagreeing file is a finding, not the end."""
        from rmqstore_cli.store.config import data_files, subdirs

        cfg = self.config
        kinds = [
            ("mapped_file_size_commit_log", "commitlog", data_files(cfg.commitlog_dirs), "commitlog.file-size"),
            ("mapped_file_size_consume_queue", "cq",
             data_files(q for t in subdirs(cfg.consumequeue_dir) for q in subdirs(t)), "cq.file-size"),
        ]
        for attr, label, files, _check in kinds:
            sizes = Counter(p.stat().st_size for p in files)
            sizes.pop(0, None)  # an empty file tells no size (it is a file-size finding later)
            if not sizes:
                continue
            want = cfg.cq_file_size if label == "cq" else getattr(cfg, attr)
            if attr in cfg.explicit or want in sizes and (len(sizes) == 1 or sizes[want] * 2 >= sum(sizes.values())):
                continue
            size = max(sizes.items(), key=lambda kv: (kv[1], kv[0] == want, kv[0]))[0]
            if len(sizes) > 1 and sizes[size] * 2 <= sum(sizes.values()):
                raise StoreError(f"{label} files disagree on their size ({dict(sizes)}) and none is the majority",
                                 path=cfg.root, hint="pass the broker's sizes or --broker-conf")
            setattr(cfg, attr, size)
            self.notes.append(f"{attr} = {size} inferred from the files")
        files = data_files([cfg.index_dir])
        sizes = Counter(p.stat().st_size for p in files)
        if sizes and cfg.index_file_size not in sizes and not {"max_hash_slot_num", "max_index_num"} & cfg.explicit:
            from rmqstore_cli.store.index import infer_index_geometry

            size = sizes.most_common(1)[0][0]
            same = [p for p in files if p.stat().st_size == size]
            try:
                slots, entries = infer_index_geometry(same, size)
            except StoreError:  # a damaged file spoils the joint inference: let the files vote
                votes: Counter = Counter()
                for p in same:
                    try:
                        votes[infer_index_geometry([p], size)] += 1
                    except StoreError:
                        pass
                if not votes:
                    raise
                slots, entries = votes.most_common(1)[0][0]
            cfg.max_hash_slot_num, cfg.max_index_num = slots, entries
            self.notes.append(f"maxHashSlotNum = {slots}, maxIndexNum = {entries} inferred from the index files")

    # -------------------------------------------------------- consume queues: open
    def _open_queues(self) -> None:
        cfg = self.config
        self.queues: dict[tuple[bytes, int], QueueState] = {}
        bcq = cfg.root / "batchconsumequeue"
        self.batch_topics = {p.name.encode("utf-8", "surrogateescape") for p in bcq.iterdir()} \
            if bcq.is_dir() else set()
        cq_root = cfg.consumequeue_dir
        size = cfg.cq_file_size
        try:
            topics = sorted(p for p in cq_root.iterdir() if p.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            topics = []
        for t in topics:
            for q in sorted(t.iterdir()):
                if not q.is_dir():
                    continue
                if not (q.name.isascii() and q.name.isdigit()):
                    self._add("cq.file-name", self.rel(q), None, "queue directory name is not a queue id",
                              severity=WARNING)
                    continue
                cq = ConsumeQueue(cq_root, t.name, int(q.name), size, directory=q, skip=self._not_regular)
                mq = QueueState(cq, self.root)
                self.files["consumequeue"] += len(cq.queue.files)
                for s in cq.queue.strays:
                    self._add("cq.file-name", self.rel(s), None, "not a 20-digit offset: the broker cannot load it")
                prev = None
                for f in cq.queue.files:
                    rel = self.rel(f.path)
                    if f.file_from_offset % size:
                        self._add("cq.file-name", rel, None, f"start {f.file_from_offset} is not a multiple of "
                                  f"the file size {size}")
                    length = f.path.stat().st_size
                    if length != size:
                        self._add("cq.file-size", rel, None, f"{length} bytes, expected {size}")
                    if prev is not None and f.file_from_offset != prev.end_offset:
                        self._add("cq.gap", rel, 0, f"no file holds logical offsets "
                                  f"{prev.end_offset // CQ_STORE_UNIT_SIZE}..{f.file_from_offset // CQ_STORE_UNIT_SIZE - 1} "
                                  f"(file {prev.end_offset:020d} is missing)",
                                  missing_file=self.rel(mq.dir / f"{prev.end_offset:020d}"))
                    prev = f
                self.queues[(t.name.encode("utf-8", "surrogateescape"), int(q.name))] = mq

    # -------------------------------------------------------- index: open + structure
    def _open_index(self) -> None:
        cfg = self.config
        self.index_files: list[IndexScan] = []
        for p in index_file_paths(cfg.index_dir):
            if self._not_regular(p):
                continue
            f = self.open_index_file(p)
            if self.retire_index_files:
                f.unload()
            f.stream = self.stream_index_files and bool(f.phy_ordered)
            self.index_files.append(f)
        self.check_index_order()

    def open_index_file(self, p: Path) -> IndexScan:
        """Open one index file and check it alone (name, size, structure); the pipeline runs
        this as one task per index file."""
        cfg = self.config
        f = IndexScan(p, cfg.max_hash_slot_num, cfg.max_index_num, self.root)
        self.files["index"] += 1
        if not _INDEX_NAME.fullmatch(p.name):
            self._add("index.file-name", f.rel, None, "name is not yyyyMMddHHmmssSSS")
        if f.length != f.size:
            self._add("index.file-size", f.rel, None, f"{f.length} bytes, expected {f.size} "
                      f"(maxHashSlotNum={f.slots}, maxIndexNum={f.max_num})")
        self._index_structure(f)
        return f

    def check_index_order(self) -> None:
        """Checks across ``self.index_files`` (header values only) and ``index_end``."""
        for a, b in zip(self.index_files, self.index_files[1:]):
            if b.n > 1 and a.n > 1 and b.begin_phy < a.end_phy:
                self._add("index.order", b.rel, 16, f"beginPhyOffset {b.begin_phy} is below the previous "
                          f"file's endPhyOffset {a.end_phy}")
        self.index_end = max((f.end_phy for f in self.index_files if f.n > 1), default=-1)

    def _index_structure(self, f: IndexScan) -> None:
        """STORE-FORMAT §5.10, vectorised and in bounded chunks: slots, chains, counts,
        header vs entries.

        Memory does not grow with the file: slots and entries are read ``INDEX_CHUNK`` at a
        time (mapped pages released after each chunk), and the links and slot heads into
        each range of ``INDEX_TARGETS`` entries are counted in one pass over the links (the
        first range in the pass that checks the entries, as links only go to older
        entries; a file of E entries takes E / INDEX_TARGETS - 1 more passes). Findings met
        out of their turn wait in :class:`_Deferred` (at most ``max_findings`` of each kind),
        so they come out in the order of a single pass over the whole file: slots, entries,
        chains, slot heads, branches, orphans, header, order, tail."""
        S = f.slots
        if f.stored_count > f.max_num:
            self._add("index.header", f.rel, 36, f"indexCount {f.stored_count} exceeds maxIndexNum {f.max_num}")
        if f.length < f.entries_base:
            self._add("index.header", f.rel, 0, "file too short for its slots")
            f.known_range = (-1, -1)
            return
        n = f.n  # entries 1..n-1 (array index 0..E-1)
        E = f.entry_count
        C = max(1, int(INDEX_CHUNK))
        cap = self.opt.max_findings

        def slot_of(h: np.ndarray) -> np.ndarray:
            h = h.astype(np.int64)
            return np.where(h >= 0, h % S, -1)

        used = 0
        bad_slots = _Deferred(cap)  # slot -> its value
        kept: list | None = []  # the used slots, while they are few (as many as INDEX_TARGETS)
        for a in range(0, S, C):
            at, vals = f.slot_values(a, min(S, a + C))
            used += at.size
            bad = (vals < 0) | (vals >= max(n, 1))
            bad_slots.add(at[bad], vals[bad])
            if kept is not None:
                kept = kept + [(at, vals)] if used <= max(1, int(INDEX_TARGETS)) else None

        def slot_chunks():
            """(slot numbers, values) of the used slots, a chunk at a time."""
            if kept is not None:
                yield from kept
                return
            for a in range(0, S, C):
                yield f.slot_values(a, min(S, a + C))

        if used != f.hash_slot_count and n > 1:
            self._add("index.slot-count", f.rel, 32, f"hashSlotCount {f.hash_slot_count}, but {used} slots are used")
        for s, v in bad_slots.rows():
            self._add("index.slot", f.rel, INDEX_HEADER_SIZE + HASH_SLOT_SIZE * s,
                      f"slot {s} holds {v}, outside the written entries 1..{n - 1}")
        self._count_only("index.slot", bad_slots.dropped)
        if n <= 1:
            f.known_range = (-1, -1)
            if f.length >= f.entries_base + 2 * INDEX_ENTRY_SIZE:
                first = self._index_nonzero(f, f.entries_base + INDEX_ENTRY_SIZE)
                if first is not None:
                    self._add("index.tail", f.rel, first, "non-zero bytes in an index file with no entries")
            return
        # One pass over the entries in order: fields, links that leave the older entries,
        # offsets going back; and, as links only go to older entries, the links into the
        # first INDEX_TARGETS entries too (their hashes are read before any link to them).
        T = max(1, int(INDEX_TARGETS))
        chain = _Deferred(cap)  # entry -> prev, cross (0: broken link, 1: other slot), slot of prev, own slot
        heads_bad = _Deferred(cap)  # slot -> entry number it heads, that entry's hash and slot
        branch = _Deferred(cap)  # entry -> number of places reaching it
        orphan = _Deferred(cap)  # entry -> its hash
        lo, hi, first_phy, last_phy = None, -1, None, None
        back_n, back_first = 0, None

        class Targets:
            """Entries t0..t1-1 (numbers t0+1..t1): their hashes and how often they are reached."""

            def __init__(self, t0: int, t1: int):
                self.t0, self.t1 = t0, t1
                self.h = np.empty(t1 - t0, np.int32)
                self.refs = np.zeros(t1 - t0, np.int64)
                self.pending: list[np.ndarray] = []
                self.waiting = 0

            def count(self, tgt: np.ndarray) -> None:
                self.pending.append(tgt)
                self.waiting += tgt.size
                if self.waiting >= self.refs.size:
                    self.flush()

            def flush(self) -> None:
                if self.pending:
                    self.refs += np.bincount(np.concatenate(self.pending), minlength=self.refs.size)
                    self.pending, self.waiting = [], 0

            def links(self, a: int, h: np.ndarray, prev: np.ndarray) -> None:
                """Links of entries a.. (hashes h, prevIndex prev) into these targets."""
                m = np.flatnonzero((prev > self.t0) & (prev <= self.t1) & (prev <= np.arange(a, a + prev.size)))
                if not m.size:
                    return
                tgt = prev[m].astype(np.int64) - 1 - self.t0
                self.count(tgt)
                own, theirs = slot_of(h[m]), slot_of(self.h[tgt])
                x = np.flatnonzero(own != theirs)
                chain.add(m[x] + a, prev[m[x]], np.ones(x.size, np.int64), theirs[x], own[x])

            def heads(self) -> None:
                for at, vals in slot_chunks():
                    m = np.flatnonzero((vals > self.t0) & (vals <= self.t1))
                    if not m.size:
                        continue
                    tgt = vals[m] - 1 - self.t0
                    self.count(tgt)
                    theirs = slot_of(self.h[tgt])
                    x = np.flatnonzero(theirs != at[m])
                    heads_bad.add(at[m[x]], vals[m[x]], self.h[tgt[x]], theirs[x])

            def finish(self) -> None:
                self.heads()
                self.flush()
                br = np.flatnonzero(self.refs > 1)
                branch.add(br + self.t0, self.refs[br])
                orph = np.flatnonzero(self.refs == 0)
                orphan.add(orph + self.t0, self.h[orph])

        first = Targets(0, min(E, T))
        for a in range(0, E, C):
            b = min(E, a + C)
            h, phy, diff, prev = f.columns(a, b, "key_hash", "phy_offset", "time_diff", "prev_index")
            for i in np.flatnonzero((h < 0) | (diff < 0)).tolist():
                self._add("index.entry", f.rel, f.entry_offset(a + i),
                          f"entry {a + i + 1}: keyHash {int(h[i])}, timeDiff {int(diff[i])} (both must be >= 0)")
            broken = np.flatnonzero((prev < 0) | (prev > np.arange(a, b)))  # prev >= own number
            z = np.zeros(broken.size, np.int64)
            chain.add(broken + a, prev[broken], z, z, z)
            if first_phy is None:
                first_phy = int(phy[0])
            steps = np.concatenate([[last_phy], phy]) if last_phy is not None else phy
            back = np.flatnonzero(steps[1:] < steps[:-1])
            if back.size and back_first is None:
                k = int(back[0])
                back_first = (k + a - (last_phy is not None), int(steps[k]), int(steps[k + 1]))
            back_n += back.size
            last_phy = int(phy[-1])
            lo = int(phy.min()) if lo is None else min(lo, int(phy.min()))
            hi = max(hi, int(phy.max()))
            if a < first.t1:
                first.h[a:min(b, first.t1)] = h[:min(b, first.t1) - a]
            first.links(a, h, prev)
            del h, phy, diff, prev, steps
        f.known_range = (lo, hi)
        f.phy_ordered = back_n == 0
        first.finish()
        del first
        for t0 in range(T, E, T):  # later target ranges: one more pass over the links each
            tg = Targets(t0, min(E, t0 + T))
            for a in range(t0, tg.t1, C):
                tg.h[a - t0:min(tg.t1, a + C) - t0] = f.columns(a, min(tg.t1, a + C), "key_hash")[0]
            for a in range(t0 + 1, E, C):  # a link goes to an older entry: sources after t0 only
                h, prev = f.columns(a, min(E, a + C), "key_hash", "prev_index")
                tg.links(a, h, prev)
            tg.finish()
            del tg
        for i, p, cross, theirs, own in chain.rows():
            why = (f"links to entry {p} of slot {theirs}, not its own slot {own}" if cross else
                   f"points to entry {p}, not an older one: the chain loops or leaves the written entries")
            self._add("index.chain", f.rel, f.entry_offset(i) + 16, f"entry {i + 1} {why}")
        self._count_only("index.chain", chain.dropped)
        for s, e, he, se in heads_bad.rows():
            self._add("index.slot", f.rel, INDEX_HEADER_SIZE + HASH_SLOT_SIZE * s,
                      f"slot {s} heads entry {e}, whose hash {he} belongs to slot {se}")
        self._count_only("index.slot", heads_bad.dropped)
        for e, r in branch.rows():
            self._add("index.chain", f.rel, f.entry_offset(e), f"entry {e + 1} is reached from {r} places: chains branch")
        self._count_only("index.chain", branch.dropped)
        rows = list(orphan.rows())
        if rows:
            phys = f.entry_phys(np.array([r[0] for r in rows], np.int64)).tolist()
            for (e, he), pe in zip(rows, phys):
                self._add("index.orphan", f.rel, f.entry_offset(e),
                          f"entry {e + 1} (hash {he}, offset {pe}) is on no slot's chain")
        self._count_only("index.orphan", orphan.dropped)
        # header against entries
        if f.begin_phy != first_phy:
            self._add("index.header", f.rel, 16, f"beginPhyOffset {f.begin_phy}, first entry points at {first_phy}")
        if f.end_phy != last_phy:
            self._add("index.header", f.rel, 24, f"endPhyOffset {f.end_phy}, last entry points at {last_phy}")
        if f.begin_ts > f.end_ts:
            self._add("index.header", f.rel, 0, f"beginTimestamp {f.begin_ts} after endTimestamp {f.end_ts}")
        if back_first is not None:
            i, p0, p1 = back_first
            self._add("index.order", f.rel, f.entry_offset(i + 1),
                      f"entry {i + 2} points at {p1}, below entry {i + 1}'s {p0}"
                      + (f" ({back_n} such steps)" if back_n > 1 else ""))
        tail_start = f.entries_base + f.n * INDEX_ENTRY_SIZE
        if f.length > tail_start:
            first = self._index_nonzero(f, tail_start)
            if first is not None:
                self._add("index.tail", f.rel, first, f"non-zero bytes after the last entry {f.n - 1} (indexCount "
                          f"{f.stored_count})")

    def _index_nonzero(self, f: IndexScan, start: int) -> int | None:
        """First non-zero byte of index file ``f`` from ``start``, its pages released as read."""
        arr = np.frombuffer(f.mm, np.uint8)
        step = 1 << 26
        for a in range(start, f.length, step):
            b = min(f.length, a + step)
            at = first_nonzero(f.path, arr, a, b)
            release_pages(f.mm, a, b)
            if at is not None:
                return at
        return None

    def _count_only(self, check: str, k: int) -> None:
        """Findings of ``check`` beyond ``max_findings`` that were never built: counted only."""
        if k:
            self.counts[check] += k
            self.by_severity[CHECKS[check][0]] += k

    # -------------------------------------------------------- commit log
    def _scan_commitlog(self) -> Iterator[Finding]:
        cfg = self.config
        size = cfg.mapped_file_size_commit_log
        mfq = MappedFileQueue(cfg.commitlog_dirs, size)
        self.mfq = mfq
        files = mfq.files
        self.files["commitlog"] = len(files)
        for s in mfq.strays:
            self._add("commitlog.file-name", self.rel(s), None, "not a 20-digit offset: the broker cannot load it")
        for p in mfq.not_regular:
            self._not_regular(p)
        mfq.files = [f for f in mfq.files if not self._not_regular(f.path)]  # skipped: a gap follows
        files = mfq.files
        self.cl_min = files[0].file_from_offset if files else 0
        self.cl_end = self.cl_min
        self.delay_table = cfg.delay_level_table
        self.topic_ids: dict[bytes, int] = {}
        self.topic_names: list[bytes] = []
        self.tq_ids: dict[tuple[int, int], int] = {}
        self.tq_list: list[tuple[int, int]] = []
        self.tq_queue: list[QueueState | None] = []
        self.tq_last: list[int | None] = []  # next expected queue offset per tq
        self.tq_reset: dict[int, int] = {}  # tq -> last physical offset where its queue offsets restarted
        self.tags_cache: dict[bytes, int] = {}
        #: Messages with no consume-queue unit, as (tq, queue offset, physical offset, store
        #: time) arrays: exact, and what the Spark tasks exchange. Past ``MISSING_CAP``
        #: elements it is dropped (None) and only ``missing_runs`` is kept.
        self.missing: list[tuple[np.ndarray, ...]] | None = []
        self.missing_n = 0
        #: The same as runs, per tq: [first L, last L, first physical offset, late, reset mark,
        #: creation order] — what a store with no consume queues leaves of each queue's
        #: messages (one run), so memory follows queues, not messages.
        self.missing_runs: dict[int, list[list]] = {}
        self.missing_seq = 0
        self.stops: list[tuple[int, str, str]] = []  # (physical offset, check, file): recovery stoppers
        self.last_store_ts = 0
        self.max_store_ts = 0
        self.ranges: list[tuple[int, int]] = []  # readable [start, end) physical ranges with records
        self.first_records: dict[int, tuple[int, int] | None] = {}
        self.index_active = [f for f in self.index_files if f.entry_count]
        do_index = bool(self.index_active) or self.opt.deep
        self.want_keys = cfg.message_index_enable and do_index
        #: no index entry at all: look for the first message with an index key (index.missing)
        self.index_empty = cfg.message_index_enable and not self.index_active
        self.first_indexable: int | None = None
        for i in range(len(files)):
            self.scan_file_at(i)
            if self.retire_index_files and i + 1 < len(files):  # later files hold only higher offsets
                self._retire_index_files(files[i + 1].file_from_offset)
            yield from self._drain()
        try:
            mfq.close()
        except BufferError:  # a view still alive (e.g. held by a caller); the GC unmaps it
            pass

    def _kernel(self):
        """:mod:`kernels` once ``KERNEL_AFTER`` records are checked (None before, or
        without numba): the compiled walk and CRC pay for numba's import on big stores only."""
        k = self.__dict__.get("_kern")
        if k is None:
            if self.messages < KERNEL_AFTER and not self.big_job:
                return None
            try:
                from rmqstore_cli.store import kernels as k
            except ImportError:  # pragma: no cover - numba not installed
                k = False
            else:
                compile_walk()
            self._kern = k
        return k or None

    def _retire_index_files(self, upto: int) -> None:
        """Index files all of whose entries point below ``upto`` can meet no later record."""
        for f in self.index_active:
            if f.phy_max < upto:
                f.ensure_loaded()
                f.retire()
        self.index_active = [f for f in self.index_active if not getattr(f, "retired", False)]

    def scan_file_at(self, i: int) -> None:
        """Check commit-log file number ``i`` of ``self.mfq`` (name, size, gap to the previous
        file, every record); the pipeline runs this as one task per file."""
        files = self.mfq.files
        size = self.config.mapped_file_size_commit_log
        f = files[i]
        rel = self.rel(f.path)
        if f.file_from_offset % size:
            self._add("commitlog.file-name", rel, None, f"start {f.file_from_offset} is not a multiple of "
                      f"the file size {size}")
        if i and f.file_from_offset != files[i - 1].end_offset:
            a, b = files[i - 1].end_offset, f.file_from_offset
            if b > a:
                self._add("commitlog.gap", rel, 0, f"no file holds offsets {a}..{b - 1} ({b - a} bytes; "
                          f"file {a:020d} is missing, e.g. expired or deleted out of order)",
                          physical_offset=a, missing_file=f"{a:020d}")
                self.stops.append((a, "commitlog.gap", rel))
            else:
                self._add("commitlog.file-name", rel, 0, f"overlaps the previous file (ends at {a})")
        length = f.path.stat().st_size
        if length != size:
            self._add("commitlog.file-size", rel, None, f"{length} bytes, expected {size}"
                      + (" (truncated)" if length < size else ""))
        last = i == len(files) - 1
        if last:
            self.cl_end = None  # set where the file's data ends (below)
        self._scan_file(f, rel, last=last)
        if last and self.cl_end is None:  # the file ends in bytes no record could be read from
            self.cl_end = self._valid_end(f.file_from_offset)
        if self.progress:
            self.progress(min(length, size))

    def _valid_end(self, base: int) -> int:
        """The end of the last valid record read at or above ``base``: where a torn last file's
        data ends. For a log cut inside its last record this is ``CommitLog#recoverNormally``'s
        ``processOffset`` (it keeps the records before the first one ``checkMessageAndReturnSize``
        rejects); damage earlier in the file is reported as ``recovery.truncate`` besides."""
        return max((e for s, e in self.ranges if s >= base), default=base)

    def _scan_file(self, f, rel: str, last: bool) -> None:
        buf = f.buffer()
        limit = len(buf)
        base = f.file_from_offset
        arr = file_array(buf)
        unpack = _PREFIX_UNPACK
        pos = 0
        first_rec = None
        walked = [0, 0]  # records, bytes: batches of about _BATCH_BYTES after a first probe
        released = 0
        while True:
            if pos - released >= _RELEASE_EVERY:  # memory stays flat however big the store
                released = release_pages(buf, released, pos)
            cap = max(64, min(_BATCH, _BATCH_BYTES * walked[0] // max(walked[1], 1))) if walked[0] else 64
            # walk: TOTALSIZE and MAGICCODE only (batch.walk_records, shared with rebuild-index)
            self._kernel()  # past KERNEL_AFTER records the walk runs compiled too
            positions, nxt, kind = walk_records(buf, pos, limit, cap, _MIN_RECORD, arr)
            walked[0] += positions.size
            walked[1] += nxt - pos
            pos = nxt
            if positions.size:
                if first_rec is None:
                    first_rec = int(positions[0])
                bad = self._check_batch(buf, arr, positions, base, rel, limit)
                if bad is not None:  # a structural failure inside the batch: resync after it
                    pos = self._resync(buf, limit, base, rel, *bad)
                    if pos is None:
                        break
                    continue
            if kind is None:
                continue
            if kind == "blank":
                total = unpack(buf, pos)[0]
                if total != self.config.mapped_file_size_commit_log - pos:
                    self._add("commitlog.blank", rel, pos, f"BLANK size field {total}, but {limit - pos} bytes "
                              "remain to the file's end", physical_offset=base + pos)
                self._check_tail(f.path, arr, pos + END_FILE_MIN_BLANK_LENGTH, rel, base, "the BLANK record")
                if last:
                    self.cl_end = base + self.config.mapped_file_size_commit_log
                break
            if kind == "eof" or kind == "short":
                if kind == "short":
                    self._add("commitlog.truncated", rel, pos, f"{limit - pos} bytes left, too few for a record "
                              "header", physical_offset=base + pos)
                    self.stops.append((base + pos, "commitlog.truncated", rel))
                elif not last or limit < self.config.mapped_file_size_commit_log:
                    self._add("commitlog.blank", rel, pos, "the file ends without a BLANK record",
                              physical_offset=base + pos)
                if last:
                    self.cl_end = base + pos
                break
            if kind == "zero":
                nz = first_nonzero(f.path, arr, pos)
                nxt = None if nz is None else self._find_next(buf, max(pos, nz - 8), limit, base)
                if nxt is not None:  # zeros, then records again: a hole inside the data
                    self._add("commitlog.magic", rel, pos, f"a run of zero bytes inside the data; records resume "
                              f"at {base + nxt} ({nxt - pos} bytes unreadable)", physical_offset=base + pos,
                              end_offset=nxt)
                    self.stops.append((base + pos, "commitlog.magic", rel))
                    pos = nxt
                    continue
                if last:
                    self.cl_end = base + pos
                else:
                    self._add("commitlog.blank", rel, pos, "data ends without a BLANK record in a file that is not "
                              "the last: recovery stops here and deletes the later files",
                              physical_offset=base + pos)
                    self.stops.append((base + pos, "commitlog.blank", rel))
                if nz is not None:
                    self._add("commitlog.tail", rel, nz, f"non-zero bytes after the end of data (from {base + nz}): "
                              "stale data after a truncation, or a lost end of log", physical_offset=base + nz)
                break
            # kind == "bad": magic or size unusable at pos
            nxt = self._resync(buf, limit, base, rel, pos, *self._classify_bad(buf, pos, limit))
            if nxt is None:
                break
            pos = nxt
        self.first_records[base] = first_rec
        del arr
        try:
            f.close()  # later look-ups map it again
        except BufferError:
            pass

    def _check_tail(self, path, arr: np.ndarray, start: int, rel: str, base: int, what: str) -> None:
        if start >= arr.size:
            return
        at = first_nonzero(path, arr, start)
        if at is not None:
            self._add("commitlog.tail", rel, at, f"non-zero bytes after {what} (from {base + at}): stale data "
                      "after a truncation, or a lost end of log", physical_offset=base + at)

    def _classify_bad(self, buf, pos: int, limit: int) -> tuple[str, str]:
        total, magic = _PREFIX_UNPACK(buf, pos) if pos + 8 <= limit else (0, 0)
        size = self.config.mapped_file_size_commit_log
        if magic not in (MAGIC_V1, MAGIC_V2, MAGIC_BLANK):
            return "commitlog.magic", f"bad magic code 0x{magic:08X}"
        if limit - pos < total <= size - pos and limit < size:
            return "commitlog.truncated", f"record of {total} bytes, but the file ends after {limit - pos}"
        return "commitlog.total-size", f"total size {total} does not fit ({limit - pos} bytes left in the file)"

    def _resync(self, buf, limit: int, base: int, rel: str, bad: int, check: str, why: str) -> int | None:
        """Report the bad record at ``bad``; search forward for the next plausible record."""
        nxt = self._find_next(buf, bad + 1, limit, base)
        end = nxt if nxt is not None else limit
        msg = f"{end - bad} bytes unreadable, " + (f"scan resumed at {base + nxt}" if nxt is not None
                                                  else "no further record in this file")
        self._add(check, rel, bad, f"{why}; {msg}", physical_offset=base + bad, end_offset=base + end)
        self.stops.append((base + bad, check, rel))
        return nxt

    def _find_next(self, buf, start: int, limit: int, base: int) -> int | None:
        """Next position >= start where a record plausibly starts: V1/V2 magic, sane size and
        PHYSICALOFFSET equal to the position (or a fully valid record), or a right-sized BLANK."""
        size = self.config.mapped_file_size_commit_log
        finds = {m: buf.find(m, start + 4, limit) for m in _MAGIC_BYTES}
        while True:
            live = [(i, m) for m, i in finds.items() if i >= 0]
            if not live:
                return None
            i, m = min(live)
            c = i - 4
            total = int.from_bytes(buf[c:c + 4], "big", signed=True)
            if m == _MAGIC_BYTES[2]:
                if total == size - c:
                    return c
            elif _MIN_RECORD <= total <= limit - c:
                phy = int.from_bytes(buf[c + _POS_PHY:c + _POS_PHY + 8], "big", signed=True)
                if phy == base + c:
                    return c
                chk = check_message(buf, c, limit, base)
                if chk.status is Status.VALID:
                    nxt = c + total
                    if nxt + 8 > limit:
                        return c
                    t2, m2 = _PREFIX_UNPACK(buf, nxt)
                    if m2 in (MAGIC_V1, MAGIC_V2) and _MIN_RECORD <= t2 <= limit - nxt or \
                            m2 == MAGIC_BLANK or (t2 == 0 and m2 == 0):
                        return c
            finds[m] = buf.find(m, i + 1, limit)

    # -------------------------------------------------------- one batch of records
    def _check_batch(self, buf, arr, P: np.ndarray, base: int, rel: str, limit: int) -> int | None:
        """Check records at file positions ``P``; return the position of the first structurally
        broken record (its successors are unreliable) or None."""
        r = RecordBatch(arr, P)
        total, body_len, topic_len, props_len, expected = r.total, r.body_len, r.topic_len, r.props_len, r.expected
        body_start, tlp, T, plp, props_start = r.body_at, r.topic_len_at, r.topic_len_size, r.props_len_at, r.props_at
        pl = np.maximum(props_len, 0)
        rec_end = P + total
        ok_fixed = body_start <= rec_end
        ok_body = tlp + T <= rec_end
        ok_topic = (topic_len >= 0) & (plp + 2 <= rec_end)
        ok_props = props_start + pl <= rec_end
        ok_size = expected == total
        good = ok_fixed & ok_body & ok_topic & ok_props & ok_size
        stop = None
        n = P.size
        if not good.all():
            i = int(np.flatnonzero(~good)[0])
            p = int(P[i])
            if not (ok_fixed[i] and ok_body[i] and ok_topic[i] and ok_props[i]):
                what = ("fixed fields" if not ok_fixed[i] else f"body length {int(body_len[i])}" if not ok_body[i]
                        else f"topic length {int(topic_len[i])}" if not ok_topic[i]
                        else f"properties length {int(props_len[i])}")
                stop = (p, "commitlog.field-bounds", f"{what} runs past the record's end (total size {int(total[i])})")
            else:
                stop = (p, "commitlog.total-size", f"total size {int(total[i])} but the fields add up "
                        f"to {int(expected[i])}")
            n = i
            if n == 0:
                return stop
            r = r.head(n)
        P, total, sysf = r.pos, r.total, r.sys_flag
        bl, body_start = np.maximum(r.body_len, 0), r.body_at
        topic_len, topic_start, pl, props_start = r.topic_len, r.topic_at, np.maximum(r.props_len, 0), r.props_at
        self.messages += n
        self.bytes += int(total.sum())  # the summary's bytes: of the records checked, not the files
        self.ranges.append((base + int(P[0]), base + int(P[-1] + total[-1])))
        crc, qid, qoff, phy, store_ts = r.body_crc, r.queue_id, r.queue_offset, r.physical_offset, r.store_timestamp
        absP = P + base
        # PHYSICALOFFSET = position
        for i in np.flatnonzero(phy != absP).tolist():
            self._add("commitlog.physical-offset", rel, int(P[i]), f"stored PHYSICALOFFSET {int(phy[i])}, but the "
                      f"record lies at {int(absP[i])}", physical_offset=int(absP[i]))
        if n:
            self.last_store_ts = int(store_ts[-1])
            self.max_store_ts = max(self.max_store_ts, int(store_ts.max()))
        # per-record Python work: CRC, topic, properties, keys
        if self.opt.crc:
            kern = self._kernel()
            if kern is None:
                got = body_crcs(buf, body_start, bl)
            else:  # small bodies in the compiled loop, long ones by zlib
                got = np.empty(n, np.int64)
                if kern.small_body_crcs(arr, body_start, bl, kern.SMALL_BODY, kern.CRC_TABLES, got):
                    big = np.flatnonzero(bl >= kern.SMALL_BODY)
                    got[big] = body_crcs(buf, body_start[big], bl[big])
            bad_crc = np.flatnonzero((got != crc) & (bl > 0))
            for i in bad_crc.tolist():
                p = int(P[i])
                self._add("commitlog.body-crc", rel, p, f"stored body CRC {int(crc[i])}, computed {int(got[i])} "
                          f"over {int(bl[i])} body bytes", physical_offset=p + base)
                if self.config.check_crc_on_recover:
                    self.stops.append((p + base, "commitlog.body-crc", rel))
        topic_ids = self.topic_ids
        tid = self._topic_lookup(buf, arr, topic_start, topic_len, P, rel, base)
        tran = sysf & TRANSACTION_MASK
        kern = self._kernel()
        if kern is not None:  # the PROPERTIES bytes joined by the compiled loop
            joined = np.empty(int(pl.sum()), np.uint8)
            kern.join_ranges(arr, props_start, pl, joined)
            pr = Properties(arr, props_start, pl, buf, joined=joined)
        else:
            pr = Properties(arr, props_start, pl, buf)
        for i in pr.suspects().tolist():
            problem = _props_problem(buf[int(props_start[i]):int(props_start[i] + pl[i])])
            if problem:
                self._add("commitlog.properties", rel, int(P[i]), problem, physical_offset=int(P[i]) + base)
        if self.opt.crc and pr.tot and CRC_MARK in cat_bytes(pr.cat):
            for i in np.flatnonzero(pr.prop_crc).tolist():
                self._check_prop_crc(buf, int(P[i]), int(total[i]), buf[int(props_start[i]):int(props_start[i] + pl[i])],
                                     rel, base)
        tags_code = pr.tags_code
        sched_tid = topic_ids.get(SCHEDULE_TOPIC.encode())
        if sched_tid is not None and (tid == sched_tid).any():
            dm, da, db = pr.value(b"DELAY\x01")
            sel = np.flatnonzero(tid[dm] == sched_tid)
            cat = pr.cat
            rules = self.__dict__.setdefault("_delay_rules", {})
            for i, x, y in zip(dm[sel].tolist(), da[sel].tolist(), db[sel].tolist()):
                v = bytes(cat[x:y])
                rule = rules.get(v)
                if rule is None:
                    rule = rules[v] = self._delay_rule(v)
                if rule is False:  # level <= 0: the TAGS hash stays
                    continue
                if isinstance(rule, InvalidForDispatch):
                    self._add("commitlog.properties", rel, int(P[i]), f"{rule}: the broker's check throws, so it "
                              "treats the record as invalid (dispatch and recovery stop here)", severity=ERROR,
                              physical_offset=int(P[i]) + base)
                    self.stops.append((int(P[i]) + base, "commitlog.properties", rel))
                    continue
                tags_code[i] = int(store_ts[i]) + rule
        keys = None
        if self.want_keys:
            keys = pr.index_keys(tid, self._topic_prefix_hashes(), tran != TRANSACTION_ROLLBACK_TYPE,
                                 self.topic_names)
        if self.index_empty and self.first_indexable is None:  # IndexService#buildIndex would put a key
            owner = keys.owner if keys is not None else pr.key_ranges(tran != TRANSACTION_ROLLBACK_TYPE)[0]
            if owner.size:
                self.first_indexable = int(absP[int(owner.min())])
        inner: list[int] = []
        if (sysf & INNER_BATCH_FLAG).any():
            inner = np.flatnonzero(sysf & INNER_BATCH_FLAG).tolist()
        step = np.ones(n, np.int64)
        for i in inner:
            props = buf[int(props_start[i]):int(props_start[i] + pl[i])]
            v = pick_property(props, b"INNER_NUM\x01")
            if v is not None and v.isdigit():
                step[i] = int(v)
        # NOT and COMMIT records get a unit; 5.x inner-batch records go to the batch consume
        # queue (batchconsumequeue/, not checked here) instead
        dispatch = ((tran == 0) | (tran == 8)) & ((sysf & INNER_BATCH_FLAG) == 0)
        tq = self._tq_ids(tid, qid)
        self._check_queue_offsets(tq, qoff, step, dispatch, absP, rel, base)
        self._check_units(tq, qoff, dispatch, absP, total, tags_code, store_ts, rel, base)
        if keys is not None:
            self._check_index_batch(absP, total, keys, base, rel)
        return stop

    def _delay_rule(self, delay: bytes):
        """What ``compute_tags_code`` makes of a DELAY value on the schedule topic, asked
        once per distinct value: the exception it throws, False when the tagsCode stays the
        TAGS hash (level <= 0), else the delay added to the store time (the code at store
        time 0, told apart from level <= 0 by asking at store time 1 too)."""
        props = {"DELAY": delay.decode("utf-8", "replace")}
        try:
            at0, at1 = (compute_tags_code(_Delayed(props, SCHEDULE_TOPIC.encode(), t), self.delay_table)
                        for t in (0, 1))
        except InvalidForDispatch as e:
            return e
        return False if at0 == at1 else at0

    def _check_prop_crc(self, buf, pos: int, total: int, props: bytes, rel: str, base: int) -> None:
        """§2.8: the __CRC32# digits (least significant first) against crc32(record[:total-20])."""
        if props.endswith(b"\x02") and props.startswith(CRC_MARK, len(props) - CRC32_RESERVED_LEN):
            digits = props[-11:-1]
        else:
            v = parse_properties(props.decode("utf-8", "replace")).get(CRC32_PROPERTY, "")
            digits = v.encode()
        want = crc32(memoryview(buf)[pos:pos + total - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
        if len(digits) != 10 or not digits.isdigit() or int(digits[::-1]) != want:
            self._add("commitlog.prop-crc", rel, pos, f"__CRC32# is {digits.decode('ascii', 'replace')!r}, the "
                      f"record's CRC is {want} (stored reversed as {str(want).zfill(10)[::-1]})",
                      physical_offset=base + pos)

    def _topic_prefix_hashes(self) -> np.ndarray:
        """Java hashCode of ``topic + "#"`` per topic id (uint64, mod 2^32)."""
        have = getattr(self, "_prefix_h", None)
        if have is None or have.size < len(self.topic_names):
            self._prefix_h = np.array([java_hash(t.decode("utf-8", "replace") + "#") & 0xFFFFFFFF
                                       for t in self.topic_names], np.uint64)
        return self._prefix_h

    def _topic_lookup(self, buf, arr, ta: np.ndarray, tl: np.ndarray, P: np.ndarray, rel: str, base: int
                      ) -> np.ndarray:
        """Topic id per record: topics seen before found with numpy (:class:`batch.TopicIds`);
        new ones registered one by one in record order (:meth:`_new_topic`, its findings)."""
        tbl = self.__dict__.get("_topic_table")
        if tbl is None or len(tbl.ids) != len(self.topic_names):
            tbl = self._topic_table = TopicIds()
            for i, name in enumerate(self.topic_names):
                tbl.add(name, i)
        tid = tbl.lookup(arr, ta, tl)
        unknown = np.flatnonzero(tid < 0)
        if unknown.size:
            get = self.topic_ids.get
            for i in unknown.tolist():
                at = int(ta[i])
                tb = buf[at:at + int(tl[i])]
                t = get(tb)
                if t is None:
                    t = self._new_topic(tb, rel, int(P[i]), base)
                    if len(tbl.ids) == t:
                        tbl.add(tb, t)
                tid[i] = t
        return tid

    def _new_topic(self, tb: bytes, rel: str, pos: int, base: int) -> int:
        t = len(self.topic_names)
        self.topic_ids[tb] = t
        self.topic_names.append(tb)
        shown = tb.decode("utf-8", "backslashreplace")
        try:
            text = tb.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if not tb or text is None or tb in (b".", b"..") or any(c in tb for c in b"/\x00") or \
                any(ord(ch) < 0x20 for ch in text):
            why = "empty" if not tb else "not UTF-8" if text is None else "not usable as a directory name"
            self._add("commitlog.topic", rel, pos, f"topic {shown!r} is {why} (first seen here)",
                      physical_offset=base + pos)
        elif not _TOPIC_OK_DOT.fullmatch(tb):
            self._add("commitlog.topic-chars", rel, pos, f"topic {shown!r} has characters outside "
                      "[A-Za-z0-9%|_.-] (first seen here)", physical_offset=base + pos)
        return t

    def _tq_ids(self, tid: np.ndarray, qid: np.ndarray) -> np.ndarray:
        """A dense id per (topic, queue id): a lookup table for the usual small queue ids."""
        lut = getattr(self, "_tq_lut", None)
        if lut is None or lut.shape[0] < len(self.topic_names):
            new = np.full((len(self.topic_names) + 16, 1024), -1, np.int64)
            if lut is not None:
                new[:lut.shape[0]] = lut
            lut = self._tq_lut = new
        small = (qid >= 0) & (qid < 1024)
        if small.all():
            ids = lut[tid, qid]
            if (ids >= 0).all():
                return ids
        ids = self._tq_ids_slow(tid, qid)
        lut[tid[small], qid[small]] = ids[small]
        return ids

    def _tq_ids_slow(self, tid: np.ndarray, qid: np.ndarray) -> np.ndarray:
        combo = tid * (1 << 32) + (qid & 0xFFFFFFFF)
        uniq, inv = np.unique(combo, return_inverse=True)
        ids = np.empty(uniq.size, np.int64)
        for j, c in enumerate(uniq.tolist()):
            t, q = c >> 32, c & 0xFFFFFFFF
            q = q - (1 << 32) if q >= 1 << 31 else q
            key = (t, q)
            v = self.tq_ids.get(key)
            if v is None:
                v = self.tq_ids[key] = len(self.tq_list)
                self.tq_list.append(key)
                self.tq_queue.append(self.queues.get((self.topic_names[t], q)))
                self.tq_last.append(None)
            ids[j] = v
        return ids[inv.ravel()]

    # -------------------------------------------------------- queue offsets
    def _check_queue_offsets(self, tq, qoff, step, dispatch, absP, rel, base) -> None:
        idx = np.flatnonzero(dispatch)
        if not idx.size:
            return
        order = idx[stable_argsort(tq[idx])]
        g = tq[order]
        q = qoff[order]
        st = step[order]
        first = np.ones(order.size, bool)
        first[1:] = g[1:] != g[:-1]
        exp = np.empty(order.size, np.int64)
        exp[1:] = q[:-1] + st[:-1]
        heads = np.flatnonzero(first)
        for h in heads.tolist():
            prev = self.tq_last[int(g[h])]
            exp[h] = q[h] if prev is None else prev
        last = np.flatnonzero(np.append(first[1:], True))
        for li in last.tolist():
            self.tq_last[int(g[li])] = int(q[li] + st[li])
        for j in np.flatnonzero(q != exp).tolist():
            i = int(order[j])
            t, qi = self.tq_list[int(g[j])]
            topic = self.topic_names[t].decode("utf-8", "backslashreplace")
            e, got = int(exp[j]), int(q[j])
            if got > e:
                self._add("commitlog.queue-offset", rel, int(absP[i]) - base,
                          f"{topic}/{qi}: queue offset {got}, expected {e} ({got - e} missing)",
                          physical_offset=int(absP[i]), topic=topic, queue_id=qi)
            else:
                t = int(g[j])
                self.tq_reset[t] = max(self.tq_reset.get(t, -1), int(absP[i]))
                self._add("commitlog.queue-offset-reset", rel, int(absP[i]) - base,
                          f"{topic}/{qi}: queue offset {got} after {e - 1} (restart without its consume queue?)",
                          physical_offset=int(absP[i]), topic=topic, queue_id=qi)

    # -------------------------------------------------------- consume-queue units
    def _check_units(self, tq, qoff, dispatch, absP, total, tags_code, store_ts, rel, base) -> None:
        idx = np.flatnonzero(dispatch)
        if not idx.size:
            return
        order = idx[stable_argsort(tq[idx])]
        g = tq[order]
        bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            sel = order[a:b]
            t = int(g[a])
            mq = self.tq_queue[t]
            L = qoff[sel]
            if mq is None and self.topic_names[self.tq_list[t][0]] in self.batch_topics:
                continue  # a 5.x BatchCQ topic: its units are in batchconsumequeue/ (§4.5), not checked
            if mq is None:
                self._add_missing(t, L, absP[sel], store_ts[sel])
                continue
            found, off, size, tags = mq.units_at(L)
            match = found & (off == absP[sel])
            if not match.all():
                miss = ~found
                if miss.any():
                    self._add_missing(t, L[miss], absP[sel][miss], store_ts[sel][miss])
                other = found & ~match
                for j in np.flatnonzero(other).tolist():
                    self._unit_elsewhere(mq, int(L[j]), int(off[j]), int(absP[sel][j]))
                    mq.matched[int(L[j]) - mq.base] = True
            if match.any():
                m = np.flatnonzero(match)
                mq.matched[L[m] - mq.base] = True
                ext = tags[m] <= _EXT_ADDR_MAX  # ConsumeQueueExt address, not a tagsCode (§4.2 step 3)
                bad = m[(size[m] != total[sel][m]) | ((tags[m] != tags_code[sel][m]) & ~ext)]
                for j in bad.tolist():
                    f, o = mq.file_of(int(L[j]))
                    what = []
                    if size[j] != total[sel][j]:
                        what.append(f"size {int(size[j])} but the message has {int(total[sel][j])} bytes")
                    if tags[j] != tags_code[sel][j]:
                        what.append(f"tagsCode {int(tags[j])} but the message's is {int(tags_code[sel][j])}")
                    self._add("cq.unit-mismatch", f, o, f"unit {int(L[j])} -> {int(absP[sel][j])}: " + "; ".join(what),
                              topic=mq.topic, queue_id=mq.qid, physical_offset=int(absP[sel][j]))

    def _unit_elsewhere(self, mq: QueueState, L: int, off: int, msg_at: int) -> None:
        """Unit L of the message's queue points at ``off``, not at the message (at ``msg_at``)."""
        c = self._check_at(off)
        f, o = mq.file_of(L)
        if c is not None and c.status is Status.VALID and c.message.queue_offset == L and \
                c.message.queue_id == mq.qid and c.message.topic_bytes == mq.topic.encode("utf-8", "surrogateescape"):
            self._add("cq.superseded", f, o, f"{mq.topic}/{mq.qid}: queue offset {L} is used by the messages at "
                      f"{msg_at} and {off}; the unit points at {off} (duplicate queue offset after a restart, §2.6)",
                      physical_offset=msg_at, topic=mq.topic, queue_id=mq.qid)
            return
        self._add("cq.unit-mismatch", f, o, f"unit {L} points at {off}, but the message with queue offset {L} "
                  f"is at {msg_at}", topic=mq.topic, queue_id=mq.qid, physical_offset=msg_at)

    def _cl_path(self, offset: int):
        f = self.mfq.find(offset)
        return f.path if f else self.config.commitlog_dirs[0]

    def _cl_base(self, offset: int) -> int:
        f = self.mfq.find(offset)
        return f.file_from_offset if f else 0

    def _check_at(self, offset: int):
        f = self.mfq.find(offset)
        if f is None:
            return None
        buf = f.buffer()
        pos = offset - f.file_from_offset
        if pos + 8 > len(buf):
            return None
        return check_message(buf, pos, len(buf), f.file_from_offset)

    def _no_file_reason(self, offset: int) -> str:
        f = self.mfq.find(offset)
        if f is None:
            return "no commit-log file holds it"
        return f"it lies past the end of the truncated file {f.name}"

    #: How many missing-unit elements are kept exactly before only runs are (32 B each).
    MISSING_CAP = 2_000_000

    def _add_missing(self, t: int, L: np.ndarray, off: np.ndarray, ts: np.ndarray) -> None:
        """Record messages of tq ``t`` that have no unit: as runs always, and as elements
        while under ``MISSING_CAP`` (then dropped: memory stays bounded by queues)."""
        self._extend_runs(t, L, off, ts)
        if self.missing is None:
            return
        self.missing.append((np.full(L.size, t), L, off, ts))
        self.missing_n += L.size
        if self.MISSING_CAP is not None and self.missing_n > self.MISSING_CAP:
            self.missing = None

    def _extend_runs(self, t: int, L: np.ndarray, off: np.ndarray, ts: np.ndarray) -> None:
        """Runs of consecutive queue offsets with one lateness (store time after the
        checkpoint's logicsMsgTimestamp) on one side of the tq's reset so far. Queue offsets
        are checked before units in each block, so the last reset (which decides
        cq.superseded at the end) is known here: no run straddles it."""
        cp = self.checkpoint
        late = ts > (cp.logics_msg_timestamp if cp is not None else 0)
        mark = self.tq_reset.get(t, -1)
        pre = off < mark
        cut = np.flatnonzero((L[1:] != L[:-1] + 1) | (late[1:] != late[:-1]) | (pre[1:] != pre[:-1])) + 1
        runs = self.missing_runs.setdefault(t, [])
        for a, b in zip(np.r_[0, cut].tolist(), np.r_[cut, L.size].tolist()):
            lo, hi, lt = int(L[a]), int(L[b - 1]), bool(late[a])
            if a == 0 and runs:
                r = runs[-1]
                if r[1] + 1 == lo and r[3] == lt and r[4] == mark and (r[2] < mark) == bool(pre[0]):
                    r[1] = hi
                    continue
            self.missing_seq += 1
            runs.append([lo, hi, int(off[a]), lt, mark, self.missing_seq])

    def _missing_groups(self):
        """(kind, tq, first L, last L, first physical offset, count) per reported range, kind
        0 missing, 1 not dispatched yet, 2 superseded; ordered by kind, tq, queue offset.
        From the exact elements when kept; else from the runs, which give the same ranges
        unless one queue has the same queue offset missing twice in one kind (a damaged
        store past MISSING_CAP messages): then overlapping runs are reported apart."""
        cp = self.checkpoint
        limit_ts = cp.logics_msg_timestamp if cp is not None else 0
        reset_at = np.array([self.tq_reset.get(x, -1) for x in range(len(self.tq_list))], np.int64)
        if self.missing is None:
            yield from self._missing_groups_from_runs(reset_at)
            return
        if not self.missing:
            return
        t = np.concatenate([m[0] for m in self.missing])
        L = np.concatenate([m[1] for m in self.missing])
        off = np.concatenate([m[2] for m in self.missing])
        ts = np.concatenate([m[3] for m in self.missing])
        kind = np.where(off < reset_at[t], 2, (ts > limit_ts).astype(np.int64))
        for is_late in (0, 1, 2):
            sel = np.flatnonzero(kind == is_late)
            if not sel.size:
                continue
            o = sel[np.lexsort((L[sel], t[sel]))]
            tt, LL = t[o], L[o]
            brk = np.flatnonzero(np.r_[True, (tt[1:] != tt[:-1]) | (LL[1:] != LL[:-1] + 1), True])
            for a, b in zip(brk[:-1].tolist(), brk[1:].tolist()):
                yield is_late, int(tt[a]), int(LL[a]), int(LL[b - 1]), int(off[o[a]]), b - a

    def _missing_groups_from_runs(self, reset_at: np.ndarray):
        runs = [(2 if r[2] < reset_at[t] else int(r[3]), t, r[0], r[5], r[1], r[2])
                for t, rs in self.missing_runs.items() for r in rs]
        runs.sort()
        cur = None
        for kind, t, lo, _, hi, first in runs:
            if cur is not None and cur[0] == kind and cur[1] == t and lo == cur[3] + 1:
                cur[3] = hi
                cur[5] += hi - lo + 1
                continue
            if cur is not None:
                yield tuple(cur)
            cur = [kind, t, lo, hi, first, hi - lo + 1]
        if cur is not None:
            yield tuple(cur)

    def _finish_queues(self) -> None:
        for is_late, ti, lo, hi, first_off, count in self._missing_groups():  # missing units, in runs
            tid, qid = self.tq_list[ti]
            topic = self.topic_names[tid].decode("utf-8", "backslashreplace")
            mq = self.tq_queue[ti]
            if mq is not None:
                file, fo = mq.file_of(lo)
            else:
                file = self.rel(self.config.consumequeue_dir / topic / str(qid))
                fo = None
            rng = f"unit {lo}" if lo == hi else f"units {lo}..{hi}"
            if is_late == 2:
                self._add("cq.superseded", file, fo, f"{topic}/{qid}: {rng} ({count} messages from offset "
                          f"{first_off}) have no unit: their queue offsets were used again after a restart "
                          "(§2.6), and the queue holds the newer messages", topic=topic, queue_id=qid,
                          physical_offset=first_off, count=count)
            elif is_late:
                self._add("cq.not-dispatched", file, fo, f"{topic}/{qid}: {rng} ({count} messages from "
                          f"offset {first_off}) not written yet; newer than the checkpoint's "
                          "logicsMsgTimestamp, the broker dispatches them at start",
                          topic=topic, queue_id=qid, physical_offset=first_off, count=count)
            else:
                where = "its queue directory is missing" if mq is None else (
                    "below the queue's first file" if lo < mq.base else
                    "in a missing file" if not mq.has_file(lo) else
                    "after the queue's end")
                self._add("cq.missing-unit", file, fo, f"{topic}/{qid}: {rng} missing ({count} messages "
                          f"from offset {first_off}; {where}); repair: "
                          + self.repair_command("--only", "cq", "--topic", topic), topic=topic, queue_id=qid,
                          physical_offset=first_off, count=count)
        # units no message accounted for
        cl_min = self.cl_min
        for mq in self.queues.values():
            n = mq.end - mq.base
            if n <= 0:
                self._cq_tail(mq)
                continue
            pre = expired = 0
            for a in range(0, n, UNIT_CHUNK):  # the units no message accounted for, a chunk at a time
                un = mq.matched.unmarked(a, min(n, a + UNIT_CHUNK))
                if not un.size:
                    continue
                L = un + mq.base
                found, off, size, tags = mq.units_at(L)
                is_pre = (off == 0) & (size == PRE_BLANK_SIZE) & (tags == 0)
                pre += int(is_pre.sum())
                is_exp = ~is_pre & (off < cl_min) & (off >= 0)
                expired += int(is_exp.sum())
                rest = np.flatnonzero(found & ~is_pre & ~is_exp)
                for j in rest.tolist():
                    why = self._why_not_message(int(off[j]), mq, int(L[j]))
                    if why is None:  # an LMQ unit written by multi-dispatch (§4.3)
                        continue
                    f, o = mq.file_of(int(L[j]))
                    self._add("cq.unit-target", f, o, f"unit {int(L[j])} -> {int(off[j])} ({int(size[j])} bytes): "
                              + why, topic=mq.topic, queue_id=mq.qid, physical_offset=int(off[j]))
            if pre:
                f, o = mq.file_of(mq.base)
                self._add("cq.pre-blank", f, o, f"{mq.topic}/{mq.qid}: {pre} pre-blank units below the first unit",
                          topic=mq.topic, queue_id=mq.qid, count=pre)
            if expired:
                f, o = mq.file_of(mq.base)
                self._add("cq.expired", f, o, f"{mq.topic}/{mq.qid}: {expired} units point below the commit log's "
                          f"first offset {cl_min}", topic=mq.topic, queue_id=mq.qid, count=expired)
            self._cq_tail(mq)

    def _why_not_message(self, off: int, mq: QueueState, logical: int) -> str | None:
        """Why unit ``logical`` of ``mq`` (pointing at ``off``) is wrong, or None if it is an LMQ unit."""
        if off < self.cl_min:
            return "below the commit log"
        if off >= self.cl_end:
            return f"beyond the end of the commit log's data ({self.cl_end})"
        c = self._check_at(off)
        if c is None:
            return self._no_file_reason(off)
        if c.status is not Status.VALID or c.message is None:
            return f"no readable message starts there ({c.reason or c.status.value})"
        m = c.message
        if m.topic_bytes != mq.topic.encode("utf-8", "surrogateescape") or m.queue_id != mq.qid:
            queues = (m.properties.get("INNER_MULTI_DISPATCH") or "").split(",")
            offsets = (m.properties.get("INNER_MULTI_QUEUE_OFFSET") or "").split(",")
            if mq.topic in queues and len(queues) == len(offsets) and \
                    offsets[queues.index(mq.topic)] == str(logical) and m.physical_offset == off:
                return None
            return f"the message there belongs to {m.topic}/{m.queue_id}"
        if m.physical_offset != off:
            return f"the record there has PHYSICALOFFSET {m.physical_offset}"
        return f"the message there has queue offset {m.queue_offset}"

    def _cq_tail(self, mq: QueueState) -> None:
        b = mq.cq.file_base(mq.end)
        path = mq.cq.file_path(b)
        if path is None:
            return
        name = self.rel(path)
        raw = mq.cq.file_units(b).view(np.uint8)
        at = first_nonzero(path, raw, (mq.end - b) * CQ_STORE_UNIT_SIZE)
        if at is not None:
            self._add("cq.tail", name, at // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE,
                      f"{mq.topic}/{mq.qid}: non-zero bytes after the queue's end at unit {mq.end}",
                      topic=mq.topic, queue_id=mq.qid)

    # -------------------------------------------------------- index vs messages
    def _check_index_batch(self, absP, total, keys: IndexKeys, base, rel) -> None:
        lo, hi = int(absP[0]), int(absP[-1] + total[-1])
        hashes = keys.hash
        own = keys.owner
        pair = (absP[own] - lo) * (1 << 31) + hashes if own.size else np.zeros(0, np.int64)
        pair_sorted = np.sort(pair)
        entry_pairs = []
        for f in self.index_active:
            if f.end_phy < lo and f.begin_phy < lo and f.phy_max < lo:
                continue
            sel, ephy, eh = f.entries_in(lo, hi)
            if not sel.size:
                continue
            f.checked[sel] = True
            j = np.searchsorted(absP, ephy)
            is_start = (j < absP.size) & (absP[np.minimum(j, absP.size - 1)] == ephy)
            ep = (ephy - lo) * (1 << 31) + eh
            entry_pairs.append(ep[is_start])
            for k in np.flatnonzero(~is_start).tolist():
                e = int(sel[k])
                self._add("index.entry-target", f.rel, f.entry_offset(e), f"entry {e + 1} -> {int(ephy[k])}: no "
                          "message starts there", physical_offset=int(ephy[k]))
            ok = np.flatnonzero(is_start)
            if ok.size:
                bad = ok[~_member(ep[ok], pair_sorted)]
                for k in bad.tolist():
                    e = int(sel[k])
                    m = int(j[k])
                    mine = [keys.text(x) for x in np.flatnonzero(own == m).tolist()]
                    self._add("index.entry-hash", f.rel, f.entry_offset(e),
                              f"entry {e + 1} -> {int(ephy[k])}: hash {int(eh[k])} is none of the message's keys "
                              f"{mine[:5]}", physical_offset=int(ephy[k]))
        if self.opt.deep and own.size:
            upto = own[absP[own] <= self.index_end]
            if upto.size:
                allp = np.concatenate(entry_pairs) if entry_pairs else np.zeros(0, np.int64)
                cand = np.flatnonzero(absP[own] <= self.index_end)
                missing = cand[~_member(pair[cand], np.sort(allp))]
                for x in missing.tolist():
                    m = int(own[x])
                    self._add("index.missing-key", rel, int(absP[m]) - base,
                              f"key {keys.text(x)!r} (hash {int(hashes[x])}) of the "
                              f"message at {int(absP[m])} is in no index file", physical_offset=int(absP[m]))

    def _finish_index(self) -> None:
        """The entries no record accounted for, a chunk of the file at a time (two passes
        when some are neither expired nor beyond the end: the counts come first)."""
        for f in self.index_files:
            if not f.entry_count:
                continue
            below_n = beyond_n = rest_n = 0
            below_at = beyond_at = beyond_phy = None
            for _, un, phy in f.unchecked():
                below = phy < self.cl_min
                beyond = phy >= self.cl_end
                if below.any():
                    below_at = int(un[below][0]) if below_at is None else below_at
                    below_n += int(below.sum())
                if beyond.any():
                    if beyond_at is None:
                        beyond_at, beyond_phy = int(un[beyond][0]), int(phy[beyond][0])
                    beyond_n += int(beyond.sum())
                rest_n += int((~below & ~beyond).sum())
            if below_n:
                self._add("index.expired", f.rel, f.entry_offset(below_at),
                          f"{below_n} entries point below the commit log's first offset {self.cl_min}",
                          count=below_n)
            if beyond_n:
                self._add("index.beyond-end", f.rel, f.entry_offset(beyond_at),
                          f"{beyond_n} entries point at or beyond the end of the commit log's data "
                          f"({self.cl_end}), e.g. {beyond_phy}", count=beyond_n)
            for _, un, phy in (f.unchecked() if rest_n else ()):
                rest = np.flatnonzero((phy >= self.cl_min) & (phy < self.cl_end))
                for e, off in zip(un[rest].tolist(), phy[rest].tolist()):
                    c = self._check_at(off)
                    why = self._no_file_reason(off) if c is None else "it lies in unreadable bytes"
                    self._add("index.entry-target", f.rel, f.entry_offset(e), f"entry {e + 1} -> {off}: {why}",
                              physical_offset=off)
            self._index_header_times(f)

    def _index_header_times(self, f: IndexScan) -> None:
        """endTimestamp is the store time of the last entry's message; beginTimestamp the first's."""
        for which, e, stored, hoff in (("end", f.entry_count - 1, f.end_ts, 8), ("begin", 0, f.begin_ts, 0)):
            c = self._check_at(f.entry_phy(e))
            if c is None or c.message is None or c.status is not Status.VALID:
                continue
            if c.message.store_timestamp != stored:
                self._add("index.header", f.rel, hoff, f"{which}Timestamp {stored}, but entry {e + 1}'s message "
                          f"has store time {c.message.store_timestamp}")

    def repair_command(self, *args: str) -> str:
        """The rebuild-index command line that repairs a finding, for its detail: with the sizes
        this check was given (broker.conf or options), so the repair writes files of the store's
        geometry instead of the broker defaults (a lost index/ leaves nothing to infer from)."""
        import shlex

        cfg = self.config
        sizes = [f"{opt} {getattr(cfg, attr)}" for attr, opt in _SIZE_OPTIONS if attr in cfg.explicit]
        return " ".join(["rmqstore rebuild-index --store", shlex.quote(str(self.root)), *sizes, "--in-place",
                         *map(shlex.quote, args)])

    def _check_index_missing(self) -> None:
        """``messageIndexEnable`` (the default) with keys in the log but no entry in any index
        file: the index was lost (or never built); the broker does not rebuild it by itself."""
        if self.first_indexable is None:
            return
        d = self.config.index_dir
        state = ("is missing" if not d.exists() else "holds no index file" if not self.index_files
                 else "holds no index entry")
        self._add("index.missing", self.rel(d), None,
                  f"index/ {state}, but messageIndexEnable=true and messages carry keys (the first at offset "
                  f"{self.first_indexable}): every index-lookup finds nothing; repair: "
                  + self.repair_command("--only", "index"), physical_offset=self.first_indexable)

    # -------------------------------------------------------- checkpoint, abort, recovery
    def _check_checkpoint(self) -> None:
        cp = self.checkpoint
        if cp is None or self.messages == 0:
            return
        top = self.max_store_ts
        for name, v, off in (("physicMsgTimestamp", cp.physic_msg_timestamp, 0),
                             ("logicsMsgTimestamp", cp.logics_msg_timestamp, 8),
                             ("indexMsgTimestamp", cp.index_msg_timestamp, 16)):
            if v > top:
                self._add("checkpoint.ahead", "checkpoint", off, f"{name} {v} is newer than the newest message "
                          f"({top}): {v - top} ms of flushed data are missing")

    def _check_recovery(self) -> None:
        """Which recovery the broker runs next (§8) and what it would truncate."""
        files = self.mfq.files
        if not files:
            return
        cp = self.checkpoint or StoreCheckpoint()
        if self.abort:
            start = None
            for f in reversed(files):
                pos = self.first_records.get(f.file_from_offset)
                if pos != 0:
                    continue
                c = self._check_at(f.file_from_offset)
                if c is None or c.message is None:
                    continue
                ts = c.message.store_timestamp
                if ts != 0 and ts <= cp.min_timestamp:
                    start = f
                    break
            start = start or files[0]
            kind = "abnormal"
        else:
            start = files[max(0, len(files) - 3)]
            kind = "normal"
        stops = sorted(s for s in self.stops if s[0] >= start.file_from_offset)
        cut = stops[0] if stops else None
        process = cut[0] if cut else self.cl_end
        later = [f.name for f in files if f.file_from_offset > process]
        if cut is not None and (process < self.cl_end or later):
            off = process - self._cl_base(process)
            self._add("recovery.truncate", cut[2], off,
                      f"{kind} recovery (from file {start.name}) stops at {process} ({cut[1]}): the broker would "
                      f"truncate the commit log there" + (f", delete {len(later)} later file(s)" if later else "")
                      + f" and drop consume-queue units from {process} on; {max(0, self.cl_end - process)} bytes "
                      "of data after it would be lost", physical_offset=process)
        if self.abort:
            idx_del = [f.name for f in self.index_files if f.end_ts > cp.index_msg_timestamp]
            self._add("abort.unclean-shutdown", "abort", None,
                      f"the last shutdown was not clean: abnormal recovery from file {start.name} "
                      f"(first record's store time <= checkpoint min time {cp.min_timestamp}), re-dispatching every "
                      f"message from {start.file_from_offset}; the log would end at {process}"
                      + ("" if process >= self.cl_end else f" (cutting {self.cl_end - process} bytes)")
                      + f"; index files newer than indexMsgTimestamp {cp.index_msg_timestamp} deleted: "
                      + (", ".join(idx_del) if idx_del else "none"),
                      recovery_start=start.file_from_offset, truncate_at=process, index_deleted=idx_del)


_PREFIX_UNPACK = struct.Struct(fixed_fields_format(RecordPrefix)).unpack_from
#: StoreConfig sizes and the rebuild-index options that set them (for repair commands).
_SIZE_OPTIONS = (("mapped_file_size_commit_log", "--commitlog-file-size"),
                 ("mapped_file_size_consume_queue", "--cq-file-size"),
                 ("max_hash_slot_num", "--index-slots"), ("max_index_num", "--index-max"))


def open_for_verify(config: StoreConfig) -> StoreConfig:
    """Refuse what is not a store (exit 3), as every command does (``MessageStore.open``);
    sizes are inferred later, tolerantly (:meth:`Verifier._infer_sizes`)."""
    from rmqstore_cli.store.message_store import MessageStore

    return MessageStore.open(config, infer_sizes=False).config
