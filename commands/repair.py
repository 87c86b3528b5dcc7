"""``rmqstore repair``: mend what stops the broker loading a store, keeping every good message."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    QuietOpt,
    StoreOpt,
    command,
)
from rmqstore_cli.commands.lines import note

EPILOG = """Examples:

  rmqstore repair --store ~/store --pad ~/store/commitlog/00000000001073741824 --dry-run

  rmqstore repair --store /snap/store --commitlog-file-size 1073741824 --pad /snap/store/commitlog/00000000002147483648

  rmqstore repair --store ~/store --pad ~/store/consumequeue/OrderTopic/3/00000000000006000000

  rmqstore rebuild-index --store ~/store --in-place --only cq --topic OrderTopic     # then, for a queue file

  rmqstore verify --store ~/store --format jsonl | jq -r 'select(.check=="commitlog.file-size").detail'

verify's findings and its broker_start reasons print the exact repair command for a
commit-log or consume-queue file the broker would not load (commitlog.file-size,
cq.file-size) or whose recovery would delete the files after it (commitlog.blank: a file
before the last whose data ends without a BLANK record).

Exit codes: 0 done (or nothing to do), 2 usage, 3 the file could not be read or written,
4 refused: a live broker holds the store's lock, or the file cannot be made whole exactly
(damage inside it, data beyond the configured size, a DLedger data file); nothing is changed
then. With --format jsonl or json it prints one object with the keys file, kind, last,
length, size, records, data_end, dropped, blank, action, note, dry_run and done
(schemas/repair-action.json).
"""


def register(app: typer.Typer) -> None:
    app.command("repair", epilog=EPILOG)(repair)


@command(mutating=True)
def repair(
    pad: Annotated[
        Path,
        typer.Option(
            "--pad",
            metavar="FILE",
            help="A commit-log (or consume-queue) file of the store to give its configured length back: its "
            "good records (whole units) kept, a BLANK record after them when it is not the last commit-log "
            "file, zeros to the end.",
        ),
    ],
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", "-n", help="Say what would be written; write nothing.")] = False,
    fmt: FormatOpt = Fmt.table,
    quiet: QuietOpt = False,
) -> None:
    """Mend a commit-log file the broker would not load, keeping every good message.

    --pad FILE: a file cut short (a copy or a disk that lost its end) makes the broker refuse
    the store (MappedFileQueue#doLoad: "length not matched"). Its records are read as the
    broker's recovery reads them (CommitLog#checkMessageAndReturnSize, CRCs checked) up to
    the first that is not whole; the file is then rewritten to mappedFileSizeCommitLog bytes:
    those records, a BLANK record after them when the file is not the last (so recovery goes
    on to the next file instead of deleting it), and zeros (where recovery ends the log, in
    the last file). The cut record is dropped; nothing else is. A full file before the last
    whose data ends in zeros without a BLANK gets the BLANK too. A consume-queue file cut
    short keeps its whole units and gets zeros; then rebuild-index --only cq --topic T
    rewrites the topic's queues from the commit log (verify prints both commands).

    Refused (exit 4, nothing changed) while a live broker holds the store's lock, and when
    the result would not be exact: damage inside the file (not a cut), data beyond the
    configured size, a DLedger data file. The file size comes from --commitlog-file-size
    (--cq-file-size) or --broker-conf, else from the store's other files of its kind. The new file is written
    beside the old one and renamed over it, under the store's lock.
    """
    from rmqstore_cli.commands.common import load_config, work_done

    from rmqstore_cli.job_reports import print_repair
    from rmqstore_cli.store.write.repair import run_pad

    def live_said(pid: int) -> None:
        if not quiet:
            note(f"a live broker (pid {pid}) holds the store's lock; --dry-run only reads")

    def done(plan) -> None:
        work_done(f"{plan.file} is rewritten and in place (verify checks it)")

    cfg = load_config(store, broker_conf, commitlog_file_size, cq_file_size, quiet=quiet)
    plan = run_pad(cfg, pad, dry_run, live_said, done)
    record = {**plan.as_dict(), "dry_run": dry_run, "done": not dry_run and plan.action == "pad"}
    print_repair(fmt.value, record)
