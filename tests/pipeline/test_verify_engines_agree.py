"""One verify engine: the plan, tasks and join (pipeline/verify_tasks.py) give the whole-store
Verifier's answer, in order, on every store of a matrix: generated 4.9 and 5.x stores
(timer, batch consume queue, compaction, LMQ, DLedger), damaged ones, and every real-broker
fixture. The Verifier's single pass (``Verifier.run``) is the reference; the engine runs in
this process (``Forked(1)``) and on two processes, and the CLI prints the same bytes
whatever ``--jobs``."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import TARBALLS, cli, extract_sample, fixture_dir, generate

MAGIC = bytes.fromhex("DAA320A7")


def _record_after(path: Path, at: int) -> int:
    return path.read_bytes().index(MAGIC, at) - 4


def _write(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _damaged(store: Path) -> Path:
    """Bad magic in a middle file, another cut inside a record, a lost queue directory, a broken index
    slot and an abort file: resync, unreadable ranges, missing units, recovery findings."""
    files = sorted((store / "commitlog").iterdir())
    _write(files[1], _record_after(files[1], 10000) + 4, b"\x00\x00\x00\x07")
    os.truncate(files[-2], _record_after(files[-2], 20000) + 50)
    shutil.rmtree(sorted((store / "consumequeue").iterdir())[0] / "0")
    _write(sorted((store / "index").iterdir())[0], 40 + 4 * 3, struct.pack(">i", 100000))
    (store / "abort").write_bytes(b"")
    return store


def _generated(root: Path, kind: str) -> tuple[Path, str | None]:
    mixed = ("--delay-ratio", "0.1", "--transaction-ratio", "0.1", "--retry-ratio", "0.05")
    extra = {
        "plain49": mixed,
        "v5": (*mixed, "--broker-version", "5", "--timer-ratio", "0.1", "--overdue-timer-ratio", "0.05"),
        "bcq": ("--broker-version", "5", "--bcq-topics", "1"),
        "compaction": ("--broker-version", "5", "--compaction-topics", "1", "--compaction-run"),
        "lmq": ("--lmq-ratio", "0.2", "--lmq-queues", "3"),
        "dledger": ("--dledger",),
        "damaged": mixed,
    }[kind]
    store = generate(root / kind, *extra, messages=900, seed=4)
    return (_damaged(store) if kind == "damaged" else store), None


def _fixture(root: Path, name: str) -> tuple[Path, str | None]:
    d = fixture_dir(name) if name in ("4.9.7", "5.3.3") else extract_sample(name, root / name)
    if name in ("4.9.7", "5.3.3"):  # read-only checkout: verify reads only, but copy to be safe
        d = Path(shutil.copytree(d, root / name))
    return d / "store", str(d / "broker.conf")


GENERATED = ["plain49", "v5", "bcq", "compaction", "lmq", "dledger", "damaged"]
FIXTURES = ["4.9.7", "5.3.3", *TARBALLS]


@pytest.fixture(scope="module", params=[("gen", k) for k in GENERATED] + [("fix", k) for k in FIXTURES])
def store(request, tmp_path_factory):
    source, name = request.param
    root = tmp_path_factory.mktemp(f"agree-{name}")
    return _generated(root, name) if source == "gen" else _fixture(root, name)


def _spec(store):
    from rmqstore_cli.pipeline.stores import StoreSpec

    path, conf = store
    return StoreSpec(str(path), str(path), conf)


def _reference(spec, opts) -> dict:
    """The Verifier's single pass over the whole store, and the start-up verdict from it."""
    from rmqstore_cli.pipeline.verify_job import load
    from rmqstore_cli.store.checks.startup import STARTUP_CHECKS, predict_start
    from rmqstore_cli.store.verify.verifier import Verifier

    cfg = load(spec)
    v = Verifier(cfg, opts)
    findings = [f.as_dict() for f in v.run()]
    summary = v.summary
    verdict, no_start = predict_start(
        cfg, opts.broker_version, [f for f in findings if f["check"] in STARTUP_CHECKS], summary
    )
    return {
        "findings": findings + [f.as_dict() for f in no_start],
        "summary": summary,
        "verdict": verdict,
        "ok": v.ok and not no_start,
    }


def _engine(spec, opts, jobs: int) -> dict:
    from rmqstore_cli.pipeline.verify_job import verify_many

    return verify_many([spec], opts, None, False, jobs)[0]


def _same(got: dict, want: dict) -> None:
    assert got["summary"] == want["summary"]
    assert got["findings"] == want["findings"]  # in the same order
    assert got["verdict"] == want["verdict"]
    assert got["ok"] == want["ok"]


@pytest.mark.parametrize("cap", [None, 2])
def test_the_task_engine_gives_the_verifiers_answer(store, cap):
    from rmqstore_cli.store.verify import VerifyOptions

    spec = _spec(store)
    opts = VerifyOptions(crc=True, deep=cap is None, max_findings=cap)
    want = _reference(spec, opts)
    _same(_engine(spec, opts, 1), want)
    _same(_engine(spec, opts, 2), want)


@pytest.mark.parametrize("fmt", ["json", "jsonl", "table"])
def test_the_cli_prints_the_same_bytes_whatever_jobs(store, fmt):
    path, conf = store
    args = ["verify", "--store", path, *(["--broker-conf", conf] if conf else []), "--format", fmt, "--limit", "3"]
    one = cli(*args, "--jobs", "1")
    two = cli(*args, "--jobs", "2")
    assert one.exit_code in (0, 1), one.stderr
    assert (two.exit_code, two.stdout, two.stderr) == (one.exit_code, one.stdout, one.stderr)
    assert "messages" in one.stdout


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_progress_callback_counts_every_commit_log_byte(tmp_path, jobs):
    """The progress bar's ``advance`` gets each commit-log file's bytes as its scan task
    returns, in this process or from the workers: they add up to the bar's total."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.pipeline.verify_job import commitlog_size, verify_one
    from rmqstore_cli.store.verify import VerifyOptions

    path = generate(tmp_path / "s", messages=600, seed=2)
    spec = StoreSpec(str(path), str(path))
    got: list[int] = []
    verify_one(spec, VerifyOptions(), got.append, jobs)
    assert len(got) == len(list((path / "commitlog").iterdir())) > 1
    assert sum(got) == commitlog_size(spec)


@pytest.mark.parametrize("cap", [None, 1])
def test_queues_whose_units_all_matched_say_their_tails_in_order(tmp_path, cap):
    """Bytes after the end of several queues whose every unit a message accounted for (their
    finish is the plan's facts, no queue opened) beside a queue with a unit pointing
    elsewhere (finished from its files): the Verifier's findings, in its order and caps."""
    from rmqstore_cli.pipeline.stores import StoreSpec
    from rmqstore_cli.store.verify import VerifyOptions

    path = generate(tmp_path / "tails", "--topics", "6", messages=300, seed=5)
    files = sorted(p for t in (path / "consumequeue").iterdir() for q in t.iterdir() for p in q.iterdir())
    for f in files[::2]:  # a stray byte after every other queue's end: cq.tail
        units = f.read_bytes()
        end = next(i for i in range(0, len(units), 20) if not any(units[i : i + 20]))
        _write(f, end + 25, b"\x07")
    off = int.from_bytes(files[1].read_bytes()[:8], "big")  # the first unit points 8 bytes further
    _write(files[1], 0, (off + 8).to_bytes(8, "big"))
    spec = StoreSpec(str(path), str(path))
    opts = VerifyOptions(crc=True, max_findings=cap)
    want = _reference(spec, opts)
    assert want["summary"]["findings"]["cq.tail"] == len(files[::2]) > 1
    _same(_engine(spec, opts, 1), want)
    _same(_engine(spec, opts, 2), want)
