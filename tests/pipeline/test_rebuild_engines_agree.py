"""One rebuild-index engine: the plan, tasks and join (pipeline/rebuild_tasks.py ``rebuild_staged``,
run by ``pipeline/local.rebuild_build``) write the whole-store build's files and report, byte for
byte, on every store of a matrix: generated stores (plain 4.9 with delay and transaction
messages, LMQ, BatchCQ, 5.x timer, DLedger, a damaged record before the recovery region with an
abort file, expired first files; each over several commit-log files) and every real-broker
fixture. The whole-store build (tests/helpers/rebuild_reference.py ``build_set``) is the
reference; the engine runs in this process (jobs 1) and on two forked processes, through the
library's call and through the command, whose stdout is the reference's byte for byte."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import TARBALLS, cli, extract_sample, fixture_dir, generate
from tests.helpers.pipeline import digest, rebuilt, smash

MIXED = ("--delay-ratio", "0.1", "--transaction-ratio", "0.1", "--retry-ratio", "0.05")
GENERATED = {
    "plain": MIXED,
    "lmq": ("--lmq-ratio", "0.2", "--lmq-queues", "3"),
    "bcq": ("--broker-version", "5", "--bcq-topics", "1"),
    "timer": ("--broker-version", "5", "--timer-ratio", "0.1", "--overdue-timer-ratio", "0.05", "--delay-ratio", "0.1"),
    "dledger": ("--dledger",),
    "damaged": MIXED,
    "expired": MIXED,
}
FIXTURES = ["4.9.7", "5.3.3", *TARBALLS]


def _generated(root: Path, kind: str) -> tuple[Path, str | None]:
    store = generate(root / kind, *GENERATED[kind], messages=900, seed=4)
    files = sorted((store / ("dledger-n0/data" if kind == "dledger" else "commitlog")).iterdir())
    assert len(files) > 3  # several commit-log files: tasks side by side, files before recovery
    if kind == "damaged":  # the reput skips the rest of a file; abnormal recovery
        smash(files[1], 15000)
        (store / "abort").write_bytes(b"")
    if kind == "expired":  # queues start past cq offset 0: pre-blank units
        for f in files[:2]:
            f.unlink()
    return store, None


def _fixture(root: Path, name: str) -> tuple[Path, str | None]:
    d = fixture_dir(name) if name in ("4.9.7", "5.3.3") else extract_sample(name, root / name)
    return d / "store", str(d / "broker.conf")  # only read: every build goes to an output


@pytest.fixture(scope="module", params=[("gen", k) for k in GENERATED] + [("fix", k) for k in FIXTURES])
def store(request, tmp_path_factory):
    source, name = request.param
    root = tmp_path_factory.mktemp(f"rebuild-agree-{name}")
    return _generated(root, name) if source == "gen" else _fixture(root, name)


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_task_engine_writes_the_whole_store_builds_bytes(store, jobs, tmp_path):
    import functools

    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    path, conf = store
    want = rebuilt(build_set, path, conf, tmp_path / "ref")
    got = rebuilt(functools.partial(rebuild_build, jobs=jobs), path, conf, tmp_path / "engine")
    assert got[0] == want[0]  # the report, field by field
    assert got[1] == want[1]  # every file written, by digest
    assert want[0]["messages"] > 0


def _reference_engine(monkeypatch) -> None:
    """The command's engine swapped for the whole-store build (what it ran before)."""
    from rmqstore_cli.pipeline import local
    from tests.helpers.rebuild_reference import build_set

    monkeypatch.setattr(
        local,
        "rebuild_build",
        lambda config, dest, opts, progress=None, jobs=1: build_set(config, dest, opts, progress),
    )


def _run(store, out: Path, fmt: str, *extra: str) -> tuple[str, dict]:
    """rebuild-index of ``store`` to ``out``: (stdout with its timing and ``out`` masked, the
    digests of every file written: consume queues, index, batch queues, checkpoint)."""
    path, conf = store
    r = cli(
        "rebuild-index", "--store", path, *(["--broker-conf", conf] if conf else []), "--output", out,
        "--tz", "UTC", "--format", fmt, *extra,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    stdout = re.sub(r'"(seconds|messages_per_second)": *[0-9.]+', r'"\1": 0', r.stdout.replace(str(out), "OUT"))
    if fmt == "table":  # the timing rows of the table
        stdout = "\n".join(ln for ln in stdout.splitlines() if not re.search(r"\b(seconds|messages_per_second)\b", ln))
    files = {k: v for k, v in digest(out).items() if not k.startswith("commitlog")}
    return stdout, files


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_the_command_prints_and_writes_the_same_bytes_whatever_jobs(store, fmt, tmp_path, monkeypatch):
    one = _run(store, tmp_path / "one", fmt, "--jobs", "1")
    two = _run(store, tmp_path / "two", fmt, "--jobs", "2")
    every = _run(store, tmp_path / "all", fmt)  # the default: every core
    with monkeypatch.context() as m:
        _reference_engine(m)
        want = _run(store, tmp_path / "ref", fmt)
    assert one == want
    assert two == want
    assert every == want
    assert "checkpoint" in want[1] and any(k.startswith(("consumequeue/", "batchconsumequeue/")) for k in want[1])


def test_in_place_with_two_jobs_is_the_whole_store_builds_swap(tmp_path, monkeypatch):
    """--in-place (the journal, the backup, the swap) around the engine on two processes: the
    store's new consumequeue/, index/ and checkpoint are the whole-store build's."""
    src = generate(tmp_path / "src", *MIXED, messages=900, seed=5)
    a, b = Path(shutil.copytree(src, tmp_path / "a")), Path(shutil.copytree(src, tmp_path / "b"))
    with monkeypatch.context() as m:
        _reference_engine(m)
        ref = cli("rebuild-index", "--store", a, "--in-place", "--no-backup", "--tz", "UTC", "-f", "json")
    got = cli("rebuild-index", "--store", b, "--in-place", "--no-backup", "--tz", "UTC", "-f", "json", "-j", "2")
    assert ref.exit_code == 0 and got.exit_code == 0, got.stderr
    for part in ("consumequeue", "index"):
        assert digest(b / part) == digest(a / part) and digest(a / part)
    assert (b / "checkpoint").read_bytes() == (a / "checkpoint").read_bytes()
    assert not [p for p in os.listdir(b) if p.startswith(".rebuild")]


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_progress_callback_counts_every_commit_log_byte(tmp_path, jobs):
    """The progress bar's ``dispatch`` hears each commit-log file as its task returns, in this
    process or from the workers: files and bytes add up to the log's, messages to the report's."""
    import datetime as dt

    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions

    path = generate(tmp_path / "s", messages=600, seed=2)
    seen: list[tuple] = []
    cfg = StoreConfig.load(path, None)
    cfg.infer_sizes()
    rep = rebuild_build(cfg, tmp_path / "out", RebuildOptions(tz=dt.timezone.utc), lambda *a: seen.append(a), jobs)
    files = sorted((path / "commitlog").iterdir())
    assert [s[0] for s in seen] == list(range(1, len(files) + 1))
    assert seen[-1][1] == seen[-1][2] == sum(f.stat().st_size for f in files)
    assert seen[-1][3] == rep.messages > 0
