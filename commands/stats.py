"""``rmqstore stats``: what is eating the disk."""

from __future__ import annotations

from typing import Annotated

import typer
from rmqstore_cli.commands.common import Fmt, FormatOpt, TzOpt, command, complete_topic
from rmqstore_cli.commands.grammar import limit_option, old_spelling, renamed
from rmqstore_cli.commands.lines import note
from rmqstore_cli.commands.sampling_options import MaxBytesOpt, SampleOpt
from rmqstore_cli.commands.source_options import FROM_OPTIONS, StoreSource, store_options
from rmqstore_cli.commands.stats_options import OVER_TIME, By, ByOpt, show_traffic
from rmqstore_cli.commands.stats_topic import no_topic

EPILOG = """Examples:

  rmqstore stats --store ~/store

  rmqstore stats --by queue --topic OrderTopic --format jsonl | jq -c '{queue_id, messages, bytes}'

  rmqstore stats --by file --limit 20

  rmqstore stats --exact --format json | jq .summary.not_in_cq

  rmqstore stats --by minute --topic OrderTopic --limit 60

By default the counts come from the consume queues (method consumequeue): fast, but
records no consume queue holds are not seen (PREPARED and ROLLBACK transactional records,
topics whose queues are gone). --exact walks the whole commit log (method commitlog) and
counts those in not_in_cq. A BatchCQ topic's queue (batchconsumequeue/) counts its inner
messages (batchSize per unit, as its queue offsets do) by default, its records with --exact.
"""


def register(app: typer.Typer) -> None:
    app.command("stats", epilog=EPILOG)(stats)


@command
@store_options(cq_file_size=True)
def stats(
    by: ByOpt = By.topic,
    limit: Annotated[
        int | None, limit_option("Only the N biggest rows (--by minute|hour: the N latest intervals).")
    ] = None,
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
    source: StoreSource = FROM_OPTIONS,
    sample: SampleOpt = None,
    max_bytes: MaxBytesOpt = None,
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
    --by minute|hour walks the commit log: every valid record per minute or hour (UTC-aligned)
    of its store timestamp, the empty ones between first and last as zero rows, --limit the
    last N (JSON fields: start_timestamp, end_timestamp, topic, messages, bytes).

    JSON fields (rows): topic, queue_id (--by queue), messages, bytes, first_store_timestamp,
    last_store_timestamp, share, cq_bytes, not_in_cq (--exact), multi_dispatch (when true);
    file rows: component, file,
    topic, queue_id, bytes, disk_bytes, entries, first_store_timestamp, last_store_timestamp,
    fill. jsonl ends with one {"summary": …} line; json prints {"rows": […], "summary": …}.
    The table fits the terminal's width (COLUMNS into a pipe): the time range goes under its
    row, and long names are cut, when the row would not fit.
    """
    from rmqstore_cli import reports
    from rmqstore_cli.store.answers import stats_report
    from rmqstore_cli.store.answers.sampling import Narrowing
    from rmqstore_cli.times import parse_tz

    ms = source.engine(tz)
    stats_report.require_commitlog(ms.config)
    narrowing = Narrowing(sample, max_bytes)  # a sampled walk of the commit log: estimates
    if by in OVER_TIME:
        return show_traffic(ms, by, topic, renamed(limit, top, "--limit", "--top"), fmt.value, tz, narrowing.active)
    rep = stats_report.stats_report(ms, by.value, topic, exact, renamed(limit, top, "--limit", "--top"), narrowing)
    if rep.topic_missing:
        no_topic(ms, topic)
    for n in rep.summary["notes"]:
        note(n)
    reports.stats(fmt.value, by.value, rep.rows, rep.summary, rep.components, parse_tz(tz), exact)
