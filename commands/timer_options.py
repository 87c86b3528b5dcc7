"""dump-timer's own options (the shared ones are in commands/options.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rmqstore_cli.commands import grammar, lines
from rmqstore_cli.commands.common import complete_topic
from rmqstore_cli.commands.options import JAVA_INT_MAX
from rmqstore_cli.formats.timer import MIN_FILE_SIZE

TimerLogSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--timer-log-file-size",
        min=MIN_FILE_SIZE,
        max=JAVA_INT_MAX,
        help="mappedFileSizeTimerLog, if not in --broker-conf (else the timer-log files' own size).",
    ),
]
TimerPrecisionOpt = Annotated[
    int | None,
    typer.Option(
        "--timer-precision-ms",
        min=1,
        max=JAVA_INT_MAX,
        help="timerPrecisionMs, if not in --broker-conf (default 1000).",
    ),
]
OverdueOpt = Annotated[
    bool,
    typer.Option(
        "--overdue",
        help="Delayed messages past their delivery time at --now and not delivered: the timer wheel's "
        "(against config/timercheck) and the delay levels' (against config/delayOffset.json); "
        "with --summary: per level and per real topic.",
    ),
]
UnitsOpt = Annotated[
    bool,
    typer.Option("--units", help="Timer-log units (in log order) with the rmq_sys_wheel_timer message each points at."),
]
NextOpt = Annotated[
    bool, typer.Option("--next", help="What the broker does next after it starts (see below); --limit caps it.")
]
SummaryOpt = Annotated[
    bool,
    typer.Option(
        "--summary", help="The checkpoint, the wheel's geometry, the timer-log files and the broker's recovery."
    ),
]
TopicOpt = Annotated[
    str | None,
    grammar.topic_option(
        "With --units, --next or --overdue: only messages whose real topic (REAL_TOPIC) is this.", complete_topic
    ),
]


def dump_overdue(
    ms: Any, at: int, window: tuple, topic: str | None, summary: bool, fmt: str, zone: Any, limit: int | None
) -> None:
    """--overdue: delayed messages due before --now and not delivered; nothing overdue is exit 1 (NotFound)."""
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render_overdue import print_overdue
    from rmqstore_cli.store.answers.overdue import scan

    found = scan(ms, at)
    for n in found.notes:
        lines.note(n)
    if print_overdue(found, ms.config.root, window, topic, summary, fmt, zone, limit) == 0:
        raise NotFound("no delayed message is overdue", hint="--now is the time they are judged at")
