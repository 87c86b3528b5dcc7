"""CommitLog: scan and get (read), append with BLANK and roll (write).

Reading follows ``CommitLog#checkMessageAndReturnSize`` (docs/format/commitlog.md#record-check): a record
is *valid*, the *BLANK* end-of-file marker, *invalid* (the log ends) or a *size
mismatch* (dispatch skips it, recovery ends). Writing follows
``DefaultAppendMessageCallback#doAppend`` (docs/format/commitlog.md#append).

This module reads and writes one record at a time (no numpy); the bulk read of many
records at once (:func:`walk_records`, :class:`RecordBatch`) is
:mod:`~rmqstore_cli.store.commitlog.bulk`, reachable under the same names from here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from rmqstore_cli.formats.commitlog import (
    BORNHOST_V6_FLAG,
    CRC32_PROPERTY,
    CRC32_RESERVED_LEN,
    END_FILE_MIN_BLANK_LENGTH,
    FIXED_FORMAT,
    HEAD,
    HEAD_FORMAT,
    HOST_ADDRESS_SIZE,
    MAGIC_BLANK,
    MAGIC_V1,
    MAGIC_V2,
    PREFIX_FORMAT,
    PROPERTIES_LENGTH,
    PROPERTIES_LENGTH_FORMAT,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_LENGTH,
    TOPIC_LENGTH_FORMAT,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    MessageHead,
    middle_format,
    record_length,
)
from rmqstore_cli.formats.properties import MAX_PROPERTIES_LENGTH, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store import mapguard
from rmqstore_cli.store.commitlog.append import AppendResult, AppendSpec
from rmqstore_cli.store.config import StoreConfig
from rmqstore_cli.store.crc import crc32
from rmqstore_cli.store.mapped_files import MAX_FILE_OFFSET, MappedFile, MappedFileQueue, release_pages
from rmqstore_cli.store.message import Message, offset_msg_id

_HEAD = struct.Struct(HEAD_FORMAT)
_PREFIX = struct.Struct(PREFIX_FORMAT)
_MIDDLE = {(b, s): struct.Struct(middle_format(b, s)) for b in (False, True) for s in (False, True)}
_TOPIC_LEN = {magic: struct.Struct(fmt) for magic, fmt in TOPIC_LENGTH_FORMAT.items()}
_PROPS_LEN = struct.Struct(PROPERTIES_LENGTH_FORMAT)
_T1, _T2, _PL = TOPIC_LENGTH[False].size, TOPIC_LENGTH[True].size, PROPERTIES_LENGTH.size
_FIXED = {kinds: struct.Struct(fmt) for kinds, fmt in FIXED_FORMAT.items()}  # TOTALSIZE … BODYLENGTH
_FIXED_V4 = _FIXED[(False, False)]
_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_QUEUE_OFFSET = HEAD["queue_offset"]  # MessageDecoder.QUEUE_OFFSET_POSITION
_PHY = HEAD["physical_offset"]  # MessageDecoder.PHY_POS_POSITION
#: SYSFLAG's place among the fixed fields an ``unpack`` of :data:`_FIXED` returns.
_SYS_FLAG_FIELD = [sc.name for sc in MessageHead.subcons].index("sys_flag")


class Status(Enum):
    VALID = "valid"
    BLANK = "blank"
    INVALID = "invalid"
    SIZE_MISMATCH = "size-mismatch"


@dataclass(slots=True)
class Blank:
    """The BLANK end-of-file record: its size field counts the bytes to the file's end."""

    physical_offset: int
    total_size: int
    file: str


@dataclass(slots=True)
class Check:
    """The verdict on the bytes at one position; ``message`` is set when they decoded."""

    status: Status
    size: int
    reason: str = ""
    message: Message | None = None


def check_message(
    buf, pos: int, limit: int, file_from: int, check_crc: bool = False, force_prop_crc: bool = False
) -> Check:
    """``CommitLog#checkMessageAndReturnSize`` over ``buf[pos:limit]``.

    Bounds every read by ``limit`` (the file's end) the way a Java buffer does, so a
    corrupted length is an *invalid* record, never a crash or a huge allocation.

    The fast path decodes a well-formed record with one ``unpack`` (two for IPv6 hosts);
    anything else (or any doubt) goes to :func:`_check_exact`, which gives every verdict
    and reason.
    """
    if limit - pos >= _FIXED_V4.size and not (check_crc and force_prop_crc):
        fixed, fields = _fixed_fields(buf, pos, limit)
        (
            total,
            magic,
            crc,
            queue_id,
            flag,
            queue_offset,
            phy,
            sys_flag,
            born_ts,
            born_addr,
            born_port,
            store_ts,
            store_addr,
            store_port,
            reconsume,
            prepared,
            body_len,
        ) = fields
        if (magic == MAGIC_V1 or magic == MAGIC_V2) and body_len >= 0 and fixed.size <= total <= limit - pos:
            parts = _variable_parts(buf, pos + fixed.size, pos + total, magic, body_len)
            if parts is not None and (
                not check_crc or (crc32(parts[0]) & 0x7FFFFFFF if body_len else 0) == crc or body_len == 0
            ):
                body, topic, props = parts
                return Check(
                    Status.VALID,
                    total,
                    "",
                    Message(
                        phy,
                        total,
                        magic,
                        crc,
                        queue_id,
                        flag,
                        queue_offset,
                        sys_flag,
                        born_ts,
                        born_addr,
                        born_port,
                        store_ts,
                        store_addr,
                        store_port,
                        reconsume,
                        prepared,
                        body,
                        topic,
                        props,
                        file_from + pos,
                    ),
                )
    return _check_exact(buf, pos, limit, file_from, check_crc, force_prop_crc)


def _fixed_fields(buf, pos: int, limit: int) -> tuple[struct.Struct, tuple]:
    """The fixed fields, TOTALSIZE to BODYLENGTH, and the layout SYSFLAG names: read with
    IPv4 hosts first (the common case, one ``unpack``), again with the IPv6 widths when
    SYSFLAG says a host is IPv6 and the record can hold them (``MessageDecoder#decode``: the
    flags choose 4 or 16 address bytes)."""
    fixed = _FIXED_V4
    fields = fixed.unpack_from(buf, pos)
    total, sys_flag = fields[0], fields[_SYS_FLAG_FIELD]
    if sys_flag & _V6_FLAGS and 0 < total <= limit - pos:
        fixed = _FIXED[(bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))]
        if fixed.size <= total:
            fields = fixed.unpack_from(buf, pos)
    return fixed, fields  # a wide layout larger than TOTALSIZE: the caller's size check fails


def _variable_parts(buf, start: int, end: int, magic: int, body_len: int) -> tuple[bytes, bytes, bytes] | None:
    """BODY, TOPIC and PROPERTIES between the fixed fields (``start``) and the record's end
    (``end``, from TOTALSIZE), or None unless their lengths are sane and add up to the end
    exactly; a V1 record's topic length is a signed byte, a V2 record's a short
    (``MessageVersion``). Every read stays below ``end``."""
    p = start + body_len
    if magic == MAGIC_V1:
        topic_len = buf[p] if p < end else -1
        if topic_len > 127:
            topic_len = -1  # a signed byte: negative, invalid
        p += _T1
    else:
        topic_len = int.from_bytes(buf[p : p + _T2], "big", signed=True) if p + _T2 <= end else -1
        p += _T2
    if topic_len < 0 or p + topic_len + _PL > end:
        return None
    topic = buf[p : p + topic_len]
    p += topic_len
    props_len = int.from_bytes(buf[p : p + _PL], "big", signed=True)
    p += _PL
    if props_len < 0 or p + props_len != end:
        return None
    return buf[start : start + body_len], topic, buf[p : p + props_len]


def _check_exact(buf, pos: int, limit: int, file_from: int, check_crc: bool, force_prop_crc: bool) -> Check:
    """The careful decode: every read bounded, every verdict with its reason."""
    if limit - pos < 8:
        return Check(Status.INVALID, -1, "fewer than 8 bytes left in the file")
    total, magic = _PREFIX.unpack_from(buf, pos)
    if magic == MAGIC_BLANK:
        return Check(Status.BLANK, 0)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return Check(Status.INVALID, -1, END_OF_DATA if magic == 0 and total == 0 else f"bad magic code 0x{magic:08X}")
    if total < _HEAD.size or total - 4 > limit - pos - 4:
        return Check(Status.INVALID, -1, f"total size {total} does not fit in the {limit - pos} bytes left")
    (_, _, crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts) = _HEAD.unpack_from(buf, pos)
    mid = _MIDDLE[(bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))]
    p = pos + _HEAD.size
    if p + mid.size > limit:
        return Check(Status.INVALID, -1, "record truncated in its fixed fields")
    (born_addr, born_port, store_ts, store_addr, store_port, reconsume, prepared, body_len) = mid.unpack_from(buf, p)
    p += mid.size
    body = b""
    if body_len > 0:
        if p + body_len > limit:
            return Check(Status.INVALID, -1, f"body length {body_len} runs past the file's end")
        body = buf[p : p + body_len]
        if check_crc and not force_prop_crc and (crc32(body) & 0x7FFFFFFF) != crc:
            return Check(Status.INVALID, -1, f"body CRC mismatch (stored {crc}, computed {crc32(body) & 0x7FFFFFFF})")
        p += body_len
    tl = _TOPIC_LEN[magic]
    if p + tl.size > limit:
        return Check(Status.INVALID, -1, "record truncated before its topic")
    (topic_len,) = tl.unpack_from(buf, p)
    p += tl.size
    if topic_len < 0 or p + topic_len > limit:
        return Check(Status.INVALID, -1, f"bad topic length {topic_len}")
    topic = buf[p : p + topic_len]
    p += topic_len
    if p + _PL > limit:
        return Check(Status.INVALID, -1, "record truncated before its properties")
    (props_len,) = _PROPS_LEN.unpack_from(buf, p)
    p += _PL
    props = b""
    if props_len > 0:
        if p + props_len > limit:
            return Check(Status.INVALID, -1, f"properties length {props_len} runs past the file's end")
        props = buf[p : p + props_len]
    msg = Message(
        phy,
        total,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        sys_flag,
        born_ts,
        born_addr,
        born_port,
        store_ts,
        store_addr,
        store_port,
        reconsume,
        prepared,
        body,
        topic,
        props,
        file_from + pos,
    )
    if check_crc and force_prop_crc and not _prop_crc_ok(buf, pos, total, props):
        return Check(Status.INVALID, -1, "whole-record CRC (__CRC32#) missing or wrong", msg)
    expected = record_length(sys_flag, magic, body_len, topic_len, props_len)
    if expected != total:
        return Check(Status.SIZE_MISMATCH, total, f"total size {total} but fields add up to {expected}", msg)
    return Check(Status.VALID, total, "", msg)


def _prop_crc_ok(buf, pos: int, total: int, props: bytes) -> bool:
    """``__CRC32#`` value (digits least significant first) vs CRC of the record less 20 bytes."""
    marker = (CRC32_PROPERTY + NAME_VALUE_SEPARATOR).encode()
    i = props.rfind(marker)
    if i < 0:
        return False
    digits = props[i + len(marker) : i + len(marker) + 10]
    if len(digits) != 10 or not digits.isdigit():
        return False
    stored = int(digits[::-1])
    return stored == crc32(buf[pos : pos + total - CRC32_RESERVED_LEN]) & 0x7FFFFFFF


def crc_property_value(crc: int) -> str:
    """``MessageDecoder#createCrc32``: 10 decimal digits, least significant first."""
    return str(crc).zfill(10)[::-1]


_RELEASE_EVERY = 64 << 20


END_OF_DATA = "no message here (end of data)"


def is_clean_end(buf, pos: int, reason: str, last_file: bool) -> bool:
    """The log ends cleanly where the last file's preallocated zero tail begins
    (docs/format/store-layout.md#the-end-of-the-data); anything else is a torn or damaged end."""
    return last_file and reason == END_OF_DATA and not any(buf[pos : pos + 4096])


def check_framed(
    buf, pos: int, limit: int, file_from: int, header: int, check_crc: bool = False, force_prop_crc: bool = False
) -> Check:
    """:func:`check_message` for the record framed at ``pos``: itself (``header`` 0), or inside
    the DLedger entry starting there (``DLedgerCommitLog#checkMessageAndReturnSize``: the
    entry's blank is BLANK, a record is read ``header`` bytes on and the size includes the
    header). An entry that ``DLedgerMmapFileStore#recover`` would reject is INVALID."""
    if not header:
        return check_message(buf, pos, limit, file_from, check_crc, force_prop_crc)
    from rmqstore_cli.store.commitlog.dledger import entry_problem, entry_stop_kind, read_entry

    if limit - pos >= 8 and entry_stop_kind(buf, pos) == "blank":
        return Check(Status.BLANK, 0)
    e = read_entry(buf, pos)
    if e is not None and e.magic == 0 and e.size == 0:
        return Check(Status.INVALID, -1, END_OF_DATA)
    problem = entry_problem(e, file_from + pos, limit - pos)
    if problem:
        return Check(Status.INVALID, -1, problem)
    c = check_message(buf, pos + header, limit, file_from, check_crc, force_prop_crc)
    if c.status is Status.VALID and c.size + header != e.size:
        return Check(Status.INVALID, -1, f"DLedger entry size {e.size} != record size {c.size} + {header}", c.message)
    if c.size > 0:
        c.size += header
    return c


@dataclass(slots=True)
class ScanEnd:
    """Where and why a scan stopped: the end of the readable log."""

    offset: int
    reason: str
    file: str | None = None
    clean: bool = True


class CommitLog:
    """The commit-log files of one store, read-only unless opened ``writable``."""

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
        :class:`~rmqstore_cli.store.columns.MessageBlock` columns (``blocks``) and
        everything else as single records: the same records, stops and end. A file that
        shrank while it was read ends the scan with a ShrunkError (``mapguard.check``: the
        zeros it read looked like the end of the log)."""
        walked: list = []
        yield from self._scan_files(start, end, check_crc, include_blank, skip_mismatch, every_file, blocks, walked)
        mapguard.check(*walked)

    def _scan_files(
        self,
        start: int | None,
        end: int | None,
        check_crc: bool,
        include_blank: bool,
        skip_mismatch: bool,
        every_file: bool,
        blocks: bool,
        walked: list,
    ) -> Iterator:
        force = self.config.force_verify_prop_crc
        if blocks and not (check_crc and force):  # a whole-record CRC is checked record by record
            from rmqstore_cli.store.arrays import file_array
            from rmqstore_cli.store.columns import MAX_BLOCK, valid_block
            from rmqstore_cli.store.topics import TopicIds

            topic_table = TopicIds()
        else:
            blocks = False
        start = self.min_offset if start is None else start
        self.end = None
        self.stops: list[ScanEnd] = []
        files = self.queue.files_from(start)
        for i, f in enumerate(files):
            buf = f.buffer()
            walked.append(buf)
            limit = len(buf)
            header = self.header_of(f)
            pos = max(0, start - f.file_from_offset)
            if header and pos:  # a record offset names its entry, BODY_OFFSET before it
                pos -= header
            if i > 0 and f.file_from_offset != files[i - 1].end_offset:
                self.end = ScanEnd(
                    files[i - 1].end_offset,
                    f"gap: no file between {files[i - 1].end_offset} and {f.file_from_offset}",
                    f.name,
                    clean=False,
                )
                self.stops.append(self.end)
                if not every_file:
                    return
            stop = limit if end is None else end - f.file_from_offset
            released = pos - pos % _RELEASE_EVERY
            arr = file_array(buf) if blocks else None
            size = 64  # blocks grow, so a short read (--limit 10) decodes little
            while True:
                if pos >= stop and end is not None:
                    self.end = ScanEnd(f.file_from_offset + pos, "end offset reached", f.name)
                    return
                if pos - released >= _RELEASE_EVERY:
                    released = release_pages(buf, released, pos)
                if blocks:
                    blk = valid_block(
                        buf, arr, pos, stop, f.file_from_offset, f.name, size, check_crc, topic_table, header
                    )
                    if blk is not None:
                        yield blk
                        pos = blk.next_pos
                        size = min(size * 2, MAX_BLOCK)
                        continue
                c = check_framed(buf, pos, limit, f.file_from_offset, header, check_crc, force)
                if c.status is Status.VALID:
                    yield c.message
                    pos += c.size
                    continue
                if c.status is Status.BLANK:
                    if include_blank:
                        yield Blank(f.file_from_offset + pos, self.blank_size(buf, pos, header), f.name)
                    release_pages(buf, released, limit)
                    break
                if c.status is Status.SIZE_MISMATCH and skip_mismatch:
                    pos += c.size
                    continue
                last = i == len(files) - 1
                clean = is_clean_end(buf, pos, c.reason, last)
                self.end = ScanEnd(f.file_from_offset + pos, c.reason, f.name, clean)
                if last or not every_file:
                    if not clean:
                        self.stops.append(self.end)
                    return
                self.stops.append(self.end)
                break
        last = files[-1] if files else None
        self.end = ScanEnd(last.end_offset if last else start, "end of the last file", last.name if last else None)

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
        return _PREFIX.unpack_from(buf, pos)[0]

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

    # ------------------------------------------------------------- writing
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
        f = self.queue.get_last_mapped_file(self._write_offset)
        pos = self._write_offset - f.file_from_offset
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size - pos:
            self._write_blank(f, pos)
            f = self.queue.get_last_mapped_file(self._write_offset)
            pos = 0
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
        import numpy as np

        from rmqstore_cli.store.commitlog import blocks as B

        if self.dledger is not None or self.config.enabled_append_prop_crc or not len(block):
            return None
        given_phy = block.physical_offset >= 0
        if (given_phy.any() and (not given_phy.all() or int(block.physical_offset[0]) != self._write_offset)) or len(
            set((block.queue_offset >= 0).tolist())
        ) > 1:
            return None
        topic_bytes = [t.encode("utf-8", "surrogatepass") for t in block.topics]
        magic = np.where(
            block.magic != 0,
            block.magic,
            np.array([choose_magic(t, self.config) for t in block.topics], np.int64)[block.tid],
        )
        blen = np.fromiter(map(len, block.bodies), np.int64, len(block))
        plen = np.fromiter(map(len, block.props), np.int64, len(block))
        if B.block_problem(block, magic, topic_bytes, plen):
            return None
        links = block.link_codes()
        prow = B.pending_rows(links)
        qoff, updates = B.assign_queue_offsets(block, self.topic_queue_table)
        for i in np.flatnonzero(links == 3).tolist():  # the op record's body
            p = int(prow[i])
            if p >= 0 or pending is not None:
                block.bodies[i] = str(int(qoff[p]) if p >= 0 else pending[1]).encode() + block.bodies[i]
                blen[i] = len(block.bodies[i])
        bv6, sv6 = B.host_kinds(block)
        sizes = B.record_sizes(block, magic, bv6, sv6, topic_bytes, blen, plen)
        if (
            int(sizes.max()) + END_FILE_MIN_BLANK_LENGTH > self.file_size
            or self._write_offset + int(sizes.sum()) + 2 * self.file_size > MAX_FILE_OFFSET
        ):
            return None  # the per-record path says which record and why (near Long.MAX_VALUE: one line)
        f = self.queue.get_last_mapped_file(self._write_offset)
        plan = B.plan_files(self._write_offset, f.file_from_offset, self.file_size, sizes)
        phy = np.empty(len(block), np.int64)
        for ff, pos, i, j in plan:
            phy[i:j] = ff + pos + np.concatenate([[0], np.cumsum(sizes[i : j - 1])])
        if given_phy.any() and not np.array_equal(phy, block.physical_offset):
            return None
        self.topic_queue_table.update(updates)
        prepared = block.prepared.copy()
        ans = np.flatnonzero(links == 2)
        if ans.size:
            p = prow[ans]
            prepared[ans] = np.where(p >= 0, phy[np.maximum(p, 0)], pending[0] if pending else prepared[ans])
        store_ts = block.store_ts
        if floor is not None:
            store_ts = np.maximum.accumulate(np.maximum(store_ts, floor))
        cols = {
            "total": sizes,
            "magic": magic,
            "sys_flag": B.v6_flags(block.sys_flag, bv6, sv6),
            "queue_offset": qoff,
            "phy": phy,
            "prepared": prepared,
            "bv6": bv6,
            "sv6": sv6,
            "store_ts": store_ts,
            "body_len": blen,
            "props_len": plen,
        }
        runs = self._write_runs(block, plan, f, cols, B.topic_parts(topic_bytes))
        last = np.flatnonzero(links == 1)
        if last.size:
            pending = (int(phy[last[-1]]), int(qoff[last[-1]]))
        return runs, pending, store_ts

    def _write_runs(self, block, plan: list, f: MappedFile, cols: dict, parts) -> list:
        """:meth:`append_block`'s records encoded and written a file run at a time (``plan``:
        file start, position, rows), a BLANK closing each file left behind as ``doAppend``'s
        END_OF_FILE does. Per run: the records' bytes, their starts, their dispatch fields."""
        from rmqstore_cli.store.commitlog import blocks as B
        from rmqstore_cli.store.consume_queue import write_range

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
        struct.pack_into(_QUEUE_OFFSET.fmt, record, _QUEUE_OFFSET.offset, queue_offset)
        struct.pack_into(_PHY.fmt, record, _PHY.offset, phy)
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


def blank_record(left: int) -> bytes:
    """The BLANK end-of-file record ``CommitLog.DefaultAppendMessageCallback#doAppend`` writes
    when the next message does not fit: int32 ``maxBlank`` (the bytes left in the file),
    int32 ``BLANK_MAGIC_CODE``, 8 bytes ("the remaining space may be any value")."""
    return _PREFIX.pack(left, MAGIC_BLANK)


def choose_magic(topic: str, config: StoreConfig) -> int:
    """5.x: V2 when ``autoMessageVersionOnTopicLen`` and the topic has > 127 UTF-16 units."""
    units = len(topic.encode("utf-16-le", "surrogatepass")) // 2
    return MAGIC_V2 if config.auto_message_version_on_topic_len and units > 127 else MAGIC_V1


def encode_record(spec: AppendSpec, config: StoreConfig) -> bytearray:
    """``MessageExtEncoder#encode``: the record with QUEUEOFFSET and PHYSICALOFFSET still 0.

    With ``enabledAppendPropCRC`` the properties get a ``\\x02`` if they lack one and a
    20-byte ``__CRC32#`` placeholder; :meth:`CommitLog.append` fills in its digits.
    """
    magic = spec.magic if spec.magic is not None else choose_magic(spec.topic, config)
    sys_flag = spec.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if len(spec.born_host[0]) == HOST_ADDRESS_SIZE[True]:
        sys_flag |= BORNHOST_V6_FLAG
    if len(spec.store_host[0]) == HOST_ADDRESS_SIZE[True]:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    props = spec.properties
    if config.enabled_append_prop_crc and not spec.raw_properties:
        if props and not props.endswith(PROPERTY_SEPARATOR):
            props += PROPERTY_SEPARATOR
        props += CRC32_PROPERTY + NAME_VALUE_SEPARATOR + "0" * 10 + PROPERTY_SEPARATOR
    topic_b = spec.topic.encode("utf-8", "surrogatepass")
    props_b = props if isinstance(props, bytes) else props.encode("utf-8", "surrogatepass")
    body = spec.body
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise StoreError(
            f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH} (PROPERTIES_SIZE_EXCEEDED)"
        )
    if magic == MAGIC_V1 and len(topic_b) > 127:
        raise StoreError(f"topic of {len(topic_b)} bytes needs a V2 record")
    total = record_length(sys_flag, magic, len(body), len(topic_b), len(props_b))
    crc = crc32(body) & 0x7FFFFFFF if body else 0
    out = bytearray(total)
    _HEAD.pack_into(out, 0, total, magic, crc, spec.queue_id, spec.flag, 0, 0, sys_flag, spec.born_timestamp)
    mid = _MIDDLE[(bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))]
    p = _HEAD.size
    mid.pack_into(
        out,
        p,
        spec.born_host[0],
        spec.born_host[1],
        spec.store_timestamp,
        spec.store_host[0],
        spec.store_host[1],
        spec.reconsume_times,
        spec.prepared_transaction_offset,
        len(body),
    )
    p += mid.size
    out[p : p + len(body)] = body
    p += len(body)
    tl = _TOPIC_LEN[magic]
    tl.pack_into(out, p, len(topic_b))
    p += tl.size
    out[p : p + len(topic_b)] = topic_b
    p += len(topic_b)
    _PROPS_LEN.pack_into(out, p, len(props_b))
    p += _PL
    out[p : p + len(props_b)] = props_b
    return out


_BULK = ("RecordBatch", "Walk", "stop_kind", "walk_records")


def __getattr__(name: str):
    """The bulk read (:mod:`~rmqstore_cli.store.commitlog.bulk`, numpy) under this module's
    names, imported on first use so that per-record readers never load numpy."""
    if name in _BULK:
        from rmqstore_cli.store.commitlog import bulk

        return getattr(bulk, name)
    raise AttributeError(name)
