"""store/javahash/bulk.py (hashCode of many UTF-8 ranges at once) against the reference
``javahash.java_hashes`` and ``message.java_hash`` (String#hashCode over UTF-16 units of
``new String(bytes, UTF_8)``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rmqstore_cli.store.javahash import bulk as javahash, java_hash
from rmqstore_cli.store.javahash.bulk import java_hashes, java_int

ALPHABET = "abcXYZ09 #-_" + "磁龟支付é" + "\u07ff\u0800\uffff" + "🎉😀\U0010ffff" + "\x00\x7f"
# lead and continuation bytes that make malformed UTF-8 (overlong, surrogate, > U+10FFFF, truncated)
BAD_BYTES = [0x41, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xE0, 0xED, 0xA0, 0x9F, 0xF0, 0xF4, 0x8F, 0x90, 0xF5, 0xFF, 0xE4, 0xB8]


def _layout(parts: list[bytes], rnd: random.Random) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``parts`` placed in one byte array with random bytes between them: (units, a, b)."""
    buf, a, b = bytearray(), [], []
    for p in parts:
        buf += bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 3)))
        a.append(len(buf))
        buf += p
        b.append(len(buf))
    buf += bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 3)))
    return np.frombuffer(bytes(buf), np.uint8), np.array(a, np.int64), np.array(b, np.int64)


def _random_parts(rnd: random.Random, bad: bool) -> list[bytes]:
    parts = []
    for _ in range(rnd.randint(1, 60)):
        if bad and rnd.random() < 0.3:
            parts.append(bytes(rnd.choice(BAD_BYTES) for _ in range(rnd.randint(0, 8))))
        else:
            n = rnd.randint(0, 40) if rnd.random() < 0.9 else rnd.randint(100, 300)
            parts.append("".join(rnd.choice(ALPHABET) for _ in range(n)).encode())
    return parts


@pytest.mark.parametrize("bad", [False, True])
def test_range_hashes_equal_the_reference(bad):
    rnd = random.Random(11 + bad)
    for _ in range(200):
        parts = _random_parts(rnd, bad)
        units, a, b = _layout(parts, rnd)
        h, lens = javahash.java_range_hashes(units, a, b)
        want_h, want_len = java_hashes(parts)
        assert h.dtype == np.uint32
        assert h.tolist() == want_h.tolist()
        assert lens.tolist() == want_len.tolist()


def test_range_hashes_equal_java_hash_of_the_decoded_text():
    texts = [
        "",
        "a",
        "AaAa",
        "BBBB",
        "支付标签",
        "订单-32771",
        "T#emoji-🎉",
        "\U0001f600" * 3,
        "é",
        "\x7f\x01",
        "x" * 500,
        "mixed ascii 和 中文 and 🎉",
    ] * 3
    parts = [t.encode() for t in texts]
    units, a, b = _layout(parts, random.Random(3))
    h, lens = javahash.java_range_hashes(units, a, b)
    assert java_int(h).tolist() == [java_hash(t) for t in texts]
    assert lens.tolist() == [len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts]


def test_well_formed_non_ascii_is_decoded_without_the_per_string_path(monkeypatch):
    """The batch decode, not the reference, handles well-formed text (else no speed-up)."""
    calls = []
    replaced = javahash._replaced_hashes
    monkeypatch.setattr(javahash, "_replaced_hashes", lambda xs: calls.append(xs) or replaced(xs))
    texts = ["支付标签", "a🎉b", "é", "abc", "\U0010ffff", "\u07ff\u0800\uffff"] * 20
    parts = [t.encode() for t in texts]
    units, a, b = _layout(parts, random.Random(4))
    h, _ = javahash.java_range_hashes(units, a, b)
    assert java_int(h).tolist() == [java_hash(t) for t in texts]
    assert calls == []


def test_a_range_cut_inside_a_character_is_not_taken_for_whole_characters():
    """Two ranges splitting one character between them: the join of the two decodes, but
    each alone is malformed (U+FFFD per the decoder), which the first-byte check catches."""
    raw = "x支y".encode()  # 支 = e6 94 af
    units = np.frombuffer(raw, np.uint8)
    a, b = np.array([0, 3]), np.array([3, len(raw)])  # "x\xe6\x94" | "\xafy"
    h, lens = javahash.java_range_hashes(units, a, b)
    want = [raw[0:3].decode("utf-8", "replace"), raw[3:].decode("utf-8", "replace")]
    assert java_int(h).tolist() == [java_hash(t) for t in want]
    assert lens.tolist() == [len(t) for t in want]


def test_candidates_and_high_positions_given_by_the_caller():
    rnd = random.Random(9)
    parts = _random_parts(rnd, bad=False)
    units, a, b = _layout(parts, rnd)
    high = np.flatnonzero(units >= 0x80)
    wide = np.array([i for i, p in enumerate(parts) if not p.isascii()], np.int64)
    h, lens = javahash.java_range_hashes(units, a, b, units.tobytes(), high, wide)
    want_h, want_len = java_hashes(parts)
    assert h.tolist() == want_h.tolist() and lens.tolist() == want_len.tolist()


def test_many_distinct_lengths_take_the_prefix_sum():
    parts = [("k" * n + "磁" * (n % 3)).encode() for n in range(1, 120)]
    units, a, b = _layout(parts, random.Random(2))
    assert javahash.window_hashes(units, a, b) is None
    h, lens = javahash.java_range_hashes(units, a, b)
    want_h, want_len = java_hashes(parts)
    assert h.tolist() == want_h.tolist() and lens.tolist() == want_len.tolist()


def test_empty_inputs():
    h, lens = javahash.java_range_hashes(np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert h.size == 0 and lens.size == 0
    units = np.frombuffer(b"abc", np.uint8)
    h, lens = javahash.java_range_hashes(units, np.array([1, 3]), np.array([1, 3]))
    assert h.tolist() == [0, 0] and lens.tolist() == [0, 0]
