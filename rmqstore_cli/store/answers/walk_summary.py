"""``dump-commitlog --summary``: what the walk passed, summed instead of printed: records,
their bytes, the first and last offset, the topics, and, on a controller-mode store, the
records of each epoch (docs/format/ha.md#epoch-file); with a narrowing (store/answers/sampling.py)
the counts are also given scaled, as estimates."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def summarize(root: Any, cl: Any, items: Iterable[tuple], narrowing: Any | None) -> dict:
    """Sum the walk's (record, take) pairs (``store.log_range.walk`` shape)."""
    from rmqstore_cli.store.checks.epoch_check import EpochTally
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.layout.epoch_file import epoch_spans, read_epoch_file

    ef = read_epoch_file(root)
    tally = EpochTally(epoch_spans(ef.entries, cl.max_offset())) if ef.entries else None
    totals = _Totals()
    for rec, take in items:
        if isinstance(rec, Blank):
            continue
        offs, sizes = _offsets_and_sizes(rec, take)
        if offs.size:
            totals.add(offs, sizes)
            if tally is not None:
                tally.add(offs)
    out: dict = {"messages": totals.n, "bytes": totals.size, "first_offset": totals.first, "last_offset": totals.last}
    sampled = narrowing if narrowing is not None and narrowing.active else None
    if sampled is not None:
        out["estimated_messages"] = sampled.estimate(totals.n)
        out["estimated_bytes"] = sampled.estimate(totals.size)
        out["sampling"] = sampled.as_dict()
    if tally is not None:
        out["epochs"] = _epochs(ef, tally.rows(), sampled)
    return out


@dataclass
class _Totals:
    """Records, their bytes, the first and the last offset of the walk so far."""

    n: int = 0
    size: int = 0
    first: int | None = None
    last: int | None = None

    def add(self, offs: Any, sizes: Any) -> None:
        self.n += int(offs.size)
        self.size += int(sizes.sum())
        self.first = int(offs[0]) if self.first is None else self.first
        self.last = int(offs[-1])


def _offsets_and_sizes(rec: Any, take: Any) -> tuple[Any, Any]:
    """A record's (or a block's rows ``take``) offsets and sizes as arrays."""
    import numpy as np

    if take is None:
        return np.array([rec.physical_offset]), np.array([rec.total_size])
    return rec.offsets[take], rec.rb.total[take]


def _epochs(ef: Any, rows: list[dict], sampled: Any | None) -> dict:
    """The records of each epoch (estimated too under a narrowing), and the epoch file read."""
    if sampled is not None:
        for r in rows:
            r["estimated_messages"] = sampled.estimate(r["messages"])
    return {"file": ef.main.path.name if ef.used == "file" else ef.backup.path.name, "epochs": rows}
