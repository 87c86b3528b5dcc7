"""``rmqstore stats``: what is eating the disk."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_topic,
)
from rmqstore_cli.commands.grammar import limit_option, note, old_spelling, renamed

EPILOG = """Examples:

  rmqstore stats --store ~/store

  rmqstore stats --by queue --topic OrderTopic --format jsonl | jq -c '{queue_id, messages, bytes}'

  rmqstore stats --by file --limit 20

  rmqstore stats --exact --format json | jq .summary.not_in_cq

By default the counts come from the consume queues (method consumequeue): fast, but
records no consume queue holds are not seen (PREPARED and ROLLBACK transactional records,
topics whose queues are gone). --exact walks the whole commit log (method commitlog) and
counts those in not_in_cq. A BatchCQ topic's queue (batchconsumequeue/) counts its inner
messages (batchSize per unit, as its queue offsets do) by default, its records with --exact.
"""


class By(str, Enum):
    topic = "topic"
    queue = "queue"
    file = "file"


ROW_COLUMNS = [
    ("topic", "topic", 48),
    ("queue_id", "queue"),
    ("messages", "messages"),
    ("size", "size"),
    ("share", "share"),
    ("first", "first stored"),
    ("last", "last stored"),
    ("cq_size", "cq size"),
    ("not_in_cq", "not in cq"),
]
FILE_COLUMNS = [
    ("component", "component"),
    ("file", "file", 60),
    ("entries", "entries"),
    ("size", "size"),
    ("disk", "on disk"),
    ("fill", "fill"),
    ("first", "first stored"),
    ("last", "last stored"),
]
COMPONENT_COLUMNS = [
    ("component", "component"),
    ("path", "path", 48),
    ("files", "files"),
    ("size", "size"),
    ("disk", "on disk"),
    ("known", "note"),
]


def register(app: typer.Typer) -> None:
    app.command("stats", epilog=EPILOG)(stats)


@command
def stats(
    by: Annotated[
        By,
        typer.Option(
            help="One row per topic, per queue (topic and queue_id), or per commit-log, consume-queue and index file."
        ),
    ] = By.topic,
    limit: Annotated[int | None, limit_option("Only the N biggest rows.")] = None,
    top: Annotated[int | None, old_spelling("--top", min=1)] = None,
    topic: Annotated[
        str | None,
        typer.Option(
            "--topic",
            "-t",
            help="Only this topic (with --by file: its "
            "consume-queue files, and its records in each commit-log file; "
            "index files, shared by every topic, are left out).",
            autocompletion=complete_topic,
        ),
    ] = None,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help="Walk the whole commit log instead of reading the consume queues: every record "
            "counts, also those no consume queue holds (slow on a big store).",
        ),
    ] = False,
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """What is eating the disk: messages and bytes per topic, queue or file, biggest first,
    and the size of every part of the store root.

    Rows: messages and bytes (the records' sizes) in the commit log, the store times of the
    first and last, share, and the topic's consume-queue files' size. share is the row's
    part of the message bytes counted, each record once: the rows' bytes over the summary's
    bytes (with --topic, that topic's), so the shares add up to 100 %; an LMQ row's units
    point at records other rows count, so its share is null (shown as lmq). Counts come
    from the consume queues unless --exact (see below); the summary's method says which.
    --by file gives each commit-log file (records, time range,
    fill = end of its last record / file size), consume-queue file (live units, time range
    of their messages, fill = units / capacity), BatchCQ file (batchconsumequeue/: live
    units, their store times, fill) and index file (entries and time range from its header,
    fill = indexCount / maxIndexNum). The summary lists every entry of the store
    root by component (commitlog, consumequeue, index, config, other) with its size and
    allocated bytes; an entry no broker writes is named as unknown. A queue of
    multi-dispatch units (LMQ: an %LMQ% name, or a listed name whose units point at another
    topic's messages) is marked multi_dispatch and left out of the summary's messages and
    bytes (its units counted in multi_dispatch_units). Exit 1 when --topic matches nothing.

    JSON fields (rows): topic, queue_id (--by queue), messages, bytes, first_store_timestamp,
    last_store_timestamp, share, cq_bytes, not_in_cq (--exact), multi_dispatch (when true);
    file rows: component, file,
    topic, queue_id, bytes, disk_bytes, entries, first_store_timestamp, last_store_timestamp,
    fill. jsonl ends with one {"summary": …} line; json prints {"rows": […], "summary": …}.
    """
    from rmqstore_cli.commands.common import open_store

    from rmqstore_cli.store import stats_report

    ms = open_store(
        store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size, cq_file_size=cq_file_size
    )
    _require_commitlog(ms)
    rep = stats_report.stats_report(ms, by.value, topic, exact, renamed(limit, top, "--limit", "--top"))
    if rep.topic_missing:
        _no_topic(ms, topic)
    _render(fmt, by, rep.rows, rep.summary, rep.components, tz, exact)


def _require_commitlog(ms) -> None:
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.stats_report import has_commitlog

    dirs = ms.config.commitlog_dirs
    if not has_commitlog(ms.config):
        raise StoreError(
            "no commit log: the store's commit-log directory is missing",
            path=dirs[0],
            hint="pass --broker-conf when storePathCommitLog puts it elsewhere",
        )


def _no_topic(ms, topic: str) -> None:
    from rmqstore_cli.commands.common import no_such_topic

    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import safe_text

    nf = no_such_topic(ms, topic)
    raise (
        nf
        if nf is not None
        else NotFound(
            f"topic '{safe_text(topic)}' has no consume queue",
            path=ms.config.consumequeue_dir / topic,
            hint="--exact counts its records from the commit log",
        )
    )


def _render(fmt: Fmt, by: By, dicts: list[dict], summary: dict, components: list, tz: str | None, exact: bool) -> None:
    import sys

    from rmqstore_cli.render import Output, safe_text, to_json
    from rmqstore_cli.times import parse_tz

    for n in summary["notes"]:
        note(n)
    if fmt is Fmt.jsonl:
        sys.stdout.write("".join(to_json(d) + "\n" for d in dicts) + to_json({"summary": summary}) + "\n")
        return
    if fmt is Fmt.json:
        sys.stdout.write(to_json({"rows": dicts, "summary": summary}) + "\n")
        return
    how = (
        "counted from the commit log (--exact)"
        if exact
        else "counted from the consume queues (--exact also counts records no consume queue holds)"
    )
    cols = (
        FILE_COLUMNS
        if by is By.file
        else [c for c in ROW_COLUMNS if (c[0] != "queue_id" or by is By.queue) and (c[0] != "not_in_cq" or exact)]
    )
    out = Output(
        "table", cols, title=f"{summary['store']}: {summary['messages']} messages, {human(summary['bytes'])}, {how}"
    )
    zone = parse_tz(tz)
    for d in dicts:
        out.emit(_table_cells(d, zone))
    out.close()
    sys.stdout.write("\n")
    out = Output(
        "table",
        COMPONENT_COLUMNS,
        title=f"disk: {human(summary['total_bytes'])} in files, {human(summary['disk_bytes'])} allocated",
    )
    for c in components:
        out.emit(
            {
                "component": c.component,
                "path": c.path,
                "files": c.files,
                "size": human(c.bytes),
                "disk": human(c.disk_bytes),
                "known": "" if c.known else "unknown: no broker writes it",
            }
        )
    out.close()
    if exact and summary["not_in_cq"]:
        sys.stdout.write(
            "not in any consume queue: "
            + safe_text(", ".join(f"{k} {v}" for k, v in sorted(summary["not_in_cq"].items())))
            + "\n"
        )


def _table_cells(d: dict, zone) -> dict:
    """A row for people: sizes in KiB/MiB/GiB, share and fill as percentages, times as text."""
    from rmqstore_cli.times import format_ms

    t = dict(d)
    t["size"] = human(d["bytes"])
    for k, src in (("first", "first_store_timestamp"), ("last", "last_store_timestamp")):
        t[k] = format_ms(d[src], zone) if d.get(src) is not None else ""
    if "cq_bytes" in d:
        t["cq_size"] = human(d["cq_bytes"])
        t["share"] = "lmq" if d["share"] is None else f"{100 * d['share']:.1f}%"
    else:
        t["disk"] = human(d["disk_bytes"])
        t["fill"] = "" if d["fill"] is None else f"{100 * d['fill']:.1f}%"
    return t


def human(n: int) -> str:
    """Bytes for people: 512 B, 1.5 KiB, 2.0 GiB."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
