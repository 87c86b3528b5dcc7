"""``rmqstore rebuild-index``: consume queues and index files regenerated from the commit log."""
from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    DEFAULT_STORE,
    Engine,
    EngineOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoresOpt,
    TzOpt,
    command,
    complete_topic,
)

EPILOG = """Examples:

  rmqstore rebuild-index --store ~/store --output /tmp/rebuilt

  rmqstore rebuild-index --store ~/store --in-place --dry-run

  rmqstore rebuild-index --store ~/store --in-place --only cq --topic OrderTopic --topic '%RETRY%cg'

  rmqstore rebuild-index --store snap/ --broker-conf broker.conf --output out/ --tz Asia/Shanghai --format json

  rmqstore rebuild-index --store /mnt/store --output /mnt/rebuilt --engine spark --spark-master 'local[4]'

  rmqstore rebuild-index --store '/snapshots/broker-*/store' --output /tmp/rebuilt --engine spark

With --engine spark each commit-log file is dispatched by one Spark task, which writes its
consume-queue units in place; a second task per file writes its index entries, and one
small task per index file links them: byte for byte what the local engine writes. Only
summaries go through Spark (the tasks exchange units and keys as files beside the output).
On a cluster, --output (or the store, with --in-place) must be on a file system every
executor mounts at the same path.

Several stores (--store repeated or a glob) are rebuilt one after the other, in one Spark
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


@command
def rebuild_index(
    store: StoresOpt = [str(DEFAULT_STORE)],
    broker_conf: BrokerConfOpt = None,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", help="Write the rebuilt consumequeue/, index/ and checkpoint here (with several stores: "
        "one directory per store below it); the stores are only read, so an --output inside, equal to or "
        "containing a store (real paths compared) is refused.")] = None,
    in_place: Annotated[bool, typer.Option(
        "--in-place", help="Replace the store's own consumequeue/ and index/ (refused while a broker runs).")] = False,
    only: Annotated[Optional[Only], typer.Option("--only", help="Rebuild only consume queues (cq) or only the index.")] = None,
    topic: Annotated[Optional[list[str]], typer.Option(
        "--topic", "-t", help="Rebuild only this topic's queues (repeatable; implies --only cq).",
        autocompletion=complete_topic)] = None,
    copy_commitlog: Annotated[bool, typer.Option(
        help="With --output: copy the commit-log files (sparse, mtimes kept) instead of a symlink.")] = False,
    no_backup: Annotated[bool, typer.Option(
        "--no-backup", help="With --in-place: delete the old sets instead of keeping *.bak-<id>.")] = False,
    recover: Annotated[bool, typer.Option(
        "--recover", help="Only finish (or roll back) an interrupted --in-place run, then stop.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Scan and report what would be written; write nothing.")] = False,
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
    units, like the broker's. Exit 0 done, 2 usage, 3 unreadable store, 4 a live broker.
    """
    from rmqstore_cli.commands.common import load_config
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.pipeline.tasks import expand_stores
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.rebuild import (
        RebuildOptions,
        check_size_values,
        rebuild_in_place,
        rebuild_to,
        recover_journal,
        refuse_unsourced_sizes,
        size_sources,
    )
    from rmqstore_cli.times import parse_tz

    stores = [Path(s.path) for s in expand_stores(store, None, {})]
    several = len(stores) > 1
    if recover:
        if output is not None or dry_run:
            raise UsageError("--recover takes only --store")
        from rmqstore_cli.store.lock import refuse_if_live

        for st in stores:
            refuse_if_live(st)
        outcomes = []
        for st in stores:
            j = recover_journal(st)
            outcomes.append({"store": str(st), "recovered": j["id"] if j else None,
                             "outcome": j["outcome"] if j else "nothing to recover"})
        _emit_all(fmt, outcomes, "rebuild-index --recover")
        return
    if (output is None) == (not in_place):
        raise UsageError("pass exactly one of --output DIR and --in-place")
    if no_backup and not in_place:
        raise UsageError("--no-backup only applies to --in-place")
    if copy_commitlog and in_place:
        raise UsageError("--copy-commitlog only applies to --output")
    if topic and only is Only.index:
        raise UsageError("--topic selects consume queues; it cannot be combined with --only index")
    from rmqstore_cli.store.consume_queue import unsafe_topic

    for t in topic or ():
        if unsafe_topic(t):
            raise UsageError(f"--topic {t!r} cannot be a consume-queue directory: {unsafe_topic(t)}")
    if in_place:
        from rmqstore_cli.store.lock import refuse_if_live

        for st in stores:
            refuse_if_live(st)  # before anything else is read or said
    zone = parse_tz(tz)
    outs = _outputs(stores, output) if output is not None else [None] * len(stores)
    cfgs = [load_config(st, broker_conf, commitlog_file_size, cq_file_size, index_slots, index_max) for st in stores]
    if output is not None:  # before anything is read or said: the stores are only read
        from rmqstore_cli.store.rebuild import check_output

        read = [d for c in cfgs for d in (c.root, *c.commitlog_dirs, c.consumequeue_dir, c.index_dir)]
        for out in dict.fromkeys([output, *outs]):
            check_output(out, read)
    plans = []
    for st, out, cfg in zip(stores, outs, cfgs):  # every store opened (and checked) before any work
        ms = MessageStore.open(cfg, zone)
        for note in ms.notes:
            print(f"rmqstore: note: {st}: {note}" if several else f"rmqstore: note: {note}", file=sys.stderr)
        if not cfg.message_index_enable and only is Only.index:
            raise UsageError("messageIndexEnable=false in the broker config: the broker builds no index"
                             + (f" ({st})" if several else ""))
        opts = RebuildOptions(build_cq=only is not Only.index,
                              build_index=(only is not Only.cq and not topic) and cfg.message_index_enable,
                              topics=list(topic) if topic else None, tz=zone, dry_run=dry_run)
        check_size_values(cfg)
        sizes = size_sources(cfg, opts, {"mapped_file_size_commit_log": commitlog_file_size,
                                         "mapped_file_size_consume_queue": cq_file_size,
                                         "max_hash_slot_num": index_slots, "max_index_num": index_max}, broker_conf)
        refuse_unsourced_sizes(sizes, cfg)
        plans.append((st, out, cfg, opts, sizes))

    def job(spark=None):
        build = None
        if spark is not None:
            from rmqstore_cli.pipeline import spark as sp

            build = lambda c, d, o, p: sp.rebuild_build(spark, c, d, o, p)  # noqa: E731
        done = []
        for st, out, cfg, opts, sizes in plans:
            with _Progress(progress and sys.stderr.isatty() and spark is None) as bar:
                if in_place:
                    rep, plan = rebuild_in_place(cfg, opts, no_backup, bar.update, build=build)
                else:
                    rep, plan = rebuild_to(cfg, out, opts, copy_commitlog, bar.update, build=build)
            done.append((st, out, rep, dict(plan, sizes=sizes), opts))
        return done

    if engine is Engine.spark:
        try:
            from rmqstore_cli.pipeline import spark as sp
        except ImportError:
            raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
        done = sp.run_job(job, spark_master, spark_conf, verbose)
    else:
        done = job()
    summaries = []
    for st, out, rep, plan, opts in done:
        s = _summary(st, rep, plan, opts)
        if several and out is not None:
            s["output"] = str(out)
        summaries.append(s)
    title = "rebuild-index (dry run)" if dry_run else "rebuild-index"
    if several:
        _emit_all(fmt, summaries, title)
    else:
        _emit(fmt, summaries[0], title)
    for st, out, rep, plan, opts in done:
        who = f"{st}: " if several else ""
        if rep is not None and rep.stop is not None and not rep.stop.clean:
            print(f"rmqstore: warning: {who}dispatch stopped at offset {rep.stop.offset} ({rep.stop.file}): "
                  f"{rep.stop.reason}", file=sys.stderr)
        if rep is not None and rep.refused_topics:
            from rmqstore_cli.render import safe_text

            print(f"rmqstore: warning: {who}records of {len(rep.refused_topics)} topic(s) got no consume queue, "
                  f"their names cannot be a directory: "
                  + ", ".join(safe_text(repr(t)) for t in sorted(rep.refused_topics)), file=sys.stderr)
        if rep is not None and rep.fallback_index_names:
            name, ts = rep.fallback_index_names[0]
            more = f" (and {len(rep.fallback_index_names) - 1} more)" if len(rep.fallback_index_names) > 1 else ""
            print(f"rmqstore: warning: {who}index file {name}: its first entry's storeTimestamp {ts} is no date "
                  f"(before 1970 or after 9999), so the file is named after the previous one (the first: "
                  f"1970-01-01 UTC){more}", file=sys.stderr)
        if rep is not None and rep.skipped:
            print(f"rmqstore: warning: {who}{len(rep.skipped)} stretch(es) of the commit log were skipped "
                  f"undispatched (see 'skipped')", file=sys.stderr)


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


def _emit_all(fmt: Fmt, summaries: list[dict], title: str) -> None:
    """Several stores: json one object {"stores": [...]}, jsonl one line per store, table one table each."""
    from rmqstore_cli.render import print_summary, to_json

    if fmt is Fmt.json:
        sys.stdout.write(to_json({"stores": summaries}) + "\n")
        return
    for s in summaries:
        print_summary(fmt.value, s, title)


def _summary(store: Path, rep, plan: dict, opts) -> dict:
    s: dict = {"store": str(store), "dry_run": opts.dry_run}
    s.update(plan)
    if rep is None:
        return s
    s.update({
        "messages": rep.messages,
        "commitlog_files": rep.files,
        "commitlog_bytes": rep.bytes,
        "consume_queues": rep.queues if opts.build_cq else None,
        "consume_queue_units": rep.units if opts.build_cq else None,
        "consume_queue_files": rep.cq_files if opts.build_cq else None,
        "index_files": rep.index_files if opts.build_index else None,
        "index_keys": rep.index_keys if opts.build_index else None,
        "seconds": round(rep.seconds, 3),
        "messages_per_second": round(rep.messages / rep.seconds) if rep.seconds > 0 else None,
        "recovery": rep.recovery,
        "recovery_first_file": rep.recovery_first_file,
        "dispatch_end": {"offset": rep.stop.offset, "file": rep.stop.file, "reason": rep.stop.reason,
                         "clean": rep.stop.clean} if rep.stop else None,
        "skipped": [{"offset": k.offset, "size": k.size, "file": k.file, "reason": k.reason} for k in rep.skipped],
        "refused_topics": [{"topic": t, "reason": why} for t, why in sorted(rep.refused_topics.items())],
        "index_names_fallback": [{"file": n, "store_timestamp": t} for n, t in rep.fallback_index_names],
    })
    return s


def _emit(fmt: Fmt, summary: dict, title: str) -> None:
    from rmqstore_cli.render import print_summary

    print_summary(fmt.value, summary, title)


class _Progress:
    """files, messages and MB/s on stderr, only on a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.p = None
        self.task = None

    def __enter__(self):
        if self.enabled:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            from rmqstore_cli.render import err_console

            self.p = Progress(TextColumn("dispatching"), BarColumn(), TextColumn("{task.fields[info]}"),
                              TimeElapsedColumn(), console=err_console(), transient=True)
            self.p.__enter__()
            self.task = self.p.add_task("dispatch", total=1, info="")
            import time

            self.t0 = time.perf_counter()
        return self

    def update(self, files: int, done: int, total: int, messages: int) -> None:
        if self.p is None:
            return
        import time

        dt = max(time.perf_counter() - self.t0, 1e-6)
        self.p.update(self.task, total=max(total, 1), completed=done,
                      info=f"files {files}  messages {messages:,}  {done / dt / 1e6:.0f} MB/s")

    def __exit__(self, *exc):
        if self.p is not None:
            self.p.__exit__(*exc)
        return False
