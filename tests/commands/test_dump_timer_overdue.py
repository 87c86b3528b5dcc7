"""dump-timer --overdue, Store.overdue and verify's stuck-delivery warnings: every count checked
against one made here from other answers (the real brokers' expected.json, dump-commitlog
and dump-cq JSON Lines, the timercheck bytes), on the real 5.3.3 samples and generated stores.

The rules (store/answers/overdue.py): a delay level's unit is overdue when it lies at or after the
level's delayOffset.json offset (ScheduleMessageService#correctDelayOffset, 0 when absent)
and its tags code (the delivery time, CommitLog#checkMessageAndReturnSize) is before --now;
a timer message when its slot time is before --now and at or after timercheck's
lastReadTimeMs (TimerMessageStore#dequeue), or before it with no delivered copy.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections import Counter

import pytest

from tests.helpers import cli, fixture_dir, generate

START = "2026-11-01T00:00:00Z"


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def _summary(store, *args) -> dict:
    r = cli("dump-timer", "--store", store, "--overdue", "--summary", *args, "--format", "json")
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


# ------------------------------------------------------------------ the real 5.3.3 samples
@pytest.fixture(scope="module")
def delay_sample(tmp_path_factory):
    """The 5.3.3 sample with a delayOffset.json: level 1 at 2, level 2 at 0, level 5 past its
    queue (moved to the max), the other levels absent (from 0)."""
    src = fixture_dir("5.3.3")
    d = tmp_path_factory.mktemp("delay533")
    shutil.copytree(src / "store", d / "store")
    (d / "store" / "config").mkdir()
    (d / "store" / "config" / "delayOffset.json").write_text('{"offsetTable":{1:2,2:0,5:100}}')
    return d / "store", src / "broker.conf", json.loads((src / "expected.json").read_text(encoding="utf-8"))


def _expected_delay(exp: dict, saved: dict[int, int], now: int) -> tuple[dict[int, int], Counter]:
    """Per level the overdue count, and per real topic, from the broker's own answers."""
    real = {m["physical_offset"]: m["properties"].get("REAL_TOPIC") for m in exp["messages"]}
    per_level, per_topic = {}, Counter()
    for key, q in exp["consume_queues"].items():
        if not key.startswith("SCHEDULE_TOPIC_XXXX/"):
            continue
        level = q["queue_id"] + 1
        start = min(max(saved.get(level, 0), q["min_offset"]), q["max_offset"]) if level in saved else 0
        due = [u for u in q["units"] if u[0] >= start and u[3] < now]
        per_level[level] = len(due)
        per_topic.update(real[u[1]] for u in due)
    return per_level, per_topic


@pytest.mark.parametrize("now", [1795317665000, 1795317700000, 1795400000000])
def test_delay_levels_against_the_brokers_consume_queues(delay_sample, now):
    store, conf, exp = delay_sample
    s = _summary(store, "--broker-conf", conf, "--now", str(now))
    per_level, per_topic = _expected_delay(exp, {1: 2, 2: 0, 5: 100}, now)
    assert {lv["level"]: lv["overdue"] for lv in s["delay_levels"]} == per_level
    assert {t["real_topic"]: t["count"] for t in s["topics"]} == dict(per_topic)
    assert s["delay_offsets_file"] == "delayOffset.json" and s["timer"] is None
    levels = {lv["level"]: lv for lv in s["delay_levels"]}
    assert (levels[1]["saved_offset"], levels[1]["start_offset"], levels[1]["pending"]) == (2, 2, 5)
    assert (levels[5]["saved_offset"], levels[5]["start_offset"], levels[5]["pending"]) == (100, 6, 0)
    assert levels[3]["saved_offset"] is None and levels[3]["start_offset"] == 0
    assert levels[18]["delay_ms"] == 7_200_000  # the level above 18 the broker clamped


def test_delay_rows_name_each_overdue_unit_with_its_lateness(delay_sample):
    store, conf, exp = delay_sample
    now = 1795317700000
    rows = _jsonl("dump-timer", "--store", store, "--broker-conf", conf, "--overdue", "--now", str(now))
    units = {
        (q["queue_id"] + 1, u[0]): u
        for k, q in exp["consume_queues"].items()
        if k.startswith("SCHEDULE_TOPIC_XXXX/")
        for u in q["units"]
    }
    assert rows == sorted(rows, key=lambda r: r["due_ms"])
    for r in rows:
        u = units[(r["level"], r["queue_offset"])]
        assert (r["source"], r["state"], r["commitlog_offset"], r["size"], r["due_ms"]) == (
            "delay",
            "pending",
            u[1],
            u[2],
            u[3],
        )
        assert r["late_ms"] == now - u[3] > 0
    assert len(rows) == sum(_expected_delay(exp, {1: 2, 2: 0, 5: 100}, now)[0].values())


def test_without_delay_offsets_every_level_starts_at_zero_and_verify_stays_quiet():
    """No delayOffset.json: ScheduleMessageService#start takes 0; verify does not judge the levels."""
    src = fixture_dir("5.3.3")
    r = cli("dump-timer", "--store", src / "store", "--broker-conf", src / "broker.conf", "--overdue", "--summary")
    assert r.exit_code == 0, r.stderr
    assert "no delayOffset.json" in r.stderr
    v = cli("verify", "--store", src / "store", "--broker-conf", src / "broker.conf", "--format", "json")
    assert "overdue" not in v.stdout


def test_verify_reports_each_stuck_level_at_the_newest_store_time(delay_sample):
    store, conf, exp = delay_sample
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    found = [f for f in json.loads(r.stdout)["findings"] if f["check"] == "delay.overdue"]
    newest = max(m["store_timestamp"] for m in exp["messages"])
    per_level, _ = _expected_delay(exp, {1: 2, 2: 0, 5: 100}, newest - 10_000)
    assert sorted(int(f["detail"].split()[1]) for f in found) == sorted(k for k, n in per_level.items() if n)
    assert {f["severity"] for f in found} == {"warning"}


@pytest.fixture(scope="module")
def timer_sample(sample_tarball):
    d = sample_tarball("timer")
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text(encoding="utf-8"))


def _timer_expected(store, conf, now: int) -> set[str]:
    """UNIQ_KEYs of timer messages due before ``now`` with no delivered copy (dump-commitlog)."""
    msgs = _jsonl("dump-commitlog", "--store", store, "--broker-conf", conf)
    delivered = {
        m["uniq_key"] for m in msgs if m["topic"] != "rmq_sys_wheel_timer" and "TIMER_DEQUEUE_MS" in m["properties"]
    }
    return {
        m["uniq_key"]
        for m in msgs
        if m["topic"] == "rmq_sys_wheel_timer"
        and int(m["properties"]["TIMER_OUT_MS"]) < now
        and m["uniq_key"] not in delivered
    }


@pytest.mark.parametrize("late", [60_000, 300_000, 10 * 86_400_000])
def test_timer_overdue_against_the_commit_log(timer_sample, late):
    store, conf, exp = timer_sample
    now = exp["timerCheckpoint"]["lastReadTimeMs"] + late
    rows = _jsonl("dump-timer", "--store", store, "--broker-conf", conf, "--overdue", "--now", str(now))
    want = _timer_expected(store, conf, now)
    assert {r["uniq_key"] for r in rows} == want
    assert {r["state"] for r in rows} <= {"behind"}  # the 5 delivered ones have their copies
    if late > 86_400_000:
        assert len(rows) == exp["counts"]["pending"] == 95
    s = _summary(store, "--broker-conf", conf, "--now", str(now))
    assert s["timer"]["behind"] == len(want) and s["timer"]["passed"] == 0
    assert s["timer"]["last_read_time_ms"] == exp["timerCheckpoint"]["lastReadTimeMs"]
    if want:
        assert s["topics"] == [
            {
                "source": "timer",
                "real_topic": "DelayTopic",
                "count": len(want),
                "oldest_due_ms": min(r["due_ms"] for r in rows),
                "max_late_ms": now - min(r["due_ms"] for r in rows),
            }
        ]


def test_timer_sample_nothing_overdue_before_its_read_time(timer_sample):
    store, conf, exp = timer_sample
    now = exp["timerCheckpoint"]["lastReadTimeMs"]
    r = cli("dump-timer", "--store", store, "--broker-conf", conf, "--overdue", "--now", str(now))
    assert r.exit_code == 1 and "no delayed message is overdue" in r.stderr


def test_the_library_answers_as_the_command(timer_sample):
    import rmqstore_cli

    store, conf, exp = timer_sample
    now = exp["timerCheckpoint"]["lastReadTimeMs"] + 600_000
    rep = rmqstore_cli.open_store(store, broker_conf=conf).overdue(now=now)
    assert isinstance(rep, rmqstore_cli.OverdueReport)
    assert all(isinstance(m, rmqstore_cli.OverdueMessage) for m in rep.messages)
    rows = _jsonl("dump-timer", "--store", store, "--broker-conf", conf, "--overdue", "--now", str(now))
    assert [m.as_dict() for m in rep.messages] == rows
    d = rep.as_dict()
    assert d.pop("messages") == rows
    assert d == _summary(store, "--broker-conf", conf, "--now", str(now))


def test_overdue_refuses_the_other_modes(timer_sample):
    store, conf, _ = timer_sample
    r = cli("dump-timer", "--store", store, "--broker-conf", conf, "--overdue", "--units")
    assert r.exit_code == 2 and "--overdue" in r.stderr


def test_a_49_store_has_delay_levels_only():
    src = fixture_dir("4.9.7")
    s = _summary(src / "store", "--broker-conf", src / "broker.conf", "--now", "2100-01-01T00:00Z")
    assert s["timer"] is None
    assert s["delay_levels"] and all(lv["overdue"] == lv["pending"] for lv in s["delay_levels"])


# ------------------------------------------------------------------ a generated store
@pytest.fixture(scope="module")
def stuck_store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("gen-overdue") / "store",
        "--broker-version",
        "5",
        "--timer-ratio",
        "0.1",
        "--overdue-timer-ratio",
        "0.5",
        "--delay-ratio",
        "0.1",
        "--delay-offset-lag",
        "3",
        "--start",
        START,
        "--span",
        "10m",
        messages=1500,
    )


def _generated_expected(store, now: int) -> tuple[dict[int, int], int]:
    """Per level the overdue count (dump-cq and delayOffset.json) and the timer's (dump-commitlog
    and timercheck's first long)."""
    import re

    text = (store / "config" / "delayOffset.json").read_text()
    saved = {int(k): int(v) for k, v in re.findall(r"(\d+):(\d+)", text.split('"offsetTable"')[1])}
    per_level = {}
    for level, off in saved.items():
        units = _jsonl("dump-cq", "--store", store, "SCHEDULE_TOPIC_XXXX", str(level - 1))
        per_level[level] = sum(1 for u in units if u["cq_offset"] >= off and u["tags_code"] < now)
        assert off == max(u["cq_offset"] for u in units) + 1 - min(3, len(units))
    read = struct.unpack(">q", (store / "config" / "timercheck").read_bytes()[:8])[0]
    msgs = _jsonl("dump-commitlog", "--store", store)
    outs = [int(m["properties"]["TIMER_OUT_MS"]) for m in msgs if m["topic"] == "rmq_sys_wheel_timer"]
    return per_level, sum(1 for t in outs if read <= t // 1000 * 1000 < now)


def test_generated_stuck_store_counts(stuck_store):
    msgs = _jsonl("dump-commitlog", "--store", stuck_store)
    newest = max(m["store_timestamp"] for m in msgs)
    for now in (newest, newest + 3_600_000):
        per_level, timer = _generated_expected(stuck_store, now)
        s = _summary(stuck_store, "--now", str(now))
        assert {lv["level"]: lv["overdue"] for lv in s["delay_levels"]} == per_level
        assert s["timer"]["behind"] == timer > 0
        assert sum(t["count"] for t in s["topics"]) == timer + sum(per_level.values())


def test_generated_stuck_store_verify_warns(stuck_store):
    msgs = _jsonl("dump-commitlog", "--store", stuck_store)
    newest = max(m["store_timestamp"] for m in msgs)
    per_level, timer = _generated_expected(stuck_store, newest - 10_000)
    r = cli("verify", "--store", stuck_store, "--format", "json")
    report = json.loads(r.stdout)
    checks = Counter(f["check"] for f in report["findings"])
    assert checks["delay.overdue"] == sum(1 for n in per_level.values() if n)
    assert checks["timer.overdue"] == (1 if timer else 0)
    assert not [f for f in report["findings"] if f["severity"] == "error"]


def test_generated_store_without_the_options_has_nothing_stuck(tmp_path):
    store = generate(
        tmp_path / "store", "--broker-version", "5", "--timer-ratio", "0.1", "--start", START, messages=400
    )
    assert not (store / "config" / "delayOffset.json").exists()
    r = cli("verify", "--store", store, "--format", "json")
    assert "overdue" not in r.stdout


def test_overdue_timer_ratio_needs_timer_messages(tmp_path):
    r = cli("generate", "--store", tmp_path / "s", "--overdue-timer-ratio", "0.5")
    assert r.exit_code == 2 and "--timer-ratio" in r.stderr


def test_a_read_time_past_undelivered_units_makes_them_passed(timer_sample, tmp_path):
    """timercheck's lastReadTimeMs moved 5 minutes on (a checkpoint saved ahead of the
    deliveries): the units it passed have no delivered copy, so they are passed (lost); the
    5 delivered before the shutdown still are not overdue."""
    store, conf, exp = timer_sample
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    cp = copy / "config" / "timercheck"
    data = bytearray(cp.read_bytes())
    read = struct.unpack_from(">q", data, 0)[0]
    struct.pack_into(">q", data, 0, read + 300_000)
    cp.write_bytes(bytes(data))
    now = read + 600_000
    rows = _jsonl("dump-timer", "--store", copy, "--broker-conf", conf, "--overdue", "--now", str(now))
    msgs = _jsonl("dump-commitlog", "--store", copy, "--broker-conf", conf)
    out = {m["uniq_key"]: int(m["properties"]["TIMER_OUT_MS"]) for m in msgs if m["topic"] == "rmq_sys_wheel_timer"}
    delivered = {
        m["uniq_key"] for m in msgs if m["topic"] != "rmq_sys_wheel_timer" and "TIMER_DEQUEUE_MS" in m["properties"]
    }
    want = {k: ("passed" if t < read + 300_000 else "behind") for k, t in out.items() if t < now and k not in delivered}
    assert {r["uniq_key"]: r["state"] for r in rows} == want
    assert Counter(want.values())["passed"] > 0 and len(delivered) == 5
    v = cli("verify", "--store", copy, "--broker-conf", conf, "--format", "json")
    checks = Counter(f["check"] for f in json.loads(v.stdout)["findings"])
    assert checks["timer.never-delivered"] == Counter(want.values())["passed"]
