"""dump-timer on the real 5.3.3 broker's timer sample (TimerWheel, TimerLog, TimerCheckpoint,
TimerMessageStore#recover/#dequeue): every field against its expected.json, and the
one-line answers for a store without timer files."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli, run

#: A start time after the sample's shutdown (its checkpoint's read time + 8 s): --next and
#: --summary do not depend on today's clock.
NOW = "1795510300000"


@pytest.fixture(scope="module")
def timer_sample(sample_tarball):
    d = sample_tarball("timer")
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text(encoding="utf-8"))


def _jsonl(*args) -> list[dict]:
    r = cli("dump-timer", *args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_summary_is_the_brokers_checkpoint_and_wheel_TimerCheckpoint_TimerWheel(timer_sample):
    store, conf, exp = timer_sample
    r = cli("dump-timer", "--store", store, "--broker-conf", conf, "--summary", "--now", NOW, "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)
    want = {k: v for k, v in exp["timerCheckpoint"].items() if k != "path"}
    assert s["checkpoint"] == want
    assert s["wheel"] == exp["timerWheel"]
    assert s["timer_log_files"] == exp["timerLogFiles"]
    assert s["units"] == exp["counts"]["timerPut"]
    assert s["log_end"] == {
        "offset": exp["timerCheckpoint"]["lastTimerLogFlushPos"],
        "reason": "end",
        "file": exp["timerLogFiles"][0]["name"],
    }
    # TimerMessageStore#recover: the last unit's message is queue offset 99, so the enqueue resumes at 100
    assert s["recovery"]["queue_offset"] == exp["timerCheckpoint"]["lastTimerQueueOffset"]
    q = next(q for q in exp["consumeQueues"] if q["topic"] == "rmq_sys_wheel_timer")
    assert (s["recovery"]["queue_min"], s["recovery"]["queue_max"]) == (q["minOffset"], q["maxOffset"])
    assert s["recovery"]["read_time_ms"] == exp["timerCheckpoint"]["lastReadTimeMs"]


def test_summary_without_broker_conf_infers_the_timer_log_size(timer_sample):
    store, _, exp = timer_sample
    r = cli("dump-timer", "--store", store, "--summary", "--now", NOW, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["timer_log_files"] == exp["timerLogFiles"]


def test_pending_samples_and_their_slots_TimerMessageStore_doEnqueue(timer_sample):
    store, conf, exp = timer_sample
    units = {u["commitlog_offset"]: u for u in _jsonl("--store", store, "--broker-conf", conf, "--units")}
    slots = {s["time_ms"]: s for s in _jsonl("--store", store, "--broker-conf", conf)}
    assert len(units) == exp["counts"]["timerPut"]
    assert sum(u["state"] == "pending" for u in units.values()) == exp["counts"]["pending"]
    assert all(u["message_status"] == "ok" and u["topic"] == "rmq_sys_wheel_timer" for u in units.values())
    for p in exp["pendingSamples"]:
        u = units[p["timerTopicCommitLogOffset"]]
        assert (u["real_topic"], u["real_queue_id"], u["due_ms"], u["uniq_key"], u["timer_out_ms"]) == (
            p["realTopic"],
            p["realQueueId"],
            p["deliverMs"],
            p["uniqKey"],
            p["deliverMs"],
        )
        assert u["state"] == "pending"
        s = slots[p["slot"]["timeMs"]]
        assert {k: s[k] for k in ("first_pos", "last_pos", "num", "magic")} == {
            "first_pos": p["slot"]["firstPos"],
            "last_pos": p["slot"]["lastPos"],
            "num": p["slot"]["num"],
            "magic": p["slot"]["magic"],
        }
        assert s["state"] == "pending" and s["first_pos"] == u["pos"]
    passed = [s for s in slots.values() if s["state"] == "passed"]
    assert len(passed) == exp["counts"]["deliveredBeforeShutdown"]


def test_due_time_and_topic_filters(timer_sample):
    store, conf, exp = timer_sample
    first, last = exp["pendingSamples"][0]["deliverMs"], exp["pendingSamples"][2]["deliverMs"]
    got = _jsonl("--store", store, "--units", "--begin", str(first), "--end", str(last), "--topic", "DelayTopic")
    assert [u["due_ms"] for u in got] == sorted(u["due_ms"] for u in got)
    assert all(first <= u["due_ms"] <= last for u in got) and len(got) >= 3
    slots = _jsonl("--store", store, "--begin", str(first), "--end", str(first))
    assert [s["time_ms"] for s in slots] == [first]
    r = cli("dump-timer", "--store", store, "--units", "--topic", "PlainTopic")
    assert r.exit_code == 1 and "no timer slot, unit or message matched" in r.stderr


def test_next_is_the_dequeue_order_from_the_checkpoint_TimerMessageStore_dequeue(timer_sample):
    store, conf, exp = timer_sample
    got = _jsonl("--store", store, "--broker-conf", conf, "--next", "5", "--now", NOW)
    assert len(got) == 5
    assert all(d["action"] == "deliver" and d["source"] == "wheel" for d in got)
    read = exp["timerCheckpoint"]["lastReadTimeMs"]
    times = [d["slot_time_ms"] for d in got]
    assert times == sorted(times) and times[0] >= read
    pending = sorted(u["due_ms"] for u in _jsonl("--store", store, "--units") if u["state"] == "pending")
    assert times == pending[:5]


def test_verify_is_clean_on_the_sample(timer_sample):
    store, conf, _ = timer_sample
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    assert r.exit_code == 0, r.stdout
    rep = json.loads(r.stdout)
    assert [f for f in rep["findings"] if f["check"].startswith("timer.")] == []


def test_a_49_store_has_no_timer(small_store_master):
    r = run("dump-timer", "--store", small_store_master)
    assert r.returncode == 1
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "no timer files" in err


@pytest.mark.slow
def test_options_that_do_not_go_together(timer_sample):
    store, _, _ = timer_sample
    for args in (["--units", "--summary"], ["--topic", "X"], ["--begin", "+1h", "--end", "-1h"]):
        r = run("dump-timer", "--store", store, *args)
        assert r.returncode == 2, args
        assert r.stderr.decode().count("\n") == 1


def test_next_is_a_flag_capped_by_limit_and_the_old_count_still_works(timer_sample):
    store, conf, _ = timer_sample
    fresh = cli("dump-timer", "--store", store, "--broker-conf", conf, "--next", "--limit", "5", "--now", NOW)
    aged = cli("dump-timer", "--store", store, "--broker-conf", conf, "--next", "5", "--now", NOW)
    assert fresh.exit_code == aged.exit_code == 0, aged.stderr
    assert aged.stdout == fresh.stdout and fresh.stdout.count("\n") == 5 + 2  # title, header, 5 rows
    assert "--next N is deprecated; use --next --limit N" in aged.stderr and "deprecated" not in fresh.stderr
    r = cli("dump-timer", "--store", store, "--next", "x")
    assert r.exit_code == 2 and "unexpected argument 'x'" in r.stderr


def test_begin_now_is_read_against_now(timer_sample):
    """--begin now means --now, not the clock: the pending units due from the first one's time on."""
    store, conf, exp = timer_sample
    due = sorted(p["deliverMs"] for p in exp["pendingSamples"])
    got = _jsonl("--store", store, "--broker-conf", conf, "--units", "--begin", "now", "--now", str(due[0]))
    assert got and min(u["due_ms"] for u in got) >= due[0]
    assert {u["due_ms"] for u in got} >= set(due)
    late = cli("dump-timer", "--store", store, "--units", "--begin", "-1h", "--now", str(due[-1] + 7_200_000))
    assert late.exit_code == 1 and late.stdout == ""
