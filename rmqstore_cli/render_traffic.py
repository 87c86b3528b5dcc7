"""``stats --by minute|hour`` for people: a bar chart, one row per interval (time, messages,
size, a bar scaled to the busiest interval), laid out within :func:`textfit.width`; the JSON
formats print the rows as they are."""

from __future__ import annotations

from typing import Any

from rmqstore_cli.render_bars import bar, bar_room
from rmqstore_cli.reports import human, rows_then_summary
from rmqstore_cli.textfit import FitCol, key_values, table, width, write

TRAFFIC_COLUMNS = [
    FitCol("time", "interval"),
    FitCol("messages", "messages", right=True),
    FitCol("size", "size", right=True),
]


def _interval_text(ms: int, zone: Any) -> str:
    """An interval's start: to the minute (``YYYY-MM-DD HH:MM``) in ``zone``."""
    from rmqstore_cli.times import format_ms

    return format_ms(ms, zone)[:16]


def traffic(fmt: str, rows: list[dict], summary: dict, zone: Any) -> None:
    """stats --by minute|hour: jsonl the rows then ``{"summary"}``; json ``{"rows",
    "summary"}``; table a key/value summary and the bar chart (bars scaled to the interval
    with the most messages)."""
    if rows_then_summary(fmt, rows, summary):
        return
    pairs: list[tuple[str, Any]] = [
        ("store", summary["store"]),
        ("topic", summary["topic"] or "every topic"),
        ("messages", summary["messages"]),
        ("size", human(summary["bytes"])),
        ("counted from", "the commit log, by store timestamp"),
        ("intervals", f"{summary['shown']} of {summary['rows']} ({summary['empty_intervals']} empty)"),
    ]
    total = width()
    cells = [
        {
            "time": _interval_text(r["start_timestamp"], zone),
            "messages": r["messages"],
            "size": human(r["bytes"]),
            "n": r["messages"],
        }
        for r in rows
    ]
    room = bar_room(TRAFFIC_COLUMNS, cells, total)
    widest = max((c["n"] for c in cells), default=0)
    cols = TRAFFIC_COLUMNS + ([FitCol("bar", "")] if room else [])
    for c in cells:
        c["bar"] = bar(c["n"], widest, room)
    title = f"messages per {summary['by']} (store time)"
    write(key_values(pairs, "stats") + [""] + table(cols, cells, title, total))
