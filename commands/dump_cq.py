"""``rmqstore dump-cq``: consume-queue units, each checked against the message it points at."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    STORE_HELP,
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    TzOpt,
    command,
    complete_queue_id,
    complete_topic,
)

EPILOG = """Examples:

  rmqstore dump-cq OrderTopic 3 --store ~/store --from 1000 --limit 20

  rmqstore dump-cq OrderTopic 3 --format jsonl | jq 'select(.agrees == false)'

  rmqstore dump-cq --file ~/store/consumequeue/OrderTopic/3/00000000000006000000 --no-resolve

  rmqstore dump-cq --summary --format jsonl        # min/max offsets of every queue

  rmqstore dump-cq OrderTopic 3 --from 1000 --limit 5 --messages   # like mqadmin queryMsgByOffset
"""

#: --messages, in the table: the message behind each unit (mqadmin queryMsgByOffset's fields).
MESSAGE_KEYS = ("msg_id", "born_host", "body_size")


def _table_columns(messages: bool = False):
    """Numbers right-aligned and wide enough for a size (maxMessageSize: 7 digits) and a tags
    hash (11); keys cut at 40 cells; the problems last, unpadded. ``messages`` (--messages):
    the message behind each unit as well, mqadmin queryMsgByOffset's fields (an offset msgId
    has 32 hex digits, 40 for an IPv6 store host)."""
    from rmqstore_cli.render import Col

    cols = [
        Col("cq_offset", "cq offset", right=True),
        Col("commitlog_offset", "commitlog offset", right=True),
        Col("size", "size", right=True, width=7),
        Col("tags_code", "tags code", right=True, width=11),
        Col("store_time", "store time", width=23, cap=23),
        Col("keys", "keys", cap=40, slack=8),
        Col("status", "status", width=9),
        Col("problems", "problems"),
    ]
    if messages:  # before the unpadded problems column
        cols[-1:-1] = [
            Col(MESSAGE_KEYS[0], "msgId", width=32, cap=40),
            Col(MESSAGE_KEYS[1], "born host", cap=47),
            Col(MESSAGE_KEYS[2], "body size", right=True, width=9),
        ]
    return cols


SUMMARY_COLUMNS = [
    ("topic", "topic"),
    ("queue_id", "queue"),
    ("min_offset", "min offset"),
    ("max_offset", "max offset"),
    ("max_physic_offset", "max physic offset"),
    ("pre_blank_units", "pre-blank"),
    ("files", "files"),
]


def register(app: typer.Typer) -> None:
    app.command("dump-cq", epilog=EPILOG)(dump_cq)


@command
def dump_cq(
    topic: Annotated[
        str | None, typer.Argument(help="The queue's topic (its directory name).", autocompletion=complete_topic)
    ] = None,
    queue_id: Annotated[
        int | None, typer.Argument(help="The queue id.", min=0, autocompletion=complete_queue_id)
    ] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            "-s",
            show_default=False,
            help=STORE_HELP[:-1] + ". With --file: resolve units against the store named so (never ~/store).",
        ),
    ] = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    from_offset: Annotated[
        int | None,
        typer.Option("--from", min=0, help="First logical (queue) offset; default the queue's first unit."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Print at most this many units.")] = None,
    resolve: Annotated[
        bool, typer.Option("--resolve/--no-resolve", help="Read each unit's message and check that it agrees.")
    ] = True,
    file: Annotated[
        Path | None, typer.Option("--file", help="Dump this one consume-queue file directly (no store needed).")
    ] = None,
    messages: Annotated[
        bool,
        typer.Option(
            "--messages",
            help="Print the message behind each unit (as dump-commitlog prints it) under message, "
            "like mqadmin queryMsgByOffset; null where no valid record is there.",
        ),
    ] = False,
    compaction: Annotated[
        bool,
        typer.Option(
            "--compaction",
            help="Read the compaction store's queue of TOPIC QUEUE_ID (compaction/compactionCq/, "
            "cleanup.policy=COMPACTION topics), resolved against its compaction log.",
        ),
    ] = False,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            help="Per queue: min and max offset, max physical offset, pre-blank units, files "
            "(all queues, or those of TOPIC).",
        ),
    ] = False,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
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
    consumequeue/, --from being a queue offset inside a batch. --compaction reads the
    compaction store's queue the same way, and --file reads one file of either directory
    (unit_index then counts from the file's first unit). Those units print as: topic, queue_id, cq_type
    (BatchCQ or compaction), unit_index, msg_base_offset, batch_size, commitlog_offset, size,
    tags_code, store_time_ms, compacted_offset, file, position, and the resolved fields.

    JSON fields: topic, queue_id, cq_offset, commitlog_offset, size, tags_code, file,
    pre_blank; resolved: status (ok, mismatch, pre-blank, expired, missing), agrees
    (true, false, or null when there is nothing to compare), problems, store_timestamp,
    keys, tags, uniq_key; with --messages: message (the record, as dump-commitlog prints it).
    """
    from rmqstore_cli.commands.common import open_store, pick_store

    from rmqstore_cli.errors import NotFound, UsageError
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    if messages and (not resolve or summary):
        raise UsageError("--messages reads each unit's message: not with --no-resolve or --summary")
    if file is not None:
        if summary:
            raise UsageError("--summary and --file do not go together")
        named = pick_store(store, broker_conf, required=False)[0] if resolve else None  # no default ~/store
        ms = (
            open_store(
                store,
                broker_conf,
                tz,
                allow_odd_size,
                commitlog_file_size=commitlog_file_size,
                cq_file_size=cq_file_size,
            )
            if named is not None
            else None
        )
        if messages and ms is None:
            raise UsageError("--messages with --file needs --store to read the messages from")
        shown = _dump_file(file, topic, queue_id, ms, from_offset, limit, fmt, zone, messages)
    else:
        ms = open_store(
            store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size, cq_file_size=cq_file_size
        )
        if summary:
            if queue_id is not None and topic is None:
                raise UsageError("give the topic before the queue id")
            shown = _summary(ms, topic, queue_id, fmt)
            if not shown:
                from rmqstore_cli.commands.common import no_such_topic

                if topic is not None and (nf := no_such_topic(ms, topic)) is not None:
                    raise nf
                raise NotFound(
                    "no consume queue matched" if topic else "the store has no consume queues",
                    path=ms.config.consumequeue_dir,
                )
            return
        if topic is None or queue_id is None:
            raise UsageError("give TOPIC and QUEUE_ID (or --file PATH, or --summary)")
        bq, log = _batch_queue(ms, topic, queue_id, compaction)
        if bq is not None:
            shown = _dump_batch_queue(bq, log, ms.config.delay_level_table, from_offset, limit, resolve, fmt, zone)
            if shown == 0:
                raise NotFound(
                    "no unit in that range",
                    hint=f"{topic}/{queue_id} holds queue offsets {bq.min_offset}..{bq.max_offset - 1}"
                    if bq.unit_count
                    else "it holds no unit",
                )
            return
        shown = _dump_queue(ms, topic, queue_id, from_offset, limit, resolve, fmt, zone, messages)
    if shown == 0:
        raise NotFound("no unit in that range")


BATCH_COLUMNS = (
    ("unit_index", "unit"),
    ("msg_base_offset", "base offset"),
    ("batch_size", "batch"),
    ("commitlog_offset", "commitlog offset"),
    ("size", "size"),
    ("tags_code", "tags code"),
    ("store_time", "store time"),
    ("status", "status"),
    ("problems", "problems"),
)


def _batch_queue(ms, topic: str, queue_id: int, compaction: bool):
    """The BatchCQ queue (batchconsumequeue/, when the queue is not in consumequeue/) or,
    with --compaction, the compaction store's queue, and the log its units point into;
    (None, None): an ordinary consume queue."""
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.store.batch_queue import BatchConsumeQueue
    from rmqstore_cli.store.compaction import CompactionStore

    if compaction:
        cs = CompactionStore(ms.config)
        bq = cs.cq(topic, queue_id)
        if not bq.queue.files:
            raise NotFound(
                f"no compaction queue {topic}/{queue_id}",
                path=bq.dir,
                hint="rmqstore dump-cq --summary lists the compaction queues",
            )
        return bq, cs.log(topic, queue_id)
    d = ms.config.root / "batchconsumequeue" / topic / str(queue_id)
    if (ms.config.consumequeue_dir / topic / str(queue_id)).is_dir() or not d.is_dir():
        return None, None
    size = ms.config.mapper_file_size_batch_consume_queue or None
    return BatchConsumeQueue(d, topic, queue_id, size), ms.commitlog


def _dump_batch_queue(bq, log, delay: dict, from_offset, limit, resolve, fmt, zone) -> int:
    """``BatchConsumeQueue`` units from the one holding queue offset --from, each resolved
    (:func:`~rmqstore_cli.store.unit_check.check_batch_unit`)."""
    from rmqstore_cli.render import Output
    from rmqstore_cli.store.unit_check import check_batch_unit
    from rmqstore_cli.times import format_ms

    table = fmt.value == "table"
    first = 0
    if from_offset is not None:
        hit = bq.find(max(from_offset, bq.min_offset), or_next=bq.sparse)
        first = hit.index if hit is not None else bq.unit_count
    kind = "compaction" if bq.sparse else "BatchCQ"
    out = Output(fmt.value, BATCH_COLUMNS, title=f"{bq.topic}/{bq.queue_id} ({kind})")
    try:
        for u in bq.units():
            if u.index < first:
                continue
            if limit is not None and out.count >= limit:
                break
            d = {
                "topic": bq.topic,
                "queue_id": bq.queue_id,
                "cq_type": kind,
                "unit_index": u.index,
                "msg_base_offset": u.msg_base_offset,
                "batch_size": u.batch_size,
                "commitlog_offset": u.commitlog_offset,
                "size": u.size,
                "tags_code": u.tags_code,
                "store_time_ms": u.store_time,
                "compacted_offset": u.compacted_offset,
                "file": u.file,
                "position": u.pos,
            }
            if resolve:
                c = check_batch_unit(log, u, bq.topic, bq.queue_id, delay, bq.sparse)
                m = c.message
                d.update(
                    status=c.status,
                    agrees=c.agrees,
                    problems=c.problems,
                    keys=m.keys if m is not None else None,
                    tags=m.tags if m is not None else None,
                    uniq_key=m.uniq_key if m is not None else None,
                )
            if table:
                d["store_time"] = format_ms(u.store_time, zone)
                d["problems"] = "; ".join(d.get("problems", []))
            out.emit(d)
    finally:
        out.close()
    return out.count


def _resolver(ms, topic, queue_id):
    from rmqstore_cli.store.unit_check import check_unit

    cl = ms.commitlog
    delay = ms.config.delay_level_table
    ext = ms.config.enable_consume_queue_ext

    def resolve(cq_offset, off, size, tags):
        return check_unit(cl, cq_offset, off, size, tags, topic, queue_id, delay, ext)

    return resolve


def _unit_dict(topic, queue_id, cq_offset, off, size, tags, fname, check, table: bool, zone, ms=None) -> dict:
    """``ms``: also the message behind the unit (--messages), as dump-commitlog prints it."""
    from rmqstore_cli.store.consume_queue import is_pre_blank
    from rmqstore_cli.times import format_ms

    d = {
        "topic": topic,
        "queue_id": queue_id,
        "cq_offset": cq_offset,
        "commitlog_offset": off,
        "size": size,
        "tags_code": tags,
        "file": fname,
        "pre_blank": is_pre_blank(off, size, tags),
    }
    if check is not None:
        m = check.message
        d["status"] = check.status
        d["agrees"] = check.agrees
        d["problems"] = check.problems
        d["store_timestamp"] = m.store_timestamp if m is not None else None
        d["keys"] = m.keys if m is not None else None
        d["tags"] = m.tags if m is not None else None
        d["uniq_key"] = m.uniq_key if m is not None else None
        if table:
            d["store_time"] = format_ms(m.store_timestamp, zone) if m is not None else ""
            d["problems"] = "; ".join(check.problems)
        if ms is not None:
            _add_message(d, check, off, ms, table)
    elif table:
        d["status"] = "pre-blank" if d["pre_blank"] else ""
    return d


def _add_message(d: dict, check, off: int, ms, table: bool) -> None:
    """``DefaultMessageStore#lookMessageByOffset`` for --messages: the record when it is a
    valid message (ok or mismatch), else null."""
    from rmqstore_cli.store.message_view import entry_fields, message_dict

    m = check.message if check.status in ("ok", "mismatch") else None
    if m is None:
        d["message"] = None
        return
    f = ms.commitlog.queue.find(off)
    d["message"] = {
        **message_dict(m, "none", True, f.name if f is not None else ""),
        **entry_fields(ms.commitlog.entry_of(off)),
    }
    if table:
        for key in MESSAGE_KEYS:
            d[key] = d["message"].get(key)


def _dump_queue(ms, topic, queue_id, from_offset, limit, resolve, fmt, zone, messages=False) -> int:
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import Output

    cq = ms.consume_queue(topic, queue_id)
    if not cq.file_names() and not (ms.config.consumequeue_dir / topic).is_dir():
        from rmqstore_cli.commands.common import no_such_topic

        nf = no_such_topic(ms, topic)
        if nf is not None:
            raise nf
    if not cq.file_names():
        qids = (
            sorted(int(p.name) for p in (ms.config.consumequeue_dir / topic).glob("*") if p.name.isdigit())
            if (ms.config.consumequeue_dir / topic).is_dir()
            else []
        )
        raise NotFound(
            f"no consume queue {topic}/{queue_id}",
            path=cq.dir,
            hint=f"queues of this topic: {', '.join(map(str, qids))}"
            if qids
            else "rmqstore dump-cq --summary lists the queues",
        )
    res = _resolver(ms, topic, queue_id) if resolve else None
    start = max(from_offset or 0, cq.min_file_offset)
    stop = cq.max_offset if limit is None else min(cq.max_offset, start + limit)
    out = Output(fmt.value, _table_columns(messages), title=f"{topic}/{queue_id}")
    try:
        for arr, first, fname in cq.unit_arrays(start, stop):
            for j, (off, size, tags) in enumerate(arr.tolist()):
                check = res(first + j, off, size, tags) if res else None
                out.emit(
                    _unit_dict(
                        topic,
                        queue_id,
                        first + j,
                        off,
                        size,
                        tags,
                        fname,
                        check,
                        fmt.value == "table",
                        zone,
                        ms if messages else None,
                    )
                )
    finally:
        out.close()  # the queue's read-only mappings close with the process (numpy views hold them)
    if not out.count:  # the same answer for the exact end and anything past it
        held = (
            f"holds units {cq.min_file_offset}..{cq.max_offset - 1}"
            if cq.max_offset > cq.min_file_offset
            else "holds no unit"
        )
        raise NotFound("no unit in that range", hint=f"{topic}/{queue_id} {held}")
    return out.count


def _dump_file(path: Path, topic, queue_id, ms, from_offset, limit, fmt, zone, messages=False) -> int:
    """One CQ file on its own: units from the file's start up to its first invalid unit
    (``ConsumeQueue#recover``'s end, read by :class:`ConsumeQueue` over this one file); the
    file name gives the first logical offset."""
    import os

    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.render import Output
    from rmqstore_cli.store.consume_queue import ConsumeQueue
    from rmqstore_cli.store.safefs import open_read_only

    fd = open_read_only(path)  # a FIFO given as --file: refused, not waited on
    try:
        length = os.fstat(fd).st_size
    finally:
        os.close(fd)
    kind = path.parent.parent.parent.name
    if kind in ("batchconsumequeue", "compactionCq"):  # a 46-byte-unit file
        return _dump_batch_file(path, kind == "compactionCq", ms, from_offset, limit, fmt, zone)
    if topic is None and path.parent.name.isdigit() and path.parent.parent.name:
        topic, queue_id = path.parent.parent.name, int(path.parent.name) if queue_id is None else queue_id
    cq = ConsumeQueue.of_file(path, length)
    cq.queue.files[0].buffer()  # mapped first: a file the process cannot map is that error, whatever its size
    if length % CQ_STORE_UNIT_SIZE:
        cq.close()
        raise StoreError(
            f"file has {length} bytes, not a multiple of the {CQ_STORE_UNIT_SIZE}-byte unit",
            path=path,
            hint="is this a consume-queue file?",
        )
    base = cq.min_file_offset
    start = base + max(0, (from_offset or base) - base)
    stop = cq.max_offset if limit is None else min(cq.max_offset, start + limit)
    res = _resolver(ms, topic, queue_id) if ms is not None else None
    out = Output(fmt.value, _table_columns(messages), title=str(path))
    try:
        for arr, first, _ in cq.unit_arrays(start, stop):
            for j, (off, size, tags) in enumerate(arr.tolist()):
                check = res(first + j, off, size, tags) if res else None
                out.emit(
                    _unit_dict(
                        topic,
                        queue_id,
                        first + j,
                        off,
                        size,
                        tags,
                        path.name,
                        check,
                        fmt.value == "table",
                        zone,
                        ms if messages else None,
                    )
                )
    finally:
        out.close()
        cq.close()
    return out.count


def _dump_batch_file(path: Path, sparse: bool, ms, from_offset, limit, fmt, zone) -> int:
    """--file of batchconsumequeue/ or compaction/compactionCq/: its units, resolved against
    the commit log (the compaction log) when --store is given."""
    from rmqstore_cli.store.batch_queue import BatchConsumeQueue

    bq = BatchConsumeQueue.of_file(path, sparse)
    log = None
    if ms is not None:
        from rmqstore_cli.store.compaction import CompactionStore

        log = CompactionStore(ms.config).log(bq.topic, bq.queue_id) if sparse else ms.commitlog
    try:
        return _dump_batch_queue(
            bq,
            log,
            ms.config.delay_level_table if ms is not None else {},
            from_offset,
            limit,
            log is not None,
            fmt,
            zone,
        )
    finally:
        bq.close()


def _summary(ms, topic, queue_id, fmt) -> int:
    import numpy as np

    from rmqstore_cli.render import Output
    from rmqstore_cli.store.consume_queue import is_pre_blank

    clmin = ms.commitlog.min_offset
    out = Output(fmt.value, SUMMARY_COLUMNS, title=f"{ms.config.root}: consume queues")
    try:
        for cq in ms.consume_queues():
            if topic is not None and cq.topic != topic or queue_id is not None and cq.queue_id != queue_id:
                continue
            end = cq.max_offset
            pre = 0
            max_phy = -1
            for arr, _, _ in cq.unit_arrays(cq.min_file_offset, end):
                pre += int(np.count_nonzero(is_pre_blank(arr["commitlog_offset"], arr["size"], arr["tags_code"])))
                last = arr[-1]
                max_phy = int(last["commitlog_offset"]) + int(last["size"])
            d = {
                "topic": cq.topic,
                "queue_id": cq.queue_id,
                "min_offset": cq.min_offset(clmin),
                "max_offset": end,
                "max_physic_offset": max_phy,
                "pre_blank_units": pre,
                "files": cq.file_names(),
            }
            if fmt.value == "table":
                d["files"] = f"{len(d['files'])}: {d['files'][0]}…" if len(d["files"]) > 1 else d["files"]
            out.emit(d)
        for d in _batch_summaries(ms, topic, queue_id):
            if fmt.value == "table":
                d["topic"] = f"{d['topic']} ({d['cq_type']})"
                d["files"] = f"{len(d['files'])}: {d['files'][0]}…" if len(d["files"]) > 1 else d["files"]
            out.emit(d)
    finally:
        out.close()
    return out.count


def _batch_summaries(ms, topic, queue_id):
    """--summary rows of the BatchCQ queues (batchconsumequeue/) and the compaction store's
    queues (``cq_type`` says which): bounds as ``#reviseMinOffsetInQueue`` and
    ``#reviseMaxOffsetInQueue`` give them, the end of the last unit's record."""
    from rmqstore_cli.store.batch_queue import batch_queues
    from rmqstore_cli.store.compaction import CompactionStore

    cfg = ms.config
    cs = CompactionStore(cfg)
    for kind, qs in (
        (
            "BatchCQ",
            batch_queues(cfg.root / "batchconsumequeue", False, cfg.mapper_file_size_batch_consume_queue or None),
        ),
        ("compaction", batch_queues(cs.cq_dir, True, cs.cq_file_size())),
    ):
        for bq in qs:
            if topic is not None and bq.topic != topic or queue_id is not None and bq.queue_id != queue_id:
                continue
            cols = bq.columns()
            end = int(cols[-1]["commitlog_offset"]) + int(cols[-1]["size"]) if cols.size else -1
            yield {
                "topic": bq.topic,
                "queue_id": bq.queue_id,
                "min_offset": bq.min_offset,
                "max_offset": bq.max_offset,
                "max_physic_offset": end,
                "pre_blank_units": 0,
                "files": [f.name for f in bq.queue.files],
                "cq_type": kind,
                "units": int(cols.size),
            }
            bq.close()
