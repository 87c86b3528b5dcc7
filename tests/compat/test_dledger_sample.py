"""The real DLedger broker sample (RocketMQ 4.9.7, DLedger 0.3.1.2): every reader agrees with
the broker's own answers in expected.json, rebuild-index reproduces its consume queues and
index byte for byte, verify finds nothing (``DLedgerCommitLog``, ``DLedgerMmapFileStore``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli


@pytest.fixture(scope="module")
def sample(sample_tarball):
    d = sample_tarball("dledger")
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text(encoding="utf-8"))


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def _copy(store: Path, dest: Path) -> Path:
    """A writable copy, holes kept (the DLedger index file is 160 MiB, nearly all hole)."""
    subprocess.run(["cp", "-r", "--sparse=always", str(store), str(dest)], check=True)
    return dest


@pytest.mark.parametrize("conf", [True, False], ids=["broker-conf", "detected"])
def test_dump_commitlog_DLedgerCommitLog_getData_agrees_with_broker(sample, conf):
    store, bconf, exp = sample
    recs = _jsonl("dump-commitlog", "--store", store, *(("--broker-conf", bconf) if conf else ()))
    assert len(recs) == exp["messageCount"]
    assert [r["dledger_index"] for r in recs] == list(
        range(exp["dledgerLedgerBeginIndex"], exp["dledgerLedgerEndIndex"] + 1)
    )
    assert {r["dledger_term"] for r in recs} == {exp["dledgerTerm"]}
    assert all(r["physical_offset"] == r["dledger_pos"] + 48 for r in recs)
    assert recs[0]["dledger_pos"] == exp["commitLogMinOffset"]
    assert recs[-1]["physical_offset"] + recs[-1]["total_size"] == exp["commitLogMaxOffset"]
    by_off = {r["physical_offset"]: r for r in recs}
    for s in exp["samples"]:
        r = by_off[s["wroteOffset"]]
        assert recs[s["i"]] is r
        assert (
            r["topic"],
            r["queue_id"],
            r["queue_offset"],
            r["total_size"],
            r["msg_id"],
            r["uniq_key"],
            r["dledger_pos"],
            r["file"],
        ) == (
            s["topic"],
            s["queueId"],
            s["queueOffset"],
            s["wroteBytes"],
            s["msgId"],
            s["uniqKey"],
            s["dledgerEntryPos"],
            s["dataFile"],
        )
        assert " ".join(r["keys"]) == s["keys"]


def test_dump_cq_ConsumeQueue_agrees_with_broker(sample):
    store, bconf, exp = sample
    for q in exp["consumeQueues"]:
        units = _jsonl("dump-cq", "--store", store, q["topic"], str(q["queueId"]))
        assert len(units) == q["maxOffset"] - q["minOffset"]
        by_q = {u["cq_offset"]: u for u in units}
        for s in exp["samples"]:
            if (s["topic"], s["queueId"]) == (q["topic"], q["queueId"]):
                u = by_q[s["queueOffset"]]
                assert (u["commitlog_offset"], u["size"], u["tags_code"]) == (
                    s["cqCommitLogOffset"],
                    s["cqSize"],
                    s["cqTagsCode"],
                )
        msgs = _jsonl("dump-cq", "--store", store, q["topic"], str(q["queueId"]), "--messages")
        assert [u["message"]["dledger_pos"] + 48 for u in msgs] == [u["commitlog_offset"] for u in units]


def test_index_lookup_and_decode_msgid_find_the_broker_offsets(sample):
    store, bconf, exp = sample
    for s in exp["samples"]:
        key = s["keys"].split()[0]
        hits = _jsonl("index-lookup", "--store", store, "--topic", s["topic"], key)
        hit = [h for h in hits if h["message"]["physical_offset"] == s["wroteOffset"]]
        assert hit and hit[0]["message"]["dledger_pos"] == s["dledgerEntryPos"]
        ids = _jsonl("decode-msgid", "--store", store, s["msgId"])
        assert ids[0]["physical_offset"] == s["wroteOffset"] and ids[0]["found"]
        assert ids[0]["messages"][0]["uniq_key"] == s["uniqKey"]
        assert ids[0]["messages"][0]["dledger_index"] == s["i"]


def test_verify_finds_nothing(sample):
    store, bconf, _ = sample
    r = cli("verify", "--store", store, "--broker-conf", bconf, "--format", "json")
    assert r.exit_code == 0, r.stdout
    rep = json.loads(r.stdout)
    assert rep["findings"] == [] and rep["summary"]["errors"] == 0


def _same_tree(a: Path, b: Path) -> None:
    """Consume queues by path; index files in order (the broker names one by the time it was
    created, rebuild-index by its first entry's store time)."""
    for rel in sorted(p.relative_to(a) for p in (a / "consumequeue").rglob("*") if p.is_file()):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    ia, ib = sorted((a / "index").iterdir()), sorted((b / "index").iterdir())
    assert len(ia) == len(ib)
    for x, y in zip(ia, ib, strict=True):
        assert x.read_bytes() == y.read_bytes(), (x.name, y.name)


def test_rebuild_index_output_is_byte_identical(sample, tmp_path):
    store, bconf, _ = sample
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--broker-conf", bconf, "--output", out, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["dispatch_end"]["offset"] == 161341
    _same_tree(store, out)
    assert (out / "checkpoint").read_bytes() == (store / "checkpoint").read_bytes()
    assert (out / "dledger-n9").resolve() == (store / "dledger-n9").resolve()
    v = cli("verify", "--store", out, "--broker-conf", bconf)  # the output is a store of its own
    assert v.exit_code == 0, v.stdout


def test_rebuild_index_in_place_is_byte_identical(sample, tmp_path):
    store, bconf, _ = sample
    copy = _copy(store, tmp_path / "store")
    for p in [*(copy / "consumequeue").rglob("*"), *(copy / "index").iterdir()]:
        if p.is_file():
            p.write_bytes(b"\0" * p.stat().st_size)
    r = cli("rebuild-index", "--store", copy, "--broker-conf", bconf, "--in-place")
    assert r.exit_code == 0, r.stderr
    _same_tree(store, copy)


def test_stats_and_search_offset_read_the_dledger_log(sample):
    store, bconf, exp = sample
    rep = json.loads(cli("stats", "--store", store, "--exact", "--format", "json").stdout)
    assert rep["summary"]["messages"] == exp["messageCount"]
    assert {r["topic"]: r["messages"] for r in rep["rows"]} == {
        t: sum(q["maxOffset"] for q in exp["consumeQueues"] if q["topic"] == t) for t in ("CartTopic", "ShipTopic")
    }
    dl = [c for c in rep["summary"]["components"] if c["path"] == "dledger-n9"]
    assert dl[0]["known"] and dl[0]["files"] == 3  # index/ file, checkpoint, currterm; data/ is the commit log
    s = exp["samples"][5]
    recs = _jsonl("dump-commitlog", "--store", store)
    ts = {r["physical_offset"]: r["store_timestamp"] for r in recs}[s["wroteOffset"]]
    hits = _jsonl("search-offset", "--store", store, "-t", s["topic"], "--time", str(ts))
    first = min(
        r["queue_offset"]
        for r in recs
        if r["topic"] == s["topic"] and r["queue_id"] == s["queueId"] and r["store_timestamp"] >= ts
    )
    assert {h["queue_id"]: h["offset"] for h in hits}[s["queueId"]] == first
