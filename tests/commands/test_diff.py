"""``rmqstore diff``: a store and a copy diverged in known ways, each answer checked against
the stores' own dumps (dump-cq, dump-commitlog) compared here; both stores left unchanged."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, generate, run, tree_digest
from tests.helpers.hostile import one_line, plant


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("diff") / "a", messages=1500)


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def diff_rows(a: Path, b: Path, *extra: str) -> tuple[int, list[dict], dict]:
    """(exit code, rows, summary) of ``diff --format jsonl``."""
    r = cli("diff", a, b, "--format", "jsonl", *extra)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines[-1]["kind"] == "summary", r.stdout
    return r.exit_code, lines[:-1], lines[-1]


def dump_log(store: Path) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def queues(store: Path) -> set[tuple[str, int]]:
    cq = store / "consumequeue"
    return {(t.name, int(q.name)) for t in cq.iterdir() for q in t.iterdir()}


def dump_queue(store: Path, topic: str, qid: int) -> dict[int, dict]:
    """cq_offset -> the unit and its message, as dump-cq --messages prints them."""
    r = cli("dump-cq", topic, str(qid), "--store", store, "--format", "jsonl", "--messages")
    assert r.exit_code == 0, r.stderr
    return {u["cq_offset"]: u for u in map(json.loads, r.stdout.splitlines())}


def test_identical_copies_are_the_same(base, tmp_path):
    b = copy(base, tmp_path / "b")
    before = tree_digest(base), tree_digest(b)
    for fmt in ("table", "jsonl", "json"):
        r = cli("diff", base, b, "--format", fmt)
        assert r.exit_code == 0, r.stderr
    code, rows, summary = diff_rows(base, b)
    assert (code, rows, summary["same"], summary["files_same"] > 10) == (0, [], True, True)
    assert (tree_digest(base), tree_digest(b)) == before


def test_appended_messages_are_only_in_b(base, tmp_path):
    b = copy(base, tmp_path / "b")
    r = cli("generate", "--store", b, "--append", "--messages", "200", "--seed", "9", *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr
    before = tree_digest(base), tree_digest(b)
    code, rows, summary = diff_rows(base, b, "--messages")
    assert code == 1 and not summary["same"]
    assert (tree_digest(base), tree_digest(b)) == before
    by_queue = {(x["topic"], x["queue_id"]): x for x in rows if x["kind"] == "queue"}
    msgs = {(x["topic"], x["queue_id"], x["queue_offset"]): x for x in rows if x["kind"] == "message"}
    expected_msgs = {}
    for t, q in sorted(queues(b)):
        ua, ub = dump_queue(base, t, q), dump_queue(b, t, q)
        only_b = sorted(ub.keys() - ua.keys())
        assert all(ua[k]["commitlog_offset"] == ub[k]["commitlog_offset"] for k in ua)  # nothing rewritten
        if not only_b:
            assert (t, q) not in by_queue
            continue
        row = by_queue[(t, q)]
        assert row["only_b"] == [[only_b[0], only_b[-1] + 1]] and row["only_a"] == []
        assert (row["max_offset_a"], row["max_offset_b"]) == (len(ua), len(ub))
        for k in only_b:
            m = ub[k]["message"]
            expected_msgs[(t, q, k)] = (m["msg_id"], m["body_crc"], ub[k]["commitlog_offset"])
    assert {k: (v["msg_id"], v["body_crc"], v["physical_offset"]) for k, v in msgs.items()} == expected_msgs
    assert all(v["side"] == "b" for v in msgs.values())
    assert summary["messages_only_b"] == len(expected_msgs) > 0 and summary["messages_only_a"] == 0
    # the commit logs part where A's log ends: the first record B appended
    log_a, log_b = dump_log(base), dump_log(b)
    end_a = max(m["physical_offset"] + m["total_size"] for m in log_a)
    end_b = max(m["physical_offset"] + m["total_size"] for m in log_b)
    (div,) = [x for x in rows if x["kind"] == "divergence"]
    first_new = min((m for m in log_b if m["physical_offset"] >= end_a), key=lambda m: m["physical_offset"])
    assert div["b"]["msg_id"] == first_new["msg_id"] and div["a"] is None
    assert (div["end_a"], div["end_b"], div["past_a"]) == (end_a, end_b, 0)
    assert div["past_b"] == end_b - div["offset"] and div["offset"] <= first_new["physical_offset"]
    files = {x["path"]: x for x in rows if x["kind"] == "file"}
    added = sorted(p for p, x in files.items() if x["status"] == "added")
    assert added and all(x["size_a"] is None for p, x in files.items() if p in added)
    assert added == sorted(
        str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and not (base / p.relative_to(b)).exists()
    )


def test_truncated_tail_diverges_at_the_record(base, tmp_path):
    """A slave that lost the end of its log: the tail zeroed from one record on."""
    b = copy(base, tmp_path / "b")
    log = dump_log(base)
    cut = log[-5]
    last = sorted((b / "commitlog").iterdir())[-1]
    start = int(last.name)
    assert cut["physical_offset"] >= start
    with open(last, "r+b") as f:
        f.seek(cut["physical_offset"] - start)
        f.write(bytes(last.stat().st_size - (cut["physical_offset"] - start)))
    code, rows, summary = diff_rows(base, b)
    (div,) = [x for x in rows if x["kind"] == "divergence"]
    assert code == 1 and summary["commitlog_divergence"] == div["offset"] == cut["physical_offset"]
    assert div["a"]["msg_id"] == cut["msg_id"] and div["a"]["queue_offset"] == cut["queue_offset"]
    assert div["b"] is None and div["past_b"] == 0
    assert div["past_a"] == log[-1]["physical_offset"] + log[-1]["total_size"] - cut["physical_offset"]
    (f,) = [x for x in rows if x["kind"] == "file" and x["path"] == f"commitlog/{last.name}"]
    assert f["status"] == "changed" and 0 <= f["first_difference"] - (cut["physical_offset"] - start) < 4


def write_offsets(store: Path, table: dict) -> None:
    """config/consumerOffset.json as fastjson writes it: integer map keys unquoted."""
    body = ",".join(f'"{k}":{{' + ",".join(f"{q}:{o}" for q, o in queues.items()) + "}" for k, queues in table.items())
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{' + body + "}}")


def test_consumer_offsets_moved_backwards(base, tmp_path):
    a, b = copy(base, tmp_path / "a"), copy(base, tmp_path / "b")
    write_offsets(a, {"OrderTopic@g1": {0: 10, 1: 20, 2: 3}, "PaymentTopic@g2": {0: 5}})
    write_offsets(b, {"OrderTopic@g1": {0: 7, 1: 25, 2: 3}, "AuditTopic@g3": {1: 1}})
    code, rows, summary = diff_rows(a, b)
    offsets = [x for x in rows if x["kind"] == "offset"]
    assert code == 1
    assert offsets == [
        {"kind": "offset", "group": "g1", "topic": "OrderTopic", "queue_id": 0, "a": 10, "b": 7},
        {"kind": "offset", "group": "g2", "topic": "PaymentTopic", "queue_id": 0, "a": 5, "b": None},
    ]
    counts = {k: summary[k] for k in ("offsets_backwards", "offsets_forward", "offsets_removed", "offsets_added")}
    assert counts == {"offsets_backwards": 1, "offsets_forward": 1, "offsets_removed": 1, "offsets_added": 1}
    assert [x["path"] for x in rows if x["kind"] == "file"] == ["config/consumerOffset.json"]
    _, rows, _ = diff_rows(a, b, "--topic", "OrderTopic")
    assert [(x["group"], x["a"], x["b"]) for x in rows if x["kind"] == "offset"] == [("g1", 10, 7)]


def test_deleted_queue_is_only_in_a(base, tmp_path):
    b = copy(base, tmp_path / "b")
    shutil.rmtree(b / "consumequeue" / "OrderTopic" / "2")
    units = dump_queue(base, "OrderTopic", 2)
    code, rows, summary = diff_rows(base, b, "--messages")
    assert code == 1
    (q,) = [x for x in rows if x["kind"] == "queue"]
    assert (q["topic"], q["queue_id"], q["max_offset_b"], q["only_b"]) == ("OrderTopic", 2, None, [])
    assert q["only_a"] == [[min(units), max(units) + 1]] and q["messages_only_a"] == len(units)
    msgs = [x for x in rows if x["kind"] == "message"]
    assert [(m["queue_offset"], m["msg_id"]) for m in msgs] == [
        (k, u["message"]["msg_id"]) for k, u in sorted(units.items())
    ]
    removed = sorted(x["path"] for x in rows if x["kind"] == "file")
    assert removed == sorted(
        f"consumequeue/OrderTopic/2/{p.name}" for p in (base / "consumequeue" / "OrderTopic" / "2").iterdir()
    )
    assert all(x["status"] == "removed" and x["size_b"] is None for x in rows if x["kind"] == "file")
    assert summary["files_removed"] == len(removed) and not [x for x in rows if x["kind"] == "divergence"]


def test_units_changed_in_place(base, tmp_path):
    """A unit rewritten (another tags code): same queue offset, counted and shown with --messages."""
    b = copy(base, tmp_path / "b")
    qdir = b / "consumequeue" / "OrderTopic" / "1"
    first = sorted(qdir.iterdir())[0]
    data = bytearray(first.read_bytes())
    data[20 * 3 + 12 : 20 * 3 + 20] = (123456).to_bytes(8, "big")
    first.write_bytes(bytes(data))
    units = dump_queue(base, "OrderTopic", 1)
    base_offset = int(first.name) // 20
    code, rows, summary = diff_rows(base, b, "--messages")
    (q,) = [x for x in rows if x["kind"] == "queue"]
    assert code == 1 and (q["units_changed"], q["first_changed"]) == (1, base_offset + 3)
    (u,) = [x for x in rows if x["kind"] == "unit"]
    was = units[base_offset + 3]
    assert u["a"] == {"commitlog_offset": was["commitlog_offset"], "size": was["size"], "tags_code": was["tags_code"]}
    assert u["b"] == dict(u["a"], tags_code=123456) and summary["units_changed"] == 1


def test_limit_table_and_json(base, tmp_path):
    b = copy(base, tmp_path / "b")
    shutil.rmtree(b / "consumequeue" / "PaymentTopic")
    _, rows, summary = diff_rows(base, b)
    r = cli("diff", base, b, "--limit", "2", "--format", "jsonl")
    assert r.exit_code == 1 and len(r.stdout.splitlines()) == 3
    assert "more rows not shown (--limit 2)" in r.stderr
    r = cli("diff", base, b, "--format", "json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["rows"] == rows and doc["files_removed"] == summary["files_removed"]
    r = cli("diff", base, b)
    assert r.exit_code == 1 and "PaymentTopic/0" in r.stdout and "removed" in r.stdout
    r = cli("diff", base, b, "-t", "OrderTopic", "--format", "jsonl")
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 1
    r = cli("diff", base, b, "-t", "OrderTopc")
    assert r.exit_code == 1 and "did you mean OrderTopic?" in r.stderr and r.stdout == ""
    r = cli("diff", base, b, "-t", "PaymentTopic", "--format", "jsonl")  # in one store only
    assert r.exit_code == 1 and json.loads(r.stdout.splitlines()[-1])["messages_only_a"] > 0


def test_usage_and_hostile_input(base, tmp_path):
    b = copy(base, tmp_path / "b")
    one_line(run("diff", base), 2, "STORE_B")
    one_line(run("diff", base, b, "--limit", "-1"), 2)
    afile = tmp_path / "plain-file"
    afile.write_text("x")
    one_line(run("diff", afile, b), 3, "no such store directory")
    victim = sorted((b / "consumequeue" / "OrderTopic" / "0").iterdir())[0]
    plant(victim, "fifo")
    before = tree_digest(base), sorted(os.listdir(b / "consumequeue" / "OrderTopic" / "0"))
    one_line(run("diff", base, b), 3, "FIFO", victim.name)
    assert (tree_digest(base), sorted(os.listdir(b / "consumequeue" / "OrderTopic" / "0"))) == before


def test_dledger_log_diverges_at_the_record_not_its_entry_header(sample_tarball, tmp_path):
    """A DLedger commit log (entries: a 48-byte header, then the record): a slave copy that
    lost its last records parts at the first lost record's own offset, as dump-commitlog
    gives it, though the first differing byte lies in that entry's header."""
    s = sample_tarball("dledger")
    conf = ("--broker-conf", s / "broker.conf")
    slave = copy(s / "store", tmp_path / "slave")
    log = [
        json.loads(x)
        for x in cli("dump-commitlog", "--store", s / "store", *conf, "--format", "jsonl").stdout.splitlines()
    ]
    gone = log[-2]
    (data,) = [p for p in slave.rglob("data/*") if p.is_file()]
    at = gone["physical_offset"] - 48 - int(data.name)
    with open(data, "r+b") as f:
        f.seek(at)
        f.write(bytes(data.stat().st_size - at))
    code, rows, summary = diff_rows(s / "store", slave, *conf)
    (div,) = [x for x in rows if x["kind"] == "divergence"]
    assert code == 1 and (div["offset"], div["a"]["msg_id"], div["b"]) == (
        gone["physical_offset"],
        gone["msg_id"],
        None,
    )
    assert (
        div["first_byte"] < div["offset"]
        and div["past_a"] == log[-1]["physical_offset"] + log[-1]["total_size"] - div["offset"]
    )
