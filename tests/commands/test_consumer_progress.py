"""consumer-progress: config/consumerOffset.json read as ConfigManager#load reads it (fastjson's
unquoted integer keys, the .bak fallback), against the queues' offsets from expected.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, fixture_dir, run, writable_copy


def _copy(src: Path, dst: Path) -> Path:
    writable_copy(src, dst)
    (dst / "config").mkdir(exist_ok=True)
    return dst


def fastjson_pretty(table: dict[str, dict[int, int]]) -> str:
    """``RemotingSerializable#toJson(obj, true)`` as fastjson prints it (ConfigManager#persist):
    tabs, integer keys unquoted, a map's closing brace on its own line."""
    entries = []
    for key, queues in table.items():
        inner = ",".join(f"{q}:{o}" for q, o in queues.items())
        entries.append(f'\t\t"{key}":{{{inner}\n\t\t}}')
    return '{\n\t"offsetTable":{\n' + ",\n".join(entries) + "\n\t}\n}"


def fastjson_compact(table: dict[str, dict[int, int]]) -> str:
    return (
        '{"offsetTable":{'
        + ",".join(f'"{k}":{{' + ",".join(f"{q}:{o}" for q, o in v.items()) + "}" for k, v in table.items())
        + "}}"
    )


def _progress(store: Path, conf: Path | None, *extra: str, code: int = 0):
    args = [
        "consumer-progress",
        "--store",
        store,
        *(["--broker-conf", conf] if conf else []),
        "--format",
        "jsonl",
        *extra,
    ]
    r = run(*args)
    assert r.returncode == code, r.stderr.decode()
    return [json.loads(x) for x in r.stdout.decode().splitlines()], r.stderr.decode()


@pytest.fixture(params=("4.9.7", "5.3.3"))
def real(request, tmp_path):
    d = fixture_dir(request.param)
    expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    return _copy(d / "store", tmp_path / "store"), d / "broker.conf", expected


def _expect(expected: dict, topic: str, qid: int, offset: int) -> dict:
    q = expected["consume_queues"][f"{topic}/{qid}"]
    ts = {m["physical_offset"]: m["store_timestamp"] for m in expected["messages"]}
    nxt = (
        next((ts[u[1]] for u in q["units"] if u[0] == offset), None)
        if q["min_offset"] <= offset < q["max_offset"]
        else None
    )
    status = "behind-min" if offset < q["min_offset"] else "beyond-max" if offset > q["max_offset"] else "ok"
    return {
        "min_offset": q["min_offset"],
        "max_offset": q["max_offset"],
        "lag": q["max_offset"] - offset,
        "next_store_timestamp": nxt,
        "status": status,
    }


@pytest.mark.parametrize("form", (fastjson_pretty, fastjson_compact))
def test_offsets_against_the_real_broker_queues(real, form):
    store, conf, expected = real
    table = {
        "PaymentTopic@pay-g": {0: 0, 1: 10, 2: 49, 3: 40},
        "AuditTopic@audit-g": {0: 100},
        "PaymentTopic@other-g": {0: 200, 1: 67},
    }
    (store / "config" / "consumerOffset.json").write_text(form(table), encoding="utf-8")
    rows, err = _progress(store, conf)
    assert err == ""
    got = {(r["group"], r["topic"], r["queue_id"]): r for r in rows}
    assert [(r["group"], r["topic"], r["queue_id"]) for r in rows] == sorted(
        got, key=lambda k: (f"{k[1]}@{k[0]}", k[2])
    )
    for key, queues in table.items():
        topic, group = key.split("@")
        for qid, off in queues.items():
            r = got[group, topic, qid]
            assert r["consumer_offset"] == off and r["file"] == "consumerOffset.json"
            assert {k: r[k] for k in ("min_offset", "max_offset", "lag", "next_store_timestamp", "status")} == _expect(
                expected, topic, qid, off
            ), (key, qid)
    assert (
        got["other-g", "PaymentTopic", 0]["status"] == "beyond-max"
        and got["pay-g", "PaymentTopic", 1]["status"] == "ok"
    )


@pytest.mark.slow
def test_filters(real):
    store, conf, _ = real
    (store / "config" / "consumerOffset.json").write_text(
        fastjson_compact({"PaymentTopic@pay-g": {0: 1}, "AuditTopic@pay-g": {0: 2}, "AuditTopic@audit-g": {0: 3}})
    )
    rows, _ = _progress(store, conf, "--group", "pay-g")
    assert {(r["topic"], r["consumer_offset"]) for r in rows} == {("PaymentTopic", 1), ("AuditTopic", 2)}
    rows, _ = _progress(store, conf, "--topic", "AuditTopic", "--group", "audit-g")
    assert [r["consumer_offset"] for r in rows] == [3]
    rows, err = _progress(store, conf, "--group", "nobody", code=1)
    assert rows == [] and err.startswith("rmqstore: no consumer offset of group 'nobody'")


@pytest.mark.slow
def test_bak_is_read_when_the_file_does_not_decode_ConfigManager_load(tmp_path):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    cfg = store / "config"
    (cfg / "consumerOffset.json").write_bytes(b'{"offsetTable":{"AuditTopic@g":{0:1')  # torn by a power loss
    (cfg / "consumerOffset.json.bak").write_text(fastjson_pretty({"AuditTopic@g": {0: 7}}))
    rows, err = _progress(store, d / "broker.conf")
    assert [(r["consumer_offset"], r["file"]) for r in rows] == [(7, "consumerOffset.json.bak")]
    assert err.startswith("rmqstore: warning: ") and "does not decode" in err and "ConfigManager#load" in err
    (cfg / "consumerOffset.json").write_bytes(b"")  # empty: ConfigManager#load goes to loadBak too
    rows, err = _progress(store, d / "broker.conf")
    assert [r["consumer_offset"] for r in rows] == [7] and "is empty" in err
    (cfg / "consumerOffset.json").write_text(
        '{"offsetTable":{"AuditTopic@g":{0:"abc"}}}'
    )  # fastjson cannot bind a long
    rows, err = _progress(store, d / "broker.conf")
    assert [r["consumer_offset"] for r in rows] == [7] and "is not a long" in err


def test_both_files_broken_is_a_broker_that_will_not_start(tmp_path):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_bytes(b"\0" * 100)
    (store / "config" / "consumerOffset.json.bak").write_bytes(b"{0:")
    r = run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf")
    assert r.returncode == 3
    lines = r.stderr.decode().splitlines()
    assert lines[-1].startswith("rmqstore: error: neither consumerOffset.json nor consumerOffset.json.bak decodes")
    assert "consumerOffset.json.bak:" in lines[-1] and "Traceback" not in r.stderr.decode()


def test_no_files_is_a_negative_answer(tmp_path):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    rows, err = _progress(store, d / "broker.conf", code=1)
    assert "consumerOffset.json.bak is absent: the broker starts with no offsets from it" in err
    assert err.splitlines()[-1].startswith("rmqstore: no consumer offsets")


#: Hostile consumerOffset.json contents, by name. The names are the parametrize ids: a content
#: itself as the id (pytest < 9 spells bytes out in full) made the test's node id megabytes long,
#: pytest puts the node id in PYTEST_CURRENT_TEST, every subprocess inherits it, and Linux
#: refuses an environment string over 128 KiB: the run failed with E2BIG ("Argument list too
#: long") before rmqstore started.
HOSTILE = {
    "deep-braces": b"{" * 2_000_000,  # deeper than orjson's nesting limit
    "deep-arrays": b'{"offsetTable":' + b"[" * 5000 + b"]" * 5000 + b"}",
    "binary": bytes(range(256)) * 1000,
    "escaped-quotes": b'"' + b'\\"' * 500_000,
    "queue-id-beyond-int": b'{"offsetTable":{"T@g":{99999999999:1}}}',
}


@pytest.mark.parametrize("content", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_file_is_one_line(tmp_path, content):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_bytes(content)
    r = run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf")
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err
    assert all(ln.startswith("rmqstore: ") for ln in err.splitlines())
    assert "does not decode" in err.splitlines()[0] and len(err.splitlines()[0]) < 400


def test_hostile_contents_stay_out_of_the_node_ids(request):
    """Each hostile case is named; its bytes are never part of a node id (see HOSTILE)."""
    [mark] = [m for m in test_hostile_file_is_one_line.pytestmark if m.name == "parametrize"]
    assert mark.kwargs.get("ids") == list(HOSTILE)
    assert all(len(i) < 40 for i in HOSTILE) and len(request.node.nodeid) < 200


def test_oversized_file_and_fifo_are_refused(tmp_path):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    p = store / "config" / "consumerOffset.json"
    with open(p, "wb") as fh:
        fh.truncate(40 << 20)  # sparse: over the 32 MiB cap
    r = run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf")
    assert r.returncode == 3
    assert r.stderr.decode().startswith("rmqstore: error: consumerOffset.json is 41943040 bytes, more than")
    p.unlink()
    os.mkfifo(p)
    r = run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf")
    assert r.returncode == 3 and len(r.stderr.decode().splitlines()) == 1 and "FIFO" in r.stderr.decode()


def test_bad_keys_are_skipped_with_a_warning(tmp_path):
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_text(
        fastjson_compact({"no-separator": {0: 1}, "AuditTopic@g": {0: 2}, "\\u001b[31m@x@y": {0: 3}})
    )  # fastjson escapes control characters
    rows, err = _progress(store, d / "broker.conf")
    assert [r["consumer_offset"] for r in rows] == [2]
    assert "'no-separator' is not TOPIC@GROUP" in err and "[31m@x@y" in err and "\x1b" not in err


def test_only_bad_keys_is_a_negative_answer_with_the_filters_hint(tmp_path):
    """Every key skipped and no filter given: exit 1, the plain message and a hint that does
    not tell to drop filters that were not given; a filter given: the hint to drop them, its
    value escaped on stderr and both filters named."""
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_text(fastjson_compact({"no-separator": {0: 1}}))
    rows, err = _progress(store, d / "broker.conf", code=1)
    assert rows == [] and "rmqstore: no consumer offset (" in err
    assert "no consumer has committed an offset" in err and "run without" not in err
    _, err = _progress(store, d / "broker.conf", "--group", "g\x1b[31m", "--topic", "T", code=1)
    assert "no consumer offset of group 'g\\x1b[31m' and topic 'T'" in err and "\x1b" not in err
    assert "run without --group/--topic to list them all" in err


def test_expired_messages_flag_behind_min(tmp_path):
    """The first commit-log file gone: units pointing into it are below the queue's min
    (ConsumeQueue#correctMinOffset); a consumer still there is behind-min."""
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "commitlog" / "00000000000000000000").unlink()
    expected = json.loads((d / "expected.json").read_text())
    q = expected["consume_queues"]["AuditTopic/0"]
    first_live = next(u[0] for u in q["units"] if u[1] >= 65536)
    (store / "config" / "consumerOffset.json").write_text(fastjson_compact({"AuditTopic@g": {0: 0}}))
    [row], _ = _progress(store, d / "broker.conf")
    assert row["status"] == "behind-min" and row["min_offset"] == first_live > 0
    assert row["next_store_timestamp"] is None and row["lag"] == q["max_offset"]


def test_generated_store_table_and_json(tmp_path):
    store = tmp_path / "store"
    r = cli("generate", "--store", store, "--messages", "3000", *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr
    summary = [
        json.loads(x)
        for x in cli("dump-cq", "--summary", "--store", store, *SMALL[:4], "--format", "jsonl").stdout.splitlines()
    ]
    big = max(summary, key=lambda s: s["max_offset"])
    topic, qid, mx = big["topic"], big["queue_id"], big["max_offset"]
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "consumerOffset.json").write_text(fastjson_pretty({f"{topic}@g": {qid: mx - 150}}))
    units = [
        json.loads(x)
        for x in cli(
            "dump-cq",
            topic,
            str(qid),
            "--store",
            store,
            *SMALL[:4],
            "--from-offset",
            str(mx - 150),
            "--limit",
            "1",
            "--format",
            "jsonl",
        ).stdout.splitlines()
    ]
    r = cli("consumer-progress", "--store", store, *SMALL[:4], "--format", "json")
    [row] = json.loads(r.stdout)
    assert (row["lag"], row["next_store_timestamp"], row["status"]) == (150, units[0]["store_timestamp"], "ok")
    t = cli("consumer-progress", "--store", store, *SMALL[:4], "--tz", "UTC")
    assert t.exit_code == 0 and "150" in t.stdout and topic[:10] in t.stdout


@pytest.mark.slow
def test_delay_and_lmq_offsets_ScheduleMessageService_decode(real):
    """delayOffset.json: delay level -> offset in SCHEDULE_TOPIC_XXXX queue level - 1
    (ScheduleMessageService#delayLevel2QueueId), 5.x adds dataVersion; lmqConsumerOffset.json
    has consumerOffset.json's form."""
    store, conf, expected = real
    cfg = store / "config"
    (cfg / "consumerOffset.json").write_text(fastjson_compact({"AuditTopic@g": {0: 1}}))
    (cfg / "delayOffset.json").write_text(
        '{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":0,\n\t\t"timestamp":1795317680000\n\t},'
        '\n\t"offsetTable":{1:2,2:0,18:1\n\t}\n}'
    )
    (cfg / "lmqConsumerOffset.json").write_text(fastjson_pretty({"%LMQ%orders@lmq-g": {0: 4}}))
    rows, err = _progress(store, conf)
    assert err == ""
    delay = [r for r in rows if r["file"] == "delayOffset.json"]
    assert [(r["group"], r["topic"], r["queue_id"], r["delay_level"]) for r in delay] == [
        ("ScheduleMessageService", "SCHEDULE_TOPIC_XXXX", 0, 1),
        ("ScheduleMessageService", "SCHEDULE_TOPIC_XXXX", 1, 2),
        ("ScheduleMessageService", "SCHEDULE_TOPIC_XXXX", 17, 3 * 6),
    ]
    for r in delay:
        want = _expect(expected, "SCHEDULE_TOPIC_XXXX", r["queue_id"], r["consumer_offset"])
        assert {k: r[k] for k in want} == want
    [lmq] = [r for r in rows if r["file"] == "lmqConsumerOffset.json"]
    assert (lmq["group"], lmq["topic"], lmq["status"]) == ("lmq-g", "%LMQ%orders", "no-queue")
    rows, _ = _progress(store, conf, "--group", "ScheduleMessageService")
    assert len(rows) == 3
    (cfg / "delayOffset.json").write_text("{1:")  # torn, no .bak: ConfigManager#loadBak returns true, empty
    rows, err = _progress(store, conf)
    assert not [r for r in rows if r["topic"] == "SCHEDULE_TOPIC_XXXX"]
    assert "delayOffset.json.bak is absent: the broker starts with no offsets from it" in err
    (cfg / "delayOffset.json.bak").write_text("[")  # a .bak that does not decode: the broker would not start
    r = run("consumer-progress", "--store", store, "--broker-conf", conf)
    assert r.returncode == 3 and "neither delayOffset.json nor delayOffset.json.bak decodes" in r.stderr.decode()


def _with_offsets(tmp_path: Path, text: bytes, bak: bytes | None = None) -> Path:
    d = fixture_dir("4.9.7")
    store = _copy(d / "store", tmp_path / "store")
    (store / "config" / "consumerOffset.json").write_bytes(text)
    if bak is not None:
        (store / "config" / "consumerOffset.json.bak").write_bytes(bak)
    return store


@pytest.mark.parametrize(
    "before",
    [b"\xc3\xa9\xe6\x97\xa5\xf0\x9f\x98\x80", b"\xff\xfe\xc3"],  # UTF-8 of 2, 3 and 4 bytes; bytes that are not UTF-8
    ids=["multi-byte", "not-utf8"],
)
def test_a_parse_error_names_the_byte_offset_in_the_file(tmp_path, before):
    """The offset in 'does not decode' is where the bytes stop being JSON, counted in bytes:
    each multi-byte character (or byte a decoder would replace) before it counts as its bytes."""
    text = b'{"offsetTable":{"T' + before + b'@g":{0:1},"AuditTopic@g":{0:1,]}}'
    store = _with_offsets(tmp_path, text, bak=fastjson_compact({"AuditTopic@g": {0: 1}}).encode())
    _, err = _progress(store, fixture_dir("4.9.7") / "broker.conf")
    assert f"consumerOffset.json:{text.index(b']')} does not decode" in err, err


def test_a_queue_the_store_no_longer_has_has_no_lag(tmp_path):
    """A key whose queue is gone reads max 0: its lag is null (status no-queue), not minus the
    offset; the group's total lag leaves it out and counts it in no_queue."""
    d = fixture_dir("4.9.7")
    expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    q = next(q for q in expected["consume_queues"].values() if q["max_offset"] > 3 and q["queue_id"] == 0)
    table = {f"{q['topic']}@g": {q["queue_id"]: 1, 97: 5}, "NoSuchTopic@g": {0: 7}, f"{q['topic']}@h": {0: 1 << 40}}
    store = _with_offsets(tmp_path, fastjson_compact(table).encode())
    rows, _ = _progress(store, d / "broker.conf")
    gone = [r for r in rows if r["status"] == "no-queue"]
    assert sorted((r["topic"], r["queue_id"]) for r in gone) == [(q["topic"], 97), ("NoSuchTopic", 0)]
    assert all(r["lag"] is None for r in gone)
    groups, _ = _progress(store, d / "broker.conf", "--by", "group")
    by = {g["group"]: g for g in groups}
    assert by["g"] == {"group": "g", "topics": 2, "queues": 3, "lag": q["max_offset"] - 1, "no_queue": 2}
    assert by["h"]["lag"] == 0  # beyond its max: the broker corrects it to the max at the next pull
    for width in (80, 120):
        r = run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf", env={"COLUMNS": str(width)})
        text = r.stdout.decode()
        assert r.returncode == 0 and "lag per group" in text
        assert max(len(line) for line in text.splitlines()) <= width
        [g_line] = [line for line in text.split("lag per group")[1].splitlines() if line.startswith("g ")]
        assert g_line.split() == ["g", "2", "3", str(q["max_offset"] - 1), "2"]
