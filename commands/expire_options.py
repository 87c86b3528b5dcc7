"""expire's own options (``rmqstore expire``: the broker's file expiry, run once)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

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


def reserved_hours(given: float | None, configured: int | float) -> float:
    """--reserved-hours, else the store's fileReservedTime (broker.conf), as the broker's hours."""
    return given if given is not None else float(configured)


def teller(quiet: bool, note: Callable[[str], None]) -> Callable[[str], None]:
    """The stderr note line, or nothing under --quiet (cron wants silence when all is well)."""
    return (lambda line: None) if quiet else note


def left_alone(problems: list, error: object | None, verbose: bool) -> list:
    """The files to list as left alone: only with --verbose, and only when the one error line
    does not already name them all (more than one, or one beside the run's own error)."""
    if verbose and (len(problems) > 1 or (problems and error is not None)):
        return problems
    return []


def report(fmt: str, summary: dict, run: Any, dry_run: bool, root: Path, quiet: bool) -> None:
    """The run's report on stdout; --quiet keeps it back only when nothing was deleted and nothing went wrong.

    A run that stopped on a file lets a lost report go: its error line and exit 3 say more than
    exit 6 ("finished"), and the journal holds what it deleted.
    """
    from rmqstore_cli.job_reports import print_expire
    from rmqstore_cli.stdio import OutputFault

    went_wrong = run.error is not None or bool(run.plan.problems)
    if quiet and not run.deleted and not went_wrong:
        return
    try:
        print_expire(fmt, summary, run.deleted, dry_run, root)
    except OutputFault:
        if not went_wrong:
            raise
