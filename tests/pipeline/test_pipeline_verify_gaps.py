"""The decomposed verify (pipeline/verify_tasks.py, the Spark engine's tasks run in process)
against the local Verifier on stores the per-file and per-queue split must not lose: LMQ
queues whose end disagrees with the log's counter (``lmq.queue-end``,
``DefaultMessageStore#recoverTopicQueueTable``) and damaged LMQ units."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # Spark local[2]


def _same(store: Path, conf: Path | None) -> list[dict]:
    """verify_stores equals verify_store (summary and findings); returns the findings."""
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    specs = store_specs([str(store)], str(conf) if conf else None, {})
    for cap in (None, 1):
        want = [verify_store(s, True, False, cap) for s in specs]
        got = verify_stores(specs, True, False, cap)
        assert [g["summary"] for g in got] == [w["summary"] for w in want]

        def key(f: dict) -> str:
            return json.dumps(f, sort_keys=True)

        assert sorted(map(key, got[0]["findings"])) == sorted(map(key, want[0]["findings"]))
    return verify_store(specs[0], True, False, None)["findings"]


@pytest.fixture(scope="module")
def lmq(sample_tarball):
    d = sample_tarball("lmq")
    return d / "store", d / "broker.conf"


def _alpha_damaged(store: Path, s: Path) -> None:
    """Units 3 and 4 of %LMQ%alpha swapped, a copy of unit 0 one past its end (unit 130)."""
    shutil.copytree(store, s)
    alpha = s / "consumequeue" / "%LMQ%alpha" / "0"
    raw = bytearray((alpha / "00000000000000000000").read_bytes())
    raw[3 * 20 : 4 * 20], raw[4 * 20 : 5 * 20] = raw[4 * 20 : 5 * 20], raw[3 * 20 : 4 * 20]
    (alpha / "00000000000000000000").write_bytes(bytes(raw))
    second = bytearray((alpha / "00000000000000002000").read_bytes())
    second[30 * 20 : 31 * 20] = raw[0:20]
    (alpha / "00000000000000002000").write_bytes(bytes(second))


@pytest.mark.parametrize("with_conf", [True, False])
def test_lmq_queue_end_and_units_LmqChecks_finish_lmq(lmq, tmp_path, with_conf):
    """``ConsumeQueue#multiDispatchLmqQueue`` units swapped and one past the end: the
    decomposed verify reports ``lmq.queue-end`` and the unit reasons as the local one."""
    store, conf = lmq
    _alpha_damaged(store, tmp_path / "s")
    found = _same(tmp_path / "s", conf if with_conf else None)
    checks = sorted(f["check"] for f in found)
    assert "lmq.queue-end" in checks and checks.count("lmq.unit-mismatch") == 2, checks
    target = next(f for f in found if f["check"] == "cq.unit-target")
    assert "lists %LMQ%alpha at offset 0 of queue 0, not 130" in target["detail"]


def test_lmq_missing_queue_and_tags_LmqChecks_check_lmq_batch(lmq, tmp_path):
    """A removed LMQ queue and a wrong tagsCode: the same findings both ways."""
    store, conf = lmq
    s = tmp_path / "s"
    shutil.copytree(store, s)
    alpha = s / "consumequeue" / "%LMQ%alpha" / "0" / "00000000000000000000"
    raw = bytearray(alpha.read_bytes())
    raw[5 * 20 + 12 : 5 * 20 + 20] = (7).to_bytes(8, "big")
    alpha.write_bytes(bytes(raw))
    shutil.rmtree(s / "consumequeue" / "%LMQ%beta")
    checks = {f["check"] for f in _same(s, conf)}
    assert {"lmq.unit-mismatch", "lmq.missing-unit"} <= checks, checks


def test_lmq_truncated_queue_end_behind_the_counter(lmq, tmp_path):
    """%LMQ%alpha's last file cut by a few units: ``lmq.queue-end`` (end behind the log's
    counter) and the missing units, both ways."""
    store, conf = lmq
    s = tmp_path / "s"
    shutil.copytree(store, s)
    last = s / "consumequeue" / "%LMQ%alpha" / "0" / "00000000000000002000"
    raw = bytearray(last.read_bytes())
    raw[27 * 20 : 30 * 20] = bytes(60)
    last.write_bytes(bytes(raw))
    checks = {f["check"] for f in _same(s, conf)}
    assert "lmq.queue-end" in checks, checks


# ------------------------------------------------------------------ RocksDB consume queue


def _rocks(tmp_path: Path, **kw) -> tuple[Path, dict]:
    """A generated store whose consume queue is a RocksDB database (tests/helpers/rocksdb_build.py)."""
    pytest.importorskip("rocksdict", reason="needs rocksdict: the rocksdb and test extras")
    from tests.helpers import generate_plain
    from tests.helpers.rocksdb_build import store_times, to_rocksdb_store

    base = generate_plain(tmp_path / "files", topics=2, queues=1, messages=60)
    return tmp_path / "rocks", to_rocksdb_store(base, tmp_path / "rocks", store_times(base), **kw)


def _put(store: Path, default: dict, offset: dict, delete: list = ()) -> None:
    from rocksdict import AccessType, Options, Rdict

    db = Rdict(
        str(store / "consumequeue"),
        options=Options(raw_mode=True),
        access_type=AccessType.read_write(),
        column_families={"offset": Options(raw_mode=True)},
    )
    for k, v in default.items():
        db[k] = v
    for k in delete:
        del db[k]
    off = db.get_column_family("offset")
    for k, v in offset.items():
        off[k] = v
    db.close()
    (store / "consumequeue" / "rocksdict-config.json").unlink(missing_ok=True)


def test_rocksdb_sample_RocksDBConsumeQueueStore(sample_tarball, tmp_path):
    """The real 5.3.3 RocksDB sample: clean both ways."""
    pytest.importorskip("rocksdict", reason="needs rocksdict: the rocksdb and test extras")
    d = sample_tarball("rocksdb")
    assert _same(d / "store", d / "broker.conf") == []


@pytest.mark.parametrize("damage", ["past-log", "hole", "offset-rows", "value-size", "no-offset-family", "corrupt"])
def test_rocksdb_damaged_RocksDBConsumeQueueOffsetTable(tmp_path, damage):
    """Damaged databases (the cases of tests/engine/test_rocksdb_cq.py): the queue tasks read
    the database's queues and the driver checks its dispatch checkpoint, as the local verify."""
    from tests.helpers.rocksdb_build import cq_key, cq_value, offset_key

    store, queues = _rocks(tmp_path, offset_family=damage != "no-offset-family")
    (topic, qid), units = next(iter(queues.items()))
    if damage == "past-log":
        n, end = units[-1][0] + 1, (store / "commitlog" / "00000000000000000000").stat().st_size * 4
        _put(
            store,
            {cq_key(topic, qid, n): cq_value(end, 200, 0, units[-1][4])},
            {offset_key(topic, qid, "max"): end.to_bytes(8, "big") + n.to_bytes(8, "big")},
        )
        want = {"cq.unit-target", "rocksdb.checkpoint"}
    elif damage == "hole":
        _put(store, {}, {}, [cq_key(topic, qid, units[4][0])])
        want = {"rocksdb.gap", "cq.missing-unit"}
    elif damage == "offset-rows":
        last = units[-2]
        _put(store, {}, {offset_key(topic, qid, "max"): last[1].to_bytes(8, "big") + last[0].to_bytes(8, "big")})
        want = {"rocksdb.offset-row"}
    elif damage == "value-size":
        c, phy, size, tags, ts = units[3]
        _put(store, {cq_key(topic, qid, c): cq_value(phy, size, tags, ts)[:27]}, {})
        want = {"rocksdb.value-size", "cq.missing-unit"}
    elif damage == "no-offset-family":
        want = {"rocksdb.offset-family"}
    else:
        (store / "consumequeue" / "CURRENT").write_text("MANIFEST-999999\n")
        want = {"rocksdb.unreadable", "cq.missing-unit"}
    checks = {f["check"] for f in _same(store, None)}
    assert want <= checks, checks


def test_spark_verify_lmq_and_rocksdb_are_the_local_verify(lmq, spark, tmp_path):
    """On local[2] Spark (``spark.verify``): the damaged LMQ store and a RocksDB store with a
    hole give the local findings and summary."""
    pytest.importorskip("rocksdict", reason="needs rocksdict: the rocksdb and test extras")
    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.pipeline.stores import store_specs
    from tests.helpers.rocksdb_build import cq_key
    from tests.helpers.verify_reference import verify_store

    _alpha_damaged(lmq[0], tmp_path / "lmq")
    rocks, queues = _rocks(tmp_path / "r")
    (topic, qid), units = next(iter(queues.items()))
    _put(rocks, {}, {}, [cq_key(topic, qid, units[4][0])])
    for store, conf in ((tmp_path / "lmq", lmq[1]), (rocks, None)):
        specs = store_specs([str(store)], str(conf) if conf else None, {})
        local = [verify_store(s, True, False, None) for s in specs]
        remote = sp.verify(spark, specs, True, False, None)
        assert [r["summary"] for r in remote] == [r["summary"] for r in local]

        def key(f: dict) -> str:
            return json.dumps(f, sort_keys=True)

        assert sorted(map(key, remote[0]["findings"])) == sorted(map(key, local[0]["findings"]))
        assert not local[0]["ok"]
