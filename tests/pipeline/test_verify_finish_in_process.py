"""verify's finish tasks run in the driver, without forking, when they are few and read
nothing (``verify_join.little_to_finish``): every queue's units all matched by the scans,
every index file's entries all checked. Anything left to read keeps them on the processes."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from rmqstore_cli.pipeline import verify_join
from rmqstore_cli.pipeline.verify_plan import QueueFacts

Q = (b"T", 0)


def _ctxs(skipped: dict | None = None) -> dict:
    plan = SimpleNamespace(
        queue_facts={Q: QueueFacts("T", 0, 0, 10, None)},
        skipped=skipped or {},
        index_info=[SimpleNamespace(k=0, entries=30)],
    )
    return {0: SimpleNamespace(plan=plan)}


def _groups(queue_runs: list, index_runs: list) -> list:
    return [
        ((0, "q", Q), [("matched", (0, r), np.array([run])) for r, run in enumerate(queue_runs)]),
        ((0, "i", 0), [("checked", (0, r), np.array([run])) for r, run in enumerate(index_runs)]),
    ]


def test_settled_queues_and_checked_index_files_finish_in_the_driver():
    assert verify_join.little_to_finish(_ctxs(), _groups([[0, 4], [4, 10]], [[0, 12], [12, 30]]))


def test_a_unit_or_an_entry_left_over_keeps_the_processes():
    assert not verify_join.little_to_finish(_ctxs(), _groups([[0, 4], [5, 10]], [[0, 30]]))
    assert not verify_join.little_to_finish(_ctxs(), _groups([[0, 10]], [[0, 29]]))
    assert not verify_join.little_to_finish(_ctxs({"index": "unreadable"}), _groups([[0, 10]], [[0, 30]]))


def test_many_tasks_keep_the_processes(monkeypatch):
    monkeypatch.setattr(verify_join, "FEW_FINISH_TASKS", 1)
    assert not verify_join.little_to_finish(_ctxs(), _groups([[0, 10]], [[0, 30]]))
