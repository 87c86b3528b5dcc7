"""transactions: each transactional message's fate, checked against a pairing done here from
``dump-commitlog --format jsonl`` (generated stores) and from the real brokers' expected.json
(tests/fixtures), with the broker's rules written out again independently."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import cli, fixture_dir, generate

HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
HOUR = 3_600_000


def pair(records: list[dict], now: int, check_max: int = 15, reserved_hours: int = 72) -> dict[str, str]:
    """Each transaction's state by its key (``half:UNIQ_KEY``, ``prepared@OFFSET``), paired
    the slow, obvious way: all records in memory, halves grouped by UNIQ_KEY."""
    halves: dict[str, list[dict]] = {}
    legacy: dict[int, dict] = {}
    ends: dict[int, int] = {}  # prepared offset -> transaction type of the record naming it
    op_done: set[tuple[int, int]] = set()
    for r in records:
        tx = r["sys_flag"] & 0xC
        if r["topic"] == HALF:
            halves.setdefault(r["properties"]["UNIQ_KEY"], []).append(r)
        elif r["topic"] == OP:
            for part in r["body"].split(","):
                if part.isdigit():
                    op_done.add((r["queue_id"], int(part)))
        elif tx == 4:
            legacy[r["physical_offset"]] = r
        elif tx in (8, 12):
            ends[r["prepared_transaction_offset"]] = tx
    out = {}
    for uniq, hs in halves.items():
        types = {ends.get(h["physical_offset"]) for h in hs} - {None}
        opped = any((h["queue_id"], h["queue_offset"]) in op_done for h in hs)
        checks = max(int(h["properties"].get("TRANSACTION_CHECK_TIMES", 0)) for h in hs)
        if 8 in types:
            state = "committed"
        elif opped or 12 in types:
            state = "rolled-back"
        elif checks >= check_max or now - hs[0]["born_timestamp"] > reserved_hours * HOUR:
            state = "discard"
        else:
            state = "pending"
        out[f"half:{uniq}"] = state
    for off in legacy:
        t = ends.get(off)
        out[f"prepared@{off}"] = {8: "committed", 12: "rolled-back"}.get(t, "pending")  # type: ignore[arg-type]
    return out


def answer(store: Path, *args: str, code: int = 0) -> tuple[list[dict], dict, str]:
    r = cli("transactions", "--store", store, "--format", "jsonl", *args)
    assert r.exit_code == code, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"] if lines else {}, r.stderr


def key(row: dict) -> str:
    return f"half:{row['uniq_key']}" if row["kind"] == "half" else f"prepared@{row['half_offset']}"


@pytest.fixture(scope="module")
def gen(tmp_path_factory) -> tuple[Path, list[dict]]:
    store = generate(
        tmp_path_factory.mktemp("tx") / "store",
        "--transaction-ratio",
        "0.4",
        "--transaction-outcomes",
        "5:2:3",
        messages=1200,
        seed=11,
    )
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "text")
    assert r.exit_code == 0, r.stderr
    return store, [json.loads(x) for x in r.stdout.splitlines()]


START = 1_767_225_600_000  # generate's default --start, 2026-01-01T00:00Z


def test_generated_store_every_state_as_paired_from_the_dump(gen):
    store, records = gen
    now = START + 2 * HOUR
    rows, summary, _ = answer(store, "--now", str(now))
    want = pair(records, now)
    assert {key(r): r["state"] for r in rows} == want
    counts = Counter(want.values())
    assert all(counts[s] > 0 for s in ("committed", "rolled-back", "pending", "discard")), counts
    assert summary["transactions"] == len(want)
    assert (summary["committed"], summary["rolled_back"], summary["pending"], summary["discard"]) == (
        counts["committed"],
        counts["rolled-back"],
        counts["pending"],
        counts["discard"],
    )
    assert summary["committed_without_op"] == summary["ops_without_half"] == summary["bad_op_entries"] == 0
    re_put = [r for r in rows if r["half_records"] > 1]
    assert re_put and all(r["check_times"] == r["half_records"] - 1 for r in re_put)


def test_groups_add_up_per_producer_group_and_topic(gen):
    store, _ = gen
    r = cli("transactions", "--store", store, "--format", "json", "--now", str(START))
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    per = Counter((t["producer_group"], t["topic"], t["state"]) for t in doc["transactions"])
    for g in doc["groups"]:
        k = (g["producer_group"], g["topic"])
        assert [g["committed"], g["rolled_back"], g["pending"], g["discard"]] == [
            per[(*k, s)] for s in ("committed", "rolled-back", "pending", "discard")
        ]
    assert doc["summary"]["groups"] == len(doc["groups"]) > 1


def test_now_moves_ages_and_old_halves_turn_to_discard(gen):
    store, records = gen
    a, _, _ = answer(store, "--state", "pending", "--now", str(START + HOUR))
    b, _, _ = answer(store, "--state", "pending", "--now", str(START + 2 * HOUR))
    age_b = {key(r): r["age_ms"] for r in b}
    assert a and all(age_b[key(r)] - r["age_ms"] == HOUR for r in a if key(r) in age_b)
    late = START + 80 * HOUR  # every half born more than fileReservedTime (72 h) before
    rows, summary, _ = answer(store, "--now", str(late))
    assert {key(r): r["state"] for r in rows} == pair(records, late)
    halves_open = [r for r in rows if r["kind"] == "half" and r["state"] in ("pending", "discard")]
    assert halves_open and all(r["state"] == "discard" for r in halves_open)
    assert {r["discard_reason"] for r in halves_open} == {"check-max", "file-reserved-time"}


@pytest.mark.parametrize("states", [("pending",), ("committed",), ("rolled-back", "discard")])
def test_state_filters_rows_not_counts(gen, states):
    store, _ = gen
    every, total, _ = answer(store, "--now", str(START))
    rows, summary, _ = answer(store, "--now", str(START), *[x for s in states for x in ("--state", s)])
    assert rows and {r["state"] for r in rows} <= set(states)
    assert len(rows) == summary["matched"] == sum(1 for r in every if r["state"] in states)
    assert summary["transactions"] == total["transactions"]


def test_limit_caps_rows_and_says_so(gen):
    store, _ = gen
    rows, summary, err = answer(store, "--limit", "3", "--now", str(START))
    assert len(rows) == summary["shown"] == 3 < summary["matched"]
    assert "not shown (--limit)" in err


def test_group_and_topic_narrow_and_nothing_matching_exits_1(gen):
    store, _ = gen
    rows, _, _ = answer(store, "--topic", "OrderTopic", "--now", str(START))
    assert rows and {r["topic"] for r in rows} == {"OrderTopic"}
    _, _, err = answer(store, "--group", "no-such-group", code=1)
    assert "no transactional message of group 'no-such-group'" in err


def test_table_lists_groups_then_open_transactions(gen):
    store, _ = gen
    r = cli("transactions", "--store", store, "--now", str(START + 2 * HOUR))
    assert r.exit_code == 0, r.stderr
    assert "producer group" in r.stdout and "tx-group" in r.stdout
    assert "check-max" in r.stdout and "15/15" in r.stdout


def test_a_store_without_transactions_exits_1(tmp_path):
    store = generate(tmp_path / "store", "--transaction-ratio", "0", messages=200)
    _, _, err = answer(store, code=1)
    assert "no transactional message" in err


def test_default_generate_commits_every_half(tmp_path):
    """Without --transaction-outcomes generate writes what it always wrote: every half
    committed and ended by its op record."""
    store = generate(tmp_path / "store", "--transaction-ratio", "0.3", messages=300)
    rows, summary, _ = answer(store)
    assert {r["state"] for r in rows if r["kind"] == "half"} == {"committed"}
    assert all(r["op_offset"] is not None for r in rows if r["kind"] == "half")


def test_a_hostile_op_body_is_a_warning(gen, tmp_path):
    """An op body that is not offsets (the broker's getLong skips it) is said on stderr and
    counted; the half it failed to end stays open."""
    store, records = gen
    lines = []
    hit = None
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "base64")
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if hit is None and d["topic"] == OP:
            body = base64.b64decode(d["body"])
            d["body"] = base64.b64encode(b"x" * len(body)).decode()  # same size: offsets kept
            hit = (d["queue_id"], int(body))
        lines.append(json.dumps(d))
    src = tmp_path / "dump.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "hostile"
    g = cli("generate", "--store", out, "--from-jsonl", src, "--commitlog-file-size", "65536", "--cq-file-size", "2000")
    assert g.exit_code == 0, g.stderr
    rows, summary, err = answer(out, "--now", str(START))
    assert summary["bad_op_entries"] == 1
    assert "not a half queue offset" in err and "Traceback" not in err
    victim = [r for r in rows if r["kind"] == "half" and r["half_queue_offset"] == hit[1]]
    assert len(victim) == 1 and victim[0]["op_offset"] is None


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_real_brokers_transactions_match_their_records(version):
    d = fixture_dir(version)
    expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    records = [
        {**m, "body": base64.b64decode(m["body_base64"]).decode("utf-8", "replace")} for m in expected["messages"]
    ]
    now = max(m["store_timestamp"] for m in records) + HOUR
    rows, summary, _ = answer(d / "store", "--broker-conf", d / "broker.conf", "--now", str(now))
    assert {key(r): r["state"] for r in rows} == pair(records, now)
    assert summary["transactions"] == len(rows) > 10
    assert {r["producer_group"] for r in rows} == {"txSampleGroup"}


def test_a_5x_store_writes_op_bodies_as_5x_does(tmp_path):
    """5.x's deletePrepareMessage follows each offset with the separator ("12,"); the pairing
    reads them as the broker's split does."""
    store = generate(
        tmp_path / "store",
        "--broker-version",
        "5",
        "--transaction-ratio",
        "0.3",
        "--transaction-outcomes",
        "6:2:2",
        messages=400,
    )
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "text")
    records = [json.loads(x) for x in r.stdout.splitlines()]
    ops = [d for d in records if d["topic"] == OP]
    assert ops and all(d["body"].endswith(",") and d["body"][:-1].isdigit() for d in ops)
    rows, summary, _ = answer(store, "--now", str(START))
    assert {key(x): x["state"] for x in rows} == pair(records, START)
    assert summary["bad_op_entries"] == 0 and summary["rolled_back"] > 0


def test_bad_outcomes_are_refused_before_anything_is_written(tmp_path):
    r = cli("generate", "--store", tmp_path / "s", "--transaction-outcomes", "1:x:1")
    assert r.exit_code == 2 and "--transaction-outcomes" in r.stderr
    assert not (tmp_path / "s").exists()
