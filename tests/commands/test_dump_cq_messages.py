"""dump-cq --messages: the message behind each unit in one command (mqadmin queryMsgByOffset,
DefaultMessageStore#lookMessageByOffset), checked against the real broker's expected.json."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import cli, run

KEYS = (
    "physical_offset",
    "total_size",
    "magic",
    "body_crc",
    "queue_id",
    "flag",
    "queue_offset",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared_transaction_offset",
    "topic",
    "properties",
    "tags",
    "keys",
    "uniq_key",
    "msg_id",
    "body_size",
    "file",
)


def _host(h: str) -> str:
    """The broker's Java form ([0:0:0:0:0:0:0:1]:n) and rmqstore's compressed IPv6 ([::1]:n) alike."""
    import ipaddress

    addr, port = h.rsplit(":", 1)
    return f"{ipaddress.ip_address(addr.strip('[]'))}:{port}"


def _norm(m: dict) -> dict:
    return {k: _host(m[k]) if k.endswith("_host") else m[k] for k in KEYS}


def test_messages_are_the_brokers(fixture):
    store, conf, expected = fixture
    by_offset = {m["physical_offset"]: m for m in expected["messages"]}
    q = expected["consume_queues"]["AuditTopic/0"]
    r = cli(
        "dump-cq",
        "AuditTopic",
        "0",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--from-offset",
        "95",
        "--limit",
        "10",
        "--messages",
        "--format",
        "jsonl",
    )
    assert r.exit_code == 0, r.stderr
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [d["cq_offset"] for d in rows] == list(range(95, min(105, q["max_offset"])))  # across two CQ files
    for d in rows:
        unit = q["units"][d["cq_offset"]]
        want = by_offset[unit[1]]
        assert _norm(d["message"]) == _norm(want)
        assert "body" not in d["message"]


def test_unreadable_message_is_null(fixture, tmp_path):
    store, conf, expected = fixture
    s = tmp_path / "store"
    shutil.copytree(store, s)
    q = expected["consume_queues"]["AuditTopic/0"]
    phy = q["units"][3][1]
    f = s / "commitlog" / f"{phy - phy % 65536:020d}"
    f.chmod(0o644)
    with open(f, "r+b") as fh:
        fh.seek(phy % 65536)
        fh.write(b"\xff" * 8)
    r = cli(
        "dump-cq",
        "AuditTopic",
        "0",
        "--store",
        s,
        "--broker-conf",
        conf,
        "--limit",
        "5",
        "--messages",
        "--format",
        "jsonl",
    )
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert rows[3]["message"] is None and rows[3]["status"] == "missing"
    assert all(d["message"]["queue_offset"] == d["cq_offset"] for i, d in enumerate(rows) if i != 3)


@pytest.mark.slow
def test_messages_table_and_usage(fixture):
    store, conf, _ = fixture
    t = run(
        "dump-cq",
        "AuditTopic",
        "0",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--limit",
        "3",
        "--messages",
        "--tz",
        "UTC",
    )
    assert t.returncode == 0 and "msgId" in t.stdout.decode() and "born host" in t.stdout.decode()
    for extra in (("--no-resolve",), ("--summary",)):
        r = run("dump-cq", "AuditTopic", "0", "--store", store, "--messages", *extra)
        assert r.returncode == 2 and r.stderr.decode().startswith("rmqstore: error: --messages")


def test_to_offset_stops_before_it_and_a_reversed_range_is_refused(tmp_path):
    """--to-offset is the exclusive upper queue offset, as dump-commitlog's is a physical one."""
    from tests.helpers import generate

    store = generate(tmp_path / "store", "--topics", "1", messages=40)
    summary = json.loads(cli("dump-cq", "--summary", "--store", store, "--format", "jsonl").stdout.splitlines()[0])
    topic, qid = summary["topic"], str(summary["queue_id"])
    r = cli("dump-cq", topic, qid, "--store", store, "--from-offset", "2", "--to-offset", "5", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["cq_offset"] for x in r.stdout.splitlines()] == [2, 3, 4]
    empty = cli("dump-cq", topic, qid, "--store", store, "--from-offset", "3", "--to-offset", "3")
    assert empty.exit_code == 1 and "no unit in that range" in empty.stderr
    bad = cli("dump-cq", topic, qid, "--store", store, "--from-offset", "5", "--to-offset", "2")
    assert bad.exit_code == 2 and "--from-offset 5 lies after --to-offset 2" in bad.stderr
