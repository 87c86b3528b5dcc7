"""The tables of ``consumer-progress``, ``stats`` and ``verify`` for people, laid out within
the terminal's width (:mod:`~rmqstore_cli.textfit`), and their JSON shapes for scripts.
The commands hand over rows already counted; nothing here reads the store."""

from __future__ import annotations

import sys
from typing import Any

from rmqstore_cli.render import Output, to_json
from rmqstore_cli.textfit import FitCol, key_values, table, wrap, write

# ------------------------------------------------------------------ consumer-progress

PROGRESS_COLUMNS = [
    FitCol("group", "group", least=8),
    FitCol("topic", "topic", least=8),
    FitCol("queue_id", "queue", right=True),
    FitCol("consumer_offset", "offset", right=True),
    FitCol("min_offset", "min", right=True),
    FitCol("max_offset", "max", right=True),
    FitCol("lag", "lag", right=True),
    FitCol("status", "status"),
    FitCol("next_store_time", "next stored", fold=True),
]
GROUP_COLUMNS = [
    FitCol("group", "group", least=8),
    FitCol("topics", "topics", right=True),
    FitCol("queues", "queues", right=True),
    FitCol("lag", "total lag", right=True),
    FitCol("no_queue", "no queue", right=True),
]


def progress(fmt: str, rows: list[dict[str, Any]], groups: list[dict[str, Any]] | None, title: str) -> None:
    """consumer-progress: one row per queue (``groups`` None) or per group; the table shows
    the queues, then the lag per group."""
    if fmt != "table":
        out = Output(fmt)
        for r in rows if groups is None else groups:
            out.emit(r)
        out.close()
        return
    from rmqstore_cli.store.answers.progress import group_totals

    lines = [] if groups is not None else table(PROGRESS_COLUMNS, rows, title) + [""]
    write(lines + table(GROUP_COLUMNS, group_totals(rows) if groups is None else groups, "lag per group"))


def human(n: int) -> str:
    """Bytes for people: 512 B, 1.5 KiB, 2.0 GiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def percent(x: float | None, none: str = "") -> str:
    return none if x is None else f"{100 * x:.1f}%"


# ------------------------------------------------------------------ stats

STATS_ROW_COLUMNS = [
    FitCol("topic", "topic", least=12),
    FitCol("queue_id", "queue", right=True),
    FitCol("messages", "messages", right=True),
    FitCol("size", "size", right=True),
    FitCol("share", "share", right=True),
    FitCol("cq_size", "cq size", right=True),
    FitCol("not_in_cq", "not in cq", right=True),
    FitCol("stored", "stored", fold=True),
]
STATS_FILE_COLUMNS = [
    FitCol("component", "component"),
    FitCol("file", "file", least=16),
    FitCol("entries", "entries", right=True),
    FitCol("size", "size", right=True),
    FitCol("disk", "on disk", right=True),
    FitCol("fill", "fill", right=True),
    FitCol("stored", "stored", fold=True),
]
COMPONENT_COLUMNS = [
    FitCol("component", "component"),
    FitCol("path", "path", least=12),
    FitCol("files", "files", right=True),
    FitCol("size", "size", right=True),
    FitCol("disk", "on disk", right=True),
    FitCol("known", "note", fold=True),
]


def _stored(d: dict, zone: Any) -> str:
    """A row's time range as one value: ``first .. last`` (one time when they are equal)."""
    from rmqstore_cli.times import format_ms

    a, b = d.get("first_store_timestamp"), d.get("last_store_timestamp")
    first, last = (format_ms(t, zone) if t is not None else "" for t in (a, b))
    return first if first == last else f"{first} .. {last}"


def stats_cells(d: dict, zone: Any) -> dict:
    """A row for people: sizes in KiB/MiB/GiB, share and fill as percentages, times as text
    (an LMQ row's share, whose records other rows count: ``lmq``)."""
    t = dict(d, size=human(d["bytes"]), stored=_stored(d, zone))
    if "cq_bytes" in d:
        t["cq_size"] = human(d["cq_bytes"])
        t["share"] = percent(d["share"], "lmq")
    else:
        t["disk"] = human(d["disk_bytes"])
        t["fill"] = percent(d["fill"])
    return t


def sampled_how(summary: dict) -> str | None:
    """stats' "counted from" line for a sampled walk (--sample, --max-bytes): estimates."""
    s = summary.get("sampling")
    if s is None:
        return None
    return f"part of the commit log (scaled by {s['scale']:.4g}: messages and size are estimates)"


#: The widest the disk-use bar of a topic (queue) row is drawn.
DISK_BAR = 20


def disk_bars(cols: list[FitCol], cells: list[dict]) -> list[FitCol]:
    """The columns with a bar of each row's bytes (scaled to the biggest row) after share,
    when the terminal leaves room for one beside the columns that stay in the row."""
    from rmqstore_cli.render_bars import bar, bar_room
    from rmqstore_cli.textfit import width

    room = bar_room([c for c in cols if not c.fold], cells, width(), DISK_BAR)
    if not room:
        return cols
    widest = max((c["bytes"] for c in cells), default=0)
    for c in cells:
        c["disk_bar"] = bar(c["bytes"], widest, room)
    at = [c.key for c in cols].index("share") + 1
    return cols[:at] + [FitCol("disk_bar", "")] + cols[at:]


def rows_then_summary(fmt: str, rows: list[dict], summary: dict) -> bool:
    """The machine formats of a report of rows and a summary (jsonl: each row, then
    ``{"summary"}``; json: ``{"rows", "summary"}``); False, writing nothing, for a table."""
    if fmt == "jsonl":
        sys.stdout.write("".join(to_json(d) + "\n" for d in rows) + to_json({"summary": summary}) + "\n")
    elif fmt == "json":
        sys.stdout.write(to_json({"rows": rows, "summary": summary}) + "\n")
    else:
        return False
    return True


def stats(fmt: str, by: str, rows: list[dict], summary: dict, components: list, zone: Any, exact: bool) -> None:
    """stats: the rows and the summary (jsonl: rows then ``{"summary"}``; json: ``{"rows",
    "summary"}``; table: a key/value summary, the rows, the disk by component)."""
    if rows_then_summary(fmt, rows, summary):
        return
    cells = [stats_cells(d, zone) for d in rows]
    cols = STATS_FILE_COLUMNS if by == "file" else disk_bars(stats_row_columns(by, exact), cells)
    write(
        key_values(stats_pairs(summary, exact), "stats")
        + [""]
        + table(cols, cells)
        + [""]
        + table(COMPONENT_COLUMNS, component_cells(components), "disk by component")
    )


def stats_pairs(summary: dict, exact: bool) -> list[tuple[str, Any]]:
    """The summary above stats' table: what was counted, from where, and the disk."""
    how = "the commit log (--exact)" if exact else "the consume queues (--exact also counts what no queue holds)"
    how = sampled_how(summary) or how
    pairs: list[tuple[str, Any]] = [
        ("store", summary["store"]),
        ("messages", summary["messages"]),
        ("size", human(summary["bytes"])),
        ("counted from", how),
        ("rows", f"{summary['shown']} of {summary['rows']}"),
        ("disk", f"{human(summary['total_bytes'])} in files, {human(summary['disk_bytes'])} allocated"),
    ]
    if exact and summary["not_in_cq"]:
        pairs.append(("not in any cq", ", ".join(f"{k} {v}" for k, v in sorted(summary["not_in_cq"].items()))))
    return pairs


def stats_row_columns(by: str, exact: bool) -> list:
    """stats' columns per topic or queue: the queue id only by queue, not-in-cq only with --exact."""
    return [c for c in STATS_ROW_COLUMNS if (c.key != "queue_id" or by == "queue") and (c.key != "not_in_cq" or exact)]


def component_cells(components: list) -> list[dict]:
    """The store root's components as table rows: sizes for people, unknown ones said."""
    parts = [{**c.to_dict(), "size": human(c.bytes), "disk": human(c.disk_bytes)} for c in components]
    for c in parts:
        c["known"] = "" if c["known"] else "unknown: no broker writes it"
    return parts


# ------------------------------------------------------------------ verify

FINDING_COLUMNS = [
    FitCol("severity", "severity"),
    FitCol("file", "file", least=30),  # commitlog/ and a 20-digit name
    FitCol("offset", "offset", right=True),
    FitCol("detail", "detail", wrap=True),
]
FLEET_COLUMNS = [FitCol("store", "store", least=12), FitCol("check", "check", least=12), *FINDING_COLUMNS]
#: How many findings of each check the table shows unless --limit says.
TABLE_LIMIT = 5
#: How many the JSON formats carry unless --limit says.
JSON_LIMIT = 100


def verify_checks(fmt: str, checks: dict) -> None:
    """verify --list-checks: every check id, its severity and meaning."""
    rows = [{"check": c, "severity": sev, "detail": what} for c, (sev, what) in checks.items()]
    if fmt != "table":
        out = Output(fmt)
        for r in rows:
            out.emit(r)
        out.close()
        return
    cols = [FitCol("check", "check"), FitCol("severity", "severity"), FitCol("detail", "meaning", wrap=True)]
    write(table(cols, rows, "verify checks"))


def _files(summary: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in summary.get("files", {}).items())


def verify_summary_lines(summary: dict, verdict_line: str) -> list[str]:
    """A store's summary as key/value lines, and the broker-start verdict."""
    pairs = [(k, summary.get(k)) for k in ("store", "messages", "bytes")]
    pairs.append(("files", _files(summary)))
    pairs += [(k, summary.get(k)) for k in ("errors", "warnings", "infos")]
    pairs += [(f"not checked: {k}", why) for k, why in (summary.get("skipped") or {}).items()]
    return key_values(pairs, "verify summary") + wrap(verdict_line)


def _by_check(findings: list[dict], checks: dict) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for f in findings:
        groups.setdefault(f["check"], []).append(f)
    order = list(checks)
    return sorted(groups.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))


def quick_findings(findings: list[dict]) -> None:
    """verify --sample/--max-bytes as a table: its findings (the summary follows apart)."""
    if findings:
        write(table(FINDING_COLUMNS, [dict(f, offset="" if f["offset"] is None else f["offset"]) for f in findings]))


def verify_one(fmt: str, result: dict, checks: dict, streamed: bool = False) -> None:
    """One store's findings, summary and broker-start line; the table groups the findings
    by check, each with its count and the first ones found (``streamed``: the jsonl
    findings are out already)."""
    findings, summary = result["findings"], result["summary"]
    if fmt == "jsonl":
        sys.stdout.write("".join(to_json(f) + "\n" for f in ([] if streamed else findings)))
        sys.stdout.write(to_json({"summary": summary}) + "\n")
        return
    if fmt == "json":
        sys.stdout.write(to_json({"findings": findings, "summary": summary}) + "\n")
        return
    lines: list[str] = []
    for check, items in _by_check(findings, checks):
        rows = [dict(f, offset="" if f["offset"] is None else f["offset"]) for f in items]
        lines += table(FINDING_COLUMNS, rows, check_title(check, items, summary, checks)) + [""]
    lines += verify_summary_lines(summary, result["verdict"].line())
    if not findings:
        lines.append(
            "no findings: "
            + ("nothing wrong in what was checked" if summary.get("skipped") else "the store is consistent")
        )
    write(lines)


def check_title(check: str, items: list[dict], summary: dict, checks: dict) -> str:
    """A check's table title: its count and severity, what it means, and how many are shown."""
    count = summary["findings"].get(check, len(items))
    sev, meaning = checks.get(check, (items[0]["severity"], ""))
    head = f"{check}: {count} {sev}{'s' if count != 1 else ''}" + (f" ({meaning})" if meaning else "")
    if count > len(items):
        head += f"; the first {len(items)} shown (--limit N shows N)"
    return head


def verify_many(fmt: str, results: list[dict]) -> None:
    """Several stores: every finding with its store, one summary per store."""
    findings = [f for r in results for f in r["findings"]]
    summaries = [r["summary"] for r in results]
    if fmt == "jsonl":
        sys.stdout.write("".join(to_json(f) + "\n" for f in findings))
        sys.stdout.write(to_json({"summary": {"stores": summaries}}) + "\n")
    elif fmt == "json":
        sys.stdout.write(to_json({"findings": findings, "summary": {"stores": summaries}}) + "\n")
    else:
        write(fleet_lines(findings, results))


def fleet_lines(findings: list[dict], results: list[dict]) -> list[str]:
    """verify's table of several stores: every finding with its store, then each summary."""
    rows = [dict(f, offset="" if f.get("offset") is None else f["offset"]) for f in findings]
    lines = table(FLEET_COLUMNS, rows, "verify findings") + [""] if findings else []
    for r in results:
        lines += verify_summary_lines(r["summary"], f"{r['summary']['store']}: {r['verdict'].line()}") + [""]
    return lines
