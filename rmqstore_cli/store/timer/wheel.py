"""``timerwheel``: 2 × slotsTotal slots of 32 bytes (``TimerWheel``, 5.3.3).

Slot ``i`` holds the chain of the messages due at a time ``t`` with
``t / precisionMs % (2 * slotsTotal) == i`` (``TimerWheel#getSlotIndex``); the slot stores
``t / precisionMs``, so a slot whose time maps elsewhere, or is another lap's, is no slot
of ``t`` (``TimerWheel#getSlot`` answers ``-1``). The default wheel is 38.7 MB, mostly holes:
:meth:`TimerWheel.slots` reads only the file's data segments, vectorised.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats.timer import NO_POS, SLOT_FORMAT, SLOT_SIZE, SLOTS_TOTAL, wheel_file_size

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import data_segments, map_file, open_read_only

_SLOT = struct.Struct(SLOT_FORMAT)


@dataclass(frozen=True)
class Slot:
    """``Slot``: ``time_ms`` is the stored time times the precision (``TimerWheel#getRawSlot``)."""

    index: int
    time_ms: int
    first_pos: int
    last_pos: int
    num: int
    magic: int


class TimerWheel:
    """The wheel file read-only (or, for the writer, built in memory and written whole)."""

    def __init__(self, path: Path, precision_ms: int, slots_total: int = SLOTS_TOTAL):
        self.path = Path(path)
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        self.length = wheel_file_size(slots_total)
        self._mm = None

    # ------------------------------------------------------------- geometry
    def slot_index(self, time_ms: int) -> int:
        """``TimerWheel#getSlotIndex``."""
        return time_ms // self.precision_ms % (self.slots_total * 2)

    def check_size(self) -> int:
        """The file's length; ``TimerWheel``'s constructor throws (the broker does not start)
        when a non-empty wheel is not ``slotsTotal * 2 * 32`` bytes."""
        fd = open_read_only(self.path)
        try:
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size not in (0, self.length):
            raise StoreError(
                f"timer wheel has {size} bytes, expected {self.length} "
                f"(slotsTotal {self.slots_total} x 2 x {SLOT_SIZE}): the broker refuses it "
                '(TimerWheel: "Timer wheel length ... != expected")',
                path=self.path,
            )
        return size

    def _buffer(self):
        if self._mm is None:
            size = self.check_size()
            fd = open_read_only(self.path)
            try:
                self._mm = map_file(fd, size, self.path) if size else b""
            finally:
                os.close(fd)
        return self._mm

    # ------------------------------------------------------------- per record
    def raw_slot(self, index: int) -> Slot:
        """``TimerWheel#getRawSlot`` of the slot at ``index`` (a zero slot where the file is empty)."""
        buf = self._buffer()
        at = index * SLOT_SIZE
        if at + SLOT_SIZE > len(buf):
            return Slot(index, 0, 0, 0, 0, 0)
        t, first, last, num, magic = _SLOT.unpack_from(buf, at)
        return Slot(index, t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot | None:
        """``TimerWheel#getSlot``: the slot of ``time_ms``, None when the slot holds another time."""
        s = self.raw_slot(self.slot_index(time_ms))
        return s if s.time_ms == time_ms // self.precision_ms * self.precision_ms else None

    # ------------------------------------------------------------- in bulk
    def slots(self):
        """Every non-zero slot as a numpy record array (fields of ``SLOT_DTYPE`` plus
        ``index``), in index order; only the file's data segments are read."""
        import numpy as np
        from rmqstore_cli.formats.timer import SLOT_DTYPE, SLOT_WORD, SLOT_WORDS

        buf = self._buffer()
        parts = []
        for a, b in data_segments(self.path, 0, len(buf)):
            a, b = a - a % SLOT_SIZE, -(-b // SLOT_SIZE) * SLOT_SIZE
            words = np.frombuffer(buf, SLOT_WORD, count=(b - a) // 8, offset=a).reshape(-1, SLOT_WORDS)
            hit = np.flatnonzero(words.any(axis=1))
            if hit.size:
                parts.append(
                    (a // SLOT_SIZE + hit, np.frombuffer(buf, SLOT_DTYPE, count=(b - a) // SLOT_SIZE, offset=a)[hit])
                )
        return _with_index(parts, SLOT_DTYPE)


def _with_index(parts, slot_dtype):
    import numpy as np
    from numpy.lib import recfunctions as rfn

    if not parts:
        out = np.zeros(0, slot_dtype)
        idx = np.zeros(0, np.int64)
    else:
        idx = np.concatenate([p[0] for p in parts]).astype(np.int64)
        out = np.concatenate([p[1] for p in parts])
    return rfn.append_fields(out, "index", idx, usemask=False)


class WheelWriter:
    """The wheel in memory as ``TimerMessageStore`` keeps it (``TimerWheel``'s direct buffer),
    written as the broker's flush leaves the file: full length, zero where never put."""

    def __init__(self, precision_ms: int, slots_total: int = SLOTS_TOTAL):
        self.precision_ms = precision_ms
        self.slots_total = slots_total
        self.slots: dict[int, list[int]] = {}

    def get_slot(self, time_ms: int) -> tuple[int, int, int, int]:
        """``TimerWheel#getSlot``: (first, last, num, magic), or the BLANK slot."""
        t = time_ms // self.precision_ms
        s = self.slots.get(t % (self.slots_total * 2))
        if s is None or s[0] != t:
            return NO_POS, NO_POS, 0, 0
        return s[1], s[2], s[3], s[4]

    def put_slot(self, time_ms: int, first: int, last: int, num: int, magic: int) -> None:
        """``TimerWheel#putSlot`` (five-argument form)."""
        t = time_ms // self.precision_ms
        self.slots[t % (self.slots_total * 2)] = [t, first, last, num, magic]

    def write(self, path: Path, roots: list[Path]) -> None:
        """The whole file (``TimerWheel#flush`` writes every changed byte of the full length),
        written beside and renamed into place."""
        from rmqstore_cli.store.files.safefs import replace_file

        data = bytearray(wheel_file_size(self.slots_total))
        for index, fields in self.slots.items():
            _SLOT.pack_into(data, index * SLOT_SIZE, *fields)
        replace_file(path, data, roots)
