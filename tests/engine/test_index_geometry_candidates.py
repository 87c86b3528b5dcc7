"""The candidate index geometries (slots, entries) for a file of a non-default size: every S
whose slot table leaves a whole number of entries, stepped through one residue class
(``index_geometry.geometries``), equal to trying every S."""

from __future__ import annotations

import random

import pytest
from rmqstore_cli.formats import index as layout

from rmqstore_cli.store.layout.index_geometry import geometries


def _every(body: int, max_slots: int) -> list[tuple[int, int]]:
    out = []
    for s in range(1, max_slots + 1):
        rest = body - s * layout.HASH_SLOT_SIZE
        if rest > 0 and rest % layout.INDEX_ENTRY_SIZE == 0:
            out.append((s, rest // layout.INDEX_ENTRY_SIZE))
    return out


BODIES = [0, 3, 4, 20, 24, 100, 123_456, 4_000_000 - 40, 20_000_003] + random.Random(7).sample(range(1, 3_000_000), 40)


@pytest.mark.parametrize("body", BODIES)
def test_the_candidates_are_those_of_every_slot_count(body):
    max_slots = min(body // layout.HASH_SLOT_SIZE, 2_000_000)
    assert list(geometries(body, max_slots)) == _every(body, max_slots)
