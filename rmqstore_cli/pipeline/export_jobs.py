"""``export --jobs N`` on the local engine: the export's tasks (one per commit-log file, a file
larger than a worker's share cut into parts at records) on forked worker processes
(``workers.fork_map``), each task writing its own Parquet files into the dataset under
basenames no other task uses (``part-<task>-<i>.parquet``, as a Spark task does), and the
driver joining the results in task order: the rows, the unreadable ranges, the files.

The dataset holds the same rows, schema and partitions whatever the jobs; its files are not
the same files as one process writes (each task writes its own, and a writer cuts row groups
by the bytes it holds). Each worker's writer holds its share of ``parquet_out.BUFFER_BYTES``,
so that all of them together hold what one process does."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rmqstore_cli.pipeline.stores import FileTask, StoreSpec
from rmqstore_cli.pipeline.workers import PARTS_PER_JOB, fork_map, jobs_for, stored_bytes


@dataclass(frozen=True)
class PartDone:
    """What one task wrote: its rows, unreadable ranges and files, and the commit-log bytes
    it covered (the progress bar's)."""

    rows: int
    stops: list[dict]
    files: list[str]
    size: int


@dataclass(frozen=True)
class Part:
    """One task: ``task`` (its ``start``/``stop`` those of the part), the number of its
    commit-log file among the export's tasks, and the bytes it covers."""

    task: FileTask
    file: int
    size: int


def default_jobs(tasks: list[FileTask]) -> int:
    """``--jobs 0``: one process when the tasks' commit-log files hold fewer than
    ``workers.ONE_PROCESS_BELOW`` bytes on disk (verify's rule), else every core."""
    files = _files(tasks)
    return jobs_for(stored_bytes(os.stat(files[_key(t)].path) for t in tasks))


def export(
    tasks: list[FileTask], output: Path, jobs: int, compression: str, progress: Callable[[int], None] | None = None
) -> dict:
    """The dataset written on ``jobs`` (> 1) processes: {"rows": …, "unreadable": […]}, the
    rows and ranges of one process. No task clears a directory: the driver then empties each
    partition directory written of the files this run did not write (``--overwrite``), as
    one process empties a partition before its first file (which partitions a run writes
    is known only once it has)."""
    from rmqstore_cli.pipeline.parquet_out import BUFFER_BYTES

    parts = split(tasks, jobs * PARTS_PER_JOB, jobs)
    target, buffer = str(output), max(1, BUFFER_BYTES // jobs)

    def run(k: int) -> PartDone:
        return write_part(parts[k].task, target, k, compression, buffer, parts[k].size)

    done = fork_map(run, range(len(parts)), jobs, (lambda d: progress(d.size)) if progress else None)
    kept = skipped_after_stops(parts, done)
    clear_stale([f for d in kept for f in d.files])
    return {"rows": sum(d.rows for d in kept), "unreadable": [s for d in kept for s in d.stops]}


def write_part(task: FileTask, output: str, tag: int, compression: str, buffer: int, size: int) -> PartDone:
    """One task's rows as Parquet files of the dataset (``part-<tag>-<i>.parquet``)."""
    from rmqstore_cli.pipeline.export_tasks import export_batches
    from rmqstore_cli.pipeline.parquet_out import PartitionedWriter, fill

    stops: list[dict] = []
    w = PartitionedWriter(output, f"part-{tag:05d}-{{i}}.parquet", compression, buffer=buffer)
    rows = fill(w, export_batches(task, stops, by_partition=True))
    return PartDone(rows, stops, w.files, size)


def skipped_after_stops(parts: list[Part], done: list[PartDone]) -> list[PartDone]:
    """The results one pass over each file keeps: where a part's scan stopped (an
    unreadable range: the rest of that file is skipped), the file's later parts are dropped,
    their files deleted (and a partition directory they alone made). (The cuts lie before
    the walk's first stop, but the scan's checks can reject a record the walk of sizes
    accepted.)"""
    kept, stopped = [], set()
    for p, d in zip(parts, done, strict=True):
        if p.file in stopped:
            for f in d.files:
                os.unlink(f)
                with contextlib.suppress(OSError):  # not empty: others' files
                    os.rmdir(os.path.dirname(f))
            continue
        kept.append(d)
        if d.stops:
            stopped.add(p.file)
    return kept


def clear_stale(written: list[str]) -> None:
    """Each partition directory written (``--overwrite`` on an existing dataset) emptied of
    what this run did not write: pyarrow's ``delete_matching``, the one-process result."""
    keep = set(written)
    for d in sorted({os.path.dirname(f) for f in written}):
        for e in os.scandir(d):
            if e.path not in keep:
                shutil.rmtree(e.path) if e.is_dir(follow_symlinks=False) else os.unlink(e.path)


def split(tasks: list[FileTask], want: int, jobs: int) -> list[Part]:
    """The tasks, each of a plain commit-log file larger than the files' bytes on disk over
    ``want`` (at least ``rebuild_parts.MIN_PART_BYTES``) cut at records as rebuild-index cuts
    them (``rebuild_parts.record_cuts``, one cut task a file on ``jobs`` processes): the rows
    of each part, in order, are the file's."""
    from rmqstore_cli.pipeline.rebuild_parts import MIN_PART_BYTES

    files = _files(tasks)
    sizes = [stored_bytes([os.stat(files[t.store, t.file_name].path)]) for t in tasks]
    share = max(MIN_PART_BYTES, -(-sum(sizes) // max(1, want)))
    todo = [(k, -(-n // share)) for k, n in enumerate(sizes) if n > share and files[_key(tasks[k])].plain]
    got = fork_map(lambda x: _cuts(tasks[x[0]], files[_key(tasks[x[0]])].index, x[1]), todo, jobs)
    cuts = dict(zip([k for k, _ in todo], got, strict=True))
    return [p for k, t in enumerate(tasks) for p in _parts(t, k, cuts.get(k, []))]


def _parts(task: FileTask, k: int, cuts: list[int]) -> list[Part]:
    """``task`` as parts starting at ``cuts`` (physical offsets of records inside its bounds)."""
    from rmqstore_cli.pipeline.export_tasks import bounds

    lo, hi = bounds(task)
    inside = [c for c in cuts if lo < c < hi]
    starts, stops = [task.start, *inside], [*inside, task.stop]
    edges = [task.file_from_offset, *inside, task.file_from_offset + task.file_size]
    return [
        Part(replace(task, start=a, stop=b), k, edges[j + 1] - edges[j])
        for j, (a, b) in enumerate(zip(starts, stops, strict=True))
    ]


def _cuts(task: FileTask, i: int, n: int) -> list[int]:
    """Physical offsets of the records where ``task``'s file (number ``i`` of its log) is
    cut into about ``n`` parts."""
    from rmqstore_cli.pipeline.rebuild_parts import record_cuts

    return [task.file_from_offset + c for c in record_cuts(_config(task.store), i, n)]


@dataclass(frozen=True)
class LogFile:
    """A task's commit-log file: its path, number in the log, and whether it is plain (a
    DLedger data file is exported whole)."""

    path: str
    index: int
    plain: bool


def _key(task: FileTask) -> tuple[StoreSpec, str]:
    return task.store, task.file_name


def _config(spec: StoreSpec):
    from rmqstore_cli.store.layout.config import StoreConfig

    return StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes))


def _files(tasks: list[FileTask]) -> dict[tuple[StoreSpec, str], LogFile]:
    """(store, file name) -> each commit-log file of the tasks' stores."""
    from rmqstore_cli.store.commitlog import CommitLog

    out: dict[tuple[StoreSpec, str], LogFile] = {}
    for spec in dict.fromkeys(t.store for t in tasks):
        cl = CommitLog(_config(spec))
        try:
            out.update(((spec, f.name), LogFile(str(f.path), i, not cl.header_of(f))) for i, f in enumerate(cl.files))
        finally:
            cl.close()
    return out
