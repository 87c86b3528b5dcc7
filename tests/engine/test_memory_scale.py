"""verify's and rebuild-index's memory is bounded by a file, not by the store (issue 22,
"memory grows with messages"): what verify keeps per queue and per index file while
scanning does not grow with the number of messages (and keeping it small changes no
finding); rebuild-index keeps no page of an index file it has filled."""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

from tests.helpers import SMALL, cli, generate

# One topic, one queue, files big enough that neither the queue nor the index rolls over:
# all the messages land in one consume queue and one index file.
ONE_QUEUE = [
    "--topics",
    "1",
    "--queues",
    "1",
    "--commitlog-file-size",
    "1048576",
    "--cq-file-size",
    "800000",
    "--index-slots",
    "4096",
    "--index-max",
    "200000",
    "--delay-ratio",
    "0",
    "--transaction-ratio",
    "0",
    "--body-size",
    "16",
]
SIZES = [
    "--commitlog-file-size",
    "1048576",
    "--cq-file-size",
    "800000",
    "--index-slots",
    "4096",
    "--index-max",
    "200000",
]


def _held(x) -> int:
    """Bytes a marks structure holds (a bool array before issue 22, :class:`Marks` after)."""
    n = getattr(x, "nbytes", 0)
    return n() if callable(n) else int(n)


def _index_state(f) -> int:
    """Bytes an index file holds for the check of records against entries."""
    arrays = [getattr(f, k, None) for k in ("phy", "hash", "sorted_phy", "order", "_wphy", "_whash")]
    return _held(f.checked) + sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def _scan_state(store, monkeypatch) -> tuple[int, int, int]:
    """(largest per-queue marks, largest per-index-file state during the scan, messages) of
    a verify of ``store`` with batches of 256 records and index chunks of 512 entries."""
    from rmqstore_cli.store import verify as V
    from rmqstore_cli.store.layout.config import StoreConfig

    monkeypatch.setattr(V.limits, "BATCH", 256)
    monkeypatch.setattr(V.limits, "INDEX_CHUNK", 512)
    cfg = V.open_for_verify(
        StoreConfig.load(
            store,
            None,
            mapped_file_size_commit_log=1048576,
            mapped_file_size_consume_queue=800000,
            max_hash_slot_num=4096,
            max_index_num=200000,
        )
    )
    v = V.Verifier(cfg, V.VerifyOptions())
    peak = {"q": 0, "i": 0}
    real_batch, real_finish = v.check_index_batch, v.finish_queues

    def batch(*a):
        real_batch(*a)
        peak["i"] = max([peak["i"]] + [_index_state(f) for f in v.index_files])

    def finish():
        peak["q"] = max(_held(mq.matched) for mq in v.queues.values())
        real_finish()

    v.check_index_batch, v.finish_queues = batch, finish
    findings = [f.as_dict() for f in v.run()]
    assert v.ok and not findings, findings[:3]
    assert len(v.queues) == 1 and len(v.index_files) == 1
    return peak["q"], peak["i"], v.messages


def test_scan_state_per_queue_and_index_file_does_not_grow_with_messages(tmp_path, monkeypatch):
    """10x the messages in one queue and one index file: the per-queue marks and the per-index-
    file state (marks, entries read for the scan) stay the same size. Before issue 22 the queue
    kept a byte per unit and the index file 13 bytes per entry (its whole arrays)."""
    small = generate(tmp_path / "small", *ONE_QUEUE, messages=1500, small=False)
    big = generate(tmp_path / "big", *ONE_QUEUE, messages=15000, small=False)
    q1, i1, n1 = _scan_state(small, monkeypatch)
    q2, i2, n2 = _scan_state(big, monkeypatch)
    assert (n1, n2) == (1500, 15000)
    assert q2 <= max(q1, 64), (q1, q2)  # one run [0, n) either way
    # the window: a batch's entries (256 records x 3 keys) plus one chunk read ahead, 12 bytes each
    assert i2 <= (3 * 256 + 2 * 512) * 12 + 1024, (i1, i2)


def test_marks_match_a_bool_array():
    """Marks answers like the bool array it replaces, for marks in order, out of order, as
    slices, repeated, and scattered enough to become a byte array."""
    from rmqstore_cli.store.verify import Marks

    rng = np.random.default_rng(22)
    for size, scattered in ((5000, False), (5000, True), (70000, True)):
        m, ref = Marks(size), np.zeros(size, bool)
        m.PENDING = 7  # merge often
        pos = 0
        while pos < size:
            step = int(rng.integers(1, 300))
            if scattered and rng.random() < 0.5:
                idx = rng.integers(0, size, int(rng.integers(1, 50)))
            elif rng.random() < 0.2:
                idx = slice(pos, min(size, pos + step))
            else:
                idx = np.arange(pos, min(size, pos + step))
            m[idx] = True
            ref[idx] = True
            pos += step + int(rng.integers(0, 3))  # small gaps: units no record accounted for
        for a, b in ((0, size), (0, 1), (size - 1, size), (123, 4567), (size // 2, size)):
            assert np.array_equal(m.unmarked(a, b), np.flatnonzero(~ref[a:b]) + a), (size, scattered, a, b)
    with pytest.raises(ValueError):
        Marks(3)[0] = False


def test_marks_in_order_hold_one_run():
    """A queue the scan meets in order: a million units marked in batches hold one run."""
    from rmqstore_cli.store.verify import Marks

    m = Marks(1_000_000)
    for a in range(0, 1_000_000, 1000):
        m[np.arange(a, a + 1000)] = True
    assert m.unmarked(0, 1_000_000).size == 0
    assert m.nbytes() <= 16 and m.bits is None


def _damage(store):
    """Units and index entries that no record accounts for, spread over the files."""
    cq = store / "consumequeue"
    qdir = sorted(p for t in cq.iterdir() for p in t.iterdir())[0]
    first = sorted(qdir.iterdir())[0]
    with open(first, "r+b") as fh:  # unit 3 points into the middle of a record; unit 7 elsewhere
        fh.seek(3 * 20)
        off = struct.unpack(">q", fh.read(8))[0]
        fh.seek(3 * 20)
        fh.write(struct.pack(">q", off + 1))
        fh.seek(7 * 20)
        fh.write(struct.pack(">q", 0))
    names = sorted(os.listdir(store / "commitlog"))
    os.remove(store / "commitlog" / names[len(names) // 2])  # units and entries into a missing file
    idx = sorted((store / "index").iterdir())[0]
    base = 40 + 64 * 4
    with open(idx, "r+b") as fh:  # an entry one byte into its record
        fh.seek(base + 5 * 20 + 4)
        phy = struct.unpack(">q", fh.read(8))[0]
        fh.seek(base + 5 * 20 + 4)
        fh.write(struct.pack(">q", phy + 1))


@pytest.mark.slow
@pytest.mark.parametrize("damage", [False, True])
def test_small_chunks_and_windows_give_the_same_findings(small_store, monkeypatch, damage):
    """Windows, chunks and merges at their smallest (every boundary crossed many times) and
    the whole-file path (no streaming) give the default run's findings and summary."""
    from rmqstore_cli.store import verify as V

    if damage:
        _damage(small_store)

    def run():
        r = cli("verify", "--store", small_store, *SMALL, "--format", "jsonl", "--max-findings", "1000", "--deep")
        return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]

    want = run()
    monkeypatch.setattr(V.limits, "INDEX_CHUNK", 3)
    monkeypatch.setattr(V.limits, "UNIT_CHUNK", 5)
    monkeypatch.setattr(V.Marks, "PENDING", 2)
    assert run() == want
    monkeypatch.setattr(V.Verifier, "stream_index_files", False)
    assert run() == want
    if damage:
        checks = {f["check"] for f in want[:-1]}
        assert {"cq.unit-target", "index.entry-target", "commitlog.gap"} <= checks, checks


def _resident_kib(paths: set[str]) -> dict[str, int]:
    """Resident KiB of this process's mappings of ``paths`` (/proc/self/smaps)."""
    out: dict[str, int] = {}
    current = None
    with open("/proc/self/smaps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5 and not line.startswith(("Rss", "Size")):
                current = head[5] if len(head) > 5 and head[5] in paths else None
            elif current is not None and line.startswith("Rss:"):
                out[current] = out.get(current, 0) + int(line.split()[1])
    return out


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs /proc/self/smaps")
def test_rebuild_keeps_no_page_of_a_full_index_file(small_store, tmp_path):
    """After each block, every index file the rebuild has filled has no page resident in the
    process (its slots were touched at random: 20 MB a default file stayed resident, one more
    set per 20 M keys); the last file keeps at most its slots and header."""
    import datetime

    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.rebuild_reference import build_set

    cfg = StoreConfig.load(
        small_store,
        None,
        mapped_file_size_commit_log=65536,
        mapped_file_size_consume_queue=2000,
        max_hash_slot_num=64,
        max_index_num=400,
    )
    dest = tmp_path / "out"
    seen = []

    def progress(files, done, total, messages):
        index = dest / "index"
        names = sorted(p.name for p in index.iterdir()) if index.is_dir() else []
        paths = {str(index / n) for n in names}
        rss = _resident_kib(paths)
        full = [str(index / n) for n in names[:-1]]
        seen.append(len(full))
        assert all(rss.get(p, 0) == 0 for p in full), {p: rss.get(p) for p in full}

    rep = build_set(cfg, dest, RebuildOptions(tz=datetime.timezone.utc), progress)
    assert rep.index_files >= 3 and max(seen) >= 2, (rep.index_files, seen)


def test_queue_units_at_skips_files_with_no_unit_asked(tmp_path):
    """units_at over units in the first and third file of a queue (none in the second): the
    units as the files hold them, each file's pages released after its units are copied."""
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue

    store = generate(tmp_path / "s", "--topics", "1", "--queues", "1", messages=400)
    qdir = next(p for t in (store / "consumequeue").iterdir() for p in t.iterdir())
    files = sorted(qdir.iterdir())
    assert len(files) >= 3
    mq = ConsumeQueue(store / "consumequeue", qdir.parent.name, int(qdir.name), 2000, directory=qdir)
    want = [(0, 1), (2, 7)]  # (file number, unit in it)
    L = np.array([n * 100 + u for n, u in want], np.int64)
    found, off, size, tags = mq.units_at(L)
    mq.close()
    assert found.all()
    for j, (n, u) in enumerate(want):
        o, s, t = struct.unpack_from(">qiq", files[n].read_bytes(), u * 20)
        assert (int(off[j]), int(size[j]), int(tags[j])) == (o, s, t)
