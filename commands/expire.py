"""``rmqstore expire``: the broker's file expiry (commit log, consume queues, index), for cron."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    StoreOpt,
    TzOpt,
    command,
)
from rmqstore_cli.commands.grammar import NowOpt

EPILOG = """Examples:

  rmqstore expire --store ~/store --reserved-hours 72 --dry-run

  rmqstore expire --broker-conf /opt/rocketmq/conf/broker.conf --quiet    # crontab: 0 4 * * *

  rmqstore expire --store /snap/store --reserved-hours 48 --now 2026-11-20T04:00 --format json

  rmqstore expire --store ~/store --disk-ratio 0.85 --max-files 10 --verbose
"""

TABLE_COLUMNS = [("kind", "kind"), ("file", "file"), ("rule", "rule"), ("reason", "why"), ("bytes", "bytes")]


def register(app: typer.Typer) -> None:
    app.command("expire", epilog=EPILOG)(expire)


def _ratio(value: float | None) -> float | None:
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


@command(mutating=True)
def expire(
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    reserved_hours: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Keep commit-log files modified less than this many hours ago "
            "(fileReservedTime; default: from --broker-conf, else 72).",
        ),
    ] = None,
    now: NowOpt = None,
    disk_ratio: Annotated[
        float | None,
        typer.Option(
            help="Also delete the oldest files, whatever their age, while the commit-log partition is "
            "more than this full (0.85 or 85), as the broker's forced clean does."
        ),
    ] = None,
    max_files: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Delete at most this many commit-log files in this run (the broker: "
            "deleteFileBatchMax=10 per 10 s). Default: no cap.",
        ),
    ] = None,
    pause_ms: Annotated[
        int, typer.Option(min=0, help="Sleep between deletions, like deleteCommitLogFilesInterval (100 in the broker).")
    ] = 0,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", "-n", help="List what would go and why; delete nothing.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Delete even while a live broker holds the store's lock (--dry-run needs no --force: it only reads).",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Print nothing unless something was deleted or went wrong (for cron).")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="One line per deletion on stderr, as it happens, and one per file left alone."
        ),
    ] = False,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Delete expired commit-log files, then the consume-queue and index files that only
    point below the commit log's new minimum — the broker's cleaning, run once.

    Commit-log files go oldest first while they were last modified --reserved-hours ago
    or more (or while the disk is above --disk-ratio), never the newest file, stopping at
    the first that stays. Then each consume queue loses its oldest files whose last unit
    points below the new minimum, and the index its oldest files whose endPhyOffset is
    below it; the newest file of each always stays. Nothing else is changed.

    Every file is checked to be a store file (20- or 17-digit name, configured size,
    regular file, not a symlink) before it is deleted. Refuses (exit 4) while a live
    broker holds the store's lock, unless --force; holds that lock itself while deleting.
    --dry-run only reads, so it runs under a live broker too (one stderr line says so).
    A commitlog/, consumequeue/ or index/ that is a symlink out of the store is refused
    (exit 4): nothing is deleted outside the store, except a commit-log directory that
    --broker-conf's storePathCommitLog names.
    An interrupted run leaves a consistent store; the next run finishes the job.
    Exit 0 when the run completed (whether or not anything was due), 3 when a file could
    not be checked or deleted: one error line, with the count and the first such file when
    there are several (--verbose lists each).

    Every run that deletes appends to rmqstore-expire.jsonl in the store root one line per
    file as it is deleted, then the run's summary (the lines --format jsonl prints, each
    with the run's id): exit 6 means the deletions are done but the report could not be
    written (stdout full, closed, a pipe cut), and the journal has it. With stdout closed
    from the start, expire refuses before deleting anything (exit 5) unless --quiet.
    """
    from rmqstore_cli.commands.common import load_config

    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store import expire_run
    from rmqstore_cli.times import now_ms, parse_time, parse_tz

    zone = parse_tz(tz)
    ratio = _ratio(disk_ratio)
    at = parse_time(now, "--now", tz=zone) if now is not None else now_ms()
    cfg = load_config(store, broker_conf, commitlog_file_size, cq_file_size, index_slots, index_max, quiet=quiet)
    hours = reserved_hours if reserved_hours is not None else float(cfg.file_reserved_time)
    warn = (lambda msg: None) if quiet else (lambda msg: print(f"rmqstore: {safe_text(msg)}", file=sys.stderr))
    _check_store(cfg, zone, dry_run, force, verbose, warn)
    run = _run(cfg, at, hours, ratio, max_files, pause_ms, dry_run, verbose, warn)
    plan, deleted, error = run.plan, run.deleted, run.error
    summary = expire_run.summary(run, cfg)
    _record(run.journal, summary, deleted)
    for n in plan.notes:
        warn(f"note: {n}")
    went_wrong = error is not None or bool(plan.problems)
    if not (quiet and not deleted and not went_wrong):
        from rmqstore_cli.stdio import OutputFault

        try:
            _print(fmt, summary, deleted, dry_run, cfg.root)
        except OutputFault:
            if not went_wrong:
                raise
            # a run that stopped on a file: its error line and exit 3 say more than a lost report
            # (exit 6 means "finished"); the journal holds what it deleted
    _fail(plan.problems, error, verbose)


def _check_store(cfg, zone, dry_run: bool, force: bool, verbose: bool, warn) -> None:
    """Before anything is planned: the lock (a live broker refused unless --force; said and
    allowed for --dry-run, which only reads), the data directories and the file sizes."""
    from rmqstore_cli.store import expire_run

    live = expire_run.check_lock(
        cfg,
        dry_run,
        force,
        refuse_hint="stop the broker or work on a snapshot; --dry-run lists what would "
        "go without deleting, --force deletes anyway",
    )
    if live is not None:
        warn(
            f"note: a live broker (pid {live}) holds the store's lock; --dry-run only reads, "
            "so it goes on (its files may change meanwhile)"
        )
    notes = expire_run.check_files(cfg, zone)
    if verbose:
        for note in notes:
            warn(f"note: {note}")


def _run(cfg, at: int, hours: float, ratio, max_files, pause_ms: int, dry_run: bool, verbose: bool, warn):
    """Plan the expiry and (unless --dry-run) carry it out under the store's lock
    (store/expire_run.py), each file said on stderr with --verbose as it goes."""
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store import expire_run

    def said(a) -> None:
        if verbose:
            verb = "would delete" if dry_run else "deleted"
            print(safe_text(f"rmqstore: {verb} {a.file} ({a.size} bytes): {a.reason}"), file=sys.stderr)

    def forced() -> None:
        warn("warning: --force: deleting while a live broker holds the store's lock")

    return expire_run.run(cfg, at, hours, ratio, max_files, pause_ms, dry_run, said, forced)


def _record(journal, summary: dict, deleted) -> None:
    """The run's summary into its journal (the summary names the journal, or null when it
    could not be written: one warning, even with --quiet); the deletions are then recorded
    for a report that cannot be written (exit 6, commands.common.work_done)."""
    from rmqstore_cli.commands.common import work_done

    from rmqstore_cli.store import expire_run

    lost = expire_run.record(journal, summary)
    if journal is None:
        return
    if lost is not None:
        print(
            f"rmqstore: warning: this run's deletions are not recorded: {lost}; its report is their only record",
            file=sys.stderr,
        )
    if deleted:
        work_done(
            f"its deletions are complete and recorded in {journal.path}"
            if summary["journal"]
            else "its deletions are complete (not recorded: the journal could not be written)"
        )


def _fail(problems, error, verbose: bool) -> None:
    """Exit 3 when a file could not be deleted or checked (one line; --verbose lists each)."""
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.render import safe_text

    if verbose and (len(problems) > 1 or (problems and error is not None)):
        for p in problems:
            print(f"rmqstore: left alone: {safe_text(str(p))}", file=sys.stderr)
    if error is not None:
        if problems:
            more = f"{len(problems)} other file{'s' if len(problems) != 1 else ''} left alone" + (
                "" if verbose else " (--verbose lists them)"
            )
            error.hint = f"{error.hint}; {more}" if error.hint else more
        raise error
    if len(problems) == 1:
        p = problems[0]
        raise StoreError(
            p.message,
            path=p.path,
            hint="files before it were handled; move it away or fix the size options, then run again",
        )
    if problems:
        raise _problems_error(problems, verbose)


#: Why a file was left alone (cleanup's messages), as (one, several, all of them) for the error line.
_PROBLEM_KINDS = (
    ("is a symlink", ("symlink", "symlinks", "symlinks, not store files")),
    ("not a regular file", ("not a regular file", "not regular files", "not regular files")),
    ("bytes, expected", ("of the wrong size", "of the wrong size", "of the wrong size")),
    ("lies outside", ("outside its directory", "outside their directories", "outside their directories")),
    ("not a store file name", ("misnamed", "misnamed", "misnamed")),
)


def _problem_kind(message: str) -> tuple[str, str, str]:
    return next((k for needle, k in _PROBLEM_KINDS if needle in message), ("unreadable",) * 3)


def _problems_error(problems, verbose: bool):
    """Several files left alone: one line with the count, the kinds and the first file."""
    from collections import Counter

    from rmqstore_cli.errors import StoreError

    kinds = Counter(_problem_kind(p.message) for p in problems)
    n = len(problems)
    if len(kinds) == 1:
        what = f"{n} files are {next(iter(kinds))[2]}"
    else:
        what = (
            f"{n} files could not be proven store files ("
            + ", ".join(f"{c} {one if c == 1 else several}" for (one, several, _), c in kinds.items())
            + ")"
        )
    return StoreError(
        f"{what}; left alone",
        path=f"first: {problems[0].path}",
        hint="files before them were handled; move them away or fix the size options, then run "
        "again" + ("" if verbose else " (--verbose lists each)"),
    )


def _print(fmt, summary: dict, deleted, dry_run: bool, root: Path) -> None:
    from rmqstore_cli.render import Output, print_summary, to_json

    if fmt is Fmt.json:
        sys.stdout.write(to_json({**summary, "actions": [a.as_dict() for a in deleted]}) + "\n")
        return
    if fmt is Fmt.jsonl:
        for a in deleted:
            sys.stdout.write(to_json(a.as_dict()) + "\n")
        sys.stdout.write(to_json({"kind": "summary", **summary}) + "\n")
        return
    title = f"{'would delete (dry run)' if dry_run else 'deleted'}: {root}"
    if deleted:
        out = Output("table", TABLE_COLUMNS, title=title)
        for a in deleted:
            out.emit(a.as_dict())
        out.close()
    mins = summary["min_offsets"]
    idx = mins["index"]
    table = {
        "files" + (" (would go)" if dry_run else " deleted"): summary["files"],
        "by kind": " ".join(f"{k}={v}" for k, v in summary["deleted"].items()),
        "bytes freed": summary["bytes_freed"],
        "commit-log min offset": f"{mins['commitlog_before']} -> {mins['commitlog']}",
        "queues trimmed": len(mins["consumequeue"]),
        "first index file": (idx or {}).get("file", ""),
        "completed": summary["completed"],
    }
    if summary.get("journal"):
        table["recorded in"] = summary["journal"]
    if "disk" in summary:
        d = summary["disk"]
        table["disk used"] = (
            f"{d['used_ratio_before']:.0%} -> {d['used_ratio_after']:.0%} (threshold {d['threshold']:.0%})"
        )
    print_summary("table", table, title="expire" + (" (dry run)" if dry_run else ""))
