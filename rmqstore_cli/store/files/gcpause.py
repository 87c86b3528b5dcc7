"""Python's cyclic garbage collector kept off the many objects of a phase that live on.

A collection walks every object of the generations it collects, and the objects a phase
keeps are walked again by each younger collection until they reach the oldest generation,
then by each full one: verify's plan opens every consume queue (~20 tracked objects each:
listings, paths, file and queue objects, kept open for the scans), so on 20 000 queues the
collector walked 300 000 objects a dozen times, half a second of the run. Such a phase
makes no reference cycles worth collecting early, so the collector is off while it runs
(:func:`collector_paused`) and what it built is then left out of later collections
(:func:`freeze_built`, ``gc.freeze``) until the caller lets it go (:func:`thaw`).
Objects freed by their reference count are freed as ever, frozen or not.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, then as it was (a nested pause leaves it off)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def freeze_built() -> bool:
    """Leave every object alive now out of later collections (``gc.freeze``: also spares a
    forked worker the copies of pages a collection would write to), unless something froze
    objects already (that caller's to thaw). Whether this froze them: then :func:`thaw`."""
    if gc.get_freeze_count():
        return False
    gc.freeze()
    return True


def thaw() -> None:
    """Undo :func:`freeze_built`: the frozen objects are the collector's again (oldest generation)."""
    gc.unfreeze()
