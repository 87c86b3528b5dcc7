"""The 5.x batch consume queue and compaction store owners (store/queues/batch_queue.py,
store/queues/compaction.py) against the real 5.3.3 samples' expected.json, and against queues
built here byte by byte from the documented layout (``BatchConsumeQueue#putBatchMessagePositionInfo``:
>q offset, >i size, >q tagsCode, >q storeTime, >q msgBaseOffset, >h batchSize, >i compactedOffset,
>i reserved), independently of formats/."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue, BatchConsumeQueueWriter, batch_queues
from rmqstore_cli.store.queues.compaction import CompactionStore, compaction_log_size, parse_position_checkpoint
from tests.helpers import bcq_unit_values, expected_bcq_units

UNIT = ">qiqqqhii"  # the broker's 46 bytes, written out here by hand (test-only)


def _unit(off, size, tags, ts, base, batch, compacted=-1):
    return struct.pack(UNIT, off, size, tags, ts, base, batch, compacted, 0)


def _queue(d: Path, files: dict[int, bytes], size: int) -> Path:
    d.mkdir(parents=True)
    for start, data in files.items():
        (d / f"{start:020d}").write_bytes(data.ljust(size, b"\0"))
    return d


# ------------------------------------------------------------------ real samples


def test_BatchConsumeQueue_recover_bcq_sample_agrees_with_expected_json(sample_tarball):
    s = sample_tarball("bcq")
    exp = json.loads((s / "expected.json").read_text())
    [q] = exp["batchConsumeQueues"]
    bq = BatchConsumeQueue(s / "store" / "batchconsumequeue" / q["topic"] / str(q["queueId"]), q["topic"], q["queueId"])
    assert bq.file_size == exp["bcqFileSize"]
    assert (bq.min_offset, bq.max_offset, bq.unit_count) == (q["minOffset"], q["maxOffset"], q["units"])
    units = list(bq.units())
    want = expected_bcq_units(exp)
    assert {i: bcq_unit_values(units[i]) for i in want} == want
    assert sum(u.batch_size for u in units) == exp["counts"]["innerMessages"]
    assert bq.max_physic_offset + units[-1].size == exp["commitLog"]["maxPhyOffset"]


def test_BatchConsumeQueue_getBatchMsgIndexBuffer_finds_the_batch_holding_an_offset(sample_tarball):
    s = sample_tarball("bcq")
    bq = BatchConsumeQueue(s / "store" / "batchconsumequeue" / "BulkTopic" / "0", "BulkTopic", 0)
    for e in json.loads((s / "expected.json").read_text())["units"]:
        for off in range(e["msgBaseOffset"], e["msgBaseOffset"] + e["batchSize"]):
            assert bq.find(off).index == e["unitIndex"]
    assert bq.find(266) is None and bq.find(-1) is None


def test_CompactionStore_sample_agrees_with_expected_json_after_compaction(sample_tarball):
    s = sample_tarball("compaction")
    exp = json.loads((s / "expected.json").read_text())
    cs = CompactionStore(StoreConfig.load(s / "store", s / "broker.conf"))
    assert list(cs.queues()) == [(exp["topic"], q) for q in range(exp["queues"])]
    for a in exp["afterCompaction"]:
        cq, log = cs.cq(exp["topic"], a["queueId"]), cs.log(exp["topic"], a["queueId"])
        assert (cq.min_offset, cq.max_offset) == (a["compactionCqMinOffset"], a["compactionCqMaxOffset"])
        assert len(cq.queue.files) == a["compactionCqFiles"] and len(log.files) == a["compactionLogFiles"]
        assert log.file_size == exp["compactionLogFileSize"] and cq.file_size == exp["compactionCqFileSize"]
        assert log.max_offset() == a["compactionLogMaxOffset"]
        assert cq.unit_count == exp["retainedReadableViaGetMessage"][str(a["queueId"])]
    for k in exp["latestByKey"]:
        c = k["compaction"]
        u = cs.cq(exp["topic"], k["queueId"]).find(c["queueOffset"])
        assert (u.commitlog_offset, u.size, u.batch_size) == (c["compactionLogPos"], c["size"], 1)
        m = cs.log(exp["topic"], k["queueId"]).get(c["compactionLogPos"])
        assert (m.body.decode(), m.keys, m.queue_offset, m.physical_offset) == (
            c["body"],
            [k["key"]],
            k["latestQueueOffset"],
            c["compactionLogPos"],
        )
    cp = cs.position_checkpoint()
    want = json.loads(exp["positionCheckpoint"])
    assert (
        cp.offsets == {(t.rpartition("_")[0], int(t.rpartition("_")[2])): v for t, v in want["queueOffsetMap"].items()}
        and cp.empty is want["empty"]
    )


def test_CompactionStore_log_size_from_files_without_broker_conf(sample_tarball):
    s = sample_tarball("compaction")
    cs = CompactionStore(StoreConfig.load(s / "store"))
    assert cs.log("DeviceStateTopic", 0).file_size == 9200 and cs.cq("DeviceStateTopic", 0).file_size == 1840


def test_CompactionLog_getCompactionLogSize():
    assert compaction_log_size(1840, 8192) == 9200  # n < 5: five CQ files' worth
    assert compaction_log_size(10 * 1024 * 1024 // 46 * 46, 100 * 1024 * 1024) == 10 * (10 * 1024 * 1024 // 46 * 46)
    assert compaction_log_size(100, 1070) == 1100 and compaction_log_size(100, 1020) == 1000


# ------------------------------------------------------------------ queues built here


def test_BatchConsumeQueue_recover_stops_at_the_first_invalid_unit(tmp_path):
    size = 4 * 46
    full = b"".join(_unit(100 * i, 50, 0, 1000 + i, 3 * i, 3) for i in range(4))
    d = _queue(
        tmp_path / "T" / "0",
        {
            0: full,
            size: _unit(400, 50, 0, 2000, 12, 2) + _unit(-1, 0, 0, 0, 0, 0) + _unit(600, 50, 0, 1, 20, 1),
            2 * size: _unit(700, 5, 0, 1, 21, 1),
        },
        size,
    )
    bq = BatchConsumeQueue(d, "T", 0)
    assert bq.valid_counts == [4, 1, 0]  # the broken unit ends the queue: what follows is not read
    assert (bq.min_offset, bq.max_offset, bq.max_physic_offset) == (0, 14, 400)
    assert bq.find(13).msg_base_offset == 12 and bq.find(14) is None


def test_SparseConsumeQueue_recover_reads_every_file_up_to_its_end(tmp_path):
    size = 4 * 46
    d = _queue(
        tmp_path / "T" / "1",
        {0: _unit(0, 10, 0, 1, 5, 1) + _unit(10, 10, 0, 1, 9, 1), 10 * size: _unit(5000, 10, 0, 1, 20, 1)},
        size,
    )
    bq = BatchConsumeQueue(d, "T", 1, sparse=True)
    assert bq.valid_counts == [2, 1]
    assert (bq.min_offset, bq.max_offset) == (5, 21)
    assert bq.find(7) is None and bq.find(7, or_next=True).msg_base_offset == 9
    assert bq.find(10, or_next=True).msg_base_offset == 20 and bq.find(21, or_next=True) is None
    assert [q.topic for q in batch_queues(tmp_path, sparse=True)] == ["T"]


def test_BatchConsumeQueueWriter_writes_the_broker_bytes(tmp_path):
    w = BatchConsumeQueueWriter(tmp_path / "bcq" / "T" / "0", 2 * 46 + 10, [tmp_path])
    for i in range(3):
        assert w.put(100 * i, 60, 7, 1000 + i, 2 * i, 2)
    w.put(100, 60, 7, 1, 1, 1)  # built repeatedly: skipped
    w.flush()
    files = sorted((tmp_path / "bcq" / "T" / "0").iterdir())
    assert [f.name for f in files] == [f"{0:020d}", f"{92:020d}"] and all(f.stat().st_size == 92 for f in files)
    raw = files[0].read_bytes() + files[1].read_bytes()
    assert raw[:138] == b"".join(_unit(100 * i, 60, 7, 1000 + i, 2 * i, 2) for i in range(3))
    assert not any(raw[138:])


def test_damaged_queue_directory_is_one_error(tmp_path):
    d = _queue(tmp_path / "T" / "0", {}, 46)
    (d / f"{0:020d}").mkdir()
    with pytest.raises(StoreError, match="a directory where a store file belongs"):
        BatchConsumeQueue(d, "T", 0)


@pytest.mark.parametrize(
    "text, why",
    [
        ("[1]", "not a JSON object"),
        ('{"queueOffsetMap": 3}', "not an object"),
        ('{"queueOffsetMap": {"T": 3}}', "is not topic_queueId"),
        ('{"queueOffsetMap": {"T_0": "x"}}', "not a long"),
        ('{"queueOffsetMap": {"T_0": 1e99}}', "not a long"),
        ('{"queue', "not valid JSON"),
    ],
)
def test_CompactionPositionMgr_decode_refuses_what_it_cannot_read(tmp_path, text, why):
    p = tmp_path / "position-checkpoint"
    p.write_text(text)
    with pytest.raises(StoreError, match=why):
        parse_position_checkpoint(p)


def test_CompactionPositionMgr_key_is_topic_underscore_queue(tmp_path):
    p = tmp_path / "position-checkpoint"
    p.write_text('{"empty":false,"queueOffsetMap":{"A_B_3":7}}')
    assert parse_position_checkpoint(p).offsets == {("A_B", 3): 7}


_QUEUE_TYPE_CASES = {  # topic -> (its topics.json attributes, QueueTypeUtils#getCQType's answer)
    "Plain": ({"queue.type": "BatchCQ"}, "BatchCQ"),
    "Simple": ({"queue.type": "SimpleCQ"}, "SimpleCQ"),
    "PlusSpelled": ({"+queue.type": "BatchCQ"}, "SimpleCQ"),  # a request key, never stored
    "MinusSpelled": ({"-queue.type": "BatchCQ"}, "SimpleCQ"),
    "NoAttributes": ({}, "SimpleCQ"),
    "NullValue": ({"queue.type": None}, "null"),  # CQType.valueOf(null) throws
    "Other": ({"cleanup.policy": "COMPACTION"}, "SimpleCQ"),
}


def test_QueueTypeUtils_getCQType_one_parser_for_batch_topics_and_verify(tmp_path):
    """``QueueTypeUtils#getCQType`` reads only the stored key ``queue.type`` (the ``+``/``-``
    spellings are ``AttributeUtil#alterCurrentAttributes`` requests, stored under the real
    key): batch_topics agrees with queue_type on every topic (was: ``+queue.type`` made a
    BatchCQ topic for rebuild and generate while verify called it SimpleCQ)."""
    from rmqstore_cli.store.queues.batch_queue import batch_topics, queue_type

    table = {t: {"topicName": t, "attributes": a} for t, (a, _) in _QUEUE_TYPE_CASES.items()}
    table["NoAttributesKey"] = {"topicName": "NoAttributesKey"}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": table}))
    assert {t: queue_type(table, t) for t in _QUEUE_TYPE_CASES} == {t: w for t, (_, w) in _QUEUE_TYPE_CASES.items()}
    assert queue_type(table, "NoAttributesKey") == queue_type(table, "Absent") == "SimpleCQ"
    assert batch_topics(tmp_path) == {"Plain"}
    (tmp_path / "batchconsumequeue" / "OnDisk" / "0").mkdir(parents=True)
    assert batch_topics(tmp_path) == {"Plain", "OnDisk"}
