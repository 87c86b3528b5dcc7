"""The scan's marks (``pipeline/verify_plan.py``): a few marks are made runs in a Python loop,
more by numpy; both give the same runs."""

from __future__ import annotations

import numpy as np


def test_few_marks_give_the_runs_numpy_gives(monkeypatch):
    from rmqstore_cli.pipeline.verify_plan import Marks

    rng = np.random.default_rng(11)
    cases = [[np.array([3])], [np.array([0, 1]), np.array([1, 2])], [np.array([5, 6]), np.array([0, 9, 8])]]
    cases += [[rng.integers(0, 40, rng.integers(1, 8)) for _ in range(rng.integers(1, 5))] for _ in range(200)]
    for parts in cases:
        got = []
        for few in (Marks.FEW, 0):  # the loop, then numpy for the same marks
            monkeypatch.setattr(Marks, "FEW", few)
            m = Marks()
            for p in parts:
                m[p] = True
            got.append(m.runs())
        assert got[0].dtype == got[1].dtype == np.int64
        assert got[0].tolist() == got[1].tolist(), parts


def test_marks_folded_as_they_come_give_the_same_runs(monkeypatch):
    """Marks folded into runs every few (in order, out of order, repeated, far apart) give
    the runs of all of them at once."""
    from rmqstore_cli.pipeline.verify_plan import Marks

    rng = np.random.default_rng(35)
    for _ in range(100):
        parts = [rng.integers(0, 300, rng.integers(1, 20)) for _ in range(rng.integers(1, 30))]
        parts += [np.arange(a, a + int(rng.integers(1, 50))) for a in rng.integers(0, 400, 5)]
        rng.shuffle(parts)
        got = []
        for pending in (Marks.PENDING, 7):
            monkeypatch.setattr(Marks, "PENDING", pending)
            m = Marks()
            for p in parts:
                m[p] = True
            got.append(m.runs())
        assert got[1].dtype == np.int64
        assert got[0].tolist() == got[1].tolist(), parts


def test_marks_in_order_are_held_as_runs(monkeypatch):
    """A queue or index file the scan meets in order (issue 35): a million marks in batches
    are held as one run and at most ``PENDING`` marks waiting, not 8 bytes a mark."""
    from rmqstore_cli.pipeline.verify_plan import Marks

    monkeypatch.setattr(Marks, "PENDING", 5000)
    m = Marks()
    most = 0
    for a in range(0, 1_000_000, 1000):
        m[np.arange(a, a + 1000)] = True
        most = max(most, sum(p.size for p in m.parts))
        assert m.folded is None or m.folded.shape[0] == 1
    assert most < 5000
    assert m.runs().tolist() == [[0, 1_000_000]]
