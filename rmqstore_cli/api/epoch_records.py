"""The controller-mode epoch file's records (``Store.epochs``): frozen dataclasses whose
``as_dict()`` is the JSON ``verify`` and ``dump-commitlog --summary`` print for them."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Epoch:
    """One epoch of the file the broker would load (``EpochFileCache``): its number, the
    commit-log offset its master started at, where it ends (the next epoch's start, the
    last one's the log's end) and the bytes between; ``messages`` the records whose offset
    lies in [start, end) (None unless counted)."""

    epoch: int
    start: int
    end: int
    bytes: int
    messages: int | None = None

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class EpochFinding:
    """What is wrong with the epoch file (docs/format/ha.md#what-the-next-start-truncates):
    the check (``epoch.order``, ``epoch.beyond-end``, ...), the file, its line, the detail."""

    check: str
    file: str
    line: int | None
    detail: str

    def as_dict(self) -> JSON:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class EpochReport:
    """The epoch file against the commit log: ``file`` the one the broker would load
    (``epochFileCheckpoint``, its ``.bak``, or None), the epochs, the findings, and the
    log's [min, end) they were held against."""

    file: str | None
    epochs: list[Epoch]
    findings: list[EpochFinding]
    commitlog_min_offset: int
    commitlog_end_offset: int

    def as_dict(self) -> JSON:
        return {
            "file": self.file,
            "epochs": [e.as_dict() for e in self.epochs],
            "findings": [f.as_dict() for f in self.findings],
            "commitlog_min_offset": self.commitlog_min_offset,
            "commitlog_end_offset": self.commitlog_end_offset,
        }
