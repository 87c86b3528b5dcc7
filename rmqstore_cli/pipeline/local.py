"""The local engine: the pipeline's tasks run one after another in this process."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rmqstore_cli.pipeline.schema import COLUMN_NAMES, PARTITION_COLUMNS, arrow_schema
from rmqstore_cli.pipeline.tasks import FileTask, export_rows

BATCH_ROWS = 8192


def export(tasks: list[FileTask], output: Path, body: bool, progress: Callable[[FileTask], None] | None = None
           ) -> dict:
    """Write the Parquet dataset (hive partitions store=…/topic=…) with pyarrow, streaming."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    schema = arrow_schema()
    stops: list[dict] = []
    count = [0]

    def batches():
        for t in tasks:
            rows: list[tuple] = []
            for row in export_rows(t, body, stops):
                rows.append(row)
                if len(rows) >= BATCH_ROWS:
                    yield _batch(pa, schema, rows)
                    count[0] += len(rows)
                    rows = []
            if rows:
                yield _batch(pa, schema, rows)
                count[0] += len(rows)
            if progress:
                progress(t)

    ds.write_dataset(batches(), output, schema=schema, format="parquet", partitioning=PARTITION_COLUMNS,
                     partitioning_flavor="hive", existing_data_behavior="delete_matching",
                     basename_template="part-{i}.parquet", max_partitions=100_000)
    return {"rows": count[0], "unreadable": stops}


_PROPS = COLUMN_NAMES.index("properties")


def _batch(pa, schema, rows: list[tuple]):
    cols = list(zip(*rows))
    cols[_PROPS] = [list(d.items()) for d in cols[_PROPS]]  # arrow builds maps from pairs
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, schema)], schema=schema)
