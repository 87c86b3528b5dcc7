"""StoreCheckpoint (docs/format/checkpoint.md#checkpoint): three timestamps, plus two offsets on 5.x."""

from __future__ import annotations

import os
import struct
from dataclasses import astuple, dataclass
from pathlib import Path

from rmqstore_cli.formats.checkpoint import CHECKPOINT_FILE_SIZE, CHECKPOINT_V5_FORMAT

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import open_read_only, replace_file

_CP = struct.Struct(CHECKPOINT_V5_FORMAT)


@dataclass
class StoreCheckpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        """``StoreCheckpoint#getMinTimestamp``: min(physic, logics) − 3 s, at least 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        """``#getMinTimestampIndex``: also bounded by the index time (no −3 s)."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    @classmethod
    def read(cls, path: Path) -> StoreCheckpoint:
        try:
            with os.fdopen(open_read_only(path), "rb") as fh:
                data = fh.read(_CP.size)
        except OSError as e:
            raise StoreError(f"cannot read checkpoint: {e.strerror}", path=path) from None
        if len(data) < _CP.size:
            data = data.ljust(_CP.size, b"\0") if len(data) >= 24 else None
            if data is None:
                raise StoreError("checkpoint is shorter than its 24 bytes of timestamps", path=path, offset=0)
        return cls(*_CP.unpack(data))

    def write(self, path: Path, roots: list[Path] | None = None) -> None:
        """A full 4096-byte file, written beside (a fresh ``O_EXCL`` name, so a link planted
        at ``checkpoint.tmp`` is never followed) and renamed into place, inside ``roots``
        (``StoreConfig.write_roots``; default: the checkpoint's directory)."""
        data = _CP.pack(*astuple(self)).ljust(CHECKPOINT_FILE_SIZE, b"\0")
        replace_file(path, data, roots or [path.parent])
