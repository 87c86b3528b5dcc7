"""dump-commitlog's own options that need more than a line (the decompression cap, the seek, the compaction log)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rmqstore_cli.commands.options import JOBS_BY_SIZE, jobs_option

from rmqstore_cli.render_commitlog import MAX_DECOMPRESSED, print_walk, print_walk_summary

DecompressOpt = Annotated[
    bool,
    typer.Option(
        "--decompress",
        help="Show compressed bodies (sysflag COMPRESSED, zlib only) decompressed, each capped "
        "at --max-decompressed bytes; a body that is not zlib or exceeds the cap stays raw with body_error.",
    ),
]
MaxDecompressedOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        show_default=str(MAX_DECOMPRESSED),
        help="With --decompress: the cap on one decompressed body, in bytes (a crafted body cannot exceed it).",
    ),
]
SeekOpt = Annotated[
    bool,
    typer.Option(
        "--seek/--no-seek",
        help="With --begin: start at the first commit-log file that can hold a record stored that late, found "
        "by search-offset's bisection of the consume queues (the same output as walking every file).",
    ),
]
CompactionLogOpt = Annotated[
    str | None,
    typer.Option(
        "--compaction-log",
        metavar="TOPIC/QUEUE_ID",
        help="Read the compaction log of this compacted queue (compaction/compactionLog/TOPIC/QUEUE_ID/) instead "
        "of the commit log: the same records, PHYSICALOFFSET their place in that log.",
    ),
]
SummaryOpt = Annotated[
    bool,
    typer.Option(
        "--summary",
        help="Print one summary of what the walk passes instead of the records: their count, bytes, first and "
        "last offset and, on a controller-mode store, each epoch's records (epochFileCheckpoint); with "
        "--sample or --max-bytes also the counts scaled, as estimates.",
    ),
]
TraceOpt = Annotated[
    bool,
    typer.Option(
        "--trace",
        help="Print the trace topics' messages (RMQ_SYS_TRACE_TOPIC and msgTraceTopicName, or --topic) as their "
        "message-trace records, a row per record; with --key, only those whose msgId or one of whose keys is "
        "exactly that.",
    ),
]

JobsOpt = Annotated[
    int,
    jobs_option(
        f"Render on this many processes of this machine (default one; {JOBS_BY_SIZE}): a part per commit-log file "
        "(every 2 MiB of a larger one), written in log order, the same bytes. One process for a table, --limit, "
        "--summary, --trace, --sample, --max-bytes, --compaction-log and a DLedger log."
    ),
]


def seek_begin(begin: int | None, seek: bool, compaction_log: bool, every_byte: bool) -> int | None:
    """The --begin time --seek may start from, or None to walk every file.

    Not for a compaction log (the bisection reads the consume queues, not its queue), nor when
    --show-blank or --check-crc must see every byte from the first file on.
    """
    return begin if seek and not compaction_log and not every_byte else None


def print_records(ms: Any, rng: Any, flt: Any, out: tuple, walk: tuple, narrowing: Any, jobs: int) -> int:
    """--summary's per-topic counts, else the records themselves, on ``jobs`` processes where
    they can be (``pipeline.dump_jobs.jobs_for``); ``out`` is (format, zone, limit, fields),
    ``walk`` (summary, show_blank, check_crc).

    Returns how many were printed (0 with filters: exit 1).
    """
    fmt, zone, limit, show = out
    summary, show_blank, check_crc = walk
    if summary:
        return print_walk_summary(ms, rng, flt, fmt, limit, check_crc, narrowing)
    from rmqstore_cli.pipeline import dump_jobs

    n = dump_jobs.jobs_for(ms, fmt, limit, narrowing, jobs)
    if n > 1:
        return dump_jobs.print_parts(dump_jobs.Walk(ms, rng, flt, zone, show, show_blank, check_crc), fmt, n)
    return print_walk(ms, rng, flt, fmt, zone, limit, show, show_blank, check_crc, narrowing)
