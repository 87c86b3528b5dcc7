"""The local engine: the pipeline's tasks run one after another in this process."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqstore_cli.pipeline.schema import PARTITION_COLUMNS, arrow_schema
from rmqstore_cli.pipeline.tasks import FileTask, export_batches


def export(tasks: list[FileTask], output: Path, progress: Callable[[FileTask], None] | None = None) -> dict:
    """Write the Parquet dataset (hive partitions store=…/topic=…) with pyarrow, streaming the
    RecordBatches of :func:`~rmqstore_cli.pipeline.tasks.export_batches`, file by file."""
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


def rebuild_build(config, dest: Path, opts, progress=None):
    """``rebuild.build_set`` through the pipeline's decomposition, in this process (what
    the Spark engine runs, one step at a time: per commit-log file, per queue, per index file)."""
    import time

    from rmqstore_cli.pipeline import tasks as T

    t0 = time.perf_counter()
    names, rec, gaps = T.rebuild_inputs(config)
    dispatched: dict[int, T.FileDispatch] = {}
    for i in range(len(names)):
        dispatched[i] = T.dispatch_file(config, i, i >= rec, opts.build_cq, opts.build_index, opts.topics)
        if dispatched[i].summary.stop is not None or (i + 1) in gaps:
            break  # nothing after this file is dispatched
    summaries = {i: d.summary for i, d in dispatched.items()}
    included, stop = T.plan_dispatch(names, gaps, list(summaries.values()))
    floors, counts, start, total = T.plan_keys(
        included, summaries, lambda need: {i: len(T.kept_keys(dispatched[i], f)[0]) for i, f in need.items()})
    built: list[dict] = []
    queues = cq_files = 0
    if opts.dry_run:
        queues, cq_files = T.dry_counts(config, included, summaries)
        per = max(1, config.max_index_num - 1)
        built = [{"k": k, "full": False, "end_ts": 0} for k in range(-(-total // per))] if opts.build_index else []
    else:
        if opts.build_cq:
            by_queue: dict = {}
            for i in included:
                for key, part in T.queue_chunks(dispatched[i]):
                    by_queue.setdefault(key, []).append(part)
            for key, parts in by_queue.items():
                cq_files += T.build_queue(str(dest / "consumequeue"), key, parts, config.cq_file_size)
            queues = len(by_queue)
        if opts.build_index and total:
            per = config.max_index_num - 1
            by_file: dict = {}
            for i in included:
                for k, chunk in T.index_chunks(dispatched[i], floors[i], start[i], per):
                    by_file.setdefault(k, []).append(chunk)
            built = [T.build_index_file(str(dest / "index"), k, ch, config.max_hash_slot_num, config.max_index_num)
                     for k, ch in sorted(by_file.items()) if k * per < total]
            T.name_index_files(dest / "index", built, opts.tz)
    return T.rebuild_report(config, opts, names, rec, included, stop, summaries, cq_files, queues, built, total,
                            time.perf_counter() - t0)
