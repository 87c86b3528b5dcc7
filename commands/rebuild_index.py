"""``rmqstore rebuild-index``: consume queues and index files regenerated from the commit log."""

from __future__ import annotations

from pathlib import Path

import typer
from rmqstore_cli.commands import rebuild_index_options as o
from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Engine,
    EngineOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    JobsOpt,
    QuietOpt,
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoreGlobOpt,
    StoresOpt,
    TzOpt,
    command,
    work_done,
)
from rmqstore_cli.commands.lines import note, say, warn


def register(app: typer.Typer) -> None:
    app.command("rebuild-index", epilog=o.EPILOG)(rebuild_index)


@command(mutating=True)
def rebuild_index(
    store: StoresOpt = None,
    store_glob: StoreGlobOpt = None,
    broker_conf: BrokerConfOpt = None,
    output: o.OutputOpt = None,
    in_place: o.InPlaceOpt = False,
    only: o.OnlyOpt = None,
    topic: o.TopicOpt = None,
    copy_commitlog: o.CopyCommitlogOpt = False,
    no_backup: o.NoBackupOpt = False,
    recover: o.RecoverOpt = False,
    dry_run: o.DryRunOpt = False,
    progress: o.ProgressOpt = True,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    tz: TzOpt = None,
    fmt: FormatOpt = Fmt.table,
    engine: EngineOpt = Engine.local,
    jobs: JobsOpt = 0,
    spark_master: SparkMasterOpt = None,
    spark_conf: SparkConfOpt = None,
    verbose: SparkVerboseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Regenerate consume queues and index files from the commit log, as the broker's dispatch builds them.

    Records are dispatched the way a broker that lost consumequeue/ and index/ would on
    start: recovery decides where the log ends (a torn tail stops dispatch at the last
    valid message, and the summary says where and why), then every record from the first
    commit-log file is dispatched (size mismatches skipped, no CRC check before the
    recovery region). Queues whose first files were expired start above 0 with pre-blank
    units, like the broker's. Exit 0 done, 2 usage, 3 unreadable store, 4 a live broker,
    5 stdout closed or full (with stdout closed from the start: before any work), 6 the
    rebuild is done and in place but its summary could not be written.
    """
    from rmqstore_cli.commands.common import conf_path, load_config, pick_stores

    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.job_reports import backups_line, print_rebuild, rebuild_warnings
    from rmqstore_cli.pipeline import rebuild_job
    from rmqstore_cli.render import ProgressBar, print_summaries, rebuild_summary
    from rmqstore_cli.times import parse_tz

    stores = [Path(s.path) for s in pick_stores(store, store_glob, broker_conf, {}, quiet=quiet)]
    broker_conf = conf_path(broker_conf)  # the option's, else $RMQSTORE_BROKER_CONF
    if recover and (output is not None or dry_run):
        raise UsageError("--recover takes only --store")
    if recover:
        outcomes = rebuild_job.recover(stores)
        if any(x["recovered"] for x in outcomes):
            work_done("the interrupted run is finished or rolled back (verify checks the store)")
        print_summaries(fmt.value, outcomes, "rebuild-index --recover")
        return
    picked = only.value if only else None
    rebuild_job.check_options(stores, output, in_place, picked, topic, copy_commitlog, no_backup)
    sizes = dict(
        mapped_file_size_commit_log=commitlog_file_size,
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )
    outs = rebuild_job.outputs(stores, output)
    cfgs = [load_config(st, broker_conf, *sizes.values(), quiet=quiet) for st in stores]
    tell = (lambda line: None) if quiet else note
    zone = parse_tz(tz)
    plans = rebuild_job.plan(stores, output, outs, cfgs, picked, topic, zone, dry_run, sizes, broker_conf, tell)

    def bar(local: bool) -> ProgressBar:  # only the local engine dispatches here
        return ProgressBar("dispatching", total=1, enabled=progress and local and not quiet, detail=True)

    spark = (spark_master, spark_conf, verbose) if engine is Engine.spark else None
    done = rebuild_job.rebuild(plans, in_place, no_backup, copy_commitlog, bar, spark, jobs)
    if not dry_run:
        work_done("the files it rebuilt are complete and in place (verify checks them)")
    several = len(stores) > 1
    summaries = [rebuild_summary(p.store, rep, plan, p.opts) for p, rep, plan in done]
    for s, (p, _, _) in zip(summaries, done, strict=True):
        if several and p.output is not None:
            s["output"] = str(p.output)
    print_rebuild(fmt.value, summaries, "rebuild-index (dry run)" if dry_run else "rebuild-index", several)
    for p, rep, plan in [] if quiet else done:
        for line in rebuild_warnings(rep, f"{p.store}: " if several else "") if rep is not None else ():
            warn(line)
        if plan.get("backups") and not dry_run:
            say(None, backups_line(plan["backups"]))
