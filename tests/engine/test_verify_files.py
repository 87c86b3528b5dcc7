"""verify says what it checked: the summary counts every kind of file it read (commit log,
consume queues, index, checkpoint, config, the 5.x timer wheel, log and checkpoint, BatchCQ and
compaction files, DLedger's entry, index and checkpoint files), counted here from the disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import cli, generate, run


def _summary(store: Path) -> dict:
    r = cli("verify", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stdout[-2000:]
    return json.loads(r.stdout.splitlines()[-1])["summary"]


def _count(d: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(d))


def _config_files(store: Path, *leave_out: str) -> int:
    return sum(1 for p in (store / "config").iterdir() if p.is_file() and p.name not in leave_out)


@pytest.fixture(scope="module")
def five(tmp_path_factory) -> Path:
    return generate(
        tmp_path_factory.mktemp("five") / "store",
        "--broker-version",
        "5",
        "--timer-ratio",
        "0.3",
        "--bcq-topics",
        "1",
        "--compaction-topics",
        "1",
        messages=300,
    )


def test_a_5x_store_counts_the_timer_batch_and_compaction_files(five):
    files = _summary(five)["files"]
    assert files["timerwheel"] == 1 and files["timercheck"] == 1
    assert files["timerlog"] == _count(five / "timerlog") >= 1
    assert files["batchconsumequeue"] == _count(five / "batchconsumequeue") >= 1
    assert files["checkpoint"] == 1
    assert files["config"] == _config_files(five, "timercheck") >= 1
    assert files["commitlog"] == _count(five / "commitlog")
    for width in ("80", "120"):
        text = run("verify", "--store", five, env={"COLUMNS": width}).stdout.decode()
        assert max(len(line) for line in text.splitlines()) <= int(width)
        block = " ".join(text.split("\nfiles")[1].split("\nerrors")[0].split())
        for kind in ("timerwheel 1", f"timerlog {files['timerlog']}", "compaction", "batchconsumequeue"):
            assert kind in block, block


def test_a_dledger_store_counts_its_entry_index_and_checkpoint_files(tmp_path):
    store = generate(tmp_path / "store", "--dledger", messages=200)
    files = _summary(store)["files"]
    [dl] = [p for p in store.iterdir() if p.name.startswith("dledger")]
    assert files["dledger_entries"] == _count(dl / "data") >= 1
    assert files["dledger_index"] == _count(dl / "index") >= 1
    assert files["dledger_checkpoint"] == 1


def test_a_4x_store_names_no_5x_kind(tmp_path):
    files = _summary(generate(tmp_path / "store", messages=200))["files"]
    assert {"commitlog", "consumequeue", "index", "checkpoint", "config"} <= set(files)
    assert not {k for k in files if k.startswith(("timer", "dledger"))} | ({"batchconsumequeue"} & set(files))


@pytest.mark.parametrize(("name", "kinds"), [("timer", {"timerwheel", "timerlog"}), ("dledger", {"dledger_entries"})])
def test_the_real_broker_samples(sample_tarball, name, kinds):
    store = sample_tarball(name) / "store"
    r = cli("verify", "--store", store, "--format", "jsonl")
    files = json.loads(r.stdout.splitlines()[-1])["summary"]["files"]
    assert kinds <= set(files) and all(files[k] >= 1 for k in kinds), files
