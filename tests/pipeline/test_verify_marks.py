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
