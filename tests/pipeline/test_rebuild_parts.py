"""rebuild-index's step 1 on parts of commit-log files (pipeline/rebuild_parts.py): on
several processes a file larger than its share is dispatched in parts that start at records
its walk meets; the files written and the report are the whole-store build's, byte for byte:
one file and many, DLedger, LMQ, BatchCQ, a damaged record in the recovery region (the log
ends inside a part) and before it (the reput skips the rest of the file from inside a part),
expired first files. Parts of any size, many per process."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

from tests.helpers import generate
from tests.helpers.pipeline import smash

MIXED = ("--delay-ratio", "0.1", "--transaction-ratio", "0.1", "--retry-ratio", "0.05")


def _one_file(root: Path, *extra: str) -> Path:
    return generate(root, "--commitlog-file-size", str(1 << 22), *MIXED, *extra, messages=1500, seed=3, small=False)


def _files(store: Path) -> list[Path]:
    d = store / "dledger-n0" / "data"
    return sorted((d if d.is_dir() else store / "commitlog").iterdir())


def _smashed(store: Path, n: int, abort: bool) -> Path:
    """A broken record in the middle of file ``n`` (with an abort file: abnormal recovery)."""
    f = _files(store)[n]
    smash(f, len(f.read_bytes().rstrip(b"\0")) // 2)
    if abort:
        (store / "abort").write_bytes(b"")
    return store


def _expired(store: Path) -> Path:
    for f in _files(store)[:2]:
        f.unlink()
    return store


STORES = {
    "one file": lambda root: _one_file(root),
    "one file, the log ends inside it": lambda root: _smashed(_one_file(root), 0, False),
    "many files": lambda root: generate(root, *MIXED, messages=900, seed=4),
    "many files, the reput skips a file's rest": lambda root: _smashed(
        generate(root, *MIXED, messages=900, seed=4), 1, True
    ),
    "many files, expired": lambda root: _expired(generate(root, *MIXED, messages=900, seed=4)),
    "dledger": lambda root: generate(root, "--dledger", messages=900, seed=4),
    "lmq": lambda root: generate(root, "--lmq-ratio", "0.2", "--lmq-queues", "3", messages=900, seed=4),
    "bcq": lambda root: generate(root, "--broker-version", "5", "--bcq-topics", "1", messages=900, seed=4),
}


@pytest.fixture(scope="module", params=list(STORES))
def store(request, tmp_path_factory) -> Path:
    return STORES[request.param](tmp_path_factory.mktemp("rebuild-parts") / "store")


@pytest.fixture
def many_parts(monkeypatch) -> list:
    """Parts of any size, 40 a process; the cuts each run made."""
    from rmqstore_cli.pipeline import local, rebuild_parts, rebuild_tasks

    monkeypatch.setattr(rebuild_parts, "MIN_PART_BYTES", 0)
    monkeypatch.setattr(local, "PARTS_PER_JOB", 40)
    made: list = []

    def cut(*args):
        made.append(rebuild_parts.cut_files(*args))
        return made[-1]

    monkeypatch.setattr(rebuild_tasks, "cut_files", cut)
    return made


@pytest.mark.parametrize("dry", [False, True])
def test_parts_of_files_write_the_whole_store_builds_bytes(store, dry, many_parts, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    want = _built(build_set, store, tmp_path / "ref", dry)
    got = _built(functools.partial(rebuild_build, jobs=2), store, tmp_path / "engine", dry)
    assert many_parts and many_parts[-1].split()  # some file was cut
    assert got[0] == want[0]  # the report, field by field
    assert got[1] == want[1]  # every file written, by digest
    assert want[0]["messages"] > 0


def _built(build, store: Path, dest: Path, dry: bool) -> tuple[dict, dict]:
    """``build``'s report of ``store`` into ``dest`` (timing left out) and what it wrote."""
    import datetime as dt

    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.pipeline import digest

    cfg = StoreConfig.load(store, None)
    cfg.infer_sizes()
    d = vars(build(cfg, dest, RebuildOptions(tz=dt.timezone.utc, dry_run=dry))).copy()
    d.pop("seconds")
    return d, digest(dest) if dest.exists() else {}


def test_the_progress_counts_files_not_parts(tmp_path, many_parts):
    """The progress bar hears a file once all its parts came back: files and bytes add up
    to the log's."""
    import datetime as dt

    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions

    path = _one_file(tmp_path / "s")
    seen: list[tuple] = []
    cfg = StoreConfig.load(path, None)
    cfg.infer_sizes()
    rep = rebuild_build(cfg, tmp_path / "out", RebuildOptions(tz=dt.timezone.utc), lambda *a: seen.append(a), 2)
    assert many_parts[-1].split() and len(seen) == len(many_parts[-1].spans) > 1
    assert [s[0] for s in seen][-1] == 1 and {s[0] for s in seen} == {0, 1}
    assert seen[-1][1] == seen[-1][2] == sum(f.stat().st_size for f in _files(path))
    assert seen[-1][3] == rep.messages > 0
    assert rep.files == 1


def test_cuts_are_records_the_walk_meets(tmp_path):
    """Every cut is where a record starts (its PHYSICALOFFSET is its position), in order,
    the parts' bytes adding up to the file's."""
    from rmqstore_cli.pipeline.rebuild_parts import record_cuts
    from rmqstore_cli.store.layout.config import StoreConfig

    path = _one_file(tmp_path / "s")
    shutil.copy(_files(path)[0], tmp_path / "copy")
    cfg = StoreConfig.load(path, None)
    cfg.infer_sizes()
    cuts = record_cuts(cfg, 0, 7)
    data = (tmp_path / "copy").read_bytes()
    assert len(cuts) == 6 and cuts == sorted(cuts) and cuts[0] > 0
    for c in cuts:
        assert data[c + 4 : c + 8] in (bytes.fromhex("DAA320A7"), bytes.fromhex("DAA320AB"))
        assert int.from_bytes(data[c + 28 : c + 36], "big") == c  # PHYSICALOFFSET: the record's start


def test_cuts_do_not_depend_on_the_walk_s_chunks(tmp_path, monkeypatch):
    """The cuts taken as the walk goes (issue 35: no list of every record's start) are the
    first record at or past each target whatever the chunks (one chunk: a search over
    every start), several targets in a chunk or none."""
    from rmqstore_cli.pipeline import rebuild_parts
    from rmqstore_cli.store.layout.config import StoreConfig

    cfg = StoreConfig.load(_one_file(tmp_path / "s"), None)
    cfg.infer_sizes()
    for n in (2, 7, 40, 400):
        want = rebuild_parts.record_cuts(cfg, 0, n)
        for chunk in (1, 3, 64):
            monkeypatch.setattr(rebuild_parts, "WALK_CHUNK", chunk)
            assert rebuild_parts.record_cuts(cfg, 0, n) == want, (n, chunk)
        monkeypatch.undo()
        assert len(want) == len(set(want)) and (n < 40 or len(want) > 30)


def test_one_job_cuts_files_larger_than_a_part(tmp_path, monkeypatch):
    """With one job too, a file larger than ``MAX_PART_BYTES`` is dispatched in parts (what
    a step-1 task holds follows a part, not a file: issue 35), the index file linked a
    part at a time with the pages behind released; the files and the report are the
    whole-store build's."""
    from rmqstore_cli.pipeline import local, rebuild_parts
    from rmqstore_cli.store.queues.index import IndexFile
    from tests.helpers.rebuild_reference import build_set

    store = _one_file(tmp_path / "s")
    monkeypatch.setattr(rebuild_parts, "MIN_PART_BYTES", 0)
    monkeypatch.setattr(rebuild_parts, "MAX_PART_BYTES", 100_000)  # parts of the file's data
    assert rebuild_parts.cut_any([("0", 0, 1 << 22)], 1)
    released: list = []
    real = IndexFile.release_pages
    monkeypatch.setattr(IndexFile, "release_pages", lambda f, upto=None: released.append(upto) or real(f, upto))
    want = _built(build_set, store, tmp_path / "ref", False)
    released.clear()
    got = _built(functools.partial(local.rebuild_build, jobs=1), store, tmp_path / "engine", False)
    assert got == want and want[0]["messages"] > 0
    ups = [u for u in released if u is not None]
    assert len(ups) >= 3 and ups == sorted(ups) and ups[0] > 0  # a block at a time, in order


def test_the_default_is_one_process_for_a_small_commit_log(tmp_path, monkeypatch):
    """jobs 0 follows verify's rule (``workers.jobs_for``): one process, no parts, for commit
    logs of less than ``ONE_PROCESS_BELOW`` bytes on disk; every core (here 7) above; the
    files and the report the same either way."""
    from rmqstore_cli.pipeline import local, workers

    store = _one_file(tmp_path / "s")
    monkeypatch.setattr(workers, "default_jobs", lambda: 7)
    ran: list = []
    real = local.fork_map
    monkeypatch.setattr(local, "fork_map", lambda fn, items, n, each=None: ran.append(n) or real(fn, items, n, each))
    one = _built(functools.partial(local.rebuild_build, jobs=0), store, tmp_path / "one", False)
    assert ran and set(ran) == {1}
    ran.clear()
    monkeypatch.setattr(workers, "ONE_PROCESS_BELOW", 4096)
    seven = _built(functools.partial(local.rebuild_build, jobs=0), store, tmp_path / "seven", False)
    assert ran and set(ran) == {7}
    assert one == seven and one[0]["messages"] > 0
