"""Compaction queues that rolled: what the broker writes at a file's end and what it reads.

``CompactionAppendMessageCallback#doAppend`` ends a file when the queue file's next unit
would fill it or the log has no room for the record and a BLANK: the queue gets
``SparseConsumeQueue#putEndPositionInfo``'s unit (offset -1, size 0, msgBaseOffset 0,
batchSize 0, compactedOffset INVALID_POS) and the log a BLANK (the rest of the file), then
``TopicPartitionLog#roll`` opens a log file and a queue file of the same name. The broker
never reads past that unit, in no file: ``SparseConsumeQueue#getMaxMsgOffset`` skips it and
the zeros after it from the end (so ``#getBatchMsgIndexOrNextBuffer``'s binary search stays
below it) and ``CompactionLog#getMessage`` stops at it (``#validateCqUnit``), also in the
files before n-3 that ``SparseConsumeQueue#recover`` does not walk (``MappedFileQueue#load``
leaves them at their full size). The queues here are read back with struct code written from
the broker's layout (test-only), independently of formats/.
"""

from __future__ import annotations

import json
import struct

import pytest

from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue
from tests.helpers import cli, generate_5x
from tests.helpers.rawstore import UNIT, patch_unit

END_UNIT = struct.pack(UNIT, -1, 0, 0, 0, 0, 0, -1, 0)  # SparseConsumeQueue#putEndPositionInfo
BLANK_MAGIC = 0xCBD43194  # MessageDecoder.BLANK_MAGIC_CODE, unsigned
SMALL = ("--commitlog-file-size", "262144", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")
#: the log rolls first (8192 -> log files of 9200 bytes, about 20 records; queue files of 40 units)
LOG_FIRST = "compactionMappedFileSize=8192\ncompactionCqMappedFileSize=1840\n"
#: the queue rolls first (queue files of 10 units; CompactionLog#getCompactionLogSize -> 8280)
CQ_FIRST = "compactionMappedFileSize=8192\ncompactionCqMappedFileSize=460\n"


def _gen(tmp_path, conf_text, messages=700):
    conf = tmp_path / "broker.conf"
    conf.write_text(conf_text)
    store = tmp_path / "s"
    extra = ("--messages", str(messages), "--topics", "2", "--compaction-topics", "1")
    return generate_5x(store, conf, *SMALL, *extra), conf


def _verify(store, conf):
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"]


def _file_units(raw: bytes):
    """(units before the first invalid one, the rest of the file) of one queue file."""
    units = []
    for i in range(0, len(raw) - 45, 46):
        u = struct.unpack_from(UNIT, raw, i)
        if u[0] < 0 or u[1] <= 0 or u[4] < 0 or u[5] <= 0:
            return units, raw[i:]
        units.append(u)
    return units, b""


def _queues(store):
    return sorted(p for p in (store / "compaction" / "compactionCq").glob("*/*") if p.is_dir())


def _log_records(log_dir):
    """(offset, size) of every record of a compaction log, walked by TOTALSIZE up to each
    file's BLANK (checked: its size is the rest of the file) or zeros."""
    out = []
    for f in sorted(log_dir.iterdir()):
        raw, pos, base = f.read_bytes(), 0, int(f.name)
        while pos + 8 <= len(raw):
            size, magic = struct.unpack_from(">iI", raw, pos)
            if magic == BLANK_MAGIC:
                assert size == len(raw) - pos, (f, pos)
                break
            if size <= 0:
                break
            out.append((base + pos, size))
            pos += size
    return out


def test_rolled_compaction_queues_verify_clean_SparseConsumeQueue_getMaxMsgOffset(tmp_path):
    """The repro of NOTES-fixes.md: queues of 6 files (so 3 files before n-3, each ended by
    an end unit and zeros) gave compaction.cq-order "queue offset 0 at -1 after 16",
    compaction.unit-mismatch and compaction.expired on a clean generated store."""
    store, conf = _gen(tmp_path, LOG_FIRST)
    queues = _queues(store)
    assert max(len(list(q.iterdir())) for q in queues) > 3  # files before n-3 exist
    ended = 0
    for q in queues:
        files = sorted(q.iterdir())
        got = []
        for f in files:
            units, rest = _file_units(f.read_bytes())
            got += units
            if f != files[-1]:  # a rolled file: its end unit, then zeros
                assert rest[:46] == END_UNIT and rest[46:] == bytes(len(rest) - 46), f
                ended += 1
        bq = BatchConsumeQueue(q, q.parent.name, int(q.name), 1840, sparse=True)
        try:
            assert [tuple(u[:6]) for u in bq.columns().tolist()] == [u[:6] for u in got]
            assert [u[4] for u in got] == sorted({u[4] for u in got})  # queue offsets rise
            assert bq.max_offset == got[-1][4] + 1 and bq.min_offset == got[0][4] == 0
            # every record of the log has its unit, in order
            log = store / "compaction" / "compactionLog" / q.parent.name / q.name
            assert [(u[0], u[1]) for u in got] == _log_records(log)
        finally:
            bq.close()
        dumped = cli("dump-cq", "--store", store, "--compaction", q.parent.name, q.name, "--format", "jsonl").stdout
        assert [(x["msg_base_offset"], x["status"]) for x in map(json.loads, dumped.splitlines())] == [
            (u[4], "ok") for u in got
        ]
    assert ended >= 3
    findings, summary = _verify(store, conf)
    assert findings == [] and summary["errors"] == summary["warnings"] == summary["infos"] == 0, findings
    assert summary["files"]["compaction"] == sum(2 * len(list(q.iterdir())) for q in queues)


def test_queue_file_full_first_ends_with_its_end_unit_CompactionAppendMessageCallback_doAppend(tmp_path):
    """A queue file of 10 units: 9 units, then at wrote position 414 (414 + 46 >= 460) the end
    unit fills the file, and the log gets a BLANK for the rest of its file."""
    store, conf = _gen(tmp_path, CQ_FIRST, messages=300)
    for q in _queues(store):
        files = sorted(q.iterdir())
        log_dir = store / "compaction" / "compactionLog" / q.parent.name / q.name
        assert [f.name for f in sorted(log_dir.iterdir())] == [f.name for f in files]
        for f in files[:-1]:
            raw = f.read_bytes()
            assert len(raw) == 460 and raw[414:] == END_UNIT, f
            assert len(_file_units(raw)[0]) == 9
            logf = log_dir / f.name
            last = struct.unpack_from(UNIT, raw, 8 * 46)
            blank_at = last[0] + last[1] - int(f.name)
            assert logf.stat().st_size == 8280
            assert struct.unpack_from(">iI", logf.read_bytes(), blank_at) == (8280 - blank_at, BLANK_MAGIC)
    assert max(len(list(q.iterdir())) for q in _queues(store)) > 3
    findings, summary = _verify(store, conf)
    assert findings == [] and summary["errors"] == summary["warnings"] == 0, findings


def test_damage_in_a_file_before_n_minus_3_is_still_found(tmp_path):
    """The units of the files recovery does not walk are still checked: a wrong store time
    is compaction.unit-mismatch at its place, and a unit whose queue offset goes back is
    compaction.cq-order (and a mismatch); the end units are not reported."""
    store, conf = _gen(tmp_path, LOG_FIRST)
    q = max(_queues(store), key=lambda d: len(list(d.iterdir())))
    first = sorted(q.iterdir())[0]
    patch_unit(first, 3, ts=5)
    patch_unit(first, 5, base=1)
    findings, _ = _verify(store, conf)
    rel = str(first.relative_to(store))
    got = sorted((x["check"], x["file"], x["offset"]) for x in findings)
    assert got == [
        ("compaction.cq-order", rel, 5 * 46),
        ("compaction.unit-mismatch", rel, 3 * 46),
        ("compaction.unit-mismatch", rel, 5 * 46),
    ], findings


def _unit(off, size, ts, base):
    return struct.pack(UNIT, off, size, 0, ts, base, 1, -1, 0)


def test_hand_built_rolled_queue_reads_each_file_to_its_end_unit(tmp_path):
    """Five files of 4 units' room, written from the layout: the log rolled first in 0 and 2
    (end unit, zeros), the queue filled first in 1 and 3 (3 units and the end unit), the last
    file open. Every file's units end at its end unit, before n-3 too; ``find`` (the broker's
    binary searches, within [first unit, last valid unit] of a file) never lands on one."""
    size = 4 * 46
    d = tmp_path / "T" / "0"
    d.mkdir(parents=True)
    layout = {0: [0, 1], 1: [2, 3, 4], 2: [5], 3: [7, 8, 9], 4: [10, 11]}  # queue offsets per file
    for i, bases in layout.items():
        data = b"".join(_unit(1000 * i + 100 * j, 90, 50 + b, b) for j, b in enumerate(bases))
        if i < 4:
            data += END_UNIT
        (d / f"{1000 * i:020d}").write_bytes(data.ljust(size, b"\0"))
    bq = BatchConsumeQueue(d, "T", 0, size, sparse=True)
    try:
        assert bq.valid_counts == [2, 3, 1, 3, 2]
        assert [u.msg_base_offset for u in bq.units()] == [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11]
        assert [(u.file, u.pos) for u in bq.units()][2] == (f"{1000:020d}", 0)
        assert (bq.min_offset, bq.max_offset, bq.max_physic_offset) == (0, 12, 4100)
        assert bq.find(6) is None and bq.find(6, or_next=True).msg_base_offset == 7  # compacted away
        assert bq.find(5).commitlog_offset == 2000 and bq.find(12, or_next=True) is None
    finally:
        bq.close()


def test_a_hole_before_n_minus_3_stays_in_range_one_after_ends_its_file(tmp_path):
    """A unit zeroed inside a file: before n-3 it lies within what ``#getMaxMsgOffset`` and the
    binary searches cover, so it is read (and verify reports it), with the units after it;
    from n-3 on ``SparseConsumeQueue#recover`` ends that file's units there."""
    size = 4 * 46
    d = tmp_path / "T" / "0"
    d.mkdir(parents=True)
    for i in range(5):
        units = [_unit(1000 * i + 100 * j, 90, 1, 3 * i + j) for j in range(3)]
        if i in (0, 3):
            units[1] = bytes(46)
        (d / f"{1000 * i:020d}").write_bytes((b"".join(units) + END_UNIT).ljust(size, b"\0"))
    bq = BatchConsumeQueue(d, "T", 0, size, sparse=True)
    try:
        assert bq.valid_counts == [3, 3, 3, 1, 3]
        assert [u.msg_base_offset for u in bq.units()][:4] == [0, 0, 2, 3]
    finally:
        bq.close()


def test_holes_in_a_rolled_generated_queue_are_reported_as_before(tmp_path):
    """The findings the reader gave these holes before it stopped at end units: in the first
    file (before n-3) the unit is read and is out of order and expired, its record
    unreferenced; in the file n-2 the units from the hole on are not read, their records
    unreferenced."""
    store, conf = _gen(tmp_path, LOG_FIRST)
    q = max(_queues(store), key=lambda d: len(list(d.iterdir())))
    files = sorted(q.iterdir())
    assert len(files) == 6
    patch_unit(files[0], 5, off=-1, size=0)
    raw = bytearray(files[4].read_bytes())
    n = len(_file_units(bytes(raw))[0])
    raw[3 * 46 : 4 * 46] = bytes(46)
    files[4].write_bytes(bytes(raw))
    findings, summary = _verify(store, conf)
    rel = str(files[0].relative_to(store))
    assert [(x["check"], x["file"], x["offset"]) for x in findings[:2]] == [
        ("compaction.cq-order", rel, 230),
        ("compaction.expired", rel, 230),
    ]
    assert summary["findings"] == {
        "compaction.cq-order": 1,
        "compaction.expired": 1,
        "compaction.unreferenced": 1 + n - 3,
    }, findings
    logs = store / "compaction" / "compactionLog" / q.parent.name / q.name
    assert [x["file"] for x in findings[2:]] == [str((logs / files[0].name).relative_to(store))] + [
        str((logs / files[4].name).relative_to(store))
    ] * (n - 3)


def _replay(tmp_path, name, topics_json, conf, lines):
    """A new store made of dumped records (generate --append --from-jsonl, as the broker's
    reput dispatches them), parts given one after the other."""
    store = tmp_path / name
    (store / "config").mkdir(parents=True)
    (store / "config" / "topics.json").write_bytes(topics_json)
    for i, part in enumerate(lines):
        src = tmp_path / f"{name}{i}.jsonl"
        src.write_text("".join(json.dumps(x) + "\n" for x in part))
        generate_5x(store, conf, *SMALL, "--append", "--from-jsonl", src)
    return store


@pytest.mark.slow
def test_a_record_that_fits_no_log_file_ends_two_files_CompactionLog_asyncPutMessage(tmp_path):
    """A record longer than a compaction log file - 8: the file it meets gets the end unit
    and a BLANK, ``TopicPartitionLog#roll``, and the retry ends the new files too (end unit
    at 0, a BLANK spanning the log file); the record gets no unit and the next record goes to
    the file after (``#isEmptyOrCurrentFileFull``). Continued by an append right after it,
    the store is the same byte for byte; both verify clean. (Was: nothing written for it.)"""
    import base64

    one, conf = _gen(tmp_path, LOG_FIRST)
    dump = cli("dump-commitlog", "--store", one, "--format", "jsonl", "--body", "base64").stdout.splitlines()
    recs = [json.loads(x) for x in dump]
    big = [i for i, x in enumerate(recs) if x["topic"] == "OrderTopic" and x["queue_id"] == 0][29]
    recs[big]["body"] = base64.b64encode(b"x" * 12000).decode()
    for x in recs:
        for k in ("physical_offset", "file", "msg_id", "body_crc", "total_size", "body_size"):
            x.pop(k, None)
    topics = (one / "config" / "topics.json").read_bytes()
    a = _replay(tmp_path, "a", topics, conf, [recs])
    b = _replay(tmp_path, "b", topics, conf, [recs[: big + 1], recs[big + 1 :]])
    q = a / "compaction" / "compactionCq" / "OrderTopic" / "0"
    per_file = [_file_units(f.read_bytes()) for f in sorted(q.iterdir())]
    empty = [i for i, (units, _) in enumerate(per_file) if not units]
    assert len(empty) == 1 and 0 < empty[0] < len(per_file) - 1
    i = empty[0]
    assert per_file[i][1][:46] == END_UNIT and per_file[i - 1][1][:46] == END_UNIT
    assert per_file[i - 1][0][-1][4] == 28 and per_file[i + 1][0][0][4] == 30  # queue offset 29 has no unit
    name = sorted(q.iterdir())[i].name
    log = (a / "compaction" / "compactionLog" / "OrderTopic" / "0" / name).read_bytes()
    assert struct.unpack_from(">iI", log, 0) == (9200, BLANK_MAGIC)
    for s in (a, b):
        findings, summary = _verify(s, conf)
        assert findings == [] and summary["errors"] == 0, findings
    tree = {str(p.relative_to(a)): p.read_bytes() for p in sorted((a / "compaction").rglob("*")) if p.is_file()}
    assert tree == {str(p.relative_to(b)): p.read_bytes() for p in sorted((b / "compaction").rglob("*")) if p.is_file()}
