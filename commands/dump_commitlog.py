"""``rmqstore dump-commitlog``: decode messages in commit-log order, filtered."""
from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Optional

import typer

from rmqstore_cli.commands.common import (
    DEFAULT_STORE,
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_topic,
    complete_queue_id,
)

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
    store: StoreOpt = DEFAULT_STORE,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    allow_odd_size: AllowOddSizeOpt = False,
    from_offset: Annotated[Optional[int], typer.Option(min=0, help="Start at this physical offset (a message start).")] = None,
    to_offset: Annotated[Optional[int], typer.Option(min=0, help="Stop before this physical offset.")] = None,
    file: Annotated[Optional[str], typer.Option("--file", help="Only this commit-log file (its 20-digit name).")] = None,
    topic: Annotated[Optional[str], typer.Option(help="Only messages of this topic.", autocompletion=complete_topic)] = None,
    queue_id: Annotated[Optional[int], typer.Option(help="Only this queue id.", autocompletion=complete_queue_id)] = None,
    key: Annotated[Optional[str], typer.Option(help="Only messages whose KEYS contain this key.")] = None,
    uniq_key: Annotated[Optional[str], typer.Option(help="Only the message with this UNIQ_KEY.")] = None,
    tag: Annotated[Optional[str], typer.Option(help="Only messages with this TAGS value.")] = None,
    begin: Annotated[Optional[str], typer.Option(help="Store time from (ISO 8601, epoch seconds if 10 digits, epoch ms "
                                                  "if 13 or more, now, -2h).")] = None,
    end: Annotated[Optional[str], typer.Option(help="Store time up to (inclusive; the forms of --begin).")] = None,
    limit: Annotated[Optional[int], typer.Option(min=0, help="Print at most this many messages.")] = None,
    body: Annotated[BodyMode, typer.Option(help="Include the body: none, text (escaped), hex or base64.")] = BodyMode.none,
    properties: Annotated[bool, typer.Option("--properties/--no-properties", help="Include the properties.")] = True,
    show_blank: Annotated[bool, typer.Option(help="Also show BLANK end-of-file records and where data ends.")] = False,
    check_crc: Annotated[bool, typer.Option(help="Check body CRCs; a mismatch ends the log as in recovery.")] = False,
    decompress: Annotated[bool, typer.Option(
        "--decompress", help="Show compressed bodies (sysflag COMPRESSED, zlib only) decompressed, each capped "
        "at --max-decompressed bytes; a body that is not zlib or exceeds the cap stays raw with body_error.")] = False,
    max_decompressed: Annotated[int, typer.Option(
        min=1, help="Cap on one decompressed body, in bytes (a crafted body cannot expand past it).")] = 64 << 20,
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
    """
    from rmqstore_cli.commands.common import open_store
    from rmqstore_cli.errors import NotFound, UsageError
    from rmqstore_cli.render import Output, message_dict
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.message import Message
    from rmqstore_cli.times import check_window, parse_time, parse_tz

    zone = parse_tz(tz)
    b = parse_time(begin, "--begin", tz=zone) if begin else None
    e = parse_time(end, "--end", tz=zone) if end else None
    check_window(b, e, zone)
    if from_offset is not None and to_offset is not None and from_offset > to_offset:
        raise UsageError(f"--from-offset {from_offset} lies after --to-offset {to_offset}",
                         hint="the range is [--from-offset, --to-offset)")
    ms = open_store(store, broker_conf, tz, allow_odd_size, commitlog_file_size=commitlog_file_size)
    cl = ms.commitlog
    start, stop = from_offset, to_offset
    if file is not None:
        f = next((x for x in cl.files if x.name == file), None)
        if f is None:
            raise UsageError(f"no commit-log file named {file!r}", hint=f"files: {cl.files[0].name} … {cl.files[-1].name}"
                             if cl.files else "the commit log is empty")
        start = max(start or 0, f.file_from_offset)
        stop = min(stop, f.end_offset) if stop is not None else f.end_offset
    if start is not None and _check_message_start(cl, start):
        print(f"rmqstore: note: offset {start} lies at or past the end of the commit log's data: no message "
              "from there", file=sys.stderr)
    table = fmt is Fmt.table
    if table:
        from rmqstore_cli.tableblock import blank_row, block_rows, commitlog_columns, known_topics, message_row

        delays = ms.config.delay_level_table
    out = Output(fmt.value, commitlog_columns(cl.files[-1].end_offset if cl.files else 0, known_topics(ms))
                 if table else None, title=str(ms.config.root))
    # Whole blocks of records go the columnar way (jsonblock, tableblock) unless a filter or
    # an option needs each record decoded; the per-record path stays the reference.
    columnar = (table or body is not BodyMode.text and not decompress) \
        and key is None and uniq_key is None and tag is None
    if columnar and not table:
        from rmqstore_cli.jsonblock import block_lines
    shown = 0
    cur: tuple[int, int, str] | None = None  # the current file's [start, end) and name
    try:
        for rec in cl.scan_blocks(start, stop, check_crc=check_crc, include_blank=show_blank, every_file=True,
                                  blocks=columnar):
            if limit is not None and shown >= limit:
                break
            if not isinstance(rec, (Message, Blank)):  # a MessageBlock
                take = _block_selection(rec, topic, queue_id, b, e)
                if limit is not None:
                    take = take[:limit - shown]
                if take.size:
                    out.emit_lines(block_rows(rec, take, out, zone, delays) if table else
                                   block_lines(rec, take, body.value, properties), int(take.size))
                shown += int(take.size)
                continue
            if isinstance(rec, Blank):
                out.emit(blank_row(rec) if table else {
                    "physical_offset": rec.physical_offset, "total_size": rec.total_size, "magic": "blank",
                    "file": rec.file, "topic": "<BLANK: end of file>"})
                continue
            if topic is not None and rec.topic != topic:
                continue
            if queue_id is not None and rec.queue_id != queue_id:
                continue
            if b is not None and rec.store_timestamp < b:
                continue
            if e is not None and rec.store_timestamp > e:
                continue
            if key is not None and key not in rec.keys:
                continue
            if uniq_key is not None and rec.uniq_key != uniq_key.upper():
                continue
            if tag is not None and rec.tags != tag:
                continue
            if not cur or not cur[0] <= rec.offset < cur[1]:
                f = cl.queue.find(rec.offset)
                cur = (f.file_from_offset, f.end_offset, f.name) if f else (rec.offset, rec.offset + 1, "")
            if table:
                out.emit(message_row(rec, zone, delays))
                shown += 1
                continue
            d = message_dict(rec, body.value, properties, cur[2])
            if decompress and body is not BodyMode.none and rec.sys_flag & 1:
                _inflate_into(d, rec, body.value, max_decompressed)
            out.emit(d)
            shown += 1
    finally:
        out.close()
    for stop_ in cl.stops:
        print(f"rmqstore: warning: {stop_.reason} at offset {stop_.offset} ({stop_.file}); "
              "the rest of that file was skipped", file=sys.stderr)
    end_ = cl.end
    if show_blank and end_ is not None and end_.clean and fmt is Fmt.table:
        print(f"data ends at offset {end_.offset} ({end_.reason})", file=sys.stderr)
    if shown == 0 and any(x is not None for x in (topic, queue_id, key, uniq_key, tag, b, e)):
        from rmqstore_cli.commands.common import no_such_topic

        raise (topic is not None and no_such_topic(ms, topic)) or NotFound("no message matched the filters")


def _block_selection(blk, topic: str | None, queue_id: int | None, begin: int | None, end: int | None):
    """Indices of the block's records that pass the column filters."""
    import numpy as np

    keep = np.ones(blk.n, bool)
    if topic is not None:
        names, tid = blk.topics
        keep &= np.array([t.decode("utf-8", "replace") == topic for t in names], bool)[tid]
    if queue_id is not None:
        keep &= blk.rb.queue_id == queue_id
    if begin is not None:
        keep &= blk.store_timestamp >= begin
    if end is not None:
        keep &= blk.store_timestamp <= end
    return np.flatnonzero(keep)


def _inflate_into(d: dict, rec, mode: str, cap: int) -> None:
    """Replace a compressed record's body with its decompressed bytes (capped)."""
    from rmqstore_cli.render import encode_body
    from rmqstore_cli.store.compression import inflate

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
            raise UsageError(f"offset {offset} lies before the commit log's first file",
                             hint=f"the log starts at {cl.files[0].file_from_offset}")
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
    raise UsageError(f"offset {offset} is not the start of a message",
                     path=f.path, offset=offset - f.file_from_offset,
                     hint=f"nearest starts: {before} before, {after if after is not None else 'none'} after")
