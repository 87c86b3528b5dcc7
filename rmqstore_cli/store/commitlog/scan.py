"""The walk over the commit-log files in physical order, stopping where recovery stops.

:class:`LogScan` is :meth:`CommitLog.scan_blocks <rmqstore_cli.store.commitlog.CommitLog.scan_blocks>`'s
loop: file after file, record after record (or a block of valid records at once), until the
first invalid record, a gap between files, the end offset asked for or the last file's end.
It leaves on the log where and why it stopped (``end``) and, for forensics, every stop it
went past (``stops``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rmqstore_cli.store.commitlog.record import Blank, Check, Status, check_framed, is_clean_end
from rmqstore_cli.store.files.mapped_files import MappedFile, release_pages

#: Pages already read are released every this many bytes, so a long scan's memory stays flat.
RELEASE_EVERY = 64 << 20
#: The first block's record count: blocks grow, so a short read (--limit 10) decodes little.
FIRST_BLOCK = 64


@dataclass(slots=True)
class ScanEnd:
    """Where and why a scan stopped: the end of the readable log."""

    offset: int
    reason: str
    file: str | None = None
    clean: bool = True


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """What :meth:`CommitLog.scan` was asked for (its docstring says what each means)."""

    end: int | None
    check_crc: bool
    include_blank: bool
    skip_mismatch: bool
    every_file: bool
    blocks: bool


class LogScan:
    """One scan of ``log`` (a ``CommitLog``): its records, and its ``end`` and ``stops`` set on the log."""

    def __init__(self, log, options: ScanOptions):
        self.log = log
        self.opts = options
        self.outcome: str | tuple[str, int] = "file"  # how a part ended (:meth:`part`)
        self.first_block = FIRST_BLOCK
        self.force = log.config.force_verify_prop_crc
        # a whole-record CRC is checked record by record
        self.blocks = options.blocks and not (options.check_crc and self.force)
        if self.blocks:  # numpy is loaded only when blocks are asked for
            from rmqstore_cli.store.commitlog.columns import MAX_BLOCK, valid_block
            from rmqstore_cli.store.records.topics import TopicIds

            self.topic_table = TopicIds()
            self.valid_block = valid_block
            self.max_block = MAX_BLOCK

    def records(self, start: int, walked: list) -> Iterator:
        """Records (and blocks of them) from ``start``; each file's buffer is added to ``walked``."""
        log = self.log
        log.end = None
        log.stops = []
        files = log.queue.files_from(start)
        for i, f in enumerate(files):
            buf = f.buffer()
            walked.append(buf)
            header = log.header_of(f)
            pos = max(0, start - f.file_from_offset)
            if header and pos:  # a record offset names its entry, BODY_OFFSET before it
                pos -= header
            if i > 0 and self._stopped_at_gap(files[i - 1], f):
                return
            if (yield from self._file_records(f, buf, pos, header, i == len(files) - 1)):
                return
        last = files[-1] if files else None
        log.end = ScanEnd(last.end_offset if last else start, "end of the last file", last.name if last else None)

    def part(self, files: list[MappedFile], i: int, pos: int, cut: int | None, walked: list) -> Iterator:
        """The records of ``files[i]`` from ``pos`` to ``cut`` (record starts of that file,
        as bytes into it; None: its end) as :meth:`records` over ``files`` meets them, with the
        ``end`` and ``stops`` it sets there: a part of one walk, walked on its own
        (dump-commitlog --jobs). A DLedger file is not cut (its records start after a header).
        Sets :attr:`outcome`: ``"end"`` when the whole walk ends in the part, ``"file"`` when
        the rest of the file is skipped, else ``("cut", where)``: where the walk went on, the
        cut itself when the walk met it (a record that ran past it: later)."""
        log = self.log
        log.end, log.stops, self.outcome = None, [], "file"
        self.first_block = getattr(self, "max_block", FIRST_BLOCK)  # a part is walked whole: no short first read
        f = files[i]
        if pos == 0 and i > 0 and self._stopped_at_gap(files[i - 1], f):
            self.outcome = "end"
            return
        buf = f.buffer()
        walked.append(buf)
        last = i == len(files) - 1
        if (yield from self._file_records(f, buf, pos, log.header_of(f), last, cut)):
            self.outcome = "end"
        elif last and self.outcome == "file":
            log.end, self.outcome = ScanEnd(f.end_offset, "end of the last file", f.name), "end"
        release_pages(buf, pos, len(buf) if cut is None else cut)  # a process walks parts all over the file

    def _stopped_at_gap(self, prev: MappedFile, f: MappedFile) -> bool:
        """Records never span files, so a missing file ends the log; with ``every_file`` the scan
        notes the gap and goes on. True: the scan ends here."""
        if f.file_from_offset == prev.end_offset:
            return False
        self.log.end = ScanEnd(
            prev.end_offset, f"gap: no file between {prev.end_offset} and {f.file_from_offset}", f.name, clean=False
        )
        self.log.stops.append(self.log.end)
        return not self.opts.every_file

    def _file_records(self, f: MappedFile, buf, pos: int, header: int, last: bool, cut: int | None = None) -> Iterator:
        """The records of one file from ``pos`` (to ``cut``: :meth:`part`); returns True when
        the whole scan ends in it."""
        from rmqstore_cli.store.files.arrays import file_array

        limit = len(buf)
        stop = limit if self.opts.end is None else self.opts.end - f.file_from_offset
        bound = stop if cut is None else min(stop, cut)
        released = pos - pos % RELEASE_EVERY
        arr = file_array(buf) if self.blocks else None
        size = self.first_block
        while True:
            if self._reached_end(f, pos, stop):
                return True
            if cut is not None and pos >= cut:
                self.outcome = ("cut", pos)
                return False
            if pos - released >= RELEASE_EVERY:
                released = release_pages(buf, released, pos)
            blk = self._block_at(f, buf, arr, (pos, bound, cut), size, header)
            if blk is not None:
                yield blk
                pos, size = blk.next_pos, min(size * 2, self.max_block)
                continue
            c = check_framed(buf, pos, limit, f.file_from_offset, header, self.opts.check_crc, self.force)
            if c.status is Status.VALID:
                yield c.message
                pos += c.size
                continue
            if self._skips(c):
                pos += c.size
                continue
            if c.status is Status.BLANK:
                yield from self._blank(f, buf, pos, header)
                release_pages(buf, released, limit)
                return False
            return self._stopped_at(f, buf, pos, c.reason, last)

    def _skips(self, c: Check) -> bool:
        """A size mismatch the caller asked to go past, as the reput service does."""
        return c.status is Status.SIZE_MISMATCH and self.opts.skip_mismatch

    def _reached_end(self, f: MappedFile, pos: int, stop: int) -> bool:
        """At the end offset the caller asked for: the scan ends there."""
        if self.opts.end is None or pos < stop:
            return False
        self.log.end = ScanEnd(f.file_from_offset + pos, "end offset reached", f.name)
        return True

    def _block_at(self, f: MappedFile, buf, arr, at: tuple, size: int, header: int):
        """The run of valid records at ``pos`` as one block (at most ``size`` records, starting
        before ``stop``, ending by ``cut`` if not None: ``at`` is (pos, stop, cut)), or None
        (block path off, or nothing it is sure of: the record is then read alone)."""
        if not self.blocks:
            return None
        pos, stop, cut = at
        return self.valid_block(
            buf, arr, pos, stop, f.file_from_offset, f.name, size, self.opts.check_crc, self.topic_table, header, cut
        )

    def _blank(self, f: MappedFile, buf, pos: int, header: int) -> Iterator[Blank]:
        """The file's closing BLANK, when the caller asked to see it."""
        if self.opts.include_blank:
            yield Blank(f.file_from_offset + pos, self.log.blank_size(buf, pos, header), f.name)

    def _stopped_at(self, f: MappedFile, buf, pos: int, reason: str, last: bool) -> bool:
        """An invalid record: the end of the log (noted as a stop unless it is the clean zero
        tail of the last file), or with ``every_file`` a stop the scan goes past to the next
        file. True: the scan ends here."""
        clean = is_clean_end(buf, pos, reason, last)
        self.log.end = ScanEnd(f.file_from_offset + pos, reason, f.name, clean)
        if last or not self.opts.every_file:
            if not clean:
                self.log.stops.append(self.log.end)
            return True
        self.log.stops.append(self.log.end)
        return False
