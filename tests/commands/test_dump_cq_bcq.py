"""dump-cq on BatchCQ and compaction queues, dump-commitlog --compaction-log: the real
5.3.3 samples read back as their expected.json says, and one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.helpers import BCQ_UNIT_FIELDS, cli, expected_bcq_units, run


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_dump_cq_reads_the_BatchCQ_queue_of_the_bcq_sample(sample_tarball):
    s = sample_tarball("bcq")
    exp = json.loads((s / "expected.json").read_text())
    rows = _jsonl("dump-cq", "BulkTopic", "0", "--store", s / "store", "--broker-conf", s / "broker.conf")
    assert len(rows) == exp["batchConsumeQueues"][0]["units"]
    assert all(r["status"] == "ok" and r["agrees"] and r["cq_type"] == "BatchCQ" for r in rows)
    want = expected_bcq_units(exp)
    keys = [f if f != "store_time" else "store_time_ms" for f in BCQ_UNIT_FIELDS]
    assert {i: tuple(rows[i][k] for k in keys) for i in want} == want
    # --from is a queue offset: the unit whose batch holds it comes first
    [r] = _jsonl(
        "dump-cq", "BulkTopic", "0", "--store", s / "store", "--from-offset", "138", "--limit", "1", "--no-resolve"
    )
    assert (r["unit_index"], r["msg_base_offset"]) == (32, 136) and "status" not in r


def test_dump_cq_summary_lists_batch_and_compaction_queues(sample_tarball):
    s = sample_tarball("bcq")
    [row] = _jsonl("dump-cq", "--summary", "--store", s / "store")
    q = json.loads((s / "expected.json").read_text())["batchConsumeQueues"][0]
    assert (row["cq_type"], row["min_offset"], row["max_offset"], row["units"]) == (
        q["cqType"],
        q["minOffset"],
        q["maxOffset"],
        q["units"],
    )
    c = sample_tarball("compaction")
    exp = json.loads((c / "expected.json").read_text())
    rows = [r for r in _jsonl("dump-cq", "--summary", "--store", c / "store") if r.get("cq_type") == "compaction"]
    assert [
        (r["queue_id"], r["min_offset"], r["max_offset"], r["max_physic_offset"], len(r["files"])) for r in rows
    ] == [
        (
            a["queueId"],
            a["compactionCqMinOffset"],
            a["compactionCqMaxOffset"],
            a["compactionLogMaxOffset"],
            a["compactionCqFiles"],
        )
        for a in exp["afterCompaction"]
    ]


def test_dump_cq_compaction_and_dump_commitlog_compaction_log_agree_with_latest_by_key(sample_tarball):
    c = sample_tarball("compaction")
    exp = json.loads((c / "expected.json").read_text())
    store = c / "store"
    for k in exp["latestByKey"]:
        q = str(k["queueId"])
        [u] = _jsonl(
            "dump-cq",
            exp["topic"],
            q,
            "--compaction",
            "--store",
            store,
            "--from-offset",
            str(k["latestQueueOffset"]),
            "--limit",
            "1",
        )
        assert (u["commitlog_offset"], u["size"], u["keys"], u["status"]) == (
            k["compaction"]["compactionLogPos"],
            k["compaction"]["size"],
            [k["key"]],
            "ok",
        )
        [m] = _jsonl(
            "dump-commitlog",
            "--store",
            store,
            "--compaction-log",
            f"{exp['topic']}/{q}",
            "--from-offset",
            str(u["commitlog_offset"]),
            "--limit",
            "1",
            "--body",
            "text",
        )
        assert (m["body"], m["queue_offset"], m["physical_offset"]) == (
            k["compaction"]["body"],
            k["latestQueueOffset"],
            k["compaction"]["compactionLogPos"],
        )
    # a compacted-away offset: the next retained unit (SparseConsumeQueue#getBatchMsgIndexOrNextBuffer)
    [u] = _jsonl("dump-cq", exp["topic"], "1", "--compaction", "--store", store, "--from-offset", "56", "--limit", "1")
    assert u["msg_base_offset"] == 60
    r = run("dump-commitlog", "--store", store, "--compaction-log", f"{exp['topic']}/0", "--format", "jsonl")
    assert r.returncode == 0 and r.stderr == b""  # gaps and zero tails of a compaction log are no warning
    assert len(r.stdout.splitlines()) == exp["retainedReadableViaGetMessage"]["0"]


@pytest.mark.slow
def test_one_line_errors(sample_tarball):
    c = sample_tarball("compaction")
    for args, code, text in (
        (("dump-commitlog", "--compaction-log", "DeviceStateTopic"), 2, "give TOPIC/QUEUE_ID"),
        (("dump-commitlog", "--compaction-log", "Nope/0"), 3, "no compaction log Nope/0"),
        (("dump-cq", "Nope", "0", "--compaction"), 1, "no compaction queue Nope/0"),
    ):
        r = run(*args, "--store", c / "store")
        err = r.stderr.decode()
        assert r.returncode == code and text in err and len(err.splitlines()) == 1, (args, r.returncode, err)


def test_dump_cq_file_of_a_batch_or_compaction_queue(sample_tarball):
    s, c = sample_tarball("bcq") / "store", sample_tarball("compaction") / "store"
    f = s / "batchconsumequeue" / "BulkTopic" / "0" / f"{2760:020d}"
    rows = _jsonl("dump-cq", "--file", f)
    assert [(r["unit_index"], r["msg_base_offset"], r["batch_size"]) for r in rows][-1] == (3, 261, 5)
    assert len(rows) == 4 and all("status" not in r for r in rows)
    assert {r["status"] for r in _jsonl("dump-cq", "--file", f, "--store", s)} == {"ok"}
    g = c / "compaction" / "compactionCq" / "DeviceStateTopic" / "0" / f"{18400:020d}"
    rows = _jsonl("dump-cq", "--file", g, "--store", c)
    assert [r["msg_base_offset"] for r in rows] == list(range(62, 71)) and {r["status"] for r in rows} == {"ok"}


@pytest.mark.slow
def test_hostile_batch_and_compaction_files_are_one_line_errors(sample_tarball, tmp_path):
    import os
    import shutil

    from tests.helpers import run

    b, c = tmp_path / "b", tmp_path / "c"
    shutil.copytree(sample_tarball("bcq") / "store", b)
    shutil.copytree(sample_tarball("compaction") / "store", c)
    q = b / "batchconsumequeue" / "BulkTopic" / "0"
    (q / f"{2760:020d}").unlink()
    os.mkfifo(q / f"{2760:020d}")  # a FIFO where a queue file belongs: refused, never waited on
    log = c / "compaction" / "compactionLog" / "DeviceStateTopic" / "0" / f"{18400:020d}"
    log.write_bytes(log.read_bytes()[:5000])  # files of two sizes: which is the file size?
    for args, text in (
        (("dump-cq", "BulkTopic", "0", "--store", b), "FIFO"),
        (("dump-commitlog", "--compaction-log", "DeviceStateTopic/0", "--store", c), "disagree"),
    ):
        r = run(*args)
        err = r.stderr.decode()
        assert r.returncode == 3 and text in err and len(err.splitlines()) == 1, (args, r.returncode, err)
    r = run("verify", "--store", c, "--format", "jsonl")
    found = [json.loads(x) for x in r.stdout.decode().splitlines()[:-1]]
    assert [(f["check"], f["file"]) for f in found] == [
        ("compaction.log-record", "compaction/compactionLog/DeviceStateTopic/0")
    ], found
