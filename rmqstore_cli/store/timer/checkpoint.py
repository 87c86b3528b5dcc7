"""``config/timercheck``: the timer's progress (``TimerCheckpoint``, 5.3.3).

Seven big-endian longs at the start of a 4096-byte file: the read time the dequeue had
reached, the timer log's flushed position, the ``rmq_sys_wheel_timer`` queue offset enqueued
up to (and the master's), then the DataVersion. An older file with only the first four
longs reads as the broker reads it (``#hasRemaining`` is always true on the mapped page,
so the version longs are then zeros).
"""

from __future__ import annotations

import os
import struct
from dataclasses import astuple, dataclass
from pathlib import Path

from rmqstore_cli.formats.timer import CHECKPOINT_FILE_SIZE, CHECKPOINT_FORMAT, CHECKPOINT_MIN_SIZE, CHECKPOINT_SIZE

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import open_read_only, os_error, replace_file

_CP = struct.Struct(CHECKPOINT_FORMAT)


@dataclass
class TimerCheckpoint:
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    @classmethod
    def read(cls, path: Path) -> TimerCheckpoint:
        """``TimerCheckpoint(String)``: the longs at 0..48; a file shorter than the first four
        longs is an error naming it (the broker would map zeros past its end)."""
        fd = open_read_only(path)
        try:
            try:
                data = os.pread(fd, CHECKPOINT_SIZE, 0)
            except OSError as e:
                raise os_error(e, path, "read") from None
        finally:
            os.close(fd)
        if len(data) < CHECKPOINT_MIN_SIZE:
            raise StoreError(
                f"timer checkpoint has {len(data)} bytes, fewer than its {CHECKPOINT_MIN_SIZE} bytes of positions",
                path=path,
                offset=len(data),
            )
        return cls(*_CP.unpack(data.ljust(CHECKPOINT_SIZE, b"\0")))

    def as_dict(self) -> dict:
        """The fields under expected.json's names (``TimerCheckpoint`` getters)."""
        return {
            "lastReadTimeMs": self.last_read_time_ms,
            "lastTimerLogFlushPos": self.last_timer_log_flush_pos,
            "lastTimerQueueOffset": self.last_timer_queue_offset,
            "masterTimerQueueOffset": self.master_timer_queue_offset,
            "dataVersion": {"stateVersion": self.state_version, "timestamp": self.timestamp, "counter": self.counter},
        }

    def write(self, path: Path, roots: list[Path]) -> None:
        """``TimerCheckpoint#flush`` into a fresh 4096-byte page, written beside and renamed."""
        replace_file(path, _CP.pack(*astuple(self)).ljust(CHECKPOINT_FILE_SIZE, b"\0"), roots)
