"""The local engine: the pipeline's tasks on this machine, one after another in this process
or on ``jobs`` forked worker processes (:func:`fork_map`): the same tasks the Spark engine
runs on executors, with the same results in the same order (verify's engine on it:
:class:`~rmqstore_cli.pipeline.verify_tasks.Forked`; rebuild-index's: :func:`rebuild_build`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

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


def rebuild_build(config, dest: Path, opts, progress=None, jobs: int = 1):
    """rebuild-index's engine on this machine: the tasks the Spark engine runs (per
    commit-log file, then per index file, per queue to rebuild and per file with units left
    to write; see rebuild_tasks.py ``rebuild_staged``), one after another in this process
    (``jobs`` 1) or on ``jobs`` forked processes (0: every core this process may use); the
    same files and report whatever ``jobs`` (on several, a commit-log file larger than its
    share is dispatched in parts). ``progress`` (``rebuild.Progress``) hears each
    commit-log file as its dispatch ends."""
    import time

    from rmqstore_cli.pipeline import rebuild_tasks as T

    n = jobs or default_jobs()
    return T.rebuild_staged(
        config,
        dest,
        opts,
        lambda fn, items, each=None: fork_map(fn, items, n, each),
        time.perf_counter(),
        progress,
        n * PARTS_PER_JOB if n > 1 else 1,
    )


#: rebuild-index's step 1 on ``jobs`` > 1 processes: the commit log cut into about this many
#: parts a process (a file larger than its share in parts: ``rebuild_parts.py``).
PARTS_PER_JOB = 2


def default_jobs() -> int:
    """Every core this process may run on (``sched_getaffinity``: a container's or taskset's
    share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


#: The task and items of the :func:`fork_map` under way: forked workers inherit them, so
#: neither is pickled (closures and plans included); only the results travel back.
_FORKED: list[Any] = [None, ()]


def _forked_task(i: int):
    fn, items = _FORKED
    return fn(items[i])


def fork_map(
    fn: Callable[[Any], Any], items: Sequence[Any], jobs: int, each: Callable[[Any], None] | None = None
) -> list:
    """``[fn(x) for x in items]``, on up to ``jobs`` forked processes when there is more than
    one item and more than one job; results in item order, each handed to ``each`` (a
    progress bar) as it comes back. The workers are forked at this call, so they see
    everything the caller built before it (the verify engine's join context, rebuild's plan)
    without it being pickled."""
    items = list(items)
    if jobs <= 1 or len(items) <= 1 or "fork" not in _start_methods():
        return _collect((fn(x) for x in items), each)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    workers = min(jobs, len(items))
    _FORKED[:] = [fn, items]
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
            got = ex.map(_forked_task, range(len(items)), chunksize=max(1, len(items) // (4 * workers)))
            return _collect(got, each)
    finally:
        _FORKED[:] = [None, ()]


def _collect(results: Iterable[Any], each: Callable[[Any], None] | None) -> list:
    out = []
    for r in results:
        out.append(r)
        if each is not None:
            each(r)
    return out


def _start_methods() -> list[str]:
    import multiprocessing

    return multiprocessing.get_all_start_methods()
