"""The fixtures every test directory shares: the real-broker samples (tests/fixtures/) and
stores generated once a session. Plain helper functions live in :mod:`tests.helpers`."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import VERSIONS, cli, extract_sample, fixture_dir, generate, tmpfs


@pytest.fixture(autouse=True)
def _no_ambient_columns(monkeypatch):
    """No COLUMNS unless a test sets it: pytest-xdist's workers export COLUMNS=80, and a table
    into a pipe fits COLUMNS when it is set (render.table_width)."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture(scope="session")
def sample_tarball(tmp_path_factory):
    """``sample_tarball("dledger")`` -> the extracted sample directory, extracted once per test
    session. Read-only by convention: copy its store before mutating it."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = extract_sample(name, tmp_path_factory.mktemp(f"sample-{name}"))
        return cache[name]

    return get


@pytest.fixture(params=VERSIONS)
def fixture(request):
    """(store dir, broker.conf, expected.json) of one real-broker sample store."""
    d = fixture_dir(request.param)
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def small_store_master(tmp_path_factory) -> Path:
    """A generated store with small files (read-only by convention: copy before mutating)."""
    return generate(
        tmp_path_factory.mktemp("small") / "store",
        "--delay-ratio",
        "0.1",
        "--transaction-ratio",
        "0.1",
        "--ipv6-ratio",
        "0.1",
        messages=3000,
    )


@pytest.fixture
def small_store(small_store_master, tmp_path) -> Path:
    """A private copy of the small generated store, free to mutate."""
    dst = tmp_path / "store"
    shutil.copytree(small_store_master, dst)
    return dst


@pytest.fixture(scope="session")
def tricky_store(tmp_path_factory) -> Path:
    """The records that trip the columnar path's shortcuts (tests.helpers.records), written
    once a session; read-only by convention."""
    from tests.helpers.records import write_tricky_store

    return write_tricky_store(tmp_path_factory.mktemp("tricky") / "store")


@pytest.fixture
def full_tmpfs(tmp_path):
    """A small tmpfs holding a store with sparse files, then filled to the last page
    (unmounted at the end); skipped where mounting is not permitted."""
    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        store = mnt / "store"
        r = cli(
            "generate",
            "--store",
            store,
            "--messages",
            "500",
            "--commitlog-file-size",
            "4194304",
            "--cq-file-size",
            "60000",
            "--index-slots",
            "5000",
            "--index-max",
            "40000",
            "--format",
            "json",
        )
        assert r.exit_code == 0, r.stderr
        with open(mnt / "fill", "wb") as fh:
            try:
                while True:
                    fh.write(b"\1" * 65536)
                    fh.flush()
            except OSError:
                pass
        yield store


@pytest.fixture(scope="session", autouse=True)
def spark_cache(tmp_path_factory):
    """The suite's Spark runs share one class-data archive (opt-in: RMQSTORE_SPARK_CACHE,
    pipeline/jvmstart.py) in pytest's temporary directory: the suite writes nothing under
    HOME (it used to leave ~70 MB archives in ~/.cache/rmqstore). A test that needs no cache
    passes ``RMQSTORE_SPARK_CACHE=""``."""
    if "RMQSTORE_SPARK_CACHE" in os.environ:
        yield Path(os.environ["RMQSTORE_SPARK_CACHE"])
        return
    cache = tmp_path_factory.mktemp("spark-cache")
    os.environ["RMQSTORE_SPARK_CACHE"] = str(cache)
    yield cache
    os.environ.pop("RMQSTORE_SPARK_CACHE", None)


@pytest.fixture(scope="module")
def spark():
    """A local[2] Spark session for one test module."""
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    from rmqstore_cli.pipeline import spark as sp

    s = sp.session("local[2]")
    yield s
    s.stop()


#: pyproject's addopts: plain ``pytest`` runs the fast tier (README, Development).
FAST_TIER = "not slow and not cluster and not fuzz"


def pytest_configure(config):
    """``pytest tests/x.py`` (or a node id) runs the tests it names, whatever their tier: the
    tier filter applies when no path is named, unless ``-m`` says otherwise."""
    if config.args_source == pytest.Config.ArgsSource.ARGS and config.option.markexpr == FAST_TIER:
        config.option.markexpr = ""


#: Set by .ci/run: there, every dependency a test names is installed, so a skip is a failure.
NO_SKIP = "RMQSTORE_TEST_NO_SKIP"


def _no_skip(report) -> None:
    if report.skipped and os.environ.get(NO_SKIP) == "1" and not hasattr(report, "wasxfail"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, and {NO_SKIP}=1 (.ci/run) allows no skip: {why}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    _no_skip((yield).get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    _no_skip((yield).get_result())
