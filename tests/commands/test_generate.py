"""generate: deterministic, realistic stores whose CQs and index are what dispatch builds."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from itertools import pairwise

import pytest
from rmqstore_cli.formats.commitlog import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.message_store import MessageStore
from rmqstore_cli.store.write.dispatch import Dispatcher
from tests.helpers import SMALL, cli, generate, run


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())


def test_same_seed_same_bytes(tmp_path):
    a = generate(tmp_path / "a", messages=800, seed=3)
    b = generate(tmp_path / "b", messages=800, seed=3)
    c = generate(tmp_path / "c", messages=800, seed=4)
    assert _files(a) == _files(b)
    for rel in _files(a):
        assert filecmp.cmp(a / rel, b / rel, shallow=False), rel
    assert not filecmp.cmp(
        a / "commitlog" / "00000000000000000000", c / "commitlog" / "00000000000000000000", shallow=False
    )


def test_generated_store_reads_back_and_is_realistic(small_store_master):
    ms = MessageStore.open(StoreConfig.load(small_store_master, None))
    msgs = list(ms.commitlog.scan(check_crc=True))
    assert ms.commitlog.end.clean
    assert len(ms.commitlog.files) > 5  # small files roll
    topics = {m.topic for m in msgs}
    assert {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"} <= topics
    kinds = {m.transaction_type for m in msgs}
    assert {0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE} <= kinds
    assert any(m.born_v6 for m in msgs) and any(m.store_v6 for m in msgs)
    assert any(any(not k.isascii() for k in m.keys) for m in msgs)
    shared = [m for m in msgs if any(k.startswith("shared-") for k in m.keys)]
    assert len(shared) > 50
    # store times never go backwards; physical offsets are positions
    assert all(a.store_timestamp <= b.store_timestamp for a, b in pairwise(msgs))
    assert all(m.physical_offset == m.offset for m in msgs)
    # commit and rollback records point at the record they answer
    by_off = {m.physical_offset: m for m in msgs}
    for m in msgs:
        if m.transaction_type in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            assert by_off[m.prepared_transaction_offset].physical_offset < m.physical_offset
    # queue offsets are consecutive per queue for NOT/COMMIT records
    nxt: dict = {}
    for m in msgs:
        if m.transaction_type in (0, TRANSACTION_COMMIT_TYPE):
            k = (m.topic, m.queue_id)
            assert m.queue_offset == nxt.get(k, 0), k
            nxt[k] = m.queue_offset + 1
    ms.close()


def test_cq_and_index_equal_a_dispatch_recomputed_from_the_commitlog(small_store_master, tmp_path):
    cfg = StoreConfig.load(small_store_master, None)
    ms = MessageStore.open(cfg)
    d = Dispatcher(cfg, tmp_path / "consumequeue", tmp_path / "index")
    for m in ms.commitlog.scan():
        d.dispatch(m)
    d.close()
    theirs = _files(small_store_master / "consumequeue")
    assert theirs == _files(tmp_path / "consumequeue")
    for rel in theirs:
        assert filecmp.cmp(small_store_master / "consumequeue" / rel, tmp_path / "consumequeue" / rel, shallow=False), (
            rel
        )
    assert _files(small_store_master / "index") == _files(tmp_path / "index")
    for rel in _files(tmp_path / "index"):
        assert filecmp.cmp(small_store_master / "index" / rel, tmp_path / "index" / rel, shallow=False), rel
    ms.close()


def test_appending_continues_queue_offsets(tmp_path):
    store = generate(tmp_path / "s", messages=300, seed=1)
    generate(store, "--append", messages=300, seed=2)
    ms = MessageStore.open(StoreConfig.load(store, None))
    nxt: dict = {}
    n = 0
    for m in ms.commitlog.scan():
        n += 1
        if m.transaction_type in (0, TRANSACTION_COMMIT_TYPE):
            k = (m.topic, m.queue_id)
            assert m.queue_offset == nxt.get(k, 0)
            nxt[k] = m.queue_offset + 1
    assert n > 600
    for cq in ms.consume_queues():
        assert cq.max_offset == nxt[(cq.topic, cq.queue_id)]
    topics = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert set(topics) == {t for t, _ in nxt} | {
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    } & set(topics)


def test_checkpoint_and_lock_written(small_store_master):
    ms = MessageStore.open(StoreConfig.load(small_store_master, None))
    last = max(m.store_timestamp for m in ms.commitlog.scan())
    cp = ms.checkpoint
    assert cp.physic_msg_timestamp == cp.logics_msg_timestamp == last
    full = [f for f in ms.index.files if f.is_write_full()]
    assert cp.index_msg_timestamp == full[-1].header.end_timestamp
    assert (small_store_master / "lock").read_bytes() == b"lock"
    assert (small_store_master / "checkpoint").stat().st_size == 4096


def test_generate_refuses_a_store_locked_by_a_live_broker(tmp_path):
    store = generate(tmp_path / "s", messages=10)
    # a child process takes the broker's lock the way FileChannel#tryLock does
    code = (
        "import fcntl,os,struct,sys,time;fd=os.open(sys.argv[1],os.O_RDWR);"
        "fcntl.fcntl(fd,fcntl.F_SETLK,struct.pack('hhqqi4x',fcntl.F_WRLCK,0,0,1,0));"
        "print('locked',flush=True);time.sleep(30)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(store / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        r = run("generate", "--store", store, "--append", "--messages", "5", *SMALL)
        assert r.returncode == 4
        assert b"live broker" in r.stderr and str(holder.pid).encode() in r.stderr
        assert b"Traceback" not in r.stderr
    finally:
        holder.kill()
        holder.wait()


def test_5x_profile_stores_wait_and_whole_record_crc(tmp_path):
    """generate --broker-version 5 --append-prop-crc: WAIT kept, trailing \\x02, valid __CRC32#."""
    store = generate(tmp_path / "s", "--broker-version", "5", "--append-prop-crc", messages=50)
    ms = MessageStore.open(StoreConfig.load(store, None))
    msgs = list(ms.commitlog.scan())
    assert all("WAIT" in m.properties and m.properties_text.endswith("\x02") for m in msgs)
    assert all("__CRC32#" in m.properties for m in msgs)
    ms.config.force_verify_prop_crc = True
    assert len(list(ms.commitlog.scan(check_crc=True))) == len(msgs)  # every whole-record CRC is right


@pytest.mark.slow
def test_bad_options_are_one_line_errors(tmp_path):
    r = run("generate", "--store", tmp_path / "x", "--body-size", "9-3")
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and b"Traceback" not in r.stderr
    r = run("generate", "--store", tmp_path / "x", "--start", "yesterday-ish")
    assert r.returncode == 2 and b"--start" in r.stderr


def test_size_mismatch_with_existing_store_is_refused(tmp_path):
    store = generate(tmp_path / "s", messages=20)
    r = run("generate", "--store", store, "--append", "--messages", "5", "--commitlog-file-size", "131072")
    assert r.returncode == 3
    assert b"mappedFileSizeCommitLog" in r.stderr and b"Traceback" not in r.stderr


def test_help_lists_examples():
    r = cli("generate", "--help")
    assert r.exit_code == 0 and "--from-jsonl" in r.stdout and "Examples" in r.stdout


def test_5x_retry_topic_is_a_v2_record_and_4x_keeps_v1(tmp_path):
    store5 = generate(tmp_path / "s5", "--broker-version", "5", "--retry-ratio", "0.3", messages=200)
    msgs = list(MessageStore.open(StoreConfig.load(store5, None)).commitlog.scan())
    retries = [m for m in msgs if m.topic.startswith("%RETRY%")]
    assert retries and all(m.version == "v2" and len(m.topic) > 127 for m in retries)
    assert all(m.version == "v1" for m in msgs if not m.topic.startswith("%RETRY%"))
    assert all(1 <= m.reconsume_times <= 16 and m.properties["RETRY_TOPIC"] for m in retries)
    store4 = generate(tmp_path / "s4", "--retry-ratio", "0.3", messages=200)
    msgs4 = list(MessageStore.open(StoreConfig.load(store4, None)).commitlog.scan())
    assert any(m.topic == "%RETRY%cg-sample" for m in msgs4) and all(m.version == "v1" for m in msgs4)


def _hostile_jsonl(tmp_path, source) -> tuple:
    """A dump of ``source`` (40 records) whose records 5-19 get hostile topics, 3 topics x 5
    records, with their offsets dropped so the writer assigns them."""
    r = cli("dump-commitlog", "--store", source, "--format", "jsonl", "--body", "base64", "--limit", "40")
    assert r.exit_code == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    hostile = ["../../escape", "a/b", "x\x00y"]
    for i, rec in enumerate(recs):
        rec.pop("physical_offset"), rec.pop("queue_offset")
        if 5 <= i < 20:
            rec["topic"] = hostile[i % 3]
    src = tmp_path / "hostile.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in recs))
    return src, recs, hostile


def test_from_jsonl_warns_about_topics_that_get_no_queue(tmp_path, small_store_master):
    src, recs, hostile = _hostile_jsonl(tmp_path, small_store_master)
    box = tmp_path / "box"
    store = box / "store"
    r = cli("generate", "--store", store, "--from-jsonl", src, *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr  # documented: every record is in the store, so success
    s = json.loads(r.stdout)
    assert s["messages"] == len(recs)
    assert sorted((x["topic"], x["records"]) for x in s["refused_topics"]) == sorted((t, 5) for t in hostile)
    assert all(x["reason"] for x in s["refused_topics"])
    warn = [x for x in r.stderr.splitlines() if x.startswith("rmqstore: warning: ")]
    assert len(warn) == 3 and all("5 records of topic" in x and "got no consume queue" in x for x in warn)
    assert "\x00" not in r.stderr and any(repr("x\x00y") in x for x in warn)
    # nothing was written outside the store; the records are in the commit log, not in a queue
    assert sorted(p.name for p in box.iterdir()) == ["store"] and not (tmp_path / "escape").exists()
    safe_topics = {x["topic"] for x in recs} - set(hostile)
    assert {p.name for p in (store / "consumequeue").iterdir()} == safe_topics
    table = json.loads((store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert set(table) == safe_topics
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert sum(json.loads(x)["topic"] in hostile for x in r.stdout.splitlines()) == 15


def test_from_jsonl_without_hostile_topics_prints_no_warning(tmp_path, small_store_master):
    r = cli("dump-commitlog", "--store", small_store_master, "--format", "jsonl", "--body", "base64", "--limit", "30")
    src = tmp_path / "ok.jsonl"
    src.write_text(r.stdout)
    r = cli("generate", "--store", tmp_path / "s", "--from-jsonl", src, *SMALL, "--format", "json")
    assert r.exit_code == 0 and r.stderr == ""
    assert json.loads(r.stdout)["refused_topics"] == []
    r = cli("generate", "--store", tmp_path / "t", "--from-jsonl", src, *SMALL)
    assert r.exit_code == 0 and "refused_topics" not in r.stdout
