"""FastPaths.body_crcs (store/files/fastpaths.py): the C small-body CRC loop
(kernels.small_body_crcs) and zlib give the same UtilAll#crc32 for every body, and
rebuild's recovery check (rebuild._first_crc_failure, CommitLog#checkMessageAndReturnSize
with checkCRCOnRecover) stops at the same record either way."""

from __future__ import annotations

import numpy as np
import pytest

from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.files.crc import body_crcs
from rmqstore_cli.store.files.fastpaths import FastPaths
from rmqstore_cli.store.write.fastdispatch import FastDispatcher
from rmqstore_cli.store.write.rebuild import _first_crc_failure
from tests.helpers import needs_c

pytestmark = pytest.mark.usefixtures("c_built")


@pytest.fixture
def c_built():
    needs_c()


def _records(store):
    last = sorted((store / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    a = np.frombuffer(bytes(data), np.uint8)
    P = walk_records(bytes(data), 0, len(data), 1 << 20, 1, a, compiled=False).starts
    return data, P


def test_compiled_body_crcs_equal_zlib(small_store):
    """Bodies below and above kernels.SMALL_BODY, and an empty range, on both paths."""
    from rmqstore_cli.store.files import kernels

    data, P = _records(small_store)
    buf = bytes(data)
    a = np.frombuffer(buf, np.uint8)
    f = FastDispatcher.fields(a, P)
    at = np.r_[f["body_at"], 0, 0]
    ln = np.r_[np.maximum(f["body_len"], 0), kernels.SMALL_BODY + 5, 0]
    fp = FastPaths(pure=False)
    assert fp.kernels() is kernels
    assert np.array_equal(fp.body_crcs(buf, a, at, ln), body_crcs(buf, at, ln))
    assert np.array_equal(FastPaths(pure=True).body_crcs(buf, a, at, ln), body_crcs(buf, at, ln))  # pure: zlib


def test_first_crc_failure_compiled_is_the_reference(small_store, monkeypatch):
    """A flipped body byte: the same first failing record with and without the C loop."""
    import rmqstore_cli.store.write.rebuild as rebuild

    data, P = _records(small_store)
    a = np.frombuffer(bytes(data), np.uint8)
    f = FastDispatcher.fields(a, P)
    k = int(np.flatnonzero(f["body_len"] > 0)[len(P) // 2])
    data[int(f["body_at"][k])] ^= 0x01
    buf = bytes(data)
    a = np.frombuffer(buf, np.uint8)
    fields = FastDispatcher.fields(a, P)
    monkeypatch.setattr(rebuild, "FAST_PATHS", FastPaths(pure=True))
    want = _first_crc_failure(buf, P, fields, len(buf), 0, False, a)
    monkeypatch.setattr(rebuild, "FAST_PATHS", FastPaths(pure=False))
    assert _first_crc_failure(buf, P, fields, len(buf), 0, False, a) == want == k
