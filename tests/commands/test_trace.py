"""Message trace: ``generate --trace-messages`` stores, read back by ``dump-commitlog --trace``
and ``Store.traces``, checked against what this test works out from ``dump-commitlog
--format jsonl --body text`` alone: each trace message's body split on the client's
separators by hand, each Pub context matched to the traced message it names."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from rmqstore_cli import open_store
from tests.helpers import cli, generate

TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
#: where the msgId is among a context's fields after its type (TraceDataEncoder#encoderFromContextBean)
MSG_ID_AT = {"Pub": 4, "SubBefore": 4, "SubAfter": 1, "EndTransaction": 4, "Recall": 4}
#: MessageSysFlag.TRANSACTION_COMMIT_TYPE
COMMIT_TYPE = 0x8


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("trace") / "s", "--trace-messages", "40", messages=300)


def jsonl(*args: object) -> list[dict]:
    r = cli(*map(str, args), "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def by_hand(messages: list[dict]) -> list[tuple[int, str, list[str]]]:
    """(trace message offset, type, fields) per context, split here on chars 2 and 1."""
    out = []
    for m in messages:
        if m["topic"] == TRACE_TOPIC:
            for ctx in m["body"].split("\x02")[:-1]:
                kind, *fields = ctx.split("\x01")
                out.append((m["physical_offset"], kind, fields))
    return out


def test_trace_rows_match_the_bodies_and_the_traced_messages(store: Path) -> None:
    messages = jsonl("dump-commitlog", "--store", store, "--body", "text")
    expected = by_hand(messages)
    rows = jsonl("dump-commitlog", "--store", store, "--trace")
    assert [(r["trace_offset"], r["type"]) for r in rows] == [(o, k) for o, k, _ in expected]
    pubs = [r for r in rows if r["type"] == "Pub"]
    assert len(pubs) == 40
    by_offset_id = {m["msg_id"]: m for m in messages if m["topic"] != TRACE_TOPIC}
    for p in pubs:  # each Pub names a message that is in the store, as it is there (a half: its real topic)
        m = by_offset_id[p["offset_msg_id"]]
        half = m["topic"] == HALF_TOPIC
        topic = m["properties"]["REAL_TOPIC"] if half else m["topic"]
        assert (p["msg_id"], p["topic"], p["tags"], p["keys"]) == (
            m["properties"]["UNIQ_KEY"], topic, m["tags"], m["properties"]["KEYS"])  # fmt: skip
        assert (p["body_length"], p["store_host"]) == (m["body_size"], m["store_host"])
        assert p["success"] is True and p["msg_type"] == ("Trans_Msg_Half" if half else "Normal_Msg")
    for m in messages:  # a trace message is keyed by the msgIds and keys of what it traces
        if m["topic"] == TRACE_TOPIC:
            ids = {f[MSG_ID_AT[k]] for o, k, f in expected if o == m["physical_offset"]}
            assert ids and ids <= set(m["keys"])


@pytest.fixture(scope="module")
def tx_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = ("--broker-version", "5", "--trace-messages", "60", "--transaction-ratio", "0.5")
    return generate(tmp_path_factory.mktemp("trace-tx") / "s", *extra, messages=200)


def test_transaction_ends_recounted_by_hand(tx_store: Path) -> None:
    """Transactional traced sends: each Pub of a half (msgType 1) shares its trace message
    with one EndTransaction of its msgId (msgType 2, transactionId the msgId); an UNKNOW
    answer is followed, in a later trace message, by the check's COMMIT_MESSAGE; the store
    holds the half (put back once per check), a commit record naming the last half for
    every commit, none for a rollback. Counted from the bodies split by hand, then held
    against ``--trace``'s rows."""
    messages = jsonl("dump-commitlog", "--store", tx_store, "--body", "text")
    ctxs = by_hand(messages)
    pubs = {f[4]: (o, f) for o, k, f in ctxs if k == "Pub"}
    halves = {i for i, (_, f) in pubs.items() if f[10] == "1"}
    ends = [(o, f) for o, k, f in ctxs if k == "EndTransaction"]
    assert len(ends) > 5 and all(f[8] == "2" and f[9] == f[4] and len(f) == 12 for _, f in ends)
    first = {f[4]: (o, f[10]) for o, f in ends if f[11] == "false"}
    checked = {f[4]: (o, f[10]) for o, f in ends if f[11] == "true"}
    assert set(first) == halves and len(first) == sum(f[11] == "false" for _, f in ends)
    assert all(first[i][0] == pubs[i][0] for i in halves)  # flushed together: one trace message
    states = {i: st for i, (_, st) in first.items()}
    assert set(states.values()) == {"COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"}
    unknown = {i for i, st in states.items() if st == "UNKNOW"}
    assert set(checked) == unknown and all(o > first[i][0] and st == "COMMIT_MESSAGE" for i, (o, st) in checked.items())
    half_at: dict[str, list[int]] = {}
    commits = {}
    for m in messages:
        if m["topic"] == HALF_TOPIC:
            half_at.setdefault(m["uniq_key"], []).append(m["physical_offset"])
        elif m["sys_flag"] & COMMIT_TYPE:
            commits[m["uniq_key"]] = m["prepared_transaction_offset"]
    committed = {i for i, st in states.items() if st != "ROLLBACK_MESSAGE"}
    assert committed <= set(commits) and not (halves - committed) & set(commits)
    assert all(len(half_at[i]) == 1 + (i in unknown) and commits[i] == half_at[i][-1] for i in committed)
    rows = [r for r in jsonl("dump-commitlog", "--store", tx_store, "--trace") if r["type"] == "EndTransaction"]
    assert [(r["trace_offset"], r["msg_id"], r["transaction_id"]) for r in rows] == [(o, f[4], f[9]) for o, f in ends]
    assert [(r["transaction_state"], r["from_transaction_check"]) for r in rows] == [
        (f[10], f[11] == "true") for _, f in ends]  # fmt: skip
    assert {r["msg_type"] for r in rows} == {"Trans_msg_Commit"}


def test_what_happened_to_one_message(store: Path) -> None:
    """``Store.traces(msg_id=...)``: every record about it in time order, the same rows
    ``dump-commitlog --trace --key`` prints (in commit-log order)."""
    rows = jsonl("dump-commitlog", "--store", store, "--trace")
    consumed = {r["msg_id"] for r in rows if r["type"] == "SubAfter"}
    retried = sorted({r["msg_id"] for r in rows if r["type"] == "SubBefore" and r["retry_times"] == 1})
    assert retried, "the workload has a retried consume"
    target = retried[0]
    with open_store(store) as s:
        got = s.traces(msg_id=target.lower())
        assert [t.type for t in got] == ["Pub", "SubBefore", "SubAfter", "SubBefore", "SubAfter"]
        assert [t.success for t in got if t.type == "SubAfter"] == [False, True]
        assert [t.timestamp for t in got] == sorted(t.timestamp for t in got)  # type: ignore[type-var]
        mine = [r for r in rows if r["msg_id"] == target]
        assert sorted(t.as_dict()["trace_offset"] for t in got) == sorted(r["trace_offset"] for r in mine)
        assert {json.dumps(t.as_dict(), sort_keys=True) for t in got} == {json.dumps(r, sort_keys=True) for r in mine}
        assert [t.trace_offset for t in s.traces(msg_id=got[0].offset_msg_id)] == [t.trace_offset for t in got]
        key = got[0].key_list()[0]
        assert {t.msg_id for t in s.traces(key=key)} == {target}
        assert len(s.traces()) == len(rows) and len(consumed) < 40
    cli_rows = jsonl("dump-commitlog", "--store", store, "--trace", "--key", target)
    assert [r["trace_offset"] for r in cli_rows] == sorted(r["trace_offset"] for r in mine)


def test_trace_refuses_message_only_options(store: Path) -> None:
    r = cli("dump-commitlog", "--store", str(store), "--trace", "--body", "text")
    assert r.exit_code == 2 and "--body" in r.stderr
    r = cli("dump-commitlog", "--store", str(store), "--trace", "--key", "no-such-key")
    assert r.exit_code == 1


def test_trace_messages_not_into_a_replayed_dump(tmp_path: Path) -> None:
    r = cli("generate", "--store", str(tmp_path / "s"), "--from-jsonl", "-", "--trace-messages", "3", input="")
    assert r.exit_code == 2 and "--trace-messages" in r.stderr and not (tmp_path / "s" / "commitlog").exists()


def test_the_brokers_own_trace_topic(tmp_path: Path) -> None:
    """A broker.conf's msgTraceTopicName is where generate sends the traces and where
    --trace reads them with that conf; without it, --topic names the topic."""
    conf = tmp_path / "broker.conf"
    conf.write_text("msgTraceTopicName=OurTraces\n", encoding="utf-8")
    s = generate(tmp_path / "s", "--trace-messages", "5", "--broker-conf", str(conf), messages=30)
    topics = {m["topic"] for m in jsonl("dump-commitlog", "--store", s)}
    assert "OurTraces" in topics and TRACE_TOPIC not in topics
    with_conf = jsonl("dump-commitlog", "--store", s, "--broker-conf", conf, "--trace")
    assert {r["trace_topic"] for r in with_conf} == {"OurTraces"} and sum(r["type"] == "Pub" for r in with_conf) == 5
    assert jsonl("dump-commitlog", "--store", s, "--trace", "--topic", "OurTraces") == with_conf
    assert cli("dump-commitlog", "--store", str(s), "--trace").stdout.count("Pub") == 0


def test_every_type_and_older_clients_in_a_store(tmp_path: Path) -> None:
    """A trace message holding an EndTransaction, a 13-field Pub (no offset msgId), a
    6-field SubAfter (no time) and a Recall, replayed into a store: ``Store.traces`` finds
    them by msgId in any case, the timeless SubAfter placed at its message's store time."""
    c, f = "\x01", "\x02"
    contexts = [
        ["EndTransaction", "1767225600050", "R", "pg", "OrderTopic", "MSG1", "TagA", "k1", "10.0.0.5:10911", "1",
         "TX1", "COMMIT_MESSAGE", "true"],
        ["Pub", "1767225600000", "R", "pg", "OrderTopic", "MSG1", "TagA", "k1", "10.0.0.5:10911", "12", "3", "1",
         "true"],
        ["SubAfter", "REQ", "MSG1", "5", "true", "k1"],
        ["Recall", "1767225600200", "R", "pg", "OrderTopic", "MSG1", "true"],
    ]  # fmt: skip
    body = "".join(c.join(x) + f for x in contexts).encode()
    rec = {"topic": TRACE_TOPIC, "queue_id": 0, "queue_offset": 0, "physical_offset": 0, "flag": 0, "sys_flag": 0}
    rec |= {"born_timestamp": 1767225600300, "store_timestamp": 1767225600301, "reconsume_times": 0}
    rec |= {"born_host": "172.16.9.10:50001", "store_host": "10.0.0.5:10911", "prepared_transaction_offset": 0}
    rec |= {"properties": {"KEYS": "MSG1 k1"}, "properties_string": "KEYS\x01MSG1 k1\x02", "magic": "v1"}
    rec |= {"body": base64.b64encode(body).decode()}
    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    assert cli("generate", "--store", str(tmp_path / "s"), "--from-jsonl", str(src), "-q").exit_code == 0
    with open_store(tmp_path / "s") as s:
        got = s.traces(msg_id="msg1")
    assert [t.type for t in got] == ["Pub", "EndTransaction", "Recall", "SubAfter"]
    pub, end, recall, after = got
    assert pub.success is True and pub.offset_msg_id is None and pub.msg_type == "Trans_Msg_Half"
    assert (end.transaction_id, end.transaction_state, end.from_transaction_check) == ("TX1", "COMMIT_MESSAGE", True)
    assert recall.success is True and recall.topic == "OrderTopic"
    assert after.timestamp is None and after.context_code is None and after.field_count == 6
    assert after.trace_store_timestamp == 1767225600301


def trace_record(i: int, keys: str, contexts: list[list[str]]) -> dict:
    """A trace message for ``generate --from-jsonl``: queue offset ``i``, KEYS ``keys``."""
    body = "".join("\x01".join(x) + "\x02" for x in contexts).encode()
    rec = {"topic": TRACE_TOPIC, "queue_id": 0, "queue_offset": i, "flag": 0, "sys_flag": 0, "reconsume_times": 0}
    rec |= {"born_timestamp": 1767225600300 + i, "store_timestamp": 1767225600301 + i, "magic": "v1"}
    rec |= {"born_host": "172.16.9.10:50001", "store_host": "10.0.0.5:10911", "prepared_transaction_offset": 0}
    rec |= {"properties": {"KEYS": keys}, "properties_string": f"KEYS\x01{keys}\x02"}
    return rec | {"body": base64.b64encode(body).decode()}


def test_trace_key_is_exact_not_a_prefix(tmp_path: Path) -> None:
    """``--trace --key X`` keeps the records whose msgId is X or whose keys hold X, exactly:
    MSG1 and k1 are prefixes of MSG10 and k10, and of a trace message holding both."""
    pub = ["Pub", "1767225600000", "R", "pg", "T", "{id}", "TagA", "{keys}", "10.0.0.5:10911", "12", "3", "0", "true"]
    before = ["SubBefore", "1767225600100", "R", "cg", "REQ", "{id}", "0", "{keys}"]

    def ctx(tpl: list[str], msg_id: str, keys: str) -> list[str]:
        return [x.format(id=msg_id, keys=keys) for x in tpl]

    recs = [
        trace_record(0, "MSG1 k1", [ctx(pub, "MSG1", "k1")]),
        trace_record(1, "MSG10 k10 k1x", [ctx(pub, "MSG10", "k10 k1x")]),
        trace_record(2, "MSG1 k1 MSG10 k10 k1x", [ctx(before, "MSG1", "k1"), ctx(before, "MSG10", "k10 k1x")]),
    ]
    src = tmp_path / "traces.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    s = tmp_path / "s"
    assert cli("generate", "--store", str(s), "--from-jsonl", str(src), "-q").exit_code == 0
    every = jsonl("dump-commitlog", "--store", s, "--trace")
    assert [(r["type"], r["msg_id"]) for r in every] == [
        ("Pub", "MSG1"), ("Pub", "MSG10"), ("SubBefore", "MSG1"), ("SubBefore", "MSG10")]  # fmt: skip

    def about(key: str) -> list[tuple[str, str]]:
        return [(r["type"], r["msg_id"]) for r in jsonl("dump-commitlog", "--store", s, "--trace", "--key", key)]

    assert about("MSG1") == about("k1") == [("Pub", "MSG1"), ("SubBefore", "MSG1")]
    assert about("MSG10") == about("k10") == about("k1x") == [("Pub", "MSG10"), ("SubBefore", "MSG10")]
    for partial in ("MSG", "k", "SG1", "msg1"):  # no substring, no other case
        r = cli("dump-commitlog", "--store", str(s), "--trace", "--key", partial)
        assert r.exit_code == 1 and r.stdout.strip() == "", partial
    with open_store(s) as st:
        assert [(t.type, t.msg_id) for t in st.traces(key="k1")] == [("Pub", "MSG1"), ("SubBefore", "MSG1")]


def test_no_transaction_ratio_no_transaction_ends(tmp_path: Path) -> None:
    s = generate(tmp_path / "s", "--trace-messages", "12", "--transaction-ratio", "0", messages=30)
    rows = jsonl("dump-commitlog", "--store", s, "--trace")
    assert sum(r["type"] == "Pub" for r in rows) == 12
    assert {r["type"] for r in rows} <= {"Pub", "SubBefore", "SubAfter"}
    assert {r["msg_type"] for r in rows if r["type"] == "Pub"} == {"Normal_Msg"}
