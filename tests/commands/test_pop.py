"""pop: each popped message's fate, checked against a reconciliation done here from
``dump-commitlog --format jsonl`` on a generated store (checkpoint and ack bodies parsed
here with json, the broker's rules written out again: PopCheckPoint#ackOffsetByIndex,
#indexOfAck, PopReviveService#reviveRetry's retry topic, the revive group's offset)."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, generate

REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"
START = 1_767_225_600_000  # generate's default --start, 2026-01-01T00:00Z
HOUR = 3_600_000
POP_START = START + HOUR  # generate's pops follow the workload's hour


def reconcile(records: list[dict], offsets: dict, now: int) -> tuple[dict[tuple, str], dict[int, tuple]]:
    """(group, topic, queue, offset) -> state, and per revive queue (committed, max offset),
    the slow, obvious way: every record in memory."""
    by_queue = {(r["topic"], r["queue_id"], r["queue_offset"]): r for r in records}
    cks, acks = [], []
    for r in records:
        if r["topic"] != REVIVE:
            continue
        body, tag = json.loads(r["body"]), r["properties"]["TAGS"]
        (cks if tag == "ck" else acks).append((r["queue_id"], tag, body))
    acked: set[tuple] = set()
    for rq, tag, a in acks:
        for off in a["aol"] if tag == "bAck" else [a["ao"]]:
            acked.add((rq, a["t"], a["c"], a["q"], a["so"], a["pt"], off))
    states = {}
    for rq, _tag, ck in cks:
        for i in range(ck["n"]):
            off = ck["so"] + (ck["d"][i] if ck.get("d") else i)
            if ck["bm"] >> i & 1 or (rq, ck["t"], ck["c"], ck["q"], ck["so"], ck["pt"], off) in acked:
                state = "acked"
            else:
                uniq = by_queue[(ck["t"], ck["q"], off)]["properties"]["UNIQ_KEY"]
                retry = f"%RETRY%{ck['c']}_{ck['t']}"
                revived = any(
                    r["topic"] == retry and r["properties"].get("UNIQ_KEY") == uniq and r["store_timestamp"] >= ck["pt"]
                    for r in records
                )
                state = "revived" if revived else "invisible" if ck["pt"] + ck["it"] > now else "overdue"
            states[(ck["c"], ck["t"], ck["q"], off)] = state
    committed = offsets["offsetTable"].get(f"{REVIVE}@CID_RMQ_SYS_REVIVE_GROUP", {})
    queues = {}
    for rq in {r["queue_id"] for r in records if r["topic"] == REVIVE}:
        mx = 1 + max(r["queue_offset"] for r in records if r["topic"] == REVIVE and r["queue_id"] == rq)
        queues[rq] = (committed.get(str(rq)), mx)
    return states, queues


def answer(store: Path, *args: str, code: int = 0) -> tuple[list[dict], dict, str]:
    r = cli("pop", "--store", store, "--format", "jsonl", *args)
    assert r.exit_code == code, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"] if lines else {}, r.stderr


@pytest.fixture(scope="module")
def gen(tmp_path_factory) -> tuple[Path, list[dict], dict]:
    store = generate(
        tmp_path_factory.mktemp("pop") / "store",
        "--broker-version",
        "5",
        "--pop-messages",
        "150",
        messages=400,
        seed=5,
    )
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "text")
    assert r.exit_code == 0, r.stderr
    offsets = json.loads((store / "config" / "consumerOffset.json").read_text())
    return store, [json.loads(x) for x in r.stdout.splitlines()], offsets


@pytest.mark.parametrize("after_s", [30, 90, 10_000])
def test_every_popped_message_as_reconciled_from_the_dump(gen, after_s):
    store, records, offsets = gen
    now = POP_START + after_s * 1000
    rows, summary, _ = answer(store, "--now", str(now))
    want, _ = reconcile(records, offsets, now)
    assert {(r["group"], r["topic"], r["queue_id"], r["queue_offset"]): r["state"] for r in rows} == want
    counts = Counter(want.values())
    assert summary["popped"] == len(want) == 150
    assert {s: summary[s] for s in ("acked", "revived", "invisible", "overdue")} == {
        s: counts[s] for s in ("acked", "revived", "invisible", "overdue")
    }
    assert counts["acked"] and counts["revived"]
    if after_s == 90:
        assert counts["invisible"] and counts["overdue"], counts


def test_revive_progress_is_the_revive_groups_offset_against_the_queue(gen):
    store, records, offsets = gen
    rows, summary, _ = answer(store, "--by", "revive-queue")
    _, want = reconcile(records, offsets, 0)
    assert {r["queue_id"]: (r["committed_offset"], r["max_offset"]) for r in rows} == want
    for r in rows:
        assert r["behind"] == r["max_offset"] - (r["committed_offset"] or 0) - 1
    assert summary["revive_behind"] == sum(r["behind"] for r in rows) > 0


def test_revived_rows_point_at_their_retry_message(gen):
    store, records, _ = gen
    rows, _, _ = answer(store, "--state", "revived")
    at = {r["physical_offset"]: r for r in records}
    assert rows
    for row in rows:
        rec = at[row["retry_offset"]]
        assert rec["topic"] == row["retry_topic"] == f"%RETRY%{row['group']}_{row['topic']}"
        assert rec["properties"]["UNIQ_KEY"] == row["uniq_key"]
        assert rec["properties"]["1ST_POP_TIME"] == str(row["pop_time"])  # PopReviveService#reviveRetry
        assert rec["reconsume_times"] == 1


def test_groups_add_up_and_filters_narrow(gen):
    store, _, _ = gen
    rows, summary, _ = answer(store, "--now", str(POP_START + 90_000))
    groups, _, _ = answer(store, "--now", str(POP_START + 90_000), "--by", "group")
    assert sum(g["popped"] for g in groups) == summary["popped"]
    for g in groups:
        mine = [r for r in rows if (r["group"], r["topic"]) == (g["group"], g["topic"])]
        assert g["popped"] == len(mine)
        assert g["invisible"] == sum(r["state"] == "invisible" for r in mine)
    topic = groups[0]["topic"]
    only, s2, _ = answer(store, "--topic", topic)
    assert only and {r["topic"] for r in only} == {topic} and s2["popped"] == groups[0]["popped"]
    _, _, err = answer(store, "--group", "nobody", code=1)
    assert "no popped message of group 'nobody'" in err


def test_state_filters_rows_not_counts_and_limit_caps(gen):
    store, _, _ = gen
    rows, summary, _ = answer(store, "--state", "acked", "--limit", "3")
    assert len(rows) == 3 and {r["state"] for r in rows} == {"acked"}
    assert summary["matched"] == summary["acked"] > 3 and summary["popped"] == 150


def test_table_lists_groups_revive_queues_and_verbose_messages(gen):
    store, _, _ = gen
    r = cli("pop", "--store", store, "--now", str(POP_START + 90_000), "-v")
    assert r.exit_code == 0, r.stderr
    assert "revive progress" in r.stdout and "popped messages" in r.stdout and "pop-group" in r.stdout
    plain = cli("pop", "--store", store, "--now", str(POP_START + 90_000))
    assert "popped messages" not in plain.stdout


def test_a_store_without_pops_exits_1(tmp_path):
    store = generate(tmp_path / "s", messages=50)
    r = cli("pop", "--store", store)
    assert r.exit_code == 1
    assert "no popped message" in r.stderr


def test_pop_messages_need_a_5x_broker(tmp_path):
    r = cli("generate", "--store", tmp_path / "s", "--pop-messages", "5", "--messages", "5")
    assert r.exit_code == 2
    assert "--pop-messages" in r.stderr and not (tmp_path / "s" / "commitlog").exists()


def test_a_body_the_broker_cannot_read_is_a_warning(gen, tmp_path):
    store, _, _ = gen
    dump = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "base64")
    records = [json.loads(x) for x in dump.stdout.splitlines()]
    ack = next(r for r in records if r["topic"] == REVIVE and r["properties"]["TAGS"] == "ack")
    body = base64.b64decode(ack["body"])
    ack["body"] = base64.b64encode(b"{not json" + b" " * (len(body) - 9)).decode()  # same size: offsets kept
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = cli("generate", "--store", tmp_path / "b", *SMALL, "--broker-version", "5", "--from-jsonl", bad)
    assert r.exit_code == 0, r.stderr
    got = cli("pop", "--store", tmp_path / "b", "--format", "jsonl", "--by", "group")
    assert "the broker cannot read it" in got.stderr
    assert json.loads(got.stdout.splitlines()[-1])["summary"]["bad_bodies"] == 1
