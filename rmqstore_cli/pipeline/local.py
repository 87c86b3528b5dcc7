"""The local engine: the pipeline's tasks run one after another in this process."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqstore_cli.pipeline.schema import PARTITION_COLUMNS, arrow_schema
from rmqstore_cli.pipeline.export_tasks import export_batches
from rmqstore_cli.pipeline.stores import FileTask


def export(tasks: list[FileTask], output: Path, progress: Callable[[FileTask], None] | None = None) -> dict:
    """Write the Parquet dataset (hive partitions store=…/topic_dir=…) with pyarrow, streaming the
    RecordBatches of :func:`~rmqstore_cli.pipeline.export_tasks.export_batches`, file by file."""
    import pyarrow.dataset as ds

    stops: list[dict] = []
    count = [0]

    def batches():
        for t in tasks:
            for b in export_batches(t, stops):
                count[0] += b.num_rows
                yield b
            if progress:
                progress(t)

    ds.write_dataset(batches(), output, schema=arrow_schema(), format="parquet", partitioning=PARTITION_COLUMNS,
                     partitioning_flavor="hive", existing_data_behavior="delete_matching",
                     basename_template="part-{i}.parquet", max_partitions=100_000)
    return {"rows": count[0], "unreadable": stops}


def write_parquet(task: FileTask, output: str, tag: int, stops: list) -> int:
    """One commit-log file's rows as Parquet files of the dataset (``part-<tag>-<i>.parquet``
    under its store=…/topic_dir=… partitions), written with pyarrow; returns the rows. What one
    Spark task of export does when the output is a local (or mounted) directory."""
    import pyarrow.dataset as ds

    count = [0]

    def batches():
        for b in export_batches(task, stops):
            count[0] += b.num_rows
            yield b

    ds.write_dataset(batches(), output, schema=arrow_schema(), format="parquet", partitioning=PARTITION_COLUMNS,
                     partitioning_flavor="hive", existing_data_behavior="overwrite_or_ignore",
                     basename_template=f"part-{tag:05d}-{{i}}.parquet", max_partitions=100_000)
    return count[0]


def rebuild_build(config, dest: Path, opts, progress=None):
    """``rebuild.build_set`` through the pipeline's decomposition, in this process (what
    the Spark engine runs, one task at a time: per commit-log file, then per index file,
    per queue to rebuild and per file with units left to write; see rebuild_tasks.py)."""
    import time

    from rmqstore_cli.pipeline import rebuild_tasks as T

    return T.rebuild_staged(config, dest, opts, lambda fn, items: [fn(x) for x in items], time.perf_counter())
