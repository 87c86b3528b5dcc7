"""Tables that fit the terminal: a few columns laid out within a width, long text folded or
cut, never the table; and key/value blocks for summaries.

:mod:`~rmqstore_cli.render`'s :class:`~rmqstore_cli.render.TableWriter` streams rows, their
widths settled on the first rows (fitted to a terminal by moving columns under the row; into
a pipe without ``COLUMNS`` every cell whole, as ``less -S`` or a file wants). The reports of ``stats``,
``verify`` and ``consumer-progress`` hold few rows and are read on a terminal, so they are
laid out here, within :func:`width` columns: first the columns that may go below their row
(:attr:`FitCol.fold`, as ``    header: value`` lines) go there, last first; then text
columns are cut with an ellipsis, down to their ``least``; the last column's text is folded
onto lines of its own width when it is a :attr:`FitCol.wrap` column, else cut.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import Any

from rmqstore_cli.render import cut, safe_text, text_width

SEP = "  "
BELOW = "    "


def width() -> int:
    """The width to fit: the terminal's; into a pipe or a file ``COLUMNS``, else 200 (as
    :func:`~rmqstore_cli.render.console`: ``less`` and files get room)."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((80, 24)).columns
    try:
        return max(int(os.environ.get("COLUMNS", "") or 200), 40)
    except ValueError:
        return 200


@dataclass(frozen=True)
class FitCol:
    """A column: its record key and header; ``right`` for numbers (never cut); ``least``:
    a text column may be cut down to this many cells (None: never cut); ``fold``: it may go
    on a line of its own under the row; ``wrap``: as the last column, its text is folded
    onto more lines rather than cut."""

    key: str
    header: str
    right: bool = False
    least: int | None = None
    fold: bool = False
    wrap: bool = False


def _cell(v: Any) -> str:
    return "" if v is None else safe_text(str(v))


def table(cols: list[FitCol], rows: list[dict], title: str | None = None, total: int | None = None) -> list[str]:
    """The lines of a table of ``rows`` within ``total`` cells (default :func:`width`)."""
    total = width() if total is None else total
    cells = [{c.key: _cell(r.get(c.key)) for c in cols} for r in rows]
    shown, below = _layout(cols, cells, total)
    widths = [max([text_width(c.header)] + [text_width(r[c.key]) for r in cells]) for c in shown]
    _shrink(shown, widths, total)
    out = wrap(title, total) if title else []
    out.append(_line(shown, widths, {c.key: c.header for c in shown}, total)[0])
    for r in cells:
        out += _line(shown, widths, r, total) + _below(below, r, total)
    return out


def _below(cols: list[FitCol], r: dict, total: int) -> list[str]:
    """The ``header: value`` lines under a row of the columns that went below it (with a value)."""
    return [cut(f"{BELOW}{c.header}: {r[c.key]}", total) for c in cols if r[c.key]]


def _layout(cols: list[FitCol], cells: list[dict], total: int) -> tuple[list[FitCol], list[FitCol]]:
    """Which columns stay in the row and which go below it (the foldable ones, last first,
    until the row fits uncut: a value below its row is better than names cut to fit it)."""
    shown, below = list(cols), []

    def natural(c: FitCol) -> int:
        return max([text_width(c.header)] + [text_width(r[c.key]) for r in cells])

    for c in reversed(cols):
        if sum(natural(x) for x in shown) + len(SEP) * (len(shown) - 1) <= total:
            break
        if c.fold:
            shown.remove(c)
            below.insert(0, c)
    return shown, below


def _shrink(cols: list[FitCol], widths: list[int], total: int) -> None:
    """Cut the widest cuttable column by one cell at a time until the row fits."""
    while sum(widths) + len(SEP) * (len(widths) - 1) > total:
        room = [
            (w - max(c.least, text_width(c.header)), i)
            for i, (c, w) in enumerate(zip(cols, widths, strict=True))
            if c.least is not None and not c.right and w > max(c.least, text_width(c.header))
        ]
        if not room:
            return
        widths[max(room)[1]] -= 1


def _line(cols: list[FitCol], widths: list[int], r: dict, total: int) -> list[str]:
    """One row (and, for a wrapped last column, its continuation lines)."""
    parts = [_padded(c, w, r[c.key]) for c, w in zip(cols[:-1], widths[:-1], strict=True)]
    head = SEP.join(parts) + (SEP if parts else "")
    last, room = cols[-1], max(total - text_width(head), 8)
    text = r[last.key]
    if last.right:
        text = " " * max(widths[-1] - text_width(text), 0) + text
    if last.right or text_width(text) <= room:
        return [(head + text).rstrip(" ")]
    if not last.wrap:
        return [(head + cut(text, room)).rstrip(" ")]
    lines = textwrap.wrap(text, room, break_long_words=True, break_on_hyphens=False) or [""]
    indent = " " * text_width(head)
    return [(head + lines[0]).rstrip(" ")] + [indent + x for x in lines[1:]]


def _padded(c: FitCol, w: int, s: str) -> str:
    """A cell of a column before the last, ``w`` cells wide: a number right-aligned and
    never cut, text cut to fit and padded."""
    s = s if c.right else cut(s, w)
    pad = " " * max(w - text_width(s), 0)
    return pad + s if c.right else s + pad


def key_values(pairs: list[tuple[str, Any]], title: str | None = None, total: int | None = None) -> list[str]:
    """A summary as ``key  value`` lines, the values folded within ``total`` cells."""
    total = width() if total is None else total
    kw = max((text_width(k) for k, _ in pairs), default=0)
    out = wrap(title, total) if title else []
    room = max(total - kw - len(SEP), 16)
    for k, v in pairs:
        lines = textwrap.wrap(_cell(v), room, break_long_words=True, break_on_hyphens=False) or [""]
        out.append(f"{k:<{kw}}{SEP}{lines[0]}".rstrip(" "))
        out += [" " * (kw + len(SEP)) + x for x in lines[1:]]
    return out


def wrap(text: str, total: int | None = None) -> list[str]:
    """Text (store text made safe) folded onto lines of at most ``total`` cells."""
    total = width() if total is None else total
    return textwrap.wrap(safe_text(text), total, break_long_words=True, break_on_hyphens=False) or [""]


def write(lines: list[str]) -> None:
    """Lines to stdout."""
    sys.stdout.write("".join(x + "\n" for x in lines))
