"""The one option grammar every command speaks (docs/conventions.md "One grammar").

A cap on output is ``--limit``; an offset range ``--from-offset``/``--to-offset``; a time
window ``--begin``/``--end``, read against ``--now``; ``-q`` is ``--quiet``, ``-n`` is
``--dry-run``, ``-t`` ``--topic``, ``-g`` ``--group``, ``-o`` ``--output``, ``-v``
``--verbose``, ``-s`` ``--store``, ``-f`` ``--format``. An option's old spelling stays
accepted, hidden from ``--help``, and says once on stderr what to type instead
(:func:`renamed`), so that a cron line written for an older release keeps working.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer
from rmqstore_cli.commands.lines import note

from rmqstore_cli.errors import UsageError

NOW_HELP = (
    "Take this time as now: ages, 'now' and relative times (-2h) are read against it instead of the clock "
    "(ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more): forensics on a snapshot."
)
NowOpt = Annotated[str | None, typer.Option("--now", show_default=False, help=NOW_HELP)]


class BodyMode(str, Enum):
    """How a message's body is shown (``--body``): not at all, as escaped text, hex or base64."""

    none = "none"
    text = "text"
    hex = "hex"
    base64 = "base64"


#: The forms every time option reads (rmqstore_cli/times.py).
TIME_FORMS = "ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more, now, -2h, +2h; read against --now"


def begin_option(what: str, default: str = "") -> Any:
    """``--begin T``: ``what`` (a store time, a due time) from T; ``default`` says what
    leaving it out means."""
    return typer.Option("--begin", show_default=False, help=f"{what} from ({TIME_FORMS}){default}.")


def end_option(what: str, default: str = "") -> Any:
    """``--end T``: ``what`` up to T, inclusive."""
    return typer.Option("--end", show_default=False, help=f"{what} up to, inclusive (the forms of --begin){default}.")


def body_option(each: str) -> Any:
    """``--body none|text|hex|base64`` (:class:`BodyMode`), shown under ``each`` row of a table."""
    from rmqstore_cli.render import BODY_CAP

    return typer.Option(
        "--body",
        help=f"Include {each}'s body: none, text (escaped), hex or base64; the table shows it on a line under "
        f"it, cut at {BODY_CAP} characters (--format jsonl has it whole).",
    )


def properties_option(each: str) -> Any:
    """``--properties/--no-properties``: shown by default in the JSON formats only."""
    from rmqstore_cli.render import PROPERTIES_CAP

    return typer.Option(
        "--properties/--no-properties",
        show_default="with --format json or jsonl",
        help=f"Include {each}'s properties; the table shows them on a line under it as NAME=VALUE pairs, cut at "
        f"{PROPERTIES_CAP} characters.",
    )


def topic_option(help_text: str, complete: Any = None) -> Any:
    """``--topic``/``-t``, completed from the store's topics by ``complete``."""
    return typer.Option("--topic", "-t", help=help_text, autocompletion=complete)


def from_offset_option(help_text: str) -> Any:
    """``--from-offset N``: where an offset range starts (inclusive)."""
    return typer.Option("--from-offset", min=0, show_default=False, help=help_text)


def to_offset_option(help_text: str) -> Any:
    """``--to-offset N``: where an offset range stops (exclusive)."""
    return typer.Option("--to-offset", min=0, show_default=False, help=help_text)


def check_offsets(from_offset: int | None, to_offset: int | None) -> None:
    """A reversed [--from-offset, --to-offset) is a usage error, never an empty answer."""
    if from_offset is not None and to_offset is not None and from_offset > to_offset:
        raise UsageError(
            f"--from-offset {from_offset} lies after --to-offset {to_offset}",
            hint="the range is [--from-offset, --to-offset)",
        )


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


def old_count(args: list[str], flag: bool, old_name: str, new_form: str) -> int | None:
    """The N of an old ``FLAG N`` whose flag now takes no value (``args``: the words the
    command was given besides its options), with one note naming ``new_form``; None when
    no N was given. Any other word is a usage error."""
    if not args:
        return None
    if not flag or len(args) > 1 or not (args[0].isascii() and args[0].isdigit()) or int(args[0]) < 1:
        raise UsageError(f"unexpected argument {args[0]!r}", hint="the command takes options only")
    note(f"{old_name} N is deprecated; use {new_form}")
    return int(args[0])


def clock(now: str | None, zone: Any = None) -> int:
    """``--now`` in epoch milliseconds (the clock when not given): what 'now' and relative
    times (-2h) are read against."""
    from rmqstore_cli.times import now_ms, parse_time

    return parse_time(now, "--now", tz=zone) if now is not None else now_ms()


def window(begin: str | None, end: str | None, at: int, zone: Any = None) -> tuple[int | None, int | None]:
    """``--begin``/``--end`` in epoch milliseconds (None where not given), relative times read
    against ``at`` (:func:`clock`); a reversed window is a usage error."""
    from rmqstore_cli.times import check_window, parse_time

    b = parse_time(begin, "--begin", now=at, tz=zone) if begin else None
    e = parse_time(end, "--end", now=at, tz=zone) if end else None
    check_window(b, e, zone)
    return b, e


#: Library keywords whose option is not the keyword with dashes.
OPTION_OF = {"path": "--store", "topics": "--topic", "reserved_hours": "--reserved-hours"}


def option_of(keyword: str) -> str:
    """The option that sets what the engine and the library call ``keyword``
    (errors.setting): ``broker_conf`` is ``--broker-conf``."""
    return OPTION_OF.get(keyword, "--" + keyword.replace("_", "-"))
