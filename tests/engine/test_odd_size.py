"""Issue #8: a commit-log or consume-queue file whose length is not the store's file size.

The broker refuses to load such a store (``MappedFileQueue#load`` checks every file's
length), and so do rmqstore's commands; the read commands take ``--allow-odd-size`` to
read it anyway (each odd file up to its real length, with a warning naming it). Mutating
commands keep refusing; verify reports the file as a finding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import cli, tree_digest

CUT = 30000  # the torn file keeps its first CUT bytes


def _cl_files(store):
    return sorted((store / "commitlog").iterdir())


def _dump(store, *extra):
    return cli("dump-commitlog", "--store", store, "--format", "jsonl", *extra)


@pytest.fixture
def torn(small_store):
    """The small store with its third commit-log file cut to CUT bytes (a torn copy); also
    the messages dump-commitlog listed before the cut."""
    r = _dump(small_store)
    assert r.exit_code == 0, r.stderr
    before = [json.loads(x) for x in r.stdout.splitlines()]
    victim = _cl_files(small_store)[2]
    os.truncate(victim, CUT)
    return small_store, victim, before


def _read_commands(store, before):
    m = next(x for x in before if x["keys"])
    return {
        "dump-commitlog": ["dump-commitlog", "--store", store, "--format", "jsonl"],
        "dump-cq": ["dump-cq", "--store", store, "--summary", "--format", "jsonl"],
        "index-lookup": ["index-lookup", m["keys"][0], "--store", store, "--format", "jsonl"],
        "decode-msgid": ["decode-msgid", m["msg_id"], "--store", store, "--format", "jsonl"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", ["dump-commitlog", "dump-cq", "index-lookup", "decode-msgid"])
@pytest.mark.parametrize("sizes", [[], ["--commitlog-file-size", "65536"]], ids=["inferred", "explicit"])
def test_read_commands_refuse_then_read_with_the_option(torn, command, sizes):
    store, victim, before = torn
    args = _read_commands(store, before)[command] + sizes
    digest = tree_digest(store)
    r = cli(*args)
    assert r.exit_code == 3 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmqstore: error: ")
    assert str(victim) in lines[0] and "30000 bytes" in lines[0] and "--allow-odd-size" in lines[0]
    r = cli(*args, "--allow-odd-size")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip()
    warn = [x for x in r.stderr.splitlines() if "--allow-odd-size" in x]
    assert warn == [
        f"rmqstore: warning: {victim} has {CUT} bytes, expected 65536; read up to its real length (--allow-odd-size)"
    ]
    assert tree_digest(store) == digest  # still read-only


def test_the_odd_file_is_read_up_to_its_real_length(torn):
    store, victim, before = torn
    start = int(victim.name)
    r = _dump(store, "--allow-odd-size")
    assert r.exit_code == 0, r.stderr
    got = [json.loads(x) for x in r.stdout.splitlines()]
    # every message that lies wholly inside the bytes that are left, and only those
    survivors = [
        m
        for m in before
        if not (start <= m["physical_offset"] < start + 65536) or m["physical_offset"] + m["total_size"] <= start + CUT
    ]
    assert [m["physical_offset"] for m in got] == [m["physical_offset"] for m in survivors]
    assert any(start <= m["physical_offset"] < start + CUT for m in got)
    assert len(got) < len(before)
    # the torn record at the cut is reported, with its offset in that file
    assert f"({victim.name}); the rest of that file was skipped" in r.stderr


def test_an_odd_consume_queue_file(small_store):
    qdir = next(
        q
        for t in sorted((small_store / "consumequeue").iterdir())
        for q in sorted(t.iterdir())
        if len(os.listdir(q)) >= 2
    )
    first = sorted(qdir.iterdir())[0]
    os.truncate(first, 1000)  # 50 of its 100 units are left
    topic, qid = qdir.parent.name, qdir.name
    r = cli("dump-cq", topic, qid, "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 3 and str(first) in r.stderr and "--allow-odd-size" in r.stderr
    r = cli("dump-cq", topic, qid, "--store", small_store, "--allow-odd-size", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    units = [json.loads(x) for x in r.stdout.splitlines()]
    assert [u["cq_offset"] for u in units] == list(range(50))  # the queue ends where the file does
    assert all(u["agrees"] for u in units)
    assert f"{first} has 1000 bytes, expected 2000" in r.stderr


def test_many_odd_files_warn_a_bounded_number_of_lines(small_store):
    files = _cl_files(small_store)
    assert len(files) > 12
    r = _dump(small_store, "--commitlog-file-size", "70000", "--allow-odd-size")
    assert r.exit_code == 0, r.stderr
    warn = [x for x in r.stderr.splitlines() if "expected 70000" in x]
    assert len(warn) == 10
    assert f"{len(files) - 10} more files of an odd size" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["rebuild-index", "--in-place"],
        ["rebuild-index", "--output", "{out}"],
        ["expire", "--reserved-hours", "0"],
        ["generate", "--append", "--messages", "5"],
    ],
)
def test_mutating_commands_keep_refusing(torn, tmp_path, args):
    store, victim, _ = torn
    args = [a.replace("{out}", str(tmp_path / "out")) for a in args]
    digest = tree_digest(store)
    r = cli(*args, "--store", store)
    assert r.exit_code == 3, r.stdout
    assert str(victim) in r.stderr and "--allow-odd-size" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert tree_digest(store) == digest and not (tmp_path / "out").exists()
    r = cli(*args, "--store", store, "--allow-odd-size")
    assert r.exit_code == 2 and "No such option" in r.stderr


def test_verify_reports_the_odd_file(torn):
    store, victim, _ = torn
    r = cli("verify", "--store", store, "--format", "jsonl")
    assert r.exit_code == 1
    found = [json.loads(x) for x in r.stdout.splitlines()]
    assert [f["file"] for f in found if f.get("check") == "commitlog.file-size"] == [f"commitlog/{victim.name}"]


def test_subprocess_error_is_one_line_and_exit_3(torn):
    """The documented contract end to end: one stderr line, exit 3, no traceback."""
    store, victim, _ = torn
    p = subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", "dump-commitlog", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 3 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert "--allow-odd-size" in p.stderr
