"""``dump-commitlog --trace``: the trace topics' messages printed as their trace records
(store/answers/trace.py), one row per context, in commit-log then body order; each row what
``Store.traces`` gives as ``TraceRecord.as_dict()``."""

from __future__ import annotations

from typing import Any

from rmqstore_cli.errors import UsageError
from rmqstore_cli.render import Output
from rmqstore_cli.times import format_ms

COLUMNS = [("trace_offset", "offset"), ("type", "type"), ("time", "time"), ("msg_id", "msg id", 32)]
COLUMNS += [("topic", "topic", 32), ("group", "group", 28), ("keys", "keys", 32), ("outcome", "outcome", 24)]


def check_trace_options(summary: bool, show_blank: bool, body: str, properties: bool | None) -> None:
    """--trace prints trace records, not messages: what only a message has is refused."""
    for given, name in ((summary, "--summary"), (show_blank, "--show-blank"), (body != "none", "--body")):
        if given:
            raise UsageError(f"--trace prints trace records, not messages: {name} does not apply")
    if properties:
        raise UsageError("--trace prints trace records, not messages: --properties does not apply")


def outcome(row: dict[str, Any]) -> str:
    """A table's one-word account of a record: sent/consumed ok or not, the retry, the
    transaction's end."""
    if row["type"] == "SubBefore":
        return f"retry {row['retry_times']}" if row["retry_times"] else ""
    if row["type"] == "EndTransaction":
        return str(row["transaction_state"])
    if row["success"] is None:
        return ""
    cost = f" in {row['cost_time']} ms" if row["cost_time"] is not None else ""
    return ("ok" if row["success"] else "failed") + cost


def print_traces(
    ms: Any, items: Any, topic: str | None, key: str | None, fmt: str, zone: Any, limit: int | None
) -> int:
    """The trace records of the walk's ``items`` in the trace topics (``topic`` or the
    broker's; store.trace.trace_topics), about ``key`` (its msgId or one of its keys, exactly) if
    given; at most ``limit``; the count printed."""
    from rmqstore_cli.store.answers.trace import about_key, messages_of, trace_rows, trace_topics

    out = Output(fmt, COLUMNS if fmt == "table" else None, title=f"{ms.config.root}: trace records")
    shown = 0
    try:
        for row in trace_rows(messages_of(items), trace_topics(ms.config, topic)):
            if key is not None and not about_key(row, key):
                continue
            if limit is not None and shown >= limit:
                break
            out.emit({**row, **table_cells(row, zone)} if fmt == "table" else row)
            shown += 1
    finally:
        out.close()
    return shown


def table_cells(row: dict, zone: Any) -> dict:
    """A record's table cells beyond its fields: its time and its outcome."""
    ts = row["timestamp"] if isinstance(row["timestamp"], int) else None
    return {"time": "" if ts is None else format_ms(ts, zone), "outcome": outcome(row)}
