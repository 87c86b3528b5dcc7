"""The double write (``rocksdbCQDoubleWriteEnable``, ``CombineConsumeQueueStore``): the real 5.3.3
RocksDB consume queue with file queues written beside it in ``consumequeue/`` (rebuild-index
--output from the same commit log), then damaged; ``Store.compare_consume_queues`` and
verify's ``cq.double-write-*`` findings against what dump-cq prints of each side."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import cli

pytest.importorskip("rocksdict", reason="needs rocksdict: the rocksdb and test extras")

UNIT = 20
FIRST_FILE = "0" * 20


@pytest.fixture(scope="module")
def double_write(sample_tarball, tmp_path_factory):
    """The sample's store with file consume queues (from its own commit log) beside the database."""
    base = tmp_path_factory.mktemp("dw")
    store = base / "store"
    shutil.copytree(sample_tarball("rocksdb") / "store", store)
    r = cli("rebuild-index", "-s", store, "--output", base / "out", "--only", "cq", "--format", "json")
    assert r.exit_code == 0, r.stderr
    for t in (base / "out" / "consumequeue").iterdir():
        shutil.copytree(t, store / "consumequeue" / t.name)
    return store


def damaged(src: Path, dest: Path) -> Path:
    """A copy with CartTopic/0 unit 5's size changed and ShipTopic/0's file cut after 100 units."""
    shutil.copytree(src, dest)
    with open(dest / "consumequeue" / "CartTopic" / "0" / FIRST_FILE, "r+b") as f:
        f.seek(5 * UNIT + 8)
        f.write(struct.pack(">i", 999))
    ship = dest / "consumequeue" / "ShipTopic" / "0" / FIRST_FILE
    with open(ship, "r+b") as f:
        f.seek(100 * UNIT)
        f.write(bytes(6 * UNIT))
    return dest


def side_units(store: Path, topic: str, qid: int) -> tuple[dict, dict]:
    """(file units, rocksdb units) by cq offset, as dump-cq prints each side."""

    def rows(*args) -> dict:
        r = cli("dump-cq", *args, "--no-resolve", "--format", "jsonl")
        assert r.exit_code == 0, r.stderr
        return {
            u["cq_offset"]: (u["commitlog_offset"], u["size"], u["tags_code"])
            for u in map(json.loads, r.stdout.splitlines())
        }

    return rows("--file", store / "consumequeue" / topic / str(qid) / FIRST_FILE), rows(topic, qid, "-s", store)


def expected(store: Path, topic: str, qid: int) -> dict:
    f, r = side_units(store, topic, qid)
    bad = sorted({o for o in f.keys() & r.keys() if f[o] != r[o]} | (f.keys() ^ r.keys()))
    first = bad[0] if bad else None
    return {
        "file_first": min(f, default=0),
        "file_end": max(f, default=-1) + 1,
        "rocksdb_first": min(r, default=0),
        "rocksdb_end": max(r, default=-1) + 1,
        "differing": sum(1 for o in f.keys() & r.keys() if f[o] != r[o]),
        "only_file": len(f.keys() - r.keys()),
        "only_rocksdb": len(r.keys() - f.keys()),
        "first_difference": first,
        "file_unit": f.get(first),
        "rocksdb_unit": r.get(first),
    }


def compare(store: Path) -> dict:
    from rmqstore_cli import open_store

    with open_store(store) as s:
        return {(c.topic, c.queue_id): c for c in s.compare_consume_queues()}


def test_the_clean_double_write_agrees_queue_by_queue(double_write):
    got = compare(double_write)
    assert sorted(got) == [("CartTopic", 0), ("CartTopic", 1), ("ShipTopic", 0)]
    for (t, q), c in got.items():
        assert c.agrees, c
        assert (
            (c.file_first, c.file_end)
            == (c.rocksdb_first, c.rocksdb_end)
            == (0, expected(double_write, t, q)["rocksdb_end"])
        )
    r = cli("verify", "-s", double_write, "--format", "json")
    assert r.exit_code == 0, r.stdout[-2000:]
    assert not [f for f in json.loads(r.stdout)["findings"] if f["check"].startswith("cq.double-write")]


def test_damage_matches_an_independent_comparison_of_dump_cq(double_write, tmp_path):
    store = damaged(double_write, tmp_path / "store")
    got = compare(store)
    for (t, q), c in got.items():
        want = expected(store, t, q)
        assert {k: getattr(c, k) for k in want} == want, (t, q)
    assert got["CartTopic", 0].differing == 1 and got["CartTopic", 0].first_difference == 5
    assert got["ShipTopic", 0].only_rocksdb == 6 and got["ShipTopic", 0].first_difference == 100
    assert got["CartTopic", 1].agrees


def test_verify_names_each_drift(double_write, tmp_path):
    store = damaged(double_write, tmp_path / "store")
    r = cli("verify", "-s", store, "--format", "json")
    assert r.exit_code == 1
    found = {(f["check"], f["topic"], f["queue_id"]): f for f in json.loads(r.stdout)["findings"]}
    assert set(found) == {
        ("cq.double-write-mismatch", "CartTopic", 0),
        ("cq.double-write-extent", "ShipTopic", 0),
    }
    mismatch = found["cq.double-write-mismatch", "CartTopic", 0]
    assert mismatch["severity"] == "error" and "cq offset 5" in mismatch["detail"] and "999" in mismatch["detail"]
    assert found["cq.double-write-extent", "ShipTopic", 0]["count"] == 6


def test_a_store_without_both_is_refused(sample_tarball):
    from rmqstore_cli import open_store
    from rmqstore_cli.errors import StoreError

    with open_store(sample_tarball("rocksdb") / "store") as s, pytest.raises(StoreError, match="double-writing"):
        s.compare_consume_queues()


@pytest.mark.slow
def test_the_spark_engine_reports_the_same_drift(double_write, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    store = damaged(double_write, tmp_path / "store")
    got = {}
    for engine in ("local", "spark"):
        r = cli("verify", "-s", store, "--engine", engine, "--spark-master", "local[1]", "--format", "json")
        got[engine] = sorted(
            (f["check"], f["topic"], f["queue_id"], f["detail"]) for f in json.loads(r.stdout)["findings"]
        )
    assert got["spark"] == got["local"] and len(got["local"]) == 2
