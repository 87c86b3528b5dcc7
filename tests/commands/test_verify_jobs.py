"""verify --jobs N: the plan's tasks on N forked processes (pipeline/local.py), the answer of
one process: the same findings, summary, verdict and exit code, in every format."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.helpers import cli, generate


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    store = generate(tmp_path_factory.mktemp("jobs") / "store", messages=1500)
    logs = sorted((store / "commitlog").iterdir())
    for log in (logs[1], logs[3]):
        data = bytearray(log.read_bytes())
        data[5000] ^= 0xFF  # a byte inside a record: a CRC or layout finding
        log.write_bytes(bytes(data))
    cq = sorted(sorted((store / "consumequeue").iterdir())[0].joinpath("0").iterdir())[0]
    data = bytearray(cq.read_bytes())
    data[0:8] = (123456).to_bytes(8, "big")  # the first unit points into another record
    cq.write_bytes(bytes(data))
    return store


def _key(d: dict) -> str:
    return json.dumps(d, sort_keys=True)


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


@pytest.mark.parametrize("jobs", ["2", "0"])
def test_jsonl_answer_is_one_process_answer(damaged, jobs):
    one = cli("verify", "--store", damaged, "--format", "jsonl")
    many = cli("verify", "--store", damaged, "--format", "jsonl", "--jobs", jobs)
    assert one.exit_code == many.exit_code == 1
    a, b = _lines(one.stdout), _lines(many.stdout)
    assert sorted(map(_key, a[:-1])) == sorted(map(_key, b[:-1])) and len(a) >= 3
    assert a[-1] == b[-1]  # the summary, broker_start verdict included


def test_a_sound_store_is_sound_on_two_processes(damaged, tmp_path):
    sound = tmp_path / "sound"
    generate(sound, messages=600)
    r = cli("verify", "--store", sound, "--jobs", "2", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["summary"]["errors"] == 0
    shutil.rmtree(sound)


def test_the_default_is_one_process_for_a_small_commit_log(damaged, monkeypatch):
    """--jobs 0 forks only when the commit logs hold at least ONE_PROCESS_BELOW bytes on disk
    (their files are sparse: 1 500 sends are a few hundred KiB of 1 GiB files)."""
    from rmqstore_cli.pipeline import verify_job, workers
    from rmqstore_cli.pipeline.stores import StoreSpec

    spec = StoreSpec(str(damaged), "store")
    monkeypatch.setattr(workers, "default_jobs", lambda: 7)
    assert verify_job.default_jobs_for([spec]) == 1
    monkeypatch.setattr(workers, "ONE_PROCESS_BELOW", 4096)
    assert verify_job.default_jobs_for([spec]) == 7
    assert verify_job.default_jobs_for([spec, spec]) == 7


def test_help_states_the_one_process_threshold():
    from rmqstore_cli.pipeline.workers import ONE_PROCESS_BELOW

    r = cli("verify", "--help")
    assert f"less than {ONE_PROCESS_BELOW >> 20} MiB on disk" in " ".join(r.stdout.split())
