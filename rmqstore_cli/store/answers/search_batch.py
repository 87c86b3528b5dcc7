"""``search-offset`` over a BatchCQ queue (store/queues/batch_queue.py): the search by time of
:mod:`~rmqstore_cli.store.answers.search`, where offsets count the messages of inner batches."""

from __future__ import annotations

from rmqstore_cli.store.answers.search import SearchResult, TimeReader


def batch_search(bq, reader: TimeReader, when: int, method: str, boundary: str = "lower") -> SearchResult:
    """One BatchCQ queue: offsets are queue offsets of messages (``msgBaseOffset``, an inner
    batch of ``batchSize`` messages per unit), min and max ``#reviseMinOffsetInQueue`` /
    ``#reviseMaxOffsetInQueue``. ``method`` ``first``/``scan``: the base offset of the first
    unit stored at or after ``when`` (max when none); ``broker-5``:
    ``BatchConsumeQueue#getOffsetInQueueByTime`` clamped to [min, max] as
    ``ConsumeQueueStore#getOffsetInQueueByTime`` does."""
    from rmqstore_cli.store.queues.batch_queue import first_at_or_after as first_unit, offset_by_time

    lo, hi = bq.min_offset, bq.max_offset
    name = f"broker-5-{boundary}" if method == "broker-5" else method
    res = SearchResult(bq.topic, bq.queue_id, when, name, hi, None, lo, hi, ["BatchCQ queue (batchconsumequeue/)"])
    if method == "broker-5":
        raw = offset_by_time(bq, when, upper=boundary == "upper")
        res.offset = min(max(raw, lo), hi)
        if res.offset != raw:
            res.notes.append(f"the search gave {raw}, clamped to [{lo}, {hi}]")
    else:
        u = first_unit(bq, when)
        if u is not None:
            res.offset = u.msg_base_offset
    if lo <= res.offset < hi:
        u = bq.find(res.offset)
        if u is not None:
            res.store_timestamp = reader.checked(u.commitlog_offset, u.size)[0]
    return res
