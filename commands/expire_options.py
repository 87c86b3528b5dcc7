"""expire's own options (``rmqstore expire``: the broker's file expiry, run once)."""

from __future__ import annotations

from typing import Annotated

import typer

#: What to do instead when a live broker holds the lock.
REFUSE_HINT = (
    "stop the broker or work on a snapshot; --dry-run lists what would go without deleting, --force deletes anyway"
)

#: Why a dry run goes on under a live broker.
LIVE_DRY_RUN = "--dry-run only reads, so it goes on (its files may change meanwhile)"

ReservedHoursOpt = Annotated[
    float | None,
    typer.Option(
        min=0,
        help="Keep commit-log files modified less than this many hours ago "
        "(fileReservedTime; default: from --broker-conf, else 72).",
    ),
]

DiskRatioOpt = Annotated[
    float | None,
    typer.Option(
        help="Also delete the oldest files, whatever their age, while the commit-log partition is "
        "more than this full (0.85 or 85), as the broker's forced clean does."
    ),
]

MaxFilesOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Delete at most this many commit-log files in this run (the broker: "
        "deleteFileBatchMax=10 per 10 s). Default: no cap.",
    ),
]

PauseMsOpt = Annotated[
    int, typer.Option(min=0, help="Sleep between deletions, like deleteCommitLogFilesInterval (100 in the broker).")
]

DryRunOpt = Annotated[bool, typer.Option("--dry-run", "-n", help="List what would go and why; delete nothing.")]

ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Delete even while a live broker holds the store's lock (--dry-run needs no --force: it only reads).",
    ),
]

QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print nothing unless something was deleted or went wrong (for cron).")
]

VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="One line per deletion on stderr, as it happens, and one per file left alone."
    ),
]


def disk_share(value: float | None) -> float | None:
    """--disk-ratio as a share of the disk: a fraction (0.85), or a percentage (85)."""
    from rmqstore_cli.errors import UsageError

    if value is None:
        return None
    if 0 < value <= 1:
        return value
    if 1 < value <= 100:
        return value / 100
    raise UsageError(
        f"--disk-ratio {value:g} is not a share of the disk", hint="give a fraction (0.85) or a percentage (85)"
    )
