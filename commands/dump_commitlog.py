"""``rmqstore dump-commitlog``: decode messages in commit-log order, filtered."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rmqstore_cli.commands import dump_commitlog_options as o, filter_options as fo, grammar, lines
from rmqstore_cli.commands.common import (
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
)
from rmqstore_cli.commands.sampling_options import MaxBytesOpt, SampleOpt

from rmqstore_cli.render_commitlog import shown_fields, walk_items
from rmqstore_cli.render_trace import check_trace_options, print_traces

EPILOG = """Examples:

  rmqstore dump-commitlog --store ~/store -t OrderTopic --begin -2h --limit 20

  rmqstore dump-commitlog --begin -2h --now 2026-11-22T10:00      # stored from 08:00 that day

  rmqstore dump-commitlog --key order-42 --format jsonl | jq .msg_id

  rmqstore dump-commitlog --from-offset 1073741824 --body text --limit 1

  rmqstore dump-commitlog --topic OrderTopic --body text --decompress --max-decompressed 1048576

  rmqstore dump-commitlog --trace --key 7F0000011F9018B4AAC2139F6A3B0000 --format jsonl
"""


def register(app: typer.Typer) -> None:
    app.command("dump-commitlog", epilog=EPILOG)(dump_commitlog)


@command
def dump_commitlog(
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    from_offset: fo.FromOffsetOpt = None,
    to_offset: fo.ToOffsetOpt = None,
    file: Annotated[str | None, typer.Option("--file", help="Only this commit-log file (its 20-digit name).")] = None,
    topic: fo.TopicFilterOpt = None,
    queue_id: fo.QueueIdFilterOpt = None,
    key: fo.KeyFilterOpt = None,
    uniq_key: fo.UniqKeyFilterOpt = None,
    tag: fo.TagFilterOpt = None,
    begin: fo.BeginFilterOpt = None,
    end: fo.EndFilterOpt = None,
    now: grammar.NowOpt = None,
    limit: Annotated[int | None, grammar.limit_option("Print at most this many messages.")] = None,
    body: Annotated[grammar.BodyMode, grammar.body_option("each record")] = grammar.BodyMode.none,
    properties: Annotated[bool | None, grammar.properties_option("each record")] = None,
    show_blank: Annotated[bool, typer.Option(help="Also show BLANK end-of-file records and where data ends.")] = False,
    check_crc: Annotated[bool, typer.Option(help="Check body CRCs; a mismatch ends the log as in recovery.")] = False,
    decompress: o.DecompressOpt = False,
    max_decompressed: o.MaxDecompressedOpt = None,
    seek: o.SeekOpt = True,
    compaction_log: o.CompactionLogOpt = None,
    summary: o.SummaryOpt = False,
    trace: o.TraceOpt = False,
    sample: SampleOpt = None,
    max_bytes: MaxBytesOpt = None,
    jobs: o.JobsOpt = 1,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Decode commit-log messages in physical order, filter them, print them.

    The table shows what a person needs first, one aligned line per record with widths
    fixed once (long topics, tags and keys cut with an ellipsis), and its kind: normal,
    prepared, commit, rollback, half (-> real topic), op, delay (-> real topic at its
    delivery time), retry, dlq, blank. --body and --properties add each record's body (as
    the jsonl decodes it) and properties on indented lines under its row, cut to fit a
    terminal. --format jsonl gives every field, exact, under the names in the README
    (physical_offset, store_timestamp, topic, keys, msg_id, ...). Exit 1 when a filter
    matched nothing.

    With --begin the walk skips the commit-log files before the first one that can hold a
    record stored at or after that time (a note on stderr says where it started): the consume
    queues are bisected by store time as search-offset does, and the files before are skipped
    only where the queues, each skipped file's first record and the whole file just before the
    start agree that nothing there is that recent (store times rise in commit-log order unless
    the clock stepped back; where a queue shows them going back, every file is read). Not with
    --show-blank or --check-crc, which need every file.

    --trace prints the trace topics' messages as the message-trace records their bodies
    hold (docs/format/trace.md): a row per send, consume or transaction end, with the trace
    message's offset; --key X keeps the records about message X (its msgId or a key, exactly).

    --compaction-log reads a 5.x compaction log (CompactionLog) instead: the gaps between its
    files and the zeros that end each are how the broker leaves them, and are not warned about.
    """
    from rmqstore_cli.commands.common import no_such_topic, open_store

    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.store.answers import log_range
    from rmqstore_cli.store.answers.sampling import Narrowing
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    flt = fo.message_filter(topic, queue_id, key, uniq_key, tag, (begin, end, now), zone)
    b = flt.begin
    show = shown_fields(fmt.value, body.value, properties, decompress, max_decompressed)
    grammar.check_offsets(from_offset, to_offset)
    ms = open_store(store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size)
    if compaction_log is not None:  # seek: search-offset's bisection reads the consume queues, not its queue
        ms.commitlog = log_range.compaction_log(ms, compaction_log)
    seek_begin = o.seek_begin(b, seek, compaction_log is not None, show_blank or check_crc)
    rng, notes = log_range.plan(ms, from_offset, to_offset, file, seek_begin)
    for n in notes:
        lines.note(n)
    narrowing = Narrowing(sample, max_bytes)
    if trace:
        check_trace_options(summary, show_blank, body.value, properties)
        items = walk_items(ms, rng, flt, None, check_crc, False, True, narrowing)
        shown = print_traces(ms, items, topic, key, fmt.value, zone, limit)
    else:
        walk = (summary, show_blank, check_crc)
        jobs = 1 if compaction_log is not None else jobs
        shown = o.print_records(ms, rng, flt, (fmt.value, zone, limit, show), walk, narrowing, jobs)
    _closing_lines(ms, narrowing, compaction_log is not None, show_blank and fmt is Fmt.table)
    if shown == 0 and flt.any():
        raise (topic is not None and no_such_topic(ms, topic)) or NotFound("no message matched the filters")


def _closing_lines(ms: Any, narrowing: Any, compacted: bool, data_end: bool) -> None:
    """stderr after the records: what --sample/--max-bytes left out, where the walk stopped and why
    (a compaction log's gaps are its normal shape), and with --show-blank in a table where the data ends."""
    from rmqstore_cli.store.answers import log_range

    if narrowing.active:
        lines.note(narrowing.describe())
    for w in log_range.stop_warnings(ms.commitlog, compacted):
        lines.warn(w)
    if data_end and (line := log_range.data_end(ms.commitlog)):
        lines.say(None, line)
