"""The records of the jobs that write (``expire``, ``rebuild-index``, ``export``): frozen
dataclasses whose fields are the commands' JSON keys, ``as_dict()`` the exact object printed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.store.records.fields import fields_dict

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ExpireAction:
    """One file an expiry deleted (or, in a dry run, would): its ``kind`` (commitlog,
    consumequeue, index), path relative to the store root and absolute, ``bytes`` (its
    length), ``bytes_freed`` (its blocks), the ``rule`` that condemned it (expired,
    disk-full, below-min) and why; ``extra`` the rule's own fields (as ``expire --format
    jsonl`` prints them)."""

    kind: str
    file: str
    path: str
    bytes: int
    bytes_freed: int
    rule: str
    reason: str
    topic: str | None = None
    queue_id: int | None = None
    extra: JSON = field(default_factory=dict)

    @classmethod
    def of(cls, d: JSON) -> ExpireAction:
        known = ("kind", "file", "path", "bytes", "bytes_freed", "rule", "reason", "topic", "queue_id")
        rest = {k: v for k, v in d.items() if k not in known}
        return cls(
            d["kind"],
            d["file"],
            d["path"],
            d["bytes"],
            d["bytes_freed"],
            d["rule"],
            d["reason"],
            d.get("topic"),
            d.get("queue_id"),
            rest,
        )

    def as_dict(self) -> JSON:
        d = fields_dict(self)
        if self.topic is None:
            del d["topic"], d["queue_id"]
        d.update(d.pop("extra"))
        return d


@dataclass(frozen=True, slots=True)
class ExpireReport:
    """What ``Store.expire`` deleted (or would), oldest first, and the run's summary (the
    ``{"kind": "summary", …}`` line of ``expire --format jsonl``: counts by kind, bytes
    freed, the minimum offsets after the run, problems, the journal)."""

    actions: list[ExpireAction]
    summary: JSON

    @property
    def dry_run(self) -> bool:
        return bool(self.summary["dry_run"])

    @property
    def completed(self) -> bool:
        """The run did all it planned (no file was left alone, nothing stopped it)."""
        return bool(self.summary["completed"])

    @property
    def problems(self) -> list[str]:
        """Why files were left alone, and the error that stopped the run."""
        return list(self.summary["problems"])

    def as_dict(self) -> JSON:
        """The object ``expire --format json`` prints."""
        return {**self.summary, "actions": [a.as_dict() for a in self.actions]}


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """What ``Store.rebuild_index`` wrote (or, in a dry run, would): ``rebuild-index``'s
    summary of the store, whose main counts are fields here; ``summary`` holds every key
    (the plan, the sizes and where each came from, the dispatch's end, what was skipped).
    A count of a set not rebuilt is None."""

    store: str
    dry_run: bool
    messages: int | None
    consume_queue_units: int | None
    index_keys: int | None
    dispatch_end: JSON | None
    summary: JSON

    @classmethod
    def of(cls, s: JSON) -> RebuildReport:
        return cls(
            s["store"],
            s["dry_run"],
            s.get("messages"),
            s.get("consume_queue_units"),
            s.get("index_keys"),
            s.get("dispatch_end"),
            s,
        )

    def as_dict(self) -> JSON:
        """The object ``rebuild-index --format json`` prints for one store."""
        return dict(self.summary)


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What ``Store.export`` wrote: ``export``'s summary (the dataset's directory, the
    engine, stores, commit-log files and rows, the unreadable ranges skipped, the time
    taken), and each unreadable range (store, file, offset, detail)."""

    output: str
    engine: str
    stores: int
    commitlog_files: int
    rows: int
    unreadable_ranges: int
    seconds: float
    unreadable: list[JSON] = field(default_factory=list)

    def as_dict(self) -> JSON:
        """The object ``export --format json`` prints (every field but the ranges' list)."""
        d = fields_dict(self)
        del d["unreadable"]
        return d
