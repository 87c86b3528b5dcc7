"""``rmqstore export``: commit logs to a Parquet dataset, on the local engine or on Spark."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated

import typer
from rmqstore_cli.commands import filter_options as fo, grammar, options as opt
from rmqstore_cli.commands.common import command, pick_stores, work_done
from rmqstore_cli.commands.grammar import option_of
from rmqstore_cli.commands.lines import say, warn

# one example a line (tests/docs/test_docs.py parses each line as a command)
EPILOG = "\n\n".join(
    [
        "Examples:",
        "  rmqstore export --store ~/store --output /data/rmq-parquet",
        "  rmqstore export --store /snap/a/store --store-name broker-a -o out -t OrderTopic --begin -2h",
        "  rmqstore export --store-glob '/snapshots/broker-*/store' --output /data/fleet --engine spark --body",
        "  rmqstore export --store a/store --store b/store --output out --engine spark --spark-master 'local[2]'",
        "  rmqstore export --store /mnt/store --output hdfs:///rmq/out --engine spark --spark-master yarn"
        " --spark-conf spark.executor.memory=4g\n",
    ]
)


#: The Parquet codecs of ``--compression``: :data:`~rmqstore_cli.pipeline.parquet_out.CODECS`
#: (named here too, so that --help imports no pyarrow).
Codec = Enum("Codec", {c: c for c in ("snappy", "zstd", "lz4", "gzip", "none")}, type=str)


def register(app: typer.Typer) -> None:
    app.command("export", epilog=EPILOG)(export)


@command(mutating=True)
def export(
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            metavar="<path|uri>",
            help=(
                "Directory of the Parquet dataset, or (with --engine spark) a Hadoop file system URI: "
                "hdfs://…, s3a://bucket/…, gs://, abfs://, oss://, viewfs://, …"
            ),
        ),
    ],
    store: opt.StoresOpt = None,
    store_glob: opt.StoreGlobOpt = None,
    store_name: opt.StoreNameOpt = None,
    topic: fo.TopicFilterOpt = None,
    queue_id: fo.QueueIdFilterOpt = None,
    key: fo.KeyFilterOpt = None,
    uniq_key: fo.UniqKeyFilterOpt = None,
    tag: fo.TagFilterOpt = None,
    begin: fo.BeginFilterOpt = None,
    end: fo.EndFilterOpt = None,
    now: grammar.NowOpt = None,
    tz: opt.TzOpt = None,
    from_offset: fo.FromOffsetOpt = None,
    to_offset: fo.ToOffsetOpt = None,
    engine: opt.EngineOpt = opt.Engine.local,
    jobs: opt.ExportJobsOpt = 0,
    body: Annotated[bool, typer.Option("--body/--no-body", help="Include message bodies (stored bytes).")] = False,
    compression: Annotated[
        Codec,
        typer.Option(
            help="Parquet codec: snappy (fastest), zstd (~40% smaller files, ~10% more CPU), lz4, gzip, none."
        ),
    ] = Codec.snappy,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing, non-empty output directory.")] = False,
    spark_master: opt.SparkMasterOpt = None,
    spark_conf: opt.SparkConfOpt = None,
    verbose: opt.SparkVerboseOpt = False,
    broker_conf: opt.BrokerConfOpt = None,
    commitlog_file_size: opt.CommitlogSizeOpt = None,
    cq_file_size: opt.CqSizeOpt = None,
    index_slots: opt.IndexSlotsOpt = None,
    index_max: opt.IndexMaxOpt = None,
    fmt: opt.FormatOpt = opt.Fmt.table,
    quiet: opt.QuietOpt = False,
) -> None:
    """Export commit-log messages as a Parquet dataset for Spark SQL forensics across a fleet.

    Columns are dump-commitlog's JSON field names (body as binary with --body; times as UTC
    timestamps in ms), plus store (--store-name); partitioned by store and topic_dir (hive
    style: store=…/topic_dir=…). topic keeps the exact value; topic_dir is the topic, or ~
    and a hash for one that cannot be a directory name (a NUL, over 200 bytes, not UTF-8).
    The filters are dump-commitlog's: the same options export the rows of its JSON Lines.
    --compression picks the codec (snappy: the least CPU; zstd: ~40% fewer bytes).
    Needs pyarrow: pip install 'rmqstore[export]' (PySpark only for --engine spark).
    Both engines run the same engine code, one task per commit-log file, and write the
    same rows; to a Hadoop file system URI (hdfs:, s3a:, gs:, …) Spark's own writer does.
    --jobs: the local engine's tasks on N processes, the same rows in other files.
    Unreadable ranges are listed in the summary, as dump-commitlog warns. A dataset that
    cannot be written is exit 5; one written whose summary then cannot be is exit 6.
    """

    from rmqstore_cli.errors import RmqstoreError
    from rmqstore_cli.pipeline import export_run
    from rmqstore_cli.pipeline.stores import file_tasks
    from rmqstore_cli.render import ProgressBar, print_summary
    from rmqstore_cli.times import now_ms, parse_tz

    export_run.require_parquet()  # a plain `pip install .` has no pyarrow: say which extra brings it, before any work
    flt = fo.message_filter(topic, queue_id, key, uniq_key, tag, (begin, end, now), parse_tz(tz))
    grammar.check_offsets(from_offset, to_offset)
    spark = (spark_master, spark_conf, verbose) if engine is opt.Engine.spark else None
    output = export_run.check_output(output, spark is not None, overwrite)
    sizes = dict(
        mapped_file_size_commit_log=commitlog_file_size,
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )
    stores = export_run.store_names(pick_stores(store, store_glob, broker_conf, sizes, quiet=quiet), store_name)
    tasks = file_tasks(stores, body, flt, from_offset, to_offset)
    t0 = now_ms()
    if spark is not None:
        result = export_run.run_spark(tasks, output, compression.value, overwrite, spark)
    else:
        export_run.start_local(output)
        try:
            with ProgressBar("exporting", total=sum(t.file_size for t in tasks), enabled=not quiet) as bar:
                result = export_run.write_local(tasks, output, compression.value, bar.advance, jobs)
        except RmqstoreError as e:  # the output's fault (exit 5), or raised while pyarrow's threads pulled the batches
            _die_after_pyarrow(e)
    work_done(f"the dataset in {output} is complete")
    for s in [] if quiet else result["unreadable"]:
        warn(f"{s['store']}: {s['detail']} at offset {s['offset']} ({s['file']}); the rest of that file was skipped")
    seconds = (now_ms() - t0) / 1000
    print_summary(fmt.value, export_run.summary(output, engine.value, len(stores), tasks, result, seconds), "exported")


def _die_after_pyarrow(error) -> None:
    """The error's one line and its exit code, at once. When ``write_dataset`` fails part-way
    (its own write error, or ours raised in the batches it pulls), its threads still hold
    the batch generator, and a normal interpreter exit then aborts in ``PyGILState_Release``
    (SIGABRT, a page of 'Fatal Python error'): so no clean-up runs."""
    from rmqstore_cli import stdio

    say("error", error.describe(option_of))
    stdio.finish()
    sys.stderr.flush()
    os._exit(error.exit_code)
