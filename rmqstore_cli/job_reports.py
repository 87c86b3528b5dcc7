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
    from rmqstore_cli.store.queues.consume_queue import unsafe_topic

    lines = [
        f"{n} record{'s' if n != 1 else ''} of topic {safe_text(repr(t))} got no consume queue, the name cannot be "
        f"a directory ({unsafe_topic(t)}); they are in the commit log and the index"
        for t, n in sorted(refused.items())[:limit]
    ]
    if len(refused) > limit:
        lines.append(f"{len(refused) - limit} more topics got no consume queue (see refused_topics)")
    return lines


def print_rebuild(fmt: str, summaries: list[dict[str, Any]], title: str, several: bool) -> None:
    """rebuild-index's summaries: JSON as they are (``{"stores": [...]}`` for several with
    json); for people, one key/value table per store, one row per field, nested fields
    (sizes, dispatch_end) and list items on rows of their own, so that it fits 80 columns."""
    from rmqstore_cli.render import print_summaries

    if fmt != "table" and several:
        print_summaries(fmt, summaries, title)
        return
    if fmt != "table":
        print_summary(fmt, summaries[0], title)
        return
    for s in summaries:
        print_rows(key_value_rows(s), title)


def key_value_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """A summary as (field, value) rows: a nested object's fields as ``field sub`` rows, a
    list's items one row each (the field named on the first), an empty list as ``none``."""
    rows: list[tuple[str, str]] = []
    for k, v in summary.items():
        if isinstance(v, dict) and not _size_source(v):
            rows.extend((f"{k} {sub}", _flat(x)) for sub, x in v.items())
        elif isinstance(v, list):
            rows.extend((k if i == 0 else "", _flat(x)) for i, x in enumerate(v))
            if not v:
                rows.append((k, "none"))
        else:
            rows.append((k, _flat(v)))
    return rows


def _size_source(v: Any) -> bool:
    return isinstance(v, dict) and set(v) == {"value", "from"}


def _flat(v: Any) -> str:
    """One value as one cell: a size as ``value (where from)``, an object as ``k=v`` pairs."""
    if _size_source(v):
        return f"{v['value']} ({v['from']})"
    if isinstance(v, dict):
        return " ".join(f"{k}={'' if x is None else x}" for k, x in v.items())
    return "" if v is None else str(v)


def print_rows(rows: list[tuple[str, str]], title: str) -> None:
    """A two-column key/value table (store text escaped), as wide as its rows, at most the
    terminal: long values wrap in their cell."""
    from rich.table import Table
    from rich.text import Text

    from rmqstore_cli.render import console, safe_text

    table = Table(title=Text(safe_text(title)), show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value", overflow="fold")
    for k, v in rows:
        table.add_row(Text(safe_text(k)), Text(safe_text(v)))
    console().print(table)


def rebuild_warnings(rep: Any, who: str) -> list[str]:
    """What a store's rebuild summary holds that a person must not miss (``who``: the store,
    when there are several), as warning lines."""
    from rmqstore_cli.render import safe_text

    lines = []
    if rep.stop is not None and not rep.stop.clean:
        lines.append(f"{who}dispatch stopped at offset {rep.stop.offset} ({rep.stop.file}): {rep.stop.reason}")
    if rep.refused_topics:
        lines.append(
            f"{who}records of {len(rep.refused_topics)} topic(s) got no consume queue, their names cannot be a "
            "directory: " + ", ".join(safe_text(repr(t)) for t in sorted(rep.refused_topics))
        )
    if rep.multi_dispatch_problems:
        lines.append(
            f"{who}malformed INNER_MULTI_DISPATCH/INNER_MULTI_QUEUE_OFFSET ("
            + ", ".join(f"{k}: {n}" for k, n in sorted(rep.multi_dispatch_problems.items()))
            + " messages): written as the broker's dispatch would; rmqstore verify names them (lmq.malformed)"
        )
    if rep.fallback_index_names:
        name, ts = rep.fallback_index_names[0]
        more = f" (and {len(rep.fallback_index_names) - 1} more)" if len(rep.fallback_index_names) > 1 else ""
        lines.append(
            f"{who}index file {name}: its first entry's storeTimestamp {ts} is no date (before 1970 or after "
            f"9999), so the file is named after the previous one (the first: 1970-01-01 UTC){more}"
        )
    if rep.skipped:
        lines.append(f"{who}{len(rep.skipped)} stretch(es) of the commit log were skipped undispatched (see 'skipped')")
    return lines


def backups_line(backups: list[str]) -> str:
    """Where --in-place put the sets it replaced: one directory per run, below the store's
    rmqstore-backup/ (store/layout/root_entries.py), which verify names as not checked, not unknown."""
    import os

    where = os.path.commonpath(backups) if len(backups) > 1 else os.path.dirname(backups[0])
    return (
        f"the replaced files are kept in {where} (remove it once the rebuilt store is trusted; --no-backup keeps none)"
    )
