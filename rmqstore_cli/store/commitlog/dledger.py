"""The DLedger framing of the commit log (``enableDLegerCommitLog=true``).

``DLedgerCommitLog`` keeps each message as the body of a DLedger entry (48-byte header,
``formats.dledger``) in ``dledger-<selfId>/data/``; its append hook writes PHYSICALOFFSET =
entry pos + ``BODY_OFFSET``, so the consume queues, the index and offset msgIds point at
the record inside the entry, and every random-access read (``CommitLog.get``) works on the
data files unchanged. Only the sequential walks differ: they step over the entry header and
stop at ``MmapFileList``'s blank (``bulk.walk_records``: :func:`entries_ok`, ``kernels.walk_entries``).
A store that switched to DLedger keeps its old ``commitlog/`` below ``dividedCommitlogOffset``
(the first data file's start): ``StoreConfig.commitlog_dirs`` lists both directories and each
file is read with its own framing (:func:`header_of`), as ``DLedgerCommitLog#getData`` does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats import dledger as dledger_layout

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.layout.dledger_paths import data_dir, dledger_dir

_ENTRY = struct.Struct(dledger_layout.ENTRY_HEADER_FORMAT)
_BLANK = struct.Struct(dledger_layout.BLANK_FORMAT)
_UNIT = struct.Struct(dledger_layout.INDEX_UNIT_FORMAT)
#: small properties files: ``checkpoint`` and ``currterm`` (``IOUtils#string2File``)
_PROPS_LIMIT = 64 * 1024


# ------------------------------------------------------------------ where


def header_of(config, f) -> int:
    """The bytes before each record of file ``f``: ``BODY_OFFSET`` in a DLedger data file, 0 in
    the old ``commitlog/`` of a divided store (``DLedgerCommitLog#getData``)."""
    d = data_dir(config)
    return dledger_layout.BODY_OFFSET if d is not None and f.path.parent == d else 0


def expiry_candidates(config, files: list) -> tuple[list, float, str | None]:
    """The commit-log files expire may delete, oldest first, the hours added to the reserved
    time, and a note. Plain: every file but the newest. DLedger (``DLedgerCommitLog#deleteExpiredFile``):
    while old ``commitlog/`` files remain only they go, the last one too (``disableDeleteDledger``);
    then DLedger's own ``CleanSpaceService`` deletes data files but the newest
    (``MmapFileList#deleteExpiredFileByTime``) kept ``fileReservedTime + 1`` hours."""
    data = [f for f in files if header_of(config, f)]
    if not data:
        return files[:-1], 0.0, None
    old = [f for f in files if not header_of(config, f)]
    if old:
        return (
            old,
            0.0,
            (
                "DLedger data files are not expired while old commitlog/ files remain "
                "(DLedgerCommitLog#deleteExpiredFile); the last old file may go too"
            ),
        )
    return (
        data[:-1],
        1.0,
        (
            "DLedger data files are kept fileReservedTime + 1 hours (DLedgerCommitLog); the broker "
            "trims index/ below the new first entry when it next starts (reviseLedgerBeginIndex)"
        ),
    )


# ------------------------------------------------------------------ one entry


@dataclass(slots=True)
class Entry:
    """A DLedger entry header (``DLedgerEntryCoder#decode`` without the body)."""

    magic: int
    size: int
    index: int
    term: int
    pos: int
    body_size: int


def read_entry(buf, pos: int) -> Entry | None:
    """The entry header at ``pos`` (channel and the two CRCs, which the broker leaves 0, left
    out), or None when fewer than 48 bytes remain."""
    if pos < 0 or pos + _ENTRY.size > len(buf):
        return None
    magic, size, index, term, epos, _, _, _, body_size = _ENTRY.unpack_from(buf, pos)
    return Entry(magic, size, index, term, epos, body_size)


def entry_problem(e: Entry | None, absolute: int, limit_left: int) -> str:
    """Why ``DLedgerMmapFileStore#recover`` rejects the entry at ``absolute`` ("" when it
    would not): magic, size > HEADER_SIZE, pos == its position, bodySize + BODY_OFFSET == size,
    the entry inside the file."""
    if e is None:
        return f"{limit_left} bytes left, too few for a DLedger entry header"
    if e.magic != dledger_layout.ENTRY_MAGIC:
        return f"bad DLedger entry magic {e.magic}"
    if e.size <= dledger_layout.HEADER_SIZE:
        return f"DLedger entry size {e.size} should be > {dledger_layout.HEADER_SIZE}"
    if e.size > limit_left:
        return f"DLedger entry of {e.size} bytes, but the file ends after {limit_left}"
    if e.pos != absolute:
        return f"DLedger entry pos {e.pos} != {absolute}"
    if e.body_size + dledger_layout.BODY_OFFSET != e.size:
        return f"DLedger entry size {e.size} != bodySize {e.body_size} + {dledger_layout.BODY_OFFSET}"
    return ""


def entry_stop_kind(buf, pos: int) -> str:
    """The walk's stop at an entry start that is no walkable entry: ``blank`` (magic -1,
    ``MmapFileList#preAppend``), ``zero`` (the zero tail) or ``bad``."""
    magic, size = _BLANK.unpack_from(buf, pos)
    if magic == dledger_layout.BLANK_MAGIC:
        return "blank"
    return "zero" if magic == 0 and size == 0 else "bad"


def blank_size(buf, pos: int) -> int:
    """The size field of the blank at ``pos`` (the bytes to the file's end)."""
    return _BLANK.unpack_from(buf, pos)[1]


def entries_ok(a, starts, total, header: int):
    """Per record starting at ``starts`` (``header`` bytes after its entry's), whether its
    entry has the entry magic and the size TOTALSIZE + ``header``
    (``DLedgerMmapFileStore#recover``); the reference walk's check of the entries
    (``bulk.walk_records``), read with the records' prefix view."""
    import numpy as np
    from rmqstore_cli.formats.commitlog import PREFIX_DTYPE

    from rmqstore_cli.store.files.arrays import byte_rows

    ent = np.ascontiguousarray(byte_rows(a, starts - header, PREFIX_DTYPE.itemsize)).view(PREFIX_DTYPE).ravel()
    return (ent["total_size"].astype(np.int64) == dledger_layout.ENTRY_MAGIC) & (
        ent["magic"].astype(np.int64) == total + header
    )


def encode_entry(record: bytes | bytearray, index: int, term: int, pos: int) -> bytes:
    """``DLedgerEntryCoder#encode`` as ``DLedgerMmapFileStore#appendAsLeader`` leaves it:
    magic 1, the given index, term and pos; channel and both CRCs 0 (the broker sets none)."""
    return _ENTRY.pack(
        dledger_layout.ENTRY_MAGIC, len(record) + dledger_layout.BODY_OFFSET, index, term, pos, 0, 0, 0, len(record)
    ) + bytes(record)


def encode_blank(left: int) -> bytes:
    """``MmapFileList#preAppend``'s blank: magic -1, the bytes left in the file."""
    return _BLANK.pack(dledger_layout.BLANK_MAGIC, left)


def encode_index_unit(pos: int, size: int, index: int, term: int) -> bytes:
    """``DLedgerEntryCoder#encodeIndex``."""
    return _UNIT.pack(dledger_layout.ENTRY_MAGIC, pos, size, index, term)


class EntryWriter:
    """The DLedger half of the commit log's writer (``generate --dledger``): what
    ``DLedgerMmapFileStore#appendAsLeader`` adds around each record — the entry (index, the
    current term, its pos), a blank where the next entry and ``MIN_BLANK_LEN`` no longer fit
    (``MmapFileList#preAppend``), the ``index/`` unit — and ``checkpoint`` and ``currterm``
    (``persistCheckPoint``, ``MemberState#persistTerm``) when closed."""

    def __init__(self, config, queue):
        from rmqstore_cli.store.files.mapped_files import MappedFileQueue

        self.dir = dledger_dir(config)
        self.roots = config.write_roots
        queue.dirs = [data_dir(config)]  # new data files go to data/, the old commitlog/ stays as it is
        self.units = MappedFileQueue(self.dir / "index", dledger_layout.INDEX_FILE_SIZE, True, roots=self.roots)
        self.term = current_term(self.dir) or 0
        self.vote = config.dleger_self_id or self.dir.name.partition("-")[2]
        self.next_index = 0

    def resume(self, last: Entry | None) -> None:
        """Continue after the log's last entry (``DLedgerMmapFileStore#recover``)."""
        if last is not None and last.magic == dledger_layout.ENTRY_MAGIC:
            self.next_index = last.index + 1
            self.term = max(self.term, last.term)

    @staticmethod
    def fits(size: int, left: int) -> bool:
        """``MmapFileList#preAppend``: an entry of ``size`` bytes fits the ``left`` bytes of a file."""
        return size + dledger_layout.MIN_BLANK_LEN <= left

    def frame(self, record: bytes | bytearray, pos: int) -> bytes:
        """The entry of ``record`` at data position ``pos``; its index unit written."""
        data = encode_entry(record, self.next_index, self.term, pos)
        at = self.next_index * dledger_layout.INDEX_UNIT_SIZE
        f = self.units.get_last_mapped_file(at)
        f.write(at - f.file_from_offset, encode_index_unit(pos, len(data), self.next_index, self.term))
        self.next_index += 1
        return data

    def close(self) -> None:
        """Flush ``index/``; ``checkpoint`` (end = committed: a leader alone commits at once) and
        ``currterm`` in the broker's property order."""
        from rmqstore_cli.store.files.safefs import replace_file

        self.units.close()
        last = self.next_index - 1
        replace_file(
            self.dir / dledger_layout.CHECKPOINT_FILE,
            f"{dledger_layout.COMMITTED_INDEX_KEY}={last}\n{dledger_layout.END_INDEX_KEY}={last}\n".encode(),
            self.roots,
        )
        replace_file(
            self.dir / dledger_layout.TERM_FILE,
            f"{dledger_layout.VOTE_KEY}={self.vote}\n{dledger_layout.TERM_KEY}={self.term}\n".encode(),
            self.roots,
        )


# ------------------------------------------------------------------ checkpoint, currterm


def read_properties_file(path: Path) -> dict[str, str] | None:
    """``IOUtils#string2Properties`` of ``checkpoint`` or ``currterm`` (``key=value`` lines);
    None when absent or unreadable (not a regular file, too big): verify reports the value
    missing, nothing raises."""
    from rmqstore_cli.store.files.safefs import read_bounded

    try:
        text = read_bounded(path, _PROPS_LIMIT, path.name).decode("latin-1")
    except (StoreError, OSError):
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith(("#", "!")):
            out[key.strip()] = value
    return out


def committed_index(dl_dir: Path) -> tuple[int | None, int | None]:
    """(endIndex, committedIndex) of ``<dledger dir>/checkpoint`` (``persistCheckPoint``)."""
    props = read_properties_file(dl_dir / dledger_layout.CHECKPOINT_FILE) or {}
    out = []
    for key in (dledger_layout.END_INDEX_KEY, dledger_layout.COMMITTED_INDEX_KEY):
        try:
            out.append(int(props[key].strip()))
        except (KeyError, ValueError):
            out.append(None)
    return out[0], out[1]


def current_term(dl_dir: Path) -> int | None:
    """``currTerm`` of ``<dledger dir>/currterm`` (``MemberState#loadTerm``)."""
    props = read_properties_file(dl_dir / dledger_layout.TERM_FILE) or {}
    try:
        return int(props[dledger_layout.TERM_KEY].strip())
    except (KeyError, ValueError):
        return None
