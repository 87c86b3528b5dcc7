"""The engine's C loops (rmqstore_cli/store/_ckernels.c through store/files/kernels.py) against the
reference loops on hostile input, their argument checks, and the fallback.

The walks (``CommitLog#checkMessageAndReturnSize``'s first checks, ``DLedgerMmapFileStore#recover``'s
entry check) are compared with ``bulk.walk_records``' reference loop on buffers of planted
prefixes with TOTALSIZE at and past every limit (0, negative, INT_MIN, INT_MAX, the exact
rest of the buffer and one more); the CRC (``UtilAll#crc32``) with zlib; the join with
slicing. A wrong call raises instead of reading or writing outside a buffer. Without the
extension (not importable) every command runs the reference loops with the same output.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import threading
import zlib

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import HEAD_SIZE, MAGIC_BLANK, MAGIC_V1, MAGIC_V2
from rmqstore_cli.formats.dledger import BODY_OFFSET, ENTRY_MAGIC

from rmqstore_cli.store.commitlog.bulk import walk_records
from tests.helpers import ROOT, cli, fixture_dir, generate, needs_c, without_loops


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def test_the_extension_was_built_with_the_layout_of_formats(K):
    import importlib

    from rmqstore_cli.store.files.fastpaths import FastPaths

    ext = importlib.import_module("rmqstore_cli.store._ckernels")
    assert K.BUILT and K.walk is ext.walk and ext.LAYOUT == K.layout()
    bits = K.CLMUL_BITS
    want = f"C loops, CRC-32 on {bits}-bit carry-less multiplies" if bits else "C loops"
    assert FastPaths(pure=False).describe() == want
    assert FastPaths(pure=True).describe() == "reference loops: RMQSTORE_PURE is set"


def test_an_extension_built_from_older_sources_is_another_layout_not_a_crash(K, monkeypatch):
    """An editable install not rebuilt after an update has an extension that states only the
    layouts it knew (no INDEX_ENTRY): the reference loops run, said as "another layout"."""
    import types

    from rmqstore_cli.store.files import extload

    old = types.SimpleNamespace(LAYOUT=K.layout())  # no INDEX_ENTRY
    monkeypatch.setattr(K, "load", lambda name: extload.Loaded(name, old))
    got = K._load()
    assert got.module is None and got.problem == extload.OTHER_LAYOUT
    monkeypatch.setattr(K, "load", lambda name: extload.Loaded(name, types.SimpleNamespace()))
    assert K._load().problem == extload.OTHER_LAYOUT


_TOTALS = (0, -1, -(1 << 31), (1 << 31) - 1, 1, 7, 8, HEAD_SIZE - 1, HEAD_SIZE, 91, 200)


def _planted(rnd: random.Random, header: int) -> bytearray:
    """Records (and entries, for ``header``) with sizes and magics drawn from the edges."""
    b = bytearray(rnd.randbytes(rnd.randrange(0, 3000)))
    p = 0
    while p + header + 8 <= len(b) and rnd.random() < 0.9:
        rest = len(b) - p - header
        total = rnd.choice(_TOTALS + (rest, rest + 1, rest - 1, rnd.randrange(HEAD_SIZE, 400)))
        magic = rnd.choice((MAGIC_V1, MAGIC_V2, MAGIC_V1, MAGIC_BLANK, 0, rnd.getrandbits(32)))
        struct.pack_into(">iI", b, p + header, max(min(total, (1 << 31) - 1), -(1 << 31)), magic)
        if header:
            size = rnd.choice((total + header, total + header, total, -1, rnd.getrandbits(31)))
            struct.pack_into(
                ">ii",
                b,
                p,
                rnd.choice((ENTRY_MAGIC, ENTRY_MAGIC, ENTRY_MAGIC, 0, 2, -1)),
                max(min(size, (1 << 31) - 1), -(1 << 31)),
            )
        p += header + total if 0 < total < 400 else rnd.randrange(1, 300)
    return b


@pytest.mark.parametrize("header", [0, BODY_OFFSET])
def test_hostile_buffers_walk_like_the_reference(K, header):
    rnd = random.Random(23 + header)
    for _ in range(3000):
        b = _planted(rnd, header)
        limit = rnd.choice((len(b), len(b), max(0, len(b) - rnd.randrange(0, 20))))
        pos = rnd.choice((0, 0, rnd.randrange(0, len(b) + 2)))
        max_n = rnd.choice((1, 2, 5, 1000))
        min_total = rnd.choice((1, 8, HEAD_SIZE, 91))
        got = [walk_records(b, pos, limit, max_n, min_total, header=header, compiled=c) for c in (False, True)]
        assert got[0].starts.tolist() == got[1].starts.tolist(), (pos, limit, max_n, min_total)
        assert (got[0].end, got[0].stop) == (got[1].end, got[1].stop)


def test_crc_and_join_equal_zlib_and_slicing(K):
    rng = np.random.default_rng(9)
    a = rng.integers(0, 256, 70_000, dtype=np.uint8)
    ln = np.r_[rng.integers(0, 2000, 500), 0, 7, 8, 9, 65_536].astype(np.int64)
    at = np.r_[rng.integers(0, 68_000, 500), 0, 70_000 - 7, 3, 1, 0].astype(np.int64)
    out = np.full(ln.size, -1, np.int64)
    big = K.small_body_crcs(a, at, ln, 1 << 20, out)
    assert big == 0
    assert out.tolist() == [
        zlib.crc32(a[x : x + n].tobytes()) & 0x7FFFFFFF for x, n in zip(at.tolist(), ln.tolist(), strict=True)
    ]
    joined = np.zeros(int(ln.sum()) + 5, np.uint8)
    assert K.join_ranges(a, at, ln, joined) == ln.sum()
    assert joined[: int(ln.sum())].tobytes() == b"".join(
        a[x : x + n].tobytes() for x, n in zip(at.tolist(), ln.tolist(), strict=True)
    )
    assert K.join_ranges(memoryview(a.tobytes()), at[:0], ln[:0], joined[:0]) == 0


def test_threads_share_the_loops(K):
    """The loops run without the GIL: threads calling them at once get the same answers."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, 1 << 20, dtype=np.uint8)
    at = rng.integers(0, (1 << 20) - 1000, 20_000).astype(np.int64)
    ln = rng.integers(0, 1000, 20_000).astype(np.int64)
    want = np.empty(at.size, np.int64)
    K.small_body_crcs(a, at, ln, 1024, want)
    got = [np.empty(at.size, np.int64) for _ in range(4)]
    threads = [threading.Thread(target=K.small_body_crcs, args=(a, at, ln, 1024, g)) for g in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(g, want) for g in got)


def _bad_calls(K):
    """(call, exception) pairs a hostile or careless caller might make."""
    a = np.zeros(100, np.uint8)
    i64 = np.zeros(10, np.int64)
    at, ln = np.array([0, 10], np.int64), np.array([5, 5], np.int64)
    return [
        (lambda: K.walk(a, 0, 100, 10, 1, np.zeros(10, np.int32)), TypeError),  # wrong dtype
        (lambda: K.walk(a, 0, 100, 10, 1, np.zeros(10, np.float64)), TypeError),
        (lambda: K.walk(np.zeros(100, np.int16), 0, 100, 10, 1, i64), TypeError),
        (lambda: K.walk(a, 0, 100, 11, 1, i64), ValueError),  # out shorter than max_n
        (lambda: K.walk(a, 0, 101, 10, 1, i64), ValueError),  # limit past the buffer
        (lambda: K.walk(a, -1, 100, 10, 1, i64), ValueError),
        (lambda: K.walk(a, 0, -1, 10, 1, i64), ValueError),
        (lambda: K.walk(a, 0, 100, -1, 1, i64), ValueError),
        (lambda: K.walk(a, 0, 100, 10, -5, i64), ValueError),  # would walk backwards
        (lambda: K.walk(a, 0, 100, 10, 0, i64), ValueError),  # or stand still
        (lambda: K.walk(a, 0, 100, 10, 1, np.zeros(20, np.int64)[::2]), (BufferError, ValueError)),  # not contiguous
        (lambda: K.walk(a, 0, 100, 10, 1, np.zeros(10, np.int64).view(">i8")), TypeError),  # byte order
        (lambda: K.walk(a, 0, 100, 10, 1, bytes(80)), BufferError),  # read-only out
        (lambda: K.walk(a, 0, 100, 10, 1, None), TypeError),
        (lambda: K.walk(a, 0, 100, 10), TypeError),
        (lambda: K.walk_entries(a, 0, 100, 10, 1, -48, i64), ValueError),
        (lambda: K.small_body_crcs(a, at, ln[:1], 1024, i64), ValueError),  # at and ln differ
        (lambda: K.small_body_crcs(a, at, ln, 1024, i64[:1]), ValueError),  # out too short
        (lambda: K.small_body_crcs(a, at, np.array([5, 91], np.int64), 1024, i64), ValueError),  # past the end
        (lambda: K.small_body_crcs(a, np.array([-1, 0], np.int64), ln, 1024, i64), ValueError),
        (lambda: K.small_body_crcs(a, at, np.array([-5, 0], np.int64), 1024, i64), ValueError),
        (lambda: K.small_body_crcs(a, at, ln, 1024, np.zeros(10, np.uint8)), TypeError),
        (lambda: K.small_body_crcs(a, at.astype(np.int32), ln, 1024, i64), TypeError),
        (lambda: K.join_ranges(a, at, ln, np.zeros(9, np.uint8)), ValueError),  # out too short
        (lambda: K.join_ranges(a, np.array([0, 99], np.int64), ln, np.zeros(10, np.uint8)), ValueError),
        (lambda: K.join_ranges(a, at, np.array([5, -1], np.int64), np.zeros(10, np.uint8)), ValueError),
        (lambda: K.join_ranges(a, at, ln, i64), TypeError),
        (lambda: K.join_ranges(a, at, ln, bytes(10)), BufferError),
    ]


def test_wrong_arguments_raise(K):
    for k, (call, exc) in enumerate(_bad_calls(K)):
        with pytest.raises(exc):
            call()
            pytest.fail(f"bad call {k} returned")


def test_walk_at_the_buffer_edges(K):
    """pos past limit, limit 0, an empty buffer, max_n 0: nothing walked, nothing read."""
    out = np.zeros(4, np.int64)
    b = np.frombuffer(struct.pack(">iI", 8, MAGIC_V1) * 3, np.uint8)
    assert K.walk(b, 0, 24, 4, 8, out) == (3, 24) and out[:3].tolist() == [0, 8, 16]
    assert K.walk(b, 0, 24, 4, 9, out) == (0, 0)
    assert K.walk(b, 30, 24, 4, 8, out) == (0, 30)
    assert K.walk(b, 0, 0, 4, 8, out) == (0, 0)
    assert K.walk(b, 0, 24, 0, 8, out) == (0, 0)
    assert K.walk(np.zeros(0, np.uint8), 0, 0, 4, 8, out) == (0, 0)
    assert K.walk_entries(b, 0, 24, 4, 8, 1 << 62, out) == (0, 0)  # a header larger than anything


_FALLBACK = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "rmqstore_cli.store._ckernels":
            raise ImportError("refused by the test")
sys.meta_path.insert(0, Refuse())
from rmqstore_cli.store.files import kernels
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
assert not kernels.BUILT and FAST_PATHS.kernels() is None and not hasattr(kernels, "walk")
from rmqstore_cli.app import main
main()
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = generate(tmp_path_factory.mktemp("ck") / "s", messages=1500, seed=4)
    first = json.loads(
        _rmq(["dump-commitlog", "--store", str(s), "--format", "jsonl", "--limit", "1", "--body", "hex"]).stdout
    )
    body = bytes.fromhex(first["body"])
    path = sorted((s / "commitlog").iterdir())[0]
    raw = path.read_bytes()
    at = raw.index(body, first["physical_offset"])  # its body: a finding to agree on
    with open(path, "r+b") as fh:
        fh.seek(at)
        fh.write(bytes([body[0] ^ 0x40]))
    return s


def _rmq(args: list[str], code: str | None = None, **env) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "rmqstore_cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ, **env))


@pytest.mark.slow
def test_without_the_extension_every_command_runs_the_reference(store):
    """_ckernels not importable (a machine without a compiler): the reference loops run,
    --version says so, and verify and dump give the same output."""
    needs_c()
    r = _rmq(["--version"], _FALLBACK, RMQSTORE_PURE="0")  # (the tier also runs with RMQSTORE_PURE=1)
    assert r.returncode == 0 and "the C extension failed to import: refused by the test" in r.stdout, r.stderr
    assert "C loops" in _rmq(["--version"], RMQSTORE_PURE="0").stdout
    assert "RMQSTORE_PURE" in _rmq(["--version"], RMQSTORE_PURE="1").stdout
    outs = []
    for args in (
        ["verify", "--store", str(store), "--format", "json"],
        ["dump-commitlog", "--store", str(store), "--format", "jsonl", "--limit", "50"],
    ):
        c, ref = _rmq(args), _rmq(args, _FALLBACK)
        assert c.returncode == ref.returncode and without_loops(c.stdout) == without_loops(ref.stdout) and ref.stdout, (
            args,
            ref.stderr,
        )
        assert "Traceback" not in ref.stderr
        outs.append(ref.stdout)
    assert "commitlog.body-crc" in {f["check"] for f in json.loads(outs[0])["findings"]}


@pytest.mark.parametrize("sample", ["4.9.7", "5.3.3", "dledger", "lmq", "bcq"])
def test_real_broker_stores_verify_alike_on_both_paths(sample, sample_tarball, monkeypatch):
    """verify (``CommitLog#recover*``'s checks and more) of the real-broker stores, plain and
    DLedger: the C loops and the reference loops give the same findings and summary."""
    needs_c()
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    d = fixture_dir(sample) if sample[0].isdigit() else sample_tarball(sample)
    got = {}
    for pure in (True, False):
        monkeypatch.setattr(FAST_PATHS, "pure", pure)
        r = cli("verify", "--store", d / "store", "--broker-conf", d / "broker.conf", "--format", "json")
        got[pure] = json.loads(r.stdout)
    loops = {pure: got[pure]["summary"].pop("c_extensions")["_ckernels"] for pure in got}
    assert loops == {True: "RMQSTORE_PURE is set", False: "in use"}
    assert got[True] == got[False] and got[True]["summary"]["messages"] > 0
