"""``simple_runs`` (every queue's "units appended unchecked" flag at once) against the rule
queue by queue: consecutive cq offsets from one ≥ 0, and growing ends."""

from __future__ import annotations

import numpy as np
import pytest

from rmqstore_cli.pipeline.rebuild_dispatch import simple_runs


def _one(phy, size, qoff) -> bool:
    if int(qoff[0]) < 0:
        return False
    return len(qoff) == 1 or bool(np.all(np.diff(qoff) == 1) and np.all(np.diff(phy + size) > 0))


@pytest.mark.parametrize("seed", range(6))
def test_simple_runs_match_the_rule_queue_by_queue(seed):
    rnd = np.random.default_rng(seed)
    lens = rnd.integers(1, 6, 300)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    n = int(lens.sum())
    qoff = np.concatenate([rnd.integers(-2, 3) + np.arange(k) for k in lens]).astype(np.int64)
    phy = np.arange(n, dtype=np.int64) * 100
    size = np.full(n, 100, np.int64)
    spoil = rnd.random(n) < 0.05  # a cq offset skipped, an end going back, a repeated unit
    qoff[spoil] += rnd.integers(1, 3, int(spoil.sum()))
    back = rnd.random(n) < 0.05
    phy[back] -= 250
    got = simple_runs(phy, size, qoff, starts)
    bounds = [*starts.tolist(), n]
    want = [_one(phy[a:b], size[a:b], qoff[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    assert got.tolist() == want
    assert 0 < sum(want) < len(want)  # both kinds are there


def test_no_runs():
    e = np.zeros(0, np.int64)
    assert simple_runs(e, e, e, e).tolist() == []


@pytest.mark.parametrize(("topics", "queues"), [(7, 8), (300, 200), (3, 30000), (1, 1)])
def test_queue_order_is_the_stable_sort_of_the_keys(topics, queues, monkeypatch):
    """By a 16-bit code where topics x queues fit (the radix path), else by the keys; a queue
    id of -1 (unsigned: the last) sorts as the keys do."""
    from rmqstore_cli.pipeline import rebuild_dispatch as D

    rnd = np.random.default_rng(topics)
    tid = rnd.integers(0, topics, 5000).astype(np.int64)
    qid = rnd.integers(0, queues, 5000).astype(np.int64)
    if topics == 1:
        qid[::97] = -1
    key = tid * (1 << 32) + (qid & 0xFFFFFFFF)
    want = np.argsort(key, kind="stable")
    assert np.array_equal(D.queue_order(tid, qid & 0xFFFFFFFF, key), want)
    monkeypatch.setattr(D, "SMALL_CODES", 0)  # the keys' own sort
    assert np.array_equal(D.queue_order(tid, qid & 0xFFFFFFFF, key), want)
