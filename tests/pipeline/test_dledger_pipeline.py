"""DLedger commit logs through the pipeline: the per-file decomposition (in process and on Spark
local[2]) rebuilds the local engine's files byte for byte and verifies to the same findings,
on the real DLedger sample and a divided store (old commitlog/ + DLedger data); export on
Spark writes the local engine's rows."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli, run
from tests.helpers.pipeline import rebuilt

pytestmark = pytest.mark.slow  # Spark local[2]


@pytest.fixture(scope="module")
def stores(sample_tarball, tmp_path_factory):
    d = sample_tarball("dledger")
    divided = tmp_path_factory.mktemp("dl") / "divided"
    small = ("--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400")
    assert cli("generate", "--store", divided, "-m", "500", *small).exit_code == 0
    assert cli("generate", "--store", divided, "--append", "--dledger", "-m", "500", "--seed", "4").exit_code == 0
    return {"sample": (d / "store", d / "broker.conf"), "divided": (divided, None)}


@pytest.mark.parametrize("name", ["sample", "divided"])
def test_decomposed_rebuild_is_the_local_engine_byte_for_byte(stores, name, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    want = rebuilt(build_set, *stores[name], tmp_path / "a")
    got = rebuilt(rebuild_build, *stores[name], tmp_path / "b")
    assert any(k.startswith("index/") for k in want[1]) and got == want


def test_spark_rebuild_and_verify_are_the_local_engines(stores, spark, tmp_path):
    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.pipeline.stores import store_specs
    from tests.helpers.rebuild_reference import build_set
    from tests.helpers.verify_reference import verify_store

    for name, (store, conf) in stores.items():
        want = rebuilt(build_set, store, conf, tmp_path / f"{name}-a")
        got = rebuilt(lambda c, d, o: sp.rebuild_build(spark, c, d, o), store, conf, tmp_path / f"{name}-b")
        assert got == want, name
        specs = store_specs([str(store)], str(conf) if conf else None, {})
        local = [verify_store(s, True, True, None) for s in specs]
        remote = sp.verify(spark, specs, True, True, None)
        assert [r["summary"] for r in remote] == [r["summary"] for r in local]
        assert local[0]["ok"] and local[0]["summary"]["messages"] > 0


def test_spark_export_writes_the_local_rows(stores, tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    import pyarrow.dataset as ds

    store, _ = stores["divided"]
    dumped = cli("dump-commitlog", "--store", store, "--format", "jsonl").stdout.splitlines()
    rows = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        r = run(
            "export",
            "--store",
            store,
            "--output",
            out,
            "--engine",
            engine,
            "--spark-master",
            "local[2]",
            "--format",
            "json",
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["rows"] == len(dumped)
        t = ds.dataset(out, partitioning="hive").to_table().sort_by("physical_offset")
        rows[engine] = t.select(["physical_offset", "topic", "queue_offset", "msg_id"]).to_pylist()
    assert rows["local"] == rows["spark"]
