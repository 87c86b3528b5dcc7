"""rebuild-index's safety and honesty (issues #16 and #22): where it writes, what sizes it
assumes, its journal and checkpoint backup, full and read-only disks, crafted times and
sizes. Each test failed before its fix."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqstore_cli.store.commitlog import AppendSpec, CommitLog
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.rebuild_journal import JOURNAL
from tests.helpers import cli, generate, run, tmpfs, tree_digest

pytestmark = pytest.mark.slow  # subprocesses, full disks and Spark

SMALL = ("--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")


def one_error_line(stderr: str) -> str:
    """The stderr of a refused run: one ``rmqstore: error:`` line (notes before it allowed),
    no traceback."""
    lines = [ln for ln in stderr.splitlines() if not ln.startswith("rmqstore: note:")]
    assert len(lines) == 1 and lines[0].startswith("rmqstore: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


def outside_digest(p: Path) -> dict:
    return tree_digest(p) if p.is_dir() else {}


# ------------------------------------------------------------------ 1. --output never in a store (#16)


@pytest.mark.parametrize("where", ["consumequeue", "store", "parent", "deep-new", "via-link", "linked-data-dir"])
def test_output_inside_equal_or_containing_the_store_is_refused(small_store, tmp_path, where):
    """``--output <store>/consumequeue`` wrote into the store it promises only to read."""
    (tmp_path / "link").symlink_to(small_store / "index")
    if where == "linked-data-dir":  # the store's consumequeue/ lives on another disk, through a link
        shutil.move(small_store / "consumequeue", tmp_path / "cq-disk")
        (small_store / "consumequeue").symlink_to(tmp_path / "cq-disk", target_is_directory=True)
    out = {
        "consumequeue": small_store / "consumequeue",
        "store": small_store,
        "parent": small_store.parent,
        "deep-new": small_store / "new" / "dir",
        "via-link": tmp_path / "link" / "x",
        "linked-data-dir": tmp_path / "cq-disk" / "out",
    }[where]
    before = tree_digest(small_store)
    r = cli("rebuild-index", "--store", small_store, "--output", out, *SMALL)
    assert r.exit_code == 2, r.stderr
    line = one_error_line(r.stderr)
    assert "--output" in line and r.stderr.count("\n") == 1  # refused before any note
    assert tree_digest(small_store) == before
    assert not (small_store / "new").exists() and not (small_store / "index" / "x").exists()


def test_output_checked_against_every_store(small_store, tmp_path):
    """Several stores: an --output inside (or containing) any one of them is refused."""
    a, b = tmp_path / "fleet" / "a" / "store", tmp_path / "fleet" / "b" / "store"
    shutil.copytree(small_store, a)
    shutil.copytree(small_store, b)
    for out in (b / "out", tmp_path / "fleet", tmp_path / "fleet" / "a"):
        before = tree_digest(tmp_path / "fleet")
        r = cli("rebuild-index", "--store", a, "--store", b, "--output", out, *SMALL)
        assert r.exit_code == 2, (out, r.stderr)
        one_error_line(r.stderr)
        assert tree_digest(tmp_path / "fleet") == before


@pytest.mark.parametrize("below", [False, True])
def test_output_that_is_a_file_is_one_line(small_store, tmp_path, below):
    f = tmp_path / "file"
    f.write_text("mine")
    r = run("rebuild-index", "--store", small_store, "--output", f / "sub" if below else f, *SMALL)
    assert r.returncode == 2, r.stderr
    one_error_line(r.stderr.decode())
    assert f.read_text() == "mine"


# ------------------------------------------------------------------ 2. sizes never silently defaulted (#16)


@pytest.mark.parametrize("lost", ["index", "consumequeue", "both"])
def test_lost_set_without_a_size_source_is_refused_naming_the_options(small_store, tmp_path, lost):
    """A lost index/ rebuilt without --broker-conf silently got 420 MB default files where the
    store used 8 KB ones: refused, naming the options, unless they are passed."""
    for d in ("index", "consumequeue") if lost == "both" else (lost,):
        shutil.rmtree(small_store / d)
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", small_store, "--output", out)
    assert r.exit_code == 2, r.stderr
    line = one_error_line(r.stderr)
    if lost != "consumequeue":
        assert "--index-slots" in line and "--index-max" in line and "maxHashSlotNum" in line
    if lost != "index":
        assert "--cq-file-size" in line and "mappedFileSizeConsumeQueue" in line
    assert "--broker-conf" in line and not out.exists()
    r = cli("rebuild-index", "--store", small_store, "--output", out, *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr
    sizes = json.loads(r.stdout)["sizes"]
    assert sizes["mappedFileSizeCommitLog"]["from"] == "the commit-log files"
    if lost != "consumequeue":
        assert sizes["maxHashSlotNum"] == {"value": 64, "from": "--index-slots"}
        assert {p.stat().st_size for p in (out / "index").iterdir()} == {40 + 64 * 4 + 400 * 20}


def test_sizes_say_where_they_came_from(small_store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("maxHashSlotNum=64\nmaxIndexNum=400\n")
    shutil.rmtree(small_store / "index")
    r = cli(
        "rebuild-index", "--store", small_store, "--output", tmp_path / "o", "--broker-conf", conf, "--format", "json"
    )
    assert r.exit_code == 0, r.stderr
    sizes = json.loads(r.stdout)["sizes"]
    assert sizes["maxIndexNum"] == {"value": 400, "from": f"--broker-conf {conf}"}
    assert sizes["mappedFileSizeConsumeQueue"] == {"value": 2000, "from": "the store's consume-queue files"}


# ------------------------------------------------------------------ 7. unusable sizes: one line, exit 3 (#22)


@pytest.mark.parametrize(
    "prop",
    [
        "mappedFileSizeConsumeQueue=0",
        "maxHashSlotNum=0",
        "maxIndexNum=1",
        "maxHashSlotNum=-1",
        "mappedFileSizeConsumeQueue=-20",
    ],
)
@pytest.mark.parametrize("dry", [False, True])
def test_unusable_sizes_in_broker_conf_are_one_line(small_store, tmp_path, prop, dry):
    """ZeroDivisionError / IndexError / 'index file full right after creation' tracebacks. A
    size of 0 or less is refused as the config is read (exit 2, docs/safety.md); a positive one
    rebuild-index cannot use (maxIndexNum=1) when the rebuild starts (exit 3)."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\nmaxIndexNum=400\n{prop}\n")
    shutil.rmtree(small_store / "index")
    shutil.rmtree(small_store / "consumequeue")
    r = run(
        "rebuild-index",
        "--store",
        small_store,
        "--output",
        tmp_path / "o",
        "--broker-conf",
        conf,
        *(["--dry-run"] if dry else []),
    )
    assert r.returncode == (2 if int(prop.split("=")[1]) <= 0 else 3), r.stderr
    assert prop.split("=")[0] in one_error_line(r.stderr.decode())
    assert not (tmp_path / "o").exists()


def test_empty_commitlog_files_and_a_huge_file_name_are_one_line(small_store, tmp_path):
    """All commit-log files 0 bytes (size inferred 0) or mappedFileSizeCommitLog=0: exit 3;
    a commit-log file named 99999999999999999999: no traceback."""
    conf = tmp_path / "zero.conf"
    conf.write_text("mappedFileSizeCommitLog=0\n")
    empty = tmp_path / "empty"
    shutil.copytree(small_store, empty)
    for f in (empty / "commitlog").iterdir():
        f.write_bytes(b"")
    for extra, code in (([], 3), (["--broker-conf", conf], 2)):  # a size <= 0 in a config: usage (exit 2)
        r = run("rebuild-index", "--store", empty, "--output", tmp_path / "o", *SMALL, *extra)
        assert r.returncode == code, r.stderr
        assert "mappedFileSizeCommitLog" in one_error_line(r.stderr.decode())
    huge = tmp_path / "huge"
    shutil.copytree(small_store, huge)
    first = sorted((huge / "commitlog").iterdir())[0]
    shutil.copy(first, huge / "commitlog" / "99999999999999999999")
    for args in (["--output", tmp_path / "o2"], ["--in-place"]):
        r = run("rebuild-index", "--store", huge, *args, "--format", "json")
        assert b"Traceback" not in r.stderr and r.returncode in (0, 3), r.stderr


# ------------------------------------------------------------------ 3. the journal (#22)


def test_planted_journal_tmp_link_is_not_written_through(small_store, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (small_store / (JOURNAL + ".tmp")).symlink_to(victim)
    r = cli("rebuild-index", "--store", small_store, "--in-place", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert victim.read_text() == "precious"
    assert not (small_store / JOURNAL).exists()


def test_journal_through_a_symlinked_directory_is_refused(small_store, tmp_path):
    """A journal path through a link inside the store passed the (abspath) check, and
    --recover rmtree'd the directory outside."""
    outside = tmp_path / "outside"
    (outside / "victim").mkdir(parents=True)
    (outside / "victim" / "precious").write_text("keep")
    (small_store / "link").symlink_to(outside, target_is_directory=True)
    j = {
        "state": "cleanup",
        "staging": f"{small_store}/.rebuild-index-1",
        "no_backup": True,
        "marker": ".rebuild-1",
        "backup_dirs": [],
        "parts": [
            [
                f"{small_store}/consumequeue",
                f"{small_store}/.rebuild-index-1/consumequeue",
                f"{small_store}/link/victim",
                "replace",
            ]
        ],
    }
    (small_store / JOURNAL).write_text(json.dumps(j))
    before = outside_digest(outside)
    r = cli("rebuild-index", "--store", small_store, "--recover")
    assert r.exit_code == 3 and "journal" in one_error_line(r.stderr)
    assert outside_digest(outside) == before


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "huge", "deep"])
def test_hostile_journal_is_a_bounded_one_line_refusal(small_store, kind):
    path = small_store / JOURNAL
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(1 << 30)  # sparse: 1 GB of zeros
    else:
        path.write_text("[" * 200_000 + "]" * 200_000)
    before = tree_digest(small_store)
    r = run_limited("rebuild-index", "--store", small_store, "--recover")
    assert r.returncode == 3, r.stderr
    assert "journal" in one_error_line(r.stderr.decode())
    assert tree_digest(small_store) == before


def run_limited(*args, mem: int = 768 << 20) -> subprocess.CompletedProcess:
    """The CLI with its address space capped (a read of a whole 1 GB file cannot fit)."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)],
        capture_output=True,
        env=env,
        timeout=120,
        preexec_fn=cap,
    )


# ------------------------------------------------------------------ 4. checkpoint backup bounded (#22)


@pytest.mark.parametrize("kind", ["dev-zero", "sparse"])
def test_checkpoint_backup_only_copies_a_checkpoint_sized_file(small_store, kind):
    """checkpoint -> /dev/zero wrote 15 GB; a huge sparse checkpoint was copied densely."""
    cp = small_store / "checkpoint"
    if kind == "dev-zero":
        cp.unlink()
        cp.symlink_to("/dev/zero")
    else:
        with open(cp, "r+b") as fh:
            fh.truncate(64 << 20)
    before = tree_digest(small_store)
    r = run("rebuild-index", "--store", small_store, "--in-place")
    assert r.returncode == 3, r.stderr
    line = one_error_line(r.stderr.decode())
    assert "checkpoint" in line and "--no-backup" in line
    assert tree_digest(small_store) == before  # refused before anything changed: no journal, no staging
    assert not list(small_store.glob("rmqstore-backup")) and not list(small_store.glob(".rebuild-index*"))
    if kind == "sparse":  # without a backup the checkpoint is simply replaced
        r = run("rebuild-index", "--store", small_store, "--in-place", "--no-backup")
        assert r.returncode == 0, r.stderr
        assert cp.stat().st_size == 4096


# ------------------------------------------------------------------ 5. full and read-only disks (#22)


@pytest.mark.parametrize("only", ["cq", "index"])
def test_full_disk_output_is_one_line_and_leaves_nothing(small_store, tmp_path, only):
    """SIGBUS (exit 135, no message) on a sparse mapped index page, or an OSError traceback."""
    with tmpfs(tmp_path / "full", "8k") as full:
        r = run("rebuild-index", "--store", small_store, "--output", full / "out", "--only", only)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "no space left on device" in one_error_line(r.stderr.decode())
        assert os.listdir(full) == []


def test_full_disk_spark_output_is_one_line_and_leaves_nothing(small_store, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    with tmpfs(tmp_path / "full", "8k") as full:
        r = run(
            "rebuild-index",
            "--store",
            small_store,
            "--output",
            full / "out",
            "--engine",
            "spark",
            "--spark-master",
            "local[1]",
        )
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "no space left on device" in one_error_line(r.stderr.decode()).lower()
        assert os.listdir(full) == []


def test_full_disk_in_place_rolls_back(tmp_path):
    src = generate(tmp_path / "src", messages=300)
    with tmpfs(tmp_path / "full", "2m") as full:
        store = full / "store"
        shutil.copytree(src, store)  # densely: on a full tmpfs even reading a hole of a mapping faults
        filler = full / "filler"
        filler.write_bytes(b"x" * (shutil.disk_usage(full).free - 16 * 1024))  # room for a part of the new set
        before = tree_digest(store)
        r = run("rebuild-index", "--store", store, "--in-place", *SMALL)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "no space left on device" in one_error_line(r.stderr.decode())
        assert tree_digest(store) == before  # old sets untouched, no journal, no staging left
        filler.unlink()
        r = run("rebuild-index", "--store", store, "--in-place", *SMALL)
        assert r.returncode == 0, r.stderr


def test_enospc_from_fallocate_and_write_is_one_line(small_store, tmp_path, monkeypatch):
    """The same with posix_fallocate or os.pwrite failing (file systems tmpfs cannot stand for)."""

    def no_space(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    for name in ("posix_fallocate", "pwrite"):
        with monkeypatch.context() as m:
            m.setattr(os, name, no_space)
            out = tmp_path / f"out-{name}"
            r = cli("rebuild-index", "--store", small_store, "--output", out, "--only", "cq")
            assert r.exit_code == 3, r.stderr
            assert "no space left on device" in one_error_line(r.stderr)
            assert not out.exists()
            before = tree_digest(small_store)
            r = cli("rebuild-index", "--store", small_store, "--in-place")
            assert r.exit_code == 3, r.stderr
            assert "no space left on device" in one_error_line(r.stderr)
            assert tree_digest(small_store) == before


def test_read_only_file_system_is_one_line(small_store, tmp_path):
    with tmpfs(tmp_path / "ro", "4m") as ro:
        shutil.copytree(small_store, ro / "store")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        before = tree_digest(ro / "store")
        r = run("rebuild-index", "--store", ro / "store", "--in-place")
        assert r.returncode == 3, r.stderr
        assert "read-only file system" in one_error_line(r.stderr.decode())
        r = run("rebuild-index", "--store", small_store, "--output", ro / "out")
        assert r.returncode == 3, r.stderr
        assert "read-only file system" in one_error_line(r.stderr.decode())
        assert tree_digest(ro / "store") == before


# ------------------------------------------------------------------ 6. times no date can show (#22)

GOOD = 1_767_225_600_000  # 2026-01-01 UTC


def _timed_store(root: Path, times: list[int]) -> Path:
    cfg = StoreConfig.load(root, None, mapped_file_size_commit_log=65536)
    cl = CommitLog(cfg, writable=True)
    cl.open_for_append()
    for i, ts in enumerate(times):
        props = f"KEYS\x01k{i}\x02UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D{i:04X}"
        cl.append(AppendSpec("T", 0, b"b%d" % i, props, ts, GOOD, (b"\x7f\0\0\1", 1), (b"\x0a\0\0\5", 10911)))
    cl.close()
    return root


@pytest.mark.parametrize("bad", [(1 << 63) - 1, -1, -(1 << 63), 253_402_300_800_000 + 5])
def test_store_time_that_is_no_date_names_files_deterministically(tmp_path, bad):
    """storeTimestamp 2^63-1 (or negative, or after 9999) made every rebuild fail."""
    times = [bad] + [GOOD + 1000 * i for i in range(1, 6)] + [bad] + [GOOD + 10_000]
    store = _timed_store(tmp_path / "store", times)
    outs = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        r = cli(
            "rebuild-index",
            "--store",
            store,
            "--output",
            out,
            "--cq-file-size",
            "2000",
            "--index-slots",
            "8",
            "--index-max",
            "4",
            "--tz",
            "UTC",
            "--format",
            "json",
        )
        assert r.exit_code == 0, r.stderr
        outs.append(sorted(p.name for p in (out / "index").iterdir()))
        s = json.loads(r.stdout)
        assert s["messages"] == len(times)
        assert s["index_names_fallback"][0] == {"file": "19700101000000000", "store_timestamp": bad}
        warn = [ln for ln in r.stderr.splitlines() if "warning" in ln]
        assert len(warn) == 1 and str(bad) in warn[0] and "19700101000000000" in warn[0]
    names = outs[0]
    assert outs[0] == outs[1] and names == sorted(names) and len(set(names)) == len(names)
    assert names[0] == "19700101000000000" and names[1].startswith("20260101")
    assert all(len(n) == 17 and n.isdigit() for n in names)


def test_store_time_that_is_no_date_spark_names_alike(tmp_path, spark):
    import datetime as dt

    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.rebuild_reference import build_set

    times = [(1 << 63) - 1, GOOD, GOOD + 1000, -5, GOOD + 3000]
    store = _timed_store(tmp_path / "store", times)
    cfg = StoreConfig.load(
        store,
        None,
        mapped_file_size_commit_log=65536,
        mapped_file_size_consume_queue=2000,
        max_hash_slot_num=8,
        max_index_num=4,
    )
    opts = RebuildOptions(tz=dt.timezone.utc)
    local = build_set(cfg, tmp_path / "local", opts)
    remote = sp.rebuild_build(spark, cfg, tmp_path / "spark", opts)
    assert sorted(os.listdir(tmp_path / "local" / "index")) == sorted(os.listdir(tmp_path / "spark" / "index"))
    assert local.fallback_index_names == remote.fallback_index_names != []


def test_full_disk_while_swapping_leaves_a_journal_the_next_run_finishes(small_store, tmp_path, monkeypatch):
    """ENOSPC after the swap began (the checkpoint backup): one line naming --recover; the
    journal still says *swapping*, and the next run completes the rebuild."""
    from rmqstore_cli.store.files import safefs

    real_replace = safefs.replace_file

    def full_for_backup(path, data, roots):
        if "rmqstore-backup" in Path(path).parts:
            raise safefs.os_error(OSError(errno.ENOSPC, "No space left on device"), path, "write")
        return real_replace(path, data, roots)

    with monkeypatch.context() as m:
        m.setattr(safefs, "replace_file", full_for_backup)
        r = cli("rebuild-index", "--store", small_store, "--in-place")
    assert r.exit_code == 3, r.stderr
    line = one_error_line(r.stderr)
    assert "no space left on device" in line and "--recover" in line
    assert json.loads((small_store / JOURNAL).read_text())["state"] == "swapping"
    r = cli("rebuild-index", "--store", small_store, "--recover", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "completed" in r.stdout, r.stdout
    assert not (small_store / JOURNAL).exists() and not list(small_store.glob(".rebuild-index-*"))
    assert cli("verify", "--store", small_store).exit_code == 0
