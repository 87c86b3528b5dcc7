"""The timer store's owners and verify's timer.* checks: a store written by independent
struct code from the documented layout (Slot, TimerLog#append, TimerCheckpoint#flush), and
damaged copies of the real 5.3.3 sample (truncated log, slot past the log, wrong wheel size,
checkpoint ahead, a unit pointing past the commit log, a torn checkpoint)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from tests.helpers import cli, run, writable_copy

NOW = "1795510300000"
SLOTS_TOTAL = 7 * 24 * 3600  # TimerMessageStore.TIMER_WHEEL_TTL_DAY * DAY_SECS
WHEEL_SIZE = SLOTS_TOTAL * 2 * 32


def java_hash(s: str) -> int:
    """String#hashCode, written here on its own (not the project's javahash)."""
    h = 0
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    for u in units:
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.fixture(scope="module")
def sample(sample_tarball):
    d = sample_tarball("timer")
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def copy(sample, tmp_path) -> Path:
    return writable_copy(sample[0], tmp_path / "store")


def _verify(store: Path, conf: Path) -> dict:
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    return json.loads(r.stdout)


def _timer_findings(rep: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in rep["findings"]:
        if f["check"].startswith("timer."):
            out.setdefault(f["check"], []).append(f)
    return out


# ------------------------------------------------------------------ independent writer
def _cq_sizes(store: Path) -> dict[int, int]:
    """The rmq_sys_wheel_timer queue's units read with plain struct (8-byte offset, 4-byte size)."""
    data = (store / "consumequeue" / "rmq_sys_wheel_timer" / "0" / "00000000000000000000").read_bytes()
    out = {}
    for i in range(0, len(data) - 19, 20):
        off, size, _tags = struct.unpack_from(">qiq", data, i)
        if size <= 0:
            break
        out[off] = size
    return out


def _write_independent_timer(store: Path, samples: list[dict], read_ms: int, enqueue_ms: int) -> list[int]:
    """timerlog/, timerwheel and config/timercheck for ``samples`` as 5.3.3 writes them,
    one message a slot: unit = size, prevPos -1, magic 1, enqueue time, delay, offsetPy,
    sizePy, hash of the real topic, 0; slot = time/1000, first, last, num 1, magic 0."""
    sizes = _cq_sizes(store)
    log = bytearray(8192)
    wheel_slots = []
    positions = []
    for i, p in enumerate(samples):
        pos = i * 52
        struct.pack_into(
            ">iqiqiqiiq",
            log,
            pos,
            52,
            -1,
            1,
            enqueue_ms,
            p["deliverMs"] - enqueue_ms,
            p["timerTopicCommitLogOffset"],
            sizes[p["timerTopicCommitLogOffset"]],
            java_hash(p["realTopic"]),
            0,
        )
        wheel_slots.append((p["deliverMs"] // 1000 % (SLOTS_TOTAL * 2), p["deliverMs"] // 1000, pos))
        positions.append(pos)
    (store / "timerlog" / "00000000000000000000").write_bytes(bytes(log))
    with open(store / "timerwheel", "wb") as fh:
        fh.truncate(WHEEL_SIZE)
        for index, t, pos in wheel_slots:
            fh.seek(index * 32)
            fh.write(struct.pack(">qqqii", t, pos, pos, 1, 0))
    cp = struct.pack(">7q", read_ms, len(samples) * 52, 100, 100, 0, read_ms, 1).ljust(4096, b"\0")
    (store / "config" / "timercheck").write_bytes(cp)
    (store / "config" / "timermetrics").unlink()
    (store / "config" / "timermetrics.bak").unlink()
    return positions


def test_a_timer_store_written_by_independent_code_reads_back(sample, copy):
    _, conf, exp = sample
    read = exp["timerCheckpoint"]["lastReadTimeMs"]
    positions = _write_independent_timer(copy, exp["pendingSamples"], read, read - 10_000)
    r = cli("dump-timer", "--store", copy, "--broker-conf", conf, "--units", "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    units = [json.loads(x) for x in r.stdout.splitlines()]
    assert [u["pos"] for u in units] == positions
    for u, p in zip(units, exp["pendingSamples"], strict=True):
        assert (
            u["commitlog_offset"],
            u["real_topic"],
            u["real_queue_id"],
            u["due_ms"],
            u["uniq_key"],
            u["message_status"],
            u["state"],
        ) == (
            p["timerTopicCommitLogOffset"],
            p["realTopic"],
            p["realQueueId"],
            p["deliverMs"],
            p["uniqKey"],
            "ok",
            "pending",
        )
    r = cli("dump-timer", "--store", copy, "--broker-conf", conf, "--format", "jsonl")
    slots = [json.loads(x) for x in r.stdout.splitlines()]
    assert [(s["time_ms"], s["first_pos"], s["last_pos"], s["num"]) for s in slots] == [
        (p["deliverMs"], pos, pos, 1) for p, pos in zip(exp["pendingSamples"], positions, strict=True)
    ]
    found = _timer_findings(_verify(copy, conf))
    # the last unit's message is not the queue's last: #recover re-enqueues the ones after it
    assert set(found) == {"timer.redelivery"}, found
    assert found["timer.redelivery"][0]["file"] == "config/timercheck"


# ------------------------------------------------------------------ damaged copies
def test_truncated_timer_log(sample, copy):
    _, conf, _ = sample
    log = copy / "timerlog" / "00000000000000000000"
    with open(log, "r+b") as fh:
        fh.truncate(52 * 50)
    found = _timer_findings(_verify(copy, conf))
    assert {"timer.log-file-size", "timer.slot-past-log", "timer.checkpoint-ahead", "timer.redelivery"} <= set(found)
    assert found["timer.checkpoint-ahead"][0]["offset"] == 8
    assert "about 50 units are gone" in found["timer.checkpoint-ahead"][0]["detail"]


def test_damaged_unit_ends_the_log_TimerMessageStore_recoverAndRevise(sample, copy):
    _, conf, _ = sample
    log = copy / "timerlog" / "00000000000000000000"
    with open(log, "r+b") as fh:
        fh.seek(52 * 60 + 12)  # the magic of unit 60
        fh.write(struct.pack(">i", 0x100))
    found = _timer_findings(_verify(copy, conf))
    (f,) = found["timer.log-truncate"]
    assert (f["file"], f["offset"]) == ("timerlog/00000000000000000000", 52 * 60)
    assert "timer.slot-past-log" in found and "timer.checkpoint-ahead" in found
    r = cli("dump-timer", "--store", copy, "--summary", "--now", NOW, "--format", "json")
    s = json.loads(r.stdout)
    assert s["log_end"]["offset"] == 52 * 60 and "magic" in s["log_end"]["reason"]
    assert s["units"] == 60


def test_slot_damage_in_the_recovered_range_is_relinked_TimerMessageStore_recoverAndRevise(sample, copy):
    """One timer-log file: #recover re-revises every slot from it, so a wrong lastPos is repaired."""
    _, conf, exp = sample
    p = exp["pendingSamples"][3]
    index = p["deliverMs"] // 1000 % (SLOTS_TOTAL * 2)
    with open(copy / "timerwheel", "r+b") as fh:
        fh.seek(index * 32 + 16)
        fh.write(struct.pack(">q", 1 << 20))  # lastPos
    found = _timer_findings(_verify(copy, conf))
    assert list(found) == ["timer.slot-revised"]
    (f,) = found["timer.slot-revised"]
    assert (f["file"], f["offset"], f["severity"]) == ("timerwheel", index * 32, "warning")
    assert f"lastPos {1 << 20}, the log's last unit of that time is at {p['slot']['lastPos']}" in f["detail"]
    nxt = cli("dump-timer", "--store", copy, "--next", "100", "--now", NOW, "--format", "jsonl").stdout
    assert p["uniqKey"] in nxt  # delivered after the repair


@pytest.fixture(scope="module")
def multi_file(tmp_path_factory):
    """A generated 5.x store whose timer log spans many 1040-byte files (19 units each)."""
    from tests.helpers import generate

    d = tmp_path_factory.mktemp("multi")
    conf = d / "broker.conf"
    conf.write_text("mappedFileSizeTimerLog=1040\n")
    store = generate(
        d / "store", "--broker-version", "5", "--timer-ratio", "0.5", "--broker-conf", str(conf), messages=400
    )
    return store, conf


def _old_single_unit_slot(store: Path, conf: Path) -> tuple[dict, int]:
    """A pending slot with one unit, in a file before the ones #recover re-revises."""
    units = [
        json.loads(x)
        for x in cli(
            "dump-timer", "--store", store, "--broker-conf", conf, "--units", "--format", "jsonl"
        ).stdout.splitlines()
    ]
    slots = {
        s["time_ms"]: s
        for s in (
            json.loads(x)
            for x in cli("dump-timer", "--store", store, "--broker-conf", conf, "--format", "jsonl").stdout.splitlines()
        )
    }
    flush = struct.unpack(">q", (store / "config" / "timercheck").read_bytes()[8:16])[0]
    u = next(u for u in units if u["pos"] < flush - 3 * 1040 and slots[u["due_ms"]]["num"] == 1)
    return u, u["due_ms"] // 1000 % (SLOTS_TOTAL * 2)


def test_slot_pointing_past_the_log(multi_file, tmp_path):
    store, conf = multi_file
    copy = writable_copy(store, tmp_path / "s")
    u, index = _old_single_unit_slot(copy, conf)
    with open(copy / "timerwheel", "r+b") as fh:
        fh.seek(index * 32 + 8)
        fh.write(struct.pack(">qq", 1 << 30, 1 << 30))  # firstPos, lastPos
    found = _timer_findings(_verify(copy, conf))
    (f,) = found["timer.slot-past-log"]
    assert (f["file"], f["offset"]) == ("timerwheel", index * 32)
    (g,) = found["timer.unit-unreachable"]  # its unit is on no slot's chain any more: never delivered
    assert (g["file"], g["offset"]) == (f"timerlog/{u['pos'] // 1040 * 1040:020d}", u["pos"] % 1040)
    assert set(found) == {"timer.slot-past-log", "timer.unit-unreachable"}


def test_slot_chain_that_leaves_its_slot(multi_file, tmp_path):
    store, conf = multi_file
    copy = writable_copy(store, tmp_path / "s")
    u, index = _old_single_unit_slot(copy, conf)
    other = u["pos"] + 52 if (u["pos"] + 52) % 1040 < 988 else u["pos"] - 52
    with open(copy / "timerwheel", "r+b") as fh:
        fh.seek(index * 32 + 16)
        fh.write(struct.pack(">q", other))
    found = _timer_findings(_verify(copy, conf))
    (f,) = found["timer.slot-chain"]
    assert "not in this slot" in f["detail"] and f["offset"] == index * 32
    assert [g["offset"] for g in found["timer.unit-unreachable"]] == [u["pos"] % 1040]


def test_generated_multi_file_timer_log_is_clean(multi_file):
    store, conf = multi_file
    rep = _verify(store, conf)
    assert rep["findings"] == []
    assert len(list((store / "timerlog").iterdir())) > 5


def test_wrong_wheel_size_TimerWheel(sample, copy):
    _, conf, _ = sample
    with open(copy / "timerwheel", "r+b") as fh:
        fh.truncate(WHEEL_SIZE - 32)
    rep = _verify(copy, conf)
    found = _timer_findings(rep)
    assert list(found) == ["timer.wheel-size"]
    start = rep["summary"]["broker_start"]
    assert start["starts"] is False and [r["file"] for r in start["reasons"]] == ["timerwheel"]
    r = run("dump-timer", "--store", copy)
    assert r.returncode == 3
    err = r.stderr.decode()
    assert err.count("\n") == 1 and "timer wheel has 38707168 bytes, expected 38707200" in err


def test_checkpoint_ahead_of_the_log(sample, copy):
    _, conf, _ = sample
    with open(copy / "config" / "timercheck", "r+b") as fh:
        fh.seek(8)
        fh.write(struct.pack(">q", 5200 + 52 * 4))
    found = _timer_findings(_verify(copy, conf))
    assert list(found) == ["timer.checkpoint-ahead"]
    assert "about 4 units are gone" in found["timer.checkpoint-ahead"][0]["detail"]


def test_checkpoint_queue_offset_past_the_queue_apache_rocketmq_7480(sample, copy):
    _, conf, _ = sample
    with open(copy / "config" / "timercheck", "r+b") as fh:
        fh.seek(16)
        fh.write(struct.pack(">qq", 130, 130))
    found = _timer_findings(_verify(copy, conf))
    assert list(found) == ["timer.checkpoint-queue"]


def test_unit_pointing_past_the_commit_log_apache_rocketmq_10668(sample, copy):
    _, conf, exp = sample
    pos = exp["pendingSamples"][5]["slot"]["firstPos"]
    with open(copy / "timerlog" / "00000000000000000000", "r+b") as fh:
        fh.seek(pos + 28)  # offsetPy (TimerLog.UNIT_PRE_SIZE_FOR_MSG)
        fh.write(struct.pack(">q", 900_000))
    found = _timer_findings(_verify(copy, conf))
    (f,) = found["timer.unit-target"]
    assert f["offset"] == pos and "past the commit log's end" in f["detail"]
    r = cli("dump-timer", "--store", copy, "--next", "100", "--now", NOW, "--format", "jsonl")
    stuck = [json.loads(x) for x in r.stdout.splitlines() if '"stuck"' in x or '"skip"' in x]
    assert [d["commitlog_offset"] for d in stuck] == [900_000]


def test_unit_pointing_at_a_message_of_another_topic(sample, copy):
    _, conf, exp = sample
    pos = exp["pendingSamples"][2]["slot"]["firstPos"]
    plain = next(
        u
        for u in json.loads(
            cli("dump-cq", "PlainTopic", "0", "--store", copy, "--limit", "1", "--format", "json").stdout
        )
    )
    with open(copy / "timerlog" / "00000000000000000000", "r+b") as fh:
        fh.seek(pos + 28)
        fh.write(struct.pack(">qi", plain["commitlog_offset"], plain["size"]))
    found = _timer_findings(_verify(copy, conf))
    (f,) = found["timer.unit-target"]
    assert "PlainTopic" in f["detail"]


def test_torn_checkpoint_is_a_finding_and_a_one_line_error(sample, copy):
    _, conf, _ = sample
    (copy / "config" / "timercheck").write_bytes(b"\0" * 10)
    found = _timer_findings(_verify(copy, conf))
    assert list(found) == ["timer.unreadable"]
    assert found["timer.unreadable"][0]["file"] == "config/timercheck"
    r = run("dump-timer", "--store", copy, "--summary")
    assert r.returncode == 3 and r.stderr.decode().count("\n") == 1
    assert "fewer than its 32 bytes" in r.stderr.decode()


def test_timer_log_that_is_a_directory(sample, copy):
    _, conf, _ = sample
    os.remove(copy / "timerlog" / "00000000000000000000")
    (copy / "timerlog" / "00000000000000000000").mkdir()
    rep = _verify(copy, conf)
    assert [f["file"] for f in rep["findings"] if f["check"] == "store.not-regular"] == [
        "timerlog/00000000000000000000"
    ]
    r = run("dump-timer", "--store", copy, "--units")
    assert r.returncode in (1, 3) and r.stderr.decode().count("\n") == 1


def test_a_49_store_has_no_timer_findings(small_store_master):
    rep = json.loads(cli("verify", "--store", small_store_master, "--format", "json").stdout)
    assert _timer_findings(rep) == {}


def test_missing_wheel_is_rebuilt_by_recovery_from_a_one_file_log(sample, copy):
    """No timerwheel: TimerWheel creates an empty one; #recover re-links every slot of the
    (one-file) log, so each pending slot is a timer.slot-revised warning, no error; the re-made
    slots keep num 0 (TimerWheel#putSlot's three-argument form writes no num): slot-count."""
    _, conf, exp = sample
    os.remove(copy / "timerwheel")
    rep = _verify(copy, conf)
    found = _timer_findings(rep)
    assert set(found) == {"timer.slot-revised", "timer.slot-count"} and rep["summary"]["errors"] == 0
    assert len(found["timer.slot-revised"]) == len(found["timer.slot-count"]) == exp["counts"]["pending"]
    assert "says num 0, its chain holds 1" in found["timer.slot-count"][0]["detail"]
    r = run("dump-timer", "--store", copy, "--next", "1", "--now", NOW, "--format", "jsonl")
    assert r.returncode == 0 and "no timerwheel" in r.stderr.decode()
    assert json.loads(r.stdout)["action"] == "deliver"


def test_decomposed_verify_has_the_same_timer_findings(sample, copy):
    """pipeline/verify_tasks.py runs the timer checks on the driver: the same findings as Verifier.run."""
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    with open(copy / "config" / "timercheck", "r+b") as fh:
        fh.seek(8)
        fh.write(struct.pack(">q", 5200 + 52 * 4))
    specs = store_specs([str(copy)], str(sample[1]), {})
    want = [verify_store(s, True, False, None) for s in specs]
    got = verify_stores(specs, True, False, None)
    assert [f["check"] for f in want[0]["findings"]] == ["timer.checkpoint-ahead"]
    assert sorted(json.dumps(f, sort_keys=True) for f in got[0]["findings"]) == sorted(
        json.dumps(f, sort_keys=True) for f in want[0]["findings"]
    )
    assert got[0]["summary"] == want[0]["summary"]


@pytest.mark.slow
def test_hostile_units_slots_and_checkpoint_give_findings_not_tracebacks(sample, copy):
    """Random but well-framed units (any prevPos, offsets, sizes, hashes), random slots and an
    absurd timercheck: verify reports, every dump-timer mode answers, nothing hangs."""
    import random

    r = random.Random(5)
    p = copy / "timerlog" / "00000000000000000000"
    d = bytearray(p.read_bytes())
    for i in range(100):
        at = i * 52
        struct.pack_into(
            ">iqiqiqiiq",
            d,
            at,
            52,
            r.choice([-1, r.randrange(-(10**12), 10**12), at, at + 52]),
            r.randrange(16),
            r.randrange(-(2**63), 2**63),
            r.randrange(-(2**31), 2**31),
            r.randrange(-(2**63), 2**63),
            r.randrange(-(2**31), 2**31),
            r.randrange(-(2**31), 2**31),
            0,
        )
    p.write_bytes(bytes(d))
    with open(copy / "timerwheel", "r+b") as fh:
        for _ in range(2000):
            fh.seek(r.randrange(WHEEL_SIZE // 32) * 32)
            fh.write(r.randbytes(32))
    with open(copy / "config" / "timercheck", "r+b") as fh:
        fh.write(struct.pack(">4q", 2**62, -5, 2**62, -7))
    r1 = run("verify", "--store", copy, "--format", "jsonl")
    assert r1.returncode == 1 and b"Traceback" not in r1.stderr
    checks = {json.loads(x).get("check") for x in r1.stdout.splitlines()}
    assert {"timer.unit-target", "timer.slot-chain", "timer.checkpoint-queue"} <= checks
    for args in ([], ["--units"], ["--next", "50"], ["--summary"]):
        r2 = run("dump-timer", "--store", copy, *args, "--now", NOW, "--format", "jsonl")
        assert r2.returncode == 0 and b"Traceback" not in r2.stderr, (args, r2.stderr)


def _set_read_time(store: Path, ms: int) -> None:
    with open(store / "config" / "timercheck", "r+b") as fh:
        fh.write(struct.pack(">q", ms))


def test_read_time_behind_the_delivered_slots_delivers_them_twice(sample, copy):
    """timercheck's lastReadTimeMs before the 5 slots the broker had already dequeued: their
    copies (TIMER_DEQUEUE_MS under DelayTopic) exist, and the dequeue runs them again."""
    _, conf, exp = sample
    _set_read_time(copy, exp["timerCheckpoint"]["lastReadTimeMs"] - 60_000)
    found = _timer_findings(_verify(copy, conf))
    assert set(found) == {"timer.delivered-twice", "timer.metrics"}  # 100 pending now, timermetrics says 95
    assert len(found["timer.delivered-twice"]) == exp["counts"]["deliveredBeforeShutdown"]


def test_read_time_past_undelivered_slots_loses_them(sample, copy):
    """lastReadTimeMs moved past three pending slots that were never dequeued: lost."""
    _, conf, exp = sample
    units = [
        json.loads(x) for x in cli("dump-timer", "--store", copy, "--units", "--format", "jsonl").stdout.splitlines()
    ]
    pending = sorted(u["due_ms"] for u in units if u["state"] == "pending")
    _set_read_time(copy, pending[2] + 1000)
    found = _timer_findings(_verify(copy, conf))
    assert set(found) == {"timer.never-delivered", "timer.metrics"}
    assert (
        sorted(int(f["detail"].split("due ")[1].split(",")[0]) for f in found["timer.never-delivered"]) == pending[:3]
    )
