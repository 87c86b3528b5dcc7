"""export's store names: the ``store`` column and ``store=`` partition of each store's rows
(``--store-name``, else broker.conf's brokerName, else the store directory's name)."""

from __future__ import annotations

import shutil

import pytest

from rmqstore_cli.errors import UsageError
from rmqstore_cli.pipeline.export_run import store_name, store_names
from rmqstore_cli.pipeline.stores import StoreSpec
from tests.helpers import SMALL, run


def _spec(path, conf=None) -> StoreSpec:
    return StoreSpec(str(path), str(path), None if conf is None else str(conf))


def test_a_store_is_named_by_its_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert store_name(_spec(tmp_path / "snap" / "broker-a" / "store")) == "broker-a"  # the parent of store/
    assert store_name(_spec(tmp_path / "snap" / "broker-a" / "store" / "")) == "broker-a"
    assert store_name(_spec(tmp_path / "data" / "eu-west")) == "eu-west"
    assert store_name(_spec(tmp_path / "home" / "store")) == "store"  # ~/store: not the user's name


def test_a_relative_store_is_named_by_its_real_directory(tmp_path, monkeypatch):
    (tmp_path / "broker-c" / "store").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "broker-c" / "store")
    assert store_name(_spec(".")) == "broker-c"


def test_broker_conf_names_a_lone_store(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=c\nbrokerName = broker-b\n")
    a, b = tmp_path / "x" / "store", tmp_path / "y" / "store"
    assert [s.name for s in store_names([_spec(a, conf)], None)] == ["broker-b"]
    # several stores read with one broker.conf would share its brokerName: their directories
    assert [s.name for s in store_names([_spec(a, conf), _spec(b, conf)], None)] == ["x", "y"]
    conf.write_text("brokerClusterName=c\n")
    assert store_name(_spec(a, conf)) == "x"


def test_given_names_one_per_store_in_order(tmp_path):
    specs = [_spec(tmp_path / "x" / "store"), _spec(tmp_path / "y" / "store")]
    got = store_names(specs, ["eu-1", "us-1"])
    assert [(s.name, s.partition, s.label) for s in got] == [
        ("eu-1", "eu-1", specs[0].label),
        ("us-1", "us-1", specs[1].label),
    ]
    with pytest.raises(UsageError, match="1 store_name for 2 stores"):
        store_names(specs, ["eu-1"])
    with pytest.raises(UsageError, match="empty"):
        store_names(specs, ["eu-1", " "])


def test_two_stores_of_one_name_are_refused(tmp_path):
    specs = [_spec(tmp_path / "x" / "a" / "store"), _spec(tmp_path / "y" / "a" / "store")]
    with pytest.raises(UsageError, match="two stores would be named 'a'") as e:
        store_names(specs, None)
    assert "store_name" in str(e.value)
    with pytest.raises(UsageError, match="named 'z'"):
        store_names(specs, ["z", "z"])


def test_the_command_names_the_option_when_names_clash(small_store_master, tmp_path):
    for d in ("x", "y"):
        shutil.copytree(small_store_master, tmp_path / d / "a" / "store")
    args = ["export", "--store", tmp_path / "x/a/store", "--store", tmp_path / "y/a/store", *SMALL]
    r = run(*args, "--output", tmp_path / "out")
    assert r.returncode == 2 and b"two stores would be named 'a'" in r.stderr and b"--store-name" in r.stderr
    assert not (tmp_path / "out").exists()
