"""Independent readers and patchers of store files for tests that damage a store on purpose:
``struct`` and the layouts as the broker's Java writes them, never rmqstore's
formats/, so a wrong layout there cannot hide in both."""

from __future__ import annotations

import os
import struct
from pathlib import Path

#: A BatchConsumeQueue / compaction CQ unit, 46 bytes (BatchConsumeQueue#putBatchMessagePositionInfo):
#: offset, size, tags code, store time, base offset, batch size, compacted offset, reserved.
UNIT = ">qiqqqhii"


def records(store: Path) -> list[tuple[str, int, int, int]]:
    """(file name, position, total size, physical offset) of every record of the commit log,
    read with a plain walk of the record sizes (not the verifier's code)."""
    out = []
    for name in sorted(os.listdir(store / "commitlog")):
        data = (store / "commitlog" / name).read_bytes()
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic not in (0xDAA320A7, 0xDAA320AB):
                break
            out.append((name, pos, total, int(name) + pos))
            pos += total
    return out


def patch_unit(path: Path, index: int, **fields: int) -> None:
    """Rewrite fields of the 46-byte unit at ``index`` of a BatchCQ or compaction queue file."""
    names = ["off", "size", "tags", "ts", "base", "batch", "compacted", "reserved"]
    raw = bytearray(path.read_bytes())
    vals = dict(zip(names, struct.unpack_from(UNIT, raw, 46 * index), strict=True))
    vals.update(fields)
    struct.pack_into(UNIT, raw, 46 * index, *(vals[n] for n in names))
    path.write_bytes(bytes(raw))
