"""The reports of the writing commands (repair, expire, rebuild-index, generate, export):
their tables and JSON on stdout, and the words of the stderr lines a person must not miss.
The commands hand their results here; the lines go out through ``commands/grammar``."""

from __future__ import annotations

import sys
from typing import Any

from rmqstore_cli.render import print_summary, to_json

#: repair's table: the record's keys but ``dry_run`` (the title says it).
REPAIR_TABLE_KEYS = (
    "file",
    "kind",
    "last",
    "length",
    "size",
    "records",
    "data_end",
    "dropped",
    "blank",
    "action",
    "note",
    "done",
)


def print_repair(fmt: str, record: dict[str, Any]) -> None:
    """repair's one record: a key/value table, or one JSON object (schemas/repair-action.json)."""
    if fmt == "table":
        title = "repair --pad" + (" (dry run)" if record["dry_run"] else "")
        print_summary("table", {k: record[k] for k in REPAIR_TABLE_KEYS}, title=title)
        return
    sys.stdout.write(to_json(record) + "\n")


#: expire's table of the files deleted (or that would be): (field, heading).
EXPIRE_COLUMNS = [("kind", "kind"), ("file", "file"), ("rule", "rule"), ("reason", "why"), ("bytes", "bytes")]


def print_expire(fmt: str, summary: dict[str, Any], deleted: list[Any], dry_run: bool, root: Any) -> None:
    """expire's report: json one object with the actions; jsonl one line per action, then
    the summary line; table the actions (when any) and a key/value summary."""
    from rmqstore_cli.render import Output

    if fmt == "json":
        sys.stdout.write(to_json({**summary, "actions": [a.as_dict() for a in deleted]}) + "\n")
        return
    if fmt == "jsonl":
        for a in deleted:
            sys.stdout.write(to_json(a.as_dict()) + "\n")
        sys.stdout.write(to_json({"kind": "summary", **summary}) + "\n")
        return
    title = f"{'would delete (dry run)' if dry_run else 'deleted'}: {root}"
    if deleted:
        out = Output("table", EXPIRE_COLUMNS, title=title)
        for a in deleted:
            out.emit(a.as_dict())
        out.close()
    print_summary("table", _expire_table(summary, dry_run), title="expire" + (" (dry run)" if dry_run else ""))


def _expire_table(summary: dict[str, Any], dry_run: bool) -> dict[str, Any]:
    mins = summary["min_offsets"]
    idx = mins["index"]
    table = {
        "files" + (" (would go)" if dry_run else " deleted"): summary["files"],
        "by kind": " ".join(f"{k}={v}" for k, v in summary["deleted"].items()),
        "bytes freed": summary["bytes_freed"],
        "commit-log min offset": f"{mins['commitlog_before']} -> {mins['commitlog']}",
        "queues trimmed": len(mins["consumequeue"]),
        "first index file": (idx or {}).get("file", ""),
        "completed": summary["completed"],
    }
    if summary.get("journal"):
        table["recorded in"] = summary["journal"]
    if "disk" in summary:
        d = summary["disk"]
        table["disk used"] = (
            f"{d['used_ratio_before']:.0%} -> {d['used_ratio_after']:.0%} (threshold {d['threshold']:.0%})"
        )
    return table


def refused_topic_lines(refused: dict[str, int], limit: int = 10) -> list[str]:
    """generate's warnings: one per topic whose records got no consume queue (the first
    ``limit``), then how many more."""
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store.consume_queue import unsafe_topic

    lines = [
        f"{n} record{'s' if n != 1 else ''} of topic {safe_text(repr(t))} got no consume queue, the name cannot be "
        f"a directory ({unsafe_topic(t)}); they are in the commit log and the index"
        for t, n in sorted(refused.items())[:limit]
    ]
    if len(refused) > limit:
        lines.append(f"{len(refused) - limit} more topics got no consume queue (see refused_topics)")
    return lines
