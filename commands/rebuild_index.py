"""``rmqstore rebuild-index``: consume queues and index files regenerated from the commit log."""

from __future__ import annotations

import functools
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
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
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoreGlobOpt,
    StoresOpt,
    TzOpt,
    command,
    complete_topic,
    work_done,
)

EPILOG = """Examples:

  rmqstore rebuild-index --store ~/store --output /tmp/rebuilt

  rmqstore rebuild-index --store ~/store --in-place --dry-run

  rmqstore rebuild-index --store ~/store --in-place --only cq --topic OrderTopic --topic '%RETRY%cg'

  rmqstore rebuild-index --store snap/ --broker-conf broker.conf --output out/ --tz Asia/Shanghai --format json

  rmqstore rebuild-index --store /mnt/store --output /mnt/rebuilt --engine spark --spark-master 'local[4]'

  rmqstore rebuild-index --store-glob '/snapshots/broker-*/store' --output /tmp/rebuilt --engine spark

With --engine spark each commit-log file is dispatched by one Spark task, which writes its
consume-queue units in place; a second task per file writes its index entries, and one
small task per index file links them; one task per BatchCQ queue writes its
batchconsumequeue/ files from the units the file tasks saved: byte for byte what the
local engine writes. Only summaries go through Spark (the tasks exchange units and keys
as files beside the output). A BatchCQ topic is rebuilt only with all the queues: --topic
naming one is refused on either engine.
On a cluster, --output (or the store, with --in-place) must be on a file system every
executor mounts at the same path.

Several stores (--store repeated, or --store-glob) are rebuilt one after the other, in one Spark
session with --engine spark: with --output DIR each store is written to DIR/<its path
relative to the stores' common parent> (broker-a/store, broker-b/store, ...), with
--in-place each store in place. The summary then has one entry per store.

Index file names are the store time of each file's first entry in --tz (the broker names
them by its wall clock at creation, which the store does not record); a first entry whose
store time is no date (negative, after 9999) names its file one millisecond after the
previous one (the first file: 1970-01-01 UTC), with a warning. An interrupted --in-place
run is finished (or rolled back) by the next run, or by --recover; a full or read-only
disk is one error line, and the run leaves nothing half-written.

File sizes come from --broker-conf, the size options, or the store's own files of that
kind (the summary's "sizes" says which). A consumequeue/ or index/ rebuilt with none of
these (lost, and no broker.conf) is refused, naming the options, instead of being written
with the broker's defaults (420 MB index files where the store may have used 8 KB ones).
"""


class Only(str, Enum):
    cq = "cq"
    index = "index"


def register(app: typer.Typer) -> None:
    app.command("rebuild-index", epilog=EPILOG)(rebuild_index)


@command(mutating=True)
def rebuild_index(
    store: StoresOpt = None,
    store_glob: StoreGlobOpt = None,
    broker_conf: BrokerConfOpt = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the rebuilt consumequeue/, index/ and checkpoint here (with several stores: "
            "one directory per store below it); the stores are only read, so an --output inside, equal to or "
            "containing a store (real paths compared) is refused.",
        ),
    ] = None,
    in_place: Annotated[
        bool,
        typer.Option(
            "--in-place", help="Replace the store's own consumequeue/ and index/ (refused while a broker runs)."
        ),
    ] = False,
    only: Annotated[
        Only | None, typer.Option("--only", help="Rebuild only consume queues (cq) or only the index.")
    ] = None,
    topic: Annotated[
        list[str] | None,
        typer.Option(
            "--topic",
            "-t",
            help="Rebuild only this topic's queues (repeatable; implies --only cq).",
            autocompletion=complete_topic,
        ),
    ] = None,
    copy_commitlog: Annotated[
        bool, typer.Option(help="With --output: copy the commit-log files (sparse, mtimes kept) instead of a symlink.")
    ] = False,
    no_backup: Annotated[
        bool,
        typer.Option(
            "--no-backup",
            help="With --in-place: delete the old sets instead of keeping them in the store's "
            "rmqstore-backup/<id>/ (stderr names it; verify knows it).",
        ),
    ] = False,
    recover: Annotated[
        bool, typer.Option("--recover", help="Only finish (or roll back) an interrupted --in-place run, then stop.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Scan and report what would be written; write nothing.")
    ] = False,
    progress: Annotated[bool, typer.Option(help="Progress bar on stderr (only ever on a terminal).")] = True,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    tz: TzOpt = None,
    fmt: FormatOpt = Fmt.table,
    engine: EngineOpt = Engine.local,
    spark_master: SparkMasterOpt = None,
    spark_conf: SparkConfOpt = None,
    verbose: SparkVerboseOpt = False,
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
    from rmqstore_cli.commands.common import conf_path, pick_stores

    from rmqstore_cli.render import print_summaries, print_summary

    stores = [Path(s.path) for s in pick_stores(store, store_glob, broker_conf, {})]
    broker_conf = conf_path(broker_conf)  # the option's, else $RMQSTORE_BROKER_CONF
    if recover:
        _recover(stores, output is not None or dry_run, fmt)
        return
    _check_options(stores, output, in_place, only, topic, copy_commitlog, no_backup)
    plans = _plans(
        stores,
        output,
        broker_conf,
        only,
        topic,
        tz,
        dry_run,
        {
            "mapped_file_size_commit_log": commitlog_file_size,
            "mapped_file_size_consume_queue": cq_file_size,
            "max_hash_slot_num": index_slots,
            "max_index_num": index_max,
        },
    )

    _refuse_batch_queues(plans)

    def job(spark=None):
        build = None
        if spark is not None:
            from rmqstore_cli.pipeline import spark as sp

            build = functools.partial(sp.rebuild_build, spark)
        done = []
        for st, out, cfg, opts, sizes in plans:
            rep, plan = _rebuild(cfg, out, opts, in_place, no_backup, copy_commitlog, build, progress and spark is None)
            done.append((st, out, rep, dict(plan, sizes=sizes), opts))
        return done

    done = _run_spark(job, spark_master, spark_conf, verbose) if engine is Engine.spark else job()
    if not dry_run:
        work_done("the files it rebuilt are complete and in place (verify checks them)")
    several = len(stores) > 1
    summaries = [_summary(st, rep, plan, opts, out if several else None) for st, out, rep, plan, opts in done]
    title = "rebuild-index (dry run)" if dry_run else "rebuild-index"
    if several:
        print_summaries(fmt.value, summaries, title)
    else:
        print_summary(fmt.value, summaries[0], title)
    for st, _, rep, plan, _ in done:
        if rep is not None:
            _warn(rep, f"{st}: " if several else "")
        if plan.get("backups") and not dry_run:
            _tell_backups(plan["backups"])


def _tell_backups(backups: list[str]) -> None:
    """Where --in-place put the sets it replaced: one directory per run, below the store's
    rmqstore-backup/ (store/root_entries.py), which verify names as not checked, not unknown."""
    import os

    from rmqstore_cli.render import safe_text

    where = os.path.commonpath(backups) if len(backups) > 1 else os.path.dirname(backups[0])
    print(
        f"rmqstore: the replaced files are kept in {safe_text(where)} (remove it once the rebuilt store is "
        "trusted; --no-backup keeps none)",
        file=sys.stderr,
    )


def _refuse_batch_queues(plans) -> None:
    """BatchCQ topics are rebuilt only with all the queues (on either engine): with --topic
    the dispatcher has no ``BatchDispatch`` and would put a BatchCQ topic's units in
    consumequeue/. Refused rather than written wrong."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.store import rebuild_plan

    for _, _, cfg, opts, _ in plans:
        picked = rebuild_plan.batch_topics_picked(cfg, opts)
        if picked:
            raise UsageError(
                f"{', '.join(picked)}: BatchCQ topics (batchconsumequeue/) are rebuilt only with all the queues",
                hint="leave out --topic for them",
            )


def _recover(stores: list[Path], other_options: bool, fmt: Fmt) -> None:
    """--recover: finish (or roll back) each store's interrupted --in-place run."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.render import print_summaries
    from rmqstore_cli.store.lock import refuse_if_live
    from rmqstore_cli.store.rebuild_output import recover_journal

    if other_options:
        raise UsageError("--recover takes only --store")
    for st in stores:
        refuse_if_live(st)
    outcomes = []
    for st in stores:
        j = recover_journal(st)
        outcomes.append(
            {
                "store": str(st),
                "recovered": j["id"] if j else None,
                "outcome": j["outcome"] if j else "nothing to recover",
            }
        )
    if any(o["recovered"] for o in outcomes):
        work_done("the interrupted run is finished or rolled back (verify checks the store)")
    print_summaries(fmt.value, outcomes, "rebuild-index --recover")


def _check_options(
    stores: list[Path],
    output: Path | None,
    in_place: bool,
    only: Only | None,
    topic: list[str] | None,
    copy_commitlog: bool,
    no_backup: bool,
) -> None:
    """Refuse option combinations that do not go together, before anything is read; with
    --in-place, a live broker (exit 4) before anything else is said."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.store.consume_queue import unsafe_topic

    if (output is None) == (not in_place):
        raise UsageError("pass exactly one of --output DIR and --in-place")
    from rmqstore_cli.pipeline.stores import hadoop_uri

    if output is not None and hadoop_uri(str(output)):  # a Path has folded its // already
        raise UsageError(
            f"--output {output} is a URI; rebuild-index writes a store's files to a directory",
            hint="pass a local (or, on a cluster, mounted) directory",
        )
    if no_backup and not in_place:
        raise UsageError("--no-backup only applies to --in-place")
    if copy_commitlog and in_place:
        raise UsageError("--copy-commitlog only applies to --output")
    if topic and only is Only.index:
        raise UsageError("--topic selects consume queues; it cannot be combined with --only index")
    for t in topic or ():
        if unsafe_topic(t):
            raise UsageError(f"--topic {t!r} cannot be a consume-queue directory: {unsafe_topic(t)}")
    if in_place:
        from rmqstore_cli.store.lock import refuse_if_live

        for st in stores:
            refuse_if_live(st)  # before anything else is read or said


def _plans(
    stores: list[Path],
    output: Path | None,
    broker_conf,
    only: Only | None,
    topic: list[str] | None,
    tz: str | None,
    dry_run: bool,
    sizes: dict[str, int | None],
) -> list[tuple]:
    """(store, output, config, options, size sources) per store: every store opened and
    checked (outputs, sizes and where they come from) before any work. ``sizes``: the size
    options given (attribute -> value or None)."""
    from rmqstore_cli.commands.common import load_config

    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store import rebuild_plan
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.rebuild_output import check_output
    from rmqstore_cli.times import parse_tz

    several = len(stores) > 1
    zone = parse_tz(tz)
    outs = _outputs(stores, output) if output is not None else [None] * len(stores)
    cfgs = [
        load_config(
            st,
            broker_conf,
            sizes["mapped_file_size_commit_log"],
            sizes["mapped_file_size_consume_queue"],
            sizes["max_hash_slot_num"],
            sizes["max_index_num"],
        )
        for st in stores
    ]
    if output is not None:  # before anything is read or said: the stores are only read
        read = [d for c in cfgs for d in (c.root, *c.commitlog_dirs, c.consumequeue_dir, c.index_dir)]
        for out in dict.fromkeys([output, *outs]):
            check_output(out, read)
    plans = []
    for st, out, cfg in zip(stores, outs, cfgs, strict=True):
        ms = MessageStore.open(cfg, zone, rocksdb=out is not None)  # a RocksDB CQ: only beside it
        for note in ms.notes:
            line = safe_text(f"{st}: {note}" if several else note)
            print(f"rmqstore: note: {line}", file=sys.stderr)
        if not cfg.message_index_enable and only is Only.index:
            raise UsageError(
                "messageIndexEnable=false in the broker config: the broker builds no index"
                + (f" ({st})" if several else "")
            )
        opts = rebuild_plan.options(cfg, only.value if only else None, topic, zone, dry_run)
        sources = rebuild_plan.check_sizes(cfg, opts, sizes, broker_conf)
        plans.append((st, out, cfg, opts, sources))
    return plans


def _outputs(stores: list[Path], output: Path) -> list[Path]:
    """One output directory per store: ``output`` itself for one store; for several, the
    store's path relative to the stores' common parent, below ``output``."""
    import os

    from rmqstore_cli.errors import UsageError

    if len(stores) == 1:
        return [output]
    absolute = [Path(os.path.abspath(p)) for p in stores]
    common = Path(os.path.commonpath(absolute))
    rels = [p.relative_to(common) for p in absolute]
    if any(r == Path(".") for r in rels):
        raise UsageError("one store lies inside another", hint="rebuild them one at a time")
    return [output / r for r in rels]


def _rebuild(
    cfg, out: Path | None, opts, in_place: bool, no_backup: bool, copy_commitlog: bool, build, progress: bool
) -> tuple:
    """One store rebuilt (in place or to ``out``) under the progress bar: (report, plan)."""
    from rmqstore_cli.render import ProgressBar
    from rmqstore_cli.store import rebuild_plan

    with ProgressBar("dispatching", total=1, enabled=progress, detail=True) as bar:
        return rebuild_plan.rebuild(
            cfg, None if in_place else out, opts, no_backup, copy_commitlog, bar.dispatch, build=build
        )


def _run_spark(job, spark_master: str | None, spark_conf: list[str] | None, verbose: bool) -> list:
    """``job`` in a Spark session (one for every store)."""
    from rmqstore_cli.errors import UsageError

    try:
        from rmqstore_cli.pipeline import spark as sp
    except ImportError:
        raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
    return sp.run_job(job, spark_master, spark_conf, verbose)


def _summary(store: Path, rep, plan: dict, opts, output: Path | None) -> dict:
    """A store's summary (``output``: named when several stores go to one --output)."""
    from rmqstore_cli.render import rebuild_summary

    s = rebuild_summary(store, rep, plan, opts)
    if output is not None:
        s["output"] = str(output)
    return s


def _warn(rep, who: str) -> None:
    """What the summary holds that a person must not miss, on stderr."""
    from rmqstore_cli.render import safe_text

    if rep.stop is not None and not rep.stop.clean:
        print(
            f"rmqstore: warning: {who}dispatch stopped at offset {rep.stop.offset} ({rep.stop.file}): "
            f"{rep.stop.reason}",
            file=sys.stderr,
        )
    if rep.refused_topics:
        print(
            f"rmqstore: warning: {who}records of {len(rep.refused_topics)} topic(s) got no consume queue, "
            f"their names cannot be a directory: " + ", ".join(safe_text(repr(t)) for t in sorted(rep.refused_topics)),
            file=sys.stderr,
        )
    if rep.multi_dispatch_problems:
        print(
            f"rmqstore: warning: {who}malformed INNER_MULTI_DISPATCH/INNER_MULTI_QUEUE_OFFSET ("
            + ", ".join(f"{k}: {n}" for k, n in sorted(rep.multi_dispatch_problems.items()))
            + " messages): written as the broker's dispatch would; rmqstore verify names them (lmq.malformed)",
            file=sys.stderr,
        )
    if rep.fallback_index_names:
        name, ts = rep.fallback_index_names[0]
        more = f" (and {len(rep.fallback_index_names) - 1} more)" if len(rep.fallback_index_names) > 1 else ""
        print(
            f"rmqstore: warning: {who}index file {name}: its first entry's storeTimestamp {ts} is no date "
            f"(before 1970 or after 9999), so the file is named after the previous one (the first: "
            f"1970-01-01 UTC){more}",
            file=sys.stderr,
        )
    if rep.skipped:
        print(
            f"rmqstore: warning: {who}{len(rep.skipped)} stretch(es) of the commit log were skipped "
            f"undispatched (see 'skipped')",
            file=sys.stderr,
        )
