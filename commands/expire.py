"""``rmqstore expire``: the broker's file expiry (commit log, consume queues, index), for cron."""

from __future__ import annotations

import typer
from rmqstore_cli.commands import expire_options as o
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
    load_config,
    work_done,
)
from rmqstore_cli.commands.grammar import NowOpt, clock
from rmqstore_cli.commands.lines import note, say, warn

EPILOG = """Examples:

  rmqstore expire --store ~/store --reserved-hours 72 --dry-run

  rmqstore expire --broker-conf /opt/rocketmq/conf/broker.conf --quiet    # crontab: 0 4 * * *

  rmqstore expire --store /snap/store --reserved-hours 48 --now 2026-11-20T04:00 --format json

  rmqstore expire --store ~/store --disk-ratio 0.85 --max-files 10 --verbose
"""


def register(app: typer.Typer) -> None:
    app.command("expire", epilog=EPILOG)(expire)


@command(mutating=True, quiet_hushes_stdout=True)
def expire(
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    reserved_hours: o.ReservedHoursOpt = None,
    now: NowOpt = None,
    disk_ratio: o.DiskRatioOpt = None,
    max_files: o.MaxFilesOpt = None,
    pause_ms: o.PauseMsOpt = 0,
    dry_run: o.DryRunOpt = False,
    force: o.ForceOpt = False,
    quiet: o.QuietOpt = False,
    verbose: o.VerboseOpt = False,
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
    from rmqstore_cli.render import ProgressBar
    from rmqstore_cli.store.write import expire_run
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    ratio = o.disk_share(disk_ratio)
    at = clock(now, zone)
    cfg = load_config(store, broker_conf, commitlog_file_size, cq_file_size, index_slots, index_max, quiet=quiet)
    hours = o.reserved_hours(reserved_hours, cfg.file_reserved_time)
    live = expire_run.check_lock(cfg, dry_run, force, refuse_hint=o.REFUSE_HINT)
    tell = o.teller(quiet, note)
    if live is not None:
        tell(f"a live broker (pid {live}) holds the store's lock; {o.LIVE_DRY_RUN}")
    checked = expire_run.check_files(cfg, zone)  # the data directories and file sizes
    for n in checked if verbose else ():
        tell(n)

    def said(a) -> None:
        bar.advance(a.size)
        if verbose:
            say(None, f"{'would delete' if dry_run else 'deleted'} {a.file} ({a.size} bytes): {a.reason}")

    def forced() -> None:
        if not quiet:
            warn("--force: deleting while a live broker holds the store's lock")

    with ProgressBar("expiring", enabled=not quiet) as bar:  # the planned files' bytes, once planned
        run = expire_run.run(cfg, at, hours, ratio, max_files, pause_ms, dry_run, said, forced, bar.set_total)
    summary = expire_run.summary(run, cfg)
    _record(run.journal, summary, run.deleted)
    for n in run.plan.notes:
        tell(n)
    problems, error = run.plan.problems, run.error
    o.report(fmt.value, summary, run, dry_run, cfg.root, quiet)
    for p in o.left_alone(problems, error, verbose):
        say(None, f"left alone: {p}")
    failed = expire_run.failure(problems, error, verbose)
    if failed is not None:
        raise failed


def _record(journal, summary: dict, deleted) -> None:
    """The run's summary into its journal (the summary names the journal, or null when it
    could not be written: one warning, even with --quiet); the deletions are then recorded
    for a report that cannot be written (exit 6, commands.exits.work_done)."""
    from rmqstore_cli.store.write import expire_run

    lost = expire_run.record(journal, summary)
    if journal is not None and lost is not None:
        warn(f"this run's deletions are not recorded: {lost}; its report is their only record")
    if journal is not None and deleted:
        work_done(
            f"its deletions are complete and recorded in {journal.path}"
            if summary["journal"]
            else "its deletions are complete (not recorded: the journal could not be written)"
        )
