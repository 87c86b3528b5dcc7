"""How the embedded Spark starts: the JVM's options and class-data archive (jvmstart) and
the Python worker daemon (daemon). What must hold: the first run publishes the archive
only once its JVM has written it whole, later runs map it, nothing of the JVM's own log
reaches stdout, results are the same, and workers import the installed PySpark."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rmqstore_cli.pipeline import jvmstart
from rmqstore_cli.pipeline.daemon import installed_pyspark_first
from tests.helpers import generate, run

pytestmark = pytest.mark.slow  # Spark local[2]


def test_no_jvm_options_when_the_jvm_is_spark_submits(monkeypatch):
    """Without a master, or under spark-submit, the driver JVM is already running."""
    assert jvmstart.options(None).options == []
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert jvmstart.options("spark://h:7077").options == []


@pytest.mark.parametrize("master", ["yarn", "spark://h:7077", "k8s://https://h", "localhost[2]"])
def test_cluster_masters_client_driver_gets_c1_and_the_archive(master, tmp_path, monkeypatch):
    """The client-mode driver JVM this process starts for a cluster only schedules, as an
    embedded master's does (measured: ~6.8 → ~2.9 s driver CPU per command)."""
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(tmp_path / "rmqstore"))
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    start = jvmstart.options(master)
    assert "-XX:TieredStopAtLevel=1" in start.options
    assert start.dump is not None and f"-XX:ArchiveClassesAtExit={start.dump}" in start.options
    assert not jvmstart.embedded(master)


def test_embedded_first_run_dumps_to_a_private_name_then_maps_the_archive(tmp_path, monkeypatch):
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(tmp_path / "rmqstore"))
    first = jvmstart.options("local[2]")
    assert "-XX:TieredStopAtLevel=1" in first.options
    assert all(o in first.options for o in jvmstart.QUIET_JVM_LOG)
    assert first.dump is not None and first.archive is not None
    assert f"-XX:ArchiveClassesAtExit={first.dump}" in first.options
    assert first.dump.parent == first.archive.parent == tmp_path / "rmqstore"
    assert first.dump != first.archive
    first.archive.write_bytes(b"archive")
    later = jvmstart.options("local[*]")
    assert later.dump is None
    assert f"-XX:SharedArchiveFile={first.archive}" in later.options


def test_no_archive_unless_a_cache_is_named_or_when_it_is_unwritable(tmp_path, monkeypatch):
    """The archive is opt-in: without RMQSTORE_SPARK_CACHE nothing is cached (C1 stays), and
    XDG_CACHE_HOME or HOME choose nothing."""
    monkeypatch.delenv(jvmstart.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    off = jvmstart.options("local")
    assert off.dump is None and not any("Archive" in o for o in off.options)
    assert "-XX:TieredStopAtLevel=1" in off.options
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()
    (tmp_path / "rmqstore").write_text("a file where the cache directory would be")
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(tmp_path / "rmqstore"))
    blocked = jvmstart.options("local")
    assert blocked.dump is None and not any("Archive" in o for o in blocked.options)


def _jvm_stand_in(dump: Path, content: bytes) -> subprocess.Popen:
    """A process that, like the JVM, writes its archive only after its stdin closes."""
    code = f"import sys; sys.stdin.read(); open({str(dump)!r}, 'wb').write({content!r})"
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


def test_finish_publishes_the_dump_after_the_jvm_exits(tmp_path, monkeypatch):
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(tmp_path / "rmqstore"))
    start = jvmstart.options("local[2]")
    jvm = _jvm_stand_in(start.dump, b"classes")
    jvmstart.finish(start, jvm)
    assert jvm.returncode == 0
    assert start.archive.read_bytes() == b"classes"
    assert not start.dump.exists()


def test_finish_publishes_nothing_when_the_dump_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(tmp_path / "rmqstore"))
    start = jvmstart.options("local[2]")
    jvmstart.finish(start, _jvm_stand_in(start.dump, b""))
    assert not start.archive.exists() and not start.dump.exists()


def _package(root: Path, name: str = "pyspark") -> Path:
    pkg = root / name
    (pkg / "python" / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for z in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        with zipfile.ZipFile(pkg / "python" / "lib" / z, "w") as f:
            f.writestr("x.py", "")
    (root / "py4j").mkdir()
    (root / "py4j" / "__init__.py").write_text("")
    return pkg


def test_daemon_puts_the_installed_pyspark_before_its_own_zips(tmp_path):
    site = tmp_path / "site"
    lib = _package(site) / "python" / "lib"
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), "/elsewhere", str(site)]
    assert installed_pyspark_first(path) == ["/elsewhere", str(site), *path[:2]]


def test_daemon_keeps_zips_first_when_they_are_not_the_installed_pyspark(tmp_path):
    site, other = tmp_path / "site", tmp_path / "other"
    _package(site)
    lib = _package(other) / "python" / "lib"  # a cluster's Spark: zips of another installation
    path = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(site)]
    assert installed_pyspark_first(path) == path
    alone = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]  # nothing installed
    assert installed_pyspark_first(alone) == alone


def test_spark_workers_import_the_installed_pyspark(spark):
    def where(_):
        import sys

        import pyspark

        return pyspark.__file__, "pyspark.worker" in sys.modules

    got = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    for path, worker in got:
        assert ".zip" not in path and worker


def test_cli_spark_runs_publish_then_use_the_archive_with_clean_stdout(tmp_path):
    """With RMQSTORE_SPARK_CACHE naming a directory, the first run writes the archive there and
    the second maps it; HOME stays untouched either way."""
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    store = generate(tmp_path / "s", messages=300)
    home = tmp_path / "home"
    home.mkdir()
    env = {"RMQSTORE_SPARK_CACHE": str(tmp_path / "cache"), "HOME": str(home), "XDG_CACHE_HOME": ""}
    args = ("verify", "--store", store, "--engine", "spark", "--spark-master", "local[2]", "-f", "json")
    first = run(*args, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    archives = list((tmp_path / "cache").iterdir())
    assert len(archives) == 1 and archives[0].suffix == ".jsa" and archives[0].stat().st_size > 1 << 20
    second = run(*args, env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert list((tmp_path / "cache").iterdir()) == archives
    for r in (first, second):  # one JSON document: no JVM log line on stdout
        assert json.loads(r.stdout)["summary"]["messages"] >= 300
    assert json.loads(first.stdout) == json.loads(second.stdout)
    assert list(home.iterdir()) == []


def test_cli_spark_writes_nothing_under_home_without_a_cache(tmp_path):
    """A read-only command on Spark, no cache named: nothing is written under HOME (it was a
    ~70 MB spark-cds-*.jsa under ~/.cache/rmqstore), and the temp directory it was given is
    left as it was found."""
    pytest.importorskip("pyspark")
    store = generate(tmp_path / "s", messages=100)
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {"HOME": str(home), "TMPDIR": str(tmp), "RMQSTORE_SPARK_CACHE": "", "XDG_CACHE_HOME": ""}
    r = run("verify", "--store", store, "--engine", "spark", "--spark-master", "local[2]", "-f", "json", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
    assert sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")) == []
    assert json.loads(r.stdout)["summary"]["messages"] >= 100


def test_dumps_left_by_killed_runs_are_removed_after_a_day(tmp_path, monkeypatch):
    import os
    import time

    cache = tmp_path / "rmqstore"
    monkeypatch.setenv(jvmstart.CACHE_ENV, str(cache))
    cache.mkdir()
    old, recent = cache / "spark-cds-0123456789abcdef.1.part", cache / "spark-cds-0123456789abcdef.2.part"
    for p in (old, recent):
        p.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    jvmstart.options("local[2]")
    assert not old.exists() and recent.exists()
