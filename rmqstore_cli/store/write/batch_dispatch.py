"""The BatchCQ half of a dispatcher (``BatchConsumeQueue#putMessagePositionInfoWrapper``):
each record of a BatchCQ topic (``queue.type=BatchCQ``) becomes one unit of its queue,
written through ``queues.batch_queue.BatchConsumeQueueWriter`` (:class:`BatchDispatch`: a
rebuild, a generated store) or recorded (:class:`BatchCapture`: a rebuild's per-file task),
the unit's fields taken by the same rule (``queues.batch_queue.batch_position``) either way.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rmqstore_cli.store.queues.batch_queue import (
    BatchConsumeQueueWriter,
    batch_file_size,
    batch_position,
    batch_topics,
)


class BatchSink:
    """What a dispatcher's BatchCQ half does with each record
    (``BatchConsumeQueue#putMessagePositionInfoWrapper``): its msgBaseOffset and batchSize
    from INNER_BASE/INNER_NUM (``CommitLog#setBatchSizeIfNeeded``), else its queue offset and
    1; a negative one is not written (``#putMessagePositionInfoWrapper`` logs and returns).
    Each unit kept goes to :meth:`unit`: written (:class:`BatchDispatch`) or recorded
    (:class:`BatchCapture`)."""

    #: The BatchCQ topics (``queue.type=BatchCQ``): the dispatcher puts only theirs here.
    topics: set[str]

    def put(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        size: int,
        tags_code: int,
        store_time: int,
        props: bytes,
        queue_offset: int,
    ) -> None:
        pos = batch_position(props, queue_offset)
        if pos is not None:
            self.unit((topic, queue_id), (offset, size, tags_code, store_time, *pos))

    def unit(self, queue: tuple[str, int], row: tuple[int, ...]) -> None:
        """One unit of ``queue`` (topic, queue id): (commit-log offset, size, tagsCode, store
        time, msgBaseOffset, batchSize)."""
        raise NotImplementedError


class BatchDispatch(BatchSink):
    """``BatchConsumeQueue#putMessagePositionInfoWrapper`` for every BatchCQ queue of a
    rebuild or a generated store: one writer per queue under ``root`` (a
    ``batchconsumequeue/``), flushed at the end."""

    def __init__(self, root: Path, topics: set[str], file_size: int, roots: list[Path]):
        self.root = root
        self.topics = topics
        self.file_size = file_size
        self.roots = roots
        self.writers: dict[tuple[str, int], BatchConsumeQueueWriter] = {}
        self.units = 0

    def unit(self, queue: tuple[str, int], row: tuple[int, ...]) -> None:
        w = self.writers.get(queue)
        if w is None:
            topic, queue_id = queue
            w = self.writers[queue] = BatchConsumeQueueWriter(
                self.root / topic / str(queue_id), self.file_size, self.roots
            )
            w.resume()
        w.put(*row)
        self.units += 1

    def flush(self) -> None:
        for w in self.writers.values():
            w.flush()


class BatchCapture(BatchSink):
    """The dispatcher's BatchCQ half recording each unit it would put instead of writing it
    (a rebuild's per-file task, ``pipeline.rebuild_dispatch.dispatch_file``): the units
    depend on the record alone (msgBaseOffset from INNER_BASE or the queue offset), so a
    file's task can capture them on its own and the only rule across files, the writer's
    skip of offsets at or below its last one, is left to the per-queue task
    (``build_batch_queue``)."""

    def __init__(self, topics: set[str]):
        self.topics = topics
        self.rows: dict[tuple[str, int], list[tuple[int, ...]]] = {}

    def unit(self, queue: tuple[str, int], row: tuple[int, ...]) -> None:
        self.rows.setdefault(queue, []).append(row)

    def arrays(self) -> dict[tuple[str, int], np.ndarray]:
        """Each queue's units as a (6, n) int64 array, a row per field of :meth:`unit`'s row."""
        return {k: np.array(v, dtype=np.int64).T.copy() for k, v in self.rows.items()}


def batch_dispatch(config, cq_root: Path, roots: list[Path] | None) -> BatchDispatch | None:
    """The BatchCQ half of a dispatcher writing ``cq_root`` (its ``batchconsumequeue/``
    sibling), or None when the store has no BatchCQ topic."""
    from rmqstore_cli.store.queues.consume_queue import unsafe_topic

    topics = {t for t in batch_topics(config.root) if unsafe_topic(t) is None}
    if not topics:
        return None
    root = cq_root.parent / "batchconsumequeue"
    return BatchDispatch(root, topics, batch_file_size(config, config.root), roots or [cq_root.parent])
