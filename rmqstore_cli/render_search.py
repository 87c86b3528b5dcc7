"""``search-offset``'s output: each queue's answer (store/answers/offset_query.py) as a table row or JSON."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmqstore_cli.render import Output
from rmqstore_cli.times import format_ms

COLUMNS = [
    ("topic", "topic"),
    ("queue_id", "queue"),
    ("offset", "offset"),
    ("store_time", "store time"),
    ("min_offset", "min offset"),
    ("max_offset", "max offset"),
    ("note", "note"),
]


def emit_answers(answers: Iterable[Any], title: str, fmt: str, zone: Any) -> None:
    """One row per queue's ``SearchResult``; the table shows its store time in ``zone``."""
    out = Output(fmt, COLUMNS, title=title)
    try:
        for res in answers:
            d = res.to_dict()
            if fmt == "table":
                d["store_time"] = format_ms(res.store_timestamp, zone) if res.store_timestamp is not None else ""
            out.emit(d)
    finally:
        out.close()
