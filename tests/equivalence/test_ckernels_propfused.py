"""verify's one pass over PROPERTIES (the C loop ``prop_fused``) against its twin of the same
name (store/records/props_fused.py) on hostile input, :class:`FusedProperties` against the
reference :class:`Properties` it stands in for, and verify's index-entry match by put order
(``KeyPairs``) against the sorted match on entries out of that order.

``prop_fused`` is ``MessageDecoder#string2messageProperties``' split (pairs at \\x02, the
last non-empty value of a name), ``tagsString2tagsCode``, ``IndexService#buildIndex``'s keys
and ``indexKeyHashMethod``, and which messages hold a malformed pair or malformed UTF-8.
"""

from __future__ import annotations

import json
import random
import struct

import numpy as np
import pytest
from rmqstore_cli.formats.index import HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE

from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.records import props_fused as pf
from rmqstore_cli.store.records.properties import CRC_MARK, Properties
from tests.equivalence.test_ckernels_propkeys import _TOKENS
from tests.helpers import SMALL, cli, generate, needs_c, without_loops

_MORE = [CRC_MARK, b"DELAY\x01", b"DELAY\x012", b"__CRC32#", b"D", b"_", b"\x01\x01", b"\x02\x01"]
#: names of values asked for: verify's, an empty one, one a prefix of TAGS, TAGS itself
_NAMES = (CRC_MARK, b"DELAY\x01", b"", b"T", b"TAGS\x01")


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def _batch(rnd: random.Random, n: int, ascii_only: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` PROPERTIES drawn from the edges, one after another (as joined)."""
    tokens = [t for t in _TOKENS + _MORE if t.isascii() or not ascii_only]
    props = [b"".join(rnd.choice(tokens) for _ in range(rnd.choice((0, 1, 2, 5, 12, 30)))) for _ in range(n)]
    pl = np.array([len(p) for p in props], np.int64)
    return np.frombuffer(b"".join(props) + b"\0", np.uint8)[:-1], np.cumsum(pl) - pl, pl


def _args(names=_NAMES, n=0, rows=0):
    noff = np.cumsum([0] + [len(x) for x in names], dtype=np.int64)
    outs = (np.full(n, 7, np.int64), np.full(n, 7, np.int64), np.full(2 * len(names) * n, 7, np.int64))
    return np.frombuffer(b"".join(names) + b"\0", np.uint8)[:-1], noff, *outs, np.full((rows, pf.KEY_COLS), 7, np.int64)


def _run(loop, a, moff, pl, indexable, tid, prefix, rows):
    names, noff, *outs = _args(n=moff.size, rows=rows)
    k = loop(a, moff, pl, indexable, tid, prefix, names, noff, *outs)
    return k, outs


def test_the_constants_are_the_c_loops(K):
    assert (K._EXT.PF_MALFORMED, K._EXT.PF_HIGH, K._EXT.PF_BAD_UTF8) == (pf.MALFORMED, pf.HIGH, pf.BAD_UTF8)
    assert (K.KEY_COLS, K.KEY_WORD, K.KEY_WIDE, K.TAGS_WIDE) == (pf.KEY_COLS, pf.KEY_WORD, pf.KEY_WIDE, pf.TAGS_WIDE)


@pytest.mark.parametrize("seed", range(12))
def test_prop_fused_equals_its_twin_on_hostile_properties(K, seed):
    rnd = random.Random(seed)
    a, moff, pl = _batch(rnd, rnd.choice((60, 400)), ascii_only=seed % 3 == 0)
    rng = np.random.default_rng(seed)
    indexable = rng.random(moff.size) < 0.8
    prefix = rng.integers(0, 1 << 32, 4, dtype=np.uint64).astype(np.int64)
    tid = rng.integers(0, prefix.size, moff.size)
    for rows in (0, 3, 4 * moff.size + 50):  # keys past the room are counted, not written
        want = _run(pf.prop_fused, a, moff, pl, indexable, tid, prefix, rows)
        got = _run(K.prop_fused, a, moff, pl, indexable, tid, prefix, rows)
        assert want[0] == got[0]
        for w, g in zip(want[1], got[1], strict=True):
            assert np.array_equal(w, g)
    flags = got[1][0]
    assert (flags & pf.MALFORMED).any() and got[0] > 0
    assert seed % 3 == 0 or (flags & pf.BAD_UTF8).any()


def test_prop_fused_known_values(K):
    """Known flags, values, hashes: "中" hashes to 20013; a lone \\xc3 is malformed UTF-8."""
    from rmqstore_cli.store.javahash import index_key_hash, java_hash

    props = [
        "TAGS\x01\u4e2d\x02KEYS\x01 a  b \x02UNIQ_KEY\x01u\x02".encode(),
        b"DELAY\x013\x02DELAY\x01\x02x\x02",
        b"TAGS\x01\xc3\x02KEYS\x01k\xc3",
        b"",
    ]
    pl = np.array([len(p) for p in props], np.int64)
    a, moff = np.frombuffer(b"".join(props), np.uint8), np.cumsum(pl) - pl
    prefix = np.array([java_hash("T#") & 0xFFFFFFFF], np.int64)
    for loop in (pf.prop_fused, K.prop_fused):
        k, (flags, tags, vals, rows) = _run(loop, a, moff, pl, np.ones(4, bool), np.zeros(4, np.int64), prefix, 8)
        assert flags.tolist() == [pf.HIGH, pf.MALFORMED, pf.HIGH | pf.BAD_UTF8, 0]
        assert tags.tolist() == [20013, 0, pf.TAGS_WIDE, 0]
        delay = vals.reshape(2 * len(_NAMES), 4)[2:4]
        assert delay[:, 1].tolist() == [moff[1] + 6, moff[1] + 7] and delay[:, 0].tolist() == [-1, -1]
        assert k == 4 and rows[:3, 3].tolist() == [index_key_hash(x) for x in ("T#u", "T#a", "T#b")]
        assert rows[3].tolist() == [2, moff[2] + 12, moff[2] + 14, 0, pf.KEY_WORD | pf.KEY_WIDE]


def test_prop_fused_refuses_bad_calls(K):
    a = np.frombuffer(b"UNIQ_KEY\x01k", np.uint8)
    one = np.zeros(1, np.int64)
    names, noff, flags, tags, vals, rows = _args(n=1, rows=2)
    ok = [a, one, np.array([a.size]), np.ones(1, bool), one, one, names, noff, flags, tags, vals, rows]
    for loop in (pf.prop_fused, K.prop_fused):
        assert loop(*ok) == 1
    bad = [
        (1, np.array([1], np.int64)),  # runs past a's end
        (2, np.array([-1], np.int64)),
        (3, np.ones(2, bool)),  # lengths differ
        (4, np.array([1], np.int64)),  # a topic id outside the prefixes
        (10, np.zeros(3, np.int64)),
    ]
    for i, v in bad:
        args = list(ok)
        args[i] = v
        for loop in (pf.prop_fused, K.prop_fused):
            with pytest.raises(ValueError):
                loop(*args)
    for i, v in ((0, np.zeros(4, np.int64)), (8, np.zeros(1, np.float64)), (7, np.array([0, 99], np.int64))):
        args = list(ok)
        args[i] = v
        with pytest.raises((TypeError, ValueError)):
            K.prop_fused(*args)


@pytest.mark.parametrize("seed", range(6))
def test_fused_properties_answer_as_properties(K, monkeypatch, seed):
    """What verify reads: suspects, values, the __CRC32# holders, tagsCodes, keys (grouped, in
    put order, their text), the same as the reference :class:`Properties`; rebuild's keys in
    put order the same as the C ``prop_keys``."""
    rnd = random.Random(50 + seed)
    a, moff, pl = _batch(rnd, 300, ascii_only=seed % 2 == 0)
    rng = np.random.default_rng(seed)
    indexable, tid = rng.random(moff.size) < 0.8, rng.integers(0, 3, moff.size)
    prefix = rng.integers(0, 1 << 32, 3, dtype=np.uint64)
    names = [b"a", b"b", b"c"]
    monkeypatch.setattr(FAST_PATHS, "pure", True)
    ref = Properties(a, moff, pl)
    fused = pf.FusedProperties(K, a, moff, pl, indexable, tid, prefix, _NAMES)
    assert np.array_equal(ref.suspects(), fused.suspects())
    for name in (*[x for x in _NAMES if len(x) >= 4], b"KEYS\x01"):  # (the reference's names: 4 bytes or more)
        for r, f in zip(ref.value(name), fused.value(name), strict=True):
            assert np.array_equal(r, f)
    assert np.array_equal(ref.prop_crc, fused.prop_crc)
    rk, fk = ref.index_keys(tid, prefix, indexable, names), fused.index_keys(tid, prefix, indexable, names)
    assert np.array_equal(ref.tags_code, fused.tags_code)
    assert np.array_equal(rk.owner, fk.owner) and np.array_equal(rk.hash, fk.hash)
    assert [rk.text(x) for x in range(rk.owner.size)] == [fk.text(x) for x in range(fk.owner.size)]
    for r, f in zip(rk.put_order(), fk.put_order(), strict=True):
        assert np.array_equal(r, f)
    assert rk.owner.size and fused.wide == (seed % 2 == 1)
    monkeypatch.setattr(FAST_PATHS, "pure", False)  # rebuild's keys in put order: the C prop_keys'
    want = Properties(a, moff, pl, checks=False).compiled_keys(indexable, tid, prefix)
    for w, g in zip(want[:4], fused.put_keys(), strict=True):
        assert np.array_equal(w, g)


def test_index_entries_out_of_put_order_match_by_sort(monkeypatch, tmp_path):
    """Entries of one message with their hashes swapped (put order broken, the same pairs):
    no index.entry-hash, and the same verdict on both paths; a changed hash is found."""
    needs_c()
    s = generate(tmp_path / "s", "--keys-per-message", "3", messages=400, seed=5)
    idx = sorted((s / "index").iterdir())[0]
    raw = bytearray(idx.read_bytes())
    slots = int(SMALL[SMALL.index("--index-slots") + 1])
    at = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE + INDEX_ENTRY_SIZE  # entry 1
    for _ in range(50):
        h1, p1 = struct.unpack_from(">iq", raw, at)
        h2, p2 = struct.unpack_from(">iq", raw, at + INDEX_ENTRY_SIZE)
        if p1 == p2 and h1 != h2:
            break
        at += INDEX_ENTRY_SIZE
    else:
        pytest.skip("no message with two keys near the start")
    struct.pack_into(">i", raw, at, h2)
    struct.pack_into(">i", raw, at + INDEX_ENTRY_SIZE, h1)

    def both() -> list[dict]:
        idx.write_bytes(bytes(raw))
        out = []
        for pure in (True, False):
            monkeypatch.setattr(FAST_PATHS, "pure", pure)
            out.append(json.loads(without_loops(cli("verify", "--store", s, "--format", "json").stdout)))
        assert out[0] == out[1]
        return out

    checks = {f["check"] for f in both()[1]["findings"]}
    assert "index.entry-hash" not in checks and "index.entry-target" not in checks
    struct.pack_into(">i", raw, at, h1 ^ 1)
    assert "index.entry-hash" in {f["check"] for f in both()[1]["findings"]}


@pytest.mark.parametrize("seed", range(4))
def test_dispatch_fields_by_record_cols_equal_record_batch(K, monkeypatch, seed):
    """rebuild's fields of a block (``FastDispatcher.fields``) by the C ``record_cols`` equal
    :class:`RecordBatch`'s on hostile records (hosts v4/v6, magic V1/V2, lengths at the
    edges, cut files), and the small bodies' CRCs that come with them equal zlib's."""
    from rmqstore_cli.store.commitlog.bulk import walk_records
    from rmqstore_cli.store.files.crc import body_crcs
    from rmqstore_cli.store.write.fastdispatch import FastDispatcher
    from tests.equivalence.test_ckernels_fused import _record

    rnd, by_c = random.Random(70 + seed), 0
    for _ in range(150):
        b = b"".join(_record(rnd) for _ in range(rnd.randrange(1, 6)))
        b = b[: rnd.choice((len(b), rnd.randrange(1, len(b) + 1)))]
        a = np.frombuffer(b, np.uint8)
        P = walk_records(b, 0, len(b), 100, 1).starts.astype(np.int64)
        got = []
        for pure in (True, False):
            monkeypatch.setattr(FAST_PATHS, "pure", pure)
            got.append(FastDispatcher.fields(a, P, 0 if pure else 768))
        crc = got[1].pop("body_crc_of", None)
        assert got[0].keys() == got[1].keys()
        for k in got[0]:
            assert np.array_equal(got[0][k], got[1][k]), k
        if crc is not None:
            by_c += 1
            small = np.flatnonzero(crc >= 0)
            bl = np.maximum(got[0]["body_len"], 0)
            assert np.array_equal(crc[small], body_crcs(a, got[0]["body_at"][small], bl[small]))
    assert by_c > 20  # most blocks read by the C loop


@pytest.mark.parametrize("seed", range(6))
def test_index_entries_equal_their_twin(K, seed):
    """``index_entries`` (rebuild's block of entries, chained by slot and laid out at once)
    against its twin (``slot_chains`` + ``entry_block``): hashes of any sign and past int32,
    one slot or many (the table read in order, or the used slots sorted), any n0."""
    from rmqstore_cli.store.queues.index import index_entries

    rng = np.random.default_rng(seed)
    for k, slot_num, n0 in ((0, 5, 1), (1, 1, 0), (300, 7, 1), (500, 100_000, 9), (2000, 64, (1 << 31) - 900)):
        hashes = rng.integers(-(1 << 40), 1 << 40, k) if seed % 2 else rng.integers(0, 1 << 31, k)
        phy, diff = rng.integers(-(1 << 62), 1 << 62, k), rng.integers(-(1 << 33), 1 << 33, k)
        got = []
        for loop in (index_entries, K.index_entries):
            outs = [np.full(k * 20, 7, np.uint8)] + [np.full(k, 7, np.int64) for _ in range(3)]
            used = loop(hashes, phy, diff, n0, slot_num, *outs)
            got.append((used, outs[0], *(o[:used] for o in outs[1:])))
        assert got[0][0] == got[1][0] and (k == 0 or got[0][0] > 0)
        for w, g in zip(got[0][1:], got[1][1:], strict=True):
            assert np.array_equal(w, g)


def test_index_entries_refuses_bad_calls(K):
    z = np.zeros(2, np.int64)
    ok = [z, z, z, 1, 5, np.zeros(40, np.uint8), z.copy(), z.copy(), z.copy()]
    assert K.index_entries(*ok) == 1
    for i, v in ((0, np.zeros(3, np.int64)), (3, -1), (4, 0), (5, np.zeros(39, np.uint8)), (8, np.zeros(1, np.int64))):
        args = list(ok)
        args[i] = v
        with pytest.raises(ValueError):
            K.index_entries(*args)
    with pytest.raises(TypeError):
        K.index_entries(np.zeros(2, np.int32), *ok[1:])
