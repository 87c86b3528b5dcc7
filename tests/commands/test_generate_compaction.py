"""generate --compaction-topics: 5.x compaction topics (cleanup.policy=COMPACTION) dispatched
to compaction/ as ``CommitLogDispatcherCompaction`` -> ``CompactionLog#asyncPutMessage`` does.

The writer is checked against the real 5.3.3 sample: its commit log dispatched through
``CompactionDispatch`` gives byte for byte the files its compaction run left untouched (the
``…18400`` ones), and the sizes its ``beforeCompaction`` record names. Generated stores are
read back with plain struct code written from the broker's layouts, verified clean, and read
by dump-cq --compaction and dump-commitlog --compaction-log.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

from tests.helpers import cli, generate_5x

SMALL = ("--commitlog-file-size", "262144", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")
UNIT = ">qiqqqhii"  # BatchConsumeQueue#putBatchMessagePositionInfo (SparseConsumeQueue), test-only
CQ_UNIT = ">qiq"  # ConsumeQueue#putMessagePositionInfo
BLANK_MAGIC = 0xCBD43194 - (1 << 32)  # MessageDecoder.BLANK_MAGIC_CODE as a Java int
CONF = "compactionMappedFileSize=8192\ncompactionCqMappedFileSize=1840\n"  # log files of 9200 bytes


def _dispatch_sample(src, out, run=False):
    """The sample's commit log through the writer, as the broker's reput dispatches it."""
    from rmqstore_cli.commands.common import load_config

    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.write.compaction_writer import CompactionDispatch
    from rmqstore_cli.store.write.dispatch import dispatch_request

    cfg = load_config(src / "store", src / "broker.conf", None, None, None, None)
    cd = CompactionDispatch(
        out, {"DeviceStateTopic"}, cfg.compaction_mapped_file_size, cfg.compaction_cq_mapped_file_size, [out], run
    )
    cl = CommitLog(cfg)
    try:
        for m in cl.scan():
            f = cl.queue.find(m.offset)
            pos = m.offset - f.file_from_offset
            cd.dispatch(dispatch_request(m, {}, cfg), bytes(f.buffer()[pos : pos + m.total_size]), m)
    finally:
        cl.close()
    cd.close()


def _units(qdir):
    """Every unit of a compaction queue, per file, up to each file's first invalid unit
    (``SparseConsumeQueue#recover``), read here from the documented layout."""
    out = {}
    for f in sorted(qdir.iterdir()):
        raw, units = f.read_bytes(), []
        for i in range(0, len(raw) - 45, 46):
            u = struct.unpack_from(UNIT, raw, i)
            if u[0] < 0 or u[1] <= 0 or u[4] < 0 or u[5] <= 0:
                break
            units.append(u)
        out[int(f.name)] = units
    return out


def test_sample_dispatch_is_byte_identical_CompactionLog_asyncPutMessage(sample_tarball, tmp_path):
    src = sample_tarball("compaction")
    expected = json.loads((src / "expected.json").read_text())
    _dispatch_sample(src, tmp_path)
    for sub in ("compactionLog", "compactionCq"):
        for q in (0, 1):
            name = f"compaction/{sub}/DeviceStateTopic/{q}/00000000000000018400"
            assert (tmp_path / name).read_bytes() == (src / "store" / name).read_bytes(), name
    for before in expected["beforeCompaction"]:
        d = f"DeviceStateTopic/{before['queueId']}"
        logs = sorted((tmp_path / "compaction" / "compactionLog" / d).iterdir())
        cqs = sorted((tmp_path / "compaction" / "compactionCq" / d).iterdir())
        assert [f.name for f in logs] == [f.name for f in cqs]  # TopicPartitionLog#roll: named alike
        assert len(logs) == before["compactionLogFiles"] and len(cqs) == before["compactionCqFiles"]
        assert all(f.stat().st_size == expected["compactionLogFileSize"] for f in logs)
        assert all(f.stat().st_size == expected["compactionCqFileSize"] for f in cqs)
        units = [u for us in _units(tmp_path / "compaction" / "compactionCq" / d).values() for u in us]
        assert [u[4] for u in units] == list(range(before["compactionCqMinOffset"], before["compactionCqMaxOffset"]))
        assert units[-1][0] + units[-1][1] == before["compactionLogMaxOffset"]
    assert (
        tmp_path / "compaction" / "position-checkpoint"
    ).read_text() == '{\n\t"empty":true,\n\t"queueOffsetMap":{}\n}'  # CompactionPositionMgr, nothing compacted yet


def test_sample_dispatch_and_run_reproduce_the_whole_compaction_dir_CompactionLog_doCompaction(
    sample_tarball, tmp_path
):
    """Dispatch then one run per queue: every file of the sample's compaction/ (the rewritten
    ``…0`` files, the untouched ``…18400`` ones, position-checkpoint and its .bak), and no other."""
    src = sample_tarball("compaction")
    _dispatch_sample(src, tmp_path, run=True)
    ref, got = src / "store" / "compaction", tmp_path / "compaction"
    files = sorted(p.relative_to(ref) for p in ref.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(got) for p in got.rglob("*") if p.is_file())
    assert len(files) == 10
    for f in files:
        assert (got / f).read_bytes() == (ref / f).read_bytes(), f


def _gen(tmp_path, *extra):
    conf = tmp_path / "broker.conf"
    conf.write_text(CONF)
    store = tmp_path / "s"
    return generate_5x(store, conf, *SMALL, *extra), conf


def _cq_record(store, topic, qid, queue_offset):
    """The commit-log record of a queue offset, found through the 20-byte consume queue."""
    cq = b"".join(f.read_bytes() for f in sorted((store / "consumequeue" / topic / str(qid)).iterdir()))
    off, size, _ = struct.unpack_from(CQ_UNIT, cq, queue_offset * 20)
    cl = b"".join(f.read_bytes() for f in sorted((store / "commitlog").iterdir()))
    return cl[off : off + size]


def test_generated_compaction_files_read_back_with_struct_code(tmp_path):
    store, _ = _gen(tmp_path, "--messages", "500", "--topics", "3", "--compaction-topics", "2", "--bcq-topics", "1")
    topics = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    compacted = sorted(t for t, c in topics.items() if c.get("attributes") == {"cleanup.policy": "COMPACTION"})
    assert compacted == sorted(p.name for p in (store / "compaction" / "compactionLog").iterdir())
    assert len(compacted) == 2
    ends = 0
    for topic in compacted:
        for qdir in (store / "compaction" / "compactionCq" / topic).iterdir():
            per_file = _units(qdir)
            logdir = store / "compaction" / "compactionLog" / topic / qdir.name
            assert (
                sorted(int(f.name) for f in logdir.iterdir())
                == sorted(per_file)
                == [9200 * i for i in range(len(per_file))]
            )
            units = [u for _, us in sorted(per_file.items()) for u in us]
            assert [u[4] for u in units] == list(range(len(units)))  # every keyed message, in order
            for u in units:
                base = u[0] - u[0] % 9200
                rec = (logdir / f"{base:020d}").read_bytes()[u[0] - base : u[0] - base + u[1]]
                size, _, _, qid, _, qo, phys = struct.unpack_from(">iiiiiqq", rec)
                assert (size, qid, qo, phys, u[5], u[6], u[7]) == (u[1], int(qdir.name), u[4], u[0], 1, -1, 0)
                orig = _cq_record(store, topic, int(qdir.name), u[4])
                assert rec[:28] + rec[36:] == orig[:28] + orig[36:]  # only PHYSICALOFFSET differs
                assert b"KEYS\x01k0" in rec
            for name, us in sorted(per_file.items())[:-1]:  # a rolled file ends in the END rule's marks
                raw = (qdir / f"{name:020d}").read_bytes()
                assert struct.unpack_from(UNIT, raw, 46 * len(us)) == (-1, 0, 0, 0, 0, 0, -1, 0)
                last = us[-1]
                at = last[0] + last[1] - name
                blank = struct.unpack_from(">ii", (logdir / f"{name:020d}").read_bytes(), at)
                assert blank == (9200 - at, BLANK_MAGIC)
                ends += 1
    assert ends > 0


def test_generated_compaction_store_verifies_and_reads_back(tmp_path):
    store, conf = _gen(tmp_path, "--messages", "300", "--compaction-topics", "1")
    for args in (("--broker-conf", conf), ()):  # sizes from broker.conf, and from the files
        r = cli("verify", "--store", store, *args, "--format", "jsonl")
        assert r.exit_code == 0, r.stdout + r.stderr
        summary = json.loads(r.stdout.splitlines()[-1])["summary"]
        assert summary["errors"] == summary["warnings"] == 0 and summary["files"]["compaction"] > 0
    topic = next((store / "compaction" / "compactionCq").iterdir()).name
    for qdir in (store / "compaction" / "compactionCq" / topic).iterdir():
        units = [u for us in _units(qdir).values() for u in us]
        rows = [
            json.loads(x)
            for x in cli(
                "dump-cq", "--store", store, topic, qdir.name, "--compaction", "--format", "jsonl"
            ).stdout.splitlines()
        ]
        assert [(r["commitlog_offset"], r["size"], r["msg_base_offset"], r["status"]) for r in rows] == [
            (u[0], u[1], u[4], "ok") for u in units
        ]
        recs = [
            json.loads(x)
            for x in cli(
                "dump-commitlog", "--store", store, "--compaction-log", f"{topic}/{qdir.name}", "--format", "jsonl"
            ).stdout.splitlines()
        ]
        assert [(r["physical_offset"], r["queue_offset"]) for r in recs] == [(u[0], u[4]) for u in units]


def test_compaction_topics_need_a_new_5_store(tmp_path):
    r = cli("generate", "--store", tmp_path / "s", "--compaction-topics", "1", *SMALL)
    assert r.exit_code == 2 and "--compaction-topics needs --broker-version 5" in r.stderr
    r = cli(
        "generate",
        "--store",
        tmp_path / "s",
        "--broker-version",
        "5",
        "--topics",
        "2",
        "--bcq-topics",
        "1",
        "--compaction-topics",
        "2",
        *SMALL,
    )
    assert r.exit_code == 2 and "at most --topics topics" in r.stderr
    r = cli(
        "generate", "--store", tmp_path / "s", "--broker-version", "5", "--append", "--compaction-topics", "1", *SMALL
    )
    assert r.exit_code == 2 and not (tmp_path / "s").exists()
    r = cli("generate", "--store", tmp_path / "s", "--broker-version", "5", "--compaction-run", *SMALL)
    assert r.exit_code == 2 and "--compaction-run needs --compaction-topics" in r.stderr


def test_generated_compaction_run_keeps_each_keys_latest_and_verifies(tmp_path):
    store, conf = _gen(
        tmp_path, "--messages", "400", "--topics", "2", "--queues", "2", "--compaction-topics", "1", "--compaction-run"
    )
    checkpoint = (store / "compaction" / "position-checkpoint").read_text()
    assert (store / "compaction" / "position-checkpoint.bak").read_text() == checkpoint
    offsets = json.loads(checkpoint)["queueOffsetMap"]
    topic = next((store / "compaction" / "compactionCq").iterdir()).name
    compacted = 0
    for qdir in (store / "compaction" / "compactionCq" / topic).iterdir():
        per_file = _units(qdir)
        if len(per_file) < 2:
            continue
        files, last = sorted(per_file), offsets[f"{topic}_{qdir.name}"]
        assert files[0] == 0  # the rewritten files take the names of the first ones (#replaceFiles)
        kept = [u for name in files[:-1] for u in per_file[name]]
        assert all(u[4] > last for u in per_file[files[-1]]) and all(u[4] <= last for u in kept)
        keys = {}
        for qo in range(last + 1):  # each key's latest queue offset, from the 20-byte consume queue
            rec = _cq_record(store, topic, int(qdir.name), qo)
            keys[rec[rec.index(b"KEYS\x01") + 5 : rec.index(b"KEYS\x01") + 9]] = qo
        assert [u[4] for u in kept] == sorted(keys.values())
        compacted += 1
    assert compacted and len(offsets) == compacted
    r = cli("verify", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    assert r.exit_code == 0 and summary["errors"] == summary["warnings"] == 0, r.stdout
    r = cli("dump-cq", "--store", store, "--summary", "--format", "jsonl")
    assert r.exit_code == 0 and "compaction" in r.stdout


def _tree(root):
    """Every file under ``root`` by its relative name, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_append_continues_the_compaction_logs_like_one_go_CompactionLog_asyncPutMessage(tmp_path):
    """generate --append (here --from-jsonl, which replays every record as it was) on a store
    whose topics.json has cleanup.policy=COMPACTION continues each compaction log and its
    sparse queue where a restarted broker does (``TopicPartitionLog#init``,
    ``SparseConsumeQueue#recover``, ``CompactionLog#asyncPutMessage``): the store appended in
    three parts has the compaction/ files of the one generated in one go, byte for byte
    (the parts end inside a file and at the rolls), and topics.json keeps the attribute
    (was: the appended sends were never dispatched and the attribute was dropped)."""
    one, conf = _gen(tmp_path, "--messages", "700", "--topics", "2", "--compaction-topics", "1")
    lines = cli("dump-commitlog", "--store", one, "--format", "jsonl", "--body", "base64").stdout.splitlines()
    assert len(lines) >= 700 and len(_tree(one / "compaction")) > 6  # some queues rolled
    two = tmp_path / "two"
    (two / "config").mkdir(parents=True)
    (two / "config" / "topics.json").write_bytes((one / "config" / "topics.json").read_bytes())
    for i, part in enumerate((lines[:150], lines[150:151], lines[151:])):
        src = tmp_path / f"part{i}.jsonl"
        src.write_text("\n".join(part) + "\n")
        generate_5x(two, conf, *SMALL, "--append", "--from-jsonl", src)
    assert _tree(two / "compaction") == _tree(one / "compaction")
    assert _tree(two / "commitlog") == _tree(one / "commitlog")
    topics = json.loads((two / "config" / "topics.json").read_text())["topicConfigTable"]
    assert [t for t, c in topics.items() if c.get("attributes") == {"cleanup.policy": "COMPACTION"}] == ["OrderTopic"]
    # verify finds nothing in either (a rolled file's end unit is not a unit:
    # SparseConsumeQueue#getMaxMsgOffset, test_compaction_roll.py)
    got = [
        [
            json.loads(x)
            for x in cli("verify", "--store", s, "--broker-conf", conf, "--format", "jsonl").stdout.splitlines()[:-1]
        ]
        for s in (one, two)
    ]
    assert got[0] == got[1] == []


def test_append_infers_the_compaction_sizes_and_refuses_what_it_cannot_continue(tmp_path):
    """Without --broker-conf the compaction files' own sizes are used (as the commit log's);
    where a restarted broker would not continue the files as they are, generate --append is
    one error line, exit 3, and writes nothing there: an unfinished run's compacting/, a
    log file without its queue file (``TopicPartitionLog#sanityCheck`` throws), a
    configured size the files do not have."""
    one, conf = _gen(tmp_path, "--messages", "300", "--topics", "2", "--compaction-topics", "1")
    lines = cli("dump-commitlog", "--store", one, "--format", "jsonl", "--body", "base64").stdout.splitlines()
    (tmp_path / "all.jsonl").write_text("\n".join(lines) + "\n")
    base = tmp_path / "base"
    (base / "config").mkdir(parents=True)
    (base / "config" / "topics.json").write_bytes((one / "config" / "topics.json").read_bytes())
    (tmp_path / "head.jsonl").write_text("\n".join(lines[:120]) + "\n")
    (tmp_path / "tail.jsonl").write_text("\n".join(lines[120:]) + "\n")
    assert (
        cli(
            "generate",
            "--store",
            base,
            "--broker-conf",
            conf,
            "--broker-version",
            "5",
            *SMALL,
            "--append",
            "--from-jsonl",
            tmp_path / "head.jsonl",
        ).exit_code
        == 0
    )

    def append(store, *conf_args):
        return cli(
            "generate",
            "--store",
            store,
            *conf_args,
            "--broker-version",
            "5",
            "--append",
            "--from-jsonl",
            tmp_path / "tail.jsonl",
        )

    inferred = tmp_path / "inferred"
    shutil.copytree(base, inferred)
    r = append(inferred)  # no --broker-conf: every size from the files
    assert r.exit_code == 0, r.stderr
    assert _tree(inferred / "compaction") == _tree(one / "compaction")
    cq0 = Path("compaction/compactionCq/OrderTopic/0")
    damages = {
        "compacting": lambda s: (s / "compaction/compactionLog/OrderTopic/0/compacting").mkdir(),
        "queue file gone": lambda s: next((s / cq0).iterdir()).unlink(),
        "size": lambda s: (s / "broker.conf").write_text(CONF.replace("1840", "920")),
    }
    for name, damage in damages.items():
        s = tmp_path / name.replace(" ", "-")
        shutil.copytree(base, s)
        (s / "broker.conf").write_text(CONF)
        damage(s)
        before = _tree(s)
        r = append(s, "--broker-conf", s / "broker.conf")
        assert r.exit_code == 3, (name, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "compaction" in r.stderr and "Traceback" not in r.stderr
        assert _tree(s) == before, name  # refused before the commit log's first byte


def test_sample_dispatched_in_two_runs_equals_one_run_TopicPartitionLog_init(sample_tarball, tmp_path):
    """The real sample's commit log dispatched by two writers, the second continuing the
    first's files (``TopicPartitionLog#init``, ``SparseConsumeQueue#recover``), at several
    split points: the same compaction/ bytes as one writer, whose files the broker's own
    match (test above)."""
    from rmqstore_cli.commands.common import load_config

    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.write.compaction_writer import CompactionDispatch
    from rmqstore_cli.store.write.dispatch import dispatch_request

    src = sample_tarball("compaction")
    _dispatch_sample(src, tmp_path / "one")
    cfg = load_config(src / "store", src / "broker.conf", None, None, None, None)
    cl = CommitLog(cfg)
    try:
        sends = []
        for m in cl.scan():
            f = cl.queue.find(m.offset)
            pos = m.offset - f.file_from_offset
            sends.append((dispatch_request(m, {}, cfg), bytes(f.buffer()[pos : pos + m.total_size]), m))
    finally:
        cl.close()
    for split in (1, len(sends) // 3, len(sends) // 2 + 1):
        out = tmp_path / f"split{split}"
        for part in (sends[:split], sends[split:]):
            cd = CompactionDispatch(
                out, {"DeviceStateTopic"}, cfg.compaction_mapped_file_size, cfg.compaction_cq_mapped_file_size, [out]
            )
            for req, record, m in part:
                cd.dispatch(req, record, m)
            cd.close()
        assert _tree(out / "compaction") == _tree(tmp_path / "one" / "compaction"), split
