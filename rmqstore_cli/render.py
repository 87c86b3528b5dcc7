"""Output: aligned text tables for people, JSON Lines / JSON for scripts; store text made safe.

Text from a store is data: a topic may hold terminal escapes. Tables get control and bidi
characters shown as ``\\xNN``/``\\uNNNN``; JSON escapes C0/C1 controls so even ``cat`` of
the output cannot drive a terminal.

A table streams (:class:`TableWriter`): its column widths are fixed once, from the
columns' declared widths and the first :data:`TableWriter.SAMPLE` rows, and never change;
the header is printed once, above the first row. A text cell wider than its column's cap
is cut with an ellipsis; a number is never cut (a wider one pushes the rest of its row).
The last column is not padded. No ANSI codes unless stdout is a terminal (then only the
header is bold, and not under ``NO_COLOR``).

On a terminal, or into a pipe with ``COLUMNS`` set (:func:`table_width`), the table fits that
width: when its rows would be wider, columns go under their row as ``    header: value``
lines (the last first, never the first), then text columns with a cap (and the first column)
are cut with an ellipsis down to :attr:`Col.least` cells (a time's ``least`` is its width; a
number is never cut); the last column's value goes under its row when it does not fit the
room left, and the lines under a row are folded within the width. Into a pipe without
``COLUMNS`` every cell stays whole (``less -S``, files).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rmqstore_cli.render_console import console, isatty

# the one progress bar, where the commands have always imported it from
from rmqstore_cli.render_progress import ProgressBar as ProgressBar

#: What a terminal acts on or hides: C0 and C1 controls and DEL; the bidi marks, embeddings,
#: overrides and isolates (U+061C, U+200E/F, U+202A-E, U+2066-9) that reorder what follows;
#: the zero-width U+200B-D and U+FEFF and the tag characters U+E0000-E007F that hide text;
#: the line and paragraph separators U+2028/9; lone surrogates (bytes a decoder could not read).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff\U000e0000-\U000e007f]"
)


def _escape(m: re.Match) -> str:
    c = ord(m[0])
    if c < 0x100:
        return f"\\x{c:02x}"
    if 0xDC80 <= c <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): the byte, as git shows it
        return f"\\x{c - 0xDC00:02x}"
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def safe_text(s: str) -> str:
    """``s`` made inert on a terminal, as git and ls show names: every character of
    :data:`_CONTROL` as a visible escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``; a byte that was
    not UTF-8, kept as a surrogate, as ``\\xff``); ordinary printable text (CJK, emoji) as it is.
    The one function every table, summary and stderr line runs store text through; the
    JSON formats keep the exact text instead (:func:`to_json_bytes`)."""
    return _CONTROL.sub(_escape, s)


def to_json(obj: Any) -> str:
    return to_json_bytes(obj).decode("utf-8")


#: What JSON encoders leave raw but a terminal would act on: DEL, C1 controls (UTF-8
#: C2 80..9F), line/paragraph separators and bidi overrides.
_UNSAFE_UTF8 = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def _escape_utf8(m: re.Match) -> bytes:
    return b"\\u%04x" % ord(m[0].decode("utf-8"))


try:  # orjson is ~10x faster; it escapes C0 controls as json does
    import orjson as _orjson

    def _dumps(obj: Any) -> bytes:
        try:
            return _orjson.dumps(obj)
        except TypeError:  # e.g. lone surrogates: let json escape them
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
except ImportError:  # pragma: no cover - orjson is a dependency

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def to_json_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON that is inert on a terminal (see :data:`_UNSAFE_UTF8`)."""
    b = _dumps(obj)
    if b.isascii() and b"\x7f" not in b:
        return b
    return _UNSAFE_UTF8.sub(_escape_utf8, b)


ELLIPSIS = "\u2026"
#: a body's and the properties' lines under a table row (--body, --properties) are cut at
#: these widths; --format jsonl has them whole
BODY_CAP, PROPERTIES_CAP = 160, 400


@dataclass(frozen=True)
class Col:
    """A table column: the record key it shows, its header, and how wide it may get.

    ``right``: a number (right-aligned, never cut); None decides from the first rows
    (right when every value there is an int). ``cap``: the widest a text cell is shown
    before it is cut with an ellipsis (None: never cut; a wider cell pushes the rest of its
    row). ``width``: at least this wide whatever the first rows hold (e.g. the digits of
    the store's largest offset, or a timestamp's 23 characters). ``slack``: room added to
    the first rows' widest cell, for values that grow (order-9 … order-10000). ``below``:
    not a column but a line of its own under each row that has the value (``    body: …``,
    cut at ``cap`` cells), for long text such as a body or the properties. ``least``: a
    text column with a ``cap`` may be cut down to this many cells to fit the terminal."""

    key: str
    header: str
    right: bool | None = False
    cap: int | None = None
    width: int = 0
    slack: int = 0
    below: bool = False
    least: int = 12


def table_width() -> int | None:
    """The width a table fits (module docstring): the terminal's; into a pipe or a file
    ``COLUMNS`` when set (at least 40); else None, every cell whole."""
    if isatty(sys.stdout):
        return shutil.get_terminal_size((80, 24)).columns
    try:
        return max(int(os.environ["COLUMNS"]), 40)
    except (KeyError, ValueError):
        return None


def fold_text(s: str, width: int | None) -> list[str]:
    """``s`` (already terminal-safe) folded at spaces onto lines of at most ``width``
    characters, a longer word broken (None: one line)."""
    if width is None or text_width(s) <= width:
        return [s]
    if len(s) != text_width(s):  # wide characters: cut by cells
        from rich.cells import chop_cells

        return chop_cells(s, width)
    import textwrap

    return textwrap.wrap(s, width, break_long_words=True, break_on_hyphens=False) or [""]


def columns_of(spec: Iterable) -> list[Col]:
    """Columns from :class:`Col` objects or ``(key, header[, cap])`` tuples (aligned by their
    first values; text cut at ``cap`` cells if given, else never)."""
    return [c if isinstance(c, Col) else Col(c[0], c[1], right=None, cap=c[2] if len(c) > 2 else None) for c in spec]


def cut(s: str, width: int | None) -> str:
    """``s`` cut to ``width`` cells with an ellipsis when wider (None: never cut); not padded."""
    if width is None or text_width(s) <= width:
        return s
    from rich.cells import set_cell_size

    return set_cell_size(s, width - 1) + ELLIPSIS


def text_width(s: str) -> int:
    """Terminal cells ``s`` takes (wide CJK characters count two)."""
    if s.isascii():
        return len(s)
    from rich.cells import cell_len

    return cell_len(s)


def fit(s: str, width: int, right: bool = False, cut: bool = True) -> str:
    """``s`` padded to ``width`` cells; cut with an ellipsis when wider and ``cut``."""
    n = text_width(s)
    if n > width:
        if not cut:
            return s
        from rich.cells import set_cell_size

        s, n = set_cell_size(s, width - 1) + ELLIPSIS, width
    pad = " " * (width - n)
    return pad + s if right else s + pad


def extra_columns(body: bool, properties: bool) -> list[Col]:
    """The lines under each row that --body and --properties ask for (:attr:`Col.below`)."""
    return [Col("properties", "properties", cap=PROPERTIES_CAP, below=True)] * properties + [
        Col("body", "body", cap=BODY_CAP, below=True)
    ] * body


def message_extras(d: dict) -> dict:
    """The body and the properties of one record's JSON fields
    (``store.message_view.message_dict``), for the lines under its row: the body as the
    jsonl has it (text, hex or base64; decompressed with --decompress, its error after it),
    the properties as NAME=VALUE pairs in their stored order (bytes that are not UTF-8 as
    ``message_view.table_text`` reads them)."""
    body = d.get("body")
    if body is not None and d.get("body_error"):
        body = f"{body} ({d['body_error']})"
    props = d.get("properties")
    if props is not None and "properties_base64" in d:  # not UTF-8: each such byte as \xNN, not U+FFFD
        import base64

        from rmqstore_cli.store.records.message_view import table_properties_of

        props = table_properties_of(base64.b64decode(d["properties_base64"]))
    return {
        "body": body,
        "properties": None if props is None else " ".join(f"{k}={v}" for k, v in props.items()),
    }


class TableWriter:
    """Rows as aligned text, widths fixed once (see the module docstring). Rows are cells
    already made terminal-safe; :meth:`line` lays one out, :meth:`fix` settles the widths
    from the rows seen so far (and from ``extra`` cell widths, e.g. a whole block's)."""

    SAMPLE = 256
    SEP = "  "
    #: the indent of a :attr:`Col.below` line
    BELOW = "    "

    def __init__(self, columns: Iterable, title: str | None = None, styled: bool = False, total: int | None = None):
        cols = columns_of(columns)
        self.columns = [c for c in cols if not c.below]
        self.below = [c for c in cols if c.below]
        self.title = title
        self.styled = styled
        self.total = total
        #: the columns shown in the row (indexes; the others go under it), settled by :meth:`fix`
        self.shown: list[int] = list(range(len(self.columns)))
        self.widths: list[int] | None = None
        self.right = [c.right for c in self.columns]
        self.sample: list[list[str]] = []
        self._numeric = [True] * len(self.columns)

    def cells(self, record: dict) -> list[str]:
        """A record's cells (terminal-safe text); notes which columns hold only numbers."""
        out = []
        for i, c in enumerate(self.columns):
            v = record.get(c.key)
            if self.widths is None and v is not None and v != "" and (isinstance(v, bool) or not isinstance(v, int)):
                self._numeric[i] = False
            out.append(_cell(v))
        return out + [None if record.get(c.key) is None else _cell(record[c.key]) for c in self.below]

    def fix(self, extra: dict[str, int] | None = None) -> list[int]:
        """Settle the widths: declared width, header, and the widest cell of the sample (or of
        ``extra``), text columns at most their cap. Done once; later calls return the same."""
        if self.widths is not None:
            return self.widths
        widths = [self._width(i, c, extra or {}) for i, c in enumerate(self.columns)]
        if self.total is not None:
            self._fit(widths, self.total)
        self.widths = widths
        return widths

    def _width(self, i: int, c: Col, extra: dict[str, int]) -> int:
        """Column ``i``'s width (:meth:`fix`), deciding first whether it is right-aligned: a
        numeric column with a value in the sample."""
        if self.right[i] is None:
            self.right[i] = self._numeric[i] and any(r[i] for r in self.sample)
        seen = max([extra.get(c.key, 0)] + [text_width(r[i]) for r in self.sample])
        w = max(c.width, text_width(c.header), seen + c.slack if seen else 0)
        if c.cap is not None and not self.right[i]:
            w = min(w, max(c.cap, c.width, text_width(c.header)))
        return w

    def _fit(self, widths: list[int], total: int) -> None:
        """Fit the row within ``total`` cells: columns under the row, last first, until the
        row's least width fits; then the widest cuttable column cut a cell at a time. The
        last column counts its header only: a value wider than the room left goes under its
        row (:meth:`line`)."""
        last = len(self.columns) - 1

        def least(i: int) -> int:
            c = self.columns[i]
            if i == last:
                return text_width(c.header)
            if self.right[i] or (c.cap is None and i > 0):  # a number; text without a cap (but the first)
                return widths[i]
            return min(widths[i], max(c.least, text_width(c.header)))

        def size(cols: list[int], width) -> int:
            return sum(width(i) for i in cols) + len(self.SEP) * (len(cols) - 1)

        shown = list(self.shown)
        while len(shown) > 1 and size(shown, least) > total:
            shown.pop()
        self.shown = shown
        while size(shown, lambda i: least(i) if i == last else widths[i]) > total:
            room = [(widths[i] - least(i), i) for i in shown if i != last and widths[i] > least(i)]
            if not room:
                return
            widths[max(room)[1]] -= 1

    def header(self) -> str:
        """The title (if any) and the header line."""
        w = self.fix()
        cols = [(i, self.columns[i]) for i in self.shown]
        head = (
            self.SEP.join(
                [fit(c.header, w[i], bool(self.right[i]), cut=False) for i, c in cols[:-1]] + [cols[-1][1].header]
            ).rstrip(" ")
            if cols
            else ""
        )
        head = cut(head, self.total)
        if self.styled:
            head = f"\x1b[1m{head}\x1b[0m"
        title = "\n".join(fold_text(safe_text(self.title), self.total)) if self.title else ""
        return (title + "\n" if self.title else "") + head

    def line(self, cells: list) -> str:
        """One row: every cell but the last padded (text cut at its cap), trailing spaces
        dropped; then a line per :attr:`Col.below` value the record has."""
        w, right, cols = self.widths, self.right, self.columns
        n = len(cols)
        if self.total is not None:
            return self._fitted_line(cells)
        last = n - 1
        parts = [
            fit(c, w[i], bool(right[i]), cols[i].cap is not None and not right[i]) for i, c in enumerate(cells[:last])
        ]
        parts.append(cells[last])
        row = self.SEP.join(parts).rstrip(" ")
        more = [
            f"{self.BELOW}{c.header}: {cut(v, c.cap)}".rstrip(" ")
            for c, v in zip(self.below, cells[n:], strict=True)
            if v is not None
        ]
        return "\n".join([row, *more]) if more else row

    def _fitted_line(self, cells: list) -> str:
        """One row within :attr:`total` cells: the shown columns, the last column's value
        only when it fits the room left; then a line for each column that went under the
        row (or did not fit) and has a value, then the :attr:`Col.below` lines, each folded
        within the width."""
        w, right, n = self.widths, self.right, len(self.columns)
        parts = [fit(cells[i], w[i], bool(right[i]), not right[i]) for i in self.shown]
        under = [i for i in range(n) if i not in self.shown]
        if self.shown[-1] == n - 1:
            room = self.total - sum(text_width(x) for x in parts[:-1]) - len(self.SEP) * (len(parts) - 1)
            if text_width(cells[n - 1]) > room:
                parts[-1], under = "", [n - 1, *under]
            else:
                parts[-1] = cells[n - 1]
        row = self.SEP.join(parts).rstrip(" ")
        more = self._under_lines(cells, under)
        return "\n".join([row, *more]) if more else row

    def _under_lines(self, cells: list, under: list[int]) -> list[str]:
        """The lines under a row: ``header: value`` of each column in ``under`` that has a
        value, then of each :attr:`Col.below` value, each folded within the width."""
        n = len(self.columns)
        folded = [(self.columns[i].header, cells[i], None) for i in sorted(under) if cells[i] != ""]
        folded += [(c.header, v, c.cap) for c, v in zip(self.below, cells[n:], strict=True) if v is not None]
        more = []
        for h, v, cap in folded:
            first, *rest = fold_text(f"{h}: {cut(v, cap)}", self.total - len(self.BELOW) - 2)
            more += [f"{self.BELOW}{first}".rstrip(" "), *(f"{self.BELOW}  {x}".rstrip(" ") for x in rest)]
        return more


class Output:
    """Writes records in the chosen format to stdout, in batches of bytes. A table streams
    (:class:`TableWriter`): widths settle on the first rows, then each row goes out as it
    comes; blocks of rows rendered elsewhere (:mod:`~rmqstore_cli.tableblock`) join in."""

    BATCH = 512
    FLUSH_BYTES = 1 << 20

    def __init__(self, fmt: str, columns: Iterable | None = None, title: str | None = None):
        self.fmt = fmt
        self.columns = columns_of(columns or [])
        self.title = title
        self.count = 0
        self._json_first = True
        self._lines: list = []
        self._pending = 0
        self._out = sys.stdout
        self.table: TableWriter | None = None
        if fmt == "table":
            tty = isatty(self._out)
            self.table = TableWriter(
                self.columns,
                title,
                styled=tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb",
                total=table_width(),
            )

    def emit(self, record: dict) -> None:
        self.count += 1
        if self.fmt == "jsonl":
            self._lines.append(to_json_bytes(record))
            if len(self._lines) >= self.BATCH:
                self._flush_lines()
        elif self.fmt == "json":
            self._lines.append((b"[\n" if self._json_first else b",\n") + to_json_bytes(record))
            self._json_first = False
            if len(self._lines) >= self.BATCH:
                self._flush_lines()
        else:
            t = self.table
            cells = t.cells(record)
            if t.widths is None:
                t.sample.append(cells)
                if len(t.sample) >= t.SAMPLE:
                    self.fix_widths()
                return
            self._lines.append(t.line(cells).encode("utf-8", "backslashreplace"))
            if len(self._lines) >= self.BATCH:
                self._flush_lines()

    def fix_widths(self, extra: dict[str, int] | None = None) -> list[int]:
        """Settle the table's widths now (from the rows so far and ``extra``) and write the
        header and the rows held back for the choice."""
        t = self.table
        if t.widths is not None:
            return t.widths
        widths = t.fix(extra)
        self._lines.append(t.header().encode("utf-8", "backslashreplace"))
        self._lines.extend(t.line(r).encode("utf-8", "backslashreplace") for r in t.sample)
        t.sample = []
        return widths

    def emit_lines(self, lines: bytes, count: int) -> None:
        """``count`` records already rendered (JSON by :mod:`rmqstore_cli.jsonblock`, or table
        rows after :meth:`fix_widths`): UTF-8, a newline after each record."""
        self.count += count
        data = memoryview(lines)[:-1]  # a view: the lines are joined once, when written
        if self.fmt != "json":
            self._lines.append(data)
        else:
            for line in lines[:-1].split(b"\n"):
                self._lines.append((b"[\n" if self._json_first else b",\n") + line)
                self._json_first = False
        self._pending += len(data)
        if self._pending >= self.FLUSH_BYTES:
            self._flush_lines()

    def write_lines_now(self, lines: memoryview, count: int) -> None:
        """``count`` JSON lines (jsonl) in a buffer the caller reuses (jsonblock's, the bytes
        as rendered, a newline after each): written before this returns, with what was held
        before them, not copied into bytes first."""
        buf = getattr(self._out, "buffer", None)
        if buf is None or self.fmt != "jsonl":
            self.emit_lines(bytes(lines), count)
            return
        self._flush_lines()
        self.count += count
        buf.write(lines)

    def _flush_lines(self) -> None:
        """Records go out in batches, as bytes: one write per batch, not per record."""
        if not self._lines:
            return
        sep = b"" if self.fmt == "json" else b"\n"
        lines = self._lines
        self._lines = []
        self._pending = 0
        buf = getattr(self._out, "buffer", None)
        if buf is None:
            self._out.write((sep.join(lines) + sep).decode("utf-8"))
            return
        self._out.flush()
        if len(lines) <= 8:  # whole blocks (emit_lines): each written as it is, not copied into one
            for x in lines:
                buf.write(x)
                buf.write(sep)
        else:
            buf.write(sep.join(lines))
            buf.write(sep)
        buf.flush()

    def close(self) -> None:
        if self.table is not None and self.table.widths is None and self.table.sample:
            self.fix_widths()
        self._flush_lines()
        if self.fmt == "json":
            self._out.write("[]\n" if self._json_first else "\n]\n")
        self._out.flush()


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, list):
        return safe_text(" ".join(str(x) for x in v))
    return safe_text(str(v))


def print_summary(fmt: str, summary: dict, title: str) -> None:
    """A command's summary: one JSON object, or a two-column table."""
    if fmt in ("json", "jsonl"):
        sys.stdout.write(to_json(summary) + "\n")
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(safe_text(title)), show_header=False)
    table.add_column("what")
    table.add_column("value")
    for k, v in summary.items():
        table.add_row(Text(safe_text(k)), Text(_cell(v) if not isinstance(v, dict) else safe_text(to_json(v))))
    console().print(table)


def print_summaries(fmt: str, summaries: list[dict], title: str) -> None:
    """Several stores' summaries: json one object ``{"stores": [...]}``, jsonl one line per
    store, table one table each (one store: :func:`print_summary`)."""
    if fmt == "json":
        sys.stdout.write(to_json({"stores": summaries}) + "\n")
        return
    for s in summaries:
        print_summary(fmt, s, title)


def rebuild_summary(store, rep, plan: dict, opts) -> dict:
    """rebuild-index's summary of one store (``store.rebuild_plan.summary``)."""
    from rmqstore_cli.store.write.rebuild_plan import summary

    return summary(store, rep, plan, opts)
