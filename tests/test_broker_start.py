"""verify's ``broker_start``: the broker's start-up path predicted from the files.

Config files are written in fastjson's exact form (integer map keys unquoted), as
``ConfigManager#persist`` writes them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from rmqstore_cli.store.configfiles import BROKER_CONFIG_FILES, load_broker_configs, load_config
from rmqstore_cli.store.startup import (QueueEnd, config_reasons, empty_last_file_throws, predict,
                                        truncation_reason)

OFFSETS = next(c for c in BROKER_CONFIG_FILES if c.name == "consumerOffset.json")
FASTJSON = b'{"offsetTable":{"T@g":{0:250,1:250}}}'
TORN = b'{"offsetTable":{"T@g":{0:25'  # power loss during ConfigManager#persist


def _write(d: Path, name: str, data: bytes) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


@pytest.mark.parametrize("main, bak, source", [
    (FASTJSON, None, "file"),             # ConfigManager#load: decodes
    (TORN, FASTJSON, "bak"),              # does not decode -> #loadBak
    (b"", FASTJSON, "bak"),               # empty -> #loadBak
    (None, FASTJSON, "bak"),              # absent -> #loadBak
    (b"\0" * 64, FASTJSON, "bak"),        # a NUL-filled page after power loss
    (TORN, None, "none"),                 # #loadBak: no backup -> true, empty manager
    (None, None, "none"),
    (TORN, TORN, "fails"),                # #loadBak: backup does not decode -> false
    (None, b"[1,2]", "fails"),            # not an object: fastjson cannot bind it
    (b"null", None, "file"),              # fastjson: null decodes to no object
])
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


@pytest.mark.parametrize("version, end, last_from, truncated, redispatched, throws", [
    ("5", 6000, 6000, False, False, True),     # apache/rocketmq#9728: empty last file after a full one
    ("4.9", 6000, 6000, False, False, False),  # 4.9.x correctMinOffset reads the first file, inside try/catch
    ("5", 6000, 6000, True, False, False),     # truncateDirtyLogicFiles moves the read position to 20
    ("5", 6000, 6000, False, True, False),     # recovery writes a unit at position 0
    ("5", 0, 0, False, False, False),          # minLogicOffset 0 >= getMaxOffset 0: returns early
    ("5", 6020, 6000, False, False, False),    # the last file has a unit
])
def test_correct_min_offset_throws_exactly_in_5x(version, end, last_from, truncated, redispatched, throws):
    q = QueueEnd("T", 0, last_from, end, redispatched)
    assert empty_last_file_throws(version, q, truncated) is throws


def test_truncation_reason_names_the_broker_log_line():
    assert truncation_reason(100, 100, "x") is None
    r = truncation_reason(180, 100, "rmqstore rebuild-index")
    assert not r.fatal and "maxPhyOffsetOfConsumeQueue(180) >= processOffset(100)" in r.detail


def test_verdict_line():
    v = predict("5", True, [])
    assert v.starts and v.as_dict() == {"starts": True, "recovery": "abnormal", "version": "5", "reasons": []}
    assert v.line() == "broker start (5): would start, abnormal recovery"
