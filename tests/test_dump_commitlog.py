"""dump-commitlog on damaged and unusual stores: it reads what can be read and says where not."""
from __future__ import annotations

import json

from conftest import cli, run, tree_digest


def _offsets(r):
    return [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]


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
    r = cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--topic", "OrderTopic",
            "--queue-id", "1", "--limit", "5")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 5 and all(x["topic"] == "OrderTopic" and x["queue_id"] == 1 for x in rows)
    assert [x["queue_offset"] for x in rows] == sorted(x["queue_offset"] for x in rows)
    key = rows[0]["keys"][0]
    r = cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--key", key)
    assert [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()] == [rows[0]["physical_offset"]]
    r = run("dump-commitlog", "--store", small_store, "--topic", "NoSuchTopic")
    assert r.returncode == 1 and r.stdout == b""


def test_time_window(small_store):
    rows = [json.loads(x) for x in cli("dump-commitlog", "--store", small_store, "--format", "jsonl",
                                         "--no-properties").stdout.splitlines()]
    t0, t1 = rows[100]["store_timestamp"], rows[200]["store_timestamp"]
    r = cli("dump-commitlog", "--store", small_store, "--format", "jsonl", "--no-properties",
            "--begin", str(t0), "--end", str(t1))
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

    p = subprocess.run(f"{sys.executable} -m rmqstore_cli dump-commitlog --store {small_store} --format jsonl | head -1",
                       shell=True, capture_output=True)
    assert p.stdout.count(b"\n") == 1 and b"Traceback" not in p.stderr
