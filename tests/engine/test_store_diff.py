"""store/answers/store_diff.py's file comparison: the first differing byte of two files, read only
where either holds data (holes in both read as zeros in both), a chunk at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqstore_cli.store.answers import store_diff


def sparse(path: Path, size: int, writes: dict[int, bytes]) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
        for at, data in writes.items():
            f.seek(at)
            f.write(data)
    return path


@pytest.mark.parametrize("at", [0, 4095, (3 << 20) + 17, store_diff.CHUNK + 5, (6 << 20) - 1])
def test_first_difference_in_sparse_files(tmp_path, at):
    size = 6 << 20
    common = {1 << 20: b"x" * 5000}
    a = sparse(tmp_path / "a", size, common)
    b = sparse(tmp_path / "b", size, {**common, at: b"\x01"})
    assert store_diff.first_difference(a, b, size, size) == at
    assert store_diff.first_difference(a, sparse(tmp_path / "c", size, common), size, size) is None


def test_prefix_and_empty_files(tmp_path):
    a = sparse(tmp_path / "a", 3 << 20, {10: b"abc"})
    b = sparse(tmp_path / "b", 2 << 20, {10: b"abc"})
    assert store_diff.first_difference(a, b, 3 << 20, 2 << 20) == 2 << 20
    e = sparse(tmp_path / "e", 0, {})
    assert store_diff.first_difference(e, sparse(tmp_path / "f", 0, {}), 0, 0) is None
    assert store_diff.first_difference(e, b, 0, 2 << 20) == 0
    assert store_diff.first_difference(a, a, 3 << 20, 3 << 20) is None  # the same file: not read


def test_data_ranges_merge_both_files(tmp_path):
    size = 8 << 20
    a = sparse(tmp_path / "a", size, {0: b"a" * 100, 4 << 20: b"a"})
    b = sparse(tmp_path / "b", size, {0: b"b" * 100, 6 << 20: b"b"})
    ranges = store_diff.data_ranges(a, b, size)
    assert ranges == sorted(ranges) and all(lo < hi for lo, hi in ranges)
    for at in (0, 99, 4 << 20, 6 << 20):
        assert any(lo <= at < hi for lo, hi in ranges), (at, ranges)
