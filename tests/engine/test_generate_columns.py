"""generate's per-block columns built by numpy (keys, the records' fixed parts and topic
heads, link codes, the writer's per-topic counts) equal the per-record loops they replaced,
kept here as the reference: the same bytes for the same draws, hostile values included."""

from __future__ import annotations

import types

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import TOPIC_LENGTH

from rmqstore_cli.store.commitlog.blocks import KIND_LINKS, SendBlock, row_bytes, topic_parts
from rmqstore_cli.store.write.workload_blocks import keys_column


def _keys_reference(o, idx: list[int], d) -> list[bytes]:
    """The per-send KEYS loop (``Workload._keys``' shape): a ``%`` a key, one list a key."""
    out = [b"order-%d" % i for i in idx]
    a, b = o.shared_key_ratio, o.shared_key_ratio + 0.05
    wide = "订单-%d".encode()
    for r, s, x in zip(d.key_r.tolist(), d.key_shared.tolist(), d.key_rand.tolist(), strict=True):
        out = [
            k + (b" shared-%d" % s_ if r_ < a else b" " + wide % i if r_ < b else b" k%d-%x" % (i, x_))
            for k, i, r_, s_, x_ in zip(out, idx, r, s, x, strict=True)
        ]
    return out


@pytest.mark.parametrize("extra", [0, 1, 3])
@pytest.mark.parametrize("ratio", [0.0, 0.2, 0.95, 1.0])
def test_keys_column_is_the_per_send_loop(extra, ratio):
    rng = np.random.default_rng(int(extra * 10 + ratio * 100))
    m = 300
    r = rng.random((extra, m))
    r[:, :4] = [ratio, ratio + 0.05, np.nextafter(ratio, 0), np.nextafter(ratio + 0.05, 0)][:4]  # the edges
    d = types.SimpleNamespace(
        key_r=r,
        key_shared=rng.integers(0, 16, (extra, m)),
        key_rand=rng.integers(0, 1 << 62, (extra, m)),
    )
    o = types.SimpleNamespace(shared_key_ratio=ratio)
    idx = np.arange(m) + (1 << 40) - 5  # long numbers too
    assert keys_column(o, idx, d).tolist() == _keys_reference(o, idx.tolist(), d)


def test_keys_column_of_no_sends():
    d = types.SimpleNamespace(key_r=np.zeros((1, 0)), key_shared=np.zeros((1, 0), int), key_rand=np.zeros((1, 0), int))
    assert keys_column(types.SimpleNamespace(shared_key_ratio=0.2), np.arange(0), d).tolist() == []


def test_row_bytes_keeps_every_byte():
    rows = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 7], [255, 0, 255]], np.uint8)
    assert row_bytes(rows) == [bytes(r) for r in rows.tolist()]
    assert row_bytes(rows[:, 1:]) == [b"\0\0", b"\0\0", b"\0\7", b"\0\xff"]  # a strided view


def _topic_parts_reference(topic_bytes: list[bytes]) -> list[bytes]:
    """One small numpy array a topic and version (the loop ``topic_parts`` replaced)."""
    out = []
    for t in topic_bytes:
        for v2 in (False, True):
            f = TOPIC_LENGTH[v2]
            fits = len(t) < 1 << (8 * f.size - 1)
            out.append(np.array([len(t) if fits else 0], f.dtype).tobytes() + t)
    return out


def test_topic_parts_are_the_per_topic_loop():
    topics = [b"", b"a", b"x" * 127, b"x" * 128, b"x" * 255, b"x" * 256, b"y" * 32767, b"y" * 32768, "订".encode()]
    assert topic_parts(topics) == _topic_parts_reference(topics)
    assert topic_parts([]) == []


def _block(kinds: list[str], links=None) -> SendBlock:
    n = len(kinds)
    z = np.zeros(n, np.int64)
    return SendBlock(["t"], [b"\1\2\3\4"], z, *[z] * 14, bodies=[b""] * n, props=[b""] * n, kinds=kinds, links=links)


def test_link_codes_and_sends_follow_the_kinds():
    kinds = ["normal", "half", "commit", "op", "prepared", "rollback", "delay", "retry", "commit"]
    b = _block(kinds)
    assert b.link_codes().tolist() == [KIND_LINKS.get(k, 0) for k in kinds]
    assert b.sends() == sum(k not in ("commit", "op", "rollback") for k in kinds)
    assert b.rows(1, 4).link_codes().tolist() == [1, 2, 3]
    assert _block([]).sends() == 0


def test_a_block_without_kinds_counts_its_records():
    b = _block([])
    b.bodies = [b"x"] * 3
    b.links = None
    assert b.link_codes().tolist() == [0, 0, 0] and b.sends() == 3
