"""expire: the broker's cleaning rules (CleanCommitLogService, CleanConsumeQueueService,
IndexService#deleteExpiredFile) on generated and real-broker stores, safe under SIGKILL."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.message_store import MessageStore
from tests.helpers import SMALL, cli, run, tree_digest, writable_copy

NOW = 2_000_000_000_000  # a fixed "now" (2033-05-18), so ages are exact
HOUR = 3_600_000
CQ_UNIT = struct.Struct(">qiq")  # docs/format/consume-queue.md#unit
INDEX_HEADER = struct.Struct(">qqqqii")  # docs/format/index.md#header


# ------------------------------------------------------------------ helpers
def cl_files(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir())


def set_ages(store: Path, ages_h: list[float]) -> None:
    """Commit-log file i gets mtime NOW - ages_h[i] hours (the last age repeats)."""
    for i, p in enumerate(cl_files(store)):
        age = ages_h[min(i, len(ages_h) - 1)]
        t = (NOW - int(age * HOUR)) / 1000
        os.utime(p, (t, t))


def queue_files(store: Path) -> dict[str, list[Path]]:
    out = {}
    for t in sorted((store / "consumequeue").iterdir()):
        for q in sorted(t.iterdir()):
            out[f"{t.name}/{q.name}"] = sorted(q.iterdir())
    return out


def index_files(store: Path) -> list[Path]:
    return sorted((store / "index").iterdir())


def expected_trim(store: Path, clmin: int) -> tuple[list[Path], list[Path]]:
    """docs/format/expiry.md and docs/format/index.md#deletion computed straight from the bytes:
    CQ files 0..n-2 whose last unit's physical offset < min (stop at the first kept), index
    files 0..n-2 whose endPhyOffset < min (stop at the first kept)."""
    cq = []
    for files in queue_files(store).values():
        for p in files[:-1]:
            data = p.read_bytes()
            if CQ_UNIT.unpack_from(data, len(data) - 20)[0] >= clmin:
                break
            cq.append(p)
    idx = []
    for p in index_files(store)[:-1]:
        if INDEX_HEADER.unpack_from(p.read_bytes(), 0)[3] >= clmin:
            break
        idx.append(p)
    return cq, idx


def expire(store: Path, *args: str):
    return cli("expire", "--store", store, *SMALL, "--now", str(NOW), *args)


def expire_json(store: Path, *args: str) -> dict:
    r = expire(store, "--format", "json", *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def deleted_paths(summary: dict) -> list[str]:
    return [a["path"] for a in summary["actions"]]


def assert_store_reads(store: Path, complete: bool = True) -> None:
    """The engine still reads the store: contiguous files, a scan from the commit log's
    minimum, sane consume-queue minimums, and dump-commitlog works. ``complete=False``: a
    run was interrupted after the commit log lost files but before the queues did."""
    cfg = StoreConfig.load(
        store,
        None,
        mapped_file_size_commit_log=65536,
        mapped_file_size_consume_queue=2000,
        max_hash_slot_num=64,
        max_index_num=400,
    )
    ms = MessageStore.open(cfg)
    try:
        cl = ms.commitlog
        offs = [f.file_from_offset for f in cl.files]
        assert offs == list(range(offs[0], offs[0] + 65536 * len(offs), 65536))  # contiguous
        clmin = cl.min_offset
        msgs = list(cl.scan(clmin))
        assert msgs and msgs[0].physical_offset == clmin
        assert cl.end.clean, cl.end
        for q in ms.consume_queues():
            starts = [f.file_from_offset for f in q.queue.files]
            assert starts == list(range(starts[0], starts[0] + 2000 * len(starts), 2000)), q.dir
            lo, hi = q.min_offset(clmin), q.max_offset
            assert q.min_file_offset <= lo <= hi
            units = list(q.units(lo, hi))
            if complete and units and units[0].commitlog_offset < clmin:
                # an idle queue (docs/format/expiry.md#consume-queue-files): its units all point below the minimum
                assert all(u.commitlog_offset < clmin for u in units) and lo == q.min_file_offset
            for u in units:
                if u.commitlog_offset >= clmin:
                    m = cl.get(u.commitlog_offset)
                    assert m.queue_offset == u.cq_offset or m.topic != q.topic
        for f in ms.index.files:
            assert f.header.index_count >= 1
    finally:
        ms.close()
    conf = store.parent / "small-broker.conf"  # other commands take the sizes from a broker.conf
    conf.write_text(
        "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\nmaxIndexNum=400\n"
    )
    r = cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl", "--limit", "5")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[0])["physical_offset"] == clmin
    _verify_if_available(store)


def _verify_if_available(store: Path) -> None:
    from rmqstore_cli.app import COMMANDS

    if any(name == "verify" for name, _, _ in COMMANDS):
        r = cli("verify", "--store", store, *SMALL)
        assert r.exit_code == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ the rules
def test_old_commitlog_files_go_then_cq_and_index_below_the_new_min(small_store):
    files = cl_files(small_store)
    assert len(files) > 10
    set_ages(small_store, [100] * 20 + [10])
    new_min = int(files[20].name)
    exp_cq, exp_idx = expected_trim(small_store, new_min)
    s = expire_json(small_store, "--reserved-hours", "72")
    assert s["completed"] and not s["dry_run"]
    assert s["deleted"]["commitlog"] == 20
    assert s["min_offsets"]["commitlog"] == new_min and s["min_offsets"]["commitlog_before"] == 0
    assert [p.name for p in cl_files(small_store)] == [p.name for p in files[20:]]
    got = [Path(p) for p in deleted_paths(s)]
    assert got == files[:20] + exp_cq + exp_idx  # the broker's order, oldest first per kind
    assert exp_cq and exp_idx  # the store is big enough for the rules to bite
    assert not any(p.exists() for p in got)
    assert all(a["rule"] == "expired" and a["age_hours"] == 100 for a in s["actions"][:20])
    assert s["files"] == len(got) and s["bytes"] == sum(a["bytes"] for a in s["actions"])
    assert_store_reads(small_store)


def test_stops_at_the_first_unexpired_file(small_store):
    # CleanCommitLogService: "avoid deleting files in the middle"
    files = cl_files(small_store)
    set_ages(small_store, [100, 1, 100])
    s = expire_json(small_store, "--reserved-hours", "72")
    assert [a["file"] for a in s["actions"] if a["kind"] == "commitlog"] == [f"commitlog/{files[0].name}"]
    assert [p.name for p in cl_files(small_store)] == [p.name for p in files[1:]]


def test_newest_file_survives_reserved_zero_and_each_queue_keeps_its_newest(small_store):
    files = cl_files(small_store)
    set_ages(small_store, [10_000])
    before_q = queue_files(small_store)
    before_i = index_files(small_store)
    exp_cq, exp_idx = expected_trim(small_store, int(files[-1].name))
    s = expire_json(small_store, "--reserved-hours", "0")
    assert [p.name for p in cl_files(small_store)] == [files[-1].name]
    after_q = queue_files(small_store)
    assert after_q.keys() == before_q.keys()
    for k, fs in before_q.items():
        assert after_q[k] and after_q[k][-1] == fs[-1], k  # the newest CQ file always stays
    assert index_files(small_store)[-1] == before_i[-1]
    assert sorted(Path(p) for p in deleted_paths(s) if "/commitlog/" not in p) == sorted(exp_cq + exp_idx)
    assert_store_reads(small_store)


def test_an_index_that_fell_behind_keeps_its_newest_file(small_store):
    # IndexService#deleteExpiredFile walks files 0 .. n-2 only: as if messageIndexEnable had
    # been switched off, every index file ends below the new minimum; the newest still stays
    files = cl_files(small_store)
    idx = index_files(small_store)
    for p in idx[len(idx) // 2 :]:
        p.unlink()
    kept = index_files(small_store)
    assert INDEX_HEADER.unpack_from(kept[-1].read_bytes(), 0)[3] < int(files[-1].name)
    set_ages(small_store, [1000])
    s = expire_json(small_store, "--reserved-hours", "0")
    assert index_files(small_store) == [kept[-1]]
    assert s["deleted"]["index"] == len(kept) - 1
    assert s["min_offsets"]["index"]["file"] == kept[-1].name


def test_second_run_deletes_nothing(small_store):
    set_ages(small_store, [200] * 8 + [1])
    first = expire_json(small_store, "--reserved-hours", "72")
    assert first["files"] > 8
    digest = tree_digest(small_store)
    again = expire_json(small_store, "--reserved-hours", "72")
    assert again["files"] == 0 and again["completed"]
    assert again["min_offsets"]["commitlog"] == first["min_offsets"]["commitlog"]
    assert tree_digest(small_store) == digest


def test_dry_run_deletes_nothing_and_lists_what_a_real_run_deletes(small_store):
    set_ages(small_store, [300] * 7 + [2])
    digest = tree_digest(small_store)
    dry = expire_json(small_store, "--reserved-hours", "48", "--dry-run")
    assert dry["dry_run"] and dry["files"] > 7
    assert tree_digest(small_store) == digest
    r = expire(small_store, "--reserved-hours", "48", "--dry-run", "--verbose")
    assert r.exit_code == 0 and r.stderr.count("would delete") == dry["files"]
    real = expire_json(small_store, "--reserved-hours", "48")
    assert deleted_paths(real) == deleted_paths(dry)
    assert real["min_offsets"] == dry["min_offsets"] and real["bytes_freed"] == dry["bytes_freed"]


def test_verbose_lines_and_jsonl_records_come_in_deletion_order(small_store):
    set_ages(small_store, [100] * 6 + [1])
    r = expire(small_store, "--reserved-hours", "72", "--verbose", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert recs[-1]["kind"] == "summary" and recs[-1]["files"] == len(recs) - 1
    acts = recs[:-1]
    order = {"commitlog": 0, "consumequeue": 1, "index": 2}
    assert [order[a["kind"]] for a in acts] == sorted(order[a["kind"]] for a in acts)
    lines = [x for x in r.stderr.splitlines() if x.startswith("rmqstore: deleted ")]
    assert [x.split()[2] for x in lines] == [a["file"] for a in acts]
    for kind in ("commitlog", "index"):
        names = [a["file"] for a in acts if a["kind"] == kind]
        assert names == sorted(names)


def test_now_moves_the_clock(small_store):
    set_ages(small_store, [100] * 3 + [1])  # ages relative to NOW, which lies in the future
    r = cli("expire", "--store", small_store, *SMALL, "--reserved-hours", "72", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["files"] == 0  # real now: files are "from the future"
    later = expire_json(small_store, "--reserved-hours", "72")
    assert later["deleted"]["commitlog"] == 3
    assert later["now"] == NOW


def test_max_files_caps_commitlog_files_and_trims_to_that_min(small_store):
    files = cl_files(small_store)
    set_ages(small_store, [500])
    exp_cq, exp_idx = expected_trim(small_store, int(files[2].name))
    s = expire_json(small_store, "--reserved-hours", "72", "--max-files", "2")
    assert [Path(p) for p in deleted_paths(s)] == files[:2] + exp_cq + exp_idx
    assert any("max-files" in n for n in s["notes"])
    assert_store_reads(small_store)


def test_broker_conf_supplies_reserved_time_and_sizes(small_store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\n"
        "maxIndexNum=400\nfileReservedTime=10\n"
    )
    set_ages(small_store, [20, 20, 5])
    r = cli("expire", "--store", small_store, "--broker-conf", conf, "--now", str(NOW), "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["reserved_hours"] == 10 and s["deleted"]["commitlog"] == 2


def test_disk_ratio_forces_the_oldest_files_out(small_store, monkeypatch):
    from rmqstore_cli.store.write import cleanup

    files = cl_files(small_store)
    set_ages(small_store, [1])  # nothing is old: only the full disk condemns files
    freed = [os.stat(p).st_blocks * 512 for p in files]
    entire = 10 * sum(freed)
    used = entire // 2 + freed[0] + freed[1] + freed[2] - 1  # 3 deletions bring it to <= 50 %
    seen = []

    def fake(path):
        seen.append(Path(path))
        return used, entire - used

    monkeypatch.setattr(cleanup, "disk_usage", fake)
    s = expire_json(small_store, "--disk-ratio", "50", "--dry-run")
    assert [a["rule"] for a in s["actions"] if a["kind"] == "commitlog"] == ["disk-full"] * 3
    assert seen and all(p == small_store / "commitlog" for p in seen)
    assert s["disk"]["used_ratio_before"] > 0.5 >= s["disk"]["used_ratio_after"]
    real = expire_json(small_store, "--disk-ratio", "0.5")
    assert [p.name for p in cl_files(small_store)] == [p.name for p in files[3:]]
    assert deleted_paths(real) == deleted_paths(s)
    # below the threshold: nothing goes
    monkeypatch.setattr(cleanup, "disk_usage", lambda p: (entire // 4, entire - entire // 4))
    assert expire_json(small_store, "--disk-ratio", "0.5")["files"] == 0


def test_used_ratio_rounds_up_like_the_broker():
    from rmqstore_cli.store.write.cleanup import used_ratio

    # UtilAll#getDiskPartitionSpaceUsedPercent: whole percent, rounded up
    assert used_ratio(50, 50) == 0.5
    assert used_ratio(501, 499) == 0.51
    assert used_ratio(0, 100) == 0.0


# ------------------------------------------------------------------ output for cron
@pytest.mark.slow
def test_quiet_prints_nothing_unless_something_went(small_store):
    set_ages(small_store, [1])
    r = run("expire", "--store", small_store, *SMALL, "--now", str(NOW), "--quiet")
    assert r.returncode == 0 and r.stdout == b"" and r.stderr == b""
    set_ages(small_store, [100, 1])
    r = run("expire", "--store", small_store, *SMALL, "--now", str(NOW), "--quiet", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["deleted"]["commitlog"] == 1


# ------------------------------------------------------------------ safety
@pytest.mark.slow
def test_refuses_while_another_process_holds_the_lock(small_store):
    set_ages(small_store, [100] * 3 + [1])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, os, struct, sys, time\n"
                f"fd = os.open({str(small_store / 'lock')!r}, os.O_RDWR)\n"
                "fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 1, 0))\n"
                "print('locked', flush=True)\n"
                "time.sleep(60)\n"
            ),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"locked"
        digest = tree_digest(small_store)
        r = run("expire", "--store", small_store, *SMALL, "--now", str(NOW), "--reserved-hours", "72")
        assert r.returncode == 4, r.stderr
        assert r.stderr.decode().startswith(f"rmqstore: error: a live broker (pid {holder.pid}) ")
        assert "--force" in r.stderr.decode()  # the refusal names the way past it
        assert len(r.stderr.decode().strip().splitlines()) == 1
        assert tree_digest(small_store) == digest
        # --dry-run only reads: allowed under a live broker, with one line saying it is live (issue 16)
        r = run(
            "expire",
            "--store",
            small_store,
            *SMALL,
            "--now",
            str(NOW),
            "--reserved-hours",
            "72",
            "--dry-run",
            "--format",
            "json",
        )
        assert r.returncode == 0, r.stderr
        [line] = r.stderr.decode().strip().splitlines()
        assert f"live broker (pid {holder.pid})" in line and "--dry-run" in line
        assert json.loads(r.stdout)["deleted"]["commitlog"] == 3 and json.loads(r.stdout)["dry_run"]
        assert tree_digest(small_store) == digest
        r = run(
            "expire",
            "--store",
            small_store,
            *SMALL,
            "--now",
            str(NOW),
            "--reserved-hours",
            "72",
            "--force",
            "--format",
            "json",
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["deleted"]["commitlog"] == 3
    finally:
        holder.kill()
        holder.wait()


def test_holds_the_brokers_lock_while_deleting(small_store, monkeypatch):
    """A broker starting mid-run must find the lock taken (DefaultMessageStore#start tryLock)."""
    from rmqstore_cli.store.files.lock import lock_holder
    from rmqstore_cli.store.write import cleanup

    set_ages(small_store, [100] * 3 + [1])
    seen = []
    probe = [
        sys.executable,
        "-c",
        "import sys; from pathlib import Path; "
        "from rmqstore_cli.store.files.lock import lock_holder; print(lock_holder(Path(sys.argv[1])))",
        str(small_store),
    ]
    real_unlink = cleanup._unlink_proven

    def spy(a, *roots):
        seen.append(subprocess.run(probe, capture_output=True, text=True).stdout.strip())
        real_unlink(a, *roots)

    monkeypatch.setattr(cleanup, "_unlink_proven", spy)
    expire_json(small_store, "--reserved-hours", "72", "--max-files", "1")
    assert seen and all(s == str(os.getpid()) for s in seen)
    assert lock_holder(small_store) is None  # released afterwards


def test_a_symlinked_or_misnamed_file_is_left_and_the_run_fails(small_store):
    files = cl_files(small_store)
    set_ages(small_store, [100] * 4 + [1])
    # file 1 becomes a symlink to a copy elsewhere (same size and content)
    outside = small_store.parent / "elsewhere"
    shutil.copy2(files[1], outside)
    files[1].unlink()
    files[1].symlink_to(outside)
    t = (NOW - 100 * HOUR) / 1000
    os.utime(files[1], (t, t), follow_symlinks=False)
    exp_cq, exp_idx = expected_trim(small_store, int(files[1].name))
    r = expire(small_store, "--reserved-hours", "72", "--format", "json")
    assert r.exit_code == 3
    assert "symlink" in r.stderr and r.stderr.startswith("rmqstore: error: ")
    s = json.loads(r.stdout)
    assert not s["completed"] and s["problems"]
    assert [Path(p) for p in deleted_paths(s)] == [files[0]] + exp_cq + exp_idx  # trimmed to file 1's offset
    assert files[1].is_symlink() and outside.exists() and files[2].exists()


def test_a_file_of_the_wrong_size_stops_everything(small_store):
    files = cl_files(small_store)
    set_ages(small_store, [100] * 4 + [1])
    with open(files[2], "r+b") as fh:
        fh.truncate(65536 - 8)
    digest = tree_digest(small_store)
    r = expire(small_store, "--reserved-hours", "72")
    assert r.exit_code == 3 and "bytes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert tree_digest(small_store) == digest


def test_stray_names_are_never_deleted(small_store):
    n_cl = len(cl_files(small_store))
    stray = small_store / "commitlog" / "notes.txt"
    stray.write_text("operator notes")
    cq_stray = next(iter(queue_files(small_store).values()))[0].parent / "backup"
    cq_stray.write_bytes(b"x" * 2000)
    for p in index_files(small_store)[10:]:  # an index that fell behind: even its newest file is below min
        p.unlink()
    idx = index_files(small_store)
    idx_stray = small_store / "index" / "zz-readme"  # sorts last: must not pass for the newest index file
    idx_stray.write_text("x")
    set_ages(small_store, [1000])
    s = expire_json(small_store, "--reserved-hours", "0")
    assert s["deleted"]["commitlog"] == n_cl - 1
    assert stray.exists() and cq_stray.exists() and idx_stray.exists()
    assert idx[-1].exists()
    assert any("notes.txt" in n for n in s["notes"])


def test_a_failed_deletion_stops_the_run_and_the_next_run_finishes(small_store, monkeypatch):
    from rmqstore_cli.store.write import cleanup

    set_ages(small_store, [100] * 20 + [1])
    calls = []
    real_unlink = os.unlink

    def flaky(name, *a, **kw):
        calls.append(name)
        if len(calls) == 3:
            raise PermissionError(13, "Permission denied")
        return real_unlink(name, *a, **kw)

    monkeypatch.setattr(cleanup.os, "unlink", flaky)
    r = expire(small_store, "--reserved-hours", "72", "--format", "json")
    monkeypatch.undo()
    assert r.exit_code == 3 and "cannot delete" in r.stderr and "Permission denied" in r.stderr
    s = json.loads(r.stdout)
    assert not s["completed"] and s["files"] == 2 and s["deleted"]["consumequeue"] == 0
    assert s["min_offsets"]["commitlog"] == int(cl_files(small_store)[0].name) == 2 * 65536
    assert_store_reads(small_store)
    again = expire_json(small_store, "--reserved-hours", "72")
    assert again["deleted"]["commitlog"] == 18 and again["deleted"]["consumequeue"] > 0
    assert_store_reads(small_store)


def test_bad_options(small_store, tmp_path):
    r = expire(small_store, "--disk-ratio", "150")
    assert r.exit_code == 2 and r.stderr.startswith("rmqstore: error: --disk-ratio")
    r = expire(small_store, "--now", "yesterday-ish")
    assert r.exit_code == 2
    r = cli("expire", "--store", tmp_path / "nope")
    assert r.exit_code == 3 and "no such store" in r.stderr


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_a_store_the_next_run_finishes(small_store, tmp_path):
    set_ages(small_store, [10_000] * 20 + [1])
    master = tmp_path / "master"
    shutil.copytree(small_store, master, symlinks=True)
    reference = expire_json(small_store, "--reserved-hours", "72")
    order = deleted_paths(reference)
    assert len(order) > 40
    final = {str(p.relative_to(small_store)) for p in small_store.rglob("*") if p.is_file()}
    rng = random.Random(20240607)
    args = [
        sys.executable,
        "-m",
        "rmqstore_cli",
        "expire",
        *SMALL,
        "--now",
        str(NOW),
        "--reserved-hours",
        "72",
        "--pause-ms",
        "3",
        "--quiet",
    ]
    for it in range(4):
        store = tmp_path / f"run{it}" / "store"
        shutil.copytree(master, store, symlinks=True)
        victim = Path(order[rng.randrange(1, len(order) - 1)].replace(str(small_store), str(store)))
        p = subprocess.Popen([*args, "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while victim.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert p.returncode == -signal.SIGKILL, "the run finished before the kill point"
        assert_store_reads(store, complete=False)  # contiguous and readable mid-way
        r = run("expire", "--store", store, *SMALL, "--now", str(NOW), "--reserved-hours", "72", "--format", "json")
        assert r.returncode == 0, r.stderr
        assert {str(x.relative_to(store)) for x in store.rglob("*") if x.is_file()} == final
        assert_store_reads(store)


# ------------------------------------------------------------------ real-broker stores
def test_real_broker_store_keeps_exactly_the_records_above_the_new_min(fixture, tmp_path):
    src, conf, expected = fixture
    store = writable_copy(src, tmp_path / "store")
    files = cl_files(store)
    set_ages(store, [100])
    r = cli("expire", "--store", store, "--broker-conf", conf, "--now", str(NOW), "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    new_min = int(files[-1].name)
    assert s["min_offsets"]["commitlog"] == new_min
    # the index files the broker recorded, with endPhyOffset < min, except the newest, go
    idx = expected["index_files"]
    gone = []
    for f in idx[:-1]:
        if f["endPhyOffset"] >= new_min:
            break
        gone.append(f["name"])
    assert [a["file"] for a in s["actions"] if a["kind"] == "index"] == [f"index/{n}" for n in gone]
    # consume queues: per the broker's own units, a non-newest file goes if its last unit < min
    for key, q in expected["consume_queues"].items():
        units, qdir = q["units"], store / "consumequeue" / q["topic"] / str(q["queue_id"])
        if not qdir.is_dir():
            continue
        nfiles = len(list(qdir.iterdir()))
        nfiles += sum(
            1
            for a in s["actions"]
            if a["kind"] == "consumequeue" and a["topic"] == q["topic"] and a["queue_id"] == q["queue_id"]
        )
        lost = 0
        for i in range(nfiles - 1):
            if units[i * 100 + 99][1] >= new_min:
                break
            lost += 1
        got = [a for a in s["actions"] if a["kind"] == "consumequeue" and f"{a['topic']}/{a['queue_id']}" == key]
        assert len(got) == lost, key
    # AuditTopic has two CQ files: the first stays iff the broker's unit 99 points at or above the min
    audit = expected["consume_queues"]["AuditTopic/0"]["units"]
    first = store / "consumequeue" / "AuditTopic" / "0" / "00000000000000000000"
    assert first.exists() == (audit[99][1] >= new_min)
    r = cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    left = [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]
    assert left == [m["physical_offset"] for m in expected["messages"] if m["physical_offset"] >= new_min]


def _symlink_away(p: Path, outside: Path) -> None:
    outside.mkdir(exist_ok=True)
    copy = outside / f"{p.parent.parent.name}-{p.parent.name}-{p.name}"
    shutil.copy2(p, copy)
    p.unlink()
    p.symlink_to(copy)


def _condemned_queue_heads(store: Path, n: int) -> list[Path]:
    """The first CQ file of ``n`` queues that the run would trim when all commit-log files
    but the last two expire (their ages are set here)."""
    k = len(cl_files(store)) - 2
    set_ages(store, [100] * k + [1])
    clmin = int(cl_files(store)[k].name)
    exp_cq, _ = expected_trim(store, clmin)
    heads = [files[0] for files in queue_files(store).values() if files[0] in exp_cq]
    assert len(heads) >= n
    return heads[:n]


def test_several_refused_files_are_one_error_line(small_store, tmp_path):
    heads = _condemned_queue_heads(small_store, 3)
    for p in heads:
        _symlink_away(p, tmp_path / "elsewhere")
    r = expire(small_store, "--reserved-hours", "72", "--format", "json")
    assert r.exit_code == 3  # the documented exit for a file that could not be checked
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rmqstore: error: 3 files are symlinks")
    assert f"(first: {heads[0]})" in lines[0] and "--verbose" in lines[0]
    s = json.loads(r.stdout)
    assert not s["completed"] and len(s["problems"]) == 3  # the JSON keeps every one
    assert all(p.is_symlink() and p.resolve().exists() for p in heads)


def test_verbose_lists_each_refused_file_then_one_error(small_store, tmp_path):
    heads = _condemned_queue_heads(small_store, 3)
    for p in heads[:2]:
        _symlink_away(p, tmp_path / "elsewhere")
    heads[2].unlink()
    os.mkfifo(heads[2])
    r = expire(small_store, "--reserved-hours", "72", "--verbose")
    assert r.exit_code == 3
    lines = r.stderr.strip().splitlines()
    left = [x for x in lines if x.startswith("rmqstore: left alone: ")]
    assert sorted(x.rsplit("(", 1)[1].rstrip(")") for x in left) == sorted(map(str, heads))
    errors = [x for x in lines if "error" in x.split(":")[1]]
    assert len(errors) == 1 and errors == lines[-1:]
    assert "3 files could not be proven store files (2 symlinks, 1 not a regular file)" in errors[0]
    assert "(--verbose lists each)" not in errors[0]
    assert stat.S_ISFIFO(os.lstat(heads[2]).st_mode)


def test_one_refused_file_keeps_its_own_message(small_store, tmp_path):
    (head,) = _condemned_queue_heads(small_store, 1)
    _symlink_away(head, tmp_path / "elsewhere")
    r = expire(small_store, "--reserved-hours", "72")
    assert r.exit_code == 3
    assert r.stderr.strip().splitlines() == [
        f"rmqstore: error: is a symlink, not a store file; left alone ({head}); "
        "files before it were handled; move it away or fix the size options, "
        "then run again"
    ]


# ------------------------------------------------------------------ the journal (issue 31)
def test_the_journal_holds_what_jsonl_printed(small_store):
    """A run that deletes appends to rmqstore-expire.jsonl exactly the lines --format jsonl
    prints (each with the run's id): a report lost to a full or closed stdout is recoverable.
    A second run appends under its own id; a run with nothing due writes nothing."""
    set_ages(small_store, [100] * 6 + [1])
    journal = small_store / "rmqstore-expire.jsonl"
    r = expire(small_store, "--reserved-hours", "72", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    printed = [json.loads(x) for x in r.stdout.splitlines()]
    kept = [json.loads(x) for x in journal.read_text().splitlines()]
    assert len({k.pop("run") for k in kept}) == 1
    assert kept == printed and printed[-1]["journal"] == str(journal)
    size = journal.stat().st_size
    assert expire(small_store, "--reserved-hours", "72", "--format", "json").exit_code == 0  # nothing due
    assert journal.stat().st_size == size
    set_ages(small_store, [100] * 2 + [1])
    assert expire(small_store, "--reserved-hours", "72", "--format", "json").exit_code == 0
    runs = [json.loads(x)["run"] for x in journal.read_text().splitlines()]
    assert len([r for i, r in enumerate(runs) if i == 0 or runs[i - 1] != r]) == len(set(runs)) == 2
    assert expire(small_store, "--reserved-hours", "72", "--dry-run").exit_code == 0
    assert journal.stat().st_size > size


def test_a_journal_that_cannot_be_written_does_not_stop_the_deletions(small_store, tmp_path):
    """A link planted at the journal's name is never written through: expire warns once,
    deletes what is due, and its summary's journal is null."""
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    (small_store / "rmqstore-expire.jsonl").symlink_to(outside)
    set_ages(small_store, [100] * 4 + [1])
    r = expire(small_store, "--reserved-hours", "72", "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["deleted"]["commitlog"] == 4 and s["journal"] is None
    warn = [x for x in r.stderr.splitlines() if "not recorded" in x]
    assert len(warn) == 1 and "symbolic link" in warn[0], r.stderr
    assert outside.read_bytes() == b""


def test_a_long_journal_keeps_its_newest_lines(small_store, monkeypatch):
    """Past LIMIT bytes the oldest whole lines go (written beside and renamed in) before a
    run appends; the newest run is always whole."""
    from rmqstore_cli.store.write import expire_journal

    monkeypatch.setattr(expire_journal, "LIMIT", 4096)
    monkeypatch.setattr(expire_journal, "KEEP", 2048)
    journal = small_store / "rmqstore-expire.jsonl"
    old = [json.dumps({"run": f"old/{i}", "kind": "commitlog", "file": "x" * 100}) for i in range(60)]
    journal.write_text("".join(x + "\n" for x in old))
    set_ages(small_store, [100] * 3 + [1])
    r = expire(small_store, "--reserved-hours", "72", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    lines = journal.read_text().splitlines()
    kept_old = [x for x in lines if x.startswith('{"run": "old/')]
    assert 0 < len(kept_old) < 60 and kept_old == old[-len(kept_old) :]
    new = [json.loads(x) for x in lines[len(kept_old) :]]
    assert new[-1]["kind"] == "summary" and len(new) == len(r.stdout.splitlines())
