"""Bars in a terminal table: a value as a run of block characters scaled to the widest
value, in eighths of a cell (``stats``' disk use per topic, ``stats --by minute|hour``'s
traffic), and the room a table leaves for them."""

from __future__ import annotations

from rmqstore_cli.render import text_width
from rmqstore_cli.textfit import SEP, FitCol

#: A full cell and the eighths of one (U+2588 FULL BLOCK down to U+258F LEFT ONE EIGHTH BLOCK).
FULL = "\u2588"
EIGHTHS = ("", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589")
#: The widest a bar is drawn, however wide the terminal.
MAX_BAR = 60
#: Narrower than this, no bar is drawn (the numbers alone).
MIN_BAR = 4


def bar(value: int, widest: int, cells: int) -> str:
    """``value`` as a bar of up to ``cells`` cells, ``widest`` filling them all (in eighths of
    a cell; a value above zero gets at least one eighth, so a trickle is not drawn as nothing)."""
    if widest <= 0 or value <= 0 or cells <= 0:
        return ""
    eighths = max(1, round(8 * cells * value / widest))
    return FULL * (eighths // 8) + EIGHTHS[eighths % 8]


def bar_room(cols: list[FitCol], cells: list[dict], total: int, most: int = MAX_BAR) -> int:
    """Cells left for a bar (at most ``most``) beside ``cols`` within ``total``: each column at
    its natural width, a cuttable one at no more than twice its ``least``, and a separator;
    0 when less than :data:`MIN_BAR` are left."""

    def natural(c: FitCol) -> int:
        w = max([text_width(c.header)] + [text_width("" if r.get(c.key) is None else str(r[c.key])) for r in cells])
        return w if c.least is None or c.right else min(w, 2 * c.least)

    room = min(total - sum(natural(c) for c in cols) - len(SEP) * len(cols), most)
    return room if room >= MIN_BAR else 0
