"""rebuild-index's per-file decomposition (in process and on Spark local[2]) rebuilds
batchconsumequeue/ too: file tasks capture ``BatchConsumeQueue#putMessagePositionInfoWrapper``'s
units (msgBaseOffset, batchSize from INNER_BASE/INNER_NUM), one task per queue writes them
(``#putBatchMessagePositionInfo``), byte for byte the local engine's files and the 5.3.3
broker's; ``--output`` and ``--in-place`` alike, and verify is clean after."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from tests.helpers import SMALL, bcq_unit_values, cli, expected_bcq_units, generate_5x, run
from tests.helpers.pipeline import digest, rebuilt, smash

pytestmark = pytest.mark.slow  # Spark local[2]

BCQ_CONF = "mapperFileSizeBatchConsumeQueue=460\n"  # 10 units a file: queues of several files


def _gen(path: Path, conf: Path, messages: int, seed: int) -> Path:
    extra = ("--messages", str(messages), "--seed", str(seed), "--bcq-topics", "2", "--delay-ratio", "0.1")
    return generate_5x(path, conf, *SMALL, *extra)


@pytest.fixture(scope="module")
def bcq_stores(tmp_path_factory, sample_tarball):
    """(store, broker.conf) by name: the 5.3.3 sample; generated stores with two BatchCQ
    topics over 30 commit-log files; one with a broken record before the recovery region
    (the rest of its file skipped); one whose first files expired (queues start above 0)."""
    root = tmp_path_factory.mktemp("bcq")
    conf = root / "broker.conf"
    conf.write_text(BCQ_CONF)
    good = _gen(root / "good", conf, 1500, 5)
    damaged = root / "damaged"
    shutil.copytree(good, damaged)
    smash(sorted((damaged / "commitlog").iterdir())[4], 20000)
    expired = root / "expired"
    shutil.copytree(good, expired)
    for f in sorted((expired / "commitlog").iterdir())[:3]:
        f.unlink()
    s = sample_tarball("bcq")
    return {
        "sample": (s / "store", s / "broker.conf"),
        "good": (good, conf),
        "damaged": (damaged, conf),
        "expired": (expired, conf),
    }


def _bcq(files: dict) -> dict:
    return {k: v for k, v in files.items() if k.startswith("batchconsumequeue/")}


@pytest.mark.parametrize("name", ["sample", "good", "damaged", "expired"])
def test_BatchConsumeQueue_putBatchMessagePositionInfo_decomposed_is_the_local_engine(bcq_stores, name, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.pipeline.rebuild_spill import PARTS
    from tests.helpers.rebuild_reference import build_set

    store, conf = bcq_stores[name]
    want = rebuilt(build_set, store, conf, tmp_path / "a")
    got = rebuilt(rebuild_build, store, conf, tmp_path / "b")
    assert _bcq(got[1]) == _bcq(want[1]) and len(_bcq(want[1])) >= (1 if name == "sample" else 20)
    assert got == want
    assert not (tmp_path / "b" / PARTS).exists()
    if name == "damaged":
        assert want[0]["skipped"]
    if name in ("sample", "good"):  # what the broker (or generate) wrote
        assert _bcq(got[1]) == _bcq(digest(store))


def test_sample_rebuilt_units_are_the_expected_json(bcq_stores, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue

    store, conf = bcq_stores["sample"]
    exp = json.loads((store.parent / "expected.json").read_text())
    rebuilt(rebuild_build, store, conf, tmp_path / "b")
    (q,) = exp["batchConsumeQueues"]
    bq = BatchConsumeQueue(
        tmp_path / "b" / "batchconsumequeue" / q["topic"] / str(q["queueId"]), q["topic"], q["queueId"]
    )
    try:
        units = list(bq.units())
        assert (len(units), bq.min_offset, bq.max_offset, bq.file_size) == (
            q["units"],
            q["minOffset"],
            q["maxOffset"],
            exp["bcqFileSize"],
        )
        want = expected_bcq_units(exp)
        assert {i: bcq_unit_values(units[i]) for i in want} == want
    finally:
        bq.close()


def test_expired_store_queues_start_above_zero_and_span_files(bcq_stores, tmp_path):
    """No pre-blank in a BatchCQ queue: its first unit (msgBaseOffset > 0) is at byte 0 of
    file 0, whichever commit-log file first holds it."""
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.queues.batch_queue import batch_queues

    store, conf = bcq_stores["expired"]
    rebuilt(rebuild_build, store, conf, tmp_path / "b")
    qs = list(batch_queues(tmp_path / "b" / "batchconsumequeue"))
    try:
        assert qs and all(q.min_offset > 0 for q in qs)
        assert any(len(q.queue.files) > 1 for q in qs)
        assert all(q.queue.files[0].name == f"{0:020d}" for q in qs)
    finally:
        for q in qs:
            q.close()


def test_put_many_skips_what_put_skips(tmp_path):
    """``BatchConsumeQueueWriter.put_many`` = ``put`` one by one (offsets at or below the
    last one written are "built repeatedly": skipped), across calls."""
    from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueueWriter

    rows = [
        (100, 10, 1, 5, 0, 2),
        (50, 10, 1, 5, 2, 1),
        (200, 9, 7, 6, 3, 4),
        (200, 9, 7, 6, 7, 1),
        (300, 8, -3, 7, 8, 1),
        (250, 1, 1, 1, 9, 1),
        (400, 8, 0, 8, 10, 3),
    ]
    a = BatchConsumeQueueWriter(tmp_path / "a", 46 * 3, [tmp_path])
    for r in rows:
        a.put(*r)
    a.flush()
    b = BatchConsumeQueueWriter(tmp_path / "b", 46 * 3, [tmp_path])
    cols = list(zip(*rows, strict=True))
    b.put_many(*(c[:3] for c in cols))
    b.put_many(*(c[3:] for c in cols))
    b.flush()
    assert digest(tmp_path / "b") == digest(tmp_path / "a") and len(digest(tmp_path / "a")) == 2


def test_spark_rebuild_of_batch_queues_is_the_local_engine(bcq_stores, spark, tmp_path):
    from rmqstore_cli.pipeline import spark as sp
    from tests.helpers.rebuild_reference import build_set

    for name in ("sample", "good", "damaged"):
        store, conf = bcq_stores[name]
        want = rebuilt(build_set, store, conf, tmp_path / f"{name}-a")
        got = rebuilt(lambda c, d, o: sp.rebuild_build(spark, c, d, o), store, conf, tmp_path / f"{name}-b")
        assert got[1] == want[1] and _bcq(want[1]), name
        assert got[0] == want[0], name


def _verify(store: Path, conf: Path) -> dict:
    r = run("verify", "--store", store, "--broker-conf", conf, *SMALL, "--format", "jsonl")
    return json.loads(r.stdout.splitlines()[-1])["summary"]


def test_cli_spark_output_and_in_place_equal_the_local_engine_and_verify_clean(bcq_stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    store, conf = bcq_stores["good"]
    opts = ("--broker-conf", conf, *SMALL, "--tz", "UTC", "-f", "json")
    spark = ("--engine", "spark", "--spark-master", "local[2]")
    a = run("rebuild-index", "--store", store, *opts, "--output", tmp_path / "l")
    b = run("rebuild-index", "--store", store, *opts, "--output", tmp_path / "s", *spark)
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    assert json.loads(a.stdout)["consume_queue_units"] == json.loads(b.stdout)["consume_queue_units"]
    for part in ("batchconsumequeue", "consumequeue", "index"):
        want = digest(tmp_path / "l" / part)
        assert want and digest(tmp_path / "s" / part) == want, part
    placed = {}
    for engine, extra in (("local", ()), ("spark", spark)):
        copy = tmp_path / f"in-{engine}"
        shutil.copytree(store, copy)
        shutil.rmtree(copy / "batchconsumequeue")
        shutil.rmtree(copy / "consumequeue")
        r = run("rebuild-index", "--store", copy, *opts, "--in-place", "--no-backup", *extra)
        assert r.returncode == 0, r.stderr[-2000:]
        placed[engine] = {p: digest(copy / p) for p in ("batchconsumequeue", "consumequeue", "index")}
        assert placed[engine]["batchconsumequeue"] == digest(store / "batchconsumequeue")
    assert placed["spark"] == placed["local"]
    s = _verify(tmp_path / "in-spark", conf)
    assert s["errors"] == 0 and s["warnings"] == 0, s


def test_topic_naming_a_BatchCQ_topic_is_still_refused_on_either_engine(bcq_stores, tmp_path):
    store, conf = bcq_stores["sample"]
    for extra in ((), ("--engine", "spark")):
        r = cli(
            "rebuild-index",
            "--store",
            store,
            "--broker-conf",
            conf,
            "--output",
            tmp_path / "o",
            "--topic",
            "BulkTopic",
            *extra,
        )
        assert r.exit_code == 2 and "BulkTopic: BatchCQ topics (batchconsumequeue/) are rebuilt only with" in r.stderr
        assert not (tmp_path / "o").exists()


def test_dry_run_counts_batch_units_as_the_local_engine_and_writes_nothing(bcq_stores, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.rebuild_reference import build_set

    store, conf = bcq_stores["good"]
    reps = []
    for name, fn in (("a", build_set), ("b", rebuild_build)):
        cfg = StoreConfig.load(store, conf)
        cfg.infer_sizes()
        d = vars(fn(cfg, tmp_path / name, RebuildOptions(tz=dt.timezone.utc, dry_run=True))).copy()
        d.pop("seconds")
        reps.append(d)
        assert not (tmp_path / name).exists()
    assert reps[1] == reps[0]
    assert reps[0]["units"] == rebuilt(build_set, store, conf, tmp_path / "c")[0]["units"]  # BatchCQ units counted
