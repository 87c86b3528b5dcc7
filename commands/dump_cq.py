"""``rmqstore dump-cq``: consume-queue units, each checked against the message it points at."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any

import typer
from rmqstore_cli.commands import common, grammar
from rmqstore_cli.commands.common import complete_queue_id, complete_topic
from rmqstore_cli.commands.dump_cq_options import CompactionOpt, FileOpt, MessagesOpt, SummaryOpt, dump_file, file_store
from rmqstore_cli.commands.source_options import FROM_OPTIONS, StoreSource, store_options

EPILOG = """Examples:

  rmqstore dump-cq OrderTopic 3 --store ~/store --from-offset 1000 --to-offset 1020

  rmqstore dump-cq OrderTopic 3 --format jsonl | jq 'select(.agrees == false)'

  rmqstore dump-cq --file ~/store/consumequeue/OrderTopic/3/00000000000006000000 --no-resolve

  rmqstore dump-cq --summary --format jsonl        # min/max offsets of every queue

  rmqstore dump-cq OrderTopic 3 --from-offset 1000 --limit 5 --messages   # like mqadmin queryMsgByOffset
"""


def register(app: typer.Typer) -> None:
    app.command("dump-cq", epilog=EPILOG)(dump_cq)


@common.command
@store_options(cq_file_size=True)
def dump_cq(
    topic: Annotated[str | None, typer.Argument(help="The queue's topic.", autocompletion=complete_topic)] = None,
    queue_id: Annotated[int | None, typer.Argument(help="Queue id.", min=0, autocompletion=complete_queue_id)] = None,
    source: StoreSource = FROM_OPTIONS,
    from_offset: Annotated[
        int | None, grammar.from_offset_option("First logical (queue) offset; default the queue's first unit.")
    ] = None,
    to_offset: Annotated[int | None, grammar.to_offset_option("Stop before this logical (queue) offset.")] = None,
    old_from: Annotated[int | None, grammar.old_spelling("--from", min=0)] = None,
    limit: Annotated[int | None, grammar.limit_option("Print at most this many units.")] = None,
    resolve: Annotated[
        bool, typer.Option("--resolve/--no-resolve", help="Read each unit's message and check that it agrees.")
    ] = True,
    file: FileOpt = None,
    messages: MessagesOpt = False,
    compaction: CompactionOpt = False,
    summary: SummaryOpt = False,
    fmt: common.FormatOpt = common.Fmt.table,
    tz: common.TzOpt = None,
) -> None:
    """Print consume-queue units by logical offset, each resolved against the commit log.

    A unit agrees with its message when the record there is valid, has the unit's size,
    topic, queue id and queue offset, gets a unit at all (not PREPARED/ROLLBACK) and has
    the tags code dispatch computes. Pre-blank units (written below the first unit of a
    queue that starts above 0) are shown as pre-blank, not as errors. Units are read up to
    the queue's end as the broker's recovery finds it. A 5.x RocksDB consume queue
    (storeType=defaultRocksDB; the rocksdb extra) is read the same way, read-only: its
    units' file is rocksdb, a queue's max offset its offset family's max row + 1. Exit 1
    when no unit is printed.

    A topic with queue.type=BatchCQ (5.x) has its units in batchconsumequeue/: 46-byte
    units, each one commit-log record (an inner batch of batch_size messages from queue
    offset msg_base_offset); dump-cq reads them when the queue is there and not in
    consumequeue/, --from-offset being a queue offset inside a batch. --compaction reads the
    compaction store's queue the same way, and --file reads one file of either directory
    (unit_index then counts from the file's first unit). Those units print as: topic, queue_id, cq_type
    (BatchCQ or compaction), unit_index, msg_base_offset, batch_size, commitlog_offset, size,
    tags_code, store_time_ms, compacted_offset, file, position, and the resolved fields.

    JSON fields: topic, queue_id, cq_offset, commitlog_offset, size, tags_code, file,
    pre_blank; resolved: status (ok, mismatch, pre-blank, expired, missing), agrees
    (true, false, or null when there is nothing to compare), problems, store_timestamp,
    keys, tags, uniq_key; with --messages: message (the record, as dump-commitlog prints it).
    """
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    window = (grammar.renamed(from_offset, old_from, "--from-offset", "--from"), to_offset, limit)
    grammar.check_offsets(window[0], to_offset)
    if messages and (not resolve or summary):
        raise UsageError("--messages reads each unit's message: not with --no-resolve or --summary")
    opener = partial(source.engine, tz)
    if file is not None:
        if summary:
            raise UsageError("--summary and --file do not go together")
        ms = file_store(resolve, source.store, source.broker_conf, opener)
        dump_file(file, topic, queue_id, ms, window, fmt.value, zone, messages)
        return
    ms = opener()
    if summary:
        _dump_summary(ms, topic, queue_id, fmt.value)
        return
    if topic is None or queue_id is None:
        raise UsageError("give TOPIC and QUEUE_ID (or --file PATH, or --summary)")
    _dump_queue(ms, topic, queue_id, compaction, window, (resolve, messages), fmt.value, zone)


def _dump_summary(ms: Any, topic: str | None, queue_id: int | None, fmt: str) -> None:
    """--summary: per-queue offsets; nothing printed is a topic not found (closest names) or no queues."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.render_cq import emit_summary
    from rmqstore_cli.store.answers import cq_dump

    if queue_id is not None and topic is None:
        raise UsageError("give the topic before the queue id")
    if not emit_summary(cq_dump.summary_rows(ms, topic, queue_id), ms.config.root, fmt):
        raise (topic is not None and common.no_such_topic(ms, topic)) or cq_dump.no_queues(ms, topic)


def _dump_queue(
    ms: Any, topic: str, queue_id: int, compaction: bool, window: tuple, reads: tuple[bool, bool], fmt: str, zone
) -> None:
    """One queue's units: a batch (or compaction) queue's own rows, else the consume queue's, resolved or not.

    ``reads`` is (resolve, messages); an empty result names why (a topic not found, units held elsewhere).
    """
    from rmqstore_cli.render_cq import emit_batch_units, emit_units
    from rmqstore_cli.store.answers import cq_dump

    resolve, messages = reads
    bq, log = cq_dump.batch_queue_of(ms, topic, queue_id, compaction)
    if bq is not None:
        rows = cq_dump.batch_rows(bq, log, ms.config.delay_level_table, window, resolve)
        if emit_batch_units(bq, rows, fmt, zone) == 0:
            raise cq_dump.batch_held(bq)
        return
    if cq_dump.topic_unknown(ms, topic, queue_id) and (nf := common.no_such_topic(ms, topic)) is not None:
        raise nf
    cq = cq_dump.open_queue(ms, topic, queue_id)
    units = cq_dump.queue_rows(cq, ms if resolve else None, topic, queue_id, window)
    if emit_units(units, f"{topic}/{queue_id}", fmt, zone, ms if messages else None) == 0:
        raise cq_dump.queue_held(cq, topic, queue_id)
