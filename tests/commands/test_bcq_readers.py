"""search-offset, consumer-progress and stats on a 5.3.3 store with a BatchCQ topic (the
bcq sample): offsets are queue offsets of messages (``BatchConsumeQueue#getMinOffsetInQueue``
/ ``#getMaxOffsetInQueue``: msgBaseOffset and batchSize), compared with expected.json."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import cli


@pytest.fixture(scope="module")
def bcq(sample_tarball):
    d = sample_tarball("bcq")
    return d / "store", json.loads((d / "expected.json").read_text())


def _jsonl(r) -> list[dict]:
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def _units(exp: dict) -> dict[int, dict]:
    return {u["unitIndex"]: u for u in exp["units"]}


def test_search_offset_BatchConsumeQueue_getOffsetInQueueByTime(bcq):
    """--broker: the store is a 5.x one (batchconsumequeue/); LOWER is a unit's msgBaseOffset,
    a time after every unit answers the last unit's msgBaseOffset (not max), before every
    unit the first; without --broker the first unit at or after TIME, max when none."""
    store, exp = bcq
    u = _units(exp)
    q = exp["batchConsumeQueues"][0]
    cases = [  # (time, broker answer, first-at-or-after answer)
        (u[0]["storeTime"] - 1, u[0]["msgBaseOffset"], u[0]["msgBaseOffset"]),
        (u[1]["storeTime"], u[1]["msgBaseOffset"], u[1]["msgBaseOffset"]),
        (u[63]["storeTime"], u[63]["msgBaseOffset"], u[63]["msgBaseOffset"]),
        (u[63]["storeTime"] + 1000, u[63]["msgBaseOffset"], q["maxOffset"]),
    ]
    for when, broker, first in cases:
        b = _jsonl(
            cli("search-offset", "-s", store, "-t", "BulkTopic", "--time", when, "--broker", "--format", "jsonl")
        )
        f = _jsonl(
            cli("search-offset", "-s", store, "-t", "BulkTopic", "--queue-id", 0, "--time", when, "--format", "jsonl")
        )
        assert (b[0]["offset"], b[0]["method"]) == (broker, "broker-5-lower"), when
        assert f[0]["offset"] == first, when
        for r in (b[0], f[0]):
            assert (r["min_offset"], r["max_offset"]) == (q["minOffset"], q["maxOffset"])
    # UPPER at unit 32's time: at or after unit 32 (the last unit of that time)
    r = _jsonl(
        cli(
            "search-offset",
            "-s",
            store,
            "-t",
            "BulkTopic",
            "--time",
            u[32]["storeTime"],
            "--broker",
            "--boundary",
            "upper",
            "--format",
            "jsonl",
        )
    )[0]
    assert r["offset"] >= u[32]["msgBaseOffset"] and r["store_timestamp"] == u[32]["storeTime"]
    r = cli(
        "search-offset",
        "-s",
        store,
        "-t",
        "BulkTopic",
        "--time",
        u[1]["storeTime"],
        "--broker",
        "--broker-version",
        "4.9",
    )
    assert r.exit_code == 2 and "BatchCQ" in r.stderr


def test_search_offset_java_binarySearchRight_on_built_units(tmp_path):
    """The file choice and binarySearchRight replayed on a queue written here: two files,
    times with repeats, LOWER and UPPER."""
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue, offset_by_time, pack_unit

    d = tmp_path / "q" / "T" / "0"
    d.mkdir(parents=True)
    times = [10, 20, 20, 20, 30, 40, 50, 50, 60, 70]  # 5 units a file
    raw = [pack_unit(100 * i, 100, 0, t, 2 * i, 2) for i, t in enumerate(times)]
    (d / f"{0:020d}").write_bytes(b"".join(raw[:5]))
    (d / f"{230:020d}").write_bytes(b"".join(raw[5:]))
    bq = BatchConsumeQueue(d, "T", 0, 230)
    try:
        lower = {t: offset_by_time(bq, t) for t in (5, 10, 15, 20, 25, 30, 35, 40, 45, 55, 70, 99)}
        upper = {t: offset_by_time(bq, t, upper=True) for t in (20, 50)}
    finally:
        bq.close()
    # file 0 for t < 40 (its start 10 <= t, the last file's start 40 > t), the last file from 40 on;
    # 35 is after file 0's last unit: that unit's msgBaseOffset (8), not the next file's first
    assert lower == {5: 0, 10: 0, 15: 2, 20: 2, 25: 8, 30: 8, 35: 8, 40: 10, 45: 12, 55: 16, 70: 18, 99: 18}
    assert upper == {20: 6, 50: 14}


def test_consumer_progress_counts_messages_not_units(bcq, tmp_path):
    """Lag and bounds in messages; the next message's store time is its batch record's."""
    store, exp = bcq
    u = _units(exp)
    s = tmp_path / "s"
    shutil.copytree(store, s)
    (s / "config").mkdir(exist_ok=True)
    off = u[32]["msgBaseOffset"] + 1  # inside unit 32's batch
    table = {"BulkTopic@g1": {"0": off}, "BulkTopic@g2": {"0": 300}}
    (s / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": table}))
    rows = {r["group"]: r for r in _jsonl(cli("consumer-progress", "-s", s, "--format", "jsonl"))}
    q = exp["batchConsumeQueues"][0]
    assert (rows["g1"]["min_offset"], rows["g1"]["max_offset"]) == (q["minOffset"], q["maxOffset"])
    assert rows["g1"]["lag"] == q["maxOffset"] - off and rows["g1"]["status"] == "ok"
    assert rows["g1"]["next_store_timestamp"] == u[32]["storeTime"]
    assert rows["g2"]["status"] == "beyond-max"


def test_stats_counts_inner_messages(bcq):
    """stats (consume-queue method): 266 inner messages in 64 records; --exact: the 64
    records, none outside a queue."""
    store, exp = bcq
    rows = _jsonl(cli("stats", "-s", store, "--by", "queue", "--format", "jsonl"))
    row, summary = rows[0], rows[-1]["summary"]
    assert (row["topic"], row["queue_id"], row["messages"]) == ("BulkTopic", 0, exp["counts"]["innerMessages"])
    assert row["bytes"] == exp["commitLog"]["maxPhyOffset"] and row["cq_bytes"] == 2 * exp["bcqFileSize"]
    assert (row["first_store_timestamp"], row["last_store_timestamp"]) == (
        exp["units"][0]["storeTime"],
        exp["units"][-1]["storeTime"],
    )
    assert summary["messages"] == exp["counts"]["innerMessages"]
    assert any(f"{exp['counts']['batchMessages']} batch records" in n for n in summary["notes"])
    ex = _jsonl(cli("stats", "-s", store, "--by", "topic", "--exact", "--format", "jsonl"))
    assert ex[0]["messages"] == exp["counts"]["batchMessages"] and ex[0]["not_in_cq"] == 0
    assert ex[-1]["summary"]["not_in_cq"] == {}


@pytest.mark.parametrize("exact", [False, True])
def test_stats_by_file_lists_the_batch_queue_files(bcq, exact):
    """--by file (with or without --exact): one row per batchconsumequeue/ file, named by its
    first byte; its units (the queue's 64, bcqFileSize / bcqUnitSize per file), their store
    times (the broker's units 0 and 63 at the ends) and fill = units x 46 / file size
    (BatchConsumeQueue#recover)."""
    store, exp = bcq
    args = ("stats", "-s", store, "--by", "file", "--format", "jsonl") + (("--exact",) if exact else ())
    rows = [r for r in _jsonl(cli(*args)) if r.get("component") == "batchconsumequeue"]
    size, unit = exp["bcqFileSize"], exp["bcqUnitSize"]
    total, per_file = exp["batchConsumeQueues"][0]["units"], size // unit
    counts = [min(per_file, total - i) for i in range(0, total, per_file)]
    assert [r["file"] for r in rows] == [f"batchconsumequeue/BulkTopic/0/{i * size:020d}" for i in range(len(counts))]
    assert [(r["topic"], r["queue_id"], r["entries"], r["bytes"]) for r in rows] == [
        ("BulkTopic", 0, n, size) for n in counts
    ]
    assert [r["fill"] for r in rows] == [round(n * unit / size, 6) for n in counts]
    u = _units(exp)
    assert (rows[0]["first_store_timestamp"], rows[-1]["last_store_timestamp"]) == (
        u[0]["storeTime"],
        u[total - 1]["storeTime"],
    )
