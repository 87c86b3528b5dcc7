"""What is eating the disk: ``store/answers/stats.py``'s counts made into rows, biggest first, and the
summary ``stats`` prints and ``Store.stats`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqstore_cli.store.answers import stats as engine, stats_exact, stats_queues

#: The ways to cut the rows.
BY = ("topic", "queue", "file")


@dataclass
class StatsResult:
    """The rows shown (as the JSON objects), every row's count, the store's components and
    the summary; ``topic_missing``: a topic was asked for and has no queue (nothing counted)."""

    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    components: list[engine.Component]
    topic_missing: bool = False


def require_commitlog(config: Any) -> None:
    """A StoreError unless one of the store's commit-log directories exists
    (``storePathCommitLog``): there is nothing to count."""
    from rmqstore_cli.errors import StoreError

    if not any(d.is_dir() for d in config.commitlog_dirs):
        raise StoreError(
            "no commit log: the store's commit-log directory is missing",
            path=config.commitlog_dirs[0],
            hint="pass ⟦broker_conf⟧ when storePathCommitLog puts it elsewhere",
        )


def stats_report(
    ms: Any,
    by: str = "topic",
    topic: str | None = None,
    exact: bool = False,
    top: int | None = None,
    narrowing: Any = None,
) -> StatsResult:
    """Count the store: from the consume queues (fast: what they hold), or with ``exact`` from
    the whole commit log (also the records no consume queue holds, ``not_in_cq``); rows per
    topic, per queue or per file (``by``), the ``top`` biggest. An active ``narrowing``
    (store/answers/sampling.py) walks part of the commit log and scales the counts (:func:`estimated`)."""
    warnings: list[str] = []
    components = engine.disk_usage(ms.config, warnings)
    by_file = by == "file"
    sampled = narrowing is not None and narrowing.active
    st = _count(ms, topic, exact, by_file, narrowing if sampled else None)
    if topic is not None and not st.queues:
        return StatsResult([], {}, components, topic_missing=True)
    if sampled:
        return estimated(ms, st, by, top, components, warnings, narrowing)
    if by_file:
        rows = st.files + (engine.index_file_rows(ms.config) if topic is None else [])
    else:
        rows = queue_rows(st, by)
    shown, dicts = _shown(st, rows, by_file, top)
    return StatsResult(dicts, summary(ms, st, by, rows, shown, components, warnings + st.notes), components)


def _count(ms: Any, topic: str | None, exact: bool, by_file: bool, narrowing: Any) -> engine.Stats:
    """The counts by the method asked for: a narrowed walk of the commit log (``narrowing``
    given), the whole commit log (``exact``), or the consume queues."""
    if narrowing is not None:
        return stats_exact.from_sampled_walk(ms, topic, by_file, narrowing)
    if exact:
        return stats_exact.from_commit_log(ms, topic, by_file)
    return stats_queues.from_consume_queues(ms, topic, by_file)


def queue_rows(st: engine.Stats, by: str) -> list[engine.Row]:
    """The rows per queue (``by`` queue) or summed per topic."""
    return list(st.queues.values()) if by == "queue" else engine.topic_rows(st.queues)


def _shown(st: engine.Stats, rows: list[Any], by_file: bool, top: int | None) -> tuple[list[Any], list[dict[str, Any]]]:
    """The ``top`` biggest rows and their JSON objects (a queue or topic row gives its share of
    the bytes counted once)."""
    shown = engine.biggest_first(rows, top)
    total_once = engine.once_total(st.queues)
    return shown, [r.to_dict() if by_file else r.to_dict(total_once) for r in shown]


def summary(
    ms: Any,
    st: engine.Stats,
    by: str,
    rows: list[Any],
    shown: list[Any],
    components: list[engine.Component],
    notes: list[str],
) -> dict[str, Any]:
    """The summary: totals of the rows (a multi-dispatch queue's units are not second
    messages: ``multi_dispatch_units``), the commit log's size and the store's components."""
    queues = [r for r in st.queues.values() if not r.multi_dispatch]
    fanned = sum(r.messages for r in st.queues.values()) - sum(r.messages for r in queues)
    return {
        "store": str(ms.config.root),
        "method": st.method,
        "by": by,
        "rows": len(rows),
        "shown": len(shown),
        "messages": sum(r.messages for r in queues),
        "bytes": engine.once_total(st.queues),
        "multi_dispatch_units": fanned,
        "commitlog_bytes": st.commitlog_bytes,
        "not_in_cq": st.not_in_cq if st.method == "commitlog" else None,
        "disk_bytes": sum(c.disk_bytes for c in components),
        "total_bytes": sum(c.bytes for c in components),
        "components": [c.to_dict() for c in components],
        "notes": notes,
    }


def estimated(
    ms: Any, st: engine.Stats, by: str, top: int | None, components: list, warnings: list[str], narrowing: Any
) -> StatsResult:
    """The sampled walk's counts as estimates: each row's (and the summary's) messages and bytes
    scaled by ``narrowing.scale()``, the counted ones kept as ``sampled_messages`` and
    ``sampled_bytes``, ``estimated: true``; the summary's ``sampling`` says what was read.
    File rows (``by`` file) are the records read, unscaled."""
    by_file = by == "file"
    rows = st.files if by_file else queue_rows(st, by)
    shown, dicts = _shown(st, rows, by_file, top)
    notes = warnings + st.notes + [narrowing.describe()]
    out = summary(ms, st, by, rows, shown, components, notes)
    for d in dicts if not by_file else []:
        _scale(d, narrowing)
    _scale(out, narrowing)
    out["method"] = "commitlog-sampled"
    out["sampling"] = narrowing.as_dict()
    return StatsResult(dicts, out, components)


def _scale(d: dict[str, Any], narrowing: Any) -> None:
    d["sampled_messages"], d["sampled_bytes"] = d["messages"], d["bytes"]
    d["messages"], d["bytes"] = narrowing.estimate(d["messages"]), narrowing.estimate(d["bytes"])
    d["estimated"] = True
