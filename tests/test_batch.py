"""The columnar helpers (store/batch.py) against the per-record engine functions.

``java_hash``/``index_key_hash`` (store/message.py), ``parse_properties``
(MessageDecoder#string2messageProperties) and ``check_message``
(CommitLog#checkMessageAndReturnSize) are the references; the vectorised code used by
rebuild-index and verify must agree with them on every input.
"""
from __future__ import annotations

import base64
import json
import mmap
import random
import struct

import numpy as np
import pytest

from conftest import cli, fixture_dir, generate
from rmqstore_cli.formats.properties import parse_properties
from rmqstore_cli.store import batch
from rmqstore_cli.store.commitlog import CommitLog, Status, check_message
from rmqstore_cli.store.config import StoreConfig
from rmqstore_cli.store.message import index_key_hash, java_hash

# "AuditTopic#minhash-280000磁龟".hashCode() == Integer.MIN_VALUE (IndexFile#indexKeyHashMethod -> 0)
MIN_VALUE_KEY = "AuditTopic#minhash-280000磁龟"

TEXTS = ["", "a", "AaAa", "BBBB", "PaymentTopic#order-1", "x" * 300, "支付标签", "T#emoji-🎉", "\U0001F600" * 3,
         "mixed ascii 和 中文 and 🎉 again", MIN_VALUE_KEY, "Topic#" + "k" * 1000, "é", "\x7f\x01\x02"]
BAD_UTF8 = [b"\xff", b"ab\xc3", b"\xed\xa0\x80x", b"key-\xe4\xb8", b"\xf0\x9f\x8e", b"ok\x80\x80ok"]


def _random_texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "abcXYZ09 #-_" + "磁龟支付é" + "🎉😀"
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))) for _ in range(n)]


# ---------------------------------------------------------------- hashes

def test_java_hashes_match_java_hash_and_utf16_length():
    texts = TEXTS + _random_texts(500, 1)
    h, lens = batch.java_hashes([t.encode() for t in texts])
    assert batch.java_int(h).tolist() == [java_hash(t) for t in texts]
    assert lens.tolist() == [len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts]


def test_java_hashes_decode_bad_utf8_like_the_broker():
    """Bad bytes become U+FFFD, as ``new String(bytes, UTF_8)`` makes them."""
    h, lens = batch.java_hashes(BAD_UTF8 + [b"fine"])
    want = [b.decode("utf-8", "replace") for b in BAD_UTF8] + ["fine"]
    assert batch.java_int(h).tolist() == [java_hash(t) for t in want]
    assert lens.tolist() == [len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in want]


def test_java_hashes_empty_inputs():
    h, lens = batch.java_hashes([])
    assert h.size == 0 and lens.size == 0
    h, lens = batch.java_hashes([b"", b""])
    assert h.tolist() == [0, 0] and lens.tolist() == [0, 0]


def test_index_hashes_match_index_key_hash_including_min_value():
    assert java_hash(MIN_VALUE_KEY) == -(1 << 31)
    keys = TEXTS + _random_texts(300, 2) + [f"Topic#k-{i}" for i in range(200)]
    got = batch.index_hashes([k.encode() for k in keys]).tolist()
    assert got == [index_key_hash(k) for k in keys]
    assert got[TEXTS.index(MIN_VALUE_KEY)] == 0
    assert all(x >= 0 for x in got)


def test_concat_hashes_is_hash_of_the_concatenation():
    texts = _random_texts(200, 3)
    prefixes = [t[: len(t) // 2] + "#" for t in texts]
    rests = [t[len(t) // 2:] for t in texts]
    hp, _ = batch.java_hashes([p.encode() for p in prefixes])
    hr, lr = batch.java_hashes([r.encode() for r in rests])
    got = batch.java_int(batch.concat_hashes(hp, lr, hr)).tolist()
    assert got == [java_hash(p + r) for p, r in zip(prefixes, rests)]


def test_range_hashes_of_arbitrary_ranges():
    rnd = random.Random(4)
    data = bytes(rnd.randrange(32, 127) for _ in range(5000))
    a = np.array([rnd.randrange(0, 5000) for _ in range(400)], np.int64)
    b = np.minimum(a + np.array([rnd.randrange(0, 300) for _ in range(400)], np.int64), 5000)
    got = batch.java_int(batch.RangeHashes(np.frombuffer(data, np.uint8))(a, b)).tolist()
    assert got == [java_hash(data[x:y].decode()) for x, y in zip(a.tolist(), b.tolist())]


def test_pow31_tables_are_inverse_powers():
    fw, bw = batch.pow31_tables(3000)
    assert fw.size >= 3000 and bw.size >= 3000
    assert [int(x) for x in fw[:5]] == [1, 31, 961, 29791, 923521]
    assert int(fw[2999]) == pow(31, 2999, 1 << 32)
    assert np.all(fw[:3000] * bw[:3000] == 1)


# ---------------------------------------------------------------- gather, release

def test_gather_reads_big_endian_and_clips():
    raw = bytes(range(256)) * 4
    a = np.frombuffer(raw, np.uint8)
    pos = np.array([0, 5, 100, 1016], np.int64)
    for width, dt, fmt in ((1, "i1", "b"), (2, ">i2", ">h"), (4, ">i4", ">i"), (4, ">u4", ">I"), (8, ">i8", ">q")):
        got = batch.gather(a, pos, width, dt)
        assert got.dtype.isnative
        assert got.tolist() == [struct.unpack_from(fmt, raw, p)[0] for p in pos.tolist()]
    assert batch.gather(a, np.array([len(raw) + 10], np.int64), 4, ">i4").size == 1  # clipped, no IndexError
    assert batch.gather(a, np.zeros(0, np.int64), 8, ">i8").size == 0


def test_release_pages_keeps_the_data_and_returns_the_mark(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(256)) * (4 * mmap.PAGESIZE // 256))
    with open(p, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        before = mm[:]
        assert batch.release_pages(mm, 0, 2 * mmap.PAGESIZE + 17) == 2 * mmap.PAGESIZE
        assert batch.release_pages(mm, 2 * mmap.PAGESIZE, 100) == 2 * mmap.PAGESIZE  # nothing to do
        assert mm[:] == before
        mm.close()
    assert batch.release_pages(b"not a mapping", 0, 1 << 20) == 1 << 20


# ---------------------------------------------------------------- stores: vectorised vs per record

def _messages(store, conf=None):
    cfg = StoreConfig.load(store, conf)
    cfg.infer_sizes()
    cl = CommitLog(cfg)
    try:
        return list(cl.scan(skip_mismatch=True, every_file=True))
    finally:
        cl.close()


def _check_store_hashes(store, conf=None) -> int:
    msgs = _messages(store, conf)
    assert msgs
    tags = [m.properties.get("TAGS", "") for m in msgs]
    h, _ = batch.java_hashes([t.encode("utf-8", "surrogatepass") for t in tags])
    assert batch.java_int(h).tolist() == [java_hash(t) if t else 0 for t in tags]
    keys = [f"{m.topic}#{k}" for m in msgs for k in ([m.uniq_key] if m.uniq_key else []) + list(m.keys)]
    if keys:
        assert batch.index_hashes([k.encode("utf-8", "surrogatepass") for k in keys]).tolist() == \
            [index_key_hash(k) for k in keys]
    return len(msgs)


def test_hashes_on_real_broker_fixtures(fixture):
    store, conf, _ = fixture
    assert _check_store_hashes(store, conf) > 0


def test_hashes_on_a_generated_store(small_store):
    assert _check_store_hashes(small_store) > 100
