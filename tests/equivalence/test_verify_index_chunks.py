"""verify's index structure check works in bounded chunks of slots and entries (its memory
does not grow with the index file): any chunk size gives the findings of one chunk, on a
clean store and on index files damaged in every way the structure check reports."""

from __future__ import annotations

import json
import struct

import pytest

from tests.helpers import SMALL, cli, needs_c
from tests.helpers.rawstore import records

pytestmark = pytest.mark.slow  # default-size index files, ~100 s of CPU

SLOTS = 64
ENTRIES_BASE = 40 + SLOTS * 4


def _verify(store, *extra):
    r = cli("verify", "--store", store, *SMALL, "--format", "jsonl", *extra)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert lines and "summary" in lines[-1], r.stdout + r.stderr
    summary = lines[-1]["summary"]
    summary.pop("c_extensions")  # which loops ran: the one field that differs between them
    return lines[:-1], summary


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

    def at(k: int) -> int:
        return ENTRIES_BASE + k * 20

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
    monkeypatch.setattr(V.limits, "INDEX_CHUNK", 1 << 30)
    monkeypatch.setattr(V.limits, "INDEX_TARGETS", 1 << 30)
    whole, s_whole = _verify(small_store, *extra)
    checks = {f["check"] for f in whole}
    if damaged:
        assert {
            "index.chain",
            "index.slot",
            "index.orphan",
            "index.entry",
            "index.header",
            "index.order",
            "index.tail",
            "index.slot-count",
        } <= checks
        assert s_whole["findings"]["index.chain"] >= 6
    else:
        assert not any(c.startswith("index.") for c in checks)
    for chunk, targets in ((1, 1), (3, 5), (7, 2), (16, 64), (64, 7)):
        monkeypatch.setattr(V.limits, "INDEX_CHUNK", chunk)
        monkeypatch.setattr(V.limits, "INDEX_TARGETS", targets)
        got, s_got = _verify(small_store, *extra)
        assert got == whole, (chunk, targets)
        assert s_got == s_whole


# ---------------------------------------------------------------- compiled walk and CRC


def _commitlog_damage(store) -> None:
    """Record damage the walk and the CRC meet: flipped body bytes, a wrong size, a bad
    magic code, a run of zeros inside the data, a torn last file."""
    names = sorted((store / "commitlog").iterdir())
    recs = [(store / "commitlog" / name, pos, total) for name, pos, total, _ in records(store)]
    for k in (5, 40, 41, 400):  # a body byte
        p, pos, total = recs[k]
        data = p.read_bytes()
        sys_flag = struct.unpack_from(">i", data, pos + 36)[0]
        at = pos + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
        length = struct.unpack_from(">i", data, at)[0]
        assert length > 2
        _patch(p, at + 4 + length // 2, ">B", data[at + 4 + length // 2] ^ 0x21)
    p, pos, total = recs[90]
    _patch(p, pos, ">i", total + 3)  # a size that does not fit the fields
    p, pos, total = recs[150]
    _patch(p, pos + 4, ">I", 0x11223344)  # a bad magic code
    p, pos, total = recs[220]
    with open(p, "r+b") as fh:  # zeros over two records
        fh.seek(pos)
        fh.write(bytes(recs[221][2] + total))
    last = names[-1]
    size = last.stat().st_size
    with open(last, "r+b") as fh:  # a torn tail
        fh.seek(size // 2)
        fh.write(bytes(3000))


@pytest.mark.parametrize("damaged", [False, True])
def test_compiled_walk_and_crc_give_the_same_findings(small_store, monkeypatch, damaged):
    """verify's C loops (store/files/kernels.py: the walk, small bodies' CRC, PROPERTIES joined) find
    what the Python walk and zlib find, clean and damaged, with bodies on both sides of SMALL_BODY."""
    needs_c()
    from rmqstore_cli.store.files import kernels as K
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    if damaged:
        _commitlog_damage(small_store)
    monkeypatch.setattr(FAST_PATHS, "pure", True)
    ref, s_ref = _verify(small_store, "--deep", "--max-findings", "1000")
    if damaged:
        assert {"commitlog.body-crc", "commitlog.total-size", "commitlog.magic"} <= {f["check"] for f in ref}
    else:
        assert ref == []
    monkeypatch.setattr(FAST_PATHS, "pure", False)
    for small in (K.SMALL_BODY, 200, 1 << 20):
        monkeypatch.setattr(K, "SMALL_BODY", small)
        got, s_got = _verify(small_store, "--deep", "--max-findings", "1000")
        assert got == ref and s_got == s_ref, small


def test_kernel_crc_is_zlib_crc():
    needs_c()
    import zlib

    import numpy as np

    from rmqstore_cli.store.files import kernels as K

    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, 5000, dtype=np.uint8)
    at = rng.integers(0, 4000, 300).astype(np.int64)
    ln = rng.integers(0, 1000, 300).astype(np.int64)
    out = np.full(300, -1, np.int64)
    big = K.small_body_crcs(a, at, ln, 600, out)
    small = ln < 600
    assert big == int((~small).sum())
    want = [zlib.crc32(a[x : x + n].tobytes()) & 0x7FFFFFFF for x, n in zip(at.tolist(), ln.tolist(), strict=True)]
    assert out[small].tolist() == [w for w, s in zip(want, small.tolist(), strict=True) if s]
    assert (out[~small] == -1).all()
