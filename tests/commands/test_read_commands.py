"""dump-cq, index-lookup and decode-msgid through the CLI: real-broker fixtures, generated
stores and edge cases (pre-blank queues, IPv6, V2 records, hostile text)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import shutil
import subprocess
import sys

import pytest

from tests.helpers import cli, run, tree_digest

LONG_MAX = (1 << 63) - 1
ROLLBACK = 0xC


def _jsonl(r) -> list[dict]:
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def _host(h: str):
    addr, _, port = h[1:].partition("]:") if h.startswith("[") else h.rpartition(":")
    return ipaddress.ip_address(addr), int(port)


def _true_match(m: dict, topic: str, key: str) -> bool:
    """The client's real-key filter, applied to expected.json / dump-commitlog records."""
    keys = (m["properties"].get("KEYS") if "properties" in m else m.get("keys_raw")) or ""
    return m["topic"] == topic and (key in keys.split(" ") or m["uniq_key"] == key)


def _indexed(m: dict) -> bool:
    """ROLLBACK records are never indexed (IndexService#buildIndex)."""
    return m["sys_flag"] & ROLLBACK != ROLLBACK


def _messages(store) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return _jsonl(r)


# ====================================================================== real-broker fixtures


def test_dump_cq_units_equal_broker_units(fixture):
    store, conf, exp = fixture
    queues = [q for q in exp["consume_queues"].values() if q["exists_on_disk"]]
    assert queues
    for q in queues:
        r = cli("dump-cq", q["topic"], q["queue_id"], "--store", store, "--broker-conf", conf, "--format", "jsonl")
        assert r.exit_code == (0 if q["units"] else 1), r.stderr
        got = _jsonl(r)
        assert [[u["cq_offset"], u["commitlog_offset"], u["size"], u["tags_code"]] for u in got] == q["units"]
        assert all(u["topic"] == q["topic"] and u["queue_id"] == q["queue_id"] for u in got)
        assert [u["file"] for u in got] == [f"{(u[0] * 20) // 2000 * 2000:020d}" for u in q["units"]]
        # the broker's own units agree with the records they point at
        assert all(u["status"] == "ok" and u["agrees"] is True and u["problems"] == [] for u in got), [
            u for u in got if u["status"] != "ok"
        ][:2]


def test_dump_cq_summary_equals_broker_min_max(fixture):
    store, conf, exp = fixture
    r = cli("dump-cq", "--summary", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    got = {(q["topic"], q["queue_id"]): q for q in _jsonl(r)}
    on_disk = {(q["topic"], q["queue_id"]): q for q in exp["consume_queues"].values() if q["exists_on_disk"]}
    assert set(got) == set(on_disk)
    for k, q in on_disk.items():
        g = got[k]
        assert (g["min_offset"], g["max_offset"], g["max_physic_offset"]) == (
            q["min_offset"],
            q["max_offset"],
            q["max_physic_offset"],
        ), k
        assert g["files"] == q["files"]
        assert g["pre_blank_units"] == 0


def test_dump_cq_file_mode_needs_no_store(fixture):
    store, _, exp = fixture
    q = (
        exp["consume_queues"]["AuditTopic/0"]
        if "AuditTopic/0" in exp["consume_queues"]
        else next(x for x in exp["consume_queues"].values() if x["topic"] == "AuditTopic")
    )
    second = store / "consumequeue" / "AuditTopic" / "0" / "00000000000000002000"
    r = cli("dump-cq", "--file", second, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    got = _jsonl(r)
    assert [[u["cq_offset"], u["commitlog_offset"], u["size"], u["tags_code"]] for u in got] == [
        u for u in q["units"] if u[0] >= 100
    ]
    assert got[0]["topic"] == "AuditTopic" and got[0]["queue_id"] == 0 and "agrees" not in got[0]


def _query(q: dict, store, conf, *extra: str):
    """``index-lookup`` of a sample's query (its key, topic and window), every hit, as JSON Lines."""
    window = ("--topic", q["topic"], "--begin", q["begin"], "--end", q["end"])
    where = ("--store", store, "--broker-conf", conf, "--format", "jsonl")
    return cli("index-lookup", q["key"], *window, *extra, "--limit", "1000000", *where)


def test_index_lookup_broker_window_equals_true_offsets(fixture):
    store, conf, exp = fixture
    for q in exp["queries"]:
        r = _query(q, store, conf, "--broker-window")
        assert r.exit_code == (0 if q["true_offsets"] else 1), (q, r.stderr)
        got = _jsonl(r)
        assert [h["physical_offset"] for h in got] == q["true_offsets"], q
        assert all(h["key"] == q["key"] and h["topic"] == q["topic"] for h in got)
        assert all(h["message"]["physical_offset"] == h["physical_offset"] for h in got)
        assert all(h["store_timestamp"] == h["message"]["store_timestamp"] for h in got)


def test_raw_query_offset_equals_broker(fixture):
    from rmqstore_cli.store.answers.lookup import broker_query_message, query_offset
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.message_store import MessageStore

    store, conf, exp = fixture
    st = MessageStore.open(StoreConfig.load(store, conf))
    names = {f["name"] for f in exp["index_files"]}
    for q in exp["queries"]:
        args = (q["topic"], q["key"], 100000, q["begin"], q["end"])
        assert st.index.query_offset(*args) == q["raw_offsets"], q
        mine = query_offset(st.index, *args)
        assert [p for p, _ in mine] == q["raw_offsets"] and {f for _, f in mine} <= names
        hits = broker_query_message(st.index, st.commitlog, *args)
        assert [h.physical_offset for h in hits] == q["query_message_offsets"], q
    st.close()


@pytest.mark.slow
def test_index_lookup_default_mode_gives_true_hits_in_window(fixture):
    """What a person means: every indexed message with the real key whose real store time
    lies in the window, even where the broker's whole-second window misses it."""
    store, conf, exp = fixture
    msgs = exp["messages"]
    differs = 0
    for q in exp["queries"]:
        want = sorted(
            m["physical_offset"]
            for m in msgs
            if _true_match(m, q["topic"], q["key"]) and _indexed(m) and q["begin"] <= m["store_timestamp"] <= q["end"]
        )
        r = _query(q, store, conf)
        assert r.exit_code == (0 if want else 1), (q, r.stderr)
        assert [h["physical_offset"] for h in _jsonl(r)] == want, q
        differs += want != q["true_offsets"]
    # the samples include windows the broker answers wrongly (begin == end == store time)
    assert differs >= 1


def test_index_lookup_all_topics_from_consumequeue(fixture):
    """No config/ in the samples: the topics come from consumequeue/ alone."""
    store, conf, exp = fixture
    assert not (store / "config").exists()
    want = sorted(
        {
            m["physical_offset"]
            for m in exp["messages"]
            if _indexed(m)
            and "batch-X" in (m["keys_raw"] or "").split(" ")
            and (store / "consumequeue" / m["topic"]).is_dir()
        }
    )
    r = cli(
        "index-lookup", "batch-X", "--limit", "1000000", "--store", store, "--broker-conf", conf, "--format", "jsonl"
    )
    assert r.exit_code == 0, r.stderr
    got = _jsonl(r)
    assert sorted(h["physical_offset"] for h in got) == want
    assert len({h["topic"] for h in got}) > 1


def test_show_collisions_reports_aaaa_bbbb(fixture):
    store, conf, exp = fixture
    q = next(
        q
        for q in exp["queries"]
        if q["topic"] == "PaymentTopic" and q["key"] == "AaAa" and q["begin"] == 0 and q["end"] == LONG_MAX
    )
    base = (
        "index-lookup",
        "AaAa",
        "--topic",
        "PaymentTopic",
        "--limit",
        "1000000",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--format",
        "jsonl",
    )
    plain = cli(*base)
    assert plain.exit_code == 0
    assert [h["physical_offset"] for h in _jsonl(plain)] == q["true_offsets"]
    assert "hash collision" in plain.stderr
    r = cli(*base, "--show-collisions")
    got = _jsonl(r)
    coll = [h for h in got if h["match"] == "collision"]
    assert sorted(h["physical_offset"] for h in coll) == sorted(
        set(q["query_message_offsets"]) - set(q["true_offsets"])
    )
    assert all("BBBB" in h["message"]["keys"] and "AaAa" not in h["message"]["keys"] for h in coll)
    assert {h["match"] for h in got} == {"keys", "collision"}


def test_v2_records_and_ipv6_ids(fixture):
    store, conf, exp = fixture
    v2 = [m for m in exp["messages"] if m["magic"] == "v2"]
    v6 = [m for m in exp["messages"] if m["store_host"].startswith("[")]
    assert v6
    picks = ([v2[0]] if v2 else []) + [v6[0]]
    for m in picks:
        r = cli("decode-msgid", m["msg_id"], "--store", store, "--broker-conf", conf, "--format", "jsonl")
        assert r.exit_code == 0, r.stderr
        (d,) = _jsonl(r)
        assert d["kind"] == "offset_msg_id" and d["physical_offset"] == m["physical_offset"]
        assert _host(d["store_host"]) == _host(m["store_host"]) and d["host_matches_store"] is True
        assert d["messages"][0]["magic"] == m["magic"]
    if v2:
        m = v2[-1]
        r = cli("index-lookup", m["uniq_key"], "--store", store, "--broker-conf", conf, "--format", "jsonl")
        assert r.exit_code == 0, r.stderr
        hits = _jsonl(r)
        assert m["physical_offset"] in [h["physical_offset"] for h in hits]
        assert {h["message"]["magic"] for h in hits if h["topic"] == m["topic"]} == {"v2"}
        assert len(m["topic"]) > 127


def test_decode_msgid_every_fixture_id(fixture):
    """Every offset msgId and UNIQ_KEY of the sample, through stdin, with the store."""
    store, conf, exp = fixture
    msgs = exp["messages"]
    sample = msgs[::7]
    ids = [m["msg_id"] for m in sample] + sorted({m["uniq_key"] for m in sample if m["uniq_key"]})
    assert any(len(i) == 56 for i in ids) and any(len(i) == 32 for i in ids)
    r = cli(
        "decode-msgid", "-", "--store", store, "--broker-conf", conf, "--format", "jsonl", input="\n".join(ids) + "\n"
    )
    got = {d["id"]: d for d in _jsonl(r)}
    for m in sample:
        d = got[m["msg_id"]]
        assert d["kind"] == "offset_msg_id", d
        assert d["physical_offset"] == m["physical_offset"] and d["found"] is True
        assert [x["physical_offset"] for x in d["messages"]] == [m["physical_offset"]]
    for u in {m["uniq_key"] for m in sample if m["uniq_key"]}:
        d = got[u]
        want = sorted(
            m["physical_offset"]
            for m in msgs
            if m["uniq_key"] == u and _indexed(m) and (store / "consumequeue" / m["topic"]).is_dir()
        )
        assert d["kind"] == "uniq_key", d
        assert sorted(x["physical_offset"] for x in d["messages"]) == want
        assert d["pid"] == int(u[-24:-20], 16)
    # some UNIQ_KEYs of ROLLBACK-only records may be unfindable through the index: exit 1 then
    assert r.exit_code == (0 if all(d["found"] for d in got.values()) else 1)


def test_fixture_store_is_not_modified(fixture):
    store, conf, exp = fixture
    before = tree_digest(store)
    m = exp["messages"][3]
    for args in (
        ("dump-cq", "PaymentTopic", "0"),
        ("dump-cq", "--summary"),
        ("index-lookup", "batch-X"),
        ("index-lookup", "AaAa", "--broker-window", "--show-collisions"),
        ("decode-msgid", m["msg_id"], m["uniq_key"] or m["msg_id"]),
    ):
        r = cli(*args, "--store", store, "--broker-conf", conf, "--format", "jsonl")
        assert r.exit_code in (0, 1), (args, r.stderr)
    assert tree_digest(store) == before


# ====================================================================== generated stores


@pytest.mark.slow
def test_small_store_every_unit_agrees(small_store):
    r = cli("dump-cq", "--summary", "--store", small_store, "--format", "jsonl")
    queues = _jsonl(r)
    assert len(queues) > 5 and any(len(q["files"]) > 1 for q in queues)
    msgs = _messages(small_store)
    by_off = {m["physical_offset"]: m for m in msgs}
    total = 0
    for q in queues:
        u = _jsonl(cli("dump-cq", q["topic"], q["queue_id"], "--store", small_store, "--format", "jsonl"))
        assert [x["cq_offset"] for x in u] == list(range(q["min_offset"], q["max_offset"]))
        assert all(x["status"] == "ok" for x in u)
        for x in u:
            m = by_off[x["commitlog_offset"]]
            assert (m["topic"], m["queue_id"], m["queue_offset"], m["total_size"]) == (
                q["topic"],
                q["queue_id"],
                x["cq_offset"],
                x["size"],
            )
            assert x["store_timestamp"] == m["store_timestamp"] and x["keys"] == m["keys"]
        total += len(u)
    # every NOT/COMMIT record has exactly one unit
    assert total == sum(1 for m in msgs if m["sys_flag"] & 0xC in (0, 0x8))


def test_dump_cq_from_limit_and_no_resolve(small_store):
    r = cli(
        "dump-cq",
        "OrderTopic",
        "1",
        "--store",
        small_store,
        "--from-offset",
        "97",
        "--limit",
        "5",
        "--no-resolve",
        "--format",
        "jsonl",
    )
    assert r.exit_code == 0
    u = _jsonl(r)
    assert [x["cq_offset"] for x in u] == [97, 98, 99, 100, 101]
    assert [x["file"] for x in u] == ["00000000000000000000"] * 3 + ["00000000000000002000"] * 2
    assert "agrees" not in u[0]
    r = cli("dump-cq", "OrderTopic", "1", "--store", small_store, "--from-offset", "100000")
    assert r.exit_code == 1


def test_pre_blank_units_are_shown_as_such(small_store):
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue, ConsumeQueueWriter

    root = small_store / "consumequeue"
    cq = ConsumeQueue(root, "OrderTopic", 1, 2000)
    units = list(cq.units())
    cq.close()
    cut = 120  # units 100 .. cut-1 of the second file become pre-blank
    assert len(units) > cut + 10
    shutil.rmtree(root / "OrderTopic" / "1")
    w = ConsumeQueueWriter(root, "OrderTopic", 1, 2000)
    for u in units[cut:]:
        w.put(u.commitlog_offset, u.size, u.tags_code, u.cq_offset)
    w.flush()
    r = cli("dump-cq", "OrderTopic", "1", "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    got = _jsonl(r)
    assert got[0]["cq_offset"] == 100 and got[-1]["cq_offset"] == units[-1].cq_offset
    pre = [x for x in got if x["pre_blank"]]
    assert [x["cq_offset"] for x in pre] == list(range(100, cut))
    assert all(x["status"] == "pre-blank" and x["agrees"] is None and x["problems"] == [] for x in pre)
    assert all(x["status"] == "ok" for x in got if not x["pre_blank"])
    s = _jsonl(cli("dump-cq", "OrderTopic", "1", "--summary", "--store", small_store, "--format", "jsonl"))[0]
    assert s["pre_blank_units"] == cut - 100 and s["max_offset"] == len(units)
    assert s["files"] == ["00000000000000002000"]
    table = cli("dump-cq", "OrderTopic", "1", "--store", small_store, "--limit", "3")
    assert table.exit_code == 0 and "pre-blank" in table.stdout


def test_dump_cq_reports_a_lying_unit(small_store):
    """A unit whose size and tags code disagree with its record is reported, not hidden."""
    import struct

    f = small_store / "consumequeue" / "OrderTopic" / "2" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    off, size, tags = struct.unpack_from(">qiq", data, 20 * 3)
    struct.pack_into(">qiq", data, 20 * 3, off, size + 1, tags ^ 1)
    f.write_bytes(bytes(data))
    u = _jsonl(cli("dump-cq", "OrderTopic", "2", "--store", small_store, "--limit", "5", "--format", "jsonl"))
    bad = [x for x in u if x["status"] != "ok"]
    assert [x["cq_offset"] for x in bad] == [3]
    assert bad[0]["agrees"] is False and len(bad[0]["problems"]) == 2
    assert any("size" in p for p in bad[0]["problems"]) and any("tags code" in p for p in bad[0]["problems"])


@pytest.mark.slow
def test_index_lookup_matches_dump_commitlog_oracle(small_store):
    msgs = _messages(small_store)
    counts: dict[str, int] = {}
    for m in msgs:
        for k in set(m["keys"]):
            counts[k] = counts.get(k, 0) + 1
    shared = max(counts, key=counts.get)
    assert counts[shared] > 3
    some_unique = [k for k, n in counts.items() if n == 1][:5]
    for key in [shared, *some_unique, msgs[10]["uniq_key"]]:
        want = sorted(m["physical_offset"] for m in msgs if _indexed(m) and (key in m["keys"] or m["uniq_key"] == key))
        r = cli("index-lookup", key, "--limit", "1000000", "--store", small_store, "--format", "jsonl")
        assert r.exit_code == 0, r.stderr
        got = _jsonl(r)
        assert sorted(h["physical_offset"] for h in got) == want, key
        assert all(_true_match(h["message"], h["topic"], key) for h in got)
    # --limit keeps the newest and says so
    newest = sorted((m["store_timestamp"], m["physical_offset"]) for m in msgs if _indexed(m) and shared in m["keys"])[
        -3:
    ]
    r = cli("index-lookup", shared, "--limit", "3", "--store", small_store, "--format", "jsonl")
    assert sorted(h["physical_offset"] for h in _jsonl(r)) == sorted(p for _, p in newest)
    assert "more than 3" in r.stderr
    # --limit 0 prints none, as everywhere; the old --max 0 meant every hit, and still does
    none = cli("index-lookup", shared, "--limit", "0", "--store", small_store, "--format", "jsonl")
    assert none.exit_code == 0 and none.stdout == ""
    every = cli("index-lookup", shared, "--max", "0", "--store", small_store, "--format", "jsonl")
    assert len(_jsonl(every)) == len([m for m in msgs if _indexed(m) and shared in m["keys"]])


def test_index_lookup_time_window_is_real_store_time(small_store):
    msgs = [m for m in _messages(small_store) if _indexed(m)]
    m = msgs[len(msgs) // 2]
    key = m["keys"][0]
    t = m["store_timestamp"]
    r = cli(
        "index-lookup",
        key,
        "--topic",
        m["topic"],
        "--begin",
        t,
        "--end",
        t,
        "--store",
        small_store,
        "--format",
        "jsonl",
    )
    assert r.exit_code == 0, r.stderr
    assert m["physical_offset"] in [h["physical_offset"] for h in _jsonl(r)]
    r = cli("index-lookup", key, "--topic", m["topic"], "--begin", t + 1, "--store", small_store, "--format", "jsonl")
    assert m["physical_offset"] not in [h["physical_offset"] for h in _jsonl(r)]
    iso = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")
    r = cli("index-lookup", key, "--topic", m["topic"], "--end", iso, "--store", small_store, "--format", "jsonl")
    assert m["physical_offset"] in [h["physical_offset"] for h in _jsonl(r)]


def test_first_entry_of_rolled_index_file_found_in_window(small_store):
    """The first entry of a rolled index file reads back late (docs/format/index.md#rolling); a window around its
    real store time still finds it."""
    from rmqstore_cli.store.queues.index import IndexFile

    files = sorted((small_store / "index").iterdir())
    assert len(files) > 2
    f = IndexFile(files[1], 64, 400)
    _, phy, _, _ = f.read_entry(1)
    f.close()
    msgs = {m["physical_offset"]: m for m in _messages(small_store)}
    m = msgs[phy]
    key = m["uniq_key"] or m["keys"][0]
    t = m["store_timestamp"]
    r = cli(
        "index-lookup",
        key,
        "--topic",
        m["topic"],
        "--begin",
        t - 10,
        "--end",
        t + 10,
        "--store",
        small_store,
        "--format",
        "jsonl",
    )
    assert r.exit_code == 0, r.stderr
    assert phy in [h["physical_offset"] for h in _jsonl(r)]


def test_topic_known_only_from_consumequeue(small_store):
    cfg = small_store / "config" / "topics.json"
    data = json.loads(cfg.read_text())
    assert "AuditTopic" in data["topicConfigTable"]
    del data["topicConfigTable"]["AuditTopic"]
    cfg.write_text(json.dumps(data))
    m = next(m for m in _messages(small_store) if m["topic"] == "AuditTopic" and m["uniq_key"])
    r = cli("index-lookup", m["uniq_key"], "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    assert [(h["topic"], h["physical_offset"]) for h in _jsonl(r)] == [("AuditTopic", m["physical_offset"])]


@pytest.mark.slow
def test_index_lookup_not_found_and_bad_store(small_store, tmp_path):
    r = run("index-lookup", "no-such-key", "--store", small_store)
    assert r.returncode == 1 and r.stdout.strip() == b"" or b"no-such-key" not in r.stdout
    assert r.stderr.startswith(b"rmqstore: no message with key")  # a negative answer, not an error line
    assert b"Traceback" not in r.stderr
    r = run("index-lookup", "x", "--store", tmp_path / "nothing")
    assert r.returncode == 3 and b"Traceback" not in r.stderr
    r = run("dump-cq", "--store", small_store)
    assert r.returncode == 2 and b"TOPIC" in r.stderr
    bad = tmp_path / "odd"
    bad.write_bytes(b"x" * 21)
    r = run("dump-cq", "--file", bad)
    assert r.returncode == 3 and b"multiple" in r.stderr and b"Traceback" not in r.stderr


def test_ipv6_offset_ids_in_generated_store(small_store):
    msgs = _messages(small_store)
    v6 = [m for m in msgs if m["store_host"].startswith("[")]
    assert v6
    ids = [m["msg_id"] for m in v6[:3]]
    assert all(len(i) == 56 for i in ids)
    r = cli("decode-msgid", *ids, "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    for d, m in zip(_jsonl(r), v6[:3], strict=True):
        assert d["kind"] == "offset_msg_id" and d["store_host"] == m["store_host"]
        assert d["host_matches_store"] is True and d["messages"][0]["physical_offset"] == m["physical_offset"]


def test_generated_store_is_not_modified(small_store):
    before = tree_digest(small_store)
    m = _messages(small_store)[5]
    for args in (
        ("dump-cq", "OrderTopic", "0"),
        ("dump-cq", "--summary"),
        ("dump-cq", "--file", small_store / "consumequeue" / "OrderTopic" / "0" / "00000000000000000000"),
        ("index-lookup", m["keys"][0], "--show-collisions"),
        ("index-lookup", m["keys"][0], "--broker-window"),
        ("decode-msgid", m["msg_id"], m["uniq_key"]),
    ):
        r = cli(*args, "--store", small_store, "--format", "jsonl")
        assert r.exit_code == 0, (args, r.stderr)
    assert tree_digest(small_store) == before


# ====================================================================== hostile text


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory):
    """A store whose topic and keys hold terminal escapes, rich markup and invalid UTF-8."""
    from rmqstore_cli.store.commitlog import AppendSpec
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.writer import StoreWriter

    root = tmp_path_factory.mktemp("hostile") / "store"
    cfg = StoreConfig.load(
        root,
        mapped_file_size_commit_log=65536,
        mapped_file_size_consume_queue=2000,
        max_hash_slot_num=64,
        max_index_num=400,
    )
    w = StoreWriter(cfg)
    host = (bytes([10, 0, 0, 1]), 10911)
    topics = ["Esc\x1b]0;pwned\x07[red]Topic", "PlainTopic"]
    for i in range(6):
        props = (
            "KEYS\x01\x1b[31mred [bold]mark[/bold] k\udcff" + str(i % 2) + "\x02TAGS\x01t\x1b[2J\x02"
            f"UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D000{i}"
        )
        w.append(
            AppendSpec(
                topic=topics[i % 2],
                queue_id=0,
                body=b"\x1b[31mbody",
                properties=props,
                store_timestamp=1_767_225_600_000 + i * 1000,
                born_timestamp=1_767_225_600_000 + i * 1000,
                born_host=host,
                store_host=host,
            )
        )
    w.append(
        AppendSpec(
            topic="BadUtf8Topic",
            queue_id=0,
            body=b"",
            properties="KEYS\x01bad-topic-key",
            store_timestamp=1_767_225_610_000,
            born_timestamp=1_767_225_610_000,
            born_host=host,
            store_host=host,
        )
    )
    w.close()
    # make the last record's topic invalid UTF-8 (same length, so the record stays valid)
    log = root / "commitlog" / "00000000000000000000"
    data = log.read_bytes()
    assert data.count(b"BadUtf8Topic") == 1
    log.write_bytes(data.replace(b"BadUtf8Topic", b"BadUtf8\xff\x1bpic"))
    return root


def _no_raw_controls(s: str) -> None:
    assert "\x1b" not in s and "\x07" not in s, repr(s[:300])


def test_hostile_text_is_escaped(hostile_store):
    topic = "Esc\x1b]0;pwned\x07[red]Topic"
    for fmt in ("table", "jsonl", "json"):
        for args in (
            ("index-lookup", "\x1b[31mred"),
            ("index-lookup", "[bold]mark[/bold]", "--show-collisions"),
            ("dump-cq", topic, "0"),
            ("decode-msgid", "AC100A0748FF5FFD2B276CDD6C4D0000"),
        ):
            r = cli(*args, "--store", hostile_store, "--format", fmt)
            assert r.exit_code == 0, (args, r.stderr)
            _no_raw_controls(r.stdout)
            _no_raw_controls(r.stderr)
            if fmt == "table" and args[0] != "decode-msgid":
                assert "[red]" in r.stdout or "[bold]mark[/bold]" in r.stdout  # markup shown, not applied
                assert "\\x1b" in r.stdout
    hits = _jsonl(cli("index-lookup", "\x1b[31mred", "--store", hostile_store, "--format", "jsonl"))
    assert len(hits) == 6 and {h["key"] for h in hits} == {"\x1b[31mred"}
    assert {h["topic"] for h in hits} == {topic, "PlainTopic"}
    assert all("properties_base64" in h["message"] for h in hits)  # invalid UTF-8 kept exactly
    bad_key = hits[0]["message"]["keys"][2]
    assert "\ufffd" in bad_key
    r = cli("index-lookup", bad_key, "--store", hostile_store, "--format", "jsonl")
    assert r.exit_code == 0 and len(_jsonl(r)) == 3
    # invalid UTF-8 (and an ESC) in a record's topic: the unit and the hit say so, escaped
    for fmt in ("table", "jsonl"):
        r = cli("dump-cq", "BadUtf8Topic", "0", "--store", hostile_store, "--format", fmt)
        assert r.exit_code == 0
        _no_raw_controls(r.stdout)
        assert "record's topic is" in r.stdout
        r = cli(
            "index-lookup",
            "bad-topic-key",
            "--topic",
            "BadUtf8Topic",
            "--show-collisions",
            "--store",
            hostile_store,
            "--format",
            fmt,
        )
        assert r.exit_code == 1 and "BadUtf8" in r.stdout  # only a collision: the real topic differs
        _no_raw_controls(r.stdout)
    (h,) = _jsonl(
        cli(
            "index-lookup",
            "bad-topic-key",
            "--topic",
            "BadUtf8Topic",
            "--show-collisions",
            "--store",
            hostile_store,
            "--format",
            "jsonl",
        )
    )
    assert h["match"] == "collision" and h["message"]["topic_base64"] == "QmFkVXRmOP8bcGlj"
    r = cli("decode-msgid", "\x1b[2J\x1b]0;x\x07", "--format", "table")
    assert r.exit_code == 1 and "not a message id" in r.stderr
    _no_raw_controls(r.stderr)


# ====================================================================== decode-msgid without a store


def test_decode_msgid_worked_examples():
    r = cli(
        "decode-msgid",
        "0A00000500002A9F0000000040001000",
        "20010DB800000000000000000000000500002A9F0000000040001000",
        "c0a8010a30391b6d358647b760000001",
        "20010DB8000000000000000000000010FFFF1B6D358647B76000FFFF",
        "--now",
        "2026-11-21T00:00:00Z",
        "--tz",
        "UTC",
        "--format",
        "jsonl",
    )
    assert r.exit_code == 0, r.stderr
    a, b, c, d = _jsonl(r)
    assert (a["kind"], a["store_host"], a["physical_offset"]) == ("offset_msg_id", "10.0.0.5:10911", 1073745920)
    assert "client_ip" not in a
    assert (b["kind"], b["store_host"], b["physical_offset"]) == ("offset_msg_id", "[2001:db8::5]:10911", 1073745920)
    assert c["id"] == "C0A8010A30391B6D358647B760000001" and c["kind"] == "uniq_key"
    assert (c["client_ip"], c["pid"], c["class_loader_hash"], c["counter"]) == ("192.168.1.10", 12345, "1B6D3586", 1)
    assert c["nearly_time"] == int(dt.datetime(2026, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc).timestamp() * 1000)
    assert "store_host" not in c
    assert (d["kind"], d["client_ip"], d["pid"], d["counter"]) == (
        "uniq_key",
        "2001:0db8:0000:0000:0000:0000:0000:0010",
        65535,
        65535,
    )


def test_decode_msgid_ambiguous_invalid_and_stdin():
    r = run(
        "decode-msgid",
        "-",
        "--format",
        "jsonl",
        input=b"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF\n  0A00000500002A9F0000000040001000 nothex!\n1234\n",
    )
    assert r.returncode == 1
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert [d["kind"] for d in out] == ["ambiguous", "offset_msg_id"]
    assert "store_host" in out[0] and "client_ip" in out[0]  # both readings when undecidable
    err = r.stderr.decode().splitlines()
    assert any("'nothex!'" in e and "hex digit" in e for e in err)
    assert any("'1234'" in e and "4 hex digits" in e for e in err)
    assert err[-1] == "rmqstore: 2 of 4 ids were invalid or not found"
    assert b"Traceback" not in r.stderr


def test_decode_msgid_not_found_in_store(small_store):
    r = cli("decode-msgid", "0A00000500002A9F00000000FFFFFFFF", "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 1
    (d,) = _jsonl(r)
    assert d["found"] is False and d["messages"] == [] and "no commit-log file" in d["offset_problem"]


def test_decode_msgid_imports_no_numpy(small_store):
    m = _messages(small_store)[1]
    code = (
        "import sys\n"
        "from rmqstore_cli.app import main\n"
        f"sys.argv = ['rmqstore', 'decode-msgid', {m['msg_id']!r}, {m['uniq_key']!r}, "
        f"'--store', {str(small_store)!r}, '--format', 'jsonl']\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print('NUMPY' if 'numpy' in sys.modules else 'LIGHT', code, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert p.stderr.decode().split()[-2:] == ["LIGHT", "0"], p.stderr.decode()
    assert len(p.stdout.splitlines()) == 2


def test_help_has_examples():
    for c in ("dump-cq", "index-lookup", "decode-msgid"):
        r = cli(c, "--help")
        assert r.exit_code == 0 and "Examples:" in r.stdout and f"rmqstore {c}" in r.stdout


def test_index_lookup_lower_case_uniq_key_and_bad_window(fixture):
    store, conf, exp = fixture
    m = next(m for m in exp["messages"] if m["uniq_key"] and m["topic"] == "PaymentTopic")
    r = cli("index-lookup", m["uniq_key"].lower(), "--topic", "PaymentTopic", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0 and "upper-case" in r.stderr
    assert [h["physical_offset"] for h in _jsonl(r)] == [m["physical_offset"]]
    assert cli("index-lookup", "x", "--begin", "10", "--end", "5", "--store", store).exit_code == 2
