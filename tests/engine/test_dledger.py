"""DLedger commit logs made by independent test code from the plain 4.9.7 sample: every record
wrapped in a DLedger entry (``DLedgerEntryCoder#encode``, ``MmapFileList#preAppend`` blanks),
PHYSICALOFFSET and the consume-queue and index offsets rewritten as the broker's append hook
would have written them (``DLedgerCommitLog``: entry pos + 48), the index/ units, checkpoint
and currterm written beside. Plain ``struct`` code here, not the engine's.

rebuild-index must reproduce the rewritten consume queues and index byte for byte, readers
must see the plain sample's records, and damage must give findings or one-line errors."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import cli, fixture_dir, needs_c, run

FILE = 65536  # the plain sample's mappedFileSizeCommitLog: DLedger's data files use the same size
INDEX_FILE = 32 * 5 * 1024 * 1024
ENTRY = struct.Struct(">iiqqqiiii")  # magic size index term pos channel chainCrc bodyCrc bodySize
UNIT = struct.Struct(">iqiqq")  # magic pos size index term
BLANK_V1 = 0xCBD43194


def _plain_records(store: Path) -> list[tuple[int, bytes]]:
    out = []
    for f in sorted((store / "commitlog").iterdir()):
        b, base, p = f.read_bytes(), int(f.name), 0
        while p + 8 <= len(b):
            total, magic = struct.unpack_from(">iI", b, p)
            if total <= 0 or magic == BLANK_V1:
                break
            out.append((base + p, b[p : p + total]))
            p += total
    return out


def wrap(src: Path, dest: Path, keep_files: int = 0, terms=(1, 2)) -> tuple[Path, dict[int, int]]:
    """The plain sample ``src`` as a DLedger store in ``dest``: its first ``keep_files`` commit-log
    files stay (a divided store), the rest become entries of dledger-n0/data. Returns the
    store and the map old physical offset -> new one."""
    store = dest / "store"
    shutil.copytree(src / "store", store)
    old = sorted((store / "commitlog").iterdir())
    for f in old[keep_files:]:
        f.unlink()
    if not keep_files:
        (store / "commitlog").rmdir()
    divided = keep_files * FILE
    recs = [(o, r) for o, r in _plain_records(src / "store") if o >= divided]
    dl = store / "dledger-n0"
    (dl / "data").mkdir(parents=True)
    (dl / "index").mkdir()
    moved: dict[int, int] = {}
    files: dict[int, bytearray] = {}
    units = bytearray()
    pos = divided
    for i, (o, rec) in enumerate(recs):
        size = ENTRY.size + len(rec)
        if pos % FILE + size + 8 > FILE:  # MmapFileList#preAppend: a blank, then the next file
            files.setdefault(pos - pos % FILE, bytearray(FILE))[pos % FILE : pos % FILE + 8] = struct.pack(
                ">ii", -1, FILE - pos % FILE
            )
            pos += FILE - pos % FILE
        term = terms[0] if i < len(recs) // 2 else terms[1]
        body = bytearray(rec)
        struct.pack_into(">q", body, 28, pos + ENTRY.size)  # the append hook's PHYSICALOFFSET
        buf = files.setdefault(pos - pos % FILE, bytearray(FILE))
        buf[pos % FILE : pos % FILE + size] = ENTRY.pack(1, size, i, term, pos, 0, 0, 0, len(rec)) + body
        units += UNIT.pack(1, pos, size, i, term)
        moved[o] = pos + ENTRY.size
        pos += size
    for start, buf in files.items():
        (dl / "data" / f"{start:020d}").write_bytes(buf)
    with open(dl / "index" / f"{0:020d}", "wb") as fh:
        fh.truncate(INDEX_FILE)
        fh.write(units)
    last = len(recs) - 1
    (dl / "checkpoint").write_text(f"committedIndex={last}\nendIndex={last}\n")
    (dl / "currterm").write_text(f"voteLeader=n0\ncurrTerm={terms[1]}\n")
    _rewrite_queues(store, moved)
    conf = (src / "broker.conf").read_text() + "enableDLegerCommitLog=true\ndLegerSelfId=n0\n"
    (dest / "broker.conf").write_text(conf)
    return store, moved


def _rewrite_queues(store: Path, moved: dict[int, int]) -> None:
    """Consume-queue units (commitLogOffset) and index entries and headers (phyOffset) of
    the moved records: what the broker would have dispatched from the DLedger log."""
    for f in (store / "consumequeue").rglob("*"):
        if f.is_file():
            b = bytearray(f.read_bytes())
            for p in range(0, len(b), 20):
                phy = struct.unpack_from(">q", b, p)[0]
                if phy in moved and any(b[p : p + 20]):  # not the zero tail
                    struct.pack_into(">q", b, p, moved[phy])
            f.write_bytes(b)
    for f in (store / "index").iterdir():
        b = bytearray(f.read_bytes())
        count = struct.unpack_from(">i", b, 36)[0]
        for at in (16, 24):
            phy = struct.unpack_from(">q", b, at)[0]
            struct.pack_into(">q", b, at, moved.get(phy, phy))
        for i in range(1, count):
            at = 40 + 64 * 4 + i * 20 + 4
            phy = struct.unpack_from(">q", b, at)[0]
            struct.pack_into(">q", b, at, moved.get(phy, phy))
        f.write_bytes(b)


@pytest.fixture(scope="module", params=[0, 4], ids=["dledger", "divided"])
def wrapped(request, tmp_path_factory):
    src = fixture_dir("4.9.7")
    dest = tmp_path_factory.mktemp("dledger")
    store, moved = wrap(src, dest, keep_files=request.param)
    return store, dest / "broker.conf", moved, request.param


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_dump_commitlog_reads_the_plain_samples_records_through_DLedgerCommitLog(wrapped):
    store, conf, moved, keep = wrapped
    src = fixture_dir("4.9.7")
    plain = _jsonl("dump-commitlog", "--store", src / "store", "--broker-conf", src / "broker.conf")
    got = _jsonl("dump-commitlog", "--store", store, "--broker-conf", conf)
    assert len(got) == len(plain)
    for p, g in zip(plain, got, strict=True):
        assert g["physical_offset"] == moved.get(p["physical_offset"], p["physical_offset"])
        for k in ("topic", "queue_id", "queue_offset", "total_size", "body_crc", "properties_string", "keys"):
            assert g.get(k) == p.get(k), k
        assert ("dledger_index" in g) == (p["physical_offset"] in moved)
    idx = [g["dledger_index"] for g in got if "dledger_index" in g]
    assert idx == list(range(len(moved)))
    assert all(g["dledger_pos"] + 48 == g["physical_offset"] for g in got if "dledger_pos" in g)


def test_rebuild_index_reproduces_rewritten_queues_and_index(wrapped, tmp_path):
    store, conf, _, _ = wrapped
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", out)
    assert r.exit_code == 0, r.stderr
    for f in sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file()):
        assert (out / f.relative_to(store)).read_bytes() == f.read_bytes(), f
    ia, ib = sorted((store / "index").iterdir()), sorted((out / "index").iterdir())
    assert [a.read_bytes() for a in ia] == [b.read_bytes() for b in ib]


def test_verify_finds_no_error(wrapped):
    store, conf, _, _ = wrapped
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    rep = json.loads(r.stdout)
    assert rep["summary"]["errors"] == 0, [f for f in rep["findings"] if f["severity"] == "error"][:5]
    assert not [f for f in rep["findings"] if f["check"].startswith("dledger.")]


def _damaged(wrapped, tmp_path) -> tuple[Path, Path]:
    store, conf, _, _ = wrapped
    shutil.copytree(store.parent, tmp_path / "w", symlinks=True)
    return tmp_path / "w" / "store", tmp_path / "w" / "broker.conf"


def _checks(store: Path, conf: Path) -> dict[str, list[dict]]:
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "json")
    assert r.exit_code == 1, r.stdout
    out: dict[str, list[dict]] = {}
    for f in json.loads(r.stdout)["findings"]:
        out.setdefault(f["check"], []).append(f)
    return out


def _entry_at(store: Path, i: int) -> tuple[Path, int]:
    data = sorted((store / "dledger-n0" / "data").iterdir())
    unit = UNIT.unpack_from((store / "dledger-n0" / "index" / f"{0:020d}").read_bytes(), i * 32)
    f = [d for d in data if int(d.name) <= unit[1]][-1]
    return f, unit[1] - int(f.name)


@pytest.mark.slow
def test_wrong_entry_magic_is_a_finding_and_readers_stop_cleanly(wrapped, tmp_path):
    """In the last file, inside the region ``DLedgerMmapFileStore#recover`` walks."""
    n = len(wrapped[2])
    store, conf = _damaged(wrapped, tmp_path)
    f, p = _entry_at(store, n - 10)
    b = bytearray(f.read_bytes())
    struct.pack_into(">i", b, p, 7)
    f.write_bytes(b)
    got = _checks(store, conf)
    assert [x["offset"] for x in got["dledger.entry"]] == [p]
    assert "bad DLedger entry magic 7" in got["dledger.entry"][0]["detail"]
    assert got["recovery.truncate"][0]["physical_offset"] == int(f.name) + p
    r = run("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    assert r.returncode == 0 and b"Traceback" not in r.stderr


@pytest.mark.slow
def test_torn_last_entry_is_where_recovery_truncates(wrapped, tmp_path):
    """Only magic and size of the last entry reached the disk: ``DLedgerMmapFileStore#recover``
    stops there (pos 0 != its position), truncates index/ after the entry before and lowers
    committedIndex."""
    n = len(wrapped[2])
    store, conf = _damaged(wrapped, tmp_path)
    f, p = _entry_at(store, n - 1)
    b = bytearray(f.read_bytes())
    size = struct.unpack_from(">i", b, p + 4)[0]
    b[p + 8 : p + size] = bytes(size - 8)
    f.write_bytes(b)
    got = _checks(store, conf)
    assert [(x["offset"], x["detail"].split(";")[0]) for x in got["dledger.entry"]] == [
        (p, f"DLedger entry pos 0 != {int(f.name) + p}")
    ]
    assert got["dledger.index-tail"][0]["offset"] == (n - 1) * 32
    assert any(f"committedIndex {n - 1} > last entry {n - 2}" in x["detail"] for x in got["dledger.checkpoint"])
    r = run("rebuild-index", "--store", store, "--broker-conf", conf, "--output", tmp_path / "out", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dispatch_end"]["offset"] == int(f.name) + p


@pytest.mark.slow
def test_record_torn_inside_a_whole_entry_is_kept_by_DLedger_recovery(wrapped, tmp_path):
    """The entry header is whole, its record is not: ``DLedgerMmapFileStore#recover`` keeps it
    (it reads no record), the record's own check finds it."""
    n = len(wrapped[2])
    store, conf = _damaged(wrapped, tmp_path)
    f, p = _entry_at(store, n - 1)
    b = bytearray(f.read_bytes())
    size = struct.unpack_from(">i", b, p + 4)[0]
    b[p + 48 + 84 : p + size] = bytes(size - 48 - 84)  # from BODYLENGTH on, nothing reached the disk
    f.write_bytes(b)
    got = _checks(store, conf)
    assert [x["offset"] for x in got["commitlog.total-size"]] == [p + 48]
    assert not [c for c in got if c.startswith("dledger.")]


@pytest.mark.slow
def test_index_unit_pointing_past_the_data_is_a_finding(wrapped, tmp_path):
    store, conf = _damaged(wrapped, tmp_path)
    idx = store / "dledger-n0" / "index" / f"{0:020d}"
    with open(idx, "r+b") as fh:
        fh.seek(3 * 32 + 4)
        fh.write(struct.pack(">q", 1 << 40))
    got = _checks(store, conf)
    assert [x["offset"] for x in got["dledger.index"]] == [3 * 32]
    assert "its unit says pos 1099511627776" in got["dledger.index"][0]["detail"]


@pytest.mark.slow
@pytest.mark.parametrize("wrapped", [4], ids=["divided"], indirect=True)  # only a divided store has an old commitlog/
def test_divided_store_missing_its_old_log(wrapped, tmp_path):
    keep = wrapped[3]
    store, conf = _damaged(wrapped, tmp_path)
    shutil.rmtree(store / "commitlog")
    got = _checks(store, conf)
    assert got["dledger.old-log"][0]["file"] == f"dledger-n0/data/{keep * FILE:020d}"
    r = run("dump-cq", "--store", store, "--broker-conf", conf, "AuditTopic", "0")
    assert b"Traceback" not in r.stderr


def test_term_going_back_and_stale_currterm(tmp_path):
    store, moved = wrap(fixture_dir("4.9.7"), tmp_path, terms=(3, 2))
    (store / "dledger-n0" / "currterm").write_text("voteLeader=n0\ncurrTerm=1\n")
    got = _checks(store, tmp_path / "broker.conf")
    assert len(got["dledger.order"]) == 1
    assert "term 2 after index" in got["dledger.order"][0]["detail"]
    assert "dledger.term" in got


@pytest.mark.slow
def test_config_without_self_id_and_two_dledger_dirs_are_one_line_errors(tmp_path):
    store, _ = wrap(fixture_dir("4.9.7"), tmp_path)
    shutil.copytree(store / "dledger-n0", store / "dledger-n1")
    r = run("dump-commitlog", "--store", store)
    assert r.returncode == 3 and b"2 DLedger directories" in r.stderr and len(r.stderr.splitlines()) <= 2
    r = run("dump-commitlog", "--store", store, "--broker-conf", tmp_path / "broker.conf")
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------- generate --dledger

SMALL = ("--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")


@pytest.fixture(scope="module", params=["dledger", "divided"])
def generated(request, tmp_path_factory):
    """``generate --dledger``, or a plain store then ``generate --append --dledger`` (divided)."""
    store = tmp_path_factory.mktemp("gen") / "store"
    if request.param == "divided":
        assert cli("generate", "--store", store, "-m", "400", *SMALL).exit_code == 0
        r = cli("generate", "--store", store, "--append", "--dledger", "-m", "400", "--seed", "3")
    else:
        r = cli("generate", "--store", store, "--dledger", "-m", "800", *SMALL)
    assert r.exit_code == 0, r.stderr
    return store, request.param


def test_generated_entries_index_checkpoint_and_currterm(generated):
    """What ``DLedgerMmapFileStore#appendAsLeader`` and ``persistCheckPoint`` leave, read back
    with plain struct code: entries one after another, blanks at file ends, one unit each."""
    store, kind = generated
    dl = store / "dledger-n0"
    units = (dl / "index" / f"{0:020d}").read_bytes()
    n = 0
    data = sorted((dl / "data").iterdir())
    assert int(data[0].name) == (0 if kind == "dledger" else len(list((store / "commitlog").iterdir())) * FILE)
    for f in data:
        b, base, p = f.read_bytes(), int(f.name), 0
        while p + 8 <= len(b):
            magic, size = struct.unpack_from(">ii", b, p)
            if magic == -1:
                assert size == FILE - p
                break
            if magic == 0:
                break
            e = ENTRY.unpack_from(b, p)
            assert (e[0], e[2], e[4], e[8] + 48) == (1, n, base + p, size)
            assert struct.unpack_from(">q", b, p + 48 + 28)[0] == base + p + 48  # PHYSICALOFFSET
            assert UNIT.unpack_from(units, n * 32) == (1, base + p, size, n, 0)
            n += 1
            p += size
    assert not any(units[n * 32 : n * 32 + 4096])
    assert (dl / "checkpoint").read_text() == f"committedIndex={n - 1}\nendIndex={n - 1}\n"
    assert (dl / "currterm").read_text() == "voteLeader=n0\ncurrTerm=0\n"
    recs = _jsonl("dump-commitlog", "--store", store)
    assert len([r for r in recs if "dledger_index" in r]) == n


def test_generated_store_verifies_and_rebuilds_byte_for_byte(generated, tmp_path):
    store, _ = generated
    r = cli("verify", "--store", store, "--format", "json")
    assert r.exit_code == 0, r.stdout
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--output", out)
    assert r.exit_code == 0, r.stderr
    for f in sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file()):
        assert (out / f.relative_to(store)).read_bytes() == f.read_bytes(), f
    ia, ib = sorted((store / "index").iterdir()), sorted((out / "index").iterdir())
    assert [a.read_bytes() for a in ia] == [b.read_bytes() for b in ib]


def test_generate_append_continues_entry_index_and_term(tmp_path):
    store = tmp_path / "s"
    assert cli("generate", "--store", store, "--dledger", "-m", "100", *SMALL).exit_code == 0
    (store / "dledger-n0" / "currterm").write_text("voteLeader=n0\ncurrTerm=4\n")  # a new leader's term
    assert cli("generate", "--store", store, "--append", "-m", "100", "--seed", "5").exit_code == 0
    recs = [r for r in _jsonl("dump-commitlog", "--store", store) if "dledger_index" in r]
    assert [r["dledger_index"] for r in recs] == list(range(len(recs)))
    terms = [r["dledger_term"] for r in recs]
    assert terms[0] == 0 and terms[-1] == 4 and terms == sorted(terms)
    assert cli("verify", "--store", store).exit_code == 0


# ---------------------------------------------------------------- expire


def _expire(store: Path, *extra) -> dict:
    r = cli("expire", "--store", store, "--format", "json", "--now", "2026-01-10T00:00:00Z", *extra)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def _age(paths, hours: float) -> None:
    import calendar
    import os

    t = calendar.timegm((2026, 1, 10, 0, 0, 0)) - hours * 3600
    for p in paths:
        os.utime(p, (t, t))


def test_expire_divided_store_deletes_only_the_old_log_last_file_too(tmp_path):
    """``DLedgerCommitLog#deleteExpiredFile``: old files expire (the last one too), DLedger's
    data files wait until the old log is gone (``disableDeleteDledger``)."""
    store = tmp_path / "s"
    assert cli("generate", "--store", store, "-m", "300", *SMALL).exit_code == 0
    assert cli("generate", "--store", store, "--append", "--dledger", "-m", "300").exit_code == 0
    old = sorted((store / "commitlog").iterdir())
    data = sorted((store / "dledger-n0" / "data").iterdir())
    _age([*old, *data], 1000)
    rep = _expire(store)
    assert [a["file"] for a in rep["actions"] if a["kind"] == "commitlog"] == [f"commitlog/{p.name}" for p in old]
    assert rep["min_offsets"]["commitlog"] == int(data[0].name)
    assert any("DLedger" in n for n in rep["notes"])
    assert all(p.exists() for p in data)
    assert not (store / "commitlog").exists() or not any((store / "commitlog").iterdir())
    assert cli("dump-commitlog", "--store", store, "--limit", "1").exit_code == 0


def test_expire_dledger_data_files_keep_fileReservedTime_plus_one_hour(tmp_path):
    """``DLedgerCommitLog``: ``fileReservedHours = fileReservedTime + 1``; never the newest file."""
    store = tmp_path / "s"
    assert cli("generate", "--store", store, "--dledger", "-m", "600", *SMALL).exit_code == 0
    data = sorted((store / "dledger-n0" / "data").iterdir())
    assert len(data) >= 4
    _age(data[:2], 73.5)
    _age(data[2:], 72.5)
    rep = _expire(store, "--dry-run", "--reserved-hours", "72")
    assert [a["file"] for a in rep["actions"] if a["kind"] == "commitlog"] == [
        f"dledger-n0/data/{p.name}" for p in data[:2]
    ]
    _age(data, 1000)
    rep = _expire(store, "--dry-run", "--reserved-hours", "72")
    assert len([a for a in rep["actions"] if a["kind"] == "commitlog"]) == len(data) - 1


# ---------------------------------------------------------------- the walk, both speeds


@pytest.mark.parametrize("damage", [None, "magic", "size", "record"])
def test_entry_walk_reference_and_compiled_agree(tmp_path, damage):
    """``bulk.walk_records(header=48)``: the reference loop and ``kernels.walk_entries`` give
    the same record starts, end and stop, on whole files and at each kind of damage."""
    needs_c()
    from rmqstore_cli.store.commitlog.bulk import walk_records

    store, _ = wrap(fixture_dir("4.9.7"), tmp_path)
    for f in sorted((store / "dledger-n0" / "data").iterdir()):
        b = bytearray(f.read_bytes())
        if damage:
            p = struct.unpack_from(">i", b, 4)[0]  # the second entry: its magic, size or record's magic
            at = {"magic": p, "size": p + 4, "record": p + 48 + 4}[damage]
            b[at : at + 4] = b"\x00\x00\x00\x09"
        for max_n in (1, 3, 10_000):
            got = [walk_records(b, 0, len(b), max_n, header=48, compiled=c) for c in (False, True)]
            assert got[0].starts.tolist() == got[1].starts.tolist()
            assert (got[0].end, got[0].stop) == (got[1].end, got[1].stop)
        w = got[0]
        if damage:
            assert w.stop == "bad" and w.starts.tolist() == [48] and w.end == p
        else:
            assert w.stop in ("blank", "zero") and len(w.starts) >= 1


def test_hostile_checkpoint_and_currterm_are_findings_not_hangs(tmp_path):
    """A FIFO where ``checkpoint`` belongs and a ``currterm`` of garbage: read bounded, never
    waited on; verify says the committed index and the term are missing."""
    import os

    store, _ = wrap(fixture_dir("4.9.7"), tmp_path)
    dl = store / "dledger-n0"
    (dl / "checkpoint").unlink()
    os.mkfifo(dl / "checkpoint")
    (dl / "currterm").write_bytes(b"\xff\x00currTerm=x\n")
    r = run("verify", "--store", store, "--broker-conf", tmp_path / "broker.conf", "--format", "json")
    checks = {f["check"] for f in json.loads(r.stdout)["findings"]}
    assert {"dledger.checkpoint", "dledger.term"} <= checks and b"Traceback" not in r.stderr


def test_short_dledger_index_file_is_a_finding(tmp_path):
    """``MmapFileList#doLoad`` refuses an index file of another length (the broker exits)."""
    store, moved = wrap(fixture_dir("4.9.7"), tmp_path)
    idx = store / "dledger-n0" / "index" / f"{0:020d}"
    with open(idx, "r+b") as fh:
        fh.truncate(len(moved) * 32 + 64)
    got = _checks(store, tmp_path / "broker.conf")
    assert any("MmapFileList#doLoad" in f["detail"] for f in got["dledger.index"])


def test_storePathDLedgerCommitLog_puts_the_data_elsewhere(tmp_path):
    """``DLedgerConfig#getDataStorePath``: ``storePathDLedgerCommitLog``; index/, checkpoint and
    currterm stay in ``<root>/dledger-<selfId>``."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"enableDLegerCommitLog=true\ndLegerSelfId=n3\nstorePathDLedgerCommitLog={tmp_path / 'disk2'}\n"
        "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\nmaxIndexNum=400\n"
    )
    store = tmp_path / "store"
    assert cli("generate", "--store", store, "--broker-conf", conf, "-m", "300").exit_code == 0
    assert len(list((tmp_path / "disk2").iterdir())) >= 2 and not (store / "dledger-n3" / "data").exists()
    assert sorted(p.name for p in (store / "dledger-n3").iterdir()) == ["checkpoint", "currterm", "index"]
    assert cli("verify", "--store", store, "--broker-conf", conf).exit_code == 0
    out = tmp_path / "out"
    assert cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", out).exit_code == 0
    for f in sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file()):
        assert (out / f.relative_to(store)).read_bytes() == f.read_bytes(), f
