"""dump-commitlog --jobs N (pipeline/dump_jobs.py): the walk's parts rendered on forked
workers and written in log order are the bytes of one process, stdout and stderr, with the
same exit code, on real-broker samples and on damaged generated stores, in every format;
a worker's error and a reader that goes away end it as one process ends."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from rmqstore_cli.errors import StoreError
from rmqstore_cli.pipeline import dump_jobs, rebuild_parts, workers
from rmqstore_cli.store.answers import log_range
from tests.helpers import cli, generate, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the workers are forked")

FORMATS = ["jsonl", "json", "table"]


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of 4 KiB: every small file cut at several records (the 1 MiB default would
    leave a test store's files whole)."""
    monkeypatch.setattr(dump_jobs, "PART_BYTES", 4096)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """Eight 64 KiB commit-log files: a bad magic code in the middle of the second, a body
    flipped in the fourth (--check-crc stops there), the sixth missing (a gap), the last
    cut short (--allow-odd-size)."""
    store = generate(tmp_path_factory.mktemp("dumpjobs") / "store", messages=900)
    logs = sorted((store / "commitlog").iterdir())
    assert len(logs) >= 7
    offsets = [json.loads(x)["physical_offset"] for x in cli(*_dump(store, "jsonl", "1")).stdout.splitlines()]
    _poke(logs[1], offsets, 30000, 4, b"\xde\xad\xbe\xef")
    _poke(logs[3], offsets, 20000, 200, b"\xff")
    logs[5].unlink()
    with open(logs[-1], "r+b") as f:
        f.truncate(40000)
    return store


def _poke(log, offsets: list[int], at: int, into: int, data: bytes) -> None:
    """``data`` written ``into`` bytes into the first record at or past ``at`` bytes into ``log``."""
    start = int(log.name)
    pos = min(o for o in offsets if o >= start + at) - start + into
    raw = bytearray(log.read_bytes())
    raw[pos : pos + len(data)] = data
    log.write_bytes(bytes(raw))


def _dump(store, fmt: str, jobs: str, *extra) -> list[str]:
    return ["dump-commitlog", "--store", store, "--format", fmt, "--tz", "UTC", "--jobs", jobs, *extra]


def _same(args_one: list, args_many: list) -> None:
    one, many = cli(*args_one), cli(*args_many)
    assert (one.exit_code, one.stdout, one.stderr) == (many.exit_code, many.stdout, many.stderr)


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_samples_print_the_bytes_of_one_process(fixture, fmt, small_parts):
    store, conf, _ = fixture
    one = cli(*_dump(store, fmt, "1", "--broker-conf", conf))
    assert one.exit_code == 0 and one.stdout
    for jobs in ("2", "3"):
        many = cli(*_dump(store, fmt, jobs, "--broker-conf", conf))
        assert (many.exit_code, many.stdout, many.stderr) == (0, one.stdout, one.stderr)


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--check-crc"],
        ["--show-blank"],
        ["--body", "base64", "--no-properties"],
        ["--topic", "OrderTopic"],
        ["--topic", "NoSuchTopic"],
    ],
)
@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_damaged_store_prints_the_bytes_of_one_process(damaged, fmt, extra, small_parts):
    one = cli(*_dump(damaged, fmt, "1", "--allow-odd-size", *extra))
    assert one.stderr.count("the rest of that file was skipped") >= 2  # the damage is met
    for jobs in ("2", "3"):
        _same(
            _dump(damaged, fmt, "1", "--allow-odd-size", *extra), _dump(damaged, fmt, jobs, "--allow-odd-size", *extra)
        )


def test_a_range_inside_files_prints_the_bytes_of_one_process(damaged, small_parts):
    offsets = [
        json.loads(x)["physical_offset"]
        for x in cli(*_dump(damaged, "jsonl", "1", "--allow-odd-size")).stdout.splitlines()
    ]
    for a, b in ((offsets[10], offsets[-10]), (offsets[len(offsets) // 3], offsets[len(offsets) // 3 + 5])):
        rng = ["--allow-odd-size", "--from-offset", str(a), "--to-offset", str(b), "--show-blank"]
        _same(_dump(damaged, "jsonl", "1", *rng), _dump(damaged, "jsonl", "2", *rng))


def test_without_the_damage_the_output_is_every_record(small_store_master, small_parts):
    one = cli(*_dump(small_store_master, "json", "1"))
    many = cli(*_dump(small_store_master, "json", "2"))
    assert many.stdout == one.stdout and len(json.loads(many.stdout)) >= 3000  # sends, and their commits


def test_a_cut_the_walk_runs_past_has_its_file_walked_again(damaged, small_parts, monkeypatch):
    """Cuts one byte past a record start: each part's walk runs past its cut, the rest of its
    file is walked again from where it went on, the part from the bad cut dropped."""
    real = rebuild_parts.record_cuts
    monkeypatch.setattr(rebuild_parts, "record_cuts", lambda *a: [c + 1 for c in real(*a)])
    for fmt in ("jsonl", "json"):
        _same(_dump(damaged, fmt, "1", "--allow-odd-size"), _dump(damaged, fmt, "2", "--allow-odd-size"))


def test_a_workers_error_comes_after_the_output_before_it(small_store_master, small_parts, monkeypatch):
    """The error of one part (the third) is the command's, after every record before it."""
    files, parts = dump_jobs.plan_parts(_commitlog(small_store_master), log_range.Range(None, None))
    failing = files[parts[2][0]].file_from_offset + parts[2][1]
    real = log_range.walk

    def walk(cl, rng, flt, limit, crc, blank, blocks, part=None):
        if part is not None and part[0][part[1]].file_from_offset + part[2] == failing:
            raise StoreError("the record is unreadable", path=part[0][part[1]].path, offset=part[2])
        return real(cl, rng, flt, limit, crc, blank, blocks, part)

    monkeypatch.setattr(log_range, "walk", walk)
    every = cli(*_dump(small_store_master, "jsonl", "1")).stdout.splitlines()
    r = cli(*_dump(small_store_master, "jsonl", "2"))
    assert r.exit_code == 3
    assert r.stderr.count("\n") == 1 and "the record is unreadable" in r.stderr
    assert r.stdout.splitlines() == [x for x in every if json.loads(x)["physical_offset"] < failing]


def _config(store):
    from rmqstore_cli.store.layout.config import StoreConfig

    return StoreConfig.load(store, None, mapped_file_size_commit_log=65536)


def _commitlog(store):
    from rmqstore_cli.store.commitlog import CommitLog

    return CommitLog(_config(store))


def test_a_closed_pipe_ends_the_workers_and_the_command_as_one_process(small_store_master):
    """``| head -1``: the exit code and stderr of one process, no traceback, no worker left."""
    got = []
    for jobs in ("1", "2"):
        argv = [sys.executable, "-m", "rmqstore_cli", *map(str, _dump(small_store_master, "jsonl", jobs))]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout.readline().startswith(b"{")
        p.stdout.close()
        err = p.stderr.read()
        got.append((p.wait(timeout=60), err))
        assert not _children(p.pid)
    assert got[0] == got[1] and b"Traceback" not in got[1][1]


def _children(pid: int) -> list[str]:
    """Processes whose parent is ``pid`` (none once it was reaped)."""
    return [d for d in os.listdir("/proc") if d.isdigit() and _parent(d) == pid]


def _parent(d: str) -> int | None:
    try:
        with open(f"/proc/{d}/stat") as f:
            return int(f.read().split(") ", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


@pytest.mark.parametrize("cuts", [[1], [3, 7], [5, 6, 12], list(range(1, 20))])
def test_json_is_the_workers_lines_joined_wherever_their_frames_split(cuts, monkeypatch):
    lines = b"".join(b'{"a":%d}\n' % i for i in range(3))
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    j = dump_jobs.JsonJoin()
    for a, b in zip([0, *cuts], [*cuts, None], strict=True):
        j.write(lines[a:b])
    j.close()
    assert out.getvalue() == b'[\n{"a":0},\n{"a":1},\n{"a":2}\n]\n'


def test_json_of_nothing_is_an_empty_array(monkeypatch):
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    dump_jobs.JsonJoin().close()
    assert out.getvalue() == b"[]\n"


def test_the_default_is_one_process_below_verifys_size(small_store_master, monkeypatch):
    from rmqstore_cli.store.answers.sampling import Narrowing
    from rmqstore_cli.store.message_store import MessageStore

    ms = MessageStore.open(_config(small_store_master))
    plain = Narrowing(None, None)
    assert dump_jobs.jobs_for(ms, "jsonl", None, plain, 0) == 1
    monkeypatch.setattr(workers, "ONE_PROCESS_BELOW", 4096)
    monkeypatch.setattr(workers, "default_jobs", lambda: 7)
    assert dump_jobs.jobs_for(ms, "jsonl", None, plain, 0) == 7
    assert dump_jobs.jobs_for(ms, "json", None, plain, 3) == 3
    for fmt, limit, narrowing in (("table", None, plain), ("jsonl", 5, plain), ("jsonl", None, Narrowing(0.5, None))):
        assert dump_jobs.jobs_for(ms, fmt, limit, narrowing, 0) == 1


def test_help_says_which_modes_run_on_one_process():
    text = " ".join(cli("dump-commitlog", "--help").stdout.split())
    assert "less than 64 MiB on disk" in text and "One process for a table, --limit" in text


def test_a_real_stdout_takes_the_workers_bytes_spliced(damaged):
    """A process's own stdout (a pipe here) gets the workers' bytes moved in the kernel
    (``Lines.splice``): the same bytes, stderr and exit code as one process."""
    one = run(*_dump(damaged, "jsonl", "1", "--allow-odd-size"))
    many = run(*_dump(damaged, "jsonl", "2", "--allow-odd-size"))
    assert one.returncode == 0 and one.stdout.count(b"\n") > 500
    assert (many.returncode, many.stdout, many.stderr) == (0, one.stdout, one.stderr)
