"""verify decomposed by commit-log file, queue and index file (pipeline/verify_tasks.py): the
same findings (capped or not) and summary as the whole-store Verifier, on generated
multi-file stores, damaged ones and several stores at once."""

from __future__ import annotations

import json
import os
import shutil
import struct
from itertools import pairwise
from pathlib import Path

import pytest

from tests.helpers import fast_first, generate, generate_plain, needs_c

SIZES = {
    "mapped_file_size_commit_log": 65536,
    "mapped_file_size_consume_queue": 2000,
    "max_hash_slot_num": 64,
    "max_index_num": 400,
}
MAGIC = bytes.fromhex("DAA320A7")


def _first_record_after(path: Path, at: int) -> int:
    data = path.read_bytes()
    return data.index(MAGIC, at) - 4


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _body_at(path: Path, pos: int) -> int:
    """Start of the body of the record at ``pos`` (IPv4/IPv6 hosts; docs/format/commitlog.md#hosts)."""
    data = path.read_bytes()
    sys_flag = struct.unpack_from(">i", data, pos + 36)[0]
    b = 20 if sys_flag & 0x10 else 8
    s = 20 if sys_flag & 0x20 else 8
    return pos + 48 + b + 8 + s + 4 + 8 + 4


def _cl(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir())


def _damage(store: Path, kind: str) -> None:
    files = _cl(store)
    if kind == "body":  # a flipped body byte in two files
        for f in (files[1], files[3]):
            at = _body_at(f, _first_record_after(f, 20000))
            _patch(f, at + 3, bytes([f.read_bytes()[at + 3] ^ 0x5A]))
    elif kind == "truncated":  # a middle file cut inside a record, and the last one too
        for f in (files[2], files[-1]):
            os.truncate(f, _first_record_after(f, 30000) + 50)
    elif kind == "removed":  # a middle file gone: gap, missing units, index entries into nothing
        files[3].unlink()
    elif kind == "smashed":  # bad magic: resync, unreadable range
        _patch(files[1], _first_record_after(files[1], 10000) + 4, b"\x00\x00\x00\x07")
        _patch(files[-2], _first_record_after(files[-2], 30000), b"\x00\x00\x00\x07")
    elif kind == "cq":  # a queue directory and another queue's middle file gone
        topic = sorted((store / "consumequeue").iterdir())[0]
        shutil.rmtree(topic / "0")
        q = topic / "1"
        middle = sorted(q.iterdir())
        middle[len(middle) // 2].unlink()
    elif kind == "index":  # an entry's hash and a slot broken, plus an abort file
        idx = sorted((store / "index").iterdir())[0]
        base = 40 + 64 * 4
        _patch(idx, base + 20 * 5, struct.pack(">i", 12345))
        _patch(idx, 40 + 4 * 3, struct.pack(">i", 100000))
        (store / "abort").write_bytes(b"")
    elif kind == "noindex":  # index/ lost: index.missing, and the last file torn (its data's end)
        shutil.rmtree(store / "index")
        os.truncate(files[-1], _first_record_after(files[-1], 20000) + 50)
    else:
        raise AssertionError(kind)


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("vmaster") / "store",
        "--delay-ratio",
        "0.1",
        "--transaction-ratio",
        "0.1",
        "--ipv6-ratio",
        "0.1",
        messages=1200,
        seed=3,
    )


@pytest.fixture(scope="module")
def restarted(tmp_path_factory):
    """A queue whose consume queue was lost and whose offsets restarted in a later file
    (DefaultMessageStore#recoverTopicQueueTable): resets found across files."""
    store = generate_plain(tmp_path_factory.mktemp("vrestart") / "store", topics=2, queues=2, messages=300)
    qdir = sorted((store / "consumequeue").iterdir())[0] / "0"
    for f in os.listdir(qdir):
        os.remove(qdir / f)
    generate_plain(store, "--append", "--start", "2026-01-01T02:00:00Z", topics=2, queues=2, messages=120, seed=9)
    return store


def _specs(*stores):
    from rmqstore_cli.pipeline.stores import store_specs

    return store_specs([str(s) for s in stores], None, SIZES)


def _key(f):
    return json.dumps(f, sort_keys=True)


def _same(got: list[dict], want: list[dict]) -> None:
    assert [r["summary"] for r in got] == [r["summary"] for r in want]
    assert [r["ok"] for r in got] == [r["ok"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert sorted(map(_key, g["findings"])) == sorted(map(_key, w["findings"]))


def _check(stores, caps=(None, 2)):
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    specs = _specs(*stores)
    for cap in caps:
        for deep in (False, True):
            want = [verify_store(s, True, deep, cap) for s in specs]
            got = verify_stores(specs, True, deep, cap)
            _same(got, want)
    return want


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["body", "truncated", "removed", "smashed", "cq", "index", "noindex"])
def test_decomposed_verify_finds_what_the_verifier_finds(master, tmp_path, kind):
    store = tmp_path / kind
    shutil.copytree(master, store)
    _damage(store, kind)
    want = _check([store])
    checks = {f["check"] for f in want[0]["findings"]}
    expected = {
        "body": "commitlog.body-crc",
        "truncated": "commitlog.truncated",
        "removed": "commitlog.gap",
        "smashed": "commitlog.magic",
        "cq": "cq.missing-unit",
        "index": "index.entry-hash",
        "noindex": "index.missing",
    }[kind]
    assert expected in checks and not want[0]["ok"]


@pytest.mark.slow
def test_clean_store_and_two_stores_at_once(master, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(master, damaged)
    _damage(damaged, "smashed")
    want = _check([master, damaged], caps=(None, 1))
    assert want[0]["ok"] and not want[0]["findings"]
    assert want[0]["summary"]["messages"] >= 1200 and want[0]["summary"]["files"]["commitlog"] > 5
    assert {f["store"] for f in want[1]["findings"]} == {str(damaged)}


def test_queue_offsets_restarting_in_a_later_file(restarted):
    want = _check([restarted], caps=(None, 1, 3))
    checks = {f["check"] for f in want[0]["findings"]}
    assert {"commitlog.queue-offset-reset", "cq.superseded"} <= checks


@pytest.mark.slow
def test_caps_keep_the_first_findings_in_the_local_order(master, tmp_path):
    """Many findings of one check spread over files and queues (a deleted topic's queues):
    with a cap the same first ones are shown as by the whole-store run, and all are counted."""
    store = tmp_path / "s"
    shutil.copytree(master, store)
    for t in sorted((store / "consumequeue").iterdir())[:2]:
        shutil.rmtree(t)
    f = _cl(store)[2]
    for at in (5000, 20000, 40000):  # several CRC errors in one file
        p = _body_at(f, _first_record_after(f, at))
        _patch(f, p, b"\xff\xff")
    lo = int(f.name)
    for q in sorted((store / "consumequeue").glob("*/*")):  # a wrong unit size in every queue, same file
        for cq in sorted(q.iterdir()):
            data = cq.read_bytes()
            units = [struct.unpack_from(">qiq", data, u) for u in range(0, len(data), 20)]
            hit = [n for n, (off, _, _) in enumerate(units) if lo <= off < lo + 65536]
            if hit:
                _patch(cq, hit[-1] * 20 + 8, struct.pack(">i", 7))
                break
    want = _check([store], caps=(1, 2, 5))
    s = want[0]["summary"]["findings"]
    assert s["cq.missing-unit"] > 5 and s["commitlog.body-crc"] >= 3 and s["cq.unit-mismatch"] > 5


@pytest.mark.slow
def test_bad_topics_are_reported_once_where_first_seen(tmp_path):
    """A topic finding is said once per store, at the topic's first record, though every
    file task meets the topic again."""
    from tests.helpers import retopic

    src = generate_plain(tmp_path / "src", messages=700, seed=4)
    hostile = retopic(src, tmp_path / "hostile", [(slice(None, None, 5), "bad topic"), (slice(3, None, 7), "../evil")])
    want = _check([hostile], caps=(None, 1))
    topics = [f for f in want[0]["findings"] if f["check"] in ("commitlog.topic", "commitlog.topic-chars")]
    assert len(topics) == 2 and len(list((hostile / "commitlog").iterdir())) >= 3


@pytest.mark.parametrize("cut", [None, 40, 24 + 4 * 64 + 20 * 7, 24 + 4 * 64 + 20 * 7 + 9])
def test_index_info_without_the_check_is_what_the_check_reads(master, tmp_path, cut):
    """The scan's view of an index file (header, entries' offset range) comes from a cheap
    pass so the structure check can run beside the scan: it must equal what the check
    reads, for whole, damaged and short files."""
    from rmqstore_cli.pipeline.verify_plan import Recorder, index_info_task, index_range_task, plan_store
    from rmqstore_cli.store.verify import Verifier, VerifyOptions

    store = tmp_path / "s"
    shutil.copytree(master, store)
    _damage(store, "index")
    idx = sorted((store / "index").iterdir())
    if cut is not None:
        os.truncate(idx[0], cut)
    plan = plan_store(_specs(store)[0], True, False, None)
    for k, path in enumerate(plan.index_paths):
        info = index_info_task(plan, k)
        v = Verifier(plan.config, VerifyOptions(crc=True, deep=False), sink=Recorder(None, 1, (k,)))
        checked = v.open_index_file(Path(path))
        assert (info.n, info.begin_phy, info.end_phy, info.end_ts, info.entries) == (
            checked.n,
            checked.begin_phy,
            checked.end_phy,
            checked.end_ts,
            checked.entry_count,
        )
        want = (checked.phy_min, checked.phy_max) if checked.entry_count else (None, None)
        assert (info.phy_min, info.phy_max) == want
        header = index_info_task(plan, k, ranged=False)  # the range later, on a worker
        assert (header.phy_min, header.phy_max) == (None, None) and vars(index_range_task(plan, header)) == vars(info)
        checked.close()


@pytest.mark.slow
def test_file_tasks_check_with_the_c_loops_unless_pure(master, tmp_path, monkeypatch):
    """A file task is its own Verifier (and a Spark worker its own process): it runs the C
    loops from its first record when they are built, the reference loops when
    FAST_PATHS.pure (RMQSTORE_PURE=1). Same findings either way."""
    from rmqstore_cli.pipeline import verify_scan as VS
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    store = tmp_path / "s"
    shutil.copytree(master, store)
    _damage(store, "body")
    from rmqstore_cli.store.verify import Verifier

    used = []
    kernel = Verifier.kernel

    def file_task_kernel(self):  # what the file tasks' Verifiers use (their sink: a FileRecorder)
        k = kernel(self)
        if isinstance(self.sink, VS.FileRecorder):
            used.append(k)
        return k

    monkeypatch.setattr(Verifier, "kernel", file_task_kernel)
    needs_c()
    monkeypatch.setattr(FAST_PATHS, "pure", False)
    want = _check([store], caps=(None,))
    assert used and all(k is not None for k in used)
    assert "commitlog.body-crc" in {f["check"] for f in want[0]["findings"]}
    used.clear()
    monkeypatch.setattr(FAST_PATHS, "pure", True)
    got = _check([store], caps=(None,))
    for r in got + want:  # which loops ran: the one field that differs
        r["summary"].pop("c_extensions")
    assert got == want
    assert used and all(k is None for k in used)


@pytest.mark.slow
def test_file_tasks_load_only_their_window_of_an_ordered_index_file(master, tmp_path, monkeypatch):
    """Each file task streams the entries pointing into its own file (windows that split each
    index file's entries between the commit-log files), a chunk at a time (never the
    window's arrays whole: issue 35), so a task's cost and memory follow its batches, not
    the index file; entries out of offset order fall back to the whole file. The findings
    are the Verifier's either way."""
    from rmqstore_cli.pipeline import verify_plan as VP
    from rmqstore_cli.store.verify import limits

    monkeypatch.setattr(limits, "INDEX_CHUNK", 16)
    windows, held = [], []
    init, entries_in = VP.IndexWindow.__init__, VP.IndexWindow.entries_in

    def opened(self, *a):
        init(self, *a)
        windows.append((self.name, *self.window))

    def streamed(self, lo, hi):
        got = entries_in(self, lo, hi)
        held.append((self._wphy.size - got[0].size, self.phy))  # read ahead of the batch; no whole arrays
        return got

    monkeypatch.setattr(VP.IndexWindow, "__init__", opened)
    monkeypatch.setattr(VP.IndexWindow, "entries_in", streamed)
    want = _check([master], caps=(None,))
    assert held and all(ahead <= 16 and phy is None for ahead, phy in held)
    assert want[0]["ok"]
    plan = VP.plan_store(_specs(master)[0], True, False, None)
    infos = {i.name: i for i in (VP.index_info_task(plan, k) for k in range(len(plan.index_paths)))}
    assert len(infos) > 1 and all(i.ordered for i in infos.values())
    for name, info in infos.items():
        mine = sorted({(a, b) for n, a, b in windows if n == name})  # plain and deep runs: the same
        assert len(mine) > 1 and mine[0][0] == 0 and mine[-1][1] == info.entries
        assert all(p[1] == q[0] for p, q in pairwise(mine))

    store = tmp_path / "unordered"
    shutil.copytree(master, store)
    idx = sorted((store / "index").iterdir())[0]
    base = 40 + 4 * 64  # header, slots (SIZES): entries 1 and 200 (other messages), offsets swapped
    data = bytearray(idx.read_bytes())
    a, b = base + 20 + 4, base + 200 * 20 + 4
    assert data[a : a + 8] != data[b : b + 8]
    data[a : a + 8], data[b : b + 8] = data[b : b + 8], data[a : a + 8]
    idx.write_bytes(bytes(data))
    windows.clear()
    found = _check([store], caps=(None,))
    plan = VP.plan_store(_specs(store)[0], True, False, None)
    assert not VP.index_info_task(plan, 0).ordered and idx.name not in {n for n, _, _ in windows}
    assert not found[0]["ok"]


@pytest.mark.parametrize("kind", fast_first(["smashed", "cq", "index", "removed"]))
def test_verify_on_forked_workers_answers_what_one_process_does(master, tmp_path, kind):
    """The local engine on two processes (pipeline/verify_tasks.py Forked): the same results, in the
    same order, as the tasks run one after another, for a damaged store beside a sound one."""
    from rmqstore_cli.pipeline.verify_tasks import Forked, verify_stores

    store = tmp_path / kind
    shutil.copytree(master, store)
    _damage(store, kind)
    specs = _specs(master, store)
    for cap in (None, 1):
        assert verify_stores(specs, True, True, cap, Forked(2)) == verify_stores(specs, True, True, cap)
