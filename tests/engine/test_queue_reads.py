"""Consume-queue files read with one pread instead of mapped (``ConsumeQueue.copied_units``):
a preallocated file whose data is a short prefix followed by one hole. Whatever path a file
takes, verify's findings and the start-up prediction are the same; the tests here force the
mapped path (``READ_LIMIT`` below any extent) and compare."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rmqstore_cli.store.checks.startup_queues import known_end, queue_ends
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues import consume_queue
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
from tests.helpers import cli, generate

#: 3000 units a file: a queue of a few hundred messages is a sparse file, its data one extent.
CQ_SIZE = 60000
SIZES = ["--commitlog-file-size", "1048576", "--cq-file-size", str(CQ_SIZE)]


@pytest.fixture(scope="module")
def master(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("reads") / "store", *SIZES, messages=600, small=False)


@pytest.fixture
def store(master, tmp_path) -> Path:
    """A copy that keeps the holes (``cp --sparse=always``; copytree would fill them)."""
    dst = tmp_path / "store"
    subprocess.run(["cp", "-a", "--sparse=always", master, dst], check=True)
    return dst


def queue_files(store: Path) -> list[Path]:
    return sorted(p for p in (store / "consumequeue").glob("*/*/*") if p.is_file())


def has_hole(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_HOLE) < os.fstat(fd).st_size
    finally:
        os.close(fd)


def verify_json(store: Path, monkeypatch, read_limit: int | None) -> dict:
    if read_limit is not None:
        monkeypatch.setattr(consume_queue, "READ_LIMIT", read_limit)
    r = cli("verify", "--store", store, "--format", "json", *SIZES)
    monkeypatch.undo()
    doc = json.loads(r.stdout)
    doc["summary"].pop("seconds", None)
    return doc


def open_queue(store: Path, f: Path) -> ConsumeQueue:
    return ConsumeQueue(store / "consumequeue", f.parent.parent.name, int(f.parent.name), CQ_SIZE)


def test_sparse_queue_files_are_read_not_mapped(store):
    """The generated queue files are sparse with their units first: each is copied (its
    units up to the last non-zero one, as many as the queue's end), none mapped."""
    files = queue_files(store)
    if not all(has_hole(f) for f in files):
        pytest.skip("the file system keeps no holes")
    for f in files:
        cq = open_queue(store, f)
        try:
            copy = cq.copied_units(0)
            assert copy is not None and copy.size == cq.max_offset > 0
            assert cq.queue.files[0]._mm is None
        finally:
            cq.close()


def test_verify_is_the_same_whether_files_are_read_or_mapped(store, monkeypatch):
    """A damaged copy (bytes after a queue's end, a unit pointing elsewhere, a zeroed unit
    mid-queue): the same findings and verdict read or mapped."""
    files = queue_files(store)
    with open(files[0], "r+b") as fh:  # a stray byte after the end: cq.tail
        n = open_queue(store, files[0]).max_offset
        fh.seek(n * 20 + 25)
        fh.write(b"\x07")
    with open(files[1], "r+b") as fh:  # the second unit points 8 bytes further: cq.unit-mismatch
        fh.seek(20)
        off = int.from_bytes(fh.read(8), "big")
        fh.seek(20)
        fh.write((off + 8).to_bytes(8, "big"))
    with open(files[2], "r+b") as fh:  # the third unit zeroed: the queue ends there, the rest is tail
        fh.seek(40)
        fh.write(bytes(20))
    assert all(has_hole(f) for f in files[:3]), "the damage left no hole: nothing would be read"
    read = verify_json(store, monkeypatch, None)
    mapped = verify_json(store, monkeypatch, -1)
    assert read == mapped
    checks = read["summary"]["findings"]
    assert {"cq.tail", "cq.unit-mismatch"} <= checks.keys(), checks


def test_data_after_a_hole_is_mapped(store):
    """A file with data past its first hole is not a prefix: it is mapped, and its units read
    as before (the end at the first zero unit)."""
    f = queue_files(store)[0]
    with open(f, "r+b") as fh:
        fh.seek(CQ_SIZE - 20)
        fh.write(b"\x01" * 20)
    cq = open_queue(store, f)
    try:
        assert cq.copied_units(0) is None
        end = cq.max_offset
        found, off, size, _ = cq.units_at(np.array([end - 1, end], np.int64))
        assert found[0] and size[0] > 0 and not found[1]
    finally:
        cq.close()


def test_known_ends_are_what_the_files_say(store):
    """The ends verify hands to the start-up prediction equal those read from the files."""
    cfg = StoreConfig(store_path_root_dir=str(store), mapped_file_size_consume_queue=CQ_SIZE)
    known = {}
    for f in queue_files(store):
        cq = open_queue(store, f)
        try:
            known[str(f.parent)] = known_end(cq, CQ_SIZE)
        finally:
            cq.close()
    fresh, fresh_max = queue_ends(cfg)
    reused, reused_max = queue_ends(cfg, known)
    assert fresh == reused and fresh_max == reused_max > 0
    assert len(fresh) == len(known)


def test_the_plans_listing_is_the_one_queue_ends_makes(store):
    """verify hands the start-up prediction its listing of the queue directories
    (``KnownEnds.dirs``): the same directories, in the same order, as ``queue_dir_paths``;
    none when two names are one queue id (their order is then the listing's)."""
    from rmqstore_cli.store.files.mapped_files import queue_dir_paths, queue_tree
    from rmqstore_cli.store.verify.queues import queue_dir_list

    cq = store / "consumequeue"
    (cq / "ZZTopic" / "10").mkdir(parents=True)
    (cq / "ZZTopic" / "9").mkdir()
    (cq / "ZZTopic" / "x").mkdir()  # not a queue id: left out by both
    assert queue_dir_list(queue_tree(cq)) == list(queue_dir_paths(cq))
    (cq / "ZZTopic" / "09").mkdir()
    assert queue_dir_list(queue_tree(cq)) is None


def test_a_read_queue_files_last_unit_and_end(store):
    """``unit_values`` of a read (copied) file is what ``unit_arrays`` gives: the unit, zeros
    past the copy, None past a file; the Python end search agrees with the numpy one."""
    f = next(p for p in queue_files(store) if has_hole(p))
    cq = open_queue(store, f)
    try:
        end = cq.max_offset
        assert cq.copied_units(0) is not None and end > 0
        for at in (0, end - 1, end, end + 5):
            got = next(cq.unit_arrays(at, at + 1), None)
            assert cq.unit_values(at) == (None if got is None else tuple(got[0].tolist()[0]))
        assert cq.unit_values(CQ_SIZE // 20) is None  # no second file
        copy = cq.copied_units(0)
        numpy_end = np.flatnonzero((copy["commitlog_offset"] < 0) | (copy["size"] <= 0))
        assert end == (int(numpy_end[0]) if numpy_end.size else copy.size)
    finally:
        cq.close()


def test_trimmed_units_keep_up_to_the_last_non_zero_byte():
    """A copy keeps the units up to the one its last non-zero byte lies in, zero-padded."""
    trim = consume_queue.trimmed_units
    assert trim(bytes(4096), 300).size == 0
    assert trim(b"\x01" + bytes(4095), 300).size == 1
    assert trim(bytes(20) + b"\x00" * 19 + b"\x07" + bytes(100), 300).size == 2
    assert trim(b"\x01" * 4096, 300).size == 205  # ceil(4096 / 20), padded
    assert trim(b"\x01" * 4096, 3).size == 3
