"""``repair --pad`` takes the runs of records a block test accepts a block at a time
(store/write/repair.py ``_good_records``): its plan must be exactly the record-by-record
verdict of ``check_message`` (``CommitLog#checkMessageAndReturnSize``, CRC checked), on whole
files and on files damaged anywhere: a flipped body byte (CRC), a broken length, a cut tail,
zeros, and on the reference loops (``RMQSTORE_PURE=1`` runs the suite again)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from rmqstore_cli.errors import RefusedError
from rmqstore_cli.store.commitlog.record import Status, check_message
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.repair import plan_pad
from tests.helpers import generate


def _per_record(buf: bytes, base: int) -> tuple[int, int, bool]:
    """The verdict one record at a time: where the accepted records end, how many, BLANK?"""
    pos = records = 0
    while True:
        c = check_message(buf, pos, len(buf), base, check_crc=True)
        if c.status is not Status.VALID:
            return pos, records, c.status is Status.BLANK
        pos, records = pos + c.size, records + 1


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("pad") / "s", messages=1500, seed=3)


def _damaged(store: Path, tmp: Path, damage) -> tuple[Path, Path]:
    copy = tmp / "copy"
    shutil.copytree(store, copy)
    first = sorted((copy / "commitlog").iterdir())[0]
    data = bytearray(first.read_bytes())
    damage(data)
    first.write_bytes(bytes(data))
    return copy, first


def _flip(at: float):
    def damage(data: bytearray) -> None:
        i = int(len(data.rstrip(b"\0")) * at)
        data[i] ^= 0x5A

    return damage


def _cut(at: float):
    def damage(data: bytearray) -> None:
        del data[int(len(data.rstrip(b"\0")) * at) :]

    return damage


def _zero_run(data: bytearray) -> None:
    i = len(data.rstrip(b"\0")) // 2
    data[i : i + 300] = bytes(300)


def _random_bytes(data: bytearray) -> None:
    rnd = random.Random(11)
    for _ in range(5):
        data[rnd.randrange(len(data.rstrip(b"\0")))] = rnd.randrange(256)


DAMAGE = {
    "none": lambda data: None,
    "body-early": _flip(0.1),
    "middle": _flip(0.5),
    "late": _flip(0.93),
    "cut-mid-record": _cut(0.61),
    "zeros": _zero_run,
    "random": _random_bytes,
}


@pytest.mark.parametrize("name", list(DAMAGE))
def test_the_block_path_keeps_what_the_record_check_keeps(store: Path, tmp_path: Path, name: str) -> None:
    copy, first = _damaged(store, tmp_path, DAMAGE[name])
    buf = first.read_bytes()
    pos, records, blank = _per_record(buf, int(first.name))
    cfg = StoreConfig(store_path_root_dir=str(copy), mapped_file_size_commit_log=len(buf))
    try:
        plan = plan_pad(cfg, first)
    except RefusedError as e:  # damage inside the file: refused at the same place
        assert f"the bytes at {pos} are" in str(e), e
        return
    assert (plan.data_end, plan.records) == (pos, records)
    assert (plan.blank == "kept") == blank
    assert records > 0
