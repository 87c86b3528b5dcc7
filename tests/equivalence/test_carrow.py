"""export's C text loops (``host_texts``, ``hex_ranges``: rmqstore_cli/store/_carrow.c through
store/files/kernels.py) against their twins (rmqstore_cli/store/records/texts.py) on hostile
input: every IPv6 shape RFC 5952 compresses differently (zero runs at either end, two runs of
one length, single zero hextets), IPv4-mapped addresses, ports a corrupt record may hold,
ranges at and past the end of the buffer, buffers too small. Same bytes, same return value,
the same ValueError."""

from __future__ import annotations

import ipaddress
import random

import numpy as np
import pytest

from rmqstore_cli.store.records import texts
from tests.helpers import needs_c


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def _v6_shapes(rng: random.Random) -> list[bytes]:
    """Addresses whose compressed text is easy to get wrong, then random ones with zero hextets."""
    fixed = [
        "::",
        "::1",
        "1::",
        "1:0:0:2:0:0:0:3",
        "1:0:0:2:0:0:3:4",
        "0:1:0:1:0:1:0:1",
        "fe80::1:0:0:1",
        "2001:db8::ff00:42:8329",
        "0:0:1::",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "1:2:3:4:5:6:7:0",
    ]
    out = [ipaddress.IPv6Address(x).packed for x in fixed]
    for _ in range(300):
        out.append(
            b"".join(
                rng.choice([b"\0\0", b"\0\0", b"\0\1", b"\x10\0", bytes(rng.randrange(256) for _ in range(2))])
                for _ in range(8)
            )
        )
    return out


def _both(fn: str, K, *args):
    """(return or error text, out bytes, offsets) of the C loop and of the twin."""
    got = []
    for loop in (getattr(K, fn), getattr(texts, fn)):
        out, off = np.zeros(args[-2], np.uint8), np.zeros(args[-1], np.int32)
        try:
            r = loop(*args[:-2], out, off)
        except ValueError as e:
            r = str(e)
        got.append((r, out.tobytes(), off.tolist()))
    return got


def _hosts(K, a: np.ndarray, at, size, port, room: int | None = None):
    n = len(at)
    args = [np.asarray(x, np.int64) for x in (at, size, port)]
    return _both("host_texts", K, a, *args, n * texts.HOST_MAX if room is None else room, n + 1)


def test_host_texts_are_the_record_layers_ip_colon_port(K):
    rng = random.Random(35)
    v6 = _v6_shapes(rng)
    v4 = [bytes([0, 0, 0, 0]), bytes([255, 255, 255, 255]), bytes([10, 0, 0, 200]), bytes([1, 22, 133, 4])]
    a = np.frombuffer(b"".join(v4 + v6), np.uint8)
    size = [4] * len(v4) + [16] * len(v6)
    at = np.cumsum([0] + size[:-1])
    ports = [0, 9, 10, 65535, 65536, -1, -2147483648, 2147483647, 10911]
    port = [ports[i % len(ports)] for i in range(len(size))]
    c, twin = _hosts(K, a, at, size, port)
    assert c == twin and c[0] > 0
    want = [f"{texts.address_text(bytes(a[p : p + s]))}:{q}" for p, s, q in zip(at, size, port, strict=True)]
    off = c[2]
    assert [c[1][off[i] : off[i + 1]].decode() for i in range(len(want))] == want
    assert "[::]:0" in want[len(v4)] or want[len(v4)].startswith("[::]")


def test_a_v4_mapped_address_is_left_to_the_caller_and_bad_input_raises(K):
    mapped = ipaddress.IPv6Address("::ffff:1.2.3.4").packed
    a = np.frombuffer(bytes([1, 2, 3, 4]) + mapped, np.uint8)
    assert _hosts(K, a, [0, 4], [4, 16], [1, 2])[0][0] == -1
    assert _hosts(K, a, [0, 4], [4, 16], [1, 2])[1][0] == -1
    for at, size in (([0], [5]), ([-1], [4]), ([17], [4]), ([5], [16]), ([0], [0])):
        c, twin = _hosts(K, a, at, size, [1])
        assert c == twin and isinstance(c[0], str) and "record 0" in c[0]
    c, twin = _hosts(K, a, [0, 0], [4, 4], [1, 1], room=texts.HOST_MAX + 3)
    assert c == twin and "record 1: out is too small" in c[0]
    assert _hosts(K, a, [], [], []) == [(0, b"", [0])] * 2
    with pytest.raises(ValueError):
        K.host_texts(
            a,
            np.zeros(2, np.int64),
            np.zeros(1, np.int64),
            np.zeros(2, np.int64),
            np.zeros(200, np.uint8),
            np.zeros(3, np.int32),
        )


def test_hex_ranges_are_upper_hex_of_each_values_ranges(K):
    rng = random.Random(7)
    a = np.frombuffer(bytes(rng.randrange(256) for _ in range(500)), np.uint8)
    for k in (1, 2, 3):
        n = 40
        ln = np.array([rng.choice([0, 1, 4, 8, 16, 20]) for _ in range(n * k)], np.int64)
        at = np.array([rng.randrange(0, 500 - x + 1) for x in ln], np.int64)
        c, twin = _both("hex_ranges", K, a, at, ln, 2 * int(ln.sum()), n + 1)
        assert c == twin and c[0] == 2 * ln.sum()
        want = [
            b"".join(a[p : p + s].tobytes() for p, s in zip(at[i * k : i * k + k], ln[i * k : i * k + k], strict=True))
            .hex()
            .upper()
            for i in range(n)
        ]
        assert [c[1][c[2][i] : c[2][i + 1]].decode() for i in range(n)] == want
    for at, ln, room in (([499], [2], 8), ([-1], [1], 8), ([0], [-1], 8), ([0], [5], 9), ([500], [0], 8)):
        c, twin = _both("hex_ranges", K, a, np.array(at, np.int64), np.array(ln, np.int64), room, 2)
        assert c == twin
        assert (c[0] == 0) if ln == [0] else ("range 0" in c[0])
    c, twin = _both("hex_ranges", K, a, np.zeros(3, np.int64), np.ones(3, np.int64), 8, 3)
    assert c == twin and "k ranges" in c[0]


def _split_both(K, props: list[bytes], eligible=None, rows: tuple[int, int] | None = None):
    """prop_split of the C loop and of the twin over records ``props`` laid end to end."""
    from rmqstore_cli.pipeline.arrow_block import _NAMES, _SEPS

    a = np.frombuffer(b"".join(props) + b"pad", np.uint8)
    ln = np.array([len(p) for p in props], np.int64)
    at = np.cumsum(ln) - ln
    n, tot = len(props), int(ln.sum())
    cap = rows or (tot // 3 + 1, tot // 2 + n)
    got = []
    for loop in (K.prop_split, texts.prop_split):
        plain = np.ones(n, np.uint8) if eligible is None else np.array(eligible, np.uint8)
        outs = [np.full(n, 7, np.int64), np.full(n, 7, np.int64), np.full((n, 2), 7, np.int64)]
        outs.append(np.full((n, 2), 7, np.int64))
        prow, wrow = np.full((cap[0], 4), 7, np.int64), np.full((cap[1], 2), 7, np.int64)
        r = loop(a, at, ln, _SEPS, _NAMES, plain, *outs, prow, wrow)
        got.append((r, plain.tolist(), [o.tolist() for o in outs], prow[: r[0]].tolist(), wrow[: r[1]].tolist()))
    return got


def test_prop_split_cuts_as_the_broker_and_leaves_what_it_cannot(K):
    """Plain records (pairs kept as string2messageProperties keeps them, TAGS, UNIQ_KEY, KEYS words
    with empty words dropped) and every kind the reference must take: a NUL, malformed UTF-8
    (overlong, surrogate, past U+10FFFF, cut short), a name twice, more than PROPS_CAP pairs."""
    rng = random.Random(5)
    props = [
        b"",
        b"\x02",
        b"KEYS\x01a  b \x02TAGS\x01t\x02UNIQ_KEY\x01U1\x02",
        b"KEYS\x01 \x02TAGS\x01\xe6\x94\xaf\x02",
        b"a\x01b\x02\x02\x01c\x02d\x01\x02e\x01f\x01g\x02x",
        b"a\x01b\x02a\x01c",
        b"ab\x01b\x02a\x01c\x02abc\x01d",
        b"a\x01\x00",
        b"a\x01\xc0\x80",
        b"a\x01\xed\xa0\x80",
        b"a\x01\xf4\x90\x80\x80",
        b"a\x01\xe6\x94",
        b"TAGS\x01\xf0\x9f\x98\x80x\x02KEYS\x01k1 k2",
        b"".join(b"n%d\x01v\x02" % i for i in range(texts.PROPS_CAP)),
        b"".join(b"n%d\x01v\x02" % i for i in range(texts.PROPS_CAP + 1)),
        b"KEYS" * 3 + b"\x01long value without separators " * 3,
    ]
    alphabet = [b"\x01", b"\x02", b" ", b"a", b"K", b"KEYS", b"TAGS", b"\xc3\xa9", b"\xff", b"\x00", b"UNIQ_KEY"]
    props += [b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(400)]
    c, twin = _split_both(K, props)
    assert c == twin
    plain = c[1]
    assert plain[:5] == [1, 1, 1, 1, 1] and plain[5:12] == [0, 1, 0, 0, 0, 0, 0] and plain[12:15] == [1, 1, 0]
    assert 0 < sum(plain[16:]) < 400
    # a record not eligible (its topic is not UTF-8) gets no rows; too few rows leave records out
    c, twin = _split_both(K, props[:5], eligible=[1, 0, 1, 0, 1])
    assert c == twin and c[1] == [1, 0, 1, 0, 1]
    c, twin = _split_both(K, props[2:5], rows=(4, 1))
    assert c == twin and c[1] == [0, 1, 1]


def test_prop_split_raises_on_a_record_outside_the_buffer(K):
    from rmqstore_cli.pipeline.arrow_block import _NAMES, _SEPS

    a = np.zeros(10, np.uint8)
    for at, ln in (([8], [3]), ([-1], [1]), ([0], [-1])):
        for loop in (K.prop_split, texts.prop_split):
            one = np.zeros(1, np.int64)
            with pytest.raises(ValueError, match="record 0: PROPERTIES outside a"):
                loop(
                    a,
                    np.array(at, np.int64),
                    np.array(ln, np.int64),
                    _SEPS,
                    _NAMES,
                    np.ones(1, np.uint8),
                    one,
                    one.copy(),
                    np.zeros((1, 2), np.int64),
                    np.zeros((1, 2), np.int64),
                    np.zeros((4, 4), np.int64),
                    np.zeros((4, 2), np.int64),
                )
