"""Every repair verify advises is applied literally to a copy of a damaged store (the real
4.9.7 and 5.3.3 brokers' samples, and generated multi-file stores); then the broker would
start, verify has nothing left about the file, and every good message is still there:
dump-commitlog's JSON Lines after the repair are the undamaged store's, minus the records
the damage itself cut.

Issue 31: for a torn commit-log file the advice was "move the file aside", which drops every
message in it (and, for a file before the last, leaves a gap the broker's recovery stops at).
What the broker keeps (store/write/repair.py): ``MappedFileQueue#doLoad`` needs the configured length;
``CommitLog#recoverNormally``/``#recoverAbnormally`` keep every record
``#checkMessageAndReturnSize`` accepts, go on to the next file at a BLANK record and end the log
(deleting later files) anywhere else.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli, fast_first, fixture_dir, generate

#: checks a repair must leave nothing of
REPAIRED = {"commitlog.file-size", "cq.file-size", "commitlog.blank", "recovery.truncate", "broker.no-start"}


def _copy(src: Path, dest: Path) -> Path:
    """A writable copy, holes kept (a DLedger index file is 160 MiB of hole)."""
    subprocess.run(["cp", "-r", "--sparse=always", str(src), str(dest)], check=True)
    for p in [dest, *dest.rglob("*")]:  # the samples are read-only
        p.chmod(p.stat().st_mode | 0o200)
    return dest


def _dump(store: Path, *conf: str) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, *conf, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def _verify(store: Path, *conf: str) -> tuple[list[dict], dict]:
    r = cli("verify", "--store", store, *conf, "--format", "jsonl")
    assert r.exit_code in (0, 1), r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"]


def _advice(findings: list[dict], summary: dict, check: str, file: str) -> str:
    """The repair command the finding of ``check`` on ``file`` prints, and the same as its
    broker_start reason's when the broker would not start because of it."""
    [f] = [f for f in findings if f["check"] == check and f["file"] == file]
    cmd = f["detail"][f["detail"].index("rmqstore repair") :]
    for r in summary["broker_start"]["reasons"]:
        if r["file"] == file and r["fatal"]:
            assert r["repair"] == cmd
    return cmd


def _apply(cmd: str) -> None:
    """Run the advice as printed: each ``&&`` part a rmqstore command line."""
    for part in cmd.split(" && "):
        words = shlex.split(part)
        assert words[0] == "rmqstore", cmd
        r = cli(*words[1:])
        assert r.exit_code == 0, (part, r.stderr)


def _kept(before: list[dict], file: str, cut: int) -> list[dict]:
    """The records the damage left whole: all but those of ``file`` reaching past ``cut``."""
    base = int(Path(file).name)
    return [r for r in before if r["file"] != Path(file).name or r["physical_offset"] + r["total_size"] <= base + cut]


def _check_repaired(store: Path, conf: tuple, before: list[dict], file: str, cut: int) -> None:
    findings, summary = _verify(store, *conf)
    assert summary["broker_start"]["starts"] is True, summary["broker_start"]
    left = [f for f in findings if f["check"] in REPAIRED]
    assert not left, left
    assert _dump(store, *conf) == _kept(before, file, cut)


# ------------------------------------------------------------------ generated stores


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Path:
    """A store of 25 commit-log files of 64 KiB (SMALL sizes)."""
    return generate(tmp_path_factory.mktemp("repair") / "store", messages=3000)


def _records_of(before: list[dict], name: str) -> list[dict]:
    return [r for r in before if r["file"] == name]


@pytest.mark.parametrize(
    "where,cut",
    fast_first(
        [(w, c) for c in ("inside-record", "record-boundary", "inside-header", "empty") for w in ("middle", "last")],
        [
            f"{c}-{w}"
            for c in ("inside-record", "record-boundary", "inside-header", "empty")
            for w in ("middle", "last")
        ],
    ),
)
def test_a_commitlog_file_cut_short_is_padded_and_keeps_every_good_message(multi, tmp_path, where, cut):
    before = _dump(multi)
    files = sorted((multi / "commitlog").iterdir())
    victim = files[2] if where == "middle" else files[-1]
    recs = _records_of(before, victim.name)
    r = recs[len(recs) // 2]
    at = r["physical_offset"] - int(victim.name)
    pos = {"inside-record": at + r["total_size"] // 2, "record-boundary": at, "inside-header": at + 5, "empty": 0}[cut]
    store = _copy(multi, tmp_path / "store")
    os.truncate(store / "commitlog" / victim.name, pos)
    rel = f"commitlog/{victim.name}"
    findings, summary = _verify(store)
    assert summary["broker_start"]["starts"] is False  # MappedFileQueue#doLoad: length not matched
    cmd = _advice(findings, summary, "commitlog.file-size", rel)
    assert "aside" not in cmd
    _apply(cmd)
    _check_repaired(store, (), before, str(store / rel), pos)
    assert (store / rel).stat().st_size == 65536


def test_a_middle_file_without_its_blank_gets_one(multi, tmp_path):
    """A full file before the last whose data ends in zeros (its BLANK and last records lost):
    recovery would stop there and delete every later file; the advice writes the BLANK."""
    before = _dump(multi)
    victim = sorted((multi / "commitlog").iterdir())[-2]  # normal recovery walks the last three files
    recs = _records_of(before, victim.name)
    pos = recs[-3]["physical_offset"] - int(victim.name)
    store = _copy(multi, tmp_path / "store")
    with open(store / "commitlog" / victim.name, "r+b") as fh:
        fh.seek(pos)
        fh.write(bytes(65536 - pos))
    rel = f"commitlog/{victim.name}"
    findings, summary = _verify(store)
    truncate = [f for f in findings if f["check"] == "recovery.truncate"]
    assert truncate and truncate[0]["physical_offset"] == int(victim.name) + pos
    cmd = _advice(findings, summary, "commitlog.blank", rel)
    assert cmd in truncate[0]["detail"]
    _apply(cmd)
    _check_repaired(store, (), before, str(store / rel), pos)


def test_a_consume_queue_file_cut_short_is_padded_then_rebuilt(multi, tmp_path):
    store = _copy(multi, tmp_path / "store")
    q = sorted((store / "consumequeue").iterdir())[0] / "0"
    victim = sorted(q.iterdir())[0]
    original = {p.relative_to(store): p.read_bytes() for p in (store / "consumequeue").rglob("*") if p.is_file()}
    os.truncate(victim, victim.stat().st_size // 2 + 7)  # inside a unit
    rel = str(victim.relative_to(store))
    findings, summary = _verify(store)
    cmd = _advice(findings, summary, "cq.file-size", rel)
    _apply(cmd)
    findings, summary = _verify(store)
    assert summary["broker_start"]["starts"] and not [f for f in findings if f["check"].startswith("cq.")]
    after = {p.relative_to(store): p.read_bytes() for p in (store / "consumequeue").rglob("*") if p.is_file()}
    assert after == original  # every unit back, byte for byte


# ------------------------------------------------------------------ the real brokers' stores


@pytest.mark.parametrize(
    "version,where",
    fast_first(
        [(v, w) for w in ("middle", "last") for v in ("4.9.7", "5.3.3")],
        [f"{v}-{w}" for w in ("middle", "last") for v in ("4.9.7", "5.3.3")],
    ),
)
def test_a_real_brokers_file_cut_short(tmp_path, version, where):
    d = fixture_dir(version)
    conf = ("--broker-conf", str(d / "broker.conf"))
    before = _dump(d / "store", *conf)
    names = sorted(p.name for p in (d / "store" / "commitlog").iterdir())
    name = names[4] if where == "middle" else names[-1]
    recs = _records_of(before, name)
    r = recs[len(recs) // 3]
    pos = r["physical_offset"] - int(name) + r["total_size"] - 9
    store = _copy(d / "store", tmp_path / "store")
    os.truncate(store / "commitlog" / name, pos)
    rel = f"commitlog/{name}"
    findings, summary = _verify(store, *conf)
    assert summary["broker_start"]["starts"] is False
    _apply(_advice(findings, summary, "commitlog.file-size", rel))
    _check_repaired(store, conf, before, str(store / rel), pos)


# ------------------------------------------------------------------ what repair refuses


def test_repair_refuses_damage_inside_the_file_and_a_live_broker(multi, tmp_path):
    """Not a cut (a record damaged before the end): padding would drop the good records after
    it, so it is refused (exit 4) and nothing changes; so is a store a broker holds."""
    import sys

    store = _copy(multi, tmp_path / "store")
    victim = sorted((store / "commitlog").iterdir())[2]
    r = _records_of(_dump(multi), victim.name)[3]
    at = r["physical_offset"] - int(victim.name)
    data = bytearray(victim.read_bytes()[:40000])
    data[at : at + 4] = (r["total_size"] + 1).to_bytes(4, "big")  # TOTALSIZE disagrees: the walk stops there
    victim.write_bytes(bytes(data))
    r = cli("repair", "--store", store, "--pad", victim)
    assert r.exit_code == 4 and r.stderr.startswith("rmqstore: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert victim.read_bytes() == bytes(data)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl,os,struct,sys,time\n"
                "fd=os.open(sys.argv[1],os.O_RDWR)\n"
                "fcntl.fcntl(fd,fcntl.F_SETLK,struct.pack('hhqqi4x',fcntl.F_WRLCK,0,0,1,0))\n"
                "print('locked',flush=True)\ntime.sleep(60)\n"
            ),
            str(store / "lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        last = sorted((store / "commitlog").iterdir())[-1]
        os.truncate(last, 1000)
        r = cli("repair", "--store", store, "--pad", last)
        assert r.exit_code == 4 and "live broker" in r.stderr
        assert last.stat().st_size == 1000
        assert cli("repair", "--store", store, "--pad", last, "--dry-run").exit_code == 0
        assert last.stat().st_size == 1000
    finally:
        holder.kill()
        holder.wait()


def test_a_file_longer_than_its_size(multi, tmp_path):
    """Zeros beyond the size (a copy padded too far) are cut back, exactly; data beyond it
    means the file was written with another size: verify names no pad and repair refuses."""
    before = _dump(multi)
    store = _copy(multi, tmp_path / "store")
    victim = sorted((store / "commitlog").iterdir())[5]
    rel = f"commitlog/{victim.name}"
    with open(victim, "ab") as fh:
        fh.write(bytes(4096))
    findings, summary = _verify(store)
    _apply(_advice(findings, summary, "commitlog.file-size", rel))
    _check_repaired(store, (), before, str(victim), 65536)
    with open(victim, "ab") as fh:
        fh.write(b"\1" * 100)
    findings, _ = _verify(store)
    [f] = [f for f in findings if f["check"] == "commitlog.file-size"]
    assert "rmqstore repair" not in f["detail"] and "another mappedFileSizeCommitLog" in f["detail"]
    r = cli("repair", "--store", store, "--pad", victim)
    assert r.exit_code == 4 and "another size" in r.stderr and victim.stat().st_size == 65536 + 100


def test_repair_refuses_what_is_not_a_file_it_knows(multi, tmp_path, sample_tarball):
    store = _copy(multi, tmp_path / "store")
    r = cli("repair", "--store", store, "--pad", store / "checkpoint")
    assert r.exit_code == 2 and "is not a commit-log or consume-queue file" in r.stderr
    d = sample_tarball("dledger")
    dl = _copy(d / "store", tmp_path / "dl")
    data = dl / "dledger-n9" / "data" / "00000000000000000000"
    r = cli("repair", "--store", dl, "--broker-conf", d / "broker.conf", "--pad", data)
    assert r.exit_code == 4 and "DLedger" in r.stderr
