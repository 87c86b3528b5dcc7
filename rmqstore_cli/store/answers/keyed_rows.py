"""Many report rows with the same keys, held compactly, and the walk that keeps and counts them
(``pop``, ``transactions``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload


class KeyedRows(Sequence[dict[str, Any]]):
    """Rows that all have the same keys, each held as a tuple of its values and made a dict
    again when read: a quarter of a dict's memory, for the 250 000 rows a ``pop`` or
    ``transactions`` answer over a large store keeps."""

    def __init__(self) -> None:
        self.keys: tuple[str, ...] = ()
        self.values: list[tuple[Any, ...]] = []

    def append(self, r: dict[str, Any]) -> None:
        if not self.keys:  # each engine makes its rows with the same keys, in the same order
            self.keys = tuple(r)
        self.values.append(tuple(r.values()))

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [dict(zip(self.keys, v, strict=True)) for v in self.values[i]]
        return dict(zip(self.keys, self.values[i], strict=True))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (dict(zip(self.keys, v, strict=True)) for v in self.values)


#: Warnings a walk keeps; the rest are counted.
MAX_WARNINGS = 10


@dataclass
class Warned:
    """The first :data:`MAX_WARNINGS` warnings of a walk and how many more there were."""

    warnings: list[str] = field(default_factory=list)
    more_warnings: int = 0

    def warn(self, text: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(text)
        else:
            self.more_warnings += 1

    def all_warnings(self, more: str) -> list[str]:
        """The warnings kept, then ``"<n> more <more>"`` when some were only counted."""
        return self.warnings + ([f"{self.more_warnings} more {more}"] if self.more_warnings else [])


@dataclass
class Answer:
    """What a ``pop`` or ``transactions`` walk found: the rows kept, the per-group counts, the
    summary and the warnings."""

    rows: Sequence[dict[str, Any]]
    groups: list[dict[str, Any]]
    summary: dict[str, Any]
    warnings: list[str]


@dataclass(frozen=True)
class Wanted:
    """The rows an answer keeps: of ``topic`` and ``group`` (None: any), in ``states`` (None:
    all), the first ``limit``; every row of the topic and group is counted."""

    topic: str | None = None
    group: str | None = None
    states: tuple[str, ...] | None = None
    limit: int | None = None

    def of(self, r: dict[str, Any], group_key: str) -> bool:
        """The row is of the topic and the group asked for (``group_key`` names its group)."""
        return (self.topic is None or r["topic"] == self.topic) and (self.group is None or r[group_key] == self.group)


@dataclass
class Kept:
    """The rows a walk kept, its per-group counts (sorted by key), its count per state and how
    many rows were in ``Wanted.states``."""

    rows: KeyedRows
    groups: list[dict[str, Any]]
    totals: dict[str, int]
    matched: int


def keep(
    rows: Iterable[dict[str, Any]],
    want: Wanted,
    group_key: str,
    every_state: Sequence[str],
    count_row: Callable[[dict[tuple[str, str], dict[str, Any]], dict[str, Any]], None],
) -> Kept:
    """One pass over ``rows``: those of ``want``'s topic and group (``group_key`` names the
    row's group) counted per group (``count_row``) and per state, those in its states kept."""
    counts: dict[tuple[str, str], dict[str, Any]] = {}
    kept = KeyedRows()
    totals = dict.fromkeys(every_state, 0)
    matched = 0
    for r in rows:
        if not want.of(r, group_key):
            continue
        count_row(counts, r)
        totals[r["state"]] += 1
        if want.states is None or r["state"] in want.states:
            matched += 1
            if want.limit is None or len(kept) < want.limit:
                kept.append(r)
    return Kept(kept, [counts[k] for k in sorted(counts)], totals, matched)
