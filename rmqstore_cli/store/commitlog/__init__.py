"""CommitLog: scan and get (read), append with BLANK and roll (write).

Reading follows ``CommitLog#checkMessageAndReturnSize`` (docs/format/commitlog.md#record-check;
one record: :mod:`~rmqstore_cli.store.commitlog.record`, the walk over the files:
:mod:`~rmqstore_cli.store.commitlog.scan`). Writing follows
``DefaultAppendMessageCallback#doAppend`` (docs/format/commitlog.md#append;
:mod:`~rmqstore_cli.store.commitlog.writing`, the record's bytes:
:mod:`~rmqstore_cli.store.commitlog.encode`).

This module reads and writes one record at a time (no numpy); the bulk read of many
records at once (:func:`walk_records`, :class:`RecordBatch`) is
:mod:`~rmqstore_cli.store.commitlog.bulk`, reachable under the same names from here.
"""

from __future__ import annotations

from collections.abc import Iterator

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.commitlog.append import AppendResult, AppendSpec
from rmqstore_cli.store.commitlog.encode import blank_record, choose_magic, crc_property_value, encode_record
from rmqstore_cli.store.commitlog.layout import PREFIX_STRUCT
from rmqstore_cli.store.commitlog.record import (
    END_OF_DATA,
    Blank,
    Check,
    Status,
    check_framed,
    check_message,
    is_clean_end,
)
from rmqstore_cli.store.commitlog.scan import LogScan, ScanEnd, ScanOptions
from rmqstore_cli.store.commitlog.writing import LogWriter
from rmqstore_cli.store.files import mapguard
from rmqstore_cli.store.files.mapped_files import MappedFile, MappedFileQueue
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.records.message import Message

__all__ = [
    "END_OF_DATA",
    "AppendResult",
    "AppendSpec",
    "Blank",
    "Check",
    "CommitLog",
    "ScanEnd",
    "Status",
    "blank_record",
    "check_framed",
    "check_message",
    "choose_magic",
    "crc_property_value",
    "encode_record",
    "is_clean_end",
]


class CommitLog(LogWriter):
    """The commit-log files of one store, read-only unless opened ``writable`` (the append
    half: :class:`~rmqstore_cli.store.commitlog.writing.LogWriter`)."""

    def __init__(self, config: StoreConfig, writable: bool = False):
        self.config = config
        self.queue = MappedFileQueue(
            config.commitlog_dirs,
            config.mapped_file_size_commit_log,
            writable,
            roots=config.write_roots if writable else None,
        )
        self.file_size = config.mapped_file_size_commit_log
        self.end: ScanEnd | None = None
        self.stops: list[ScanEnd] = []
        self.part_outcome: str | tuple[str, int] = "file"  # :meth:`scan_part`'s
        # writer state
        self.topic_queue_table: dict[str, int] = {}
        self._write_offset = 0
        #: Store time and offset of the last record seen by :meth:`max_offset` (0: none).
        self.last_store_timestamp = 0
        self.last_record_offset = 0
        self._headers: dict = {}  # file path -> header_of
        #: A DLedger commit log's writer half (``commitlog.dledger.EntryWriter``), or None.
        self.dledger = None
        if writable and config.dledger_dir is not None:
            from rmqstore_cli.store.commitlog.dledger import EntryWriter

            self.dledger = EntryWriter(config, self.queue)

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    @property
    def min_offset(self) -> int:
        """``CommitLog#getMinOffset``: the first file's start offset."""
        return self.queue.min_offset

    # ------------------------------------------------------------- reading
    def scan(
        self,
        start: int | None = None,
        end: int | None = None,
        check_crc: bool = False,
        include_blank: bool = False,
        skip_mismatch: bool = False,
        every_file: bool = False,
    ) -> Iterator[Message | Blank]:
        """Records in physical order from ``start`` (a record start) to ``end``.

        Stops where the broker's recovery stops: the first invalid record (the zero tail
        of the active file is one). ``skip_mismatch`` continues past a size mismatch, as
        the reput service does. ``every_file`` (forensics) instead goes on with the next
        file after an invalid record or a gap, since records never span files; each such
        stop is kept in ``self.stops``. ``self.end`` says where and why the scan stopped.
        """
        return self.scan_blocks(start, end, check_crc, include_blank, skip_mismatch, every_file, blocks=False)

    def scan_blocks(
        self,
        start: int | None = None,
        end: int | None = None,
        check_crc: bool = False,
        include_blank: bool = False,
        skip_mismatch: bool = False,
        every_file: bool = False,
        blocks: bool = True,
    ) -> Iterator:
        """:meth:`scan`, with runs of valid records given as
        :class:`~rmqstore_cli.store.commitlog.columns.MessageBlock` columns (``blocks``) and
        everything else as single records: the same records, stops and end. A file that
        shrank while it was read ends the scan with a ShrunkError (``mapguard.check``: the
        zeros it read looked like the end of the log)."""
        walked: list = []
        options = ScanOptions(end, check_crc, include_blank, skip_mismatch, every_file, blocks)
        yield from LogScan(self, options).records(self.min_offset if start is None else start, walked)
        mapguard.check(*walked)

    def scan_part(self, part: tuple, end: int | None, check_crc: bool, include_blank: bool, blocks: bool) -> Iterator:
        """One part of :meth:`scan_blocks`'s walk with ``every_file`` (:meth:`LogScan.part
        <rmqstore_cli.store.commitlog.scan.LogScan.part>`; ``part`` is its (files, i, pos, cut)):
        its records, ``end`` and ``stops``, and how it ended in :attr:`part_outcome`."""
        walked: list = []
        scan = LogScan(self, ScanOptions(end, check_crc, include_blank, False, True, blocks))
        yield from scan.part(*part, walked)
        self.part_outcome = scan.outcome
        mapguard.check(*walked)

    def header_of(self, f: MappedFile) -> int:
        """Bytes before each record of ``f``: 48 in a DLedger data file, else 0 (found once per file)."""
        h = self._headers.get(f.path)
        if h is None:
            from rmqstore_cli.store.commitlog.dledger import header_of

            h = self._headers[f.path] = header_of(self.config, f)
        return h

    @property
    def is_dledger(self) -> bool:
        """Some file is a DLedger data file (``enableDLegerCommitLog``)."""
        return any(self.header_of(f) for f in self.files)

    def entry_of(self, offset: int):
        """The DLedger entry header (``commitlog.dledger.Entry``) of the record at ``offset``,
        or None in a plain commit-log file (or before a file's first 48 bytes)."""
        from rmqstore_cli.store.commitlog.dledger import read_entry

        f = self.queue.find(offset)
        if f is None or not self.header_of(f):
            return None
        return read_entry(f.buffer(), offset - f.file_from_offset - self.header_of(f))

    @staticmethod
    def blank_size(buf, pos: int, header: int) -> int:
        """The size field of the end-of-file blank at ``pos`` (the commit log's or ``MmapFileList``'s)."""
        if header:
            from rmqstore_cli.store.commitlog.dledger import blank_size

            return blank_size(buf, pos)
        return PREFIX_STRUCT.unpack_from(buf, pos)[0]

    def get(self, offset: int, check_crc: bool = False) -> Message:
        """The message at physical ``offset`` (``DefaultMessageStore#lookMessageByOffset``)."""
        f = self.queue.find(offset)
        if f is None:
            raise StoreError(
                f"no commit-log file holds offset {offset}", path=self.config.commitlog_dirs[0], offset=offset
            )
        buf = f.buffer()
        c = check_message(
            buf, offset - f.file_from_offset, len(buf), f.file_from_offset, check_crc, self.config.force_verify_prop_crc
        )
        if c.message is None or c.status is Status.INVALID:
            raise StoreError(
                f"no valid message at offset {offset}: {c.reason or c.status.value}",
                path=f.path,
                offset=offset - f.file_from_offset,
            )
        return c.message

    def check_at(self, offset: int, check_crc: bool = False) -> Check | None:
        f = self.queue.find(offset)
        if f is None:
            return None
        buf = f.buffer()
        return check_message(
            buf, offset - f.file_from_offset, len(buf), f.file_from_offset, check_crc, self.config.force_verify_prop_crc
        )

    def max_offset(self) -> int:
        """``CommitLog#getMaxOffset`` of a cleanly recovered store: the end of valid data."""
        if not self.files:
            return 0
        last = self.files[-1]
        for m in self.scan(last.file_from_offset):
            self.last_store_timestamp = m.store_timestamp
            self.last_record_offset = m.offset
        return self.end.offset if self.end else last.file_from_offset

    def close(self) -> None:
        self.queue.close()
        if self.dledger is not None:
            self.dledger.close()


_BULK = ("RecordBatch", "Walk", "stop_kind", "walk_records")


def __getattr__(name: str):
    """The bulk read (:mod:`~rmqstore_cli.store.commitlog.bulk`, numpy) under this module's
    names, imported on first use so that per-record readers never load numpy."""
    if name in _BULK:
        from rmqstore_cli.store.commitlog import bulk

        return getattr(bulk, name)
    raise AttributeError(name)
