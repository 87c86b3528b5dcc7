"""generate --timer-ratio writes the timer store a 5.3.3 broker leaves (HookUtils#transformTimerMessage,
TimerMessageStore#doEnqueue, #prepareTimerCheckPoint, TimerMetrics): read back by dump-timer,
by plain struct code here, and clean under verify."""

from __future__ import annotations

import json
import struct
from collections import Counter

import pytest

from tests.helpers import cli, generate, run

START = "2026-11-01T00:00:00Z"


@pytest.fixture(scope="module")
def timer_store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("gen-timer") / "store",
        "--broker-version",
        "5",
        "--timer-ratio",
        "0.3",
        "--start",
        START,
        messages=600,
    )


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_every_timer_message_has_its_unit_and_slot_TimerMessageStore_doEnqueue(timer_store):
    msgs = [m for m in _jsonl("dump-commitlog", "--store", timer_store) if m["topic"] == "rmq_sys_wheel_timer"]
    assert 120 < len(msgs) < 240
    units = _jsonl("dump-timer", "--store", timer_store, "--units")
    assert [u["commitlog_offset"] for u in units] == [m["physical_offset"] for m in msgs]
    for u, m in zip(units, msgs, strict=True):
        p = m["properties"]
        deliver = int(p["TIMER_DELIVER_MS"])
        # HookUtils#transformTimerMessage: floored to the precision, one step less when exact
        assert int(p["TIMER_OUT_MS"]) == (deliver - 1000 if deliver % 1000 == 0 else deliver // 1000 * 1000)
        assert (u["due_ms"], u["real_topic"], u["real_queue_id"], u["uniq_key"], u["message_status"], u["state"]) == (
            int(p["TIMER_OUT_MS"]),
            p["REAL_TOPIC"],
            int(p["REAL_QID"]),
            m["uniq_key"],
            "ok",
            "pending",
        )
        assert u["enqueue_time"] == m["store_timestamp"] // 1000 * 1000
    slots = _jsonl("dump-timer", "--store", timer_store)
    assert sum(s["num"] for s in slots) == len(units)
    per_time = Counter(u["due_ms"] for u in units)
    assert {s["time_ms"]: s["num"] for s in slots} == dict(per_time)


def test_the_files_read_with_plain_struct(timer_store):
    """The timer log's units chain back per slot; the checkpoint's longs say where the broker stopped."""
    log = (timer_store / "timerlog" / "00000000000000000000").read_bytes()
    units = []
    for at in range(0, len(log), 52):
        size, prev, magic, enq, delay, off, sz, h, res = struct.unpack_from(">iqiqiqiiq", log, at)
        if size == 0:
            break
        assert (size, magic, res) == (52, 1, 0) and (prev == -1 or prev < at)
        units.append((at, prev, enq + delay))
    last_in_slot = {}
    for at, prev, due in units:
        assert prev == last_in_slot.get(due, -1)
        last_in_slot[due] = at
    wheel = timer_store / "timerwheel"
    assert wheel.stat().st_size == 7 * 24 * 3600 * 2 * 32
    with open(wheel, "rb") as fh:
        for due, last in last_in_slot.items():
            fh.seek(due // 1000 % (7 * 24 * 3600 * 2) * 32)
            t, first, lastpos, num, magic = struct.unpack(">qqqii", fh.read(32))
            assert (t, lastpos) == (due // 1000, last)
    cp = struct.unpack(">7q", (timer_store / "config" / "timercheck").read_bytes()[:56])
    assert cp[1] == len(units) * 52 and cp[2] == cp[3] == len(units)
    metrics = json.loads((timer_store / "config" / "timermetrics").read_text())
    assert sum(m["count"] for m in metrics["timingCount"].values()) == len(units)


def test_verify_is_clean_and_next_delivers_in_due_order(timer_store):
    r = cli("verify", "--store", timer_store, "--format", "json")
    assert r.exit_code == 0, r.stdout
    rep = json.loads(r.stdout)
    assert rep["findings"] == [] and rep["summary"]["broker_start"]["starts"] is True
    cp = struct.unpack(">q", (timer_store / "config" / "timercheck").read_bytes()[:8])[0]
    nxt = _jsonl("dump-timer", "--store", timer_store, "--next", "10", "--now", str(cp + 1000))
    assert [d["action"] for d in nxt] == ["deliver"] * 10
    due = sorted(u["due_ms"] for u in _jsonl("dump-timer", "--store", timer_store, "--units"))
    assert [d["slot_time_ms"] for d in nxt] == due[:10]


def test_messages_not_yet_enqueued_come_first_TimerMessageStore_enqueue(timer_store, tmp_path):
    """timercheck one message behind the queue: that message is enqueued first at start."""
    import shutil

    s = tmp_path / "store"
    shutil.copytree(timer_store, s)
    p = s / "config" / "timercheck"
    data = bytearray(p.read_bytes())
    q = struct.unpack_from(">q", data, 16)[0]
    struct.pack_into(">qq", data, 16, q - 1, q - 1)
    p.write_bytes(bytes(data))
    rep = json.loads(cli("verify", "--store", s, "--format", "json").stdout)
    assert [f["check"] for f in rep["findings"]] == ["timer.not-enqueued"]
    cp = struct.unpack_from(">q", data, 0)[0]
    # #recover: min(last unit's message + 1, masterTimerQueueOffset) = q - 1
    first = _jsonl("dump-timer", "--store", s, "--next", "1", "--now", str(cp))[0]
    assert (first["source"], first["queue_offset"], first["action"]) == ("queue", q - 1, "enqueue")


def test_timer_ratio_needs_a_5x_broker(tmp_path):
    r = run("generate", "--store", tmp_path / "s", "--timer-ratio", "0.1", "--messages", "10")
    assert r.returncode == 2 and "--broker-version 5" in r.stderr.decode()


def test_timer_ratio_refused_where_the_broker_config_disables_the_wheel(tmp_path):
    """timerWheelEnable=false: the broker rejects timer messages (HookUtils#handleScheduleMessage),
    so generate refuses before writing a byte."""
    conf = tmp_path / "broker.conf"
    conf.write_text("timerWheelEnable=false\n")
    store = tmp_path / "s"
    r = run(
        "generate",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--broker-version",
        "5",
        "--timer-ratio",
        "0.1",
        "--messages",
        "10",
    )
    assert r.returncode == 2 and "timerWheelEnable=false" in r.stderr.decode()
    assert not (store / "commitlog").exists()
