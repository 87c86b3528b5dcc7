"""Checks of one record's bytes that stay per record, and the byte helpers of the scan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rmqstore_cli.store.files.safefs import data_segments
from rmqstore_cli.store.records.properties import props_well_formed


def member(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(x, set)`` by binary search in an already sorted array."""
    if not sorted_set.size:
        return np.zeros(x.size, bool)
    i = np.searchsorted(sorted_set, x)
    return sorted_set[np.minimum(i, sorted_set.size - 1)] == x


def props_problem(props: bytes) -> str | None:
    try:
        text = props.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"properties are not valid UTF-8 (byte {e.start})"
    if props_well_formed(props):
        return None
    parts = text.split("\x02")
    if parts and parts[-1] == "":
        parts.pop()
    dropped = [p for p in parts if not (0 < p.find("\x01") < len(p) - 1)]
    if dropped:
        shown = ", ".join(repr(p)[:40] for p in dropped[:3])
        return f"{len(dropped)} property pair(s) the broker's parser drops: {shown}"
    return None  # values holding \x01: legal, the value keeps them


def first_nonzero(path: Path | str, arr: np.ndarray, start: int, end: int | None = None) -> int | None:
    """Position of the first non-zero byte of ``arr[start:end]`` (a mapping of ``path``), or None.

    Preallocated store files are sparse: only their data segments are read
    (:func:`safefs.data_segments`), so a 1 GiB file with a few MB of data costs a few MB."""
    end = arr.size if end is None else min(end, arr.size)
    step = 1 << 22
    for a, b in data_segments(path, start, end):
        for c in range(a, b, step):
            chunk = arr[c : min(b, c + step)]
            if chunk.any():
                return c + int(np.flatnonzero(chunk)[0])
    return None


@dataclass(slots=True)
class Delayed:
    """What ``compute_tags_code`` reads of a message on the schedule topic."""

    properties: dict
    topic_bytes: bytes
    store_timestamp: int
