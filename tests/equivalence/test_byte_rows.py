"""arrays.byte_rows (rows of bytes at many positions; every bulk reader's gather): the
overlapping-items view against the 2-D sliding window it replaced, on a read-only
mapping, a view that starts inside its buffer, clipped positions and 2-D positions."""

from __future__ import annotations

import mmap

import numpy as np
import pytest

from rmqstore_cli.store.files.arrays import BE_U32, byte_rows, gather


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 20, 48, 61])
def test_byte_rows_are_the_sliding_window_rows(tmp_path, width):
    rng = np.random.default_rng(width)
    data = rng.integers(0, 256, 100_000, dtype=np.uint8)
    f = tmp_path / "f"
    f.write_bytes(data.tobytes())
    with open(f, "rb") as fh:
        m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    a = np.frombuffer(m, np.uint8)
    for arr in (a, a[12345:], data[::2]):  # a mapping, a view inside it, a strided array
        pos = rng.integers(0, arr.size - width + 1, 5000)
        want = np.lib.stride_tricks.sliding_window_view(arr, width)[pos]
        got = byte_rows(arr, pos, width)
        assert got.shape == (pos.size, width) and (got == want).all()
        got[0] = 0  # a copy, never the mapping
        two = pos[:4000].reshape(40, 100)
        assert (byte_rows(arr, two, width) == want[:4000].reshape(40, 100, width)).all()
    clipped = byte_rows(a, np.array([a.size - 1, 0]), width)  # past the end: clipped indexes
    assert (clipped[0] == a[-1]).all() and (clipped[1] == a[:width]).all()
    assert gather(a, np.array([3, 7]), 4, BE_U32).tolist() == [
        int.from_bytes(data[p : p + 4].tobytes(), "big") for p in (3, 7)
    ]
    del a, arr
    m.close()
