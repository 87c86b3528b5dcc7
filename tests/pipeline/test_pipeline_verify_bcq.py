"""The pipeline's verify (driver phase) runs the bcq.* and compaction.* checks too: the same
findings and summary as the local Verifier on the 5.3.3 samples, clean and damaged."""

from __future__ import annotations

import json
import shutil
import struct

import pytest


def _same(store):
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from tests.helpers.verify_reference import verify_store

    specs = store_specs([str(store)], None, {})
    want = [verify_store(s, True, False, None) for s in specs]
    got = verify_stores(specs, True, False, None)
    assert [g["summary"] for g in got] == [w["summary"] for w in want]

    def key(f: dict) -> str:
        return json.dumps(f, sort_keys=True)

    assert sorted(map(key, got[0]["findings"])) == sorted(map(key, want[0]["findings"]))
    return want[0]


@pytest.mark.parametrize("name", ["bcq", "compaction"])
def test_pipeline_verify_agrees_on_batch_and_compaction_queues(sample_tarball, tmp_path, name):
    s = sample_tarball(name)
    store = tmp_path / "store"
    shutil.copytree(s / "store", store)
    assert _same(store)["findings"] == []
    if name == "bcq":
        p = store / "batchconsumequeue" / "BulkTopic" / "0" / f"{0:020d}"
        raw = bytearray(p.read_bytes())
        struct.pack_into(">h", raw, 46 + 36, 4)  # unit 1's batchSize (BatchConsumeQueue.MSG_BATCH_SIZE_INDEX)
    else:
        p = store / "compaction" / "compactionLog" / "DeviceStateTopic" / "1" / f"{0:020d}"
        raw = bytearray(p.read_bytes())
        raw[655] ^= 1  # a body byte of the record at 555
    p.write_bytes(bytes(raw))
    checks = sorted(f["check"] for f in _same(store)["findings"])
    assert checks == (["bcq.base-offset", "bcq.unit-mismatch"] if name == "bcq" else ["compaction.source"])
