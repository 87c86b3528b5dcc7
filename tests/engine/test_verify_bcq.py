"""verify's bcq.* and compaction.* checks (store/verify/bcq.py) on the real 5.3.3 samples
(clean) and on copies damaged here, each damage giving its finding."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import cli
from tests.helpers.rawstore import patch_unit


def _verify(store, *extra) -> tuple[list[dict], dict]:
    r = cli("verify", "--store", store, *extra, "--format", "jsonl")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"]


def _copy(sample_tarball, name, tmp_path):
    s = sample_tarball(name)
    shutil.copytree(s / "store", tmp_path / "store")
    return tmp_path / "store", s / "broker.conf"


@pytest.mark.parametrize("name, counted", [("bcq", {"batchconsumequeue": 2}), ("compaction", {"compaction": 8})])
def test_verify_real_5_3_3_samples_clean_and_their_queues_counted(sample_tarball, name, counted):
    s = sample_tarball(name)
    for conf in ((), ("--broker-conf", s / "broker.conf")):
        findings, summary = _verify(s / "store", *conf)
        assert findings == [] and summary["errors"] == summary["warnings"] == 0
        assert counted.items() <= summary["files"].items()


def test_bcq_unit_with_a_wrong_batch_size_is_a_mismatch_and_breaks_the_base_offsets(sample_tarball, tmp_path):
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    f = store / "batchconsumequeue" / "BulkTopic" / "0" / f"{0:020d}"
    patch_unit(f, 1, batch=4)  # INNER_NUM of the record at 1140 is 3
    findings, _ = _verify(store, "--broker-conf", conf)
    got = {(x["check"], x["file"], x["offset"]) for x in findings}
    rel = "batchconsumequeue/BulkTopic/0/" + f.name
    assert got == {("bcq.unit-mismatch", rel, 46), ("bcq.base-offset", rel, 92)}
    [m] = [x for x in findings if x["check"] == "bcq.unit-mismatch"]
    assert "batchSize 4, record's is 3" in m["detail"]


def test_bcq_unit_pointing_nowhere_and_records_left_without_units(sample_tarball, tmp_path):
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    d = store / "batchconsumequeue" / "BulkTopic" / "0"
    patch_unit(d / f"{0:020d}", 2, off=1141)  # into the middle of a record
    (d / f"{2760:020d}").write_bytes(bytes(2760))  # the last 4 units lost
    findings, summary = _verify(store, "--broker-conf", conf)
    checks = sorted(x["check"] for x in findings)
    assert checks == ["bcq.missing-unit", "bcq.unit-target"], findings
    [miss] = [x for x in findings if x["check"] == "bcq.missing-unit"]
    assert miss["detail"].startswith("5 records of BulkTopic/0 (first at commit-log offset 1796)")  # 4 lost + 1 moved
    assert summary["errors"] == 2


def test_bcq_file_of_a_wrong_size(sample_tarball, tmp_path):
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    f = store / "batchconsumequeue" / "BulkTopic" / "0" / f"{2760:020d}"
    f.write_bytes(f.read_bytes()[:2000])
    findings, summary = _verify(store, "--broker-conf", conf)
    assert [(x["check"], x["file"]) for x in findings] == [("bcq.file-size", "batchconsumequeue/BulkTopic/0/" + f.name)]
    start = summary["broker_start"]  # BatchConsumeQueue#load -> MappedFileQueue#doLoad returns false
    assert start["starts"] is False
    assert [r["file"] for r in start["reasons"] if r["fatal"]] == ["batchconsumequeue/BulkTopic/0/" + f.name]


def _topics_json(store, table: dict) -> None:
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": table}))


@pytest.mark.parametrize(
    "attributes, fatal",
    [
        ({"queue.type": "BatchCQ"}, False),
        ({}, True),
        ({"queue.type": "SimpleCQ"}, True),
        ({"queue.type": "Nope"}, True),
    ],
)
def test_ConsumeQueueStore_queueTypeShouldBe_for_batchconsumequeue(sample_tarball, tmp_path, attributes, fatal):
    """A batchconsumequeue/ topic whose queue.type (QueueTypeUtils#getCQType: SimpleCQ when
    absent) is not BatchCQ: the 5.x broker throws at load and does not start."""
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    _topics_json(store, {"BulkTopic": {"topicName": "BulkTopic", "attributes": attributes}})
    findings, summary = _verify(store, "--broker-conf", conf)
    got = [(x["check"], x["file"]) for x in findings]
    assert got == ([("bcq.queue-type", "batchconsumequeue/BulkTopic/0")] if fatal else [])
    assert summary["broker_start"]["starts"] is not fatal
    if fatal:
        assert "should be BatchCQ" in findings[0]["detail"] or "CQType.valueOf" in findings[0]["detail"]


def test_ConsumeQueueStore_queueTypeShouldBe_for_consumequeue(tmp_path):
    """A consumequeue/ topic that topics.json calls BatchCQ: the same throw, at that queue."""
    store = tmp_path / "s"
    assert cli("generate", "--store", store, "--messages", "20", "--topics", "1", "--queues", "1").exit_code == 0
    topic = "OrderTopic"  # the generator's one user topic (the others are system topics)
    assert (store / "consumequeue" / topic / "0").is_dir()
    _topics_json(store, {topic: {"topicName": topic, "attributes": {"queue.type": "BatchCQ"}}})
    findings, summary = _verify(store)
    assert [(x["check"], x["file"]) for x in findings] == [("bcq.queue-type", f"consumequeue/{topic}/0")]
    assert "should be SimpleCQ, but is BatchCQ" in findings[0]["detail"]
    assert summary["broker_start"]["starts"] is False


def test_compaction_record_differing_from_the_commit_log_and_broken_log(sample_tarball, tmp_path):
    store, conf = _copy(sample_tarball, "compaction", tmp_path)
    log = store / "compaction" / "compactionLog" / "DeviceStateTopic" / "1" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    raw[555 + 100] ^= 1  # a body byte of k000's last record (the one at 555)
    raw[1916:1920] = b"\0\0\0\x09"  # a torn record where the file's data ended
    log.write_bytes(bytes(raw))
    findings, _ = _verify(store, "--broker-conf", conf)
    got = sorted((x["check"], x["offset"]) for x in findings)
    assert got == [("compaction.log-record", 1916), ("compaction.source", 92)], findings


def test_compaction_unit_mismatch_and_unreferenced_record(sample_tarball, tmp_path):
    store, conf = _copy(sample_tarball, "compaction", tmp_path)
    cq = store / "compaction" / "compactionCq" / "DeviceStateTopic" / "0" / f"{18400:020d}"
    patch_unit(cq, 8, off=-1, size=0)  # the last unit lost: its record is read by no one
    patch_unit(cq, 0, ts=5)
    findings, _ = _verify(store, "--broker-conf", conf)
    got = sorted((x["check"], x["offset"]) for x in findings)
    assert got == [("compaction.unit-mismatch", 0), ("compaction.unreferenced", 2369)], findings


@pytest.mark.parametrize(
    "text, severity, detail",
    [
        (
            '{"queueOffsetMap":{"DeviceStateTopic_0":61,"DeviceStateTopic_1":79}}',
            "error",
            "does not reach (its end is 79)",
        ),
        ('{"queueOffsetMap":{"Other_0":1}}', "warning", "Other/0 has no compaction log"),
        ('{"queueOffsetMap":', "error", "not valid JSON"),
    ],
)
def test_position_checkpoint_findings(sample_tarball, tmp_path, text, severity, detail):
    store, conf = _copy(sample_tarball, "compaction", tmp_path)
    (store / "compaction" / "position-checkpoint").write_text(text)
    findings, _ = _verify(store, "--broker-conf", conf)
    mine = [x for x in findings if x["file"] == "compaction/position-checkpoint"]
    assert [(x["check"], x["severity"]) for x in mine] == [("compaction.position-checkpoint", severity)]
    assert detail in mine[0]["detail"]
    others = [(x["check"], x["file"], x["severity"]) for x in findings if x not in mine]
    bak = ("compaction.position-checkpoint", "compaction/position-checkpoint.bak", "info")  # the .bak differs
    assert others == ([] if "JSON" in detail else [bak])


def test_bcq_topic_messages_not_reported_missing_from_consumequeue(sample_tarball, tmp_path):
    """With another topic's consume queue present, the BatchCQ topic's records are still
    not taken for messages missing from consumequeue/ (they are dispatched to batchconsumequeue/)."""
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    (store / "consumequeue" / "Other" / "0").mkdir(parents=True)
    findings, _ = _verify(store, "--broker-conf", conf)
    assert not [x for x in findings if x["check"].startswith(("cq.", "bcq."))], findings


@pytest.mark.parametrize(
    "attributes, why",
    [
        ({"+queue.type": "BatchCQ"}, "should be BatchCQ, but is SimpleCQ"),
        ({"queue.type": None}, "CQType.valueOf throws"),
    ],
)
def test_queueTypeShouldBe_reads_the_stored_key_only(sample_tarball, tmp_path, attributes, why):
    """``QueueTypeUtils#getCQType`` looks up ``queue.type`` only (``+queue.type`` is an
    ``AttributeUtil#alterCurrentAttributes`` request spelling, never stored), and
    ``CQType.valueOf(null)`` throws: both stop the broker's load of batchconsumequeue/."""
    store, conf = _copy(sample_tarball, "bcq", tmp_path)
    _topics_json(store, {"BulkTopic": {"topicName": "BulkTopic", "attributes": attributes}})
    findings, summary = _verify(store, "--broker-conf", conf)
    assert [(x["check"], x["file"]) for x in findings] == [("bcq.queue-type", "batchconsumequeue/BulkTopic/0")]
    assert why in findings[0]["detail"] and summary["broker_start"]["starts"] is False


def test_queue_type_names_no_directory_outside_consumequeue(tmp_path):
    """bcq.queue-type looks only at the topics topics.json gives another type: a name that is
    not one directory name ("..", "a/b", a lone surrogate) names no queue, and a typed topic
    without a queue directory is no finding."""
    store = tmp_path / "s"
    assert cli("generate", "--store", store, "--messages", "20", "--topics", "1", "--queues", "1").exit_code == 0
    (store / "consumequeue" / "a" / "b" / "0").mkdir(parents=True)
    typed = {"queue.type": "BatchCQ"}
    names = ["..", "a/b", "\ud800", "NoSuchTopic", ""]
    _topics_json(store, {n: {"topicName": n, "attributes": typed} for n in names})
    findings, _ = _verify(store)
    assert [x for x in findings if x["check"] == "bcq.queue-type"] == []
