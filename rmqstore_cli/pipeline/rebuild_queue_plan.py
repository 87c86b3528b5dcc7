"""The consume-queue plan of the staged rebuild's step 3 (``rebuild_tasks.py``): from the files'
summaries, which queues run straight across the files (their units written at their cq
offsets, by each file's task) and which must be rebuilt from the spills (``build_queue``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise


@dataclass
class QueuePlan:
    straight: dict  # queue -> (first cq offset, last cq offset): units at their cq offsets
    rebuild: list  # queues rebuilt from the spills by build_queue
    late: dict  # position -> straight queues it still has to write (files not written in step 1)
    remove: list  # queues written in step 1 that are rebuilt: their directories go first

    def late_writes(self, key: tuple[str, int], positions: list[int]) -> None:
        """Straight queue ``key`` still has units to write from the files at ``positions``."""
        for i in positions:
            self.late.setdefault(i, []).append(key)


def plan_queues(included: list[int], summaries: dict) -> QueuePlan:
    """Each queue's spans over the included files, in order, judged straight or to rebuild."""
    spans: dict = {}
    for i in included:
        s = summaries[i]
        for key, (first, last, _) in s.queues.items():
            spans.setdefault(key, []).append((i, first, last, s.simple[key], *s.ends[key]))
    p = QueuePlan({}, [], {}, [])
    written = {k for i in included for k in summaries[i].direct}
    for key, lst in spans.items():
        if _straight(lst):
            p.straight[key] = (lst[0][1], lst[-1][2])
            p.late_writes(key, [i for i, *_ in lst if key not in summaries[i].direct])
        else:
            p.rebuild.append(key)
            if key in written:
                p.remove.append(key)
    return p


def _straight(spans: list[tuple]) -> bool:
    """A queue's spans over the files (file, first, last, simple, unit ends) make one run: each
    file's units are consecutive and follow on, the next cq offset and a unit end beyond the
    last one (``putMessagePositionInfo`` skips units ending at or below ``maxPhysicOffset``)."""
    return all(x[3] for x in spans) and all(b[1] == a[2] + 1 and b[4] > a[5] for a, b in pairwise(spans))
