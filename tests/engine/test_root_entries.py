"""verify and stats account for every entry of a store root by the one table of
store/layout/root_entries.py (4.9.x and 5.x brokers: StorePathConfigHelper, MessageStoreConfig,
TimerMessageStore, CompactionStore, DLedgerConfig#getDefaultPath, …): what verify does not
check is named (info), what no broker writes is named (warning), never silently ignored."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import cli, generate


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("root") / "store", messages=200)


@pytest.fixture
def store(master, tmp_path):
    dst = tmp_path / "store"
    shutil.copytree(master, dst)
    return dst


def test_classify_the_broker_entries():
    from rmqstore_cli.store.layout.root_entries import ROOT_ENTRIES, classify

    for name in (
        "commitlog",
        "consumequeue",
        "index",
        "checkpoint",
        "lock",
        "abort",
        "abort.bak",
        "config",
        "timerwheel",
        "timerlog",
        "batchconsumequeue",
        "compaction",
        "epochFileCheckpoint",
        "epochFileCheckpoint.bak",
        "brokerIdentity",
        "kvStore",
        "consumequeue_ext",
    ):
        e = classify(name)
        assert e is not None and e.name == name and ("#" in e.source or "." in e.source)
    assert classify("dledger-n9").name == "dledger-"
    assert classify("dledger-") is None and classify("junk") is None and classify("rocksdbstore") is None
    assert len({e.name for e in ROOT_ENTRIES}) == len(ROOT_ENTRIES)


def test_plain_store_has_no_root_finding(store):
    r = cli("verify", "-s", store, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["summary"]["findings"] == {}, r.stdout


def test_every_entry_named_by_verify_and_stats(store):
    """An unknown file and directory: store.unknown-entry (warning, exit stays 0); a 5.x
    entry verify does not read: store.unchecked-entry (info) citing its writer; stats marks
    only the unknown ones known: false."""
    (store / "junk").mkdir()
    (store / "notes.txt").write_text("x")
    (store / "kvStore").mkdir()
    (store / "brokerIdentity").write_bytes(b"\0" * 64)
    r = cli("verify", "-s", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    found = {(f["check"], f["file"], f["severity"]) for f in map(json.loads, r.stdout.splitlines()[:-1])}
    assert found == {
        ("store.unknown-entry", "junk", "warning"),
        ("store.unknown-entry", "notes.txt", "warning"),
        ("store.unchecked-entry", "kvStore", "info"),
        ("store.unchecked-entry", "brokerIdentity", "info"),
    }
    detail = [json.loads(x)["detail"] for x in r.stdout.splitlines()[:-1] if "kvStore" in x][0]
    assert "PopConsumerService.ROCKSDB_DIRECTORY" in detail
    r = cli("stats", "-s", store, "--format", "json")
    comps = {c["path"]: c["known"] for c in json.loads(r.stdout)["summary"]["components"]}
    assert comps["junk"] is False and comps["notes.txt"] is False
    assert comps["kvStore"] is True and comps["brokerIdentity"] is True and comps["checkpoint"] is True


def test_real_5x_samples_name_what_they_do_not_check(sample_tarball):
    """The timer sample: each entry the table says verify does not check (its timer files,
    compaction/, until their readers land) is named, nothing is unknown."""
    import os

    from rmqstore_cli.store.layout.root_entries import classify

    store = sample_tarball("timer") / "store"
    r = cli("verify", "-s", store, "--format", "jsonl")
    found = [json.loads(x) for x in r.stdout.splitlines()[:-1]]
    named = {f["file"] for f in found if f["check"] == "store.unchecked-entry"}
    assert not [f for f in found if f["check"] == "store.unknown-entry"]
    assert named == {n for n in os.listdir(store) if not classify(n).checked}
