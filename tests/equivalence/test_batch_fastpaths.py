"""The shortcuts of the bulk readers (arrays, javahash, properties, topics) against the general code they stand in for.

Each fast path must give exactly what the general path gives: range hashes by
sliding-window rows against the prefix-sum :class:`RangeHashes`, the UTF-16 hash cache of
``java_hashes`` against ``message.java_hash``, and ``Properties`` on PROPERTIES whose
pairs do or do not hold one \\x01 each (the interleaving shortcut for ``first1``).
"""

from __future__ import annotations

import random

import numpy as np
from rmqstore_cli.formats.properties import parse_properties

from rmqstore_cli.store.files import arrays
from rmqstore_cli.store.javahash import bulk as javahash, java_hash
from rmqstore_cli.store.records import properties, topics


def test_window_hashes_equal_the_prefix_sum_hashes():
    rng = np.random.default_rng(3)
    units = rng.integers(0, 256, 50_000).astype(np.uint8)
    full = javahash.RangeHashes(units)
    seen_none = seen_hash = 0
    for _ in range(200):
        n = int(rng.integers(0, 400))
        width = int(rng.choice([1, 2, 9, 33, 80, 400]))
        a = rng.integers(0, units.size - width, n)
        b = a + rng.integers(0, width + 1, n)
        got = javahash.window_hashes(units, a, b)
        if got is None:  # too many different lengths: the caller takes the prefix sum
            seen_none += 1
            assert np.unique(b - a).size >= javahash.MAX_LENGTH_GROUPS
            continue
        seen_hash += 1
        assert got.dtype == np.uint32
        assert np.array_equal(got, full(a, b) if n else np.zeros(0, np.uint32))
    assert seen_none and seen_hash


def test_java_hashes_cache_gives_the_same_answers_again():
    texts = ["支付标签", "é", "ab\U0001f600", "tag-é-" * 30, "x", ""]
    raw = [t.encode() for t in texts] + [b"\xff\xfe", b"ok\xc3"]
    want = [java_hash(t) for t in texts] + [java_hash(b.decode("utf-8", "replace")) for b in raw[len(texts) :]]
    for _ in range(3):  # cold, warm, and after the cache was emptied
        h, lens = javahash.java_hashes(raw * 2)
        assert javahash.java_int(h).tolist() == want * 2
        assert (
            lens.tolist()
            == [len(x.decode("utf-8", "replace").encode("utf-16-be", "surrogatepass")) // 2 for x in raw] * 2
        )
        javahash._REPLACED.clear() if _ == 1 else None


def _props(pairs: list[bytes], trailing: bool) -> bytes:
    return b"\x02".join(pairs) + (b"\x02" if trailing else b"")


def test_properties_with_and_without_one_separator_per_pair():
    rnd = random.Random(9)
    names = [b"TAGS", b"KEYS", b"UNIQ_KEY", b"A", b"DELAY", b"WAIT"]
    values = [b"v", b"Pay", "支付".encode(), b"k1 k2", b"x\x01y", b"", b"12"]
    for case in range(60):
        msgs = []
        for _ in range(rnd.randint(1, 30)):
            pairs = [rnd.choice(names) + b"\x01" + rnd.choice(values) for _ in range(rnd.randint(0, 5))]
            if case % 3 == 0 and pairs:  # damage: a pair without \x01, an empty pair, a leading \x01
                pairs.insert(rnd.randrange(len(pairs)), rnd.choice([b"junk", b"", b"\x01v"]))
            msgs.append(_props(pairs, rnd.random() < 0.5))
        buf = b"".join(msgs)
        lens = np.array([len(m) for m in msgs], np.int64)
        ps = np.cumsum(lens) - lens
        pr = properties.Properties(np.frombuffer(buf, np.uint8), ps, lens, buf)
        for name in (b"TAGS", b"KEYS", b"UNIQ_KEY", b"DELAY"):
            m, x, y = pr.value(name + b"\x01")
            got = {int(i): bytes(pr.cat[u:v]) for i, u, v in zip(m, x, y, strict=True)}
            want = {}
            for i, p in enumerate(msgs):
                v = parse_properties(p.decode("utf-8", "replace")).get(name.decode())
                if v:
                    want[i] = v.encode()
            assert got == want, (case, name)
        # every pair: its end is the next \x02 or its message's end; first1 the first \x01 from its start
        cat = bytes(pr.cat)
        for s, e, f1, o in zip(pr.starts.tolist(), pr.end.tolist(), pr.first1.tolist(), pr.owner.tolist(), strict=True):
            mend = int(pr.mend[o])
            nxt = cat.find(b"\x02", s, mend)
            assert e == (nxt if nxt >= 0 else mend)
            one = cat.find(b"\x01", s)
            assert f1 == (one if one >= 0 else pr.tot)
        tags = pr.tags_code.tolist()
        for i, p in enumerate(msgs):
            t = parse_properties(p.decode("utf-8", "replace")).get("TAGS")
            assert tags[i] == (java_hash(t) if t else 0)


def test_gather_by_window_rows_equals_the_clipped_index_gather():
    rng = np.random.default_rng(4)
    a = rng.integers(0, 256, 5000).astype(np.uint8)
    for width, dtype in ((1, "i1"), (2, ">i2"), (4, ">i4"), (4, ">u4"), (8, ">i8")):
        for lo, hi in ((0, a.size - width + 1), (-20, a.size + 20)):  # inside (window rows), and past both ends
            pos = rng.integers(lo, hi, 300)
            idx = np.clip(pos[:, None] + np.arange(width), 0, a.size - 1)
            want = a[idx].view(dtype).ravel().astype(np.dtype(dtype).newbyteorder("="))
            got = arrays.gather(a, pos, width, dtype)
            assert got.dtype == want.dtype and np.array_equal(got, want)


def test_topic_ids_find_registered_topics_and_never_a_wrong_one():
    rnd = random.Random(1)
    names = [
        b"",
        b"a",
        b"Pay",
        b"PaymentTopic",
        b"PaymentTopicB",
        b"%RETRY%group-1",
        "支付".encode(),
        b"x" * 300,
        b"%RETRY%group-1-very-long-x",
        b"%RETRY%group-2-very-long-x",  # same length, head and tail
        b"12345678",
        b"123456789",
        b"1234567890123456",
        b"12345678901234567",
    ]
    misses = 0
    for trial in range(300):
        tt = topics.TopicIds()
        registered = rnd.sample(names, rnd.randint(0, len(names)))
        for i, r in enumerate(registered):
            tt.add(r, i)
        recs = [rnd.choice(names) for _ in range(rnd.randint(0, 40))]
        buf, ta, tl = b"", [], []
        for r in recs:  # random bytes around each topic: the key must use the topic's bytes only
            buf += bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 10)))
            ta.append(len(buf))
            tl.append(len(r))
            buf += r
        buf += bytes(rnd.randrange(256) for _ in range(3))
        got = tt.lookup(np.frombuffer(buf, np.uint8), np.array(ta, np.int64), np.array(tl, np.int64)).tolist()
        for r, g in zip(recs, got, strict=True):
            want = tt.ids.get(r, -1)
            # -1 (the caller's one-by-one path) is allowed only for a long topic whose key collides
            assert g == want or (g == -1 and len(r) > 16), (trial, r, g, want)
            misses += g != want
    assert misses < 50


def test_utf8_check_on_the_non_ascii_runs_equals_decoding_everything():
    rnd = random.Random(2)
    pieces = [
        b"a",
        b" ",
        b"\x02",
        "é".encode(),
        "支".encode(),
        "🎉".encode(),
        b"\xff",
        b"\xc3",
        b"\x80",
        b"\xed\xa0\x80",
        b"\xe0\x80\x80",
        b"\xf4\x90\x80\x80",
        b"\xf0\x9f",
    ]
    seen = set()
    for _ in range(5000):
        data = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 12)))
        cat = np.frombuffer(data, np.uint8)
        hp = np.flatnonzero(cat >= 0x80)
        if not hp.size:
            continue

        def valid(b: bytes) -> bool:
            try:
                b.decode("utf-8")
                return True
            except UnicodeDecodeError:
                return False

        want = valid(data)
        seen.add(want)
        assert valid(properties._non_ascii_runs(cat, hp)) == want, data
    assert seen == {True, False}


def test_stable_argsort_is_numpys_stable_argsort():
    rng = np.random.default_rng(5)
    cases = [
        np.zeros(0, np.int64),
        np.array([3]),
        rng.integers(0, 4, 1000),
        rng.integers(0, 1 << 40, 5000),
        rng.integers(0, 10, 300).astype(np.int32),
        np.array([1 << 61, 0, 1 << 61, 5]),  # too big: the fallback
        rng.integers(-5, 5, 100),
    ]  # negative: the fallback
    for x in cases:
        assert np.array_equal(arrays.stable_argsort(x), np.argsort(x, kind="stable"))


def test_malformed_strings_hash_alike_when_the_cache_overflows(monkeypatch):
    """Strings cached by an earlier call and new ones in one call past the cache's bound:
    the cache starts afresh with all of them (it used to lose the earlier ones: KeyError)."""
    monkeypatch.setattr(javahash, "_REPLACED_MAX", 4)
    javahash._REPLACED.clear()
    bad = [b"\xff" + str(i).encode() for i in range(6)]
    want = [java_hash(b.decode("utf-8", "replace")) for b in bad]
    assert javahash.java_int(javahash.java_hashes(bad[:3])[0]).tolist() == want[:3]
    assert javahash.java_int(javahash.java_hashes(bad)[0]).tolist() == want


def test_topic_ids_of_the_same_by_the_c_table_and_by_numpy(monkeypatch):
    """``TopicIds.ids_of`` (export's and the block scan's topic ids) gives the same ids, new
    topics registered in the same order, whether the C loop's table or the numpy keys find
    the known ones: empty, long, colliding-looking and negative-length topics included."""
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    rnd = random.Random(5)
    names = [b"", b"a", b"Pay", b"PaymentTopic", b"x" * 300, b"%RETRY%g-1-very-long-x", b"%RETRY%g-2-very-long-x"]
    names += [b"12345678", b"123456789", b"12345678901234567", "支付".encode(), b"\x00\xff"]
    for trial in range(60):
        recs = [rnd.choice(names) for _ in range(rnd.randint(0, 50))]
        buf, ta, tl = b"", [], []
        for r in recs:
            buf += bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 6)))
            ta.append(len(buf))
            tl.append(len(r))
            buf += r
        if recs and trial % 3 == 0:  # a negative TOPICLENGTH, as a corrupt record has
            tl[rnd.randrange(len(tl))] = -1
        a = np.frombuffer(buf, np.uint8)
        ids = []
        for pure in (False, True):
            monkeypatch.setattr(FAST_PATHS, "pure", pure)
            tt = topics.TopicIds()
            got = [tt.ids_of(buf, a, np.array(x, np.int64), np.array(y, np.int64)).tolist() for x, y in ((ta, tl),) * 2]
            ids.append((got, list(tt.names)))
        assert ids[0] == ids[1], trial
        want: list[int] = []  # ids in order of first appearance (a negative length reads as empty)
        seen: dict[bytes, int] = {}
        for at, ln in zip(ta, tl, strict=True):
            want.append(seen.setdefault(buf[at : at + ln] if ln >= 0 else b"", len(seen)))
        assert ids[0][0] == [want, want], trial
