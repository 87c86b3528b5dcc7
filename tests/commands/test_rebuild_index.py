"""rebuild-index: consume queues and index regenerated from the commit log, byte for byte."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqstore_cli.store.commitlog import CommitLog, Status, check_message
from rmqstore_cli.store.files.mapped_files import queue_dirs
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.consume_queue import PRE_BLANK_UNIT, ConsumeQueue
from rmqstore_cli.store.write.dispatch import Dispatcher
from tests.helpers import ROOT, cli, generate, run, tree_digest

PARTS = ("consumequeue", "index")
SMALL_INDEX = ("--index-slots", "64", "--index-max", "400")


def same_file(a: Path, b: Path) -> bool:
    """Byte equality of two (sparse) files: compare only the data extents of either."""
    if a.stat().st_size != b.stat().st_size:
        return False
    size = a.stat().st_size
    ranges = _extents(a, size) + _extents(b, size)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for lo, hi in ranges:
            while lo < hi:
                n = min(1 << 20, hi - lo)
                if os.pread(fa.fileno(), n, lo) != os.pread(fb.fileno(), n, lo):
                    return False
                lo += n
    return True


def _extents(p: Path, size: int) -> list[tuple[int, int]]:
    out = []
    with open(p, "rb") as fh:
        fd, pos = fh.fileno(), 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            pos = end
    return out


def files_of(root: Path, part: str) -> list[str]:
    d = root / part
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()) if d.is_dir() else []


def assert_same_tree(a: Path, b: Path, part: str) -> None:
    names = files_of(a, part)
    assert names == files_of(b, part), part
    for n in names:
        assert same_file(a / part / n, b / part / n), f"{part}/{n}"


def reference_build(store: Path, out: Path, conf: StoreConfig | None = None, tz=None, per_file: bool = False) -> None:
    """The per-record engine path: scan (reput rules) + Dispatcher, no vectorisation."""
    cfg = conf or _config(store)
    cl = CommitLog(cfg)
    d = Dispatcher(cfg, out / "consumequeue", out / "index", tz)
    if per_file:  # an invalid record skips the rest of its file only (master reput)
        for f in cl.files:
            for m in cl.scan(f.file_from_offset, f.end_offset, skip_mismatch=True):
                d.dispatch(m)
    else:
        for m in cl.scan(skip_mismatch=True):
            d.dispatch(m)
    d.close()
    cl.close()


def _config(store: Path) -> StoreConfig:
    cfg = StoreConfig.load(store)
    cfg.infer_sizes()
    return cfg


def rebuild(store: Path, out: Path, *extra: str):
    r = cli("rebuild-index", "--store", store, "--output", out, "--format", "json", *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


# ------------------------------------------------------------------ generated stores


def test_rebuild_to_output_is_byte_identical_and_source_untouched(small_store, tmp_path):
    before = tree_digest(small_store)
    out = tmp_path / "out"
    s = rebuild(small_store, out)
    assert tree_digest(small_store) == before
    for part in PARTS:
        assert_same_tree(small_store, out, part)
    assert (out / "commitlog").is_symlink() and (out / "commitlog").resolve() == (small_store / "commitlog").resolve()
    assert s["messages"] == sum(1 for _ in CommitLog(_config(small_store)).scan())
    assert s["dispatch_end"]["clean"] is True and s["skipped"] == []
    assert s["consume_queues"] == len(list(queue_dirs(small_store / "consumequeue")))
    # the rebuilt store reads back: the checkpoint has the last store time
    cp = struct.unpack(">qqq", (out / "checkpoint").read_bytes()[:24])
    last = max(m.store_timestamp for m in CommitLog(_config(small_store)).scan())
    assert cp[0] == cp[1] == last


def test_copy_commitlog_keeps_bytes_and_mtimes(small_store, tmp_path):
    out = tmp_path / "out"
    rebuild(small_store, out, "--copy-commitlog", "--only", "cq")
    assert not (out / "commitlog").is_symlink()
    assert_same_tree(small_store, out, "commitlog")
    for p in (small_store / "commitlog").iterdir():
        assert (out / "commitlog" / p.name).stat().st_mtime_ns == p.stat().st_mtime_ns
    assert not (out / "index").exists()


def test_in_place_keeps_its_backups_where_stderr_says_and_verify_knows_them(small_store):
    """#31: the replaced sets were left as consumequeue.bak-<id>, index.bak-<id> and
    checkpoint.bak-<id> in the store root, where the next verify reported each as
    store.unknown-entry (a warning). They now go to rmqstore-backup/<id>/, which stderr
    names and verify and stats know (store/layout/root_entries.py)."""
    import re

    before = tree_digest(small_store)
    r = run("rebuild-index", "--store", small_store, "--in-place", "--format", "json")
    assert r.returncode == 0, r.stderr
    said = [ln for ln in r.stderr.decode().splitlines() if "kept in" in ln]
    assert len(said) == 1 and said[0].startswith("rmqstore: "), r.stderr
    where = Path(re.search(r"kept in (\S+) \(", said[0]).group(1))
    assert where.parent == small_store / "rmqstore-backup" and where.is_dir()
    assert sorted(p.name for p in where.iterdir()) == ["checkpoint", "consumequeue", "index"]
    assert all(Path(b).parent == where for b in json.loads(r.stdout)["backups"])
    for name in ("consumequeue", "index"):  # the old sets, whole
        old = {k[len(name) + 1 :]: v[0] for k, v in before.items() if k.startswith(name + "/")}
        assert {k: v[0] for k, v in tree_digest(where / name).items()} == old
    assert sorted(p.name for p in small_store.iterdir()) == sorted(
        {k.split("/")[0] for k in before} | {"rmqstore-backup"}
    )
    v = run("verify", "--store", small_store, "--format", "json")
    assert v.returncode == 0, v.stderr
    root = [f for f in json.loads(v.stdout)["findings"] if f["check"].startswith("store.")]
    assert [(f["check"], f["file"]) for f in root] == [("store.unchecked-entry", "rmqstore-backup")]
    assert "rebuild-index" in root[0]["detail"]
    stats = json.loads(run("stats", "--store", small_store, "--format", "json").stdout)
    assert {c["path"]: c["known"] for c in stats["summary"]["components"]}["rmqstore-backup"] is True


def test_in_place_after_deleting_and_corrupting(small_store, tmp_path):
    orig = tmp_path / "orig"
    shutil.copytree(small_store, orig)
    shutil.rmtree(small_store / "index")
    victim = sorted((small_store / "consumequeue").rglob("0000*"))[0]
    victim.write_bytes(b"\xff" * victim.stat().st_size)
    # with index/ gone its geometry cannot be inferred: the small sizes are passed explicitly
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--format", "json", *SMALL_INDEX)
    assert r.exit_code == 0, r.stderr
    for part in PARTS:
        assert_same_tree(orig, small_store, part)
    [run_dir] = (small_store / "rmqstore-backup").iterdir()
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint", "consumequeue"]  # index was absent
    bak = run_dir / "consumequeue"
    assert (bak / victim.relative_to(small_store / "consumequeue")).read_bytes()[:1] == b"\xff"
    assert not list(small_store.glob(".rebuild-index*"))
    backups = sorted(str(p.relative_to(small_store)) for p in small_store.rglob("*") if "rmqstore-backup" in str(p))
    # again, without backups: nothing left beside the new sets
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--no-backup", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert (
        sorted(str(p.relative_to(small_store)) for p in small_store.rglob("*") if "rmqstore-backup" in str(p))
        == backups
    )
    for part in PARTS:
        assert_same_tree(orig, small_store, part)


def test_only_and_topic_in_place(small_store, tmp_path):
    orig = tmp_path / "orig"
    shutil.copytree(small_store, orig)
    topics = sorted({t for t, _, _ in queue_dirs(small_store / "consumequeue")})
    keep, redo = topics[0], topics[1]
    for t in (keep, redo):
        for f in (small_store / "consumequeue" / t).rglob("0000*"):
            f.write_bytes(bytes(f.stat().st_size))
    index_before = tree_digest(small_store / "index")
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--topic", redo, "--no-backup")
    assert r.exit_code == 0, r.stderr
    assert json.loads(
        cli(
            "rebuild-index", "--store", small_store, "--in-place", "--topic", redo, "--dry-run", "--format", "json"
        ).stdout
    )["replaces"] == [str(small_store / "consumequeue" / redo), str(small_store / "checkpoint")], r.stdout
    assert tree_digest(small_store / "index") == index_before
    for f in (orig / "consumequeue" / redo).rglob("0000*"):
        assert same_file(f, small_store / "consumequeue" / f.relative_to(orig / "consumequeue"))
    for f in (small_store / "consumequeue" / keep).rglob("0000*"):
        assert not any(f.read_bytes())  # not selected: left as it was
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--only", "index", "--topic", redo)
    assert r.exit_code == 2


def test_dry_run_writes_nothing_and_predicts(small_store, tmp_path):
    before = tree_digest(small_store)
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.stderr
    dry = json.loads(r.stdout)
    assert tree_digest(small_store) == before and not list(small_store.glob(".rebuild*"))
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", small_store, "--output", out, "--dry-run")
    assert r.exit_code == 0 and not out.exists()
    real = rebuild(small_store, out)
    for k in ("messages", "consume_queues", "consume_queue_units", "consume_queue_files", "index_files", "index_keys"):
        assert dry[k] == real[k], k
    assert dry["backups"] and dry["replaces"]


def test_default_sizes_few_hundred_messages(tmp_path):
    store = generate(tmp_path / "big", "--tz", "UTC", messages=300, small=False)
    out = tmp_path / "out"
    rebuild(store, out, "--tz", "UTC")
    cq = files_of(store, "consumequeue")
    assert cq and (store / "consumequeue" / cq[0]).stat().st_size == 6_000_000
    assert (out / "index").is_dir() and next((out / "index").iterdir()).stat().st_size == 420_000_040
    for part in PARTS:
        assert_same_tree(store, out, part)


@pytest.mark.slow
def test_expired_first_commitlog_files_start_above_zero_with_pre_blank(small_store, tmp_path):
    cfg = _config(small_store)
    files = sorted((small_store / "commitlog").iterdir())
    for p in files[:3]:
        p.unlink()
    new_min = int(files[3].name)
    out = tmp_path / "out"
    rebuild(small_store, out)
    F = cfg.cq_file_size
    above_zero = 0
    for topic, qid, _ in queue_dirs(small_store / "consumequeue"):
        old = ConsumeQueue(small_store / "consumequeue", topic, qid, F)
        units = list(old.units())
        first = next((u.cq_offset for u in units if u.commitlog_offset >= new_min), None)
        rebuilt_dir = out / "consumequeue" / topic / str(qid)
        if first is None:
            assert not rebuilt_dir.exists(), (topic, qid)  # nothing left to dispatch
            continue
        new = ConsumeQueue(out / "consumequeue", topic, qid, F)
        start_file = first * 20 - first * 20 % F
        assert new.queue.files[0].file_from_offset == start_file
        assert new.max_offset == old.max_offset
        data = new.queue.files[0].path.read_bytes()
        pre = (first * 20 - start_file) // 20
        assert data[: pre * 20] == PRE_BLANK_UNIT * pre
        above_zero += first > 0
        for f in new.queue.files:  # from the first real unit on: the broker's own bytes
            lo = pre * 20 if f is new.queue.files[0] else 0
            assert f.path.read_bytes()[lo:] == (old.dir / f.name).read_bytes()[lo:], (topic, qid, f.name)
        new.close()
        old.close()
    assert above_zero > 0
    ref = tmp_path / "ref"
    reference_build(small_store, ref)
    assert_same_tree(ref, out, "index")


def _last_record(store: Path):
    cfg = _config(store)
    msgs = list(CommitLog(cfg).scan())
    return cfg, msgs[-1]


@pytest.mark.slow
def test_torn_tail_stops_at_last_valid_message(small_store, tmp_path):
    cfg, last = _last_record(small_store)
    (small_store / "abort").write_bytes(b"")
    path = small_store / "commitlog" / f"{last.offset - last.offset % cfg.mapped_file_size_commit_log:020d}"
    pos = last.offset % cfg.mapped_file_size_commit_log
    with open(path, "r+b") as fh:  # half of the last message lost, garbage after it
        fh.seek(pos + last.total_size // 2)
        fh.write(bytes(last.total_size - last.total_size // 2) + os.urandom(64))
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", small_store, "--output", out, "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["dispatch_end"]["offset"] == last.offset and s["dispatch_end"]["clean"] is False
    assert s["dispatch_end"]["reason"] and "abnormal" in s["recovery"]
    assert "dispatch stopped at offset" in r.stderr
    ref = tmp_path / "ref"
    cl = CommitLog(cfg)
    d = Dispatcher(cfg, ref / "consumequeue", ref / "index")
    for m in cl.scan(end=last.offset):
        d.dispatch(m)
    d.close()
    for part in PARTS:
        assert_same_tree(ref, out, part)


def _corrupt_props_len(store: Path, file_index: int, nth: int) -> int:
    """Shrink one record's PROPERTIESLENGTH: its TOTALSIZE no longer adds up (size mismatch)."""
    cfg = _config(store)
    f = sorted((store / "commitlog").iterdir())[file_index]
    base = int(f.name)
    recs = [m for m in CommitLog(cfg).scan(base, base + cfg.mapped_file_size_commit_log) if m.properties_bytes]
    m = recs[nth]
    pos = m.offset - base + m.total_size - len(m.properties_bytes) - 2
    with open(f, "r+b") as fh:
        fh.seek(pos)
        fh.write(struct.pack(">h", len(m.properties_bytes) - 1))
    with open(f, "rb") as fh:
        buf = fh.read()
    assert check_message(buf, m.offset - base, len(buf), base).status is Status.SIZE_MISMATCH
    return m.offset


def test_size_mismatch_and_invalid_before_recovery_region(small_store, tmp_path):
    bad = _corrupt_props_len(small_store, 0, 5)
    files = sorted((small_store / "commitlog").iterdir())
    assert len(files) > 5
    with open(files[1], "r+b") as fh:  # an invalid record in the middle of file 1
        fh.seek(4096 + 4)
        head = fh.read(4)
    m = [x for x in CommitLog(_config(small_store)).scan(int(files[1].name), int(files[2].name))][10]
    with open(files[1], "r+b") as fh:
        fh.seek(m.offset - int(files[1].name) + 4)
        fh.write(b"\0\0\0\0")  # magic gone
    del head
    out = tmp_path / "out"
    s = rebuild(small_store, out)
    assert [k["offset"] for k in s["skipped"]] == [bad, m.offset]
    assert s["dispatch_end"]["clean"] is True
    ref = tmp_path / "ref"
    reference_build(small_store, ref, per_file=True)
    for part in PARTS:
        assert_same_tree(ref, out, part)


def test_usage_and_refusals(small_store, tmp_path):
    assert cli("rebuild-index", "--store", small_store).exit_code == 2
    assert cli("rebuild-index", "--store", small_store, "--in-place", "--output", tmp_path / "o").exit_code == 2
    (tmp_path / "o" / "index").mkdir(parents=True)
    r = cli("rebuild-index", "--store", small_store, "--output", tmp_path / "o")
    assert r.exit_code == 2 and "already exists" in r.stderr
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl,os,sys,time\n"
                f"fd=os.open({str(small_store / 'lock')!r},os.O_RDWR)\n"
                "fcntl.lockf(fd,fcntl.LOCK_EX,1,0)\nprint('locked',flush=True)\ntime.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = run("rebuild-index", "--store", small_store, "--in-place")
        assert r.returncode == 4 and b"live broker" in r.stderr
        assert r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_sigkill_during_in_place_rebuild_always_recovers(small_store, tmp_path):
    """Kill the in-place rebuild at random moments; every state is old-or-new per part, and a
    re-run always ends with the new set and no leftovers."""
    orig = tmp_path / "orig"
    shutil.copytree(small_store, orig)
    for f in (small_store / "consumequeue").rglob("0000*"):
        f.write_bytes(bytes(f.stat().st_size))  # old set: zeroed queues
    shutil.rmtree(small_store / "index")
    (small_store / "index").mkdir()

    def content(d: Path) -> dict:
        return {k: sha for k, (sha, _) in tree_digest(d).items() if not k.startswith(".rebuild-")}

    old = {p: content(small_store / p) for p in PARTS}
    new = {p: content(orig / p) for p in PARTS}

    def ok(part: str, d: Path) -> bool:
        return content(d) in (old[part], new[part])

    cmd = [
        sys.executable,
        "-m",
        "rmqstore_cli",
        "rebuild-index",
        "--store",
        str(small_store),
        "--in-place",
        *SMALL_INDEX,
    ]
    env = dict(os.environ, RMQSTORE_TEST_SWAP_DELAY="0.05")
    t0 = time.perf_counter()
    subprocess.run(cmd + ["--dry-run"], env=env, capture_output=True, check=True)
    span = (time.perf_counter() - t0) + 0.5  # start-up + scan, plus the slowed swap
    rng = random.Random(11)
    for _ in range(8):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
        time.sleep(rng.uniform(0.2, span))
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        for part in PARTS:
            target = small_store / part
            journal = small_store / ".rebuild-index.journal"
            assert target.is_dir() or journal.exists(), part
            if target.is_dir():
                assert ok(part, target), part
        for b in small_store.glob("rmqstore-backup/*/*"):
            if b.is_dir():
                assert ok(b.name, b)
    r = run("rebuild-index", "--store", small_store, "--in-place", "--format", "json", *SMALL_INDEX)
    assert r.returncode == 0, r.stderr
    for part in PARTS:
        assert_same_tree(orig, small_store, part)
    assert not (small_store / ".rebuild-index.journal").exists()
    assert not list(small_store.glob(".rebuild-index-*"))
    assert not list((small_store / "consumequeue").glob(".rebuild-*"))


# ------------------------------------------------------------------ real-broker fixtures


def test_fixture_consume_queues_and_index_are_the_brokers(fixture, tmp_path):
    store, conf, exp = fixture
    out = tmp_path / "out"
    r = cli(
        "rebuild-index", "--store", store, "--broker-conf", conf, "--output", out, "--tz", "UTC", "--format", "json"
    )
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["messages"] == len(exp["messages"])
    on_disk = {(q["topic"], q["queue_id"]) for q in exp["consume_queues"].values() if q["exists_on_disk"]}
    assert {(t, q) for t, q, _ in queue_dirs(out / "consumequeue")} == on_disk  # README item 6
    assert_same_tree(store, out, "consumequeue")
    theirs = sorted((store / "index").iterdir())
    ours = sorted((out / "index").iterdir())
    assert len(theirs) == len(ours) == len(exp["index_files"])
    for a, b in zip(theirs, ours, strict=True):  # names are creation wall times (lost); contents are the broker's
        assert a.read_bytes() == b.read_bytes(), a.name
    cp = struct.unpack(">qqq", (out / "checkpoint").read_bytes()[:24])
    assert cp[1] == exp["checkpoint"]["logicsMsgTimestamp"]
    assert cp[2] == exp["checkpoint"]["indexMsgTimestamp"]
