"""verify's recovery prediction per broker version: ``CommitLog#recoverNormally`` changed in
5.3.2 (apache/rocketmq rocketmq-all-5.3.1..rocketmq-all-5.3.2, unchanged in 5.3.3).

- 4.9.7 and 5.0-5.3.1: normal recovery starts at the third-last commit-log file and
  dispatches nothing (``doDispatch = false``); 4.9.7's ``DefaultMessageStore#start`` then
  puts the reput at the consume queues' end, 5.x's at the commit log's end.
- 5.3.2+: it starts at the last file whose first offset is <= maxPhyOffsetOfConsumeQueue and
  dispatches every message with ``commitLogOffset > maxPhyOffsetOfConsumeQueue`` (strictly).
- ``recoverAbnormally`` and ``isMappedFileMatchedRecover`` are the same in 5.3.1 and 5.3.2.

The store: a generated 5.x store whose consume queues all end at one message X in the
middle of the commit log (as if the CQ flush lagged the commit log at a clean shutdown), one
queue's next CQ file left all zeros after a full one (apache/rocketmq#9728's state), and a
body CRC broken after X but before the third-last commit-log file.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from rmqstore_cli.formats.consume_queue import ConsumeQueueUnit
from rmqstore_cli.formats.derive import numpy_dtype

from rmqstore_cli.store.checks.startup import normal_dispatched, normal_recovery_start, resolve_version
from tests.helpers import cli, generate

CL_SIZE = 131072
CQ_SIZE = 1200  # 60 units a file
FILES = [i * 1000 for i in range(6)]


@pytest.mark.parametrize(
    "version, max_cq, start",
    [
        ("4.9", 4500, 3),  # CommitLog#recoverNormally@rocketmq-all-4.9.7: the third-last file
        ("5.3.1", 4500, 3),  # CommitLog#recoverNormally@rocketmq-all-5.3.1: the same
        ("5.3.1", -1, 3),
        ("5", 4500, 4),  # CommitLog#recoverNormally@rocketmq-all-5.3.2: the file holding maxPhyOffsetOfConsumeQueue
        ("5", 2000, 2),  # a file starting exactly there is "<=": it is the start
        ("5", 1999, 1),
        ("5", 99999, 5),  # queues past the log: the last file
        ("5", -1, 0),  # no consume queue: the loop stops at index 0
        ("5", 0, 0),
    ],
)
def test_recover_normally_start_file_per_version(version, max_cq, start):
    assert normal_recovery_start(version, FILES, max_cq) == start


def test_recover_normally_start_with_fewer_than_three_files():
    assert normal_recovery_start("5.3.1", [0, 1000], 1500) == 0
    assert normal_recovery_start("5", [0, 1000], 1500) == 1
    assert normal_recovery_start("5", [], -1) == 0


@pytest.mark.parametrize(
    "version, first, count, dispatched",
    [
        ("5", 101, 1, True),  # CommitLog#recoverNormally@rocketmq-all-5.3.2: commitLogOffset > max
        ("5", 100, 1, False),  # the message starting at maxPhyOffsetOfConsumeQueue itself is not
        ("5", 100, 3, True),  # ... but the run's later messages are
        ("5", 500, 2, False),  # at or past the recovered end: truncated, not dispatched
        ("5.3.1", 101, 5, False),  # CommitLog#recoverNormally@rocketmq-all-5.3.1: doDispatch = false
        ("4.9", 101, 5, False),  # CommitLog#recoverNormally@rocketmq-all-4.9.7: no dispatch at all
    ],
)
def test_recover_normally_dispatch_per_version(version, first, count, dispatched):
    assert normal_dispatched(version, first, count, 100, 500) is dispatched


def test_version_resolution(tmp_path):
    assert resolve_version(tmp_path, "5.3.1") == ("5.3.1", "option")
    assert resolve_version(tmp_path, None) == ("4.9", "assumed")
    (tmp_path / "timerwheel").write_bytes(b"")
    assert resolve_version(tmp_path, None) == ("5", "detected")


# ---------------------------------------------------------------- end to end, through verify


def _records(store) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [d for d in map(json.loads, r.stdout.splitlines()) if d.get("topic")]


def _cut_queues_at(store, x: int, keep_empty) -> None:
    """Every unit pointing at or after ``x`` zeroed; a non-first CQ file left without units is
    deleted, except ``keep_empty`` (kept all zeros, after a full file)."""
    dt = numpy_dtype(ConsumeQueueUnit)
    for qd in sorted(p for t in (store / "consumequeue").iterdir() for p in t.iterdir()):
        for f in sorted(qd.iterdir()):
            u = np.frombuffer(f.read_bytes(), dt).copy()
            cut = np.flatnonzero((u["size"] > 0) & (u["commitlog_offset"] >= x))
            if not cut.size:
                continue
            if cut[0] == 0 and f.name != f"{0:020d}" and f != keep_empty:
                f.unlink()
                continue
            u[cut[0] :] = 0
            f.write_bytes(u.tobytes())


@pytest.fixture(scope="module")
def lagging(tmp_path_factory):
    """(store, X, the kept empty CQ file, the broken record's offset)."""
    base = tmp_path_factory.mktemp("lagging")
    src = generate(
        base / "src",
        "--topics",
        "2",
        "--queues",
        "2",
        "--broker-version",
        "5",
        "--cq-file-size",
        str(CQ_SIZE),
        "--commitlog-file-size",
        str(CL_SIZE),
        messages=3000,
        small=False,
    )
    store = base / "store"
    shutil.copytree(src, store)
    recs = _records(store)
    n_files = len(list((store / "commitlog").iterdir()))
    assert n_files >= 10
    dt = numpy_dtype(ConsumeQueueUnit)
    qd = store / "consumequeue" / "OrderTopic" / "0"
    # X: the first message of a CQ file of OrderTopic/0 that lies in commit-log file 4 or 5
    x, empty = None, None
    for f in sorted(qd.iterdir())[1:]:
        u0 = np.frombuffer(f.read_bytes(), dt)[0]
        if int(u0["size"]) > 0 and 4 * CL_SIZE <= int(u0["commitlog_offset"]) < 6 * CL_SIZE:
            x, empty = int(u0["commitlog_offset"]), f
            break
    assert x is not None
    _cut_queues_at(store, x, empty)
    # a body CRC broken two files after X, well before the third-last file
    bad = next(
        r
        for r in recs
        if r["physical_offset"] >= (x // CL_SIZE + 2) * CL_SIZE
        and r["magic"] == "v1"
        and r["body_size"] >= 16
        and not r["sys_flag"] & 0x30
    )  # V1, IPv4 hosts: the body at 96
    p = store / "commitlog" / f"{bad['physical_offset'] // CL_SIZE * CL_SIZE:020d}"
    b = bytearray(p.read_bytes())
    b[bad["physical_offset"] % CL_SIZE + 96 + bad["body_size"] // 2] ^= 0xFF
    p.write_bytes(bytes(b))
    assert bad["physical_offset"] < (n_files - 3) * CL_SIZE
    return store, x, empty, bad["physical_offset"], n_files


def _verify(store, version: str) -> dict:
    r = cli("verify", "--store", store, "--format", "json", "--broker-version", version)
    assert r.exit_code in (0, 1), r.stderr
    return json.loads(r.stdout)


def _findings(report: dict, check: str) -> list[dict]:
    return [f for f in report["findings"] if f["check"] == check]


@pytest.mark.slow
@pytest.mark.parametrize("version", ["4.9", "5.3.1"])
def test_recover_normally_before_532_starts_at_the_third_last_file(lagging, version):
    """``CommitLog#recoverNormally@rocketmq-all-5.3.1`` (and 4.9.7) re-reads only the last three
    files: the broken CRC two files after X is never checked, nothing is truncated."""
    store, x, _, bad, _ = lagging
    rep = _verify(store, version)
    assert [f["physical_offset"] for f in _findings(rep, "commitlog.body-crc")] == [bad]
    assert _findings(rep, "recovery.truncate") == []
    assert rep["summary"]["broker_start"]["recovery"] == "normal"


def test_recover_normally_532_starts_at_max_phy_offset_of_consume_queue(lagging):
    """``CommitLog#recoverNormally@rocketmq-all-5.3.2`` (same in 5.3.3) starts at the file
    holding maxPhyOffsetOfConsumeQueue (X), checks every CRC from there and stops at the
    broken record: the log is truncated there and later files deleted."""
    store, x, _, bad, n_files = lagging
    rep = _verify(store, "5")
    cut = _findings(rep, "recovery.truncate")
    assert len(cut) == 1
    assert cut[0]["physical_offset"] == bad
    assert cut[0]["recovery_start"] == x // CL_SIZE * CL_SIZE
    assert f"maxPhyOffsetOfConsumeQueue {x}" in cut[0]["detail"]
    assert f"delete {n_files - 1 - bad // CL_SIZE} later file(s)" in cut[0]["detail"]


def _reasons(rep: dict) -> list[dict]:
    return rep["summary"]["broker_start"]["reasons"]


def test_empty_last_cq_file_fatal_before_532_only(lagging):
    """apache/rocketmq#9728 (``ConsumeQueue#correctMinOffset``, 5.0.0-5.3.3) needs the empty last
    file to stay empty through recovery: 5.3.1's normal recovery dispatches nothing, so the
    broker does not start; 5.3.2's dispatches OrderTopic/0's messages after X into it, so it
    does; 4.9.7's correctMinOffset cannot throw."""
    store, x, empty, _, _ = lagging
    rel = str(empty.relative_to(store))
    v531 = _verify(store, "5.3.1")["summary"]["broker_start"]
    assert v531["starts"] is False
    assert [r["file"] for r in v531["reasons"] if r["fatal"]] == [rel]
    v5 = _verify(store, "5")["summary"]["broker_start"]
    assert v5["starts"] is True and v5["version"] == "5"
    assert _verify(store, "4.9")["summary"]["broker_start"]["starts"] is True


@pytest.mark.slow
def test_what_normal_recovery_dispatches_per_version(lagging):
    """The messages after X: 4.9.7's reput dispatches them after start; 5.0-5.3.1 never does
    (``recoverNormally@rocketmq-all-5.3.1`` doDispatch=false, reput from the log's end);
    5.3.2+ dispatches all but the one starting exactly at X (``commitLogOffset >
    maxPhyOffsetOfConsumeQueue``), and none after the truncation point."""
    store, x, _, bad, _ = lagging
    recs = _records(store)
    tail = [r for r in recs if x <= r["physical_offset"] and r["sys_flag"] & 0xC in (0, 0x8)]  # no unit for
    # a PREPARED or ROLLBACK record (CommitLogDispatcherBuildConsumeQueue#dispatch)
    details = {
        v: [r["detail"] for r in _reasons(_verify(store, v)) if r["file"] == "commitlog"] for v in ("4.9", "5.3.1", "5")
    }
    assert details["4.9"] == [
        f"{len(tail)} message(s) from {x} on, after the consume queues' end {x} "
        "(maxPhyOffsetOfConsumeQueue): recoverNormally does not dispatch them; the reput does "
        "after start (DefaultMessageStore#start sets reputFromOffset to the consume queues' end)"
    ]
    assert len(details["5.3.1"]) == 1 and details["5.3.1"][0].startswith(f"{len(tail)} message(s) from {x} on")
    assert "never dispatched" in details["5.3.1"][0]
    five = details["5"]  # truncated at the broken record: a range, not a count
    assert five[0].startswith(f"the messages from {x} to the recovered end {bad}, after the consume queues' end {x}")
    assert f"dispatches those after {x}" in five[0]
    assert five[1].startswith(f"the message at {x} starts exactly at maxPhyOffsetOfConsumeQueue")
    assert len(five) == 2
    cut = [r for r in _reasons(_verify(store, "5")) if r["detail"].startswith("recovery truncates the commit log")]
    assert [r["file"] for r in cut] == [f"commitlog/{bad // CL_SIZE * CL_SIZE:020d}"]


@pytest.mark.slow
def test_clean_store_same_prediction_in_every_version(small_store):
    """A cleanly stopped store whose queues reach the log's end: 5.3.2+ starts at the last file
    (maxPhyOffsetOfConsumeQueue is in it) and nothing is left to dispatch in any version."""
    for v in ("4.9", "5.3.1", "5"):
        rep = _verify(small_store, v)
        assert _findings(rep, "recovery.truncate") == [], v
        assert rep["summary"]["broker_start"] == {
            "starts": True,
            "recovery": "normal",
            "version": v,
            "version_source": "option",
            "reasons": [],
        }


@pytest.mark.slow
def test_several_stores_and_the_decomposed_engine_follow_the_version(lagging, tmp_path):
    """--broker-version reaches the Verifier on every path: two stores (``verify_store``) and
    the decomposition Spark runs (``verify_stores``, here in-process)."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    store, x, _, bad, _ = lagging
    other = tmp_path / "other"
    shutil.copytree(store, other)
    for v, want in (("5.3.1", []), ("5", [(bad, x // CL_SIZE * CL_SIZE)] * 2)):
        r = cli("verify", "--store", store, "--store", other, "--format", "json", "--broker-version", v)
        got = [
            (f["physical_offset"], f["recovery_start"])
            for f in json.loads(r.stdout)["findings"]
            if f["check"] == "recovery.truncate"
        ]
        assert got == want, v
    spec = StoreSpec(str(store), "s")
    for v in ("5.3.1", "5"):
        local = verify_store(spec, True, False, None, v)
        (dec,) = verify_stores([spec], True, False, None, None, v)
        pick = [
            [
                (f["check"], f["physical_offset"], f.get("recovery_start"))
                for f in r["findings"]
                if f["check"] == "recovery.truncate"
            ]
            for r in (local, dec)
        ]
        assert pick[0] == pick[1] == ([] if v == "5.3.1" else [("recovery.truncate", bad, x // CL_SIZE * CL_SIZE)])


def test_abnormal_recovery_on_rocksdb_queues_matches_by_offset(sample_tarball, tmp_path):
    """``CommitLog#isMappedFileMatchedRecover@rocketmq-all-5.2.0`` with enableRocksDBStore: a
    file matches when its first record's offset is <= the RocksDB dispatch checkpoint
    (``RocksDBConsumeQueueStore#getMaxPhyOffsetInConsumeQueue``), not by store time."""
    src = sample_tarball("rocksdb")
    s = tmp_path / "s"
    shutil.copytree(src, s)
    for p in s.rglob("*"):
        p.chmod(p.stat().st_mode | 0o200)
    (s / "store" / "abort").write_bytes(b"")
    r = cli("verify", "--store", s / "store", "--broker-conf", s / "broker.conf", "--format", "json")
    (ab,) = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "abort.unclean-shutdown"]
    assert ab["recovery_start"] == 0
    assert "first record's offset <= the RocksDB dispatch checkpoint" in ab["detail"]
