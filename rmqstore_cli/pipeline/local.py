"""The local engine: the pipeline's tasks run one after another in this process."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqstore_cli.pipeline.export_tasks import export_batches
from rmqstore_cli.pipeline.parquet_out import CODECS, write_batches
from rmqstore_cli.pipeline.stores import FileTask


def export(
    tasks: list[FileTask],
    output: Path,
    progress: Callable[[FileTask], None] | None = None,
    compression: str = CODECS[0],
) -> dict:
    """Write the Parquet dataset (hive partitions store=…/topic_dir=…), streaming the
    RecordBatches of :func:`~rmqstore_cli.pipeline.export_tasks.export_batches`, file by
    file, through :func:`~rmqstore_cli.pipeline.parquet_out.write_batches`; a partition
    directory that already exists (``--overwrite``) is emptied first."""
    stops: list[dict] = []

    def batches():
        for t in tasks:
            yield from export_batches(t, stops, by_partition=True)
            if progress:
                progress(t)

    rows = write_batches(batches(), str(output), compression=compression, clear=True)
    return {"rows": rows, "unreadable": stops}


def write_parquet(task: FileTask, output: str, tag: int, stops: list, compression: str = CODECS[0]) -> int:
    """One commit-log file's rows as Parquet files of the dataset (``part-<tag>-<i>.parquet``
    under its store=…/topic_dir=… partitions); returns the rows. What one Spark task of
    export does when the output is a local (or mounted) directory."""
    return write_batches(
        export_batches(task, stops, by_partition=True),
        output,
        basename=f"part-{tag:05d}-{{i}}.parquet",
        compression=compression,
    )


def rebuild_build(config, dest: Path, opts, progress=None):
    """``rebuild.build_set`` through the pipeline's decomposition, in this process (what
    the Spark engine runs, one task at a time: per commit-log file, then per index file,
    per queue to rebuild and per file with units left to write; see rebuild_tasks.py)."""
    import time

    from rmqstore_cli.pipeline import rebuild_tasks as T

    return T.rebuild_staged(config, dest, opts, lambda fn, items: [fn(x) for x in items], time.perf_counter())
