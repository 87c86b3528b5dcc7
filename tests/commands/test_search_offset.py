"""search-offset: the first unit stored at or after a time, and the broker's own answers
(``ConsumeQueue#getOffsetInQueueByTime`` of 4.9.7 and 5.3.3), checked against answers
computed here, independently, from the fixtures' expected.json and from dump-cq."""

from __future__ import annotations

import json
import os
from itertools import pairwise
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, fixture_dir, run, writable_copy

TOPICS = ("AuditTopic", "PaymentTopic", "%RETRY%cg-sample")


def _queues(expected: dict, topic: str) -> dict[int, list[tuple[int, int]]]:
    """queue id -> [(cq_offset, store_timestamp)] of the live units, from expected.json."""
    ts = {m["physical_offset"]: m["store_timestamp"] for m in expected["messages"]}
    out = {}
    for q in expected["consume_queues"].values():
        if q["topic"] == topic and q["exists_on_disk"]:
            out[q["queue_id"]] = [(u[0], ts[u[1]]) for u in q["units"] if q["min_offset"] <= u[0] < q["max_offset"]]
    return out


def _times(units: list[tuple[int, int]]) -> list[int]:
    """Before the first, exact store times (a duplicated one included), between, after the last."""
    t = [x for _, x in units]
    dup = next((a for a, b in pairwise(t) if a == b), t[len(t) // 2])
    return sorted({t[0] - 1000, t[0], dup, t[len(t) // 3] + 1, t[len(t) // 2], t[-1], t[-1] + 1, t[-1] + 60_000})


def _first(units, when, max_offset):
    return next(((o, x) for o, x in units if x >= when), (max_offset, None))


def _search(store: Path, conf: Path, topic: str, when: int, *extra: str) -> dict[int, dict]:
    r = cli(
        "search-offset",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--topic",
        topic,
        "--time",
        str(when),
        "--format",
        "jsonl",
        *extra,
    )
    assert r.exit_code == 0, r.stderr
    return {d["queue_id"]: d for d in map(json.loads, r.stdout.splitlines())}


def _max(expected, topic, qid):
    return next(
        q["max_offset"] for q in expected["consume_queues"].values() if q["topic"] == topic and q["queue_id"] == qid
    )


@pytest.mark.parametrize("topic", TOPICS)
def test_first_at_or_after_on_real_broker_stores(fixture, topic):
    store, conf, expected = fixture
    for qid, units in _queues(expected, topic).items():
        mx = _max(expected, topic, qid)
        for when in _times(units):
            got = _search(store, conf, topic, when, "--queue-id", str(qid))[qid]
            off, ts = _first(units, when, mx)
            assert (got["offset"], got["store_timestamp"]) == (off, ts), (topic, qid, when)
            assert got["max_offset"] == mx and got["method"] == "first"


@pytest.mark.slow
@pytest.mark.parametrize("topic", TOPICS)
def test_scan_agrees_with_the_search(fixture, topic):
    store, conf, expected = fixture
    for qid, units in _queues(expected, topic).items():
        for when in _times(units):
            a = _search(store, conf, topic, when, "--queue-id", str(qid))[qid]
            b = _search(store, conf, topic, when, "--queue-id", str(qid), "--scan")[qid]
            assert (a["offset"], a["store_timestamp"]) == (b["offset"], b["store_timestamp"])


@pytest.mark.parametrize("topic", TOPICS)
def test_broker_5_lower_and_upper_ConsumeQueue_getOffsetInQueueByTime_BoundaryType(fixture, topic):
    """5.3.3: LOWER = the first unit at or after T (max if none: the ceiling branch);
    UPPER = the last unit at or before T (min if none: no file starts before T → 0, clamped)."""
    store, conf, expected = fixture
    for qid, units in _queues(expected, topic).items():
        mx = _max(expected, topic, qid)
        for when in _times(units):
            lower = _search(store, conf, topic, when, "--broker", "--broker-version", "5")[qid]
            assert lower["offset"] == _first(units, when, mx)[0], (topic, qid, when)
            upper = _search(store, conf, topic, when, "--broker", "--broker-version", "5", "--boundary", "upper")[qid]
            before = [o for o, x in units if x <= when]
            assert upper["offset"] == (before[-1] if before else units[0][0]), (topic, qid, when)
            assert lower["method"] == "broker-5-lower" and upper["method"] == "broker-5-upper"


@pytest.mark.parametrize("topic", ("AuditTopic", "PaymentTopic"))
def test_broker_49_MappedFileQueue_getMappedFileByTime_and_nearest_unit(fixture, topic, tmp_path):
    """4.9.7: the CQ file is the first whose mtime >= T (else the last); inside it an exact
    match, else the nearer neighbour (ties to the older one), no clamping to the max."""
    store, conf, expected = fixture
    store = writable_copy(store, tmp_path / "store")
    queues = _queues(expected, topic)
    files = {}  # (qid, file start unit) -> mtime: the store time of the file's last unit, as if just written
    for qid, units in queues.items():
        for name in sorted(os.listdir(store / "consumequeue" / topic / str(qid))):
            first = int(name) // 20
            in_file = [x for o, x in units if first <= o < first + 100]
            mtime = in_file[-1]
            os.utime(store / "consumequeue" / topic / str(qid) / name, ns=(mtime * 10**6, mtime * 10**6))
            files[qid, first] = mtime
    for qid, units in queues.items():
        starts = sorted(f for q, f in files if q == qid)
        for when in _times(units):
            got = _search(store, conf, topic, when, "--broker", "--broker-version", "4.9")[qid]
            chosen = next((f for f in starts if files[qid, f] >= when), starts[-1])
            in_file = [(o, x) for o, x in units if chosen <= o < chosen + 100]
            if any(x == when for _, x in in_file):
                assert got["store_timestamp"] == when, (topic, qid, when)
                continue
            left = [(o, x) for o, x in in_file if x < when]
            right = [(o, x) for o, x in in_file if x > when]
            if not left:
                want = right[0][0]
            elif not right:
                want = left[-1][0]
            else:
                want = right[0][0] if abs(when - left[-1][1]) > abs(when - right[0][1]) else left[-1][0]
            assert got["offset"] == want, (topic, qid, when, got)


def test_broker_49_after_the_last_message_is_a_unit_not_max(tmp_path):
    """The differences that matter when rewinding: 4.9.x answers the last unit before T, not
    the max offset, and from the file its mtime picks (a copied store's mtimes are the copy's)."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    expected = json.loads((d / "expected.json").read_text())
    units = _queues(expected, "AuditTopic")[0]
    when = units[-1][1] + 3_600_000
    qdir = store / "consumequeue" / "AuditTopic" / "0"
    for name in os.listdir(qdir):  # both files modified after T (as by a copy): the first file wins
        os.utime(qdir / name)
    got = _search(store, d / "broker.conf", "AuditTopic", when, "--broker", "--broker-version", "4.9")[0]
    assert got["offset"] == 99 and "00000000000000000000 chosen by its mtime" in got["note"]
    for name, unit in (("00000000000000000000", 99), ("00000000000000002000", 107)):  # as written
        t = units[unit][1] * 10**6
        os.utime(qdir / name, ns=(t, t))
    got = _search(store, d / "broker.conf", "AuditTopic", when, "--broker", "--broker-version", "4.9")[0]
    assert got["offset"] == units[-1][0] == 107
    mine = _search(store, d / "broker.conf", "AuditTopic", when)[0]
    assert mine["offset"] == 108 and mine["store_timestamp"] is None
    five = _search(store, d / "broker.conf", "AuditTopic", when, "--broker", "--broker-version", "5")[0]
    assert five["offset"] == 108


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("gen") / "store"
    r = cli("generate", "--store", store, "--messages", "3000", *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr
    return store


def _dump_units(store: Path, topic: str, qid: int) -> list[tuple[int, int]]:
    r = cli("dump-cq", topic, str(qid), "--store", store, *SMALL[:4], "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [(d["cq_offset"], d["store_timestamp"]) for d in map(json.loads, r.stdout.splitlines())]


@pytest.mark.slow
def test_generated_store_every_queue_of_a_topic(generated):
    r = cli("dump-cq", "--summary", "--store", generated, *SMALL[:4], "--format", "jsonl")
    summary = [json.loads(x) for x in r.stdout.splitlines()]
    big = max(summary, key=lambda d: d["max_offset"])
    topic = big["topic"]
    assert big["max_offset"] > 100  # several CQ files
    queues = {d["queue_id"]: d["max_offset"] for d in summary if d["topic"] == topic}
    all_units = {q: _dump_units(generated, topic, q) for q in queues}
    times = _times(all_units[big["queue_id"]])
    for when in times:
        r = cli(
            "search-offset",
            "--store",
            generated,
            *SMALL[:4],
            "--topic",
            topic,
            "--time",
            str(when),
            "--format",
            "jsonl",
        )
        assert r.exit_code == 0, r.stderr
        got = {d["queue_id"]: d for d in map(json.loads, r.stdout.splitlines())}
        assert set(got) == set(queues)
        for q, units in all_units.items():
            assert (got[q]["offset"], got[q]["store_timestamp"]) == _first(units, when, queues[q]), (q, when)


def test_expired_units_are_below_min_and_never_the_answer(tmp_path):
    """Units whose commit-log file is gone: the broker's minLogicOffset (ConsumeQueue#correctMinOffset)
    is the first unit still in the log; a time before everything answers it."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    (store / "commitlog" / "00000000000000000000").unlink()
    expected = json.loads((d / "expected.json").read_text())
    q = expected["consume_queues"]["AuditTopic/0"]
    live = [u[0] for u in q["units"] if u[1] >= 65536]
    for extra in ((), ("--broker", "--broker-version", "5")):
        got = _search(store, d / "broker.conf", "AuditTopic", 0, *extra)[0]
        assert got["min_offset"] == live[0] > 0
        assert got["offset"] == live[0], extra


def test_queue_whose_every_unit_expired_answers_max(tmp_path):
    """SCHEDULE_TOPIC_XXXX/17's one unit lies in commit-log file 3: with files 0-3 gone the
    queue holds nothing readable; min = max as 5.x's ConsumeQueue#correctMinOffset sets it."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    for i in range(4):
        (store / "commitlog" / f"{i * 65536:020d}").unlink()
    for extra in ((), ("--scan",), ("--broker", "--broker-version", "5")):
        got = _search(store, d / "broker.conf", "SCHEDULE_TOPIC_XXXX", 0, "--queue-id", "17", *extra)[17]
        assert (got["offset"], got["min_offset"], got["max_offset"], got["store_timestamp"]) == (1, 1, 1, None), extra


def test_unreadable_message_takes_the_next_readable_time(tmp_path):
    """A unit whose record is damaged is not skipped: it counts with the next readable unit."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    expected = json.loads((d / "expected.json").read_text())
    ts = {m["physical_offset"]: m["store_timestamp"] for m in expected["messages"]}
    units = expected["consume_queues"]["AuditTopic/0"]["units"]
    k = next(i for i in range(10, len(units) - 1) if ts[units[i - 1][1]] < ts[units[i][1]] < ts[units[i + 1][1]])
    phy, size = units[k][1], units[k][2]
    f = store / "commitlog" / f"{phy - phy % 65536:020d}"
    with open(f, "r+b") as fh:
        fh.seek(phy % 65536)
        fh.write(b"\0" * size)
    got = _search(store, d / "broker.conf", "AuditTopic", ts[units[k][1]])[0]
    assert got["offset"] == k and got["store_timestamp"] is None
    assert "cannot be read" in got["note"]
    assert _search(store, d / "broker.conf", "AuditTopic", ts[units[k][1]], "--scan")[0]["offset"] == k


def _set_store_time(store: Path, expected: dict, unit: int, when: int) -> None:
    units = expected["consume_queues"]["AuditTopic/0"]["units"]
    m = next(x for x in expected["messages"] if x["physical_offset"] == units[unit][1])
    at = units[unit][1] + 56 + (12 if m["sys_flag"] & 0x10 else 0)  # BORNHOST_V6_FLAG: a 20-byte born host
    with open(store / "commitlog" / f"{at - at % 65536:020d}", "r+b") as fh:
        fh.seek(at % 65536)
        fh.write(when.to_bytes(8, "big"))


def test_clock_step_back_is_reported_when_a_probe_sees_it(tmp_path):
    """Unit 54 (the bisection's first probe) stored an hour after the queue's last message, as
    when the clock stepped back after it: the answer is that boundary, and the note says the
    times go backwards (the last unit is read too)."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    expected = json.loads((d / "expected.json").read_text())
    late = max(m["store_timestamp"] for m in expected["messages"]) + 3_600_000
    _set_store_time(store, expected, 54, late)
    got = _search(store, d / "broker.conf", "AuditTopic", late)[0]
    assert (got["offset"], got["store_timestamp"]) == (54, late)
    assert "store times go backwards between offsets 54 and 107" in got["note"]
    assert _search(store, d / "broker.conf", "AuditTopic", late, "--scan")[0]["offset"] == 54


def test_clock_step_back_unseen_by_the_bisection_is_found_by_scan(tmp_path):
    """Unit 80 stored late: no probe reads it, so the bisection answers the max offset; --scan
    reads every unit and answers 80 (the documented limit of a binary search)."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    expected = json.loads((d / "expected.json").read_text())
    late = max(m["store_timestamp"] for m in expected["messages"]) + 3_600_000
    _set_store_time(store, expected, 80, late)
    scan = _search(store, d / "broker.conf", "AuditTopic", late, "--scan")[0]
    assert (scan["offset"], scan["store_timestamp"]) == (80, late)
    assert _search(store, d / "broker.conf", "AuditTopic", late)[0]["offset"] == 108


def test_unknown_topic_is_a_negative_answer():
    d = fixture_dir("4.9.7")
    r = run(
        "search-offset",
        "--store",
        d / "store",
        "--broker-conf",
        d / "broker.conf",
        "--topic",
        "PaymentTopik",
        "--time",
        "now",
    )
    assert r.returncode == 1
    assert r.stdout == b""
    assert r.stderr.decode().startswith("rmqstore: no topic 'PaymentTopik' in the store; did you mean PaymentTopic")


def test_missing_queue_is_a_negative_answer():
    d = fixture_dir("4.9.7")
    r = cli(
        "search-offset",
        "--store",
        d / "store",
        "--broker-conf",
        d / "broker.conf",
        "--topic",
        "AuditTopic",
        "--queue-id",
        "9",
        "--time",
        "now",
    )
    assert r.exit_code == 1
    assert "no consume queue AuditTopic/9" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,what",
    [
        (("--time", "yesterday-ish"), "cannot read time"),
        (("--time", "20261"), "neither epoch seconds"),
        (("--time", "2026-13-45T10:00"), "cannot read time"),
        (("--time", "now", "--broker"), "cannot tell the store's broker version"),
        (("--time", "now", "--boundary", "upper"), "go with --broker"),
        (("--time", "now", "--broker", "--broker-version", "4.9", "--boundary", "upper"), "5.x broker's option"),
        (("--time", "now", "--broker", "--broker-version", "5", "--scan"), "do not go together"),
        (("--time", "now", "--broker", "--broker-version", "6"), "is not one of"),
    ],
)
def test_bad_input_is_a_usage_error(args, what):
    d = fixture_dir("4.9.7")
    r = run("search-offset", "--store", d / "store", "--broker-conf", d / "broker.conf", "--topic", "AuditTopic", *args)
    assert r.returncode == 2, r.stderr
    err = r.stderr.decode()
    assert err.startswith("rmqstore: error: ") and what in err and "Traceback" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.slow
def test_three_formats_say_the_same():
    d = fixture_dir("5.3.3")
    base = (
        "search-offset",
        "--store",
        d / "store",
        "--broker-conf",
        d / "broker.conf",
        "--topic",
        "PaymentTopic",
        "--time",
        "1795317660000",
        "--tz",
        "UTC",
    )
    jl = [json.loads(x) for x in run(*base, "--format", "jsonl").stdout.splitlines()]
    js = json.loads(run(*base, "--format", "json").stdout)
    assert jl == js and [x["queue_id"] for x in jl] == [0, 1, 2, 3]
    table = run(*base, "--format", "table")
    assert table.returncode == 0
    text = table.stdout.decode()
    for rec in jl:
        assert str(rec["offset"]) in text
    assert "2026-11-22 03:21:00.000" in text  # the time asked, in --tz


def test_relative_time_is_read_against_now_and_old_q_is_queue_id(fixture):
    """--time -1s --now T+1000 is T: the same answer as --time T; -q, once --queue-id's short
    flag (-q is --quiet elsewhere), still works and says to type --queue-id."""
    store, conf, expected = fixture
    topic = TOPICS[0]
    qid, units = next(iter(_queues(expected, topic).items()))
    when = units[len(units) // 2][1]
    want = _search(store, conf, topic, when, "--queue-id", str(qid))
    assert _search(store, conf, topic, "-1s", "--queue-id", str(qid), "--now", str(when + 1000)) == {
        qid: {**want[qid], "time": when}
    }
    aged = cli("search-offset", "-s", store, "--broker-conf", conf, "-t", topic, "-q", qid, "--time", when)
    fresh = cli("search-offset", "-s", store, "--broker-conf", conf, "-t", topic, "--queue-id", qid, "--time", when)
    assert aged.exit_code == fresh.exit_code == 0 and aged.stdout == fresh.stdout
    assert "-q is deprecated; use --queue-id" in aged.stderr and "deprecated" not in fresh.stderr
