"""The local engine: the pipeline's tasks on this machine, one after another in this process
or on ``jobs`` forked worker processes (``workers.fork_map``): the same tasks the Spark engine
runs on executors, with the same results in the same order (verify's engine on it:
:class:`~rmqstore_cli.pipeline.verify_tasks.Forked`; rebuild-index's: :func:`rebuild_build`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqstore_cli.pipeline.stores import FileTask
from rmqstore_cli.pipeline.workers import PARTS_PER_JOB, fork_map, jobs_for, stored_bytes


def export(
    tasks: list[FileTask],
    output: Path,
    progress: Callable[[int], None] | None = None,
    compression: str | None = None,
    jobs: int = 1,
) -> dict:
    """Write the Parquet dataset (hive partitions store=…/topic_dir=…), streaming the
    RecordBatches of :func:`~rmqstore_cli.pipeline.export_tasks.export_batches`, file by
    file, through :func:`~rmqstore_cli.pipeline.parquet_out.write_batches`; a partition
    directory that already exists (``--overwrite``) is emptied first. ``compression``: one of
    ``parquet_out.CODECS``, the first when None. ``jobs`` > 1 (0: ``export_jobs.default_jobs``):
    the tasks on that many forked processes (:mod:`~rmqstore_cli.pipeline.export_jobs`), the
    same rows in other files. ``progress`` hears the commit-log bytes of each task done.
    (The export modules load here, not with this module: rebuild-index's engine needs none
    of them.)"""
    from rmqstore_cli.pipeline import export_jobs
    from rmqstore_cli.pipeline.export_tasks import export_batches
    from rmqstore_cli.pipeline.parquet_out import CODECS, write_batches

    jobs = jobs or export_jobs.default_jobs(tasks)
    if jobs > 1 and tasks:
        return export_jobs.export(tasks, output, jobs, compression or CODECS[0], progress)
    stops: list[dict] = []

    def batches():
        for t in tasks:
            yield from export_batches(t, stops, by_partition=True)
            if progress:
                progress(t.file_size)

    rows = write_batches(batches(), str(output), compression=compression or CODECS[0], clear=True)
    return {"rows": rows, "unreadable": stops}


def write_parquet(task: FileTask, output: str, tag: int, stops: list, compression: str | None = None) -> int:
    """One commit-log file's rows as Parquet files of the dataset (``part-<tag>-<i>.parquet``
    under its store=…/topic_dir=… partitions); returns the rows. What one Spark task of
    export does when the output is a local (or mounted) directory."""
    from rmqstore_cli.pipeline.export_tasks import export_batches
    from rmqstore_cli.pipeline.parquet_out import CODECS, write_batches

    return write_batches(
        export_batches(task, stops, by_partition=True),
        output,
        basename=f"part-{tag:05d}-{{i}}.parquet",
        compression=compression or CODECS[0],
    )


def rebuild_build(config, dest: Path, opts, progress=None, jobs: int = 1):
    """rebuild-index's engine on this machine: the tasks the Spark engine runs (per
    commit-log file, then per index file, per queue to rebuild and per file with units left
    to write; see rebuild_tasks.py ``rebuild_staged``), one after another in this process
    (``jobs`` 1) or on ``jobs`` forked processes (0: verify's rule, ``workers.jobs_for``:
    one for commit logs of less than 64 MiB on disk, else every core this process may use);
    the same files and report whatever ``jobs`` (on several, a commit-log file larger than
    its share is dispatched in parts; on any, one larger than ``rebuild_parts.MAX_PART_BYTES``).
    ``progress`` (``rebuild.Progress``) hears each commit-log file as its dispatch ends.
    A small log on two processes costs more than one: a 20 000-queue store of 40 000 sends
    (12 MB) took 3.7 s of CPU on two against 2.6 s on one, each queue's files opened by both
    workers (the parts of its one file) and ~0.1 s to fork and join."""
    import os
    import time

    from rmqstore_cli.pipeline import rebuild_tasks as T
    from rmqstore_cli.store.layout.config import data_file_paths

    n = jobs or jobs_for(stored_bytes(os.stat(p) for p in data_file_paths(config.commitlog_dirs)))
    return T.rebuild_staged(
        config,
        dest,
        opts,
        lambda fn, items, each=None: fork_map(fn, items, n, each),
        time.perf_counter(),
        progress,
        n * PARTS_PER_JOB if n > 1 else 1,
    )
