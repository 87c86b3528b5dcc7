"""export's KEYS column cuts each KEYS value at its spaces (``IndexService#buildIndex``'s
split): :func:`~rmqstore_cli.pipeline.arrow_block.word_ranges` lays the pieces out by
counting; here against the sort of every piece's start and end it stands in for."""

from __future__ import annotations

import numpy as np
import pytest

from rmqstore_cli.pipeline.arrow_block import word_ranges


@pytest.mark.parametrize("seed", range(5))
def test_word_ranges_are_the_sorted_cuts(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        m = int(rng.integers(0, 20))
        lens = rng.integers(0, 8, m)  # empty values, runs of spaces, spaces at either end
        a = np.cumsum(rng.integers(1, 5, m) + np.r_[0, lens[:-1]]).astype(np.int64)
        b = a + lens
        sp = np.unique(rng.integers(0, int(b.max()) + 5 if m else 5, int(rng.integers(0, 30)))).astype(np.int64)
        k = np.searchsorted(a, sp, "right") - 1
        held = (k >= 0) & (sp < b[np.maximum(k, 0)]) if m else np.zeros(sp.size, bool)
        inside = sp[held]
        want_at, want_end = np.sort(np.r_[a, inside + 1]), np.sort(np.r_[inside, b])
        start, end, per = word_ranges(a, b, inside, k[held])
        assert np.array_equal(start, want_at) and np.array_equal(end, want_end)
        assert np.array_equal(np.repeat(np.arange(m), per), np.searchsorted(a, want_at, "right") - 1)
