"""The consume queues as the broker's start-up leaves them (``ConsumeQueue#recover``): the
inputs of the start-up prediction (store/checks/startup.py) that are read from the queue files.

A reader that opened the queues already (verify) hands over what it found
(:func:`recovered_end` of each queue, by directory), so the files are not opened twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.mapped_files import queue_dir_paths
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue


@dataclass(slots=True)
class QueueEnd:
    """A consume queue as ``ConsumeQueue#recover`` leaves it (the inputs of
    ``startup.empty_last_file_throws``)."""

    topic: str
    queue_id: int
    last_file_from: int  # the file offset of the queue's last file after recover's truncateDirtyFiles
    recovered_end: int  # recover's processOffset: the logical end of the valid units
    redispatched: bool = False  # recovery dispatches a message of this queue at or after recovered_end


@dataclass(frozen=True, slots=True)
class KnownEnd:
    """:func:`recovered_end` of one queue directory, read with ``file_size``."""

    end: QueueEnd
    max_phy: int
    file_size: int

    def copy(self) -> QueueEnd:
        """Its :class:`QueueEnd` anew (the prediction marks the ones it reads)."""
        e = self.end
        return QueueEnd(e.topic, e.queue_id, e.last_file_from, e.recovered_end, e.redispatched)


class KnownEnds(dict):
    """:func:`recovered_end` of queue directories by path (:class:`KnownEnd`), and, when
    the reader listed the whole consume-queue directory, that listing as
    :func:`~rmqstore_cli.store.files.mapped_files.queue_dir_paths` gives it (:attr:`dirs`):
    :func:`queue_ends` then lists no directory again (20 000 topic directories)."""

    dirs: list[tuple[str, int, str]] | None = None


def recovered_end(cq: ConsumeQueue) -> tuple[QueueEnd, int]:
    """``cq`` as ``ConsumeQueue#recover`` leaves it, and the end (offset + size) of its last
    valid unit (``ConsumeQueue#getMaxPhysicOffset``; -1 when it has none, or when that unit
    lies beyond its file: a file of another size than the one given, which verify names)."""
    end = cq.max_offset
    last = cq.unit_values(end - 1) if end > cq.min_file_offset else None
    kept = end % cq.units_per_file == 0 and cq.file_path(end) is not None
    last_from = end * CQ_STORE_UNIT_SIZE if kept else -1
    phy = -1 if last is None else last[0] + last[1]
    return QueueEnd(cq.topic, cq.queue_id, last_from, end * CQ_STORE_UNIT_SIZE), phy


def queue_ends(config, known: dict[str, KnownEnd] | None = None) -> tuple[list[QueueEnd], int]:
    """Every consume queue as ``ConsumeQueue#recover`` leaves it, and maxPhyOffsetOfConsumeQueue
    (``ConsumeQueueStore#getMaxPhyOffsetInConsumeQueue``: the largest end, offset + size, of a
    queue's last valid unit; -1 when none). A queue that cannot be opened is skipped (verify
    reports it). ``known``: :func:`recovered_end` of queue directories (by path) read already
    with the configured file size; the others are opened here (a :class:`KnownEnds`
    with its listing: the directories it lists, none listed here)."""
    size = config.mapped_file_size_consume_queue
    ends, max_phy = [], -1
    listed = getattr(known, "dirs", None)
    for topic, qid, d in queue_dir_paths(config.consumequeue_dir) if listed is None else listed:
        k = (known or {}).get(d)
        got = (k.copy(), k.max_phy) if k is not None and k.file_size == size else _read_end(config, topic, qid, Path(d))
        if got is not None:
            ends.append(got[0])
            max_phy = max(max_phy, got[1])
    return ends, max_phy


def _read_end(config, topic: str, qid: int, d: Path) -> tuple[QueueEnd, int] | None:
    """:func:`recovered_end` of one queue directory, None when it cannot be read."""
    try:
        cq = ConsumeQueue(config.consumequeue_dir, topic, qid, config.mapped_file_size_consume_queue, directory=d)
    except StoreError:
        return None
    try:
        return recovered_end(cq)
    except StoreError:
        return None
    finally:
        cq.close()


def known_end(cq: ConsumeQueue, file_size: int) -> KnownEnd:
    """:func:`recovered_end` of an open queue read with ``file_size``, to hand to :func:`queue_ends`."""
    end, phy = recovered_end(cq)
    return KnownEnd(end, phy, file_size)
