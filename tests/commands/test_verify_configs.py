"""verify's ``config.*`` findings: every file the broker loads with ``ConfigManager#load`` (4.9.7
and 5.3.3), each way it can be found, from both engines (the whole-store Verifier and the
per-file decomposition the Spark engine runs), and "would not start" as an error and exit 1.

``ConfigManager#load``: a missing or empty file, or one whose ``#decode`` throws, goes to
``#loadBak``; a missing or empty ``.bak`` returns true (the manager starts empty), one that
throws returns false (the broker does not start). 4.9.x ``MixAll#string2File`` writes
``<file>.tmp``, copies the old text to ``<file>.bak``, deletes the file and renames the
``.tmp``: a crash between the last two leaves the newest text in ``<file>.tmp`` alone.

Issue 31: with consumerOffset.json and its .bak both torn, ``broker_start.starts`` was false
while verify said "no findings: the store is consistent" and exited 0.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from rmqstore_cli.store.layout.configfiles import BROKER_CONFIG_FILES, LMQ_OFFSETS
from tests.helpers import cli, generate, run

GOOD = b'{"offsetTable":{"T@g":{0:250,1:250}},"dataVersion":{"counter":3}}'
NEWER = b'{"offsetTable":{"T@g":{0:260,1:270}},"dataVersion":{"counter":4}}'
TORN = b'{"offsetTable":{"T@g":{0:25'  # a persist cut by power loss: fastjson throws at byte 27
TORN_AT = len(TORN)

#: (file, .bak, .tmp) -> (check, severity, on the .bak?, broker starts)
CASES = {
    "torn-torn": ((TORN, TORN, None), ("config.load-fails", "error", True, False)),
    "torn-bak": ((TORN, GOOD, None), ("config.backup-loaded", "warning", False, True)),
    "empty-bak": ((b"", GOOD, None), ("config.backup-loaded", "warning", False, True)),
    "missing-bak": ((None, GOOD, None), ("config.backup-loaded", "warning", False, True)),
    "missing-bak-tmp": ((None, GOOD, NEWER), ("config.backup-loaded", "warning", False, True)),
    "torn-none": ((TORN, None, None), ("config.lost", "error", False, True)),
    "empty-none": ((b"", None, None), ("config.lost", "error", False, True)),
    "torn-none-tmp": ((TORN, None, NEWER), ("config.lost", "error", False, True)),
    "missing-none": ((None, None, None), None),  # a store the broker never persisted this table for
}
#: every file, with the broker version that loads it (and enableLmq for lmqConsumerOffset.json)
FILES = [(c, "5" if "4.9" not in c.versions else "4.9") for c in BROKER_CONFIG_FILES] + [(LMQ_OFFSETS, "4.9")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("cfg") / "store", messages=60)


def _store(tiny: Path, tmp_path: Path, name: str, parts, lmq: bool) -> tuple[Path, Path | None]:
    store = tmp_path / "store"
    shutil.copytree(tiny, store)
    conf = None
    if lmq:
        conf = tmp_path / "broker.conf"
        conf.write_text(
            "enableLmq=true\nmappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\n"
            "maxHashSlotNum=64\nmaxIndexNum=400\n"
        )
    d = store / "config"
    d.mkdir(exist_ok=True)
    for suffix, data in zip(("", ".bak", ".tmp"), parts, strict=True):
        (d / (name + suffix)).unlink(missing_ok=True)  # generate's own topics.json, say
        if data is not None:
            (d / (name + suffix)).write_bytes(data)
    return store, conf


def _both_engines(store: Path, conf: Path | None, version: str) -> dict:
    """The local engine's result, after checking the decomposed one (Spark's tasks, in this
    process) finds the same."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    sizes = (
        ()
        if conf
        else (
            ("mapped_file_size_commit_log", 65536),
            ("mapped_file_size_consume_queue", 2000),
            ("max_hash_slot_num", 64),
            ("max_index_num", 400),
        )
    )
    spec = StoreSpec(str(store), str(store), None if conf is None else str(conf), sizes)
    local = verify_store(spec, True, False, None, version)
    [decomposed] = verify_stores([spec], True, False, None, broker_version=version)

    def key(f: dict) -> str:
        return json.dumps(f, sort_keys=True)

    assert sorted(map(key, decomposed["findings"])) == sorted(map(key, local["findings"]))
    assert decomposed["summary"] == local["summary"] and decomposed["ok"] == local["ok"]
    return local


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("config, version", FILES, ids=[c.name for c, _ in FILES])
def test_each_config_file_each_way_it_loads(tiny, tmp_path, config, version, case):
    parts, want = CASES[case]
    store, conf = _store(tiny, tmp_path, config.name, parts, config is LMQ_OFFSETS)
    got = _both_engines(store, conf, version)
    mine = [f for f in got["findings"] if f["check"].startswith("config.")]
    if want is None:
        assert not mine
        return
    check, severity, on_bak, starts = want
    if check == "config.load-fails" and not config.gates_start:  # its caller ignores #load's false
        check, starts = "config.lost", True
    from rmqstore_cli.store.checks.startup import config_reasons
    from rmqstore_cli.store.layout.configfiles import load_broker_configs

    reasons = config_reasons(load_broker_configs(store / "config", version, config is LMQ_OFFSETS))
    assert any(r.fatal for r in reasons) is not starts  # broker_start's verdict agrees with the finding
    assert [(f["check"], f["severity"]) for f in mine] == [(check, severity)]
    f = mine[0]
    assert f["file"] == f"config/{config.name}" + (".bak" if on_bak else "")
    assert f["offset"] == (TORN_AT if parts[1 if on_bak else 0] == TORN else None)
    assert got["ok"] is (severity != "error")
    if parts[2] is None:  # the repair keeps the .bak or asks for a backup: nothing is moved aside
        assert ("nothing newer is on disk" if check == "config.backup-loaded" else "restore") in f["detail"]
    if parts[2] is not None:  # the .tmp: the advice renames it, and then the broker loads it
        cmd = f["detail"].split("; repair: ")[1]
        assert [r.repair for r in reasons if r.file == f["file"]] == [cmd]  # broker_start says the same
        assert subprocess.run(shlex.split(cmd), cwd=tmp_path).returncode == 0
        assert (store / "config" / config.name).read_bytes() == NEWER
        again = _both_engines(store, conf, version)
        assert not [f for f in again["findings"] if f["check"].startswith("config.")]


def test_a_torn_offsets_file_and_bak_is_an_error_and_exit_1(tiny, tmp_path):
    """Issue 31 exactly: the verdict and the exit code agree, in the table, JSON Lines and JSON."""
    from tests.helpers.contract import validate

    store, _ = _store(tiny, tmp_path, "consumerOffset.json", (TORN, TORN, None), False)
    r = cli("verify", "--store", store, "--format", "jsonl")
    assert r.exit_code == 1, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    for f in lines[:-1]:
        validate(f, "verify-finding")
    validate(lines[-1], "verify-summary")
    summary = lines[-1]["summary"]
    assert summary["broker_start"]["starts"] is False and summary["errors"] == 1
    assert [(f["check"], f["file"], f["offset"]) for f in lines[:-1]] == [
        ("config.load-fails", "config/consumerOffset.json.bak", TORN_AT)
    ]
    t = cli("verify", "--store", store)
    assert t.exit_code == 1 and "no findings" not in t.stdout and "would NOT start" in t.stdout
    assert cli("verify", "--store", store, "--format", "json").exit_code == 1


@pytest.mark.slow
def test_spark_engine_reaches_the_same_config_findings(tiny, tmp_path):
    """``--engine spark``: the driver runs check_configs (pipeline/verify_tasks.py#conclude)."""
    pytest.importorskip("pyspark")
    store, _ = _store(tiny, tmp_path, "consumerOffset.json", (TORN, TORN, None), False)
    local = run("verify", "--store", store, "--format", "jsonl")
    spark = run("verify", "--store", store, "--format", "jsonl", "--engine", "spark", "--spark-master", "local[1]")
    assert local.returncode == spark.returncode == 1, spark.stderr.decode()[-2000:]
    findings = [json.loads(x) for x in spark.stdout.splitlines()[:-1]]
    assert [(f["check"], f["file"], f["offset"]) for f in findings] == [
        ("config.load-fails", "config/consumerOffset.json.bak", TORN_AT)
    ]


def test_would_not_start_without_a_finding_of_its_own_is_broker_no_start(tmp_path):
    """A fatal reason no finding reports (5.0-5.3.3's empty last consume-queue file) is a
    ``broker.no-start`` error finding, counted in the summary, and exit 1."""
    from rmqstore_cli.store.checks.startup import Reason, predict, start_findings

    verdict = predict(
        "5",
        False,
        [
            Reason(True, "consumequeue/T/0/00000000000000006000", "empty", "rebuild"),
            Reason(True, "config/topics.json.bak", "torn", None, check="config.load-fails"),
            Reason(True, "lock", "live", None, check="store.live-broker"),
        ],
    )
    summary = {"errors": 0, "findings": {}}
    out = start_findings(verdict, summary)
    assert [(f.check, f.severity, f.file) for f in out] == [
        ("broker.no-start", "error", "consumequeue/T/0/00000000000000006000")
    ]
    assert summary == {"errors": 1, "findings": {"broker.no-start": 1}}
    assert start_findings(predict("5", False, []), summary) == []
