"""export --jobs N (pipeline/export_jobs.py): the same rows, schema, partitions and unreadable
ranges on any number of processes, a file cut in parts included; --overwrite's result; a
worker's error as one process reports it."""

from __future__ import annotations

import json

import pytest

from tests.helpers import SMALL, generate, run
from tests.helpers.pipeline import digest, left_after_kill, parquet_rows

pa_ds = pytest.importorskip("pyarrow.dataset", reason="needs the export extra: pip install -e '.[export]'")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("jobs") / "s", messages=1500, seed=3)


def _export(store, out, *extra):
    r = run("export", "--store", store, "--output", out, *SMALL, "-q", "-f", "json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _layout(out) -> tuple:
    """The dataset's partition directories and schema."""
    dirs = sorted(str(p.parent.relative_to(out)) for p in out.rglob("*.parquet"))
    return sorted(set(dirs)), pa_ds.dataset(out, format="parquet", partitioning="hive").schema


@pytest.mark.parametrize("jobs", ["2", "3"])
def test_the_rows_of_one_process(store, tmp_path, jobs):
    one, many = _export(store, tmp_path / "one", "--jobs", "1"), _export(store, tmp_path / "n", "--jobs", jobs)
    assert many["commitlog_files"] > 3 and many["rows"] == one["rows"] > 1500
    assert parquet_rows(tmp_path / "n") == parquet_rows(tmp_path / "one")
    assert _layout(tmp_path / "n") == _layout(tmp_path / "one")
    assert {p.name.split("-")[1] for p in (tmp_path / "n").rglob("*.parquet")} == {
        f"{i:05d}" for i in range(many["commitlog_files"])
    }  # one task a file, its own files


def test_the_default_on_a_small_log_is_todays_files(store, tmp_path):
    """Below ONE_PROCESS_BELOW bytes on disk --jobs 0 is one process: --jobs 1's files."""
    _export(store, tmp_path / "one", "--jobs", "1")
    _export(store, tmp_path / "dflt")
    assert digest(tmp_path / "dflt") == digest(tmp_path / "one")
    assert all(p.name.count("-") == 1 for p in (tmp_path / "one").rglob("*.parquet"))  # part-<i>, no task


def test_files_cut_in_parts_and_a_damaged_store(two_stores, tmp_path, monkeypatch):
    """Files cut at records (the writer's share monkeypatched small, the forked workers see
    it): the rows and unreadable ranges of one process, in its order; a store's damaged
    file keeps its rows up to the damage and no more."""
    from rmqstore_cli.pipeline import export_jobs, local, parquet_out, rebuild_parts
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs

    tasks = file_tasks(store_specs([str(s) for s in two_stores], None, {}), body=True)
    want = local.export(tasks, tmp_path / "one")
    monkeypatch.setattr(rebuild_parts, "MIN_PART_BYTES", 4096)
    monkeypatch.setattr(rebuild_parts, "MAX_PART_BYTES", 16384)
    monkeypatch.setattr(export_jobs, "PARTS_PER_JOB", 20)
    parts = export_jobs.split(tasks, 40, 2)
    assert len(parts) > 2 * len(tasks) and sum(p.size for p in parts) == sum(t.file_size for t in tasks)
    monkeypatch.setattr(parquet_out, "BUFFER_BYTES", 20_000)
    seen: list[int] = []
    got = local.export(tasks, tmp_path / "n", seen.append, jobs=2)
    assert got == want and len(want["unreadable"]) == 1 and sorted(seen) == sorted(p.size for p in parts)
    assert parquet_rows(tmp_path / "n") == parquet_rows(tmp_path / "one")


def test_parts_after_a_stop_are_dropped(tmp_path):
    """Where a part's scan stopped, the rest of its file is skipped: the file's later parts'
    rows, ranges and files are not kept."""
    from rmqstore_cli.pipeline.export_jobs import Part, PartDone, skipped_after_stops

    files = [tmp_path / f"d{i}" / "f" for i in range(4)]
    for f in files:
        f.parent.mkdir()
        f.write_bytes(b"x")
    parts = [Part(None, 0, 1), Part(None, 0, 1), Part(None, 0, 1), Part(None, 1, 1)]  # type: ignore[arg-type]
    stop = {"offset": 9}
    done = [PartDone(5, [], [str(files[0])], 1), PartDone(3, [stop], [str(files[1])], 1)]
    done += [PartDone(4, [], [str(files[2])], 1), PartDone(7, [], [str(files[3])], 1)]
    assert skipped_after_stops(parts, done) == [done[0], done[1], done[3]]
    assert [f.parent.exists() for f in files] == [True, True, False, True]


def test_overwrite_gives_one_process_dataset(store, tmp_path):
    """--overwrite with --jobs 2: each partition written is emptied of what the run did not
    write (a stale file, a subdirectory), after the workers, as one process empties it
    before its first file; a partition not written stays."""
    out = tmp_path / "o"
    _export(store, out, "--jobs", "2")
    part = sorted(out.glob("store=*/topic_dir=*"))[0]
    (part / "part-99.parquet").write_bytes(next(part.iterdir()).read_bytes())
    (part / "old").mkdir()
    other = out / "store=s" / "topic_dir=Gone"
    other.mkdir(parents=True)
    (other / "part-0.parquet").write_bytes(b"stale")
    got = _export(store, out, "--jobs", "2", "--overwrite")
    assert not (part / "part-99.parquet").exists() and not (part / "old").exists()
    assert (other / "part-0.parquet").exists()
    (other / "part-0.parquet").unlink()
    assert len(parquet_rows(out)) == got["rows"]


def test_a_workers_error_is_one_processs_line(store, tmp_path):
    """An unwritable partition (a file where a worker's directory belongs): exit 5 and one
    line, as with --jobs 1; and a worker's RmqstoreError reaches the driver whole."""
    lines = {}
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        _export(store, out, "--jobs", "1")
        part = sorted(out.glob("store=*/topic_dir=*"))[-1]
        for p in part.iterdir():
            p.unlink()
        part.rmdir()
        part.write_bytes(b"in the way")
        r = run("export", "--store", store, "--output", out, *SMALL, "-q", "--overwrite", "--jobs", jobs)
        lines[jobs] = r.stderr.decode().strip().splitlines()
        assert r.returncode == 5 and len(lines[jobs]) == 1 and "Traceback" not in r.stderr.decode(), r.stderr
    assert lines["1"][0].split(":")[:3] == lines["2"][0].split(":")[:3]


def test_a_rmqstore_error_in_a_worker(store, tmp_path, monkeypatch):
    from rmqstore_cli.errors import OutputError
    from rmqstore_cli.pipeline import export_jobs, export_run
    from rmqstore_cli.pipeline.stores import file_tasks, store_specs

    def broken(*a, **k):
        raise OutputError("the disk is full", path=tmp_path)

    monkeypatch.setattr(export_jobs, "write_part", broken)
    tasks = file_tasks(store_specs([str(store)], None, dict(mapped_file_size_commit_log=65536)))
    with pytest.raises(OutputError, match="the disk is full"):
        export_run.write_local(tasks, tmp_path / "o", "snappy", jobs=2)


#: A parent exporting on 2 processes whose tasks print their PIDs and wait.
PARENT = """
import os, sys, time
from rmqstore_cli.pipeline import export_jobs, local
from rmqstore_cli.pipeline.stores import file_tasks, store_specs

def stuck(*a, **k):
    os.write(1, b"%d\\n" % os.getpid())
    time.sleep(600)

export_jobs.write_part = stuck
tasks = file_tasks(store_specs([sys.argv[1]], None, dict(mapped_file_size_commit_log=65536)))
local.export(tasks, sys.argv[2], jobs=2)
"""


def test_a_killed_export_leaves_no_worker(store, tmp_path):
    """The workers end with the export's process, even when it is SIGKILLed."""
    import sys

    assert left_after_kill([sys.executable, "-c", PARENT, str(store), str(tmp_path / "o")]) == []


def test_help_states_the_one_process_threshold():
    from rmqstore_cli.pipeline.workers import ONE_PROCESS_BELOW

    r = run("export", "--help")
    assert f"less than {ONE_PROCESS_BELOW >> 20} MiB on disk" in " ".join(r.stdout.decode().split())


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3", "dledger"])
def test_the_real_brokers_stores_in_parts(version, tmp_path, monkeypatch):
    """The real brokers' stores, cut in parts of a few KiB (a DLedger log goes whole): the
    rows and unreadable ranges of one process."""
    from rmqstore_cli.pipeline import export_jobs, local, rebuild_parts
    from rmqstore_cli.pipeline.stores import StoreSpec, file_tasks
    from tests.helpers import extract_sample, fixture_dir

    d = extract_sample(version, tmp_path) if version == "dledger" else fixture_dir(version)
    tasks = file_tasks([StoreSpec(str(d / "store"), "s1", str(d / "broker.conf"))], body=True)
    want = local.export(tasks, tmp_path / "one")
    monkeypatch.setattr(rebuild_parts, "MIN_PART_BYTES", 2048)
    monkeypatch.setattr(rebuild_parts, "MAX_PART_BYTES", 8192)
    monkeypatch.setattr(export_jobs, "PARTS_PER_JOB", 32)
    cut = len(export_jobs.split(tasks, 64, 1)) > 2 * len(tasks)
    assert cut is (version != "dledger")
    assert local.export(tasks, tmp_path / "n", jobs=2) == want
    assert parquet_rows(tmp_path / "n") == parquet_rows(tmp_path / "one") and want["rows"] > 10
