"""``dump-commitlog``'s output: the walk of the commit log in [start, stop) printed as it
goes, whole blocks of records the columnar way (jsonblock, tableblock) unless a filter or an
option needs each record decoded, each record as message_view.message_dict gives it."""

from __future__ import annotations

from dataclasses import dataclass

from rmqstore_cli.errors import UsageError
from rmqstore_cli.render import Output, extra_columns, message_extras

#: the default cap on one decompressed body (--max-decompressed)
MAX_DECOMPRESSED = 64 << 20


def print_walk(
    ms, rng, flt, fmt: str, zone, limit: int | None, show: Shown, blank: bool, crc: bool, narrowing=None
) -> int:
    """Print what the walk of [rng.start, rng.stop) passes (``store.log_range.walk``, narrowed
    by ``narrowing``: store/answers/sampling.py); the count printed. Whole blocks of records go the
    columnar way (jsonblock, tableblock) unless a filter or an option needs each record
    decoded (:meth:`Printer.columnar`). A pipe on stdout is widened first
    (``stdio.widen_stdout_pipe``): hundreds of MB of lines go through it."""
    from rmqstore_cli import stdio

    stdio.widen_stdout_pipe()
    p = Printer(ms, fmt, zone, show)
    try:
        return p.items(walk_items(ms, rng, flt, limit, crc, blank, p.columnar(flt), narrowing))
    finally:
        p.out.close()


def walk_items(ms, rng, flt, limit: int | None, crc: bool, blank: bool, blocks: bool, narrowing=None):
    """The walk's (record, take) pairs: ``store.log_range.walk``, or with an active
    ``narrowing`` (--sample, --max-bytes) ``store.sampling.narrowed`` over it."""
    from rmqstore_cli.store.answers.log_range import walk

    cl = ms.commitlog
    if narrowing is None or not narrowing.active:
        return walk(cl, rng, flt, limit, crc, blank, blocks)
    from rmqstore_cli.store.answers.sampling import narrowed

    return narrowed(cl, rng, lambda r: walk(cl, r, flt, None, crc, blank, blocks), narrowing, limit)


def print_walk_summary(ms, rng, flt, fmt: str, limit: int | None, crc: bool, narrowing) -> int:
    """``--summary``: the walk summed (``store.walk_summary.summarize``) and printed as one
    summary; the records counted."""
    from rmqstore_cli.render import print_summary
    from rmqstore_cli.store.answers.walk_summary import summarize

    items = walk_items(ms, rng, flt, limit, crc, False, True, narrowing)
    got = summarize(ms.config.root, ms.commitlog, items, narrowing)
    print_summary(fmt, {"store": str(ms.config.root), **got}, "commit log")
    return got["messages"]


@dataclass(frozen=True)
class Shown:
    """What each record shows besides its fields: the body (``none``, ``text``, ``hex``,
    ``base64``), the properties, and the cap of a decompressed body (None: not decompressed)."""

    body: str
    properties: bool
    inflate_cap: int | None


def shown_fields(fmt: str, body: str, properties: bool | None, decompress: bool, cap: int | None) -> Shown:
    """What each record shows (--body, --properties, --decompress, --max-decompressed); an
    option that would change nothing is refused, not ignored."""
    if decompress and body == "none":
        raise UsageError(
            "--decompress changes only the body, which is not shown", hint="add --body text, hex or base64"
        )
    if cap is not None and not decompress:
        raise UsageError("--max-decompressed caps what --decompress inflates", hint="add --decompress")
    if properties is None:
        properties = fmt != "table"  # the table has tags and keys; the JSON formats every property
    return Shown(body, properties, (cap or MAX_DECOMPRESSED) if decompress else None)


class Printer:
    """How dump-commitlog prints: one record, one BLANK, or a whole block of records, as
    table rows (tableblock: its columns, a row per record, the body and properties on lines
    under it) or as JSON (message_view.message_dict; jsonblock for blocks)."""

    def __init__(self, ms, fmt: str, zone, show: Shown):
        self.cl = ms.commitlog
        self.zone, self.show = zone, show
        self.table = fmt == "table"
        self.dledger = self.cl.is_dledger  # entry index, term and pos per record: the per-record path
        self.delays = ms.config.delay_level_table if self.table else None
        self.extras = self.table and (show.body != "none" or show.properties)
        self.out = Output(fmt, self._columns(ms) if self.table else None, title=str(ms.config.root))
        self.cur: tuple[int, int, str] | None = None  # the current file's [start, end) and name

    def _columns(self, ms) -> list:
        from rmqstore_cli.tableblock import commitlog_columns, entry_columns, known_topics

        cl = self.cl
        columns = commitlog_columns(cl.files[-1].end_offset if cl.files else 0, known_topics(ms))
        if self.dledger:
            columns[1:1] = entry_columns()
        return columns + extra_columns(self.show.body != "none", self.show.properties)

    def columnar(self, flt) -> bool:
        """Whether whole blocks can be printed: no filter or option needs each record decoded,
        and a table is not fitted to a terminal's width (render.table_width: rows of fixed
        columns only)."""
        s = self.show
        plain = (
            not self.extras and self.out.table.total is None
            if self.table
            else s.body != "text" and s.inflate_cap is None
        )
        return plain and flt.columnar() and not self.dledger

    def items(self, items) -> int:
        """Print a walk's (record, take) pairs (:func:`walk_items`); the count printed."""
        from rmqstore_cli.store.commitlog import Blank

        shown = 0
        for rec, take in items:
            if isinstance(rec, Blank):
                self.blank(rec)
            elif take is not None:  # a MessageBlock, these of its rows
                self.block(rec, take)
                shown += int(take.size)
            else:
                self.record(rec)
                shown += 1
        return shown

    def block(self, blk, take) -> None:
        if not take.size:
            return
        if not self.table:  # the lines as rendered, written before the next block reuses their buffer
            from rmqstore_cli.jsonblock import block_lines

            lines = block_lines(blk, take, self.show.body, self.show.properties, copy=False)
            self.out.write_lines_now(memoryview(lines), int(take.size))
            return
        from rmqstore_cli.tableblock import block_rows

        self.out.emit_lines(block_rows(blk, take, self.out, self.zone, self.delays), int(take.size))

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
        from rmqstore_cli.store.records.message_view import entry_fields

        extra = entry_fields(self.cl.entry_of(rec.offset)) if self.dledger else {}
        if not self.table:
            self.out.emit(self._fields(rec, extra))
            return
        from rmqstore_cli.tableblock import message_row

        row = {**message_row(rec, self.zone, self.delays), **extra}
        if self.extras:
            row.update(message_extras(self._fields(rec, {})))
        self.out.emit(row)

    def _fields(self, rec, extra: dict) -> dict:
        """The record's JSON fields, then ``extra``; its body decompressed with --decompress."""
        from rmqstore_cli.store.records.message_view import message_dict

        if not self.cur or not self.cur[0] <= rec.offset < self.cur[1]:
            f = self.cl.queue.find(rec.offset)
            self.cur = (f.file_from_offset, f.end_offset, f.name) if f else (rec.offset, rec.offset + 1, "")
        s = self.show
        d = message_dict(rec, s.body, s.properties, self.cur[2])
        d.update(extra)
        if s.inflate_cap is not None and s.body != "none" and rec.sys_flag & 1:
            inflate_into(d, rec, s.body, s.inflate_cap)
        return d


def inflate_into(d: dict, rec, mode: str, cap: int) -> None:
    """Replace a compressed record's body with its decompressed bytes (capped)."""
    from rmqstore_cli.store.records.compression import inflate
    from rmqstore_cli.store.records.message_view import encode_body

    r = inflate(rec.body, rec.sys_flag, cap)
    if r is None:
        return
    d["compression"] = r.compression
    if r.body is None:
        d["body_error"] = r.error
        return
    d["body"] = encode_body(r.body, mode)
    d["body_decompressed_size"] = len(r.body)
