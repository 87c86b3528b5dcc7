"""commitlog.bulk.walk_records (the one record walk of rebuild-index and verify) against a plain
per-record walk that checks each record before following its TOTALSIZE
(docs/format/commitlog.md#reading-a-commit-log-file).

The reference below is the definition: a record starts where MAGICCODE is V1/V2 and
``min_total <= TOTALSIZE <= limit - pos``; BLANK, a zero prefix, anything else, fewer
than 8 bytes, or the end of the bytes stop the walk. The fast walk reads only TOTALSIZE in
its loop and checks MAGICCODE and bounds afterwards, so it is compared on clean files,
on files damaged at random, on tails of every kind and at every batch size — and so is its
C twin (store/files/kernels.py, _ckernels.c), which checks each record before following it.
"""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import HEAD_SIZE, MAGIC_BLANK, MAGIC_V1, MAGIC_V2

from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.layout.config import StoreConfig
from tests.helpers import fixture_dir, generate, needs_c

_LOOP = {"compiled": False}


@pytest.fixture(autouse=True, params=["python", "compiled"])
def walk_loop(request, monkeypatch):
    """Every test runs with the reference loop and with the C one (store/files/kernels.py),
    chosen by walk_records' ``compiled`` parameter."""
    if request.param == "compiled":
        needs_c()
    monkeypatch.setitem(_LOOP, "compiled", request.param == "compiled")
    return request.param


_MIN_VERIFY = 91  # any other plausible minimum works the same; verify's is the smallest record


def reference_walk(buf, pos: int, limit: int, max_n: int, min_total: int):
    out = []
    while len(out) < max_n:
        if limit - pos < 8:
            return out, pos, "eof" if pos >= limit else "short"
        total, magic = struct.unpack_from(">iI", buf, pos)
        if magic in (MAGIC_V1, MAGIC_V2):
            if min_total <= total <= limit - pos:
                out.append(pos)
                pos += total
                continue
            return out, pos, "bad"
        if magic == MAGIC_BLANK:
            return out, pos, "blank"
        return out, pos, "zero" if magic == 0 and total == 0 else "bad"
    return out, pos, None


def _both(buf, pos, limit, max_n, min_total):
    w = walk_records(buf, pos, limit, max_n, min_total, compiled=_LOOP["compiled"])
    want = reference_walk(buf, pos, limit, max_n, min_total)
    assert (w.starts.tolist(), w.end, w.stop) == want
    assert w.starts.dtype == np.int64
    return w


def _walk_all(buf, limit, max_n, min_total):
    """Walk in batches like the callers do; every batch must equal the reference."""
    pos, seen = 0, []
    while True:
        w = _both(buf, pos, limit, max_n, min_total)
        seen += w.starts.tolist()
        if w.stop is not None:
            return seen, w
        pos = w.end


def _file_bytes(store) -> list[bytes]:
    cl = CommitLog(StoreConfig.load(store))
    try:
        return [bytes(f.buffer()) for f in cl.files]
    finally:
        cl.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    store = generate(tmp_path_factory.mktemp("walk") / "s", messages=600, seed=11)
    data = _file_bytes(store)
    assert len(data) > 1  # small files: BLANK endings and a zero tail
    return data


@pytest.mark.parametrize("max_n", [1, 2, 7, 64, 100000])
@pytest.mark.parametrize("min_total", [HEAD_SIZE, _MIN_VERIFY])
def test_clean_files_walk_like_the_reference(files, max_n, min_total):
    stops = set()
    for data in files:
        seen, w = _walk_all(data, len(data), max_n, min_total)
        assert seen  # every file holds records
        stops.add(w.stop)
    assert stops == {"blank", "zero"}  # full files end in BLANK, the last in its zero tail


def test_real_broker_files_walk_like_the_reference():
    for version in ("4.9.7", "5.3.3"):
        d = fixture_dir(version)
        for data in _file_bytes(d):
            _walk_all(data, len(data), 50, HEAD_SIZE)


def _damaged(data: bytes, rnd: random.Random) -> bytearray:
    b = bytearray(data)
    starts = reference_walk(b, 0, len(b), 10**9, HEAD_SIZE)[0]
    p = rnd.choice(starts)
    kind = rnd.randrange(7)
    if kind == 0:  # a magic byte
        b[p + 4 + rnd.randrange(4)] ^= 1 << rnd.randrange(8)
    elif kind == 1:  # a size that points elsewhere (maybe at another magic)
        struct.pack_into(">i", b, p, rnd.randrange(-(1 << 31), 1 << 31))
    elif kind == 2:  # zero size
        struct.pack_into(">i", b, p, 0)
    elif kind == 3:  # a size below the minimum, or negative
        struct.pack_into(">i", b, p, rnd.choice([1, 8, HEAD_SIZE - 1, HEAD_SIZE, _MIN_VERIFY - 1, -4, -p]))
    elif kind == 4:  # a BLANK in the middle
        struct.pack_into(">I", b, p + 4, MAGIC_BLANK)
    elif kind == 5:  # zeros from here
        b[p:] = bytes(len(b) - p)
    else:  # just past the end of the data
        struct.pack_into(">i", b, p, len(b) - p + rnd.randrange(1, 9))
    return b


def test_damaged_files_walk_like_the_reference(files):
    rnd = random.Random(5)
    for _ in range(300):
        b = _damaged(rnd.choice(files), rnd)
        _walk_all(b, len(b), rnd.choice([1, 3, 50, 4096]), rnd.choice([HEAD_SIZE, _MIN_VERIFY]))


@pytest.mark.parametrize("cut", range(0, 9))
def test_tails_shorter_than_a_prefix(files, cut):
    """The data ends 0..8 bytes after the last record (a truncated file, or a limit below the mapping)."""
    data = files[0]
    starts = reference_walk(data, 0, len(data), 10**9, HEAD_SIZE)[0]
    end = starts[5]
    for limit in (end + cut,):
        trimmed = data[:limit]
        _walk_all(trimmed, limit, 4, HEAD_SIZE)  # the mapping ends at limit
        _walk_all(data, limit, 4, HEAD_SIZE)  # the mapping goes on past limit


def test_start_positions_and_empty_input(files):
    data = files[0]
    _both(b"", 0, 0, 10, HEAD_SIZE)
    _both(data, len(data), len(data), 10, HEAD_SIZE)
    _both(data, len(data) - 3, len(data), 10, HEAD_SIZE)
    for pos in (1, 4, 17, 100):  # not at a record: a bad or zero prefix
        _both(data, pos, len(data), 10, HEAD_SIZE)


def test_the_policy_runs_the_c_walk_unless_pure(files, monkeypatch):
    """FAST_PATHS chooses (compiled=None): the C walk whenever it is built, the reference
    loop when ``pure`` (RMQSTORE_PURE=1), with the same answers."""
    needs_c()
    from rmqstore_cli.store.commitlog import bulk
    from rmqstore_cli.store.files import kernels
    from rmqstore_cli.store.files.fastpaths import FastPaths

    data = files[0]
    got = {}
    for pure in (True, False):
        policy = FastPaths(pure=pure)
        monkeypatch.setattr(bulk, "FAST_PATHS", policy)
        assert (policy.walk_loop() is None) is pure and (policy.kernels() is None) is pure
        w = walk_records(data, 0, len(data), 150)
        got[pure] = (w.starts.tolist(), w.end, w.stop)
    assert got[True] == got[False]
    assert FastPaths(pure=False).walk_loop() is kernels.walk and FastPaths(pure=True).walk_loop(True) is kernels.walk
    assert FastPaths(pure=False).walk_loop(False) is None
    assert FastPaths(json_min=5, pure=False).json_kernel(4) is None
    assert FastPaths(json_min=5, pure=False).json_kernel(5) is not None
    assert FastPaths(json_min=5, pure=True).json_kernel(5) is None


@pytest.mark.parametrize("header", [0, 48])
def test_forcing_the_c_walk_without_the_extension_names_it(files, monkeypatch, header):
    """``FastPaths#walk_loop(compiled=True)`` on a machine whose extension did not build (no
    ``kernels.walk``/``walk_entries``): one clear StoreError naming the extension and how to
    build it (was: AttributeError), for the plain and the DLedger walk alike; the policy
    (compiled=None) and compiled=False still run the reference loop."""
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.files import kernels
    from rmqstore_cli.store.files.fastpaths import FastPaths, MissingExtension

    monkeypatch.setattr(kernels, "BUILT", False)
    for name in ("walk", "walk_entries", "small_body_crcs", "join_ranges"):
        monkeypatch.delattr(kernels, name, raising=False)
    for pure in (False, True):
        with pytest.raises(MissingExtension) as err:
            FastPaths(pure=pure).walk_loop(True, entries=bool(header))
        assert issubclass(MissingExtension, StoreError)
        assert "rmqstore_cli.store._ckernels is not built" in str(err.value)
        assert "setup.py build_ext --inplace" in str(err.value)
        assert FastPaths(pure=pure).walk_loop(None) is None and FastPaths(pure=pure).walk_loop(False) is None
    with pytest.raises(MissingExtension):
        walk_records(files[0], 0, len(files[0]), 10, HEAD_SIZE, compiled=True, header=header)
    w = walk_records(files[0], 0, len(files[0]), 10, HEAD_SIZE)
    assert w.starts.size == 10 and w.starts[0] == 0


def test_forcing_the_c_walk_picks_the_dledger_twin():
    """``walk_loop(entries=True)`` is ``kernels.walk_entries`` (the DLedger walk), forced or chosen."""
    needs_c()
    from rmqstore_cli.store.files import kernels
    from rmqstore_cli.store.files.fastpaths import FastPaths

    assert FastPaths(pure=True).walk_loop(True, entries=True) is kernels.walk_entries
    assert FastPaths(pure=False).walk_loop(entries=True) is kernels.walk_entries
    assert FastPaths(pure=True).walk_loop(entries=True) is None
