"""verify's index structure check works in bounded chunks of slots and entries (its memory
does not grow with the index file): any chunk size gives the findings of one chunk, on a
clean store and on index files damaged in every way the structure check reports."""
from __future__ import annotations

import json
import struct

import pytest

from conftest import SMALL, cli

SLOTS = 64
ENTRIES_BASE = 40 + SLOTS * 4


def _verify(store, *extra):
    r = cli("verify", "--store", store, *SMALL, "--format", "jsonl", *extra)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert lines and "summary" in lines[-1], r.stdout + r.stderr
    return lines[:-1], lines[-1]["summary"]


def _patch(path, offset: int, fmt: str, *values) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(struct.pack(fmt, *values))


def _entry(data: bytes, k: int):
    """(keyHash, phyOffset, timeDiff, prevIndex) of entry number ``k``."""
    return struct.unpack_from(">iqii", data, ENTRIES_BASE + k * 20)


def _damage(store) -> None:
    """Structure damage in two index files: loops, links out of range and across slots,
    slots out of range or heading a wrong entry, branches, negative fields, header and
    order faults, and a non-zero tail."""
    files = sorted((store / "index").iterdir())
    assert len(files) >= 3
    path = files[1]
    data = path.read_bytes()
    count = struct.unpack_from(">i", data, 36)[0]
    assert count > 60
    at = lambda k: ENTRIES_BASE + k * 20  # noqa: E731
    _patch(path, at(count // 2) + 16, ">i", count // 2)  # a loop: prev -> itself
    _patch(path, at(10) + 16, ">i", count + 5)  # prev beyond the written entries
    _patch(path, at(11) + 16, ">i", -3)  # negative prev
    # prev to an older entry of another slot
    h20 = _entry(data, 20)[0] % SLOTS
    other = next(k for k in range(1, 20) if _entry(data, k)[0] % SLOTS != h20)
    _patch(path, at(20) + 16, ">i", other)
    # two entries link to the same one: the chain branches (and their old targets are orphans)
    _patch(path, at(30) + 16, ">i", 25)
    _patch(path, at(31) + 16, ">i", 25)
    _patch(path, at(40), ">i", -7)  # negative hash
    _patch(path, at(41) + 12, ">i", -1)  # negative time diff
    _patch(path, at(45) + 4, ">q", 0)  # an offset going backwards
    used = [s for s in range(SLOTS) if struct.unpack_from(">i", data, 40 + 4 * s)[0]]
    _patch(path, 40 + 4 * used[0], ">i", count + 9)  # slot out of range
    _patch(path, 40 + 4 * used[1], ">i", -2)  # negative slot
    # a slot heading an entry of another slot
    e = next(k for k in range(1, count) if _entry(data, k)[0] % SLOTS != used[2])
    _patch(path, 40 + 4 * used[2], ">i", e)
    _patch(path, 16, ">q", 123)  # beginPhyOffset
    _patch(path, 24, ">q", 456)  # endPhyOffset
    last = files[-1]  # the newest file is not full: non-zero bytes after its last entry
    c_last = struct.unpack_from(">i", last.read_bytes(), 36)[0]
    assert c_last + 4 < 400
    _patch(last, ENTRIES_BASE + (c_last + 3) * 20, ">i", 77)
    # a second file: every prev zeroed (all but the slot heads are orphans), a wrong
    # hashSlotCount
    p2 = files[2]
    d2 = p2.read_bytes()
    c2 = struct.unpack_from(">i", d2, 36)[0]
    for k in range(1, c2):
        _patch(p2, at(k) + 16, ">i", 0)
    _patch(p2, 32, ">i", 3)  # hashSlotCount


@pytest.mark.parametrize("damaged", [False, True])
@pytest.mark.parametrize("cap", [1000, 2])
def test_chunked_index_check_gives_the_findings_of_one_chunk(small_store, monkeypatch, damaged, cap):
    from rmqstore_cli.store import verify as V

    if damaged:
        _damage(small_store)
    extra = ["--deep", "--max-findings", str(cap)]
    monkeypatch.setattr(V, "INDEX_CHUNK", 1 << 30)
    monkeypatch.setattr(V, "INDEX_TARGETS", 1 << 30)
    whole, s_whole = _verify(small_store, *extra)
    checks = {f["check"] for f in whole}
    if damaged:
        assert {"index.chain", "index.slot", "index.orphan", "index.entry", "index.header", "index.order",
                "index.tail", "index.slot-count"} <= checks
        assert s_whole["findings"]["index.chain"] >= 6
    else:
        assert not any(c.startswith("index.") for c in checks)
    for chunk, targets in ((1, 1), (3, 5), (7, 2), (16, 64), (64, 7)):
        monkeypatch.setattr(V, "INDEX_CHUNK", chunk)
        monkeypatch.setattr(V, "INDEX_TARGETS", targets)
        got, s_got = _verify(small_store, *extra)
        assert got == whole, (chunk, targets)
        assert s_got == s_whole
