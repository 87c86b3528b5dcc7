"""``kept_mask``/``kept_sel`` (``IndexService#buildIndex``: a key is put when its offset is
≥ every earlier key's and ≥ the last file's endPhyOffset) against that rule key by key:
offsets that never go back (the fast path: every key, no index array) and offsets that do,
equal neighbours, a floor above the first keys, no keys."""

from __future__ import annotations

import numpy as np
import pytest

from rmqstore_cli.pipeline.rebuild_dispatch import kept_mask, kept_sel, rising


def _rule(phy, floor: int) -> list[bool]:
    out, top = [], floor
    for p in phy.tolist():
        out.append(p >= top)
        top = max(top, p)
    return out


CASES = {
    "rising": (np.array([5, 5, 7, 9, 9, 12], np.int64), 0),
    "rising from the floor": (np.array([5, 5, 7], np.int64), 5),
    "under the floor": (np.array([5, 6, 7, 8], np.int64), 7),
    "going back": (np.array([5, 9, 7, 9, 8, 10], np.int64), 0),
    "one key": (np.array([3], np.int64), 4),
    "none": (np.array([], np.int64), 0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kept_keys_follow_the_rule(case):
    phy, floor = CASES[case]
    want = _rule(phy, floor)
    assert kept_mask(phy, floor).tolist() == want
    assert phy[kept_sel(phy, floor)].tolist() == phy[np.array(want, bool)].tolist()
    assert rising(phy, floor) == all(want)
    if rising(phy, floor):
        assert kept_sel(phy, floor) == slice(None)  # every key: no copy taken


@pytest.mark.parametrize("seed", range(4))
def test_kept_keys_follow_the_rule_at_random(seed):
    rnd = np.random.default_rng(seed)
    phy = np.cumsum(rnd.integers(-3, 10, 500)).astype(np.int64)
    floor = int(rnd.integers(0, 40))
    want = _rule(phy, floor)
    assert kept_mask(phy, floor).tolist() == want
    assert phy[kept_sel(phy, floor)].tolist() == phy[np.array(want, bool)].tolist()
