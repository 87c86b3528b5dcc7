"""The commit log's write side: ``DefaultAppendMessageCallback#doAppend`` (docs/format/commitlog.md#append).

:class:`LogWriter` is the half of :class:`~rmqstore_cli.store.commitlog.CommitLog` that appends:
one record (plain or framed in a DLedger entry), a block of records at once, the BLANK that
closes a file, the jump to a later file a dump asks for.
"""

from __future__ import annotations

import struct

from rmqstore_cli.formats.commitlog import (
    CRC32_RESERVED_LEN,
    END_FILE_MIN_BLANK_LENGTH,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
)

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.commitlog.append import AppendResult, AppendSpec
from rmqstore_cli.store.commitlog.encode import blank_record, crc_property_value, encode_record
from rmqstore_cli.store.commitlog.layout import PHY_FIELD, QUEUE_OFFSET_FIELD
from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.files.mapped_files import MAX_FILE_OFFSET, MappedFile, MappedFileQueue
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.records.message import offset_msg_id


class LogWriter:
    """The append half of ``CommitLog``. The reading half (``CommitLog`` itself) sets up these
    attributes and gives ``files``, ``max_offset``, ``header_of`` and ``entry_of``."""

    config: StoreConfig
    queue: MappedFileQueue
    file_size: int
    topic_queue_table: dict[str, int]
    _write_offset: int
    last_record_offset: int
    #: A DLedger commit log's writer half (``commitlog.dledger.EntryWriter``), or None.
    dledger: object | None

    def open_for_append(self) -> None:
        """Position the writer after the last valid record, as recovery would. DLedger: after
        the last entry; on an old plain log, from the end of its last file
        (``DLedgerCommitLog#recover``: a BLANK there, then ``dividedCommitlogOffset``)."""
        self._write_offset = self.max_offset() if self.files else 0
        if self.dledger is not None and self.files:
            last = self.files[-1]
            if not self.header_of(last):
                if self._write_offset < last.end_offset:
                    self._write_blank(last, self._write_offset - last.file_from_offset)
            elif self.last_record_offset:
                self.dledger.resume(self.entry_of(self.last_record_offset))

    @property
    def write_offset(self) -> int:
        return self._write_offset

    def append(self, spec: AppendSpec) -> AppendResult:
        """``DefaultAppendMessageCallback#doAppend`` for one message."""
        if self.dledger is not None:
            return self._append_entry(spec)
        record = encode_record(spec, self.config)
        size = len(record)
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise StoreError(f"a {size}-byte message can never fit a {self.file_size}-byte commit-log file")
        if spec.physical_offset is not None and spec.physical_offset != self._write_offset:
            self._seek(spec.physical_offset)
        f, pos = self._room_for(size)
        queue_offset = self._queue_offset(spec)
        phy = f.file_from_offset + pos
        if phy + size > MAX_FILE_OFFSET:  # a Java long: CommitLog offsets never pass Long.MAX_VALUE
            raise StoreError(
                f"the commit log ends at offset {phy}: no room for a {size}-byte message below Long.MAX_VALUE",
                path=f.path,
                offset=pos,
            )
        self._seal(spec, record, queue_offset, phy)
        f.write(pos, record)
        self._write_offset = phy + size
        msg_id = offset_msg_id(spec.store_host[0], spec.store_host[1], phy)
        return AppendResult(phy, size, queue_offset, msg_id, spec.store_timestamp, bytes(record))

    def _room_for(self, size: int) -> tuple[MappedFile, int]:
        """The file and position the next ``size``-byte record goes to: a BLANK closes the
        current file when the record and the minimum blank would not both fit."""
        f = self.queue.get_last_mapped_file(self._write_offset)
        pos = self._write_offset - f.file_from_offset
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size - pos:
            self._write_blank(f, pos)
            f = self.queue.get_last_mapped_file(self._write_offset)
            pos = 0
        return f, pos

    def append_block(self, block, pending: tuple[int, int] | None, floor: int | None):
        """:meth:`append` for a :class:`~rmqstore_cli.store.commitlog.blocks.SendBlock` at once
        (``doAppend`` per record, the bytes encoded and written a file run at a time). A
        commit/rollback send answers the pending half/prepared record (its PREPAREDTRANSACTIONOFFSET),
        an op send's body is the pending record's queue offset (``StoreWriter.append_linked``);
        ``floor``: store times never go below it nor the previous record's. Returns
        ``(runs, pending, store_ts)``, runs ``(records' bytes, their starts, their
        dispatch fields)`` per file in
        order, or None (nothing written) for a block the per-record path must take (DLedger,
        ``enabledAppendPropCRC``, a record ``encode_record`` refuses, offsets a dump gives
        that do not follow on)."""
        from rmqstore_cli.store.commitlog import block_append as BA, blocks as B

        if self.dledger is not None or self.config.enabled_append_prop_crc or not len(block):
            return None
        if not BA.follows_on(block, self._write_offset):
            return None
        shape = BA.block_shape(block, self.config, self.topic_queue_table, pending)
        if shape is None or BA.too_large(shape.sizes, self._write_offset, self.file_size):
            return None
        f = self.queue.get_last_mapped_file(self._write_offset)
        plan = B.plan_files(self._write_offset, f.file_from_offset, self.file_size, shape.sizes)
        phy = BA.planned_offsets(plan, shape.sizes)
        if not BA.offsets_kept(block, phy):
            return None
        self.topic_queue_table.update(shape.queue_updates)
        cols = BA.record_columns(block, shape, phy, pending, floor)
        runs = self._write_runs(block, plan, f, cols, B.topic_parts(shape.topic_bytes))
        return runs, BA.next_pending(shape, phy, pending), cols["store_ts"]

    def _write_runs(self, block, plan: list, f: MappedFile, cols: dict, parts) -> list:
        """:meth:`append_block`'s records encoded and written a file run at a time (``plan``:
        file start, position, rows), a BLANK closing each file left behind as ``doAppend``'s
        END_OF_FILE does. Per run: the records' bytes, their starts, their dispatch fields."""
        from rmqstore_cli.store.commitlog import blocks as B
        from rmqstore_cli.store.files.safefs import write_range

        runs = []
        for ff, pos, i, j in plan:
            if ff != f.file_from_offset:
                self._write_blank(f, self._write_offset - f.file_from_offset)
                f = self.queue.get_last_mapped_file(ff)
            data, starts = B.encode_records(block, i, j, cols, parts)
            f.buffer()  # mapped, so close()'s msync flushes these pages too
            write_range(f.path, pos, data, "commit-log records", self.queue.roots)  # pwrite: no fault per page
            self._write_offset = ff + pos + len(data)
            runs.append((data, starts, B.dispatch_fields(block, i, j, cols, starts)))
        return runs

    def _queue_offset(self, spec: AppendSpec) -> int:
        """The record's queue offset: the next of its queue (normal and commit records), else 0."""
        tran = spec.sys_flag & TRANSACTION_MASK
        queue_offset = 0
        if tran in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            key = f"{spec.topic}-{spec.queue_id}"
            queue_offset = self.topic_queue_table.get(key, 0) if spec.queue_offset is None else spec.queue_offset
            self.topic_queue_table[key] = queue_offset + 1
        elif spec.queue_offset is not None:
            queue_offset = spec.queue_offset
        return queue_offset

    def _seal(self, spec: AppendSpec, record: bytearray, queue_offset: int, phy: int) -> None:
        """QUEUEOFFSET, PHYSICALOFFSET and (``enabledAppendPropCRC``) the whole-record CRC."""
        size = len(record)
        struct.pack_into(QUEUE_OFFSET_FIELD.fmt, record, QUEUE_OFFSET_FIELD.offset, queue_offset)
        struct.pack_into(PHY_FIELD.fmt, record, PHY_FIELD.offset, phy)
        if self.config.enabled_append_prop_crc and not spec.raw_properties:
            crc = crc32(memoryview(record)[: size - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
            record[size - 11 : size - 1] = crc_property_value(crc).encode()

    def _append_entry(self, spec: AppendSpec) -> AppendResult:
        """``DLedgerCommitLog#putMessage``: the record as the body of a DLedger entry, its
        PHYSICALOFFSET the entry's pos + ``BODY_OFFSET`` (the append hook). A replayed record's
        physical offset cannot be kept: entries follow each other."""
        from rmqstore_cli.formats.dledger import BODY_OFFSET

        from rmqstore_cli.store.commitlog.dledger import encode_blank

        record = encode_record(spec, self.config)
        size = len(record) + BODY_OFFSET
        if not self.dledger.fits(size, self.file_size):
            raise StoreError(f"a {len(record)}-byte message can never fit a {self.file_size}-byte DLedger data file")
        f = self.queue.get_last_mapped_file(self._write_offset)
        pos = self._write_offset - f.file_from_offset
        if not self.dledger.fits(size, self.file_size - pos):
            f.write(pos, encode_blank(self.file_size - pos))
            self._write_offset = f.end_offset
            f = self.queue.get_last_mapped_file(self._write_offset)
            pos = 0
        queue_offset = self._queue_offset(spec)
        phy = f.file_from_offset + pos + BODY_OFFSET
        self._seal(spec, record, queue_offset, phy)
        f.write(pos, self.dledger.frame(record, phy - BODY_OFFSET))
        self._write_offset = phy - BODY_OFFSET + size
        msg_id = offset_msg_id(spec.store_host[0], spec.store_host[1], phy)
        return AppendResult(phy, len(record), queue_offset, msg_id, spec.store_timestamp, bytes(record))

    def _seek(self, offset: int) -> None:
        """Continue at ``offset``: where an empty log starts, or a later file after a BLANK."""
        if not self.files:
            self._write_offset = offset
            return
        f = self.queue.get_last_mapped_file(self._write_offset)
        if offset < f.end_offset:
            raise StoreError(
                f"cannot write at offset {offset}: the log continues at {self._write_offset}",
                offset=offset,
                hint="replay a contiguous dump (no filters)",
            )
        self._write_blank(f, self._write_offset - f.file_from_offset)
        self._write_offset = offset

    def _write_blank(self, f: MappedFile, pos: int) -> None:
        """The 8-byte BLANK (:func:`blank_record`); the rest stays zero."""
        f.write(pos, blank_record(self.file_size - pos))
        self._write_offset = f.end_offset
