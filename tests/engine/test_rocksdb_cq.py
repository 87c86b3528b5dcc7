"""The RocksDB consume queue (``storeType=defaultRocksDB``, docs/format/rocksdb.md): the real
5.3.3 sample against its expected.json (what RocksDBConsumeQueueStore answered), a real
RocksDB database written here through the binding from the Java's documented layouts
(tests/helpers/rocksdb_build.py), damaged databases, and config kept in RocksDB."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli, generate_plain, tree_digest
from tests.helpers.rocksdb_build import (
    cq_key,
    cq_value,
    offset_key,
    store_times,
    to_rocksdb_store,
    v2_offset_key,
    v2_topic_key,
    write_cq_db,
    write_kv_db,
)

pytest.importorskip("rocksdict", reason="needs rocksdict: the rocksdb and test extras")


def jsonl(r) -> list[dict]:
    return [json.loads(x) for x in r.stdout.splitlines()]


def tree(root: Path) -> tuple[set[str], dict]:
    """Every path below root (directories and links too) and every file's hash and mtime."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}, tree_digest(root)


def one_queue(base: Path) -> tuple[dict, str, int, list]:
    """The store times of ``base``'s records, and its one file queue: topic, queue id, units."""
    from tests.helpers.rocksdb_build import file_cq_units

    (((topic, qid), units),) = file_cq_units(base / "consumequeue").items()
    return store_times(base), topic, qid, units


@pytest.fixture(scope="module")
def sample(sample_tarball):
    d = sample_tarball("rocksdb")
    return d / "store", json.loads((d / "expected.json").read_text())


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A generated store whose consume queue was moved into a real RocksDB database (the
    broker's layout, written by independent code), beside the file-CQ original."""
    base = tmp_path_factory.mktemp("rdb")
    src = generate_plain(base / "files", topics=3, queues=2, messages=400)
    queues = to_rocksdb_store(src, base / "rocks", store_times(src))
    return src, base / "rocks", queues


# ---------------------------------------------------------------- the real sample


def test_sample_bounds_and_entries_RocksDBConsumeQueueStore_getMaxOffsetInQueue(sample):
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

    store, exp = sample
    db = RocksDBConsumeQueues(store / "consumequeue")
    try:
        assert db.families == exp["columnFamilies"]
        got = {(q.topic, q.queue_id): q for q in db.queues()}
        assert sorted(got) == sorted((q["topic"], q["queueId"]) for q in exp["queues"])
        for e in exp["queues"]:
            q = got[e["topic"], e["queueId"]]
            assert (q.min_offset(exp["commitLog"]["minPhyOffset"]), q.max_offset) == (e["minOffset"], e["maxOffset"])
            assert q.key_bounds == (e["minOffset"], e["maxOffset"])
            assert q.offset_rows["max"].commitlog_offset == e["maxPhysicOffset"]
        for e in exp["entries"]:
            v = got[e["topic"], e["queueId"]].value(e["cqOffset"])
            assert v == (e["phyOffset"], e["size"], e["tagsCode"], e["storeTime"])
        assert db.max_phy_offset == exp["commitLog"]["maxPhyOffsetInConsumeQueue"]
        assert db.bad_rows == []
    finally:
        db.close()


@pytest.mark.slow
def test_sample_every_reader_agrees_and_no_byte_changes(sample):
    """dump-cq, --summary, search-offset, stats, verify, consumer-progress's queue bounds:
    each agrees with expected.json, and the sample's tree (names, bytes, mtimes) is the same
    after every command: the read-only open writes nothing beside the database."""
    store, exp = sample
    before = tree(store)
    summary = {
        (d["topic"], d["queue_id"]): d for d in jsonl(cli("dump-cq", "--summary", "-s", store, "--format", "jsonl"))
    }
    for e in exp["queues"]:
        d = summary[e["topic"], e["queueId"]]
        assert (d["min_offset"], d["max_offset"], d["files"]) == (e["minOffset"], e["maxOffset"], ["rocksdb"])
    for e in exp["entries"]:
        r = cli(
            "dump-cq",
            e["topic"],
            e["queueId"],
            "-s",
            store,
            "--from-offset",
            e["cqOffset"],
            "--limit",
            "1",
            "--format",
            "jsonl",
        )
        assert r.exit_code == 0, r.stderr
        (u,) = jsonl(r)
        assert (u["commitlog_offset"], u["size"], u["tags_code"], u["store_timestamp"], u["status"]) == (
            e["phyOffset"],
            e["size"],
            e["tagsCode"],
            e["storeTime"],
            "ok",
        )
    for e in exp["entries"]:  # the first unit stored at or after an entry's time is at or before it
        r = cli(
            "search-offset",
            "-s",
            store,
            "--topic",
            e["topic"],
            "--queue-id",
            e["queueId"],
            "--time",
            e["storeTime"],
            "--format",
            "jsonl",
        )
        (res,) = jsonl(r)
        assert res["offset"] <= e["cqOffset"] and res["store_timestamp"] == e["storeTime"]
        r = cli(
            "search-offset",
            "-s",
            store,
            "--topic",
            e["topic"],
            "--queue-id",
            e["queueId"],
            "--time",
            e["storeTime"],
            "--broker",
            "--format",
            "jsonl",
        )
        (b,) = jsonl(r)
        assert b["method"] == "broker-5-lower" and b["offset"] == res["offset"]
    r = cli("stats", "-s", store, "--format", "jsonl")
    rows = {d["topic"]: d["messages"] for d in jsonl(r)[:-1]}
    assert rows == exp["perTopic"]
    r = cli("verify", "-s", store, "--format", "json")
    v = json.loads(r.stdout)["summary"]
    assert r.exit_code == 0 and v["errors"] == 0 and v["warnings"] == 0, r.stdout
    assert set(v["findings"]) <= {"store.unchecked-entry"}  # compaction/, read by another branch
    assert v["consume_queues"] == len(exp["queues"]) and v["messages"] == exp["messages"]
    r = cli("consumer-progress", "-s", store)  # the sample has no config/: a negative answer
    assert r.exit_code == 1 and "no consumer offsets" in r.stderr
    r = cli("index-lookup", "K-CartTopic-1", "-s", store, "--topic", "CartTopic", "--format", "jsonl")
    assert r.exit_code == 0 and jsonl(r)[0]["physical_offset"] == exp["entries"][0]["phyOffset"], r.stderr
    assert tree(store) == before


def test_sample_mutating_commands_refuse_it(sample, tmp_path):
    """expire and an in-place rebuild-index would write file queues or delete files under a
    RocksDB consume queue: refused (exit 3), the store unchanged."""
    store, _ = sample
    before = tree(store)
    for args in (["expire", "-s", store, "--dry-run"], ["rebuild-index", "-s", store, "--in-place"]):
        r = cli(*args)
        assert r.exit_code == 3 and "RocksDB" in r.stderr, r.stderr
    assert tree(store) == before


def test_rebuild_index_output_writes_file_queues_beside_it(sample, tmp_path):
    """rebuild-index --output DIR: file consume queues from the commit log, beside the database,
    holding the units the database holds."""
    store, exp = sample
    out = tmp_path / "out"
    r = cli("rebuild-index", "-s", store, "--output", out, "--only", "cq", "--format", "json")
    assert r.exit_code == 0, r.stderr
    for e in exp["entries"]:
        r = cli(
            "dump-cq",
            e["topic"],
            e["queueId"],
            "-s",
            out,
            "--cq-file-size",
            "6000000",
            "--from-offset",
            e["cqOffset"],
            "--limit",
            "1",
            "--format",
            "jsonl",
        )
        (u,) = jsonl(r)
        assert (u["commitlog_offset"], u["size"], u["tags_code"]) == (e["phyOffset"], e["size"], e["tagsCode"])


@pytest.mark.parametrize("command", [["dump-cq", "--summary"], ["stats"]])
def test_missing_binding_is_one_line_naming_the_extra(sample, command):
    store, _ = sample
    code = (
        "import sys; sys.modules['rocksdict'] = None; from rmqstore_cli.app import main; "
        f"sys.argv = ['rmqstore', *{command!r}, '-s', {str(store)!r}]; main()"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    lines = [x for x in p.stderr.splitlines() if "error" in x]
    assert len(lines) == 1 and "rmqstore[rocksdb]" in lines[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("fmt", ["jsonl", "table"])
def test_verify_without_the_binding_checks_the_rest_and_names_what_it_did_not(sample, fmt):
    """verify checks the commit log, index and the rest, and says the RocksDB consume queue was
    not checked and why (no unit is reported missing from a queue it could not read)."""
    store, _ = sample
    code = (
        "import sys; sys.modules['rocksdict'] = None; from rmqstore_cli.app import main; "
        f"sys.argv = ['rmqstore', 'verify', '-s', {str(store)!r}, '--format', {fmt!r}]; main()"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    if fmt == "jsonl":
        lines = [json.loads(x) for x in p.stdout.splitlines()]
        summary = lines[-1]["summary"]
        assert "rmqstore[rocksdb]" in summary["skipped"]["rocksdb consume queue"]
        assert summary["messages"] > 0 and summary["files"]["commitlog"] >= 1
        assert [f for f in lines[:-1] if f["check"].startswith(("cq.", "lmq."))] == []
    else:
        assert "not checked: rocksdb consume queue" in p.stdout and "rmqstore[rocksdb]" in p.stdout
        assert "nothing wrong in what was checked" in p.stdout and "the store is consistent" not in p.stdout


def test_generate_append_refuses_it(sample, tmp_path):
    """generate --append would put file units inside the database: refused, nothing written."""
    store, _ = sample
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    before = tree(copy)
    r = cli("generate", "--store", copy, "--append", "--messages", "5")
    assert r.exit_code == 3 and "RocksDB" in r.stderr, r.stderr
    assert tree(copy)[0] == before[0] and all(tree(copy)[1][k][0] == v[0] for k, v in before[1].items())


def test_corrupt_database_is_a_finding(tmp_path):
    """CURRENT names a MANIFEST that is not there: rocksdb.unreadable (verify goes on with
    the commit log, whose messages then have no unit it could read), and a one-line error
    (exit 3) for dump-cq."""
    store, _ = _damaged(tmp_path)
    (store / "consumequeue" / "CURRENT").write_text("MANIFEST-999999\n")
    code, found = _findings(store)
    errors = [f["check"] for f in found if f["severity"] == "error"]
    assert code == 1 and errors[0] == "rocksdb.unreadable" and set(errors) == {"rocksdb.unreadable", "cq.missing-unit"}
    r = cli("dump-cq", "--summary", "-s", store)
    assert r.exit_code == 3 and "cannot open the RocksDB consume queue" in r.stderr


# ---------------------------------------------------------------- a database written here


def test_built_database_reads_as_the_file_queues(built):
    """Every unit of every queue reads back the same from the database as from the files."""
    src, rocks, queues = built
    for (topic, qid), units in queues.items():
        a = jsonl(cli("dump-cq", topic, qid, "-s", src, "--format", "jsonl"))
        b = jsonl(cli("dump-cq", topic, qid, "-s", rocks, "--format", "jsonl"))
        assert len(a) == len(units) and len(b) == len(units)
        keep = ("cq_offset", "commitlog_offset", "size", "tags_code", "status", "store_timestamp")
        assert [{k: u[k] for k in keep} for u in a] == [{k: u[k] for k in keep} for u in b]
    sa = jsonl(cli("stats", "-s", src, "--by", "queue", "--format", "jsonl"))[:-1]
    sb = jsonl(cli("stats", "-s", rocks, "--by", "queue", "--format", "jsonl"))[:-1]
    drop = ("cq_bytes", "share")
    assert [{k: v for k, v in d.items() if k not in drop} for d in sa] == [
        {k: v for k, v in d.items() if k not in drop} for d in sb
    ]


def test_built_database_verifies_clean(built):
    _, rocks, queues = built
    r = cli("verify", "-s", rocks, "--format", "json")
    s = json.loads(r.stdout)["summary"]
    assert r.exit_code == 0 and s["findings"] == {}, r.stdout
    assert s["consume_queues"] == len(queues)


@pytest.mark.slow
def test_search_offset_broker_binarySearchInCQByTime(built):
    """--broker on a RocksDB queue: RocksDBConsumeQueueTable#binarySearchInCQByTime over the
    values' store times: LOWER the first unit at or after, UPPER the last at or before."""
    _, rocks, queues = built
    (topic, qid), units = next(iter(queues.items()))
    for cq, _, _, _, ts in units[:: max(1, len(units) // 7)]:
        lower = [c for c, _, _, _, t in units if t >= ts][0]
        upper = [c for c, _, _, _, t in units if t <= ts][-1]
        for boundary, want in (("lower", lower), ("upper", upper)):
            r = cli(
                "search-offset",
                "-s",
                rocks,
                "-t",
                topic,
                "--queue-id",
                qid,
                "--time",
                ts,
                "--broker",
                "--broker-version",
                "5",
                "--boundary",
                boundary,
                "--format",
                "jsonl",
            )
            assert jsonl(r)[0]["offset"] == want, (cq, boundary)
    after = units[-1][4] + 1
    r = cli(
        "search-offset", "-s", rocks, "-t", topic, "--queue-id", qid, "--time", after, "--broker", "--format", "jsonl"
    )
    assert jsonl(r)[0]["offset"] == units[-1][0] + 1  # ceiling + 1 when every unit is older


# ---------------------------------------------------------------- damaged databases


def _damaged(tmp_path: Path, **kw) -> tuple[Path, dict]:
    base = generate_plain(tmp_path / "files", topics=2, queues=1, messages=60)
    queues = to_rocksdb_store(base, tmp_path / "rocks", store_times(base), **kw)
    return tmp_path / "rocks", queues


def _findings(store: Path) -> tuple[int, list[dict]]:
    r = cli("verify", "-s", store, "--format", "jsonl")
    return r.exit_code, jsonl(r)[:-1]


def test_missing_offset_family(tmp_path):
    """No 'offset' family: rocksdb.offset-family; the queues still read from their keys."""
    store, queues = _damaged(tmp_path, offset_family=False)
    code, found = _findings(store)
    assert code == 1 and [f["check"] for f in found if f["severity"] == "error"] == ["rocksdb.offset-family"]
    (topic, qid), units = next(iter(queues.items()))
    d = {(x["topic"], x["queue_id"]): x for x in jsonl(cli("dump-cq", "--summary", "-s", store, "--format", "jsonl"))}
    assert d[topic, qid]["max_offset"] == units[-1][0] + 1


def test_value_of_the_wrong_length(tmp_path):
    """A 27-byte value: rocksdb.value-size naming its cq offset; the unit is missing from
    the queue (cq.missing-unit for its message)."""
    store, queues = _damaged(tmp_path)
    (topic, qid), units = next(iter(queues.items()))
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(
        str(store / "consumequeue"),
        options=Options(raw_mode=True),
        access_type=AccessType.read_write(),
        column_families={"offset": Options(raw_mode=True)},
    )
    c, phy, size, tags, ts = units[3]
    db[cq_key(topic, qid, c)] = cq_value(phy, size, tags, ts)[:27]
    db.close()
    (store / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)
    code, found = _findings(store)
    checks = {f["check"] for f in found}
    assert code == 1 and {"rocksdb.value-size", "cq.missing-unit"} <= checks
    assert any(f"cq offset {c} has 27 bytes" in f["detail"] for f in found if f["check"] == "rocksdb.value-size")


def test_entry_pointing_past_the_log(tmp_path):
    """A unit beyond the commit log's end, recorded as the queue's max as dispatch would:
    cq.unit-target (past the end), and the max row at or past the checkpoint."""
    store, queues = _damaged(tmp_path)
    (topic, qid), units = next(iter(queues.items()))
    n, end = units[-1][0] + 1, (store / "commitlog" / "00000000000000000000").stat().st_size * 4
    _rewrite(
        store,
        {cq_key(topic, qid, n): cq_value(end, 200, 0, units[-1][4])},
        {offset_key(topic, qid, "max"): end.to_bytes(8, "big") + n.to_bytes(8, "big")},
    )
    code, found = _findings(store)
    target = [f for f in found if f["check"] == "cq.unit-target"]
    assert code == 1 and len(target) == 1 and "beyond the end of the commit log" in target[0]["detail"]
    assert f"unit {n} -> {end}" in target[0]["detail"]
    assert [f["check"] for f in found if f["check"].startswith("rocksdb.")] == ["rocksdb.checkpoint"]


def test_offset_rows_disagreeing_with_the_keys(tmp_path):
    """The max row one unit short of the keys, the min row below them: rocksdb.offset-row."""
    store, queues = _damaged(tmp_path)
    (topic, qid), units = next(iter(queues.items()))
    last, first = units[-2], units[0]
    _rewrite(
        store,
        {},
        {
            offset_key(topic, qid, "max"): last[1].to_bytes(8, "big") + last[0].to_bytes(8, "big"),
            offset_key(topic, qid, "min"): first[1].to_bytes(8, "big") + (-1).to_bytes(8, "big", signed=True),
        },
    )
    code, found = _findings(store)
    rows = [f["detail"] for f in found if f["check"] == "rocksdb.offset-row"]
    assert code == 1 and len(rows) == 2
    assert f"max row says cq offset {last[0]}, the last unit is {units[-1][0]}" in rows[0] + rows[1]


def _rewrite(store: Path, default: dict, offset: dict) -> None:
    """Put rows into the test's database (read-write, as a broker would)."""
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(
        str(store / "consumequeue"),
        options=Options(raw_mode=True),
        access_type=AccessType.read_write(),
        column_families={"offset": Options(raw_mode=True)},
    )
    for k, v in default.items():
        db[k] = v
    off = db.get_column_family("offset")
    for k, v in offset.items():
        off[k] = v
    db.close()
    (store / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)


def test_hostile_database_entry_is_one_line(tmp_path):
    """A FIFO inside the database: refused before the binding opens it (one line, exit 3)."""
    store, _ = _damaged(tmp_path)
    os.mkfifo(store / "consumequeue" / "000099.sst")
    r = cli("dump-cq", "--summary", "-s", store)
    assert r.exit_code == 3 and "FIFO" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- config in RocksDB


def test_config_in_rocksdb_topics_and_offsets(built, tmp_path):
    """v1 config/consumerOffsets/ and config/topics/ (RocksDBConsumerOffsetManager,
    RocksDBTopicConfigManager) and v2 config/rdb/ (ConsumerOffsetManagerV2): consumer-progress
    reads the offsets, the topic lists the topics; the databases are not changed."""
    _, rocks, queues = built
    store = tmp_path / "store"
    shutil.copytree(rocks, store)
    (topic, qid), units = sorted(queues.items())[0]
    cfg = store / "config"
    write_kv_db(cfg / "consumerOffsets", {f"{topic}@g1".encode(): ('{"offsetTable":{' + str(qid) + ":3}}").encode()})
    write_kv_db(cfg / "topics", {b"OnlyInRocksTopic": b'{"topicName":"OnlyInRocksTopic"}'})
    write_kv_db(
        cfg / "rdb", {v2_offset_key("g2", topic, qid): (5).to_bytes(8, "big"), v2_topic_key("V2Topic"): b"\x01{}"}
    )
    before = tree(cfg)
    rows = jsonl(cli("consumer-progress", "-s", store, "--format", "jsonl"))
    got = {(r["group"], r["topic"], r["queue_id"]): (r["consumer_offset"], r["max_offset"], r["file"]) for r in rows}
    n = units[-1][0] + 1
    assert got[("g1", topic, qid)] == (3, n, "consumerOffsets/")
    assert got[("g2", topic, qid)] == (5, n, "rdb/")
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.message_store import MessageStore

    ms = MessageStore.open(StoreConfig.load(store, None))
    try:
        assert {"OnlyInRocksTopic", "V2Topic", topic} <= set(ms.topics())
    finally:
        ms.close()
    assert tree(cfg) == before


def test_sample_outputs_follow_the_schemas(sample, built):
    """dump-cq's units and summary, consumer-progress's rows and verify's findings of a
    RocksDB store validate against schemas/ (files: ["rocksdb"], file: rocksdb)."""
    from tests.helpers.contract import validate

    store, exp = sample
    for d in jsonl(cli("dump-cq", "--summary", "-s", store, "--format", "jsonl")):
        validate(d, "cq-summary")
    e = exp["entries"][0]
    for d in jsonl(cli("dump-cq", e["topic"], e["queueId"], "-s", store, "--limit", "3", "--format", "jsonl")):
        validate(d, "cq-unit")
    lines = jsonl(cli("verify", "-s", store, "--format", "jsonl"))
    for d in lines[:-1]:
        validate(d, "verify-finding")
    validate(lines[-1], "verify-summary")


@pytest.mark.slow
def test_the_shadow_directory_is_removed(sample, tmp_path):
    """The temp directory of links the database is opened through (rocksdb_db.shadow_dir) is gone
    after each command, and the store's own directory got nothing."""
    from tests.helpers import run

    store, _ = sample
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for args in (["dump-cq", "--summary"], ["verify"], ["stats"]):
        p = run(*args, "-s", store, env={"TMPDIR": str(tmp)})
        assert p.returncode == 0, p.stderr
        assert list(tmp.iterdir()) == []
    assert "rocksdict-config.json" not in os.listdir(store / "consumequeue")


def test_layouts_agree_with_the_java_byte_for_byte():
    """formats/rocksdb_cq.py against the independent struct code (from the Java's builders):
    keys built and parsed, the 28-byte value through the construct, struct and numpy views."""
    import numpy as np
    from rmqstore_cli.formats import rocksdb_cq as fmt

    from rmqstore_cli.store.queues.rocksdb_cq import cq_key as our_key, parse_cq_key, parse_offset_key

    for topic, qid, off in (("T", 0, 0), ("订单-Topic", 7, 1 << 40), ("%RETRY%g", 2**31 - 1, 2**63 - 1)):
        k = cq_key(topic, qid, off)
        assert our_key(topic.encode(), qid, off) == k and len(k) == fmt.CQ_KEY_FIXED + len(topic.encode())
        assert parse_cq_key(k) == (topic.encode(), qid, off)
        ok = offset_key(topic, qid, "max")
        assert parse_offset_key(ok) == (topic.encode(), b"max", qid)
        assert parse_cq_key(ok) is None and parse_offset_key(k) is None
    assert parse_cq_key(cq_key("T", 0, 0)[:-1]) is None
    assert parse_cq_key(cq_key("T", 0, 0).replace(b"\x01", b"\x02", 1)) is None
    v = cq_value(123, 456, -5, 1795510647461)
    assert len(v) == fmt.CQ_VALUE_SIZE == 28
    c = fmt.CqValue.parse(v)
    a = np.frombuffer(v, fmt.CQ_VALUE_DTYPE)[0]
    assert (c.commitlog_offset, c.size, c.tags_code, c.store_time) == (123, 456, -5, 1795510647461) == tuple(a.tolist())


def test_a_hole_in_the_keys(tmp_path):
    """A deleted unit inside a queue: rocksdb.gap counts it, and its message has no unit."""
    store, queues = _damaged(tmp_path)
    (topic, qid), units = next(iter(queues.items()))
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(
        str(store / "consumequeue"),
        options=Options(raw_mode=True),
        access_type=AccessType.read_write(),
        column_families={"offset": Options(raw_mode=True)},
    )
    del db[cq_key(topic, qid, units[4][0])]
    db.close()
    (store / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)
    code, found = _findings(store)
    gap = [f for f in found if f["check"] == "rocksdb.gap"]
    assert code == 1 and len(gap) == 1 and gap[0]["count"] == 1
    missing = [f for f in found if f["check"] == "cq.missing-unit"]
    assert len(missing) == 1 and f"unit {units[4][0]} " in missing[0]["detail"]
    assert "no key for it in the RocksDB consume queue" in missing[0]["detail"]


def test_min_offset_past_expired_messages_getMinCqOffset(built):
    """The min row below the commit log's first offset: the first unit at or after it
    (RocksDBConsumeQueueOffsetTable#correctMinCqOffset's binarySearchInCQ with min);
    max + 1 when every unit is below it."""
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

    _, rocks, queues = built
    (topic, qid), units = next(iter(queues.items()))
    db = RocksDBConsumeQueues(rocks / "consumequeue")
    try:
        q = db.queue(topic, qid)
        assert q.min_offset(0) == units[0][0]
        for i in (1, 5, len(units) - 1):
            assert q.min_offset(units[i][1]) == units[i][0]
            assert q.min_offset(units[i][1] - 1) == units[i][0]
        assert q.min_offset(units[-1][1] + 1) == units[-1][0] + 1
    finally:
        db.close()


def test_a_key_off_the_layout(tmp_path):
    """A key that is not (topic length, CTRL_1, topic, CTRL_1, queueId, CTRL_1, cqOffset):
    rocksdb.key, named by its bytes; the queues around it still read."""
    store, queues = _damaged(tmp_path, extra=[(b"\x00\x00\x00\x02\x01AB\x02junk", b"x" * 28)])
    code, found = _findings(store)
    keys = [f for f in found if f["check"] == "rocksdb.key"]
    assert code == 1 and len(keys) == 1 and "00000002014142026a756e6b" in keys[0]["detail"]
    assert {f["check"] for f in found} == {"rocksdb.key"}


def test_shell_completion_offers_its_topics_and_queue_ids(sample):
    """Completion reads a RocksDB consume queue's queues (read-only) like queue directories."""
    from rmqstore_cli.commands.common import complete_queue_id, complete_topic

    class Ctx:
        def __init__(self, **params):
            self.params = params

    store, exp = sample
    before = tree(store)
    assert complete_topic(Ctx(store=store), "") == sorted({q["topic"] for q in exp["queues"]})
    assert complete_topic(Ctx(store=store), "Sh") == ["ShipTopic"]
    assert complete_queue_id(Ctx(store=store, topic="CartTopic"), "") == ["0", "1"]
    assert tree(store) == before


def test_dispatch_checkpoint_decides_what_is_missing(tmp_path):
    """A RocksDB queue's units are due up to its CHECKPOINT_TOPIC offset, not up to the store
    checkpoint's logicsMsgTimestamp (which this queue does not keep: zero here): units past
    the checkpoint are cq.not-dispatched (info), units below it cq.missing-unit (error)."""
    base = generate_plain(tmp_path / "files", topics=1, queues=1, messages=40)
    times, topic, qid, units = one_queue(base)
    kept = [(c, p, s, t, times[p]) for c, p, s, t in units[:25]]
    for cp, want in ((units[25][1], "cq.not-dispatched"), (units[-1][1] + units[-1][2], "cq.missing-unit")):
        store = tmp_path / f"rocks-{want}"
        shutil.copytree(base, store)
        shutil.rmtree(store / "consumequeue")
        with open(store / "checkpoint", "r+b") as f:  # logicsMsgTimestamp (StoreCheckpoint#flush) = 0
            f.seek(8)
            f.write(bytes(8))
        write_cq_db(store / "consumequeue", {(topic, qid): kept}, checkpoint=cp)
        code, found = _findings(store)
        got = [(f["check"], f["count"]) for f in found if f["check"].startswith("cq.")]
        assert got == [(want, len(units) - 25)], found
        assert code == (1 if want == "cq.missing-unit" else 0)
        if want == "cq.not-dispatched":
            assert (
                f"dispatch checkpoint {cp} (CHECKPOINT_TOPIC)" in [f for f in found if f["check"] == want][0]["detail"]
            )


def test_malformed_keys_inside_a_queue_range(tmp_path):
    """Keys with a queue's prefix but the wrong length, at its ends and in the middle: no
    traceback; every unit still reads and the bounds are the well-formed keys'."""
    from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

    base = generate_plain(tmp_path / "files", topics=1, queues=1, messages=20)
    times, topic, qid, units = one_queue(base)
    prefix = cq_key(topic, qid, 0)[:-8]
    junk = [(prefix + b"\x00", b"j"), (prefix + b"\x00" * 9, b"j"), (prefix + b"\x7f" * 10, b"j")]
    rows = [(c, p, s, t, times[p]) for c, p, s, t in units]
    write_cq_db(tmp_path / "db", {(topic, qid): rows}, extra=junk)
    db = RocksDBConsumeQueues(tmp_path / "db")
    try:
        q = db.queue(topic, qid)
        assert q.key_bounds == (0, len(units))
        got = [u.commitlog_offset for u in q.units()]
        assert got == [p for _, p, _, _ in units]
    finally:
        db.close()
