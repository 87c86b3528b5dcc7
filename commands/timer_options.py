"""dump-timer's own options (the shared ones are in commands/options.py)."""

from __future__ import annotations

from typing import Annotated

import typer
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
