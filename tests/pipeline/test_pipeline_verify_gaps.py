"""The decomposed verify (pipeline/verify_tasks.py, the Spark engine's tasks run in process)
against the local Verifier on stores the per-file and per-queue split must not lose: LMQ
queues whose end disagrees with the log's counter (``lmq.queue-end``,
``DefaultMessageStore#recoverTopicQueueTable``) and damaged LMQ units."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest


def _same(store: Path, conf: Path | None) -> list[dict]:
    """verify_stores equals verify_store (summary and findings); returns the findings."""
    from rmqstore_cli.pipeline.stores import expand_stores, verify_store
    from rmqstore_cli.pipeline.verify_tasks import verify_stores

    specs = expand_stores([str(store)], str(conf) if conf else None, {})
    for cap in (None, 1):
        want = [verify_store(s, True, False, cap) for s in specs]
        got = verify_stores(specs, True, False, cap)
        assert [g["summary"] for g in got] == [w["summary"] for w in want]
        key = lambda f: json.dumps(f, sort_keys=True)  # noqa: E731
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
    raw[3 * 20:4 * 20], raw[4 * 20:5 * 20] = raw[4 * 20:5 * 20], raw[3 * 20:4 * 20]
    (alpha / "00000000000000000000").write_bytes(bytes(raw))
    second = bytearray((alpha / "00000000000000002000").read_bytes())
    second[30 * 20:31 * 20] = raw[0:20]
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
    raw[5 * 20 + 12:5 * 20 + 20] = (7).to_bytes(8, "big")
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
    raw[27 * 20:30 * 20] = bytes(60)
    last.write_bytes(bytes(raw))
    checks = {f["check"] for f in _same(s, conf)}
    assert "lmq.queue-end" in checks, checks
