"""stats' own pieces: the ways to cut the rows (``--by``) and traffic over time (``--by
minute``, ``--by hour``)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer
from rmqstore_cli.commands.lines import note


class By(str, Enum):
    topic = "topic"
    queue = "queue"
    file = "file"
    minute = "minute"
    hour = "hour"


#: The values of --by that cut store time into intervals rather than the store into rows.
OVER_TIME = (By.minute, By.hour)

ByOpt = Annotated[
    By,
    typer.Option(
        help="One row per topic, per queue (topic and queue_id), or per commit-log, consume-queue and index file; "
        "minute or hour: messages and bytes per interval of store time, oldest first (a bar chart in the table)."
    ),
]


def show_traffic(
    ms: Any, by: By, topic: str | None, limit: int | None, fmt: str, tz: str | None, sampled: bool
) -> None:
    """``stats --by minute|hour``: count the commit log per interval and print it. Every record
    counts, so a sampled walk (--sample, --max-bytes) is refused rather than ignored."""
    from rmqstore_cli import render_traffic
    from rmqstore_cli.errors import NotFound, UsageError

    if sampled:
        raise UsageError(f"--by {by.value} counts every record: not with --sample or --max-bytes")
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store.answers import stats_series
    from rmqstore_cli.times import parse_tz

    rep = stats_series.traffic_report(ms, by.value, topic, limit)
    if rep.topic_missing:
        raise NotFound(f"topic '{safe_text(str(topic))}' has no record in the commit log", path=ms.config.root)
    for n in rep.notes:
        note(n)
    render_traffic.traffic(fmt, rep.rows, rep.summary, parse_tz(tz))
