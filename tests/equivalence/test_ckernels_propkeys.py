"""The C loop ``prop_keys`` (rmqstore_cli/store/_ckernels.c through
:meth:`Properties.compiled_keys`) against the numpy reference it stands in for.

``MessageDecoder#string2messageProperties`` (last non-empty pair of a name wins),
``tagsString2tagsCode`` (``String#hashCode`` over UTF-16), ``IndexService#buildIndex``'s
keys (``topic#UNIQ_KEY``, ``topic#word`` for each non-empty word of KEYS split at spaces,
none for ROLLBACK) and ``IndexFile#indexKeyHashMethod``: the same tagsCodes, keys and
hashes as :attr:`Properties.tags_code`, :meth:`Properties.key_ranges` and
:meth:`Properties.index_keys` on the reference path, on hostile PROPERTIES (no separators,
odd and split UTF-8, empty values, repeated names, runs of spaces). A wrong call raises
instead of reading or writing outside a buffer; the commands give the same output either way.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from rmqstore_cli.store.files.arrays import stable_argsort
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.records.properties import Properties
from tests.helpers import cli, fixture_dir, generate, needs_c, without_loops

_TOKENS = [
    b"TAGS\x01",
    b"KEYS\x01",
    b"UNIQ_KEY\x01",
    b"\x01",
    b"\x02",
    b"\x02",
    b" ",
    b"  ",
    b"TAGS",
    b"KEYS\x01 ",
    b"UNIQ_KEY\x01\x02",
    b"a",
    b"key-1",
    b"Tx",
    b"K",
    b"U",
    "\u00e9t\u00e9".encode(),
    "\u4e2d".encode(),
    "\U0001f600".encode(),
    b"\xff",
    b"\xc3",
    b"\x80",
    b"\xed\xa0\x80",
    b"\x00",
    b"T",
    b"TAGS\x01TAGS\x01",
    b"\xc0\xaf",
    b"\xe0\x80\x80",
    b"\xe0\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xf4\x8f\xbf\xbf",
    b"\xf0\x9f\x98",
    b"\xef\xbf\xbf",
    b"\xed\x9f\xbf",
    b"\xf5\x80\x80\x80",
    b"\xc2",
]


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def _batch(rnd: random.Random, n: int, ascii_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` PROPERTIES drawn from the edges, in one buffer with junk between them."""
    tokens = [t for t in _TOKENS if t.isascii()] if ascii_only else _TOKENS
    buf, ps, pl = bytearray(), [], []
    for _ in range(n):
        buf += rnd.randbytes(rnd.randrange(0, 3))
        p = b"".join(rnd.choice(tokens) for _ in range(rnd.choice((0, 1, 3, 8, 30))))
        ps.append(len(buf))
        pl.append(len(p))
        buf += p
    return np.frombuffer(bytes(buf), np.uint8), np.array(ps, np.int64), np.array(pl, np.int64)


def _both(monkeypatch, arr, ps, pl, indexable, tid, prefix):
    """(reference, C) Properties of one batch: tagsCodes, grouped keys, per-message keys."""
    names = [f"t{i}".encode() for i in range(prefix.size)]
    out = []
    for pure in (True, False):
        monkeypatch.setattr(FAST_PATHS, "pure", pure)
        pr = Properties(arr, ps, pl)
        keys = pr.index_keys(tid, prefix, indexable, names)
        texts = [keys.text(x) for x in range(keys.owner.size)]
        pr2 = Properties(arr, ps, pl, checks=False)
        tags = pr2.tags_code
        got = pr2.compiled_keys(indexable, tid, prefix)
        if got is None:  # the reference: key_ranges in record order, as rebuild puts them
            owner, a, b = pr2.key_ranges(indexable)
            order = stable_argsort(owner)
            got = owner[order], a[order], b[order]
        out.append((pr.tags_code, tags, keys.owner, keys.hash, texts, got[:3]))
    return out


@pytest.mark.parametrize("seed", range(10))
def test_prop_keys_equal_the_reference_on_hostile_properties(K, monkeypatch, seed):
    rnd = random.Random(seed)
    arr, ps, pl = _batch(rnd, rnd.choice((60, 400)), ascii_only=seed % 2 == 0)
    n = ps.size
    rng = np.random.default_rng(seed)
    indexable = rng.random(n) < 0.8
    prefix = rng.integers(0, 1 << 32, 5, dtype=np.uint64)
    tid = rng.integers(0, prefix.size, n)
    ref, c = _both(monkeypatch, arr, ps, pl, indexable, tid, prefix)
    for r, x in zip(ref[:4], c[:4], strict=True):
        assert r.dtype == x.dtype and np.array_equal(r, x)
    assert ref[4] == c[4]
    for r, x in zip(ref[5], c[5], strict=True):
        assert np.array_equal(r, x)
    assert ref[2].size  # keys were there to compare


def test_prop_keys_utf16_hashes_and_word_splits(K, monkeypatch):
    """Known values: hashCode of "中" is 20013; "topic#" + key over UTF-16; KEYS words."""
    props = "TAGS\x01\u4e2d\x02KEYS\x01 a  b \x02UNIQ_KEY\x01\U0001f600\x02".encode()
    arr = np.frombuffer(props, np.uint8)
    monkeypatch.setattr(FAST_PATHS, "pure", False)
    pr = Properties(arr, np.array([0]), np.array([len(props)]))
    from rmqstore_cli.store.javahash import index_key_hash, java_hash

    keys = pr.index_keys(np.array([0]), np.array([java_hash("T#") & 0xFFFFFFFF], np.uint64), np.array([True]), [b"T"])
    assert pr.tags_code.tolist() == [java_hash("\u4e2d")] == [20013]
    assert [keys.text(x) for x in range(3)] == ["T#\U0001f600", "T#a", "T#b"]
    assert keys.hash.tolist() == [index_key_hash(k) for k in ("T#\U0001f600", "T#a", "T#b")]


def test_prop_keys_refuses_bad_calls(K):
    a = np.zeros(16, np.uint8)
    one, tags, rows = np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((1, K.KEY_COLS), np.int64)
    ok = (a, one, np.ones(1, np.int64), np.ones(1, bool), one, one, tags, rows)
    assert K.prop_keys(*ok) == 0
    bad = [
        (0, np.zeros(4, np.int64)),  # wrong dtype
        (1, np.array([16], np.int64)),  # runs past a's end (16 + 1)
        (1, np.array([-1], np.int64)),
        (2, np.array([-1], np.int64)),
        (2, np.array([1 << 62], np.int64)),
        (3, np.ones(2, bool)),  # lengths differ
        (4, np.zeros(1, np.int32)),
        (6, np.zeros(1, np.float64)),
        (6, np.zeros(0, np.int64)),
        (7, np.zeros(4, np.uint8)),
    ]
    for i, v in bad:
        args = list(ok)
        args[i] = v
        with pytest.raises((TypeError, ValueError)):
            K.prop_keys(*args)
    with pytest.raises((BufferError, ValueError)):  # outputs must be writable
        ro = np.zeros(1, np.int64)
        ro.flags.writeable = False
        K.prop_keys(*ok[:6], ro, rows)
    key = np.frombuffer(b"UNIQ_KEY\x01k", np.uint8)
    for t in (-1, 1, 1 << 40):  # a topic id outside the prefixes
        with pytest.raises(ValueError, match="topic id"):
            K.prop_keys(key, one, np.array([key.size]), np.ones(1, bool), np.array([t]), one, tags, rows)
    # rows past the output are counted, never written
    many = np.frombuffer(b"KEYS\x01" + b"w " * 50, np.uint8)
    guard = np.full((3, K.KEY_COLS), 7, np.int64)
    assert K.prop_keys(many, one, np.array([many.size]), np.ones(1, bool), one, one, tags, guard[:2]) == 50
    assert (guard[2] == 7).all()


def _files(root) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and "commitlog" not in p.parts
    }


def _both_paths(monkeypatch, tmp_path, d, conf) -> tuple[list, list]:
    """verify JSON (plain and --deep) and rebuild-index's files, reference then C loop."""
    extra = ["--broker-conf", str(conf)] if conf else []
    verdicts, rebuilt = [], []
    for pure in (True, False):
        monkeypatch.setattr(FAST_PATHS, "pure", pure)
        runs = [
            json.loads(without_loops(cli("verify", "--store", d, *extra, "--format", "json", *deep).stdout))
            for deep in ([], ["--deep"])
        ]
        verdicts.append(runs)
        out = tmp_path / f"rebuilt-{pure}"
        r = cli("rebuild-index", "--store", d, *extra, "--output", out)
        assert r.exit_code == 0, r.output
        rebuilt.append(_files(out))
    return verdicts, rebuilt


@pytest.mark.slow
def test_verify_and_rebuild_index_alike_on_both_paths_generated(monkeypatch, tmp_path):
    """A generated store (several KEYS a message, shared keys, delays): verify's findings and
    summary with and without --deep, and rebuild-index's consume queues and index files byte
    for byte, the same with the C loop as with the reference."""
    needs_c()
    s = generate(tmp_path / "s", "--keys-per-message", "3", messages=3000, seed=11)
    (verdicts, rebuilt) = _both_paths(monkeypatch, tmp_path, s, None)
    assert verdicts[0] == verdicts[1] and verdicts[1][1]["summary"]["messages"] >= 3000
    assert rebuilt[0] == rebuilt[1] and any(k.startswith("index") for k in rebuilt[1])
    idx = sorted((s / "index").iterdir())[0]  # entries zeroed: findings per key of their messages
    raw = bytearray(idx.read_bytes())
    raw[len(raw) // 2 :] = bytes(len(raw) - len(raw) // 2)
    idx.write_bytes(bytes(raw))
    deep = []
    for pure in (True, False):
        monkeypatch.setattr(FAST_PATHS, "pure", pure)
        deep.append(json.loads(without_loops(cli("verify", "--store", s, "--deep", "--format", "json").stdout)))
    assert deep[0] == deep[1] and "index.missing-key" in {f["check"] for f in deep[1]["findings"]}


@pytest.mark.parametrize("sample", ["4.9.7", "5.3.3", "lmq", "dledger"])
def test_verify_deep_and_rebuild_index_alike_on_both_paths_real_broker(sample, sample_tarball, monkeypatch, tmp_path):
    """The real-broker stores (their keys and TAGS as the broker's clients set them)."""
    needs_c()
    d = fixture_dir(sample) if sample[0].isdigit() else sample_tarball(sample)
    (verdicts, rebuilt) = _both_paths(monkeypatch, tmp_path, d / "store", d / "broker.conf")
    assert verdicts[0] == verdicts[1] and verdicts[1][1]["summary"]["messages"] > 0
    assert rebuilt[0] == rebuilt[1] and any(k.startswith("index") for k in rebuilt[1])


@pytest.mark.parametrize("seed", range(8))
def test_prop_scan_gives_the_reference_pairs_on_hostile_properties(K, monkeypatch, seed):
    """``prop_scan`` (the pair scan of :class:`Properties`, ``string2messageProperties``'
    split) against the numpy scan: pairs, owners, ends, every \\x01 and the first after each
    pair start, spaces, bytes >= 0x80, and what follows from them (suspects, simple, values)."""
    rnd = random.Random(100 + seed)
    arr, ps, pl = _batch(rnd, rnd.choice((60, 400)), ascii_only=seed % 2 == 0)
    got = []
    for pure in (True, False):
        monkeypatch.setattr(FAST_PATHS, "pure", pure)
        for checks in (True, False):
            pr = Properties(arr, ps, pl, checks=checks)
            got.append(
                [pr.starts, pr.owner, pr.end, pr.spaces, pr.hp, pr.value(b"TAGS\x01")[2]]
                + ([pr.ones, pr.first1, pr.suspects(), pr.simple()] if checks else [])
            )
    for ref, c in ((got[0], got[2]), (got[1], got[3])):
        assert len(ref) == len(c)
        for r, x in zip(ref, c, strict=True):
            assert r.dtype == x.dtype and np.array_equal(r, x)
    assert got[0][0].size and got[0][3].size and got[0][5].size


def test_prop_scan_refuses_bad_calls_and_counts_past_its_room(K):
    a = np.frombuffer(b"A\x01b\x02C\x01 d\xc3\xa9\x02", np.uint8)
    z = np.zeros(0, np.int64)
    assert K.prop_scan(a, np.array([0]), np.array([a.size]), a.size, *[z] * 7) == (2, 1, 2, 2)
    outs = [np.full(4, 7, np.int64) for _ in range(7)]
    assert K.prop_scan(a, np.array([0]), np.array([a.size]), a.size, *outs) == (2, 1, 2, 2)
    assert [o[:2].tolist() for o in outs] == [[1, 5], [6, 7], [8, 9], [0, 4], [0, 0], [3, 10], [1, 5]]
    assert all((o[2:] == 7).all() for o in outs) and outs[1][1] == 7  # beyond the counts: untouched
    small = [np.full(1, 7, np.int64) for _ in range(7)]
    small[6] = np.zeros(0, np.int64)  # room for no pair: none written, all counted
    assert K.prop_scan(a, np.array([0]), np.array([a.size]), a.size, *small) == (2, 1, 2, 2)
    assert small[3][0] == 7 and small[4][0] == 7 and small[0][0] == 1
    for moff, pl in (([0], [a.size + 1]), ([-1], [1]), ([1], [-1]), ([1 << 62], [1 << 62]), ([0, 0], [1])):
        with pytest.raises(ValueError):
            K.prop_scan(a, np.array(moff), np.array(pl), a.size, *[z] * 7)
    with pytest.raises(TypeError):
        K.prop_scan(a, np.array([0], np.int32), np.array([1]), a.size, *[z] * 7)
    with pytest.raises(TypeError):
        K.prop_scan(a, np.array([0]), np.array([1]), a.size, *[z] * 6, np.zeros(2, np.float64))


@pytest.mark.parametrize("most", [1, 2, 5, 16, 17, 40])
def test_repeated_names_found_by_neighbours_as_by_a_sort(most):
    """``simple``'s repeated-name test compares each pair with the next ``most`` - 1 (pairs of a
    message lie together); past NEAR_PAIRS it sorts: the same keys either way, as the sort of
    every key finds them, for messages of 0 to ``most`` pairs drawn from few names."""
    from rmqstore_cli.store.records.properties import repeated_keys

    rng = np.random.default_rng(most)
    per = rng.integers(0, most + 1, 300)
    per[0] = most
    owner = np.repeat(np.arange(per.size), per).astype(np.int64)
    key = owner << 48 | rng.integers(0, 6, owner.size)
    s = np.sort(key)
    want = np.unique(s[1:][s[1:] == s[:-1]])
    got = repeated_keys(key, most)
    assert np.array_equal(np.unique(got), want)
    assert most < 3 or want.size  # the draw does repeat names
