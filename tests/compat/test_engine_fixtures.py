"""The engine agrees exactly with stores written by the real 4.9.7 and 5.3.3 brokers."""

from __future__ import annotations

import base64
import filecmp
import ipaddress
import json

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.message_store import MessageStore
from tests.helpers import cli


def _host(h: str):
    """Java's InetSocketAddress text and ours ([compressed v6]) name the same address."""
    addr, _, port = h[1:].partition("]:") if h.startswith("[") else h.rpartition(":")
    return ipaddress.ip_address(addr), int(port)


def _open(fixture) -> MessageStore:
    store, conf, _ = fixture
    return MessageStore.open(StoreConfig.load(store, conf))


def test_dump_commitlog_matches_broker_decode(fixture):
    store, conf, exp = fixture
    r = cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl", "--body", "base64")
    assert r.exit_code == 0, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(got) == len(exp["messages"])
    for e, g in zip(exp["messages"], got, strict=True):
        for k, v in e.items():
            if k == "body_base64":
                assert g["body"] == v and g["body_encoding"] == "base64"
            elif k in ("born_host", "store_host"):
                assert _host(g[k]) == _host(v), (e["physical_offset"], k)
            elif k == "keys_raw":
                assert g["properties"].get("KEYS") == v
            else:
                assert g[k] == v, (e["physical_offset"], k)


def test_dump_without_broker_conf_infers_sizes(fixture):
    store, _, exp = fixture
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--no-properties")
    assert r.exit_code == 0, r.stderr
    assert [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()] == [
        m["physical_offset"] for m in exp["messages"]
    ]


def test_blanks_and_offsets(fixture):
    store, conf, exp = fixture
    r = cli(
        "dump-commitlog",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--format",
        "jsonl",
        "--show-blank",
        "--no-properties",
    )
    blanks = [json.loads(x) for x in r.stdout.splitlines() if json.loads(x)["magic"] == "blank"]
    assert [(b["physical_offset"], b["total_size"], b["file"]) for b in blanks] == [
        (b["physical_offset"], b["total_size"], b["file"]) for b in exp["blanks"]
    ]
    ms = _open(fixture)
    assert ms.commitlog.min_offset == exp["commitlog_min_offset"]
    assert ms.commitlog.max_offset() == exp["commitlog_max_offset"]
    assert [f.name for f in ms.commitlog.files] == exp["commitlog_files"]


def test_consume_queues_match_broker(fixture):
    _, _, exp = fixture
    ms = _open(fixture)
    on_disk = {(cq.topic, cq.queue_id): cq for cq in ms.consume_queues()}
    expected = {(q["topic"], q["queue_id"]): q for q in exp["consume_queues"].values() if q["exists_on_disk"]}
    assert set(on_disk) == set(expected)
    clmin = ms.commitlog.min_offset
    for key, q in expected.items():
        cq = on_disk[key]
        assert cq.max_offset == q["max_offset"], key
        assert cq.min_offset(clmin) == q["min_offset"], key
        assert [f.name for f in cq.queue.files] == q["files"], key
        units = [[u.cq_offset, u.commitlog_offset, u.size, u.tags_code] for u in cq.units()]
        assert units == q["units"], key


def test_index_headers_match_broker(fixture):
    _, _, exp = fixture
    ms = _open(fixture)
    got = [
        dict(
            name=f.name,
            beginTimestamp=f.header.begin_timestamp,
            endTimestamp=f.header.end_timestamp,
            beginPhyOffset=f.header.begin_phy_offset,
            endPhyOffset=f.header.end_phy_offset,
            hashSlotCount=f.header.hash_slot_count,
            indexCount=f.header.index_count,
        )
        for f in ms.index.files
    ]
    assert got == exp["index_files"]


def test_index_query_offset_matches_broker(fixture):
    """IndexService#queryOffset returns the broker's raw_offsets, in its order."""
    _, _, exp = fixture
    ms = _open(fixture)
    assert ms.config.max_msgs_num_batch == 100000
    for q in exp["queries"]:
        got = ms.index.query_offset(q["topic"], q["key"], 100000, q["begin"], q["end"])
        assert got == q["raw_offsets"], (q["topic"], q["key"], q["begin"], q["end"])


def test_checkpoint_matches_broker(fixture):
    _, _, exp = fixture
    cp = _open(fixture).checkpoint
    e = exp["checkpoint"]
    assert (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp) == (
        e["physicMsgTimestamp"],
        e["logicsMsgTimestamp"],
        e["indexMsgTimestamp"],
    )
    assert (cp.min_timestamp, cp.min_timestamp_index) == (e["minTimestamp"], e["minTimestampIndex"])


def test_put_results_msg_ids(fixture):
    """Every put's msgId and wroteOffset is a record the scan decodes with that offset id."""
    _, _, exp = fixture
    by_offset = {m.physical_offset: m for m in _open(fixture).commitlog.scan()}
    for p in exp["put_results"]:
        m = by_offset[p["wroteOffset"]]
        assert (m.msg_id, m.total_size, m.store_timestamp) == (p["msgId"], p["wroteBytes"], p["storeTimestamp"])


def test_replaying_a_dump_rewrites_the_store_byte_for_byte(fixture, tmp_path):
    """dump-commitlog | generate --from-jsonl: same commit log, consume queues and index bytes."""
    store, conf, _ = fixture
    dump = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--body", "base64")
    out = tmp_path / "replayed"
    r = cli(
        "generate",
        "--store",
        out,
        "--from-jsonl",
        "-",
        "--broker-conf",
        conf,
        "--tz",
        "UTC",
        "--format",
        "json",
        input=dump.stdout,
    )
    assert r.exit_code == 0, r.stderr
    for sub in ("commitlog",):
        names = sorted(p.name for p in (store / sub).iterdir())
        assert names == sorted(p.name for p in (out / sub).iterdir())
        for n in names:
            assert filecmp.cmp(store / sub / n, out / sub / n, shallow=False), n
    cq_files = sorted(p.relative_to(store) for p in (store / "consumequeue").rglob("*") if p.is_file())
    assert cq_files == sorted(p.relative_to(out) for p in (out / "consumequeue").rglob("*") if p.is_file())
    for rel in cq_files:
        assert filecmp.cmp(store / rel, out / rel, shallow=False), rel
    # index names are creation wall times (lost); contents are identical
    theirs = sorted((store / "index").iterdir())
    ours = sorted((out / "index").iterdir())
    assert len(theirs) == len(ours)
    for a, b in zip(theirs, ours, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_body_base64_is_stored_bytes(fixture):
    store, conf, exp = fixture
    m = exp["messages"][0]
    r = cli(
        "dump-commitlog",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--format",
        "json",
        "--body",
        "base64",
        "--limit",
        "1",
    )
    got = json.loads(r.stdout)[0]
    assert base64.b64decode(got["body"]) == base64.b64decode(m["body_base64"])


def test_index_geometry_is_inferred_from_one_index_file(tmp_path):
    """Without broker.conf, even a single small index file tells its slot and entry counts."""
    import shutil

    from tests.helpers import fixture_dir

    d = fixture_dir("4.9.7")
    store = tmp_path / "store"
    shutil.copytree(d / "store", store)
    for p in sorted((store / "index").iterdir())[:-1]:
        p.unlink()
    cfg = StoreConfig.load(store, None)
    cfg.infer_sizes()
    assert (cfg.max_hash_slot_num, cfg.max_index_num) == (64, 400)


def test_unreadable_index_geometry_only_fails_index_use(tmp_path):
    from tests.helpers import cli, generate

    store = generate(tmp_path / "s", messages=30)
    for p in (store / "index").iterdir():
        with open(p, "r+b") as fh:  # one entry: no chain to tell the geometry by
            fh.write(bytes(40))
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl", "--limit", "1")
    assert r.exit_code == 0, r.stderr
    ms = MessageStore.open(StoreConfig.load(store, None))
    import pytest

    from rmqstore_cli.errors import StoreError

    with pytest.raises(StoreError, match="index"):
        _ = ms.index
