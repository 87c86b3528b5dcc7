"""rebuild-index dispatches a BatchCQ topic (``queue.type=BatchCQ``) to batchconsumequeue/
as ``BatchConsumeQueue#putBatchMessagePositionInfo`` does: byte-identical to the 5.3.3
broker's files, by the bulk path (rebuild) and the per-record reference (``Dispatcher``)."""

from __future__ import annotations

import json
import shutil

from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.dispatch import Dispatcher
from tests.helpers import cli

BCQ = ("batchconsumequeue", "BulkTopic", "0")


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_rebuild_index_output_writes_the_broker_bcq_bytes(sample_tarball, tmp_path):
    s = sample_tarball("bcq")
    r = cli(
        "rebuild-index",
        "--store",
        s / "store",
        "--broker-conf",
        s / "broker.conf",
        "--output",
        tmp_path / "out",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    assert _files(tmp_path.joinpath("out", *BCQ)) == _files(s.joinpath("store", *BCQ))
    assert not any((tmp_path / "out" / "consumequeue").iterdir())  # nothing of BulkTopic in consumequeue/
    assert json.loads(r.stdout)["consume_queue_units"] == 64


def test_rebuild_index_in_place_restores_a_damaged_bcq_from_topics_json(sample_tarball, tmp_path):
    s = sample_tarball("bcq")
    store = tmp_path / "store"
    shutil.copytree(s / "store", store)
    shutil.rmtree(store / "batchconsumequeue")  # gone: topics.json says which topic is BatchCQ
    (store / "config").mkdir()
    (store / "config" / "topics.json").write_text(
        json.dumps(
            {
                "topicConfigTable": {
                    "BulkTopic": {
                        "topicName": "BulkTopic",
                        "readQueueNums": 1,
                        "writeQueueNums": 1,
                        "attributes": {"queue.type": "BatchCQ"},
                    }
                }
            }
        )
    )
    r = cli("rebuild-index", "--store", store, "--broker-conf", s / "broker.conf", "--in-place", "--no-backup")
    assert r.exit_code == 0, r.stderr
    assert _files(store.joinpath(*BCQ)) == _files(s.joinpath("store", *BCQ))
    r = cli("verify", "--store", store, "--broker-conf", s / "broker.conf", "--format", "jsonl")
    assert json.loads(r.stdout.splitlines()[-1])["summary"]["errors"] == 0


def test_Dispatcher_reference_writes_the_same_bcq_bytes(sample_tarball, tmp_path):
    s = sample_tarball("bcq")
    cfg = StoreConfig.load(s / "store", s / "broker.conf")
    d = Dispatcher(cfg, tmp_path / "consumequeue", tmp_path / "index", build_index=False, roots=[tmp_path])
    for m in CommitLog(cfg).scan():
        d.dispatch(m)
    d.close()
    assert _files(tmp_path.joinpath(*BCQ)) == _files(s.joinpath("store", *BCQ))
    assert not (tmp_path / "consumequeue").exists()


def test_rebuild_of_a_selected_BatchCQ_topic_is_refused(sample_tarball, tmp_path):
    s = sample_tarball("bcq")
    r = cli(
        "rebuild-index",
        "--store",
        s / "store",
        "--broker-conf",
        s / "broker.conf",
        "--output",
        tmp_path / "o",
        "--topic",
        "BulkTopic",
    )
    assert r.exit_code == 2 and "BulkTopic: BatchCQ topics (batchconsumequeue/) are rebuilt only with" in r.stderr
