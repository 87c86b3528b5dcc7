"""``rmqstore diff`` output: its table cells per row kind, the row loop under ``--limit``, the summary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.render import Col, Output, print_summary, to_json

#: a path or queue (what) is cut last: at least 40 cells before A and B go under the row
COLUMNS: list[Any] = [("kind", "kind"), Col("what", "what", right=None, cap=60, least=40), ("a", "A", 40)]
COLUMNS += [("b", "B", 40), ("detail", "detail", 80)]


@dataclass
class DiffTally:
    """What the row loop saw: the JSON rows kept for ``--format json``, how many shown of how many, the summary."""

    rows: list[dict] = field(default_factory=list)
    shown: int = 0
    total: int = 0
    summary: dict = field(default_factory=dict)


def emit_diff_rows(rows: Iterable[Any], fmt: str, limit: int | None, title: str) -> DiffTally:
    """Print (or, for json, keep) the diff rows up to ``limit``, counting them all.

    The summary row is held back rather than printed: it goes last, in a shape of its own per format.
    """
    out = None if fmt == "json" else Output(fmt, COLUMNS, title=title)
    tally = DiffTally()
    try:
        for r in rows:
            d = r.as_dict()
            if d["kind"] == "summary":
                tally.summary = d
                continue
            tally.total += 1
            if not limit or tally.shown < limit:
                tally.shown += 1
                _show(d, out, fmt, tally.rows)
    finally:
        if out is not None:
            out.close()
    return tally


def _show(d: dict, out: Output | None, fmt: str, kept: list[dict]) -> None:
    """One shown row: kept for the json document, as it is for jsonl, as cells for a table."""
    if out is None:
        kept.append(d)
    else:
        out.emit(d if fmt == "jsonl" else diff_cells(d))


def print_diff_summary(fmt: str, tally: DiffTally) -> None:
    """The closing summary: json wraps it round the rows, jsonl is its last line, a table prints it as a block."""
    bare = {k: v for k, v in tally.summary.items() if k != "kind"}
    if fmt == "json":
        sys.stdout.write(to_json({**bare, "rows": tally.rows}) + "\n")
    elif fmt == "jsonl":
        sys.stdout.write(to_json(tally.summary) + "\n")
    else:
        print_summary("table", bare, title="diff")


def diff_cells(d: dict) -> dict:
    """One table row of a diff row: kind, what it is about, A's side, B's side, and a word."""
    return _CELLS.get(d["kind"], _offset_cells)(d)


def _where(d: dict) -> str:
    return f"{d['topic']}/{d['queue_id']}"


def _file_cells(d: dict) -> dict:
    at = "" if d["first_difference"] is None else f", first difference at byte {d['first_difference']}"
    return {"kind": d["kind"], "what": d["path"], "a": d["size_a"], "b": d["size_b"], "detail": d["status"] + at}


def _divergence_cells(d: dict) -> dict:
    a, b = (record(d[s]) for s in ("a", "b"))
    past = f"A goes {d['past_a']} bytes past it, B {d['past_b']}"
    return {"kind": d["kind"], "what": f"commit log at {d['offset']}", "a": a, "b": b, "detail": past}


def _queue_range(d: dict, side: str) -> str:
    """A queue's offsets in one store as min..max, or - where that store has no such queue."""
    if d["max_offset_" + side] is None:
        return "-"
    return f"{d['min_offset_' + side]}..{d['max_offset_' + side]}"


def _queue_cells(d: dict) -> dict:
    parts = [f"only in A: {d['messages_only_a']}", f"only in B: {d['messages_only_b']}"]
    if d["units_changed"]:
        parts.append(f"{d['units_changed']} units differ from {d['first_changed']}")
    a, b = _queue_range(d, "a"), _queue_range(d, "b")
    return {"kind": d["kind"], "what": _where(d), "a": a, "b": b, "detail": "; ".join(parts)}


def _unit_cells(d: dict) -> dict:
    a, b = (record(d[s]) for s in ("a", "b"))
    return {"kind": d["kind"], "what": f"{_where(d)}@{d['queue_offset']}", "a": a, "b": b, "detail": "differs in place"}


def _message_cells(d: dict) -> dict:
    side = {"a": d["msg_id"] or "-", "b": ""} if d["side"] == "a" else {"a": "", "b": d["msg_id"] or "-"}
    crc = f"only in {d['side'].upper()}; body crc {d['body_crc']}"
    return {"kind": d["kind"], "what": f"{_where(d)}@{d['queue_offset']}", **side, "detail": crc}


def _offset_cells(d: dict) -> dict:
    gone = "gone in B" if d["b"] is None else "moved backwards"
    return {"kind": d["kind"], "what": f"{d['group']} {_where(d)}", "a": d["a"], "b": d["b"], "detail": gone}


_CELLS: dict[str, Callable[[dict], dict]] = {
    "file": _file_cells,
    "divergence": _divergence_cells,
    "queue": _queue_cells,
    "unit": _unit_cells,
    "message": _message_cells,
}


def record(r: dict | None) -> str:
    """A divergence side (topic/queue@offset msgid) or a unit (offset+size tags code) in a cell."""
    if r is None:
        return "-"
    if "topic" in r:
        return f"{r['topic']}/{r['queue_id']}@{r['queue_offset']} {r['msg_id']}"
    return f"{r['commitlog_offset']}+{r['size']} tags {r['tags_code']}"
