"""Where in each queue of a topic is time T: the queues picked and each one searched the way
asked (``store/answers/search.py``), for ``search-offset`` and ``Store.search_offset``.

The broker answers the same question in ``DefaultMessageStore#getOffsetInQueueByTime``;
which of search.py's ways answers depends on the kind of queue (file, RocksDB, BatchCQ)
and on the broker version asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rmqstore_cli.errors import UsageError, setting
from rmqstore_cli.store.answers import search, search_batch

#: The ways to answer: the first unit at or after T by bisection, or by reading every unit.
FIRST, SCAN = "first", "scan"
BOUNDARIES = ("lower", "upper")
VERSIONS = ("4.9", "5")


def check_request(version: str | None, boundary: str, scan: bool) -> None:
    """The combinations the searches know (neutral words: the command line checks its
    options first, in its own)."""
    if boundary not in BOUNDARIES:
        raise UsageError(f"boundary {boundary!r} is not lower or upper")
    if version is not None and version not in VERSIONS:
        raise UsageError(f"broker version {version!r} is not 4.9 or 5")
    if scan and version is not None:
        raise UsageError("a scan answers the first unit at or after the time, not the broker's answer")
    if version is None and boundary != "lower":
        raise UsageError("a boundary goes with a broker version's answer")
    if version == "4.9" and boundary != "lower":
        raise UsageError("the upper boundary is a 5.x broker's", hint="4.9.x has no BoundaryType")


def batch_queues(ms: Any, topic: str, queue_id: int | None) -> list[Any]:
    """The topic's BatchCQ queues (``batchconsumequeue/``), a 5.x broker's only."""
    from rmqstore_cli.store.queues.batch_queue import store_batch_queues

    return [q for q in store_batch_queues(ms.config, topic) if queue_id is None or q.queue_id == queue_id]


def pick_queues(ms: Any, topic: str, queue_id: int | None) -> tuple[list[Any], list[Any]]:
    """(consume queues, BatchCQ queues) of ``topic`` (one ``queue_id``, or all): the file or
    RocksDB queues when there are any, else the BatchCQ ones; both empty when the topic has
    no queue."""
    queues = [cq for cq in ms.consume_queues() if cq.topic == topic and (queue_id is None or cq.queue_id == queue_id)]
    return queues, [] if queues else batch_queues(ms, topic, queue_id)


def search_queues(
    ms: Any,
    queues: list[Any],
    batch: list[Any],
    when: int,
    version: str | None = None,
    boundary: str = "lower",
    scan: bool = False,
) -> Iterator[search.SearchResult]:
    """Each queue's answer, by queue id: ``version`` None answers the first unit at or after
    ``when`` (every unit read with ``scan``), "4.9" or "5" what that broker returns."""
    if batch and version == "4.9":
        raise UsageError(f"{batch[0].topic} is a BatchCQ topic (batchconsumequeue/): a 5.x broker's, not 4.9's")
    reader = search.TimeReader(ms.commitlog)
    for cq in sorted(queues + batch, key=lambda q: q.queue_id):
        if cq in batch:
            yield search_batch.batch_search(
                cq, reader, when, "broker-5" if version else SCAN if scan else FIRST, boundary
            )
        else:
            yield _search_queue(ms, cq, reader, when, version, boundary, scan)


def _search_queue(
    ms: Any, cq: Any, reader: search.TimeReader, when: int, version: str | None, boundary: str, scan: bool
) -> search.SearchResult:
    """One consume queue's answer: the broker's search of ``version`` (a RocksDB queue's in a
    RocksDB store), else the first unit at or after ``when`` (every unit read with ``scan``)."""
    if version is not None and ms.rocksdb_cq is not None:
        return search.broker_rocksdb(cq, reader, when, version, boundary)
    if version == "4.9":
        return search.broker_49(cq, reader, when)
    if version == "5":
        return search.broker_5(cq, reader, when, boundary)
    if scan:
        return search.scan_first_at_or_after(cq, reader, when)
    return search.first_at_or_after(cq, reader, when)


def store_version(ms: Any, given: str | None, boundary: str) -> str:
    """The broker version whose answer ``search-offset --broker`` gives: ``given``, else what
    the store shows (:func:`root_entries.detect_version`); a usage error when it cannot tell
    or when the boundary is not that version's."""
    from rmqstore_cli.store.layout import root_entries

    version = given or root_entries.detect_version(ms.config.root)
    if version is None:
        raise UsageError(
            f"{setting('broker')}: cannot tell the store's broker version",
            path=ms.config.root,
            hint=f"pass {setting('broker_version')} 4.9 or {setting('broker_version')} 5",
        )
    if version == "4.9" and boundary != "lower":
        raise UsageError(f"{setting('boundary')} is a 5.x broker's option", hint="4.9.x has no BoundaryType")
    return version


def command_queues(ms: Any, topic: str, queue_id: int | None, version: str | None) -> tuple[list[Any], list[Any]]:
    """:func:`pick_queues` for ``search-offset``: a BatchCQ topic refused with a 4.9 broker's
    answer, in the command's words."""
    queues, batch = pick_queues(ms, topic, queue_id)
    if batch and version == "4.9":
        raise UsageError(
            f"{topic} is a BatchCQ topic (batchconsumequeue/): a 5.x broker's",
            hint=f"pass {setting('broker_version')} 5",
        )
    return queues, batch


def check_options(scan: bool, broker: bool, version: str | None, boundary: str) -> None:
    """``search-offset``'s options that do not go together, in its words."""
    if scan and broker:
        raise UsageError(
            f"{setting('scan')} and {setting('broker')} do not go together",
            hint=f"{setting('broker')} answers as the broker does",
        )
    if not broker and (version is not None or boundary != "lower"):
        raise UsageError(f"{setting('broker_version')} and {setting('boundary')} go with {setting('broker')}")


def no_queue(ms: Any, topic: str, queue_id: int | None) -> Any:
    """The ``NotFound`` of a topic the store knows that has no such queue."""
    from rmqstore_cli.errors import NotFound

    return NotFound(
        f"no consume queue {topic}" + (f"/{queue_id}" if queue_id is not None else ""),
        path=ms.config.consumequeue_dir / topic,
        hint="rmqstore dump-cq --summary lists the queues",
    )
