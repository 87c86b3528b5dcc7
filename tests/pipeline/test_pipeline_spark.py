"""rebuild-index and verify through the pipeline: the per-file decomposition (in process and
on Spark local[2]) writes the local engine's consume-queue and index files byte for byte,
and verify finds the same findings, for one store or several."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import SMALL, fixture_dir, generate, run
from tests.helpers.pipeline import SIZES, build, digest, ours_only, parquet_rows, smash

pytestmark = pytest.mark.slow  # Spark local[2]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("pl")
    good = generate(root / "good", "--delay-ratio", "0.1", "--transaction-ratio", "0.1", messages=1500, seed=5)
    damaged = root / "damaged"
    shutil.copytree(good, damaged)
    files = sorted((damaged / "commitlog").iterdir())
    smash(files[2], 20000)  # before the recovery region: the rest of the file is skipped
    smash(files[-2], 30000)  # inside it: dispatch ends there
    expired = root / "expired"  # first files gone + abort: pre-blank queues, abnormal recovery
    shutil.copytree(good, expired)
    for f in sorted((expired / "commitlog").iterdir())[:3]:
        f.unlink()
    (expired / "abort").write_bytes(b"")
    return {"good": good, "damaged": damaged, "expired": expired}


@pytest.mark.parametrize("name", ["good", "damaged", "expired"])
def test_decomposed_rebuild_is_the_local_engine_byte_for_byte(stores, name, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    want, want_files = build(build_set, stores[name], tmp_path / "a")
    got, got_files = build(rebuild_build, stores[name], tmp_path / "b")
    assert len(want_files) > 10 and any(k.startswith("index/") for k in want_files)
    assert got_files == want_files
    assert got == want
    if name == "damaged":
        assert not want["stop"].clean and want["skipped"]


def test_decomposed_rebuild_with_topic_and_index_only(stores, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    for kw in ({"build_index": False, "topics": ["OrderTopic"]}, {"build_cq": False}):
        want = build(build_set, stores["good"], tmp_path / f"a{len(kw)}{kw.get('build_cq')}", **kw)
        got = build(rebuild_build, stores["good"], tmp_path / f"b{len(kw)}{kw.get('build_cq')}", **kw)
        assert got == want and want[1]


def test_spark_rebuild_is_the_local_engine_byte_for_byte(stores, spark, tmp_path):
    from rmqstore_cli.pipeline import spark as sp
    from tests.helpers.rebuild_reference import build_set

    for name in ("good", "damaged", "expired"):
        want = build(build_set, stores[name], tmp_path / f"{name}-a")
        got = build(lambda c, d, o: sp.rebuild_build(spark, c, d, o), stores[name], tmp_path / f"{name}-b")
        assert got[1] == want[1], name
        assert got[0] == want[0], name


@pytest.mark.parametrize("ship", [4096, -1], ids=["marks-to-driver", "marks-by-shuffle"])
def test_spark_verify_finds_what_local_finds_for_several_stores(stores, spark, monkeypatch, ship):
    """One Spark task per commit-log file (then per queue and index file): the same summaries
    and findings as the whole-store Verifier, capped or not, for three stores at once,
    whether the files' marks come back to the driver (few) or go by shuffle (many)."""
    from rmqstore_cli.pipeline import executor, spark as sp
    from rmqstore_cli.pipeline.stores import store_specs
    from tests.helpers.verify_reference import verify_store

    monkeypatch.setattr(executor, "SHIP_MARKS", ship)
    paths = []
    results = sp._VerifyOnSpark.results
    monkeypatch.setattr(
        sp._VerifyOnSpark,
        "results",
        lambda self, rdd: (results(self, rdd), paths.append(self.whole is not None))[0],
    )
    specs = store_specs([str(stores[n]) for n in ("good", "damaged", "expired")], None, SIZES)

    def key(f: dict) -> str:
        return json.dumps(f, sort_keys=True)

    for cap in (None, 2):
        local = [verify_store(s, True, True, cap) for s in specs]
        remote = sp.verify(spark, specs, True, True, cap)
        assert [r["summary"] for r in remote] == [r["summary"] for r in local]
        assert [sorted(map(key, r["findings"])) for r in remote] == [sorted(map(key, r["findings"])) for r in local]
    assert local[0]["ok"] and not local[1]["ok"]
    assert all(f["store"] == str(stores["damaged"]) for f in local[1]["findings"]) and local[1]["findings"]
    assert "abort.unclean-shutdown" in {f["check"] for f in local[2]["findings"]}
    assert "recovery.truncate" in {f["check"] for f in local[1]["findings"]}
    assert paths == [ship > 0] * 2


def test_cli_verify_several_stores_and_rebuild_on_spark(stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    pattern = str(stores["good"].parent / "[dg]*")
    loc = run("verify", "--store-glob", pattern, *SMALL, "-f", "jsonl")
    assert loc.returncode == 1, loc.stderr
    lines = [json.loads(x) for x in loc.stdout.splitlines()]
    assert {f["store"] for f in lines[:-1]} == {str(stores["damaged"])}
    assert [s["store"] for s in lines[-1]["summary"]["stores"]] == [str(stores["damaged"]), str(stores["good"])]
    out_l, out_s = tmp_path / "l", tmp_path / "s"
    two = ("--store", stores["damaged"], "--store", stores["good"], *SMALL, "--tz", "UTC", "-f", "json")
    a = run("rebuild-index", *two, "--output", out_l)
    b = run("rebuild-index", *two, "--output", out_s, "--engine", "spark", "--spark-master", "local[2]")
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]

    ours_only(b.stderr)  # the warnings about the damaged store, and nothing of Spark's
    ja, jb = json.loads(a.stdout)["stores"], json.loads(b.stdout)["stores"]
    assert [s["store"] for s in jb] == [str(stores["damaged"]), str(stores["good"])]
    for name, sa, sb in zip(("damaged", "good"), ja, jb, strict=True):  # each store to its own directory
        assert sb["output"] == str(out_s / name)
        assert digest(out_l / name / "consumequeue") == digest(out_s / name / "consumequeue")
        assert digest(out_l / name / "index") == digest(out_s / name / "index")
        alone = run("rebuild-index", "--store", stores[name], *SMALL, "--tz", "UTC", "--output", tmp_path / name)
        assert alone.returncode == 0 and digest(tmp_path / name / "index") == digest(out_s / name / "index")
        for k in ("messages", "index_keys", "index_files", "consume_queue_files", "dispatch_end", "skipped"):
            assert sa[k] == sb[k], k
    assert b"dispatch stopped at offset" in b.stderr and str(stores["damaged"]).encode() in b.stderr


def test_refused_topics_are_reported_by_the_decomposed_rebuild(tmp_path):
    """A topic that cannot be a directory gets no queue, and the per-file (Spark) plan says
    so exactly as the local engine does."""
    from tests.helpers import generate as _generate, retopic

    store = _generate(tmp_path / "s", messages=120, seed=5)
    hostile = retopic(store, tmp_path / "hostile", [(slice(None, None, 7), "../evil")])
    from rmqstore_cli.pipeline import local
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.rebuild_reference import build_set

    cfg = StoreConfig.load(hostile, None)
    cfg.infer_sizes()
    ref = build_set(cfg, tmp_path / "ref", RebuildOptions())
    dec = local.rebuild_build(cfg, tmp_path / "dec", RebuildOptions())
    assert ref.refused_topics and set(ref.refused_topics) == {"../evil"}
    assert dec.refused_topics == ref.refused_topics
    assert not (tmp_path / "evil").exists() and not (tmp_path / "dec" / "evil").exists()


def test_spark_submit_runs_the_same_export(tmp_path):
    """docs/spark.md's spark-submit form: the package's __main__.py as the application, master and
    settings from spark-submit (``--spark-master`` left at its default is not applied)."""
    import subprocess
    import sys

    import rmqstore_cli

    submit = Path(sys.executable).with_name("spark-submit")
    if not submit.exists():
        pytest.skip("no spark-submit next to the interpreter")
    store = fixture_dir("5.3.3") / "store"
    app = Path(rmqstore_cli.__file__).with_name("__main__.py")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    r = subprocess.run(
        [
            str(submit),
            "--master",
            "local[2]",
            str(app),
            "export",
            "--store",
            str(store),
            "--output",
            str(tmp_path / "submitted"),
            "--engine",
            "spark",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["rows"] == 597
    local = run("export", "--store", str(store), "--output", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    assert parquet_rows(tmp_path / "submitted") == parquet_rows(tmp_path / "local")
