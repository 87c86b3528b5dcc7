"""The 5.x controller-mode epoch file (docs/format/ha.md#epoch-file): read as the broker reads
it, written as the broker writes it, and held against the commit log.

``CheckpointFile#read`` is followed line by line: a count line and a CRC line parsed with
``Integer#parseInt``, entry lines parsed by ``EpochFileCache.EpochEntrySerializer#fromLine``
(``line.split("-")``, two parts or the line is skipped), the entries' count and CRC compared,
and, when the file is missing, empty or rejected, the ``.bak`` read instead
(``CheckpointFile#read()``). ``EpochFileCache#initEntries`` then keys the entries by epoch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.formats.epoch_file import (
    BACKUP_SUFFIX,
    CRC_MASK,
    EPOCH_FILE_NAME,
    FIELD_SEPARATOR,
    INT_MAX,
    INT_MIN,
    JAVA_INT_TEXT,
    LINE_SEPARATOR,
    LONG_MAX,
    LONG_MIN,
    NOT_CHECK_CRC,
    READLINE_BREAKS,
)

from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.files.safefs import open_read_only


@dataclass(frozen=True)
class EpochEntry:
    """One ``EpochEntry``: the epoch and the commit-log offset its master started writing at;
    ``line`` is its 1-based line in the file."""

    epoch: int
    start_offset: int
    line: int = 0


@dataclass(frozen=True)
class EpochFileRead:
    """One file as ``CheckpointFile#read(String)`` reads it. ``problem`` is why the broker
    rejects it (then it reads the ``.bak``); ``fatal`` marks a NumberFormatException, which
    ``CheckpointFile#read()`` does not catch (it catches IOException), so no ``.bak`` is tried."""

    path: Path
    exists: bool
    entries: tuple[EpochEntry, ...] = ()
    declared: int | None = None
    stored_crc: int | None = None
    crc: int = 0
    skipped_lines: tuple[int, ...] = ()
    problem: str | None = None
    fatal: bool = False

    @property
    def accepted(self) -> bool:
        """Whether the broker keeps these entries (a rejected or empty file sends it to the ``.bak``)."""
        return self.exists and self.problem is None and bool(self.entries)


@dataclass(frozen=True)
class EpochFile:
    """The file, its ``.bak``, and which one the broker's ``CheckpointFile#read()`` uses
    (``used``: "file", "bak" or None when neither gives entries)."""

    main: EpochFileRead
    backup: EpochFileRead
    used: str | None = None

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        chosen = {"file": self.main, "bak": self.backup}.get(self.used or "")
        return chosen.entries if chosen is not None else ()


def epoch_file_path(root: Path) -> Path:
    """``MessageStoreConfig#getStorePathEpochFile``: ``<storePathRootDir>/epochFileCheckpoint``."""
    return Path(root) / EPOCH_FILE_NAME


def java_int(text: str | None, low: int = INT_MIN, high: int = INT_MAX) -> int | None:
    """``Integer#parseInt`` (``Long#parseLong`` with the long bounds): None where Java throws."""
    if text is None or not JAVA_INT_TEXT.match(text):
        return None
    v = int(text)
    return v if low <= v <= high else None


def java_split(line: str) -> list[str]:
    """``String#split("-")``: trailing empty strings removed (``"1-5-"`` is two parts)."""
    parts = line.split(FIELD_SEPARATOR)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def read_lines(path: Path) -> list[str] | None:
    """The file's lines as ``BufferedReader#readLine`` returns them (None: no file; one that
    is no regular file or cannot be read is a StoreError, ``safefs.open_read_only``)."""
    if not os.path.exists(path):
        return None
    with open(open_read_only(path), "rb", closefd=True) as fh:
        data = fh.read()
    text = data.decode("utf-8", errors="replace")
    lines = READLINE_BREAKS.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # the last line's separator ends it; it starts no empty line
    return lines


def parse_epoch_file(path: Path, lines: list[str] | None) -> EpochFileRead:
    """``CheckpointFile#read(String)`` over ``lines`` (None: the file does not exist)."""
    if lines is None:
        return EpochFileRead(path, False)
    declared = java_int(lines[0] if lines else None)
    if declared is None:
        return EpochFileRead(path, True, problem="the entry count line is not a Java int", fatal=True)
    stored = java_int(lines[1] if len(lines) > 1 else None)
    if stored is None:
        return EpochFileRead(path, True, declared=declared, problem="the CRC line is not a Java int", fatal=True)
    entries, skipped, bad = _entry_lines(lines)
    if bad is not None:
        return EpochFileRead(path, True, tuple(entries), declared, stored, problem=bad, fatal=True)
    crc = crc32("".join(line + LINE_SEPARATOR for line in lines[2:]).encode("utf-8")) & CRC_MASK
    problem = _count_or_crc_problem(declared, len(entries), stored, crc)
    return EpochFileRead(path, True, tuple(entries), declared, stored, crc, tuple(skipped), problem)


def _entry_lines(lines: list[str]) -> tuple[list[EpochEntry], list[int], str | None]:
    """The entries from line 3 on, the numbers of lines skipped (not two fields: the broker skips
    them too), and the problem of the first line whose fields are no number (the broker's read
    fails there; the entries before it are kept)."""
    entries: list[EpochEntry] = []
    skipped: list[int] = []
    for n, line in enumerate(lines[2:], start=3):
        parts = java_split(line)
        if len(parts) != 2:
            skipped.append(n)
            continue
        epoch, start = java_int(parts[0]), java_int(parts[1], LONG_MIN, LONG_MAX)
        if epoch is None or start is None:
            return entries, skipped, f"line {n} {line!r} is no number"
        entries.append(EpochEntry(epoch, start, n))
    return entries, skipped, None


def _count_or_crc_problem(declared: int, found: int, stored: int, crc: int) -> str | None:
    """Why the broker would not accept the file: the entry count first, then the CRC (unless it is
    the no-check value), as ``CheckpointFile#read`` checks them."""
    if found != declared:
        return f"{declared} entries declared, {found} found"
    if stored != NOT_CHECK_CRC and stored != crc:
        return f"CRC {stored} stored, {crc} computed"
    return None


def read_epoch_file(root: Path) -> EpochFile:
    """The epoch file and its ``.bak``, and which the broker would load (``CheckpointFile#read()``)."""
    path = epoch_file_path(root)
    bak = path.with_name(path.name + BACKUP_SUFFIX)
    main = parse_epoch_file(path, read_lines(path))
    backup = parse_epoch_file(bak, read_lines(bak))
    if main.fatal:
        return EpochFile(main, backup, None)
    if main.accepted:
        return EpochFile(main, backup, "file")
    return EpochFile(main, backup, "bak" if backup.accepted else None)


def encode_epoch_file(entries: list[tuple[int, int]], crc: int | None = None) -> bytes:
    """The bytes ``CheckpointFile#write`` writes for ``entries`` ((epoch, start offset), in
    order); ``crc`` overrides the computed CRC (a damaged file for tests, or 0: unchecked)."""
    body = "".join(f"{e}{FIELD_SEPARATOR}{s}{LINE_SEPARATOR}" for e, s in entries)
    value = crc32(body.encode("utf-8")) & CRC_MASK if crc is None else crc
    return f"{len(entries)}{LINE_SEPARATOR}{value}{LINE_SEPARATOR}{body}".encode()


@dataclass(frozen=True)
class EpochSpan:
    """An epoch's part of the log: [start, end), end the next epoch's start or the log's end
    (``EpochFileCache#setLastEpochEntryEndOffset`` with ``getMaxPhyOffset``)."""

    epoch: int
    start_offset: int
    end_offset: int

    @property
    def bytes(self) -> int:
        return max(0, self.end_offset - self.start_offset)


@dataclass(frozen=True)
class EpochIssue:
    """A finding about the epoch file: its check name, the line (or None), the detail."""

    check: str
    file: str
    line: int | None
    detail: str
    extra: dict = field(default_factory=dict)


def epoch_spans(entries: tuple[EpochEntry, ...], log_end: int) -> list[EpochSpan]:
    """The epochs in the broker's order (``EpochFileCache#initEntries``: a TreeMap by epoch,
    the last entry of an epoch kept), each up to the next start, none past ``log_end`` (an
    epoch starting past it is empty)."""
    by_epoch = {e.epoch: e for e in entries}
    ordered = [by_epoch[k] for k in sorted(by_epoch)]
    nexts = [e.start_offset for e in ordered[1:]] + [log_end]
    return [
        EpochSpan(e.epoch, e.start_offset, max(e.start_offset, min(n, log_end)))
        for e, n in zip(ordered, nexts, strict=True)
    ]
