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
from rmqstore_cli.render import BODY_CAP, PROPERTIES_CAP
from rmqstore_cli.times import check_window, parse_time, parse_tz

EPILOG = """Examples:

  rmqstore dump-commitlog --store ~/store --topic OrderTopic --begin -2h --limit 20

  rmqstore dump-commitlog --key order-42 --format jsonl | jq .msg_id

  rmqstore dump-commitlog --from-offset 1073741824 --body text --limit 1

  rmqstore dump-commitlog --topic OrderTopic --body text --decompress --max-decompressed 1048576
"""


#: the default cap on one decompressed body (--max-decompressed)
MAX_DECOMPRESSED = 64 << 20


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
        BodyMode,
        typer.Option(
            help="Include the body: none, text (escaped), hex or base64; the table shows it on a line under "
            f"each record, cut at {BODY_CAP} characters (--format jsonl has it whole)."
        ),
    ] = BodyMode.none,
    properties: Annotated[
        bool | None,
        typer.Option(
            "--properties/--no-properties",
            show_default="with --format json or jsonl",
            help="Include the properties; the table shows them on a line under each record as NAME=VALUE pairs, "
            f"cut at {PROPERTIES_CAP} characters.",
        ),
    ] = None,
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
        int | None,
        typer.Option(
            min=1,
            show_default=str(MAX_DECOMPRESSED),
            help="With --decompress: the cap on one decompressed body, in bytes (a crafted body cannot expand "
            "past it).",
        ),
    ] = None,
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
    delivery time), retry, dlq, blank. --body and --properties add each record's body (as
    the jsonl decodes it) and properties on indented lines under its row, cut to fit a
    terminal. Text from the store is shown with control, bidi and zero-width characters
    escaped (\\x1b, \\u202e), as git shows names. --format jsonl gives every field, exact,
    under the names in the README (physical_offset, store_timestamp, topic, keys, msg_id,
    ...). Exit 1 when a filter matched nothing.

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
    from rmqstore_cli.store.filters import MessageFilter

    zone = parse_tz(tz)
    flt = MessageFilter(
        topic,
        queue_id,
        key,
        uniq_key,
        tag,
        parse_time(begin, "--begin", tz=zone) if begin else None,
        parse_time(end, "--end", tz=zone) if end else None,
    )
    show = _shown(fmt, body, properties, decompress, max_decompressed)
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
    shown = _print(ms, start, stop, flt, fmt, zone, limit, show, show_blank, check_crc)
    if compaction_log is not None:
        from rmqstore_cli.store.compaction import unexpected_stops

        cl.stops = unexpected_stops(cl)
    from rmqstore_cli.render import safe_text

    for stop_ in cl.stops:
        where = safe_text(f"{stop_.reason} at offset {stop_.offset} ({stop_.file})")  # a compaction log's path
        print(f"rmqstore: warning: {where}; the rest of that file was skipped", file=sys.stderr)
    end_ = cl.end
    if show_blank and end_ is not None and end_.clean and fmt is Fmt.table:
        print(f"data ends at offset {end_.offset} ({end_.reason})", file=sys.stderr)
    if shown == 0 and flt.any():
        from rmqstore_cli.commands.common import no_such_topic

        raise (topic is not None and no_such_topic(ms, topic)) or NotFound("no message matched the filters")


def _shown(fmt: Fmt, body: BodyMode, properties: bool | None, decompress: bool, cap: int | None) -> Shown:
    """What each record shows; an option that would change nothing is refused, not ignored."""
    if decompress and body is BodyMode.none:
        raise UsageError(
            "--decompress changes only the body, which is not shown", hint="add --body text, hex or base64"
        )
    if cap is not None and not decompress:
        raise UsageError("--max-decompressed caps what --decompress inflates", hint="add --decompress")
    if properties is None:
        properties = fmt is not Fmt.table  # the table has tags and keys; the JSON formats every property
    return Shown(body.value, properties, (cap or MAX_DECOMPRESSED) if decompress else None)


def _compaction_log(ms, spec: str):
    """--compaction-log TOPIC/QUEUE_ID: that queue's compaction log (``CompactionLog``)."""
    from rmqstore_cli.store.compaction import CompactionStore

    topic, sep, qid = spec.rpartition("/")
    if not sep or not topic or not (qid.isascii() and qid.isdigit()):
        raise UsageError(f"--compaction-log {spec!r}: give TOPIC/QUEUE_ID", hint="e.g. DeviceStateTopic/0")
    return CompactionStore(ms.config).log(topic, int(qid))


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
    ms, start: int | None, stop: int | None, flt, fmt: Fmt, zone, limit: int | None, show: Shown, blank: bool, crc: bool
) -> int:
    """Walk [start, stop) and print what passes; the count printed. Whole blocks of records
    go the columnar way (jsonblock, tableblock) unless a filter or an option needs each
    record decoded (:meth:`Printer.columnar`)."""
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.message import Message

    p = Printer(ms, fmt, zone, show)
    blocks = p.columnar(flt)
    shown = 0
    try:
        for rec in ms.commitlog.scan_blocks(
            start, stop, check_crc=crc, include_blank=blank, every_file=True, blocks=blocks
        ):
            if limit is not None and shown >= limit:
                break
            if isinstance(rec, Blank):
                p.blank(rec)
            elif not isinstance(rec, Message):  # a MessageBlock
                take = flt.select(rec)
                take = take if limit is None else take[: limit - shown]
                p.block(rec, take)
                shown += int(take.size)
            elif flt.matches(rec):
                p.record(rec)
                shown += 1
    finally:
        p.out.close()
    return shown


@dataclass(frozen=True)
class Shown:
    """What each record shows besides its fields: the body (``none``, ``text``, ``hex``,
    ``base64``), the properties, and the cap of a decompressed body (None: not decompressed)."""

    body: str
    properties: bool
    inflate_cap: int | None


class Printer:
    """How dump-commitlog prints: one record, one BLANK, or a whole block of records, as
    table rows (tableblock: its columns, a row per record, the body and properties on lines
    under it) or as JSON (message_view.message_dict; jsonblock for blocks)."""

    def __init__(self, ms, fmt: Fmt, zone, show: Shown):
        from rmqstore_cli.render import Output

        self.cl = ms.commitlog
        self.zone, self.show = zone, show
        self.table = fmt is Fmt.table
        self.dledger = self.cl.is_dledger  # entry index, term and pos per record: the per-record path
        self.delays = ms.config.delay_level_table if self.table else None
        self.extras = self.table and (show.body != "none" or show.properties)
        self.out = Output(fmt.value, self._columns(ms) if self.table else None, title=str(ms.config.root))
        self.cur: tuple[int, int, str] | None = None  # the current file's [start, end) and name

    def _columns(self, ms) -> list:
        from rmqstore_cli.render import extra_columns
        from rmqstore_cli.tableblock import commitlog_columns, entry_columns, known_topics

        cl = self.cl
        columns = commitlog_columns(cl.files[-1].end_offset if cl.files else 0, known_topics(ms))
        if self.dledger:
            columns[1:1] = entry_columns()
        return columns + extra_columns(self.show.body != "none", self.show.properties)

    def columnar(self, flt) -> bool:
        """Whether whole blocks can be printed: no filter or option needs each record decoded."""
        s = self.show
        plain = not self.extras if self.table else s.body != "text" and s.inflate_cap is None
        return plain and flt.columnar() and not self.dledger

    def block(self, blk, take) -> None:
        if not take.size:
            return
        if self.table:
            from rmqstore_cli.tableblock import block_rows

            lines = block_rows(blk, take, self.out, self.zone, self.delays)
        else:
            from rmqstore_cli.jsonblock import block_lines

            lines = block_lines(blk, take, self.show.body, self.show.properties)
        self.out.emit_lines(lines, int(take.size))

    def blank(self, rec) -> None:
        from rmqstore_cli.tableblock import blank_row

        self.out.emit(
            blank_row(rec)
            if self.table
            else {
                "physical_offset": rec.physical_offset,
                "total_size": rec.total_size,
                "magic": "blank",
                "file": rec.file,
                "topic": "<BLANK: end of file>",
            }
        )

    def record(self, rec) -> None:
        from rmqstore_cli.store.message_view import entry_fields

        extra = entry_fields(self.cl.entry_of(rec.offset)) if self.dledger else {}
        if not self.table:
            self.out.emit(self._fields(rec, extra))
            return
        from rmqstore_cli.render import message_extras
        from rmqstore_cli.tableblock import message_row

        row = {**message_row(rec, self.zone, self.delays), **extra}
        if self.extras:
            row.update(message_extras(self._fields(rec, {})))
        self.out.emit(row)

    def _fields(self, rec, extra: dict) -> dict:
        """The record's JSON fields, then ``extra``; its body decompressed with --decompress."""
        from rmqstore_cli.store.message_view import message_dict

        if not self.cur or not self.cur[0] <= rec.offset < self.cur[1]:
            f = self.cl.queue.find(rec.offset)
            self.cur = (f.file_from_offset, f.end_offset, f.name) if f else (rec.offset, rec.offset + 1, "")
        s = self.show
        d = message_dict(rec, s.body, s.properties, self.cur[2])
        d.update(extra)
        if s.inflate_cap is not None and s.body != "none" and rec.sys_flag & 1:
            _inflate_into(d, rec, s.body, s.inflate_cap)
        return d


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
