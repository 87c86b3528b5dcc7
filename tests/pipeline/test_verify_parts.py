"""verify's scan split inside commit-log files (pipeline/verify_tasks.py ``_spans``): on
several processes a file larger than its share is scanned as parts that start where the
whole scan's batches start (``CommitLogScan#batch_starts``), joined like files. The answer
is the whole-store Verifier's, byte for byte, whatever the split: stores of one file and of
many, DLedger, damage the walk of sizes sees (bad magic, a cut) and damage only the checks
see (a part that does not join up: its file is scanned again whole). Batches are shrunk so
that small stores have many of them, and the parts' minimum size is lifted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import cli, generate

MAGIC = bytes.fromhex("DAA320A7")
#: BODYLENGTH's place in a record with IPv4 hosts (the generator's): TOTALSIZE .. PREPAREDTRANSACTIONOFFSET.
BODY_LENGTH_AT = 84


@pytest.fixture
def many_parts(monkeypatch):
    """Small batches (a few KiB) and parts of any size, many per process."""
    from rmqstore_cli.pipeline import verify_tasks
    from rmqstore_cli.store.verify import limits

    monkeypatch.setattr(limits, "BATCH", 40)
    monkeypatch.setattr(limits, "BATCH_BYTES", 8192)
    monkeypatch.setattr(verify_tasks, "MIN_PART_BYTES", 0)
    monkeypatch.setattr(verify_tasks, "PARTS_PER_JOB", 40)


def _record_at_or_after(data: bytes, at: int) -> int:
    return data.index(MAGIC, at) - 4


def _write(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _one_file(root: Path, *extra: str) -> Path:
    return generate(root, "--commitlog-file-size", str(1 << 22), *extra, messages=1500, seed=3, small=False)


def _bad_fields(store: Path) -> Path:
    """A record in the middle of the first file whose body length runs past its end: the walk
    of sizes passes it, the checks reject it and the scan resynchronises on the next record,
    so its later batches start elsewhere than the walk's."""
    f = sorted((store / "commitlog").iterdir())[0]
    data = f.read_bytes()
    at = _record_at_or_after(data, len(data.rstrip(b"\0")) // 3)
    _write(f, at + BODY_LENGTH_AT, (1 << 20).to_bytes(4, "big"))
    return store


def _magic_and_cut(store: Path) -> Path:
    """Bad magic in the middle of a file (the walk stops there) and the last file cut inside a record."""
    files = sorted((store / "commitlog").iterdir())
    data = files[0].read_bytes()
    _write(files[0], _record_at_or_after(data, len(data.rstrip(b"\0")) // 2) + 4, b"\x00\x00\x00\x07")
    last = files[-1].read_bytes()
    os.truncate(files[-1], _record_at_or_after(last, len(last.rstrip(b"\0")) // 2) + 50)
    return store


STORES = {
    "one file": lambda root: _one_file(root),
    "one file, 5.x": lambda root: _one_file(root, "--broker-version", "5", "--timer-ratio", "0.1"),
    "one file, bad fields": lambda root: _bad_fields(_one_file(root)),
    "one file, magic and cut": lambda root: _magic_and_cut(_one_file(root)),
    "many files": lambda root: generate(root, "--delay-ratio", "0.1", messages=900, seed=4),
    "many files, bad fields": lambda root: _bad_fields(generate(root, messages=900, seed=4)),
    "many files, magic and cut": lambda root: _magic_and_cut(generate(root, messages=900, seed=4)),
    "dledger": lambda root: generate(root, "--dledger", messages=900, seed=4),
    "lmq": lambda root: generate(root, "--lmq-ratio", "0.2", "--lmq-queues", "3", messages=900, seed=4),
}


@pytest.fixture(scope="module", params=list(STORES))
def store(request, tmp_path_factory) -> Path:
    return STORES[request.param](tmp_path_factory.mktemp("parts") / "store")


def _reference(path: Path, opts) -> dict:
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_job import load
    from rmqstore_cli.store.verify.verifier import Verifier

    v = Verifier(load(StoreSpec(str(path), str(path))), opts)
    return {"findings": [f.as_dict() for f in v.run()], "summary": v.summary}


def _parts(path: Path, opts, jobs: int) -> tuple[dict, list[int]]:
    """The engine's answer on ``jobs`` processes, and the bytes of each scan task."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_job import verify_one

    scanned: list[int] = []
    return verify_one(StoreSpec(str(path), str(path)), opts, scanned.append, jobs), scanned


def _log_files(path: Path) -> int:
    """The commit-log files (a DLedger store's are its data files)."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_job import load

    return sum(1 for d in load(StoreSpec(str(path), str(path))).commitlog_dirs if d.is_dir() for _ in d.iterdir())


def _same(got: dict, want: dict) -> None:
    """The engine's findings and summary are the single pass's (the engine adds the start-up verdict's)."""
    assert {k: v for k, v in got["summary"].items() if k != "broker_start"} == want["summary"]
    assert got["findings"][: len(want["findings"])] == want["findings"]


@pytest.mark.parametrize("cap", [None, 2])
def test_parts_of_files_give_the_verifiers_answer(store, cap, many_parts):
    from rmqstore_cli.store.verify import VerifyOptions

    opts = VerifyOptions(crc=True, deep=cap is None, max_findings=cap)
    want = _reference(store, opts)
    got, scanned = _parts(store, opts, 2)
    assert len(scanned) > _log_files(store)  # files were split
    _same(got, want)
    one, _ = _parts(store, opts, 1)
    assert (one["summary"], one["findings"]) == (got["summary"], got["findings"])


def test_a_part_that_does_not_join_up_has_its_file_scanned_whole(tmp_path, many_parts, monkeypatch):
    """Damage only the checks see moves the scan's batches: the parts after it do not start
    where the scan arrives, the file is scanned again whole, and the answer is the Verifier's."""
    from rmqstore_cli.pipeline.verify_tasks import Forked
    from rmqstore_cli.store.verify import VerifyOptions

    path = _bad_fields(_one_file(tmp_path / "s"))
    again: list = []
    rescan = Forked.rescan

    def spy(self, handle, fn, items, torn):
        again.append(sorted(torn))
        return rescan(self, handle, fn, items, torn)

    monkeypatch.setattr(Forked, "rescan", spy)
    opts = VerifyOptions(crc=True, max_findings=None)
    got, _ = _parts(path, opts, 2)
    assert again == [[(0, 0)]]
    assert "commitlog.field-bounds" in got["summary"]["findings"]
    _same(got, _reference(path, opts))


def test_the_cli_prints_the_same_bytes_on_one_process_and_on_parts(store, many_parts):
    args = ["verify", "--store", store, "--format", "jsonl", "--limit", "3"]
    one = cli(*args, "--jobs", "1")
    two = cli(*args, "--jobs", "2")
    assert one.exit_code in (0, 1), one.stderr
    assert (two.exit_code, two.stdout, two.stderr) == (one.exit_code, one.stdout, one.stderr)


def test_batch_starts_are_where_the_whole_scan_starts_its_batches(tmp_path, many_parts):
    """The walk of sizes alone finds every batch the whole scan checks, where it checks it;
    the spans cut from them tile the file, each starting with the bytes walked before it."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_job import load
    from rmqstore_cli.pipeline.verify_scan import cut_spans
    from rmqstore_cli.store.files.arrays import data_end_guess, file_array
    from rmqstore_cli.store.verify import Verifier

    path = _one_file(tmp_path / "s")
    cfg = load(StoreSpec(str(path), str(path)))
    v = Verifier(cfg)
    v.index_files = []
    v.open_commitlog()
    starts, end = v.batch_starts(v.mfq.files[0])
    upto = starts[len(starts) // 2].start - 1
    some, _ = v.batch_starts(v.mfq.files[0], upto)  # walked only to the first start at or past upto
    assert some == starts[: len(starts) // 2 + 1]
    assert end <= data_end_guess(file_array(v.mfq.files[0].buffer())) < end + 4096  # the page the data ends in
    v.mfq.close()
    whole = Verifier(cfg)
    checked: list[int] = []
    check_batch = whole.check_batch
    whole.check_batch = lambda buf, arr, P, *rest: (checked.append(int(P[0])), check_batch(buf, arr, P, *rest))[1]
    list(whole.run())
    assert len(starts) > 10 and checked == [s.start for s in starts][: len(checked)] and len(checked) >= len(starts) - 1
    spans = cut_spans(starts, end, (1,) * 5)
    assert len(spans) == 5 and spans[0].start == 0 and spans[-1].stop is None
    assert [s.stop for s in spans[:-1]] == [s.start for s in spans[1:]]
    assert {s.start for s in spans} <= {s.start for s in starts}
    assert all(s.walked[1] == s.start for s in spans)  # the bytes walked before a start: its position


def _ends(jobs: int, side: list[float], parts: list[float], walk: float = 0.0) -> list[float]:
    """When each process ends if every task costs its size and each goes, in order, to the
    process free first (the pool's hand-out: the side tasks first, the parts once the walk
    to the cuts is done)."""
    loads = [0.0] * jobs
    for x in side:
        loads[loads.index(min(loads))] += x
    loads = [max(x, walk) for x in loads]
    for x in parts:
        loads[loads.index(min(loads))] += x
    return loads


@pytest.mark.parametrize(
    ("jobs", "n", "side"), [(2, 4, [20.0]), (2, 3, [35.0]), (3, 6, [20.0, 30.0]), (4, 8, [5.0, 30.0, 1.0])]
)
def test_parts_beside_the_index_checks_end_the_processes_together(jobs, n, side):
    from rmqstore_cli.pipeline.verify_scan import part_shares

    parts = part_shares(jobs, n, side, 100.0)
    assert len(parts) == n and sum(parts) == pytest.approx(100.0)
    ends = _ends(jobs, side, parts)
    assert max(ends) - min(ends) == pytest.approx(0.0, abs=1e-9)
    assert max(ends) < max(_ends(jobs, side, [100.0 / n] * n))  # equal parts would end later


@pytest.mark.parametrize(("jobs", "n", "side", "walk"), [(2, 3, [35.0], 7.0), (2, 3, [5.0], 7.0), (3, 5, [20.0], 9.0)])
def test_parts_wait_for_the_walk_to_the_cuts_and_still_end_together(jobs, n, side, walk):
    from rmqstore_cli.pipeline.verify_scan import part_shares

    parts = part_shares(jobs, n, side, 100.0, walk)
    ends = _ends(jobs, side, parts, walk)
    assert sum(parts) == pytest.approx(100.0) and max(ends) - min(ends) == pytest.approx(0.0, abs=1e-9)
    assert max(ends) < max(_ends(jobs, side, part_shares(jobs, n, side, 100.0), walk))  # unaware of it: later


def test_parts_with_no_index_are_equal_and_an_index_check_heavier_than_a_share_gets_none():
    from rmqstore_cli.pipeline.verify_scan import part_shares

    assert part_shares(2, 4, [], 100.0) == [25.0] * 4
    assert part_shares(2, 4, [300.0], 100.0) == [25.0] * 4  # all on the process without it
    assert _ends(2, [300.0], part_shares(2, 4, [300.0], 100.0)) == [300.0, 100.0]


def test_weighted_spans_cut_at_the_batch_start_nearest_each_share():
    from rmqstore_cli.pipeline.verify_scan import cut_spans
    from rmqstore_cli.store.verify import Span

    starts = [Span(k * 100, (k, k * 100)) for k in range(10)]
    spans = cut_spans(starts, 1000, (3.0, 1.0, 1.0))  # cuts wanted at 600 and 800
    assert [(s.start, s.stop) for s in spans] == [(0, 600), (600, 800), (800, None)]
    assert [(s.start, s.stop) for s in cut_spans(starts, 1000, (1,) * 2)] == [(0, 500), (500, None)]


def test_one_file_is_cut_smaller_where_a_process_also_checks_the_index(tmp_path, many_parts, monkeypatch):
    """A store of one commit-log file on two processes: three parts, not four (the index file's
    check, the first task, is its process's other task); that process's one part (the second)
    is less of the log than the other process's two, and the answer is the Verifier's."""
    from rmqstore_cli.pipeline import verify_tasks
    from rmqstore_cli.store.verify import VerifyOptions

    monkeypatch.setattr(verify_tasks, "PARTS_PER_JOB", 2)
    path = _one_file(tmp_path / "s")
    cut: list = []
    spans_task = verify_tasks.spans_task
    monkeypatch.setattr(verify_tasks, "spans_task", lambda *a: cut.append(spans_task(*a)) or cut[-1])
    opts = VerifyOptions(crc=True, max_findings=None)
    got, scanned = _parts(path, opts, 2)
    [spans] = cut
    end = len((path / "commitlog" / "00000000000000000000").read_bytes().rstrip(b"\0"))
    size = [b - a for a, b in zip([s.start for s in spans], [*(s.start for s in spans[1:]), end], strict=True)]
    assert len(spans) == len(scanned) == 3 and 0 < size[1] < size[0] + size[2]
    _same(got, _reference(path, opts))
