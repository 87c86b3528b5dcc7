"""rmqstore verify: clean stores verify clean; each injected fault is reported with its
exact check id and location, and the scan goes on past it."""

from __future__ import annotations

import json
import os
import struct

import pytest

from tests.helpers import SMALL, cli, generate, generate_plain, run, tree_digest
from tests.helpers.rawstore import records

CL_SIZE = 65536
CQ_SIZE = 2000
SLOTS, INDEX_MAX = 64, 400
ENTRIES_BASE = 40 + SLOTS * 4


def _verify(store, *extra):
    r = cli("verify", "--store", store, *SMALL, "--format", "jsonl", "--max-findings", "1000", *extra)
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    assert lines and "summary" in lines[-1], r.stdout + r.stderr
    return r, lines[:-1], lines[-1]["summary"]


def _plain(store, recs, start: int) -> int:
    """The first record from ``start`` on that is not part of a transaction (sysflag
    TRANSACTION bits 0: it has a consume-queue unit and index entries)."""
    for k in range(start, len(recs) - 1):
        name, pos = recs[k][:2]
        with open(store / "commitlog" / name, "rb") as f:
            f.seek(pos + 36)
            if struct.unpack(">i", f.read(4))[0] & 0xC == 0:
                return k
    raise AssertionError("no plain record")


def _body(data: bytes, pos: int) -> tuple[int, int]:
    """(start, length) of the body of the IPv4/IPv6 record at ``pos``."""
    sys_flag = struct.unpack_from(">i", data, pos + 36)[0]
    b = 20 if sys_flag & 0x10 else 8
    s = 20 if sys_flag & 0x20 else 8
    at = pos + 48 + b + 8 + s + 4 + 8
    return at + 4, struct.unpack_from(">i", data, at)[0]


def _patch(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _find(findings, check):
    return [f for f in findings if f["check"] == check]


def _errors(findings):
    return {f["check"] for f in findings if f["severity"] == "error"}


# ---------------------------------------------------------------- clean stores


def test_clean_small_store_has_no_findings(small_store):
    before = tree_digest(small_store)
    r, findings, summary = _verify(small_store, "--deep")
    assert r.exit_code == 0
    assert findings == []
    assert summary["messages"] == len(records(small_store))
    assert summary["errors"] == 0 and summary["findings"] == {}
    assert summary["files"]["commitlog"] == len(os.listdir(small_store / "commitlog"))
    assert tree_digest(small_store) == before  # read-only


def test_clean_small_store_sizes_inferred(small_store):
    r = cli("verify", "--store", small_store, "--format", "jsonl")
    assert r.exit_code == 0, r.stdout
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    assert summary["errors"] == summary["warnings"] == 0
    assert any("65536" in n for n in summary["notes"])


@pytest.mark.slow
def test_clean_default_size_store(tmp_path):
    store = generate(tmp_path / "store", messages=300, small=False)
    r = cli("verify", "--store", store, "--deep", "--format", "jsonl")
    assert r.exit_code == 0, r.stdout
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["summary"]["messages"] == len(records(store))


def test_clean_5x_store_with_prop_crc(tmp_path):
    store = generate(tmp_path / "store", "--broker-version", "5", "--append-prop-crc", messages=600)
    r, findings, _ = _verify(store, "--deep")
    assert r.exit_code == 0 and findings == []
    # a wrong __CRC32# digit is caught
    name, pos, total, phy = records(store)[5]
    path = store / "commitlog" / name
    data = path.read_bytes()
    assert data[pos + total - 20 : pos + total - 11] == b"__CRC32#\x01"
    digit = data[pos + total - 11]
    _patch(path, pos + total - 11, bytes([ord("0") + (digit - ord("0") + 1) % 10]))
    r, findings, _ = _verify(store)
    assert r.exit_code == 1
    assert [(f["file"], f["offset"]) for f in _find(findings, "commitlog.prop-crc")] == [(f"commitlog/{name}", pos)]


def test_real_broker_fixtures_verify_without_errors(fixture):
    store, conf, exp = fixture
    r = cli("verify", "--store", store, "--broker-conf", conf, "--deep", "--format", "jsonl")
    assert r.exit_code == 0, r.stdout
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    summary = lines[-1]["summary"]
    assert [f for f in lines[:-1] if f["severity"] != "info"] == []
    assert summary["messages"] == len(exp["messages"])
    assert summary["commitlog_end_offset"] == exp["commitlog_max_offset"]


# ---------------------------------------------------------------- injected faults


def test_flipped_body_byte(small_store):
    recs = records(small_store)
    name, pos, total, phy = recs[10]
    path = small_store / "commitlog" / name
    start, length = _body(path.read_bytes(), pos)
    assert length > 0
    _patch(path, start + length // 2, bytes([path.read_bytes()[start + length // 2] ^ 0x40]))
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 1
    crc = _find(findings, "commitlog.body-crc")
    assert [(f["file"], f["offset"], f["physical_offset"]) for f in crc] == [(f"commitlog/{name}", pos, phy)]
    assert _errors(findings) == {"commitlog.body-crc"}
    assert summary["messages"] == len(recs)  # the scan went on
    r, findings, _ = _verify(small_store, "--no-crc")
    assert r.exit_code == 0 and findings == []


def test_flipped_size_field(small_store):
    recs = records(small_store)
    k = _plain(small_store, recs, 20)  # a record with a unit and index entries to lose
    name, pos, total, phy = recs[k]
    nxt = recs[k + 1]
    assert nxt[0] == name
    _patch(small_store / "commitlog" / name, pos, struct.pack(">i", total + 3))
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 1
    bad = _find(findings, "commitlog.total-size")
    assert [(f["file"], f["offset"]) for f in bad] == [(f"commitlog/{name}", pos)]
    assert bad[0]["end_offset"] == nxt[3]  # resynchronised on the next record
    assert summary["messages"] == len(recs) - 1
    # the lost record's unit and index entries now point at unreadable bytes
    assert "cq.unit-target" in _errors(findings) or "index.entry-target" in _errors(findings)


def test_flipped_magic_code(small_store):
    recs = records(small_store)
    name, pos, total, phy = recs[30]
    _patch(small_store / "commitlog" / name, pos + 4, b"\x00\x11\x22\x33")
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 1
    bad = _find(findings, "commitlog.magic")
    assert [(f["file"], f["offset"], f["end_offset"]) for f in bad] == [(f"commitlog/{name}", pos, recs[31][3])]
    assert summary["messages"] == len(recs) - 1


def test_truncated_file_mid_message(small_store):
    recs = records(small_store)
    name = sorted(os.listdir(small_store / "commitlog"))[3]
    in_file = [r for r in recs if r[0] == name]
    victim = in_file[len(in_file) // 2]
    os.truncate(small_store / "commitlog" / name, victim[1] + 10)
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 1
    assert [(f["file"], f["offset"]) for f in _find(findings, "commitlog.truncated")] == [
        (f"commitlog/{name}", victim[1])
    ]
    assert [f["file"] for f in _find(findings, "commitlog.file-size")] == [f"commitlog/{name}"]
    lost = len(in_file) - len(in_file) // 2
    assert summary["messages"] == len(recs) - lost


def test_deleted_first_consume_queue_file(small_store):
    qdir = next(
        q
        for t in sorted((small_store / "consumequeue").iterdir())
        for q in sorted(t.iterdir())
        if len(os.listdir(q)) >= 2
    )
    first = sorted(os.listdir(qdir))[0]
    os.remove(qdir / first)
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    rel = os.path.relpath(qdir, small_store)
    missing = _find(findings, "cq.missing-unit")
    assert [(f["file"], f["offset"], f["count"]) for f in missing] == [(f"{rel}/{first}", 0, CQ_SIZE // 20)]
    assert _errors(findings) == {"cq.missing-unit"}


def test_deleted_middle_consume_queue_file(tmp_path):
    store = generate_plain(tmp_path / "store", topics=1, queues=1, messages=450)
    qdir = next((store / "consumequeue").iterdir()) / "0"
    names = sorted(os.listdir(qdir))
    assert len(names) >= 4
    os.remove(qdir / names[1])
    r, findings, _ = _verify(store)
    assert r.exit_code == 1
    rel = os.path.relpath(qdir, store)
    assert [(f["file"], f["offset"]) for f in _find(findings, "cq.gap")] == [(f"{rel}/{names[2]}", 0)]
    missing = _find(findings, "cq.missing-unit")
    assert [(f["file"], f["offset"], f["count"]) for f in missing] == [(f"{rel}/{names[1]}", 0, CQ_SIZE // 20)]
    assert _errors(findings) == {"cq.gap", "cq.missing-unit"}


def test_deleted_queue_directory(small_store):
    qdir = next(
        q
        for t in sorted((small_store / "consumequeue").iterdir())
        for q in sorted(t.iterdir())
        if not t.name.startswith(("SCHEDULE", "RMQ_SYS"))
    )
    assert os.listdir(qdir)
    for f in os.listdir(qdir):
        os.remove(qdir / f)
    os.rmdir(qdir)
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    missing = _find(findings, "cq.missing-unit")
    assert len(missing) == 1 and missing[0]["file"] == os.path.relpath(qdir, small_store)
    assert missing[0]["detail"].startswith(f"{qdir.parent.name}/{qdir.name}: units 0..")


def _index_file(store, n=1):
    return sorted((store / "index").iterdir())[n]


def test_index_chain_loop(small_store):
    path = _index_file(small_store)
    data = path.read_bytes()
    count = struct.unpack_from(">i", data, 36)[0]
    k = count // 2
    at = ENTRIES_BASE + k * 20
    _patch(path, at + 16, struct.pack(">i", k))  # prevIndex of entry k -> itself: a loop
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    chain = _find(findings, "index.chain")
    assert (f"index/{path.name}", at + 16) in [(f["file"], f["offset"]) for f in chain]
    assert "loops" in chain[0]["detail"]


def test_index_slot_out_of_range(small_store):
    path = _index_file(small_store)
    data = path.read_bytes()
    count = struct.unpack_from(">i", data, 36)[0]
    s = next(i for i in range(SLOTS) if struct.unpack_from(">i", data, 40 + 4 * i)[0])
    _patch(path, 40 + 4 * s, struct.pack(">i", count + 7))
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    assert [(f["file"], f["offset"]) for f in _find(findings, "index.slot")] == [(f"index/{path.name}", 40 + 4 * s)]
    assert _find(findings, "index.orphan")  # the entry the slot headed is now unreachable


def test_index_entry_wrong_hash_and_deep_missing_key(small_store):
    path = _index_file(small_store)
    data = path.read_bytes()
    k = 5
    at = ENTRIES_BASE + k * 20
    h, phy = struct.unpack_from(">iq", data, at)
    _patch(path, at + 4, struct.pack(">q", phy + 1))  # point one byte into the record
    r, findings, _ = _verify(small_store, "--deep")
    assert r.exit_code == 1
    target = _find(findings, "index.entry-target")
    assert [(f["file"], f["offset"]) for f in target] == [(f"index/{path.name}", at)]
    missing = _find(findings, "index.missing-key")
    assert [f["physical_offset"] for f in missing] == [phy]


def test_removed_middle_commitlog_file(small_store):
    names = sorted(os.listdir(small_store / "commitlog"))
    gone = names[len(names) // 2]
    os.remove(small_store / "commitlog" / gone)
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    gap = _find(findings, "commitlog.gap")
    nxt = names[len(names) // 2 + 1]
    assert [(f["file"], f["offset"], f["physical_offset"]) for f in gap] == [(f"commitlog/{nxt}", 0, int(gone))]
    # units and entries of the lost messages are reported, not crashed on
    assert "cq.unit-target" in _errors(findings)
    assert "index.entry-target" in _errors(findings)


def test_abort_file_says_which_recovery(small_store):
    (small_store / "abort").write_bytes(b"")
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 0  # an unclean shutdown alone is a warning
    ab = _find(findings, "abort.unclean-shutdown")
    assert len(ab) == 1 and ab[0]["severity"] == "warning" and ab[0]["file"] == "abort"
    assert "abnormal recovery" in ab[0]["detail"]
    names = sorted(os.listdir(small_store / "commitlog"))
    assert f"{ab[0]['recovery_start']:020d}" in names
    assert ab[0]["truncate_at"] == _verify(small_store)[2]["commitlog_end_offset"]


def test_abort_with_damage_says_what_recovery_truncates(small_store):
    (small_store / "abort").write_bytes(b"")
    recs = records(small_store)
    name, pos, total, phy = recs[-3]
    path = small_store / "commitlog" / name
    start, length = _body(path.read_bytes(), pos)
    _patch(path, start, bytes([path.read_bytes()[start] ^ 1]))
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    cut = _find(findings, "recovery.truncate")
    assert [(f["file"], f["offset"], f["physical_offset"]) for f in cut] == [(f"commitlog/{name}", pos, phy)]
    ab = _find(findings, "abort.unclean-shutdown")
    assert ab[0]["truncate_at"] == phy


def test_checkpoint_ahead_of_data(small_store):
    cp = small_store / "checkpoint"
    data = bytearray(cp.read_bytes())
    t = struct.unpack_from(">q", data, 8)[0]
    struct.pack_into(">q", data, 8, t + 3_600_000)
    cp.write_bytes(bytes(data))
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 1
    assert [(f["file"], f["offset"]) for f in _find(findings, "checkpoint.ahead")] == [("checkpoint", 8)]


def test_broker_artefacts_are_info(small_store):
    """A pre-blank queue, expired commit-log head: info only (docs/format/recovery.md#normal-artefacts)."""
    names = sorted(os.listdir(small_store / "commitlog"))
    os.remove(small_store / "commitlog" / names[0])  # expiry of the oldest file
    r, findings, _ = _verify(small_store)
    assert r.exit_code == 0, [f for f in findings if f["severity"] == "error"][:3]
    assert {f["severity"] for f in findings} <= {"info"}
    assert _find(findings, "cq.expired") and _find(findings, "index.expired")


def test_max_findings_caps_per_check_but_counts_all(small_store):
    recs = records(small_store)
    for name, pos, _, _ in recs[:40:4]:
        path = small_store / "commitlog" / name
        start, length = _body(path.read_bytes(), pos)
        if length:
            _patch(path, start, bytes([path.read_bytes()[start] ^ 2]))
    for cap in ("--limit", "--max-findings"):  # the old spelling still works
        r = cli("verify", "--store", small_store, *SMALL, "--format", "jsonl", cap, "2")
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert r.exit_code == 1
        assert len(_find(lines[:-1], "commitlog.body-crc")) == 2
        assert lines[-1]["summary"]["findings"]["commitlog.body-crc"] == 10
    r = cli("verify", "--store", small_store, *SMALL, "--format", "jsonl")  # JSON: 100 a check, as before
    assert len(_find([json.loads(x) for x in r.stdout.splitlines()][:-1], "commitlog.body-crc")) == 10
    for width, extra, shown in ((80, [], 5), (120, ["--limit", "7"], 7), (80, ["--limit", "100"], 10)):
        t = run("verify", "--store", small_store, *SMALL, *extra, env={"COLUMNS": str(width)}).stdout.decode()
        assert max(len(line) for line in t.splitlines()) <= width, t
        block = t.split("commitlog.body-crc: 10 errors (")[1].split("\n\n")[0]
        assert (f"the first {shown} shown" in block) == (shown < 10)
        assert len([x for x in block.splitlines() if x.startswith("error ")]) == shown


def test_table_output_groups_by_check(small_store):
    recs = records(small_store)
    name, pos, total, phy = recs[3]
    _patch(small_store / "commitlog" / name, pos + 28, struct.pack(">q", phy + 8))
    r = cli("verify", "--store", small_store, *SMALL)
    assert r.exit_code == 1
    assert "commitlog.physical-offset" in r.stdout and str(pos) in r.stdout
    assert "verify summary" in r.stdout


def test_not_a_store_exit_3(tmp_path):
    r = run("verify", "--store", tmp_path)
    assert r.returncode == 3
    assert r.stderr.decode().startswith("rmqstore: error: not a RocketMQ store")
    assert b"Traceback" not in r.stderr


@pytest.mark.slow
def test_subprocess_jsonl_and_exit_code(small_store):
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 0
    assert r.stderr == b""  # no progress bar off a terminal
    assert json.loads(r.stdout.splitlines()[-1])["summary"]["errors"] == 0


def test_index_hashes_match_java_hash():
    from rmqstore_cli.store.javahash import index_key_hash
    from rmqstore_cli.store.javahash.bulk import index_hashes

    keys = ["PaymentTopic#AaAa", "PaymentTopic#BBBB", "AuditTopic#minhash-280000磁龟", "T#emoji-🎉", "a#", "x" * 300]
    got = index_hashes([k.encode() for k in keys]).tolist()
    assert got == [index_key_hash(k) for k in keys]
    assert got[2] == 0  # Integer.MIN_VALUE maps to 0
    ascii_only = [f"Topic#k-{i}".encode() for i in range(100)]
    assert index_hashes(ascii_only).tolist() == [index_key_hash(k.decode()) for k in ascii_only]


def test_batch_property_scan_matches_the_broker_parser():
    """The vectorised scan finds the same TAGS/KEYS/UNIQ_KEY as parse_properties
    (MessageDecoder#string2messageProperties), duplicates, empty values and \\x01 included."""
    import random

    import numpy as np
    from rmqstore_cli.formats.properties import parse_properties

    from rmqstore_cli.store.javahash import java_hash
    from rmqstore_cli.store.records.properties import Properties as _Props

    rnd = random.Random(5)
    names = ["TAGS", "KEYS", "UNIQ_KEY", "CLUSTER", "TAG", "KEYSX", "", "__CRC32#"]
    values = ["", "a", "Tag With Blank", "支付标签", " pad-11 tail-11 ", "x\x01y", "AaAa BBBB", "k1  k2"]
    props = []
    for _ in range(400):
        pairs = [f"{rnd.choice(names)}\x01{rnd.choice(values)}" for _ in range(rnd.randint(0, 5))]
        if rnd.random() < 0.1:
            pairs.insert(0, "junk")
        s = "\x02".join(pairs) + ("\x02" if pairs and rnd.random() < 0.5 else "")
        props.append(s.encode())
    blob = b"".join(b"HEAD" + p for p in props)
    starts, pos = [], 0
    for p in props:
        starts.append(pos + 4)
        pos += 4 + len(p)
    arr = np.frombuffer(blob, np.uint8)
    pr = _Props(arr, np.array(starts, np.int64), np.array([len(p) for p in props], np.int64))
    for name in ("TAGS", "KEYS", "UNIQ_KEY"):
        m, a, b = pr.value(name.encode() + b"\x01")
        got = {int(i): bytes(pr.cat[x:y]).decode() for i, x, y in zip(m, a, b, strict=True)}
        want = {i: d[name] for i, p in enumerate(props) if name in (d := parse_properties(p.decode()))}
        assert got == want, name
    for i, p in enumerate(props):
        tags = parse_properties(p.decode()).get("TAGS")
        assert pr.tags_code[i] == (java_hash(tags) if tags else 0)


def test_list_checks_names_every_check_reported():
    r = cli("verify", "--list-checks", "--format", "jsonl")
    assert r.exit_code == 0
    listed = {json.loads(x)["check"]: json.loads(x)["severity"] for x in r.stdout.splitlines()}
    for check in (
        "commitlog.body-crc",
        "commitlog.gap",
        "cq.missing-unit",
        "index.chain",
        "abort.unclean-shutdown",
        "recovery.truncate",
        "cq.pre-blank",
    ):
        assert check in listed
    assert listed["cq.pre-blank"] == "info" and listed["commitlog.body-crc"] == "error"


def test_pre_blank_queue_is_info(tmp_path):
    """A queue whose first unit is not 0 gets pre-blank units (ConsumeQueue#fillPreBlank): info only."""
    src = generate_plain(tmp_path / "src", topics=1, queues=1, messages=40)
    r = cli("dump-commitlog", "--store", src, *SMALL[:2], "--format", "jsonl", "--body", "base64")
    assert r.exit_code == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()][7:]
    for rec in recs:  # a log that starts at queue offset 7, physical offsets re-assigned
        rec.pop("physical_offset")
    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(x) + "\n" for x in recs))
    dst = generate(tmp_path / "dst", "--from-jsonl", str(dump))
    r, findings, _ = _verify(dst, "--deep")
    assert r.exit_code == 0, findings
    pre = _find(findings, "cq.pre-blank")
    assert [(f["severity"], f["count"], f["offset"]) for f in pre] == [("info", 7, 0)]
    assert {f["check"] for f in findings} == {"cq.pre-blank"}


def test_restart_without_consume_queue_is_info(tmp_path):
    """A queue whose CQ was lost restarts its offsets at 0 after a restart
    (DefaultMessageStore#recoverTopicQueueTable): duplicate queue offsets are info, not errors."""
    store = generate_plain(tmp_path / "store", topics=1, queues=2, messages=300)
    qdir = next((store / "consumequeue").iterdir()) / "0"
    for f in os.listdir(qdir):
        os.remove(qdir / f)
    generate_plain(store, "--append", "--start", "2026-01-01T02:00:00Z", topics=1, queues=2, messages=40, seed=9)
    r, findings, _ = _verify(store, "--deep")
    assert r.exit_code == 0, [f for f in findings if f["severity"] != "info"][:3]
    checks = {f["check"] for f in findings}
    assert {"commitlog.queue-offset-reset", "cq.superseded"} <= checks
    assert {f["severity"] for f in findings} == {"info"}


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_damage_never_crashes(small_store_master, tmp_path, seed):
    """Random byte damage, truncation and deletion anywhere: findings and exit 0/1, never a traceback."""
    import random
    import shutil

    rnd = random.Random(seed)
    store = tmp_path / "store"
    shutil.copytree(small_store_master, store)
    files = [p for p in store.rglob("*") if p.is_file() and p.suffix != ".json" and p.name != "lock"]
    for _ in range(4):
        p = rnd.choice(files)
        size = p.stat().st_size
        r = rnd.random()
        if r < 0.15:
            os.truncate(p, rnd.randrange(size))
        elif r < 0.2:
            p.unlink()
            files.remove(p)
        else:
            _patch(p, rnd.randrange(min(size, 60000)), bytes(rnd.randrange(256) for _ in range(rnd.choice([1, 4, 8]))))
    r = cli("verify", "--store", store, *SMALL, "--deep", "--format", "jsonl")
    assert r.exit_code in (0, 1)
    assert "summary" in json.loads(r.stdout.splitlines()[-1])


# ---------------------------------------------------------------- properties a value's \x01 hides


def _store_with_properties(root, specials: dict[int, bytes], n: int = 200):
    """``n`` messages written by the engine (StoreWriter: commit log, queues, index); message
    ``i`` in ``specials`` gets those raw PROPERTIES bytes. Returns each message's offset."""
    from rmqstore_cli.store.commitlog import AppendSpec
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.writer import StoreWriter

    cfg = StoreConfig.load(
        root,
        None,
        mapped_file_size_commit_log=CL_SIZE,
        mapped_file_size_consume_queue=CQ_SIZE,
        max_hash_slot_num=SLOTS,
        max_index_num=INDEX_MAX,
    )
    w = StoreWriter(cfg)
    offsets = []
    try:
        for i in range(n):
            props = specials.get(
                i, f"KEYS\x01k{i}\x02UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D{i:04X}\x02TAGS\x01t\x02".encode()
            )
            res = w.append(
                AppendSpec(
                    "PropTopic",
                    i % 2,
                    b"body-%d" % i,
                    props,
                    1_767_225_600_000 + i,
                    1_767_225_600_000,
                    (b"\x7f\0\0\1", 1),
                    (b"\x0a\0\0\5", 10911),
                    raw_properties=True,
                )
            )
            offsets.append(res.physical_offset)
    finally:
        w.close()
    return offsets


def test_a_pair_without_separator_hidden_by_a_value_holding_x01_is_reported(tmp_path):
    """``A\\x01x\\x01y\\x02junk``: as many \\x01 as pairs, yet the pair 'junk' has none and
    ``MessageDecoder#string2messageProperties`` drops it; a value holding \\x01 alone is legal."""
    bad, legal = b"A\x01x\x01y\x02junk", b"A\x01x\x01y\x02B\x01z\x02"
    store = tmp_path / "store"
    offsets = _store_with_properties(store, {77: bad, 140: legal})
    r, findings, summary = _verify(store)
    props = _find(findings, "commitlog.properties")
    assert [(f["physical_offset"], f["severity"]) for f in props] == [(offsets[77], "warning")]
    assert "junk" in props[0]["detail"] and "drops" in props[0]["detail"]
    assert summary["messages"] == 200


def test_summary_bytes_are_the_records_checked_not_the_file_sizes(small_store):
    recs = records(small_store)
    files = sorted((small_store / "commitlog").iterdir())
    r, findings, summary = _verify(small_store)
    assert r.exit_code == 0
    assert summary["bytes"] == sum(t for _, _, t, _ in recs)
    assert summary["bytes"] < sum(p.stat().st_size for p in files)  # BLANK tails and the zero tail are not data
    # a torn file: the records lost with it are not counted either
    name = files[3].name
    in_file = [x for x in recs if x[0] == name]
    victim = in_file[len(in_file) // 2]
    os.truncate(files[3], victim[1] + 10)
    r, findings, summary = _verify(small_store)
    kept = [x for x in recs if not (x[0] == name and x[1] >= victim[1])]
    assert summary["bytes"] == sum(t for _, _, t, _ in kept) and summary["messages"] == len(kept)


def _damages(store):
    """Damage that leaves index entries unmatched in several index files."""
    names = sorted(os.listdir(store / "commitlog"))
    os.remove(store / "commitlog" / names[len(names) // 2])  # entries into a missing file
    path = _index_file(store, 1)
    at = ENTRIES_BASE + 5 * 20
    h, phy = struct.unpack_from(">iq", path.read_bytes(), at)
    _patch(path, at + 4, struct.pack(">q", phy + 1))  # an entry one byte into its record
    last = store / "commitlog" / names[-1]
    with open(last, "r+b") as fh:  # a torn tail: the last entries point past the data
        fh.seek(len(fh.read()) // 3)
        fh.write(bytes(2000))


@pytest.mark.parametrize("damage", [False, True])
def test_retired_index_files_give_the_same_findings(small_store, monkeypatch, damage):
    """The whole-store Verifier's single pass (the test reference of the task engine) retires
    an index file once the scan has passed all its entries (memory does not grow with the
    index); the findings are those of keeping every file whole."""
    from rmqstore_cli.store import verify as V
    from rmqstore_cli.store.layout.config import StoreConfig

    def whole_store() -> tuple[list, dict]:
        cfg = StoreConfig.load(
            small_store,
            mapped_file_size_commit_log=CL_SIZE,
            mapped_file_size_consume_queue=CQ_SIZE,
            max_hash_slot_num=SLOTS,
            max_index_num=INDEX_MAX,
        )
        v = V.Verifier(V.open_for_verify(cfg), V.VerifyOptions(deep=True, max_findings=1000))
        return [f.as_dict() for f in v.run()], v.summary

    if damage:
        _damages(small_store)
    retired = []
    real = V.IndexScan.retire
    monkeypatch.setattr(V.IndexScan, "retire", lambda self: retired.append(self.name) or real(self))
    with_retire, s1 = whole_store()
    assert len(retired) >= 2, "the small store has several index files the scan passes"
    monkeypatch.setattr(V.IndexScan, "retire", lambda self: None)
    whole, s2 = whole_store()
    assert with_retire == whole and s1 == s2
    if damage:
        assert {"index.entry-target", "commitlog.gap"} <= {f["check"] for f in whole}


def test_bulk_reads_of_the_store_owners_equal_their_per_record_reads(small_store_master):
    """What verify reads in bulk through ConsumeQueue and IndexFile (units at offsets, the
    files they lie in; entries in a range, slot values) is what their per-record reads give."""
    import numpy as np

    from rmqstore_cli.store.files.mapped_files import queue_dirs
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
    from rmqstore_cli.store.queues.index import IndexFile, index_file_paths

    store = small_store_master
    for topic, qid, _ in list(queue_dirs(store / "consumequeue"))[:4]:
        cq = ConsumeQueue(store / "consumequeue", topic, qid, CQ_SIZE)
        units = list(cq.units())
        logical = np.array([u.cq_offset for u in units] + [cq.max_offset, cq.max_offset + 7], np.int64)
        found, off, size, tags = cq.units_at(logical)
        assert found.tolist() == [True] * len(units) + [False, False]
        assert [(int(a), int(b), int(c)) for a, b, c in zip(off, size, tags, strict=True)][: len(units)] == [
            (u.commitlog_offset, u.size, u.tags_code) for u in units
        ]
        for u in units[:: max(1, len(units) // 5)]:
            path, at = cq.file_of(u.cq_offset)
            assert path.name == u.file and at == (u.cq_offset - cq.file_base(u.cq_offset)) * 20
        cq.close()
    for p in index_file_paths(store / "index"):
        f = IndexFile(p, SLOTS, INDEX_MAX)
        n = f.readable_entries
        assert n == f.header.index_count - 1
        cols = f.entry_columns(0, n, "key_hash", "phy_offset", "time_diff", "prev_index")
        assert [tuple(int(c[i]) for c in cols) for i in range(n)] == [f.read_entry(i + 1) for i in range(n)]
        assert f.entry_phys(np.arange(n)).tolist() == cols[1].tolist()
        at, vals = f.slot_values(0, SLOTS)
        slots = [struct.unpack_from(">i", p.read_bytes(), 40 + 4 * s)[0] for s in range(SLOTS)]
        assert dict(zip(at.tolist(), vals.tolist(), strict=True)) == {s: v for s, v in enumerate(slots) if v}
        f.close()
