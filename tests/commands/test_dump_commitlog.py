"""dump-commitlog on damaged and unusual stores: it reads what can be read and says where not."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli, run, tree_digest


def _offsets(r):
    return [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]


@pytest.mark.slow
def test_corrupt_middle_file_is_skipped_with_a_warning(small_store):
    before = _offsets(cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--no-properties"))
    f = sorted((small_store / "commitlog").iterdir())[2]
    start = int(f.name)
    with open(f, "r+b") as fh:  # break the magic code of a record in the middle of the file
        victim = next(o for o in before if o > start + 20000) - start
        fh.seek(victim + 4)
        fh.write(b"\xde\xad\xbe\xef")
    r = run("dump-commitlog", "--store", small_store, "--format", "jsonl", "--no-properties")
    assert r.returncode == 0
    got = [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]
    lost = [o for o in before if start + victim <= o < start + 65536]
    assert got == [o for o in before if o not in lost]  # later files still read
    assert f"at offset {start + victim} ({f.name})".encode() in r.stderr
    assert b"bad magic code 0xDEADBEEF" in r.stderr


def test_offset_inside_a_message_names_the_nearest_starts(small_store):
    offs = _offsets(cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--limit", "3"))
    r = run("dump-commitlog", "--store", small_store, "--from-offset", str(offs[1] + 5))
    assert r.returncode == 2
    assert f"nearest starts: {offs[1]} before, {offs[2]} after".encode() in r.stderr
    assert r.stderr.count(b"\n") == 1


def test_filters_and_exit_code(small_store):
    r = cli(
        "dump-commitlog",
        "--store",
        small_store,
        "--format",
        "jsonl",
        "--topic",
        "OrderTopic",
        "--queue-id",
        "1",
        "--limit",
        "5",
    )
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 5 and all(x["topic"] == "OrderTopic" and x["queue_id"] == 1 for x in rows)
    assert [x["queue_offset"] for x in rows] == sorted(x["queue_offset"] for x in rows)
    key = rows[0]["keys"][0]
    r = cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--key", key)
    assert [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()] == [rows[0]["physical_offset"]]
    r = run("dump-commitlog", "--store", small_store, "--topic", "NoSuchTopic")
    assert r.returncode == 1 and r.stdout == b""


def test_time_window(small_store):
    rows = [
        json.loads(x)
        for x in cli(
            "dump-commitlog", "--store", small_store, "--format", "jsonl", "--no-properties"
        ).stdout.splitlines()
    ]
    t0, t1 = rows[100]["store_timestamp"], rows[200]["store_timestamp"]
    r = cli(
        "dump-commitlog",
        "--store",
        small_store,
        "--format",
        "jsonl",
        "--no-properties",
        "--begin",
        str(t0),
        "--end",
        str(t1),
    )
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert got == [x for x in rows if t0 <= x["store_timestamp"] <= t1]


def test_not_a_store_and_missing_store(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("dump-commitlog", "--store", tmp_path / "empty")
    assert r.returncode == 3 and b"not a RocketMQ store" in r.stderr
    r = run("dump-commitlog", "--store", tmp_path / "missing")
    assert r.returncode == 3 and b"no such store directory" in r.stderr


def test_dump_is_read_only(small_store):
    before = tree_digest(small_store)
    cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--body", "base64", "--check-crc")
    cli("dump-commitlog", "--store", small_store, "--show-blank", "--limit", "50")
    assert tree_digest(small_store) == before


def test_broken_pipe_is_quiet(small_store):
    import subprocess
    import sys

    p = subprocess.run(
        f"{sys.executable} -m rmqstore_cli dump-commitlog --store {small_store} --format jsonl | head -1",
        shell=True,
        capture_output=True,
    )
    assert p.stdout.count(b"\n") == 1 and b"Traceback" not in p.stderr


# ---------------------------------------------------------------- --begin seeks (store/answers/seek.py)


def _times(store, *extra) -> list[int]:
    """Store times to try: before the first record, quantiles, the last, after the last."""
    rows = [
        json.loads(x)
        for x in cli(
            "dump-commitlog", "--store", store, *extra, "--format", "jsonl", "--no-properties"
        ).stdout.splitlines()
    ]
    ts = sorted(r["store_timestamp"] for r in rows)
    return [ts[0] - 1000] + [ts[len(ts) * q // 8] for q in range(1, 8)] + [ts[-1], ts[-1] + 1]


def _same_with_and_without_seek(store, when: int, *args) -> str:
    """dump-commitlog --begin prints the same bytes whether it seeks or walks every file;
    the seek's stderr."""
    a = cli("dump-commitlog", "--store", store, "--begin", str(when), *args)
    b = cli("dump-commitlog", "--store", store, "--begin", str(when), "--no-seek", *args)
    assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout), (when, args)
    return a.stderr


@pytest.mark.slow
def test_begin_seeks_and_prints_what_the_full_walk_prints(small_store_master):
    times = _times(small_store_master)
    seeks = 0
    for when in times:
        for args in (
            ("--format", "jsonl"),
            ("--format", "table"),
            ("--format", "json", "--body", "base64"),
            ("--format", "jsonl", "--topic", "OrderTopic", "--queue-id", "1"),
            ("--format", "jsonl", "--tag", "TagA", "--limit", "7"),
            ("--format", "jsonl", "--end", str(times[5])),
        ):
            err = _same_with_and_without_seek(small_store_master, when, *args)
            seeks += "starting at commit-log file" in err
    assert seeks >= 6 * 6  # the middle times seek, in every form
    err = _same_with_and_without_seek(small_store_master, times[4], "--format", "jsonl", "--from-offset", "65536")
    assert "starting at commit-log file" in err


def test_begin_seek_reads_fewer_records(small_store_master, monkeypatch):
    """Counted through a hook on the walk: the seek's walk decodes a fraction of the records."""
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.records.message import Message

    walks: list[int] = []  # records each walk found; the command's own walk is the last
    real = CommitLog.scan_blocks

    def counting(self, *a, **k):
        walks.append(0)
        for rec in real(self, *a, **k):
            walks[-1] += 1 if isinstance(rec, Message) else rec.n
            yield rec

    monkeypatch.setattr(CommitLog, "scan_blocks", counting)
    when = _times(small_store_master)[6]
    r = cli("dump-commitlog", "--store", small_store_master, "--begin", str(when), "--format", "jsonl")
    seeking = walks[-1]
    full = cli("dump-commitlog", "--store", small_store_master, "--begin", str(when), "--no-seek", "--format", "jsonl")
    assert r.stdout == full.stdout
    assert "rmqstore: note: --begin: starting at commit-log file 0000000000000" in r.stderr
    assert 0 < len(r.stdout.splitlines()) <= seeking < walks[-1] // 2


@pytest.mark.slow
def test_begin_seek_on_the_real_broker_stores():
    from tests.helpers import VERSIONS, fixture_dir

    for v in VERSIONS:
        d = fixture_dir(v)
        store = d / "store"
        conf = ("--broker-conf", str(d / "broker.conf"))
        notes = ""
        for when in _times(store, *conf):
            for args in (("--format", "jsonl"), ("--format", "table")):
                notes += _same_with_and_without_seek(store, when, *conf, *args)
        assert "starting at commit-log file" in notes, v


def _replayed(src, dest, change) -> str:
    """``dest``: ``src`` written again with ``change(i, record)`` applied to each record."""
    from tests.helpers import dumped, written

    dump = dumped(src)
    for i, rec in enumerate(dump):
        change(i, rec, len(dump))
    return written(dest, dump)


@pytest.mark.slow
def test_begin_seek_with_store_times_out_of_order(small_store_master, tmp_path):
    """Store times that fall in commit-log order (a clock stepped back 20 minutes; every
    record off by up to ±90 s, so queues interleave out of order): the same output, by a
    seek where it is safe and by the full walk where the probes see time go backwards."""
    import random

    rnd = random.Random(5)

    def step(i, rec, n):
        if i >= n * 6 // 10:
            rec["store_timestamp"] -= 20 * 60 * 1000

    def jitter(i, rec, n):
        rec["store_timestamp"] += rnd.randint(-90_000, 90_000)

    for name, change in (("step", step), ("jitter", jitter)):
        store = _replayed(small_store_master, tmp_path / name, change)
        notes = ""
        for when in _times(store):
            notes += _same_with_and_without_seek(store, when, "--format", "jsonl")
        assert "store times go backwards" in notes


def test_begin_without_usable_consume_queues_walks_every_file(small_store):
    import shutil

    when = _times(small_store)[5]
    cq = small_store / "consumequeue" / "OrderTopic" / "1"
    first = sorted(cq.iterdir())[0]
    with open(first, "r+b") as fh:  # a unit pointing into the middle of a record
        fh.seek(20 * 3)
        fh.write((12345).to_bytes(8, "big"))
    err = _same_with_and_without_seek(small_store, when, "--format", "jsonl")
    assert "reading from the first commit-log file" in err or "starting at" in err
    (small_store / "consumequeue" / "ZTopic" / "0" / ("0" * 20)).mkdir(parents=True)  # a directory named like a file
    err = _same_with_and_without_seek(small_store, when, "--format", "jsonl")
    assert "reading from the first commit-log file" in err
    shutil.rmtree(small_store / "consumequeue")
    err = _same_with_and_without_seek(small_store, when, "--format", "jsonl")
    assert "reading from the first commit-log file (no consume queue)" in err


def test_begin_seek_leaves_show_blank_and_check_crc_alone(small_store_master):
    when = _times(small_store_master)[5]
    for flag in ("--show-blank", "--check-crc"):
        r = cli("dump-commitlog", "--store", small_store_master, "--begin", str(when), flag, "--format", "jsonl")
        assert r.exit_code == 0 and "--begin" not in r.stderr
