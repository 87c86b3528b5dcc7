"""generate --bcq-topics: 5.x BatchCQ topics written as the broker does (inner-batch records
with INNER_NUM/INNER_BASE, 46-byte units in batchconsumequeue/, queue.type in topics.json),
read back, verified and rebuilt byte for byte; --append continues the queues."""

from __future__ import annotations

import json
import struct
from itertools import pairwise

from tests.helpers import cli

SMALL = ("--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")
UNIT = ">qiqqqhii"  # BatchConsumeQueue#putBatchMessagePositionInfo, written out here (test-only)


def _gen(store, conf, *extra):
    r = cli(
        "generate", "--store", store, "--broker-conf", conf, "--broker-version", "5", *SMALL, *extra, "--format", "json"
    )
    assert r.exit_code == 0, r.stderr


def _units(qdir):
    """Every unit of a queue read here from the documented layout, up to the first invalid."""
    out = []
    for f in sorted(qdir.iterdir()):
        raw = f.read_bytes()
        for i in range(0, len(raw) - 45, 46):
            u = struct.unpack_from(UNIT, raw, i)
            if u[0] < 0 or u[1] <= 0 or u[4] < 0 or u[5] <= 0:
                return out
            out.append(u)
    return out


def _verify_errors(store, conf) -> dict:
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    return json.loads(r.stdout.splitlines()[-1])["summary"]


def test_generate_bcq_topics_clean_rebuildable_and_appendable(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("mapperFileSizeBatchConsumeQueue=460\n")
    store = tmp_path / "s"
    _gen(store, conf, "--messages", "300", "--bcq-topics", "2")
    topics = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    bcq = sorted(p.name for p in (store / "batchconsumequeue").iterdir())
    assert bcq == sorted(t for t, c in topics.items() if c.get("attributes") == {"queue.type": "BatchCQ"})
    assert len(bcq) == 2 and not set(bcq) & {p.name for p in (store / "consumequeue").iterdir()}
    for q in (store / "batchconsumequeue" / bcq[0]).iterdir():
        units = _units(q)
        assert units and all(b[4] == a[4] + a[5] for a, b in pairwise(units))  # bases contiguous
        rows = [
            json.loads(x)
            for x in cli(
                "dump-commitlog", "--store", store, "--topic", bcq[0], "--queue-id", q.name, "--format", "jsonl"
            ).stdout.splitlines()
        ]
        assert [
            (
                r["physical_offset"],
                r["total_size"],
                r["queue_offset"],
                int(r["properties"]["INNER_NUM"]),
                int(r["properties"]["INNER_BASE"]),
                r["sys_flag"] & 0xC0,
            )
            for r in rows
        ] == [(u[0], u[1], u[4], u[5], u[4], 192) for u in units]
    assert _verify_errors(store, conf)["errors"] == 0
    r = cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    for q in (store / "batchconsumequeue").glob("*/*"):
        out = tmp_path / "out" / "batchconsumequeue" / q.parent.name / q.name
        assert {f.name: f.read_bytes() for f in q.iterdir()} == {f.name: f.read_bytes() for f in out.iterdir()}
    before = {q: len(_units(q)) for q in (store / "batchconsumequeue").glob("*/*")}
    _gen(store, conf, "--append", "--messages", "100", "--seed", "5")
    s = _verify_errors(store, conf)
    assert s["errors"] == 0 and s["warnings"] == 0, s
    after = {q: len(_units(q)) for q in (store / "batchconsumequeue").glob("*/*")}
    assert all(after[q] >= n for q, n in before.items()) and sum(after.values()) > sum(before.values())


def test_generate_bcq_topics_needs_a_5_broker(tmp_path):
    r = cli("generate", "--store", tmp_path / "s", "--bcq-topics", "1", *SMALL)
    assert r.exit_code == 2 and "--bcq-topics needs --broker-version 5" in r.stderr
