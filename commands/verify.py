"""``rmqstore verify``: prove a store consistent, or say exactly where it is not."""

from __future__ import annotations

from typing import Annotated

import typer
from rmqstore_cli.commands import common
from rmqstore_cli.commands.grammar import limit_option, old_spelling, renamed
from rmqstore_cli.commands.sampling_options import MaxBytesOpt, SampleOpt
from rmqstore_cli.commands.verify_local import finding_cap, verify_full, verify_quick

EPILOG = """Examples:

  rmqstore verify --store ~/store --broker-conf conf/broker.conf

  rmqstore verify --store /snapshots/broker-a --deep --format jsonl | jq -c 'select(.severity=="error")'

  rmqstore verify --store ~/store --no-crc --limit 20

  rmqstore verify --list-checks

  rmqstore verify --store-glob '/snapshots/broker-*/store' --format jsonl      # several stores

  rmqstore verify --store a/store --store b/store --engine spark --spark-master 'local[4]'

With --store-glob (or --store repeated) every finding carries "store", and the summary holds one entry per store
({"summary": {"stores": [...]}}), however many matched; one store prints the same whatever the engine. --engine spark
runs one Spark task per commit-log file, then one per queue and per index file; the findings are the local engine's.

Exit codes: 0 no errors (warnings and info may be listed), 1 errors found (a broker that would not start on the store
is always one), 3 not a store, 5 the output could not be written (stdout full or closed). Into a pipe whose reader
went away (| head -1) the check still runs silently and the exit code is its answer. A finding rebuild-index repairs
(cq.missing-unit, index.missing: messageIndexEnable=true but no index entry while messages carry keys) ends with the
command that repairs it; so does a file the broker would not load or whose recovery would delete the files after it
(commitlog.file-size, cq.file-size, commitlog.blank: rmqstore repair --pad, which keeps every good message).
config/*.json are read as ConfigManager#load reads them: config.backup-loaded (warning: the broker runs on the .bak),
config.lost and config.load-fails (errors: an empty table, or no start). With --format jsonl every finding is one line
{"check","severity","file","offset","detail",...}; the last line is {"summary": {...}} (messages checked; bytes, the
total size of their records, not of the files; files checked, by kind; findings per check; broker_start).

broker_start predicts whether the broker (--broker-version, else the store's: timer files mean 5, otherwise 4.9 is
assumed) would start on the store, and why not: config files and their .bak (ConfigManager#load), file sizes
(MappedFileQueue#doLoad), an empty last consume-queue file (5.0-5.3.3 ConsumeQueue#correctMinOffset), a live lock; the
table ends with that verdict in one line. Normal recovery differs by version: 4.9 and 5.3.1 (any 5.0-5.3.1) re-read
the last three commit-log files and dispatch nothing; 5 (5.3.2 and later) starts at the file holding the consume
queues' end and dispatches the messages after it.
"""


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=EPILOG)(verify)


@common.command(answer=True)
def verify(
    store: common.StoresOpt = None,
    store_glob: common.StoreGlobOpt = None,
    broker_conf: common.BrokerConfOpt = None,
    commitlog_file_size: common.CommitlogSizeOpt = None,
    cq_file_size: common.CqSizeOpt = None,
    index_slots: common.IndexSlotsOpt = None,
    index_max: common.IndexMaxOpt = None,
    crc: Annotated[bool, typer.Option("--crc/--no-crc", help="Check every body CRC (and __CRC32# properties).")] = True,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also prove every indexed key of every message is in the index.")
    ] = False,
    limit: Annotated[
        int | None,
        limit_option(
            "Show at most N findings of each check (default: 5 in the table, 100 in JSON; 0: none); "
            "the summary counts them all."
        ),
    ] = None,
    max_findings: Annotated[int | None, old_spelling("--max-findings", min=0)] = None,
    list_checks: Annotated[
        bool, typer.Option("--list-checks", help="List every check id, its severity and meaning, and exit.")
    ] = False,
    broker_version: Annotated[
        common.VerifyBrokerVersion | None,
        typer.Option(
            "--broker-version",
            help="The broker version whose recovery and start-up verify predicts: 4.9, 5.3.1 "
            "(any 5.0-5.3.1) or 5 (5.3.2 and later), when the store cannot tell (5 when "
            "timer files are there; else 4.9 is assumed and said).",
        ),
    ] = None,
    fmt: common.FormatOpt = common.Fmt.table,
    jobs: common.VerifyJobsOpt = 0,
    engine: common.EngineOpt = common.Engine.local,
    spark_master: common.SparkMasterOpt = None,
    spark_conf: common.SparkConfOpt = None,
    verbose: common.SparkVerboseOpt = False,
    sample: SampleOpt = None,
    max_bytes: MaxBytesOpt = None,
) -> None:
    """Check a store's commit log, consume queues, index, checkpoint and abort marker.

    Every record, unit and index entry is checked against the others; damage does not stop the scan (it resynchronises
    on the next record and reports the unreadable bytes). Each finding has a stable check id, a severity (error,
    warning, info), the file relative to the store root and the byte offset in it. Broker-normal artefacts
    (duplicate queue offsets after restarts, pre-blank units, expired entries) are info. The table groups the
    findings by check, each with its count and the first --limit (5) found; the JSON formats carry up to --limit
    (100) of each. Read-only: no byte of the store changes.
    """
    from rmqstore_cli.commands.common import pick_stores

    from rmqstore_cli import reports
    from rmqstore_cli.store.verify import CHECKS, VerifyOptions

    if list_checks:
        reports.verify_checks(fmt.value, CHECKS)
        return
    cap = finding_cap(renamed(limit, max_findings, "--limit", "--max-findings"), fmt)
    sizes = {"mapped_file_size_commit_log": commitlog_file_size, "mapped_file_size_consume_queue": cq_file_size}
    sizes.update(max_hash_slot_num=index_slots, max_index_num=index_max)
    specs = pick_stores(store, store_glob, broker_conf, sizes)
    opts = VerifyOptions(crc=crc, deep=deep, max_findings=cap, broker_version=broker_version and broker_version.value)
    # a fleet (--store-glob, or --store twice) keeps the fleet's shape with one match: jq paths never shift
    fleet = bool(store_glob) or len(store or []) > 1
    if sample is not None or max_bytes is not None:  # a quick look: the sampled records alone, in this process
        results = [verify_quick(specs[0], opts, fmt, sample, max_bytes)]
    else:
        spark = (spark_master, spark_conf, verbose) if engine is common.Engine.spark else None
        results = verify_full(specs, opts, fmt, fleet, spark, jobs)
    if not all(r["ok"] for r in results):
        raise typer.Exit(1)
