"""The commit-log walk: files, records, resynchronisation after damage
(docs/format/commitlog.md#reading-a-commit-log-file).

Each file is walked record by record (TOTALSIZE and MAGICCODE only), a batch of records at
a time handed to :meth:`RecordChecks.check_batch`; damage does not stop the walk: after a
bad record it resynchronises on the next plausible record (valid magic, sane TOTALSIZE,
PHYSICALOFFSET equal to its position) and reports the unreadable byte range.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from rmqstore_cli.formats.commitlog import (
    END_FILE_MIN_BLANK_LENGTH,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    MessageHead,
    RecordPrefix,
)
from rmqstore_cli.formats.derive import field_offset, fixed_fields_format
from rmqstore_cli.formats.dledger import BLANK_MAGIC_BYTES, BLANK_PREFIX_SIZE, ENTRY_MAGIC

from rmqstore_cli.store.checks.findings import Finding
from rmqstore_cli.store.commitlog import Status, check_framed, check_message
from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.commitlog.dledger import blank_size, header_of, read_entry
from rmqstore_cli.store.files.arrays import file_array
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.files.mapped_files import MappedFileQueue, release_pages
from rmqstore_cli.store.verify import limits
from rmqstore_cli.store.verify.checks import first_nonzero

PREFIX_UNPACK = struct.Struct(fixed_fields_format(RecordPrefix)).unpack_from
POS_PHY = field_offset(MessageHead, "physical_offset")
PHY_LEN = field_offset(MessageHead, "sys_flag") - POS_PHY
#: The shortest record: empty body, topic and properties, IPv4 hosts, V1 (1-byte topic length).
MIN_RECORD = MIN_RECORD_SIZE
#: TOTALSIZE and MAGICCODE: what every walk reads first.
PREFIX_SIZE = RecordPrefix.sizeof()
_MAGIC_AT = field_offset(RecordPrefix, "magic")
MAGIC_BYTES = [m.to_bytes(PREFIX_SIZE - _MAGIC_AT, "big") for m in (MAGIC_V1, MAGIC_V2, MAGIC_BLANK)]


@dataclass(frozen=True)
class Span:
    """A part of one commit-log file's walk, so that several processes can check one file:
    the walk's state where a batch starts (its position and the ``walked`` records and bytes
    that size the next batches, :func:`batch_cap`) and where the part ends, the next part's
    start (None: the file's end). A part started at a state the whole walk reaches checks
    the same batches as the whole walk; the part says where it stopped
    (:meth:`CommitLogScan.scan_file_at`), so whether it joined up with the next is known."""

    start: int = 0
    walked: tuple[int, int] = (0, 0)
    stop: int | None = None

    def holds(self, pos: int | None) -> bool:
        """Whether the walk at ``pos`` (None: the file is done) is still inside the part."""
        return pos is not None and (self.stop is None or pos < self.stop)


WHOLE = Span()


def batch_cap(walked: tuple[int, int] | list[int]) -> int:
    """Records the next batch walks: 64 first (a probe), then about ``limits.BATCH_BYTES``
    of records at the mean size walked so far, at most ``limits.BATCH``."""
    if not walked[0]:
        return 64
    return max(64, min(limits.BATCH, limits.BATCH_BYTES * walked[0] // max(walked[1], 1)))


class CommitLogScan:
    """The commit-log part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def scan_commitlog(self) -> Iterator[Finding]:
        """:meth:`open_commitlog`, then every file (:meth:`scan_file_at`), findings as they come."""
        self.open_commitlog()
        files = self.mfq.files
        for i in range(len(files)):
            self.scan_file_at(i)
            if self.retire_index_files and i + 1 < len(files):  # later files hold only higher offsets
                self._retire_index_files(files[i + 1].file_from_offset)
            yield from self._drain()
        try:
            self.mfq.close()
        except BufferError:  # a view still alive (e.g. held by a caller); the GC unmaps it
            pass

    def open_commitlog(self) -> None:
        """The commit-log files (names, what is not a regular file) and the scan's state."""
        cfg = self.config
        files = self._load_commitlog_files()
        self.cl_min = files[0].file_from_offset if files else 0
        self.cl_end = self.cl_min
        self.delay_table = cfg.delay_level_table
        self.topic_ids: dict[bytes, int] = {}
        self.topic_names: list[bytes] = []
        self.tq_ids: dict[tuple[int, int], int] = {}
        self.tq_list: list[tuple[int, int]] = []
        self.tq_queue: list = []  # the QueueState per tq, or None
        self.tq_last: list[int | None] = []  # next expected queue offset per tq
        self.tq_reset: dict[int, int] = {}  # tq -> last physical offset where its queue offsets restarted
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
        self.max_store_ts = 0
        self.ranges: list[tuple[int, int]] = []  # readable [start, end) physical ranges with records
        self.first_records: dict[int, tuple[int, int] | None] = {}
        self._open_index_state()

    def _load_commitlog_files(self) -> list:
        """The commit-log files as :attr:`mfq`: names that are not offsets and entries that are
        not regular files are findings, the latter skipped (a gap follows them)."""
        cfg = self.config
        mfq = MappedFileQueue(cfg.commitlog_dirs, cfg.mapped_file_size_commit_log)
        self.mfq = mfq
        self.files["commitlog"] = len(mfq.files)
        for s in mfq.strays:
            self._add("commitlog.file-name", self.rel(s), None, "not a 20-digit offset: the broker cannot load it")
        for p in mfq.not_regular:
            self.not_regular(p)
        mfq.files = [f for f in mfq.files if not self.not_regular(f.path)]  # skipped: a gap follows
        return mfq.files

    def _open_index_state(self) -> None:
        """What the scan needs of the index files: those with entries (checked as records
        pass), whether keys are wanted at all, and whether to look for the first key
        (``index.missing``: no index entry at all)."""
        cfg = self.config
        self.index_active = [f for f in self.index_files if f.entry_count]
        do_index = bool(self.index_active) or self.opt.deep
        self.want_keys = cfg.message_index_enable and do_index
        self.index_empty = cfg.message_index_enable and not self.index_active
        self.first_indexable: int | None = None

    def queue_key(self, t: int) -> tuple[bytes, int]:
        """(topic, queue id) of the scan's queue number ``t``."""
        tn, q = self.tq_list[t]
        return (self.topic_names[tn], q)

    def kernel(self):
        """:mod:`kernels`' C loops (walk, body CRCs, joins), or None for the reference loops
        (the choice is :meth:`FastPaths.kernels`')."""
        return FAST_PATHS.kernels()

    def _retire_index_files(self, upto: int) -> None:
        """Index files all of whose entries point below ``upto`` can meet no later record."""
        for f in self.index_active:
            if f.phy_max < upto:
                f.ensure_loaded()
                f.retire()
        self.index_active = [f for f in self.index_active if not getattr(f, "retired", False)]

    def scan_file_at(self, i: int, span: Span = WHOLE) -> tuple[int, tuple[int, int]] | None:
        """Check commit-log file number ``i`` of ``self.mfq`` (name, size, gap to the previous
        file, every record); the pipeline runs this as one task per file, or per ``span`` of
        a file (the file's own checks with the first, its end with the last). Returns where
        the walk stopped, (position, walked) at or past ``span.stop``, or None: the file is done."""
        files = self.mfq.files
        f = files[i]
        rel = self.rel(f.path)
        length = f.path.stat().st_size
        if span.start == 0:
            self._check_file(i, f, rel, length)
        last = i == len(files) - 1
        if last:
            self.cl_end = None  # set where the file's data ends (below)
        end = self._scan_file(f, rel, last, span)
        if last and self.cl_end is None and span.start == 0:  # the file ends in bytes no record could be read
            self.cl_end = self._valid_end(f.file_from_offset)  # from (a later part's caller joins its ends up)
        if self.progress:
            self.progress(min(length, self.config.mapped_file_size_commit_log))
        return end

    def _check_file(self, i: int, f, rel: str, length: int) -> None:
        """The file's name, its place after the previous file, its size."""
        size = self.config.mapped_file_size_commit_log
        if f.file_from_offset % size:
            self._add(
                "commitlog.file-name",
                rel,
                None,
                f"start {f.file_from_offset} is not a multiple of the file size {size}",
            )
        if i:
            self._check_file_follows(self.mfq.files[i - 1].end_offset, f, rel)
        if length != size:
            self._add(
                "commitlog.file-size",
                rel,
                None,
                f"{length} bytes, expected {size}"
                + (" (truncated)" if length < size else "")
                + self._pad_advice(f, length),
            )

    def _check_file_follows(self, a: int, f, rel: str) -> None:
        """A file starts where the previous one ends (``a``): a gap is a missing file (recovery
        stops there), an overlap a misnamed file."""
        b = f.file_from_offset
        if b == a:
            return
        if b < a:
            self._add("commitlog.file-name", rel, 0, f"overlaps the previous file (ends at {a})")
            return
        self._add(
            "commitlog.gap",
            rel,
            0,
            f"no file holds offsets {a}..{b - 1} ({b - a} bytes; "
            f"file {a:020d} is missing, e.g. expired or deleted out of order)",
            physical_offset=a,
            missing_file=f"{a:020d}",
        )
        self.stops.append((a, "commitlog.gap", rel))

    def _pad_advice(self, f, length: int) -> str:
        """The repair that gives a commit-log file the length the broker loads, keeping its good
        records (``store/write/repair.py``): for a file cut short, or longer with only zeros beyond
        the size; "" where padding cannot be exact (a DLedger data file, data beyond the size)."""
        from rmqstore_cli.store.write.repair import pad_command

        size = self.config.mapped_file_size_commit_log
        if header_of(self.config, f):
            return ""
        if length > size and first_nonzero(f.path, file_array(f.buffer()), size) is not None:
            return (
                "; data lies beyond the size: the file was written with another mappedFileSizeCommitLog "
                "(give the broker that size)"
            )
        return "; repair (keeps every good record): " + pad_command(self.root, size, f.path)

    def _valid_end(self, base: int) -> int:
        """The end of the last valid record read at or above ``base``: where a torn last file's
        data ends. For a log cut inside its last record this is ``CommitLog#recoverNormally``'s
        ``processOffset`` (it keeps the records before the first one ``checkMessageAndReturnSize``
        rejects); damage earlier in the file is reported as ``recovery.truncate`` besides."""
        return max((e for s, e in self.ranges if s >= base), default=base)

    def _scan_file(self, f, rel: str, last: bool, span: Span = WHOLE) -> tuple[int, tuple[int, int]] | None:
        """Walk one file (its ``span``) a batch of records at a time, each batch checked as it
        comes; where the walk stopped (:meth:`scan_file_at`)."""
        buf = f.buffer()
        limit = len(buf)
        base = f.file_from_offset
        arr = file_array(buf)
        pos = span.start
        first_rec = None
        self.header = header_of(self.config, f)  # a DLedger data file: records inside 48-byte entries
        self.file_base = base
        walked = list(span.walked)  # records, bytes: batches of about limits.BATCH_BYTES after a first probe
        released = span.start
        while span.holds(pos):
            if pos - released >= limits.RELEASE_EVERY:  # memory stays flat however big the store
                released = release_pages(buf, released, pos)
            # walk: TOTALSIZE and MAGICCODE only (batch.walk_records, shared with rebuild-index)
            positions, nxt, kind = walk_records(buf, pos, limit, batch_cap(walked), MIN_RECORD, arr, header=self.header)
            walked[0] += positions.size
            walked[1] += nxt - pos
            pos = nxt
            if positions.size:
                if first_rec is None:
                    first_rec = int(positions[0])
                bad = self.check_batch(buf, arr, positions, base, rel, limit)
                if bad is not None:  # a structural failure inside the batch: resync after it
                    pos = self._resync(buf, limit, base, rel, *bad)
                    continue
            if kind is not None:
                pos = self._walk_stopped(f, buf, arr, kind, pos, rel, last)
        if span.start == 0:
            self.first_records[base] = first_rec
        del arr
        try:
            f.close()  # later look-ups map it again
        except BufferError:
            pass
        return None if pos is None else (pos, (walked[0], walked[1]))

    def batch_starts(self, f, upto: int | None = None) -> tuple[list[Span], int]:
        """Where :meth:`_scan_file`'s batches start in file ``f`` (each a :class:`Span` to the
        file's end) while the walk meets records only, up to the first at or past ``upto``,
        and where that walk ends: the walk alone (TOTALSIZE and MAGICCODE), no check, up to
        the first position that is not a record. A check that rejects a record makes the
        scan resynchronise elsewhere: a part started at a later one of these then does not
        join up with the part before it, which says so."""
        buf = f.buffer()
        arr = file_array(buf)
        header = header_of(self.config, f)
        pos, walked, released, out = 0, [0, 0], 0, []
        while True:
            if pos - released >= limits.RELEASE_EVERY:
                released = release_pages(buf, released, pos)
            out.append(Span(pos, (walked[0], walked[1])))
            if upto is not None and pos >= upto:
                break
            positions, nxt, kind = walk_records(buf, pos, len(buf), batch_cap(walked), MIN_RECORD, arr, header=header)
            walked[0] += positions.size
            walked[1] += nxt - pos
            pos = nxt
            if kind is not None:
                break
        del arr
        try:
            f.close()
        except BufferError:
            pass
        return out, pos

    def _walk_stopped(self, f, buf, arr: np.ndarray, kind: str, pos: int, rel: str, last: bool) -> int | None:
        """Report what the walk met at ``pos`` instead of a record (``kind``: blank, eof,
        short, zero or bad); the position the walk resumes at, or None: the file is done."""
        if kind == "blank":
            return self._blank_stop(f, buf, arr, pos, rel, last)
        if kind == "eof" or kind == "short":
            return self._end_stop(f, buf, kind == "short", pos, rel, last)
        if kind == "zero":
            return self._zeros(f, buf, arr, pos, rel, last)
        # kind == "bad": magic or size unusable at pos
        limit = len(buf)
        return self._resync(buf, limit, f.file_from_offset, rel, pos, *self._classify_bad(buf, pos, limit))

    def _blank_stop(self, f, buf, arr: np.ndarray, pos: int, rel: str, last: bool) -> None:
        """A BLANK ends the file's data (``CommitLog#checkMessageAndReturnSize``: BLANK_MAGIC_CODE);
        its size field must be the bytes left, and only zeros follow it."""
        base, size = f.file_from_offset, self.config.mapped_file_size_commit_log
        total = blank_size(buf, pos) if self.header else PREFIX_UNPACK(buf, pos)[0]
        if total != size - pos:
            self._add(
                "commitlog.blank",
                rel,
                pos,
                f"BLANK size field {total}, but {len(buf) - pos} bytes remain to the file's end",
                physical_offset=base + pos,
            )
        self._check_tail(f.path, arr, pos + END_FILE_MIN_BLANK_LENGTH, rel, base, "the BLANK record")
        if last:
            self.cl_end = base + size

    def _end_stop(self, f, buf, short: bool, pos: int, rel: str, last: bool) -> None:
        """The file ends where a record must start: too few bytes for a header (recovery
        stops), or, in a file before the last (or one cut short), without its BLANK."""
        limit, base, size = len(buf), f.file_from_offset, self.config.mapped_file_size_commit_log
        if short:
            self._add(
                "commitlog.truncated",
                rel,
                pos,
                f"{limit - pos} bytes left, too few for a record header",
                physical_offset=base + pos,
            )
            self.stops.append((base + pos, "commitlog.truncated", rel))
        elif not last or limit < size:
            self._add("commitlog.blank", rel, pos, "the file ends without a BLANK record", physical_offset=base + pos)
        if last:
            self.cl_end = base + pos

    def _zeros(self, f, buf, arr: np.ndarray, pos: int, rel: str, last: bool) -> int | None:
        """Zero bytes where a record must start: a hole inside the data (records resume
        after it: where), or the end of the data."""
        base = f.file_from_offset
        nz = first_nonzero(f.path, arr, pos)
        nxt = None if nz is None else self._find_next(buf, max(pos, nz - PREFIX_SIZE), len(buf), base)
        if nxt is not None:  # zeros, then records again: a hole inside the data
            self._add(
                "commitlog.magic",
                rel,
                pos,
                f"a run of zero bytes inside the data; records resume at {base + nxt} ({nxt - pos} bytes unreadable)",
                physical_offset=base + pos,
                end_offset=nxt,
            )
            self.stops.append((base + pos, "commitlog.magic", rel))
            return nxt
        if last:
            self.cl_end = base + pos
        else:
            self._add(
                "commitlog.blank",
                rel,
                pos,
                "data ends without a BLANK record in a file that is not "
                "the last: recovery stops here and deletes the later files"
                + (self._pad_advice(f, len(buf)) if nz is None else ""),
                physical_offset=base + pos,
            )
            self.stops.append((base + pos, "commitlog.blank", rel))
        if nz is not None:
            self._add(
                "commitlog.tail",
                rel,
                nz,
                f"non-zero bytes after the end of data (from {base + nz}): "
                "stale data after a truncation, or a lost end of log",
                physical_offset=base + nz,
            )
        return None

    def _check_tail(self, path, arr: np.ndarray, start: int, rel: str, base: int, what: str) -> None:
        if start >= arr.size:
            return
        at = first_nonzero(path, arr, start)
        if at is not None:
            self._add(
                "commitlog.tail",
                rel,
                at,
                f"non-zero bytes after {what} (from {base + at}): stale data after a truncation, or a lost end of log",
                physical_offset=base + at,
            )

    def _classify_bad(self, buf, pos: int, limit: int) -> tuple[str, str]:
        if self.header:  # the entry (DLedgerMmapFileStore#recover's checks) or the record in it
            return "dledger.entry", check_framed(
                buf, pos, limit, self.file_base, self.header
            ).reason or "unreadable entry"
        total, magic = PREFIX_UNPACK(buf, pos) if pos + PREFIX_SIZE <= limit else (0, 0)
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
        msg = f"{end - bad} bytes unreadable, " + (
            f"scan resumed at {base + nxt}" if nxt is not None else "no further record in this file"
        )
        self._add(check, rel, bad, f"{why}; {msg}", physical_offset=base + bad, end_offset=base + end)
        self.stops.append((base + bad, check, rel))
        return nxt

    def _find_next(self, buf, start: int, limit: int, base: int) -> int | None:
        """Next position >= start where a record plausibly starts: V1/V2 magic, sane size and
        PHYSICALOFFSET equal to the position (or a fully valid record), or a right-sized BLANK.
        Never below ``start`` (every resync moves forward, so a file is walked in at most
        its size of steps); in a DLedger data file, :meth:`_find_next_entry`."""
        if self.header:
            return self._find_next_entry(buf, start, limit, base)
        size = self.config.mapped_file_size_commit_log
        finds = {m: buf.find(m, start + _MAGIC_AT, limit) for m in MAGIC_BYTES}
        while True:
            live = [(i, m) for m, i in finds.items() if i >= 0]
            if not live:
                return None
            i, m = min(live)
            c = i - _MAGIC_AT
            if self._plausible_record(buf, c, m == MAGIC_BYTES[2], limit, base, size):
                return c
            finds[m] = buf.find(m, i + 1, limit)

    @staticmethod
    def _plausible_record(buf, c: int, blank: bool, limit: int, base: int, size: int) -> bool:
        """A record plausibly starts at ``c`` (its magic found there): a BLANK whose size is the
        rest of the file; or a V1/V2 record of a sane size whose PHYSICALOFFSET is its position,
        or that is fully valid and followed by the end of the data, a sane prefix, a BLANK or zeros."""
        total = PREFIX_UNPACK(buf, c)[0]
        if blank:
            return total == size - c
        if not MIN_RECORD <= total <= limit - c:
            return False
        phy = int.from_bytes(buf[c + POS_PHY : c + POS_PHY + PHY_LEN], "big", signed=True)
        if phy == base + c:
            return True
        if check_message(buf, c, limit, base).status is not Status.VALID:
            return False
        nxt = c + total
        if nxt + PREFIX_SIZE > limit:
            return True
        t2, m2 = PREFIX_UNPACK(buf, nxt)
        return (
            m2 in (MAGIC_V1, MAGIC_V2) and MIN_RECORD <= t2 <= limit - nxt or m2 == MAGIC_BLANK or (t2 == 0 and m2 == 0)
        )

    def _find_next_entry(self, buf, start: int, limit: int, base: int) -> int | None:
        """The next DLedger entry start >= ``start``: entry magic 1 (``DLedgerEntryCoder#encode``)
        ``header`` bytes before a valid V1/V2 record, or ``MmapFileList#preAppend``'s blank
        (magic -1, its size the bytes left). Only at or after ``start``: the record inside a
        rejected entry lies after the entry's own start, and resuming there would meet the
        same entry again (the hang of a changed size field, issue 31)."""
        h = self.header
        record_magic = MAGIC_BYTES[:2]
        finds = {m: buf.find(m, start + h + _MAGIC_AT, limit) for m in record_magic}
        finds[BLANK_MAGIC_BYTES] = buf.find(BLANK_MAGIC_BYTES, start, limit)
        while True:
            live = [(i, m) for m, i in finds.items() if i >= 0]
            if not live:
                return None
            i, m = min(live)
            at = self._entry_at(buf, i, m == BLANK_MAGIC_BYTES, limit, base)
            if at is not None:
                return at
            finds[m] = buf.find(m, i + 1, limit)

    def _entry_at(self, buf, i: int, blank: bool, limit: int, base: int) -> int | None:
        """The entry start a magic found at ``i`` stands for, or None: a blank (magic -1) whose
        size is the bytes left; or a valid record ``header`` bytes after an entry magic 1."""
        if blank:
            return i if i + BLANK_PREFIX_SIZE <= limit and blank_size(buf, i) == limit - i else None
        h = self.header
        c = i - _MAGIC_AT
        e = read_entry(buf, c - h)
        if e is not None and e.magic == ENTRY_MAGIC and check_message(buf, c, limit, base).status is Status.VALID:
            return c - h
        return None

    def _cl_base(self, offset: int) -> int:
        f = self.mfq.find(offset)
        return f.file_from_offset if f else 0

    def _check_at(self, offset: int):
        f = self.mfq.find(offset)
        if f is None:
            return None
        buf = f.buffer()
        pos = offset - f.file_from_offset
        if pos + PREFIX_SIZE > len(buf):
            return None
        return check_message(buf, pos, len(buf), f.file_from_offset)

    def _no_file_reason(self, offset: int) -> str:
        f = self.mfq.find(offset)
        if f is None:
            return "no commit-log file holds it"
        return f"it lies past the end of the truncated file {f.name}"
