"""``pop``'s output: the groups, the revive queues and (``--verbose``) the popped messages as
tables, or the records of a :class:`~rmqstore_cli.api.incident_records.PopReport` as JSON."""

from __future__ import annotations

import sys
from typing import Any

from rmqstore_cli.render import Output, to_json
from rmqstore_cli.times import format_ms

GROUP_COLUMNS = [("group", "group", 32), ("topic", "topic", 40), ("popped", "popped"), ("acked", "acked")]
GROUP_COLUMNS += [("revived", "revived"), ("invisible", "invisible"), ("overdue", "overdue")]
GROUP_COLUMNS += [("next", "next revive")]
QUEUE_COLUMNS = [("revive_topic", "revive topic", 40), ("queue_id", "queue"), ("committed", "committed")]
QUEUE_COLUMNS += [("max_offset", "max offset"), ("behind", "behind"), ("checkpoints", "checkpoints")]
QUEUE_COLUMNS += [("unprocessed_checkpoints", "unprocessed"), ("in_timer", "in timer"), ("oldest", "oldest due")]
MESSAGE_COLUMNS = [("group", "group", 24), ("topic", "topic", 32), ("queue_id", "queue"), ("queue_offset", "offset")]
MESSAGE_COLUMNS += [("state", "state"), ("ack", "ack"), ("pop", "popped at"), ("revive", "revive at")]
MESSAGE_COLUMNS += [("where", "revive queue"), ("retry_topic", "retry topic", 40)]
#: --by: the rows of --format jsonl
ROWS = {"message": "messages", "group": "groups", "revive-queue": "revive_queues"}


def _ms(v: int | None, zone: Any) -> str:
    return "" if v is None else format_ms(v, zone)


def emit(fmt: str, rep: Any, zone: Any, by: str, verbose: bool) -> None:
    """The report in ``fmt``: json the whole object, jsonl the ``by`` rows then a summary
    line, table the groups, the revive queues and, ``verbose``, the messages kept."""
    if fmt != "table":
        rows = [rep.as_dict()] if fmt == "json" else [r.as_dict() for r in getattr(rep, ROWS[by])]
        rows += [{"summary": rep.summary}] * (fmt == "jsonl")
        sys.stdout.write("".join(to_json(d) + "\n" for d in rows))
        return
    s = rep.summary
    title = (
        f"{s['store']}: {s['popped']} popped: {s['acked']} acked, {s['revived']} revived, {s['invisible']} "
        f"invisible, {s['overdue']} overdue ({s['checkpoints']} checkpoints, {s['acks']} acks, {s['batch_acks']} "
        f"batch acks; now {format_ms(s['now'], zone)})"
    )
    out = Output("table", GROUP_COLUMNS, title=title)
    for g in rep.groups:
        out.emit({**g.as_dict(), "next": _ms(g.next_revive_time, zone)})
    out.close()
    if rep.revive_queues:
        queues_table(rep.revive_queues, s["revive_behind"], zone)
    if verbose and rep.messages:
        messages_table(rep.messages, zone)


def queues_table(queues: Any, behind: int, zone: Any) -> None:
    """The revive queues' progress, under the groups' table."""
    sys.stdout.write("\n")
    out = Output("table", QUEUE_COLUMNS, title=f"revive progress ({behind} records not yet read)")
    for q in queues:
        committed = "none" if q.committed_offset is None else q.committed_offset
        oldest = _ms(q.oldest_unprocessed_revive_time, zone)
        out.emit({**q.as_dict(), "committed": committed, "oldest": oldest})
    out.close()


def messages_table(messages: Any, zone: Any) -> None:
    """The popped messages kept (``--verbose``), last."""
    sys.stdout.write("\n")
    out = Output("table", MESSAGE_COLUMNS, title="popped messages")
    for m in messages:
        where = f"{m.revive_queue}@{'timer' if m.revive_queue_offset is None else m.revive_queue_offset}"
        cells = {"pop": _ms(m.pop_time, zone), "revive": _ms(m.revive_time, zone), "where": where}
        out.emit({**m.as_dict(), **cells, "ack": m.ack or "", "retry_topic": m.retry_topic or ""})
    out.close()
