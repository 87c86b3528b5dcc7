"""The one option grammar every command speaks (docs/conventions.md "One grammar").

A cap on output is ``--limit``; an offset range ``--from-offset``/``--to-offset``; a time
window ``--begin``/``--end``, read against ``--now``; ``-q`` is ``--quiet``, ``-n`` is
``--dry-run``, ``-t`` ``--topic``, ``-g`` ``--group``, ``-o`` ``--output``, ``-v``
``--verbose``, ``-s`` ``--store``, ``-f`` ``--format``. An option's old spelling stays
accepted, hidden from ``--help``, and says once on stderr what to type instead
(:func:`renamed`), so that a cron line written for an older release keeps working.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from rmqstore_cli.errors import UsageError

NOW_HELP = (
    "Take this time as now: ages, 'now' and relative times (-2h) are read against it instead of the clock "
    "(ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more): forensics on a snapshot."
)
NowOpt = Annotated[str | None, typer.Option("--now", show_default=False, help=NOW_HELP)]


def limit_option(help_text: str) -> Any:
    """``--limit N`` with the command's own words for what N counts."""
    return typer.Option("--limit", min=0, show_default=False, help=help_text)


def old_spelling(*names: str, **kwargs: Any) -> Any:
    """A deprecated spelling of an option: accepted, hidden from ``--help`` and completion."""
    return typer.Option(*names, hidden=True, show_default=False, **kwargs)


def renamed(new: Any, old: Any, new_name: str, old_name: str, unset: Any = None) -> Any:
    """The option's value whichever spelling gave it. The old one prints one note naming the
    new; both at once is a usage error rather than a silent choice between them."""
    if old is None or old == unset:
        return new
    if new is not None and new != unset:
        raise UsageError(f"{old_name} is the old spelling of {new_name}; give only {new_name}")
    note(f"{old_name} is deprecated; use {new_name}")
    return old


def note(text: str) -> None:
    """One ``rmqstore: note:`` line on stderr, store text escaped (render.safe_text)."""
    say("note", text)


def warn(text: str) -> None:
    """One ``rmqstore: warning:`` line on stderr, store text escaped (render.safe_text)."""
    say("warning", text)


def say(kind: str | None, text: str) -> None:
    """The one place a command writes a line to stderr: the ``rmqstore:`` prefix, the kind
    (``note``, ``warning``; None for a plain report line) and escaped text."""
    from rmqstore_cli.render import safe_text

    head = f"rmqstore: {kind}: " if kind else "rmqstore: "
    print(head + safe_text(text), file=sys.stderr)


#: Library keywords whose option is not the keyword with dashes.
OPTION_OF = {"path": "--store", "topics": "--topic", "reserved_hours": "--reserved-hours"}


def option_of(keyword: str) -> str:
    """The option that sets what the engine and the library call ``keyword``
    (errors.setting): ``broker_conf`` is ``--broker-conf``."""
    return OPTION_OF.get(keyword, "--" + keyword.replace("_", "-"))
