"""The tables of ``consumer-progress``, ``stats`` and ``verify`` for people, laid out within
the terminal's width (:mod:`~rmqstore_cli.textfit`), and their JSON shapes for scripts.
The commands hand over rows already counted; nothing here reads the store."""

from __future__ import annotations

from typing import Any

from rmqstore_cli.render import Output
from rmqstore_cli.textfit import FitCol, table, write

# ------------------------------------------------------------------ consumer-progress

PROGRESS_COLUMNS = [
    FitCol("group", "group", least=8),
    FitCol("topic", "topic", least=8),
    FitCol("queue_id", "queue", right=True),
    FitCol("consumer_offset", "offset", right=True),
    FitCol("min_offset", "min", right=True),
    FitCol("max_offset", "max", right=True),
    FitCol("lag", "lag", right=True),
    FitCol("status", "status"),
    FitCol("next_store_time", "next stored", fold=True),
]
GROUP_COLUMNS = [
    FitCol("group", "group", least=8),
    FitCol("topics", "topics", right=True),
    FitCol("queues", "queues", right=True),
    FitCol("lag", "total lag", right=True),
    FitCol("no_queue", "no queue", right=True),
]


def progress(fmt: str, rows: list[dict[str, Any]], groups: list[dict[str, Any]] | None, title: str) -> None:
    """consumer-progress: one row per queue (``groups`` None) or per group; the table shows
    the queues, then the lag per group."""
    if fmt != "table":
        out = Output(fmt)
        for r in rows if groups is None else groups:
            out.emit(r)
        out.close()
        return
    from rmqstore_cli.store.progress import group_totals

    lines = [] if groups is not None else table(PROGRESS_COLUMNS, rows, title) + [""]
    write(lines + table(GROUP_COLUMNS, group_totals(rows) if groups is None else groups, "lag per group"))
