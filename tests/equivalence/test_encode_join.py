"""generate's record join (``encode_join``, ``_cencode.c``) against its twin of the same name in
store/commitlog/blocks.py: the same bytes for random blocks (every pair of host kinds, empty,
long and compressed-looking bodies, empty and longest properties, groups with no rows), and
the same refusals (a ValueError or TypeError, never a read outside a buffer) for wrong calls.
BODYCRC is ``UtilAll#crc32`` masked to 31 bits, as ``MessageExtEncoder#encode`` stores it."""

from __future__ import annotations

import random
import struct
import zlib

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import HEAD, PROPERTIES_LENGTH

from rmqstore_cli.store.commitlog import blocks as B
from tests.helpers import needs_c

CRC_AT, PLEN = HEAD["body_crc"].offset, PROPERTIES_LENGTH.size


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def block(rng: random.Random, n: int, sizes=(60, 72, 72, 84)) -> tuple:
    """A random call: ``n`` records over the four groups (some may be empty)."""
    grp = np.array([rng.choice([0, 0, 1, 2, 3]) for _ in range(n)], np.int64)
    fixed = [np.frombuffer(rng.randbytes(s * int((grp == g).sum())), np.uint8) for g, s in enumerate(sizes)]
    body_len = [rng.choice([0, 1, 7, 63, 64, 65, 256, 3000, 20000]) for _ in range(n)]
    bodies = [rng.randbytes(k) for k in body_len]
    parts = [rng.randbytes(rng.randint(1, 20)) for _ in range(7)]
    pidx = np.array([rng.randrange(len(parts)) for _ in range(n)], np.int64)
    props = [rng.randbytes(rng.choice([0, 1, 100, 32767])) for _ in range(n)]
    return fixed, np.array(sizes, np.int64), grp, bodies, parts, pidx, props


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n", [0, 1, 5, 300])
def test_the_c_join_is_the_twin(K, seed, n):
    args = block(random.Random(seed * 1000 + n), n)
    assert K.encode_join(*args, CRC_AT, PLEN) == B.encode_join(*args, CRC_AT, PLEN)


def test_a_record_is_its_row_crc_body_topic_length_and_properties(K):
    fixed = [np.arange(12, dtype=np.uint8), np.zeros(0, np.uint8)]
    args = (fixed, np.array([12, 16], np.int64), np.array([0], np.int64), [b"body"], [b"\x01T"])
    want = bytes(range(8)) + struct.pack(">I", zlib.crc32(b"body") & 0x7FFFFFFF) + b"body\x01T\x00\x03a=b"
    for join in (K.encode_join, B.encode_join):
        assert join(*args, np.array([0], np.int64), [b"a=b"], CRC_AT, PLEN) == want


@pytest.mark.parametrize(
    "bad",
    [
        {"grp": np.array([4, 0, 0], np.int64)},  # no such group
        {"grp": np.array([-1, 0, 0], np.int64)},
        {"pidx": np.array([0, 9, 0], np.int64)},  # no such topic part
        {"pidx": np.array([0, 0], np.int64)},  # shorter than the records
        {"props": [b"", b"", b"x" * 32768]},  # longer than PROPERTIESLENGTH holds
        {"bodies": [b"", b""]},
        {"gsize": np.array([10, 72, 72, 84], np.int64)},  # rows end before BODYCRC
        {"gsize": np.array([61, 72, 72, 84], np.int64)},  # rows of another size than given
    ],
)
def test_a_wrong_call_raises_on_both(K, bad):
    fixed, gsize, grp, bodies, parts, pidx, props = block(random.Random(5), 3)
    grp[:] = 0
    fixed = [np.zeros(60 * 3, np.uint8), *(np.zeros(0, np.uint8) for _ in range(3))]
    args = {"fixed": fixed, "gsize": gsize, "grp": grp, "bodies": bodies, "parts": parts, "pidx": pidx}
    args |= {"props": props} | bad
    for join in (K.encode_join, B.encode_join):
        with pytest.raises(ValueError):
            join(*args.values(), CRC_AT, PLEN)


def test_the_c_join_refuses_what_is_not_bytes(K):
    fixed, gsize, grp, bodies, parts, pidx, props = block(random.Random(2), 3)
    with pytest.raises(TypeError):
        K.encode_join(fixed, gsize, grp, [*bodies[:2], "text"], parts, pidx, props, CRC_AT, PLEN)
    with pytest.raises(TypeError):
        K.encode_join(fixed, gsize, grp.astype(np.int32), bodies, parts, pidx, props, CRC_AT, PLEN)
