"""verify's ``broker_start``: the broker's start-up path predicted from the files.

Config files are written in fastjson's exact form (integer map keys unquoted), as
``ConfigManager#persist`` writes them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rmqstore_cli.store.checks.startup import (
    QueueEnd,
    config_reasons,
    empty_last_file_throws,
    predict,
    truncation_reason,
)
from rmqstore_cli.store.layout.configfiles import BROKER_CONFIG_FILES, load_broker_configs, load_config
from tests.helpers import FIXTURES

OFFSETS = next(c for c in BROKER_CONFIG_FILES if c.name == "consumerOffset.json")
FASTJSON = b'{"offsetTable":{"T@g":{0:250,1:250}}}'
TORN = b'{"offsetTable":{"T@g":{0:25'  # power loss during ConfigManager#persist


def _write(d: Path, name: str, data: bytes) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


@pytest.mark.parametrize(
    "main, bak, source",
    [
        (FASTJSON, None, "file"),  # ConfigManager#load: decodes
        (TORN, FASTJSON, "bak"),  # does not decode -> #loadBak
        (b"", FASTJSON, "bak"),  # empty -> #loadBak
        (None, FASTJSON, "bak"),  # absent -> #loadBak
        (b"\0" * 64, FASTJSON, "bak"),  # a NUL-filled page after power loss
        (TORN, None, "none"),  # #loadBak: no backup -> true, empty manager
        (None, None, "none"),
        (TORN, TORN, "fails"),  # #loadBak: backup does not decode -> false
        (None, b"[1,2]", "fails"),  # not an object: fastjson cannot bind it
        (b"null", None, "file"),  # fastjson: null decodes to no object
    ],
)
def test_config_manager_load_outcomes(tmp_path, main, bak, source):
    if main is not None:
        _write(tmp_path, OFFSETS.name, main)
    if bak is not None:
        _write(tmp_path, OFFSETS.name + ".bak", bak)
    assert load_config(tmp_path, OFFSETS).source == source


def test_config_reasons_fatal_only_when_the_bak_fails(tmp_path):
    _write(tmp_path, "topics.json", TORN)
    _write(tmp_path, "topics.json.bak", TORN)
    _write(tmp_path, "consumerOffset.json", TORN)
    _write(tmp_path, "consumerOffset.json.bak", FASTJSON)
    _write(tmp_path, "subscriptionGroup.json", TORN)  # no .bak: starts with no groups
    reasons = {r.file: r for r in config_reasons(load_broker_configs(tmp_path, "4.9"))}
    assert reasons["config/topics.json.bak"].fatal
    assert "Failed" in reasons["config/topics.json.bak"].detail
    assert not reasons["config/consumerOffset.json"].fatal
    assert "try to load backup file" in reasons["config/consumerOffset.json"].detail
    assert not reasons["config/subscriptionGroup.json"].fatal
    assert "empty SubscriptionGroupManager" in reasons["config/subscriptionGroup.json"].detail
    assert predict("4.9", False, list(reasons.values())).starts is False


def test_config_files_by_version(tmp_path):
    names4 = {ld.config.name for ld in load_broker_configs(tmp_path, "4.9")}
    names5 = {ld.config.name for ld in load_broker_configs(tmp_path, "5")}
    assert "consumerOrderInfo.json" in names5 - names4  # BrokerController#initializeMetadata, 5.x
    assert "topicQueueMapping.json" in names5 - names4
    assert {"topics.json", "consumerOffset.json", "delayOffset.json"} <= names4 & names5


def test_config_fifo_is_unreadable_not_a_hang(tmp_path):
    import os

    tmp_path.joinpath("topics.json").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "topics.json")
    ld = load_config(tmp_path, BROKER_CONFIG_FILES[0])
    assert ld.source == "unreadable"
    assert not config_reasons([ld])[0].fatal


@pytest.mark.parametrize(
    "version, end, last_from, truncated, redispatched, throws",
    [
        ("5", 6000, 6000, False, False, True),  # apache/rocketmq#9728: empty last file after a full one
        ("4.9", 6000, 6000, False, False, False),  # 4.9.x correctMinOffset reads the first file, inside try/catch
        ("5", 6000, 6000, True, False, False),  # truncateDirtyLogicFiles moves the read position to 20
        ("5", 6000, 6000, False, True, False),  # recovery writes a unit at position 0
        ("5", 0, 0, False, False, False),  # minLogicOffset 0 >= getMaxOffset 0: returns early
        ("5", 6020, 6000, False, False, False),  # the last file has a unit
    ],
)
def test_correct_min_offset_throws_exactly_in_5x(version, end, last_from, truncated, redispatched, throws):
    q = QueueEnd("T", 0, last_from, end, redispatched)
    assert empty_last_file_throws(version, q, truncated) is throws


def test_truncation_reason_names_the_broker_log_line():
    assert truncation_reason(100, 100, "x") is None
    r = truncation_reason(180, 100, "rmqstore rebuild-index")
    assert not r.fatal and "maxPhyOffsetOfConsumeQueue(180) >= processOffset(100)" in r.detail


def test_verdict_line():
    v = predict("5", True, [])
    assert v.starts and v.as_dict() == {
        "starts": True,
        "recovery": "abnormal",
        "version": "5",
        "version_source": "option",
        "reasons": [],
    }
    assert v.line() == "broker start (5): would start, abnormal recovery"


# ---------------------------------------------------------------- verify's summary, end to end


def _verify(store, *args) -> dict:
    r = subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", "verify", "--store", str(store), "--format", "jsonl", *args],
        capture_output=True,
    )
    assert r.returncode in (0, 1), r.stderr.decode()
    return json.loads(r.stdout.decode().splitlines()[-1])["summary"]["broker_start"]


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """A 5.x store whose queues span several consume-queue files (60 units each)."""
    s = tmp_path_factory.mktemp("five") / "store"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "generate",
            "--store",
            str(s),
            "--messages",
            "3000",
            "--topics",
            "2",
            "--queues",
            "2",
            "--broker-version",
            "5",
            "--cq-file-size",
            "1200",
            "--seed",
            "7",
        ],
        capture_output=True,
    )
    assert r.returncode == 0, r.stderr.decode()
    return s


@pytest.mark.slow
def test_clean_store_starts(five):
    v = _verify(five, "--broker-version", "5")
    assert v["starts"] is True and v["recovery"] == "normal" and v["version_source"] == "option"


def _empty_last_cq_file(store: Path) -> tuple[Path, Path]:
    """apache/rocketmq#9728's state: a queue's last file all zeros after a full one, and the
    consume queues behind the commit log (the last message's unit lost), so recovery neither
    truncates the queues nor writes into that file."""
    import numpy as np
    from rmqstore_cli.formats.consume_queue import ConsumeQueueUnit
    from rmqstore_cli.formats.derive import numpy_dtype

    dt = numpy_dtype(ConsumeQueueUnit)
    queues = [d for t in sorted((store / "consumequeue").iterdir()) for d in sorted(t.iterdir())]
    last_unit = {d: np.frombuffer(sorted(d.iterdir())[-1].read_bytes(), dt) for d in queues}
    ends = {d: int(u["commitlog_offset"][u["size"] > 0].max()) for d, u in last_unit.items()}
    newest = max(ends, key=ends.get)  # the queue holding the log's last message
    victim = next(d for d in queues if d != newest and len(list(d.iterdir())) >= 2)
    files = sorted(victim.iterdir())
    files[-1].write_bytes(bytes(files[-1].stat().st_size))  # lost to async flush
    nf = sorted(newest.iterdir())[-1]
    u = np.frombuffer(nf.read_bytes(), dt).copy()
    k = int(np.flatnonzero(u["size"] > 0)[-1])
    u[k] = 0
    nf.write_bytes(u.tobytes())
    return victim, files[-1]


@pytest.mark.slow
def test_empty_last_cq_file_stops_a_5x_broker_not_a_49_one(five, tmp_path):
    import shutil

    s = tmp_path / "s"
    shutil.copytree(five, s)
    victim, empty = _empty_last_cq_file(s)
    v5 = _verify(s, "--broker-version", "5")
    assert v5["starts"] is False
    fatal = [r for r in v5["reasons"] if r["fatal"]]
    assert [r["file"] for r in fatal] == [str(empty.relative_to(s))]
    assert "correctMinOffset" in fatal[0]["detail"] and "IllegalArgumentException" in fatal[0]["detail"]
    assert "rebuild-index" in fatal[0]["repair"]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "verify",
            "--store",
            str(s),
            "--broker-version",
            "5",
            "--format",
            "jsonl",
        ],
        capture_output=True,
    )
    assert r.returncode == 1  # "would not start" is an error, though no other finding says why
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    assert [f["file"] for f in lines[:-1] if f["check"] == "broker.no-start"] == [str(empty.relative_to(s))]
    assert lines[-1]["summary"]["findings"]["broker.no-start"] == 1
    v4 = _verify(s, "--broker-version", "4.9")
    assert v4["starts"] is True  # 4.9.x correctMinOffset cannot throw there
    import shlex

    from tests.helpers import cli

    words = shlex.split(fatal[0]["repair"])  # the advice, applied as printed
    assert words[0] == "rmqstore" and cli(*words[1:]).exit_code == 0
    assert _verify(s, "--broker-version", "5")["starts"] is True


@pytest.mark.slow
def test_broken_config_and_bak_stop_the_broker(five, tmp_path):
    import shutil

    s = tmp_path / "s"
    shutil.copytree(five, s)
    (s / "config").mkdir(exist_ok=True)
    (s / "config" / "subscriptionGroup.json").write_bytes(TORN)
    (s / "config" / "subscriptionGroup.json.bak").write_bytes(b"\0" * 100)
    v = _verify(s)
    assert v["version"] == "4.9" and v["version_source"] == "assumed"  # no timer file: the bytes do not tell
    assert v["starts"] is False
    assert [r["file"] for r in v["reasons"] if r["fatal"]] == ["config/subscriptionGroup.json.bak"]


@pytest.mark.slow
def test_wrong_commitlog_file_size_stops_the_broker(five, tmp_path):
    import shutil

    s = tmp_path / "s"
    shutil.copytree(five, s)
    f = sorted((s / "commitlog").iterdir())[-1]
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size - 4096)
    v = _verify(s, "--broker-version", "4.9", "--commitlog-file-size", str(1 << 30))  # the broker's default
    assert v["starts"] is False
    assert any(r["fatal"] and "length not matched" in r["detail"] for r in v["reasons"])


def test_fixtures_start():
    """The real brokers' stores (each broker restarted on its own store): the verdict for
    their own version is that they start."""
    stores = sorted(p for p in FIXTURES.glob("rocketmq-*-sample") if (p / "store").is_dir())
    assert [p.name for p in stores] == ["rocketmq-4.9.7-sample", "rocketmq-5.3.3-sample"]
    for p in stores:
        version = "5" if "-5." in p.name else "4.9"
        v = _verify(p / "store", "--broker-version", version)
        assert v["starts"] is True and v["version"] == version, (p.name, v)
