"""``dump-commitlog --summary``: what the walk passed, summed instead of printed: records,
their bytes, the first and last offset, the topics, and, on a controller-mode store, the
records of each epoch (docs/format/ha.md#epoch-file); with a narrowing (store/sampling.py)
the counts are also given scaled, as estimates."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def summarize(root: Any, cl: Any, items: Iterable[tuple], narrowing: Any | None) -> dict:
    """Sum the walk's (record, take) pairs (``store.log_range.walk`` shape)."""
    import numpy as np

    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.epoch_check import EpochTally
    from rmqstore_cli.store.epoch_file import epoch_spans, read_epoch_file

    ef = read_epoch_file(root)
    tally = EpochTally(epoch_spans(ef.entries, cl.max_offset())) if ef.entries else None
    n = size = 0
    first = last = None
    for rec, take in items:
        if isinstance(rec, Blank):
            continue
        if take is None:
            offs, sizes = np.array([rec.physical_offset]), np.array([rec.total_size])
        else:
            offs, sizes = rec.offsets[take], rec.rb.total[take]
        if not offs.size:
            continue
        n, size = n + int(offs.size), size + int(sizes.sum())
        first = int(offs[0]) if first is None else first
        last = int(offs[-1])
        if tally is not None:
            tally.add(offs)
    out: dict = {"messages": n, "bytes": size, "first_offset": first, "last_offset": last}
    if narrowing is not None and narrowing.active:
        out["estimated_messages"] = narrowing.estimate(n)
        out["estimated_bytes"] = narrowing.estimate(size)
        out["sampling"] = narrowing.as_dict()
    if tally is not None:
        rows = tally.rows()
        if narrowing is not None and narrowing.active:
            for r in rows:
                r["estimated_messages"] = narrowing.estimate(r["messages"])
        out["epochs"] = {"file": ef.main.path.name if ef.used == "file" else ef.backup.path.name, "epochs": rows}
    return out
