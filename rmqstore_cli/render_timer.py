"""``dump-timer``'s output: the wheel's slots, the timer log's units and what comes next as
table rows or JSON, and the timer store's summary (the rows come from store/answers/timer_report.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmqstore_cli.render import Output, print_summary, to_json
from rmqstore_cli.times import format_ms

SLOT_COLUMNS = [
    ("due_time", "due time"),
    ("index", "slot"),
    ("num", "num"),
    ("first_pos", "first pos"),
    ("last_pos", "last pos"),
    ("state", "state"),
]
UNIT_COLUMNS = [
    ("pos", "pos"),
    ("due_time", "due time"),
    ("flags", "flags"),
    ("commitlog_offset", "commitlog offset"),
    ("size", "size"),
    ("real_topic", "real topic", 40),
    ("real_queue_id", "queue"),
    ("keys", "keys", 30),
    ("msg_id", "msgId"),
    ("state", "state"),
    ("message_status", "message", 60),
]
NEXT_COLUMNS = [
    ("action", "action"),
    ("source", "from"),
    ("due_time", "due time"),
    ("real_topic", "real topic", 40),
    ("real_queue_id", "queue"),
    ("keys", "keys", 30),
    ("uniq_key", "uniq key"),
    ("commitlog_offset", "commitlog offset"),
    ("message_status", "message", 60),
]
#: dump-timer's modes: their columns and what the title names.
MODES = {
    "slots": (SLOT_COLUMNS, "timer wheel"),
    "units": (UNIT_COLUMNS, "timer log"),
    "next": (NEXT_COLUMNS, "next from the timer"),
}


def emit_rows(rows: Iterable[dict], mode: str, root: Any, fmt: str, zone: Any, limit: int | None) -> int:
    """Print at most ``limit`` rows of ``mode``; the count printed. The table shows due times
    in ``zone``, keys space-separated and the roll and delete flags as R and D."""
    cols, what = MODES[mode]
    out = Output(fmt, cols, title=f"{root}: {what}")
    try:
        for r in rows:
            if limit is not None and out.count >= limit:
                break
            if fmt == "table":
                t = r.get("time_ms", r.get("due_ms"))
                r = dict(
                    r,
                    due_time=format_ms(t, zone) if t is not None else "",
                    keys=" ".join(r.get("keys") or []),
                    flags="".join(f for f, on in (("R", r.get("roll")), ("D", r.get("delete"))) if on),
                )
            out.emit(r)
    finally:
        out.close()
    return out.count


def print_timer_summary(root: Any, log_end: Any, d: dict, fmt: str) -> None:
    """One record: the checkpoint, the wheel, the timer-log files, the log's end and the recovery."""
    if fmt != "table":
        print_summary(fmt, d, "timer store")
        return
    cp = d["checkpoint"] or {}
    rows = [
        (
            "wheel",
            f"{d['wheel']['size']} bytes, {d['wheel']['slotsTotal']} slots x 2, "
            f"precision {d['wheel']['precisionMs']} ms; {d['slots']} non-empty slots",
        ),
        (
            "timer log",
            f"{len(d['timer_log_files'])} files, {d['units']} units, ends at {log_end.offset} ({log_end.reason})",
        ),
        *((k, to_json(v) if isinstance(v, dict) else str(v)) for k, v in cp.items()),
        *((f"recovery {k}", str(v)) for k, v in d["recovery"].items() if k != "notes"),
        *(("note", n) for n in d["recovery"]["notes"]),
    ]
    out = Output("table", [("what", "what"), ("value", "value")], title=f"{root}: timer store")
    for k, v in rows:
        out.emit({"what": k, "value": v})
    out.close()
