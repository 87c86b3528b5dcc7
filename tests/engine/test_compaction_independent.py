"""A compaction store written by independent test code from the broker's documented layouts
(docs/format/compaction.md; 5.3.3 ``CompactionLog#asyncPutMessage``,
``CompactionAppendMessageCallback#doAppend``, ``SparseConsumeQueue``,
``CompactionPositionMgr``), beside a plain generated 5.x store: every reader and verify agree.

Nothing here uses the engine to write: records are copied from the commit log with plain
struct code, PHYSICALOFFSET rewritten to the record's place in the compaction log, one
46-byte unit each.
"""

from __future__ import annotations

import json
import struct

from tests.helpers import cli, generate

CL_FILE = 262144
LOG_FILE = 1 << 20
CQ_FILE = 46 * 400
CQ_UNIT = ">qiq"  # ConsumeQueue#putMessagePositionInfo: phyOffset, size, tagsCode (test-only)
SPARSE_UNIT = ">qiqqqhii"  # phyOffset, size, tagsCode, storeTime, msgBaseOffset, batchSize, compactedOffset, reserved
EMPTY_CHECKPOINT = '{\n\t"empty":true,\n\t"queueOffsetMap":{}\n}'  # CompactionPositionMgr, nothing compacted


def _record_fields(rec: bytes) -> tuple[int, int, str | None]:
    """(queue offset, store time, KEYS) of a V1 commit-log record (MessageDecoder layout)."""
    (queue_offset,) = struct.unpack_from(">q", rec, 20)
    (sys_flag,) = struct.unpack_from(">i", rec, 36)
    pos = 48 + (20 if sys_flag & 0x10 else 8)  # born host: IPv6 bit 0x10
    (store_time,) = struct.unpack_from(">q", rec, pos)
    pos += 8 + (20 if sys_flag & 0x20 else 8) + 4 + 8  # store host, reconsume times, prepared offset
    (body_len,) = struct.unpack_from(">i", rec, pos)
    pos += 4 + body_len
    pos += 1 + rec[pos]  # V1: 1-byte topic length
    (props_len,) = struct.unpack_from(">h", rec, pos)
    props = rec[pos + 2 : pos + 2 + props_len].decode()
    pairs = dict(p.split("\x01", 1) for p in props.split("\x02") if "\x01" in p)
    return queue_offset, store_time, pairs.get("KEYS")


def _build(store, topic: str, qid: int) -> list[tuple]:
    """compaction/ for ``topic``/``qid``: one log file, one queue file, the checkpoint."""
    log, units = bytearray(), []
    cq_dir = store / "consumequeue" / topic / str(qid)
    for f in sorted(cq_dir.iterdir()):
        raw = f.read_bytes()
        for i in range(0, len(raw) - 19, 20):
            phy, size, tags = struct.unpack_from(CQ_UNIT, raw, i)
            if size <= 0:
                break
            cl = (store / "commitlog" / f"{phy // CL_FILE * CL_FILE:020d}").read_bytes()
            rec = bytearray(cl[phy % CL_FILE : phy % CL_FILE + size])
            queue_offset, store_time, keys = _record_fields(bytes(rec))
            if not (keys or "").strip():  # asyncPutMessage: no KEYS, not kept
                continue
            struct.pack_into(">q", rec, 28, len(log))  # PHYSICALOFFSET: its place in the compaction log
            units.append((len(log), size, tags, store_time, queue_offset, 1, 0, 0))
            log += rec
    base = store / "compaction"
    (base / "compactionLog" / topic / str(qid)).mkdir(parents=True)
    (base / "compactionCq" / topic / str(qid)).mkdir(parents=True)
    (base / "compactionLog" / topic / str(qid) / f"{0:020d}").write_bytes(bytes(log) + bytes(LOG_FILE - len(log)))
    cq = b"".join(struct.pack(SPARSE_UNIT, *u) for u in units)
    (base / "compactionCq" / topic / str(qid) / f"{0:020d}").write_bytes(cq + bytes(CQ_FILE - len(cq)))
    (base / "position-checkpoint").write_text(EMPTY_CHECKPOINT)
    topics = store / "config" / "topics.json"
    data = json.loads(topics.read_text())
    data["topicConfigTable"][topic]["attributes"] = {"cleanup.policy": "COMPACTION"}
    topics.write_text(json.dumps(data, indent=2))
    return units


def _store(tmp_path):
    store = generate(
        tmp_path / "store",
        "--broker-version",
        "5",
        "--topics",
        "2",
        "--commitlog-file-size",
        str(CL_FILE),
        "--cq-file-size",
        "2000",
        "--index-slots",
        "64",
        "--index-max",
        "400",
        messages=600,
        small=False,
    )
    topic = sorted(p.name for p in (store / "consumequeue").iterdir())[0]
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"mappedFileSizeCommitLog={CL_FILE}\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\n"
        f"maxIndexNum=400\ncompactionMappedFileSize={LOG_FILE}\ncompactionCqMappedFileSize={CQ_FILE}\n"
    )
    return store, conf, topic, _build(store, topic, 0)


def test_CompactionLog_layout_written_by_hand_reads_and_verifies_clean(tmp_path):
    store, conf, topic, units = _store(tmp_path)
    assert len(units) > 20
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    summary = json.loads(r.stdout)["summary"]
    assert (r.exit_code, summary["errors"], summary["warnings"]) == (0, 0, 0), r.stdout
    r = cli("dump-cq", topic, "0", "--store", store, "--broker-conf", conf, "--compaction", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    got = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(d["commitlog_offset"], d["size"], d["msg_base_offset"]) for d in got] == [
        (u[0], u[1], u[4]) for u in units
    ]
    r = cli(
        "dump-commitlog", "--store", store, "--broker-conf", conf, "--compaction-log", f"{topic}/0", "--format", "jsonl"
    )
    assert r.exit_code == 0, r.stderr
    msgs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(m["physical_offset"], m["queue_offset"]) for m in msgs] == [(u[0], u[4]) for u in units]


def test_a_hand_written_compaction_record_that_differs_from_the_commit_log_is_found(tmp_path):
    store, conf, topic, units = _store(tmp_path)
    log = store / "compaction" / "compactionLog" / topic / "0" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    struct.pack_into(">i", raw, units[3][0] + 16, 12345)  # FLAG of the 4th record: not the commit log's
    log.write_bytes(bytes(raw))
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    found = json.loads(r.stdout)["findings"]
    assert r.exit_code == 1 and any(f["check"].startswith("compaction.") and f["severity"] == "error" for f in found), (
        r.stdout
    )
