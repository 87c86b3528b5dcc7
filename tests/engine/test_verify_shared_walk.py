"""verify reads the commit log once after its scan, not once per check
(store/checks/shared_walk.py): ``bcq.missing-unit`` and the timer's delivered-twice /
never-delivered share one walk, and what it keeps is what each check's own walk gave —
``CommitLog#scan`` up to recovery's first stop for the BatchCQ records, ``scan(start,
every_file=True)`` for the timer's delivered copies and delete marks — on the real 5.3.3
samples, a generated 5.x store and copies damaged here (the walk's own answer is used only
where it met the timer's first message; elsewhere the timer walks alone, as before)."""

from __future__ import annotations

import json
import random
import shutil

import pytest
from rmqstore_cli.formats.commitlog import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from rmqstore_cli.formats.timer import TIMER_TOPIC

from rmqstore_cli.store.checks import shared_walk
from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.layout.config import StoreConfig
from tests.helpers import cli, generate


def _reference(cfg, topics: set[str], start: int | None):
    """The two walks verify made before, record by record (spelled out here)."""
    cl = CommitLog(cfg)
    try:
        bcq = [
            (m.topic, m.queue_id, m.offset, m.store_timestamp)
            for m in cl.scan()
            if m.topic in topics and m.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        ]
        copies, deleted = {}, set()
        for m in cl.scan(start, every_file=True) if start is not None else ():
            props = m.properties
            if "TIMER_DEQUEUE_MS" in props and m.topic != TIMER_TOPIC:
                copies.setdefault(f"{m.topic}+{m.uniq_key}", m.offset)
            elif "TIMER_DEL_UNIQKEY" in props:
                deleted.add(props["TIMER_DEL_UNIQKEY"])
    finally:
        cl.close()
    return bcq, copies, deleted


def _first_timer_message(cfg) -> int | None:
    cl = CommitLog(cfg)
    try:
        return next((m.offset for m in cl.scan(every_file=True) if m.topic == TIMER_TOPIC), None)
    finally:
        cl.close()


def _stores(sample_tarball, tmp_path):
    """(name, store, broker.conf, first timer message): the samples, a generated 5.x store with both, and copies
    of each with one record's TOTALSIZE and MAGICCODE overwritten (the record just before
    the first timer message, one in the middle, one near the end): a stop in the walk."""
    gen = generate(
        tmp_path / "gen" / "store",
        "--broker-version",
        "5",
        "--topics",
        "4",
        "--bcq-topics",
        "1",
        "--timer-ratio",
        "0.2",
        messages=400,
    )
    srcs = [
        ("bcq", sample_tarball("bcq") / "store", sample_tarball("bcq") / "broker.conf"),
        ("timer", sample_tarball("timer") / "store", sample_tarball("timer") / "broker.conf"),
        ("gen", gen, None),
    ]
    for name, store, conf in srcs:
        cfg = StoreConfig.load(store, conf)
        cfg.infer_sizes()
        start = _first_timer_message(cfg)  # what the timer units name, whatever the damage
        yield name, store, conf, start
        cl = CommitLog(cfg)
        try:
            offsets = [m.offset for m in cl.scan()]
        finally:
            cl.close()
        before = [o for o in offsets if start is not None and o < start][-1:]
        size = cfg.mapped_file_size_commit_log
        for at in before + [offsets[len(offsets) // 2], offsets[len(offsets) * 3 // 4]]:
            d = tmp_path / f"{name}-{at}"
            shutil.copytree(store, d)
            f = d / "commitlog" / f"{at - at % size:020d}"
            b = bytearray(f.read_bytes())
            b[at % size : at % size + 8] = random.Random(at).randbytes(8)
            f.write_bytes(bytes(b))
            yield f"{name}-{at}", d, conf, start


@pytest.mark.slow
def test_the_shared_walk_keeps_what_each_checks_own_walk_read(sample_tarball, tmp_path):
    seen = {"reached": 0, "not reached": 0, "bcq cut": 0}
    for name, store, conf, start in _stores(sample_tarball, tmp_path):
        cfg = StoreConfig.load(store, conf)
        cfg.infer_sizes()
        topics = (
            {p.name for p in (store / "batchconsumequeue").iterdir()}
            if (store / "batchconsumequeue").is_dir()
            else set()
        )
        bcq, copies, deleted = _reference(cfg, topics, start)
        cl = CommitLog(cfg)
        try:
            facts = shared_walk.walk(cl, topics, start)
        finally:
            cl.close()
        assert list(facts.bcq_records(topics)) == bcq, name
        seen["bcq cut"] += name.startswith("bcq-") and len(bcq) < 64  # the sample's 64 inner batches
        if start is not None:
            seen["reached" if facts.timer_reached else "not reached"] += 1
            if facts.timer_reached:
                assert (facts.copies, facts.deleted) == (copies, deleted), name
    assert seen["reached"] >= 2 and seen["not reached"] >= 1 and seen["bcq cut"] >= 1, seen


@pytest.mark.slow
@pytest.mark.parametrize(
    "store, read_time, want",
    [("gen", 1 << 62, {"timer.never-delivered", "bcq.missing-unit"}), ("timer", 0, {"timer.delivered-twice"})],
)
def test_verify_walks_the_commit_log_once_for_bcq_and_timer(
    sample_tarball, tmp_path, monkeypatch, store, read_time, want
):
    """One ``CommitLog`` walk besides the scan (was one per check: ``_records_of`` and
    ``_delivered_copies``), the findings as before: a generated 5.x store with a BatchCQ
    topic whose units 3.. are gone and timercheck's read time far ahead (never delivered),
    and the real timer sample with read time 0 (its delivered copies: delivered twice)."""
    if store == "gen":
        root = generate(
            tmp_path / "s",
            "--broker-version",
            "5",
            "--topics",
            "4",
            "--bcq-topics",
            "1",
            "--timer-ratio",
            "0.2",
            messages=400,
        )
        for f in (p for p in (root / "batchconsumequeue").rglob("0*") if p.is_file()):
            b = bytearray(f.read_bytes())
            b[46 * 3 : 46 * 6] = bytes(46 * 3)  # the queue ends after unit 2
            f.write_bytes(bytes(b))
        conf = ()
    else:
        shutil.copytree(sample_tarball(store) / "store", tmp_path / "s")
        root, conf = tmp_path / "s", ("--broker-conf", sample_tarball(store) / "broker.conf")
    tc = root / "config" / "timercheck"
    raw = bytearray(tc.read_bytes())
    raw[0:8] = read_time.to_bytes(8, "big")  # TimerCheckpoint's lastReadTimeMs
    tc.write_bytes(bytes(raw))
    walks = []
    real = CommitLog.scan_blocks

    def counted(self, *a, **k):
        walks.append(k.get("every_file", a[5] if len(a) > 5 else False))
        return real(self, *a, **k)

    monkeypatch.setattr(CommitLog, "scan_blocks", counted)
    r = cli("verify", "--store", root, *conf, "--format", "jsonl")
    checks = {json.loads(x).get("check") for x in r.stdout.splitlines()[:-1]}
    assert want <= checks
    assert walks == [True]
