"""``rmqstore dump-commitlog``: decode messages in commit-log order, filtered."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_queue_id,
    complete_topic,
)

from rmqstore_cli.errors import UsageError
from rmqstore_cli.times import check_window, parse_time, parse_tz

EPILOG = """Examples:

  rmqstore dump-commitlog --store ~/store --topic OrderTopic --begin -2h --limit 20

  rmqstore dump-commitlog --key order-42 --format jsonl | jq .msg_id

  rmqstore dump-commitlog --from-offset 1073741824 --body text --limit 1

  rmqstore dump-commitlog --topic OrderTopic --body text --decompress --max-decompressed 1048576
"""


class BodyMode(str, Enum):
    none = "none"
    text = "text"
    hex = "hex"
    base64 = "base64"


def register(app: typer.Typer) -> None:
    app.command("dump-commitlog", epilog=EPILOG)(dump_commitlog)


@command
def dump_commitlog(
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    from_offset: Annotated[
        int | None, typer.Option(min=0, help="Start at this physical offset (a message start).")
    ] = None,
    to_offset: Annotated[int | None, typer.Option(min=0, help="Stop before this physical offset.")] = None,
    file: Annotated[str | None, typer.Option("--file", help="Only this commit-log file (its 20-digit name).")] = None,
    topic: Annotated[
        str | None, typer.Option(help="Only messages of this topic.", autocompletion=complete_topic)
    ] = None,
    queue_id: Annotated[int | None, typer.Option(help="Only this queue id.", autocompletion=complete_queue_id)] = None,
    key: Annotated[str | None, typer.Option(help="Only messages whose KEYS contain this key.")] = None,
    uniq_key: Annotated[str | None, typer.Option(help="Only the message with this UNIQ_KEY.")] = None,
    tag: Annotated[str | None, typer.Option(help="Only messages with this TAGS value.")] = None,
    begin: Annotated[
        str | None,
        typer.Option(help="Store time from (ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more, now, -2h)."),
    ] = None,
    end: Annotated[str | None, typer.Option(help="Store time up to (inclusive; the forms of --begin).")] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Print at most this many messages.")] = None,
    body: Annotated[
        BodyMode, typer.Option(help="Include the body: none, text (escaped), hex or base64.")
    ] = BodyMode.none,
    properties: Annotated[bool, typer.Option("--properties/--no-properties", help="Include the properties.")] = True,
    show_blank: Annotated[bool, typer.Option(help="Also show BLANK end-of-file records and where data ends.")] = False,
    check_crc: Annotated[bool, typer.Option(help="Check body CRCs; a mismatch ends the log as in recovery.")] = False,
    decompress: Annotated[
        bool,
        typer.Option(
            "--decompress",
            help="Show compressed bodies (sysflag COMPRESSED, zlib only) decompressed, each capped "
            "at --max-decompressed bytes; a body that is not zlib or exceeds the cap stays raw with body_error.",
        ),
    ] = False,
    max_decompressed: Annotated[
        int, typer.Option(min=1, help="Cap on one decompressed body, in bytes (a crafted body cannot expand past it).")
    ] = 64 << 20,
    seek: Annotated[
        bool,
        typer.Option(
            "--seek/--no-seek",
            help="With --begin: start at the commit-log file where records stored at or after "
            "--begin can begin, found by the binary search search-offset runs over each consume queue (the "
            "same output as walking from the first file; without usable consume queues it walks from there).",
        ),
    ] = True,
    compaction_log: Annotated[
        str | None,
        typer.Option(
            "--compaction-log",
            metavar="TOPIC/QUEUE_ID",
            help="Read the compaction log of this compacted queue (compaction/compactionLog/TOPIC/QUEUE_ID/) instead "
            "of the commit log: the same records, PHYSICALOFFSET their place in that log.",
        ),
    ] = None,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Decode commit-log messages in physical order, filter them, print them.

    The table shows what a person needs first, one aligned line per record with widths
    fixed once (long topics, tags and keys cut with an ellipsis), and its kind: normal,
    prepared, commit, rollback, half (-> real topic), op, delay (-> real topic at its
    delivery time), retry, dlq, blank. --format jsonl gives every field under the names
    in the README (physical_offset, store_timestamp, topic, keys, msg_id, ...). Exit 1
    when a filter matched nothing.

    With --begin the walk skips the commit-log files before the first one that can hold a
    record stored at or after that time (a note on stderr says where it started): the
    consume queues are bisected by store time as search-offset does, and the files before
    are skipped only where the queues, each skipped file's first record and the whole file
    just before the start agree that nothing there is that recent (store times rise in
    commit-log order unless the clock stepped back; where a queue shows them going back,
    every file is read). Not with --show-blank or --check-crc, which need every file.

    --compaction-log TOPIC/QUEUE_ID reads a 5.x compaction log instead (CompactionLog: the
    records a compaction run kept, copied from the commit log with PHYSICALOFFSET rewritten
    to their place in the compaction log); the gaps between its files and the zeros that
    end each file are how the broker leaves them, not damage, so they are not warned about.
    """
    from rmqstore_cli.commands.common import open_store

    from rmqstore_cli.errors import NotFound

    zone = parse_tz(tz)
    flt = Filters(
        topic,
        queue_id,
        key,
        uniq_key.upper() if uniq_key is not None else None,
        tag,
        parse_time(begin, "--begin", tz=zone) if begin else None,
        parse_time(end, "--end", tz=zone) if end else None,
    )
    check_window(flt.begin, flt.end, zone)
    if from_offset is not None and to_offset is not None and from_offset > to_offset:
        raise UsageError(
            f"--from-offset {from_offset} lies after --to-offset {to_offset}",
            hint="the range is [--from-offset, --to-offset)",
        )
    ms = open_store(store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size)
    if compaction_log is not None:
        ms.commitlog = _compaction_log(ms, compaction_log)
        seek = False  # search-offset's bisection reads the consume queues, not the compaction queue
    cl = ms.commitlog
    start, stop = _range(cl, from_offset, to_offset, file)
    if seek and flt.begin is not None and not show_blank and not check_crc:
        start = _seek(ms, flt.begin, start)
    shown = _print(
        ms,
        start,
        stop,
        flt,
        fmt,
        zone,
        limit,
        body.value,
        properties,
        show_blank,
        check_crc,
        max_decompressed if decompress else None,
    )
    if compaction_log is not None:
        from rmqstore_cli.store.compaction import unexpected_stops

        cl.stops = unexpected_stops(cl)
    for stop_ in cl.stops:
        print(
            f"rmqstore: warning: {stop_.reason} at offset {stop_.offset} ({stop_.file}); "
            "the rest of that file was skipped",
            file=sys.stderr,
        )
    end_ = cl.end
    if show_blank and end_ is not None and end_.clean and fmt is Fmt.table:
        print(f"data ends at offset {end_.offset} ({end_.reason})", file=sys.stderr)
    if shown == 0 and flt.any():
        from rmqstore_cli.commands.common import no_such_topic

        raise (topic is not None and no_such_topic(ms, topic)) or NotFound("no message matched the filters")


def _compaction_log(ms, spec: str):
    """--compaction-log TOPIC/QUEUE_ID: that queue's compaction log (``CompactionLog``)."""
    from rmqstore_cli.store.compaction import CompactionStore

    topic, sep, qid = spec.rpartition("/")
    if not sep or not topic or not (qid.isascii() and qid.isdigit()):
        raise UsageError(f"--compaction-log {spec!r}: give TOPIC/QUEUE_ID", hint="e.g. DeviceStateTopic/0")
    return CompactionStore(ms.config).log(topic, int(qid))


@dataclass(frozen=True)
class Filters:
    """The record filters (None: not given); ``uniq_key`` upper-case, as the broker writes it."""

    topic: str | None
    queue_id: int | None
    key: str | None
    uniq_key: str | None
    tag: str | None
    begin: int | None
    end: int | None

    def any(self) -> bool:
        return any(
            x is not None for x in (self.topic, self.queue_id, self.key, self.uniq_key, self.tag, self.begin, self.end)
        )

    def columnar(self) -> bool:
        """Whether whole blocks can be filtered by their columns (no filter needs a property)."""
        return self.key is None and self.uniq_key is None and self.tag is None

    def select(self, blk):
        """Indices of a block's records that pass the column filters."""
        import numpy as np

        keep = np.ones(blk.n, bool)
        if self.topic is not None:
            names, tid = blk.topics
            keep &= np.array([t.decode("utf-8", "replace") == self.topic for t in names], bool)[tid]
        if self.queue_id is not None:
            keep &= blk.rb.queue_id == self.queue_id
        if self.begin is not None:
            keep &= blk.store_timestamp >= self.begin
        if self.end is not None:
            keep &= blk.store_timestamp <= self.end
        return np.flatnonzero(keep)


def _range(cl, from_offset: int | None, to_offset: int | None, file: str | None) -> tuple[int | None, int | None]:
    """[start, stop) of the walk from --from-offset, --to-offset and --file; a start that is
    no message start refused (or noted when past the data)."""
    start, stop = from_offset, to_offset
    if file is not None:
        f = next((x for x in cl.files if x.name == file), None)
        if f is None:
            raise UsageError(
                f"no commit-log file named {file!r}",
                hint=f"files: {cl.files[0].name} … {cl.files[-1].name}" if cl.files else "the commit log is empty",
            )
        start = max(start or 0, f.file_from_offset)
        stop = min(stop, f.end_offset) if stop is not None else f.end_offset
    if start is not None and _check_message_start(cl, start):
        print(
            f"rmqstore: note: offset {start} lies at or past the end of the commit log's data: no message from there",
            file=sys.stderr,
        )
    return start, stop


def _seek(ms, begin: int, start: int | None) -> int | None:
    """--begin's start (``store.seek``): a later file start than ``start``, said on stderr."""
    from rmqstore_cli.store.seek import seek_time

    sk = seek_time(ms, begin)
    if sk.offset is None:
        if sk.reason is not None and start is None:
            print(f"rmqstore: note: --begin: reading from the first commit-log file ({sk.reason})", file=sys.stderr)
        return start
    if start is not None and start >= sk.offset:
        return start
    print(
        f"rmqstore: note: --begin: starting at commit-log file {sk.file} (offset {sk.offset}): the files "
        "before hold nothing stored that late",
        file=sys.stderr,
    )
    return sk.offset


def _print(
    ms,
    start: int | None,
    stop: int | None,
    flt: Filters,
    fmt: Fmt,
    zone,
    limit: int | None,
    body: str,
    properties: bool,
    show_blank: bool,
    check_crc: bool,
    inflate_cap: int | None,
) -> int:
    """Walk [start, stop) and print what passes; the count printed. Whole blocks of records
    go the columnar way (jsonblock, tableblock) unless a filter or an option needs each
    record decoded; the per-record path stays the reference (its filters inline: a call per
    record would cost a tenth of the walk)."""
    from rmqstore_cli.render import Output
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.message import Message
    from rmqstore_cli.store.message_view import entry_fields, message_dict

    cl = ms.commitlog
    table = fmt is Fmt.table
    delays = None
    if table:  # tableblock is imported only for a table
        from rmqstore_cli.tableblock import (
            blank_row,
            block_rows,
            commitlog_columns,
            entry_columns,
            known_topics,
            message_row,
        )

        delays = ms.config.delay_level_table
    dledger = cl.is_dledger  # entry index, term and pos per record: the per-record path
    columns = None
    if table:
        columns = commitlog_columns(cl.files[-1].end_offset if cl.files else 0, known_topics(ms))
        if dledger:
            columns[1:1] = entry_columns()
    out = Output(fmt.value, columns, title=str(ms.config.root))
    columnar = (table or body != "text" and inflate_cap is None) and flt.columnar() and not dledger
    if columnar and not table:
        from rmqstore_cli.jsonblock import block_lines
    topic, queue_id, b, e = flt.topic, flt.queue_id, flt.begin, flt.end
    key, uniq_key, tag = flt.key, flt.uniq_key, flt.tag
    shown = 0
    cur: tuple[int, int, str] | None = None  # the current file's [start, end) and name
    try:
        for rec in cl.scan_blocks(
            start, stop, check_crc=check_crc, include_blank=show_blank, every_file=True, blocks=columnar
        ):
            if limit is not None and shown >= limit:
                break
            if not isinstance(rec, (Message, Blank)):  # a MessageBlock
                take = flt.select(rec)
                if limit is not None:
                    take = take[: limit - shown]
                if take.size:
                    out.emit_lines(
                        block_rows(rec, take, out, zone, delays) if table else block_lines(rec, take, body, properties),
                        int(take.size),
                    )
                shown += int(take.size)
                continue
            if isinstance(rec, Blank):
                out.emit(
                    blank_row(rec)
                    if table
                    else {
                        "physical_offset": rec.physical_offset,
                        "total_size": rec.total_size,
                        "magic": "blank",
                        "file": rec.file,
                        "topic": "<BLANK: end of file>",
                    }
                )
                continue
            if (
                topic is not None
                and rec.topic != topic
                or queue_id is not None
                and rec.queue_id != queue_id
                or b is not None
                and rec.store_timestamp < b
                or e is not None
                and rec.store_timestamp > e
                or key is not None
                and key not in rec.keys
                or uniq_key is not None
                and rec.uniq_key != uniq_key
                or tag is not None
                and rec.tags != tag
            ):
                continue
            shown += 1
            extra = entry_fields(cl.entry_of(rec.offset)) if dledger else {}
            if table:
                out.emit({**message_row(rec, zone, delays), **extra})
                continue
            if not cur or not cur[0] <= rec.offset < cur[1]:
                f = cl.queue.find(rec.offset)
                cur = (f.file_from_offset, f.end_offset, f.name) if f else (rec.offset, rec.offset + 1, "")
            d = message_dict(rec, body, properties, cur[2])
            d.update(extra)
            if inflate_cap is not None and body != "none" and rec.sys_flag & 1:
                _inflate_into(d, rec, body, inflate_cap)
            out.emit(d)
    finally:
        out.close()
    return shown


def _inflate_into(d: dict, rec, mode: str, cap: int) -> None:
    """Replace a compressed record's body with its decompressed bytes (capped)."""
    from rmqstore_cli.store.compression import inflate
    from rmqstore_cli.store.message_view import encode_body

    r = inflate(rec.body, rec.sys_flag, cap)
    if r is None:
        return
    d["compression"] = r.compression
    if r.body is None:
        d["body_error"] = r.error
        return
    d["body"] = encode_body(r.body, mode)
    d["body_decompressed_size"] = len(r.body)


def _check_message_start(cl, offset: int) -> bool:
    """A start offset must be a message start; say which starts lie around it. True when it
    lies at or past the end of the log's data: the same (empty) answer as the exact end."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.store.commitlog import Blank, Status

    f = cl.queue.find(offset)
    if f is None:
        if cl.files and offset < cl.files[0].file_from_offset:
            raise UsageError(
                f"offset {offset} lies before the commit log's first file",
                hint=f"the log starts at {cl.files[0].file_from_offset}",
            )
        return bool(cl.files) and offset >= cl.files[-1].end_offset  # else in a gap between files
    if offset == f.file_from_offset:
        return False
    c = cl.check_at(offset)
    if c is not None and c.status is Status.VALID and c.message.physical_offset == offset:
        return False  # a record whose stored offset names this very position
    before, after = None, None
    data_end = f.file_from_offset  # the end of the file's last record
    for rec in cl.scan(f.file_from_offset, f.end_offset, include_blank=True):
        at = rec.physical_offset if isinstance(rec, Blank) else rec.offset
        if at < offset:
            before = at
            data_end = at + rec.total_size
        else:
            after = at
            break
    if after is None and f is cl.files[-1] and offset >= data_end:
        return True
    raise UsageError(
        f"offset {offset} is not the start of a message",
        path=f.path,
        offset=offset - f.file_from_offset,
        hint=f"nearest starts: {before} before, {after if after is not None else 'none'} after",
    )
