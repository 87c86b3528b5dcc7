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
