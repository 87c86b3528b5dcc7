"""``timerlog/``: 52-byte units in files of ``mappedFileSizeTimerLog`` (``TimerLog``, 5.3.3).

A file ends with a blank (``TimerLog#append``: size, a zero long, ``BLANK_MAGIC_CODE``) once
the next unit and a blank no longer fit. ``TimerMessageStore#recoverAndRevise`` reads units
at every multiple of 52 from a file's start: a blank ends the file, a unit whose size is
not 52 or whose magic has bits above the low four ends the log (the broker truncates the
rest). :meth:`TimerLog.walk` follows the same rule over every file, vectorised per file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats.timer import (
    BLANK_FORMAT,
    BLANK_MAGIC_CODE,
    MIN_BLANK_LEN,
    UNIT_FORMAT,
    UNIT_SIZE,
    is_magic_ok,
)

from rmqstore_cli.store.files.mapped_files import MappedFileQueue
from rmqstore_cli.store.files.safefs import data_segments

_UNIT = struct.Struct(UNIT_FORMAT)
_BLANK = struct.Struct(BLANK_FORMAT)


@dataclass(frozen=True)
class Unit:
    """One timer-log unit at ``pos`` (``TimerMessageStore#doEnqueue``'s fields)."""

    pos: int
    size: int
    prev_pos: int
    magic: int
    enqueue_time: int
    delay: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int

    @property
    def due_ms(self) -> int:
        """``delayedTime``: the enqueue time plus the delay (``TimerMessageStore#dequeue``)."""
        return self.enqueue_time + self.delay


@dataclass
class LogEnd:
    """Where the walk stopped: ``offset`` (the broker's processOffset) and why."""

    offset: int
    reason: str  # "end" (zeros or no more files) or what was wrong
    file: str | None = None


class TimerLog:
    """The timer-log files, read-only."""

    def __init__(self, directory: Path, file_size: int):
        self.dir = Path(directory)
        self.file_size = file_size
        self.queue = MappedFileQueue(self.dir, file_size)

    @property
    def files(self):
        return self.queue.files

    # ------------------------------------------------------------- per record
    def unit(self, pos: int) -> Unit | None:
        """The unit at ``pos`` (``TimerLog#getTimerMessage``), None when no file holds 52 bytes there."""
        f = self.queue.find(pos)
        if f is None:
            return None
        buf = f.buffer()
        at = pos - f.file_from_offset
        if at < 0 or at + UNIT_SIZE > len(buf):
            return None
        return Unit(pos, *_UNIT.unpack_from(buf, at))

    # ------------------------------------------------------------- in bulk
    def file_units(self, f):
        """The units of one file up to its blank or first bad unit, as a numpy record
        array (``UNIT_DTYPE``), their positions, and why the file's units stop:
        ``"blank"``, ``"full"``, or a reason (the log ends there)."""
        import numpy as np
        from rmqstore_cli.formats.timer import UNIT_DTYPE

        buf = f.buffer()
        n = len(buf) // UNIT_SIZE
        segments = data_segments(f.path, 0, len(buf))  # a preallocated file: its holes read as zeros
        data_end = segments[-1][1] if segments else 0
        if data_end < len(buf):  # the first unit past the data (zeros) still ends the walk
            n = min(n, data_end // UNIT_SIZE + 1)
        arr = np.frombuffer(buf, UNIT_DTYPE, count=n)
        good = (arr["size"] == UNIT_SIZE) & ((arr["magic"] | 0xF) == 0xF)
        bad = np.flatnonzero(~good)
        stop = int(bad[0]) if bad.size else n
        reason = "full"
        if stop < n or n < len(buf) // UNIT_SIZE:
            stop = min(stop, n)
            reason = _stop_reason(buf, stop * UNIT_SIZE)
        elif len(buf) % UNIT_SIZE and len(buf) - n * UNIT_SIZE >= 16:
            reason = _stop_reason(buf, n * UNIT_SIZE)
        pos = f.file_from_offset + np.arange(stop, dtype=np.int64) * UNIT_SIZE
        return arr[:stop], pos, reason

    def walk(self):
        """``TimerMessageStore#recoverAndRevise(0, true)`` over every file: all readable
        units (one record array, positions) and the :class:`LogEnd`."""
        import numpy as np
        from rmqstore_cli.formats.timer import UNIT_DTYPE

        arrays, positions = [], []
        end = LogEnd(self.files[0].file_from_offset if self.files else 0, "end")
        for i, f in enumerate(self.files):
            if i and f.file_from_offset != self.files[i - 1].end_offset:
                end = LogEnd(
                    end.offset, f"no file holds {self.files[i - 1].end_offset}: a timer-log file is missing", f.name
                )
                break
            arr, pos, reason = self.file_units(f)
            arrays.append(arr)
            positions.append(pos)
            done = reason in ("blank", "full")  # the file is used up: on to the next
            end = LogEnd(
                f.file_from_offset + len(arr) * UNIT_SIZE, "end" if done or reason == "zeros" else reason, f.name
            )
            if not done:
                break
        if not arrays:
            return np.zeros(0, UNIT_DTYPE), np.zeros(0, np.int64), end
        return np.concatenate(arrays), np.concatenate(positions), end

    def close(self) -> None:
        self.queue.close()


def _stop_reason(buf, at: int) -> str:
    """Why the unit at ``at`` ends the walk: a blank, zeros (the end of data), or damage."""
    if at + MIN_BLANK_LEN <= len(buf):
        size, _zero, magic = _BLANK.unpack_from(buf, at)
        if magic == BLANK_MAGIC_CODE:
            return "blank"
        if size == 0 and magic == 0:
            return "zeros"
        if size != UNIT_SIZE:
            return f"unit size {size}, not {UNIT_SIZE}"
        if not is_magic_ok(magic):
            return f"unit magic {magic:#x} has bits above the low four"
    return "zeros"


class TimerLogWriter:
    """``TimerLog#append`` for generate: units appended, a blank where a file fills up."""

    def __init__(self, directory: Path, file_size: int, roots: list[Path]):
        self.queue = MappedFileQueue(Path(directory), file_size, writable=True, roots=roots)
        self.file_size = file_size
        last = self.queue.files[-1] if self.queue.files else None
        self.write_pos = last.end_offset if last else 0  # a writer starts a fresh log or a fresh file

    def append(self, unit: tuple) -> int:
        """Append one unit (the fields of ``TimerLogUnit``); its position."""
        at = self.write_pos % self.file_size
        if UNIT_SIZE + MIN_BLANK_LEN > self.file_size - at:
            f = self.queue.get_last_mapped_file(self.write_pos)
            f.write(at, _BLANK.pack(self.file_size - at, 0, BLANK_MAGIC_CODE))
            self.write_pos += self.file_size - at
            at = 0
        f = self.queue.get_last_mapped_file(self.write_pos)
        f.write(at, _UNIT.pack(*unit))
        pos = self.write_pos
        self.write_pos += UNIT_SIZE
        return pos

    def close(self) -> None:
        self.queue.close()
