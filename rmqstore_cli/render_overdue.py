"""``dump-timer --overdue``'s output: the overdue timer and delay-level messages as rows, or
(``--summary``) the delay levels and a table per real topic (store/answers/overdue.py finds them)."""

from __future__ import annotations

from typing import Any

from rmqstore_cli.render import Output, to_json
from rmqstore_cli.times import format_age, format_ms

ROW_COLUMNS = [
    ("source", "from"),
    ("state", "state"),
    ("due_time", "due time"),
    ("late", "late"),
    ("real_topic", "real topic", 40),
    ("level", "level"),
    ("keys", "keys", 30),
    ("uniq_key", "uniq key"),
    ("commitlog_offset", "commitlog offset"),
]
LEVEL_COLUMNS = [
    ("level", "level"),
    ("delay", "delay"),
    ("max_offset", "queue max"),
    ("saved_offset", "delayOffset"),
    ("start_offset", "delivers from"),
    ("pending", "pending"),
    ("overdue", "overdue"),
    ("oldest", "oldest due"),
]
TOPIC_COLUMNS = [
    ("source", "from"),
    ("real_topic", "real topic", 40),
    ("count", "overdue"),
    ("oldest", "oldest due"),
    ("max_late", "max late"),
]


def emit_overdue(rows: Any, root: Any, fmt: str, zone: Any, limit: int | None) -> int:
    """At most ``limit`` overdue rows; the count printed."""
    out = Output(fmt, ROW_COLUMNS, title=f"{root}: overdue delayed messages")
    try:
        for r in rows:
            if limit is not None and out.count >= limit:
                break
            if fmt == "table":
                r = dict(
                    r, due_time=format_ms(r["due_ms"], zone), late=format_age(r["late_ms"]), keys=" ".join(r["keys"])
                )
            out.emit(r)
    finally:
        out.close()
    return out.count


def summary_dict(s: Any, topics: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--overdue --summary`` object: the clock, the timer's marks, the levels, the topics."""
    return {
        "now_ms": s.now_ms,
        "timer": s.timer.as_dict() if s.timer is not None else None,
        "delay_offsets_file": s.delay_offsets_file,
        "delay_levels": [lv.as_dict() for lv in s.levels],
        "topics": topics,
        "notes": s.notes,
    }


def print_overdue_summary(s: Any, topics: list[dict[str, Any]], root: Any, fmt: str, zone: Any) -> None:
    """JSON: :func:`summary_dict`. Table: the delay levels, the timer's marks, the topics."""
    import sys

    if fmt != "table":
        sys.stdout.write(to_json(summary_dict(s, topics)) + "\n")
        return
    when = f"at {format_ms(s.now_ms, zone)}"
    out = Output("table", LEVEL_COLUMNS, title=f"{root}: delay levels (SCHEDULE_TOPIC_XXXX) {when}")
    for lv in s.levels:
        d = lv.as_dict()
        d["delay"] = format_age(lv.delay_ms) if lv.delay_ms is not None else "not a level"
        d["oldest"] = format_ms(lv.oldest_due_ms, zone) if lv.oldest_due_ms is not None else ""
        out.emit(d)
    out.close()
    if s.timer is not None:
        t = s.timer
        out = Output("table", [("what", "what"), ("value", "value")], title=f"{root}: timer wheel {when}")
        out.emit({"what": "timercheck lastReadTimeMs", "value": format_ms(t.last_read_time_ms, zone)})
        out.emit({"what": "enqueue restarts at queue offset", "value": str(t.enqueue_from)})
        for k in ("behind", "passed", "not_enqueued"):
            out.emit({"what": k.replace("_", "-"), "value": str(getattr(t, k))})
        out.close()
    out = Output("table", TOPIC_COLUMNS, title=f"{root}: overdue by real topic {when}")
    for g in topics:
        out.emit(dict(g, oldest=format_ms(g["oldest_due_ms"], zone), max_late=format_age(g["max_late_ms"])))
    out.close()


def print_overdue(
    s: Any,
    root: Any,
    window: tuple[int | None, int | None],
    topic: str | None,
    summary: bool,
    fmt: str,
    zone: Any,
    limit: int | None,
) -> int:
    """``dump-timer --overdue`` (``summary``: ``--overdue --summary``) of the scan ``s``: the
    rows due in ``window`` of real topic ``topic``, or the summary. The count printed (the
    summary: always 1)."""
    from rmqstore_cli.store.answers import overdue

    b, e = window
    rows = [r for r in overdue.rows_of(s, topic) if (b is None or r["due_ms"] >= b) and (e is None or r["due_ms"] <= e)]
    if summary:
        print_overdue_summary(s, overdue.topic_summary(rows, s.now_ms), root, fmt, zone)
        return 1
    return emit_overdue(rows, root, fmt, zone, limit)
