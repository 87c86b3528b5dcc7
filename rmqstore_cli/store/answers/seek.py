"""Where a commit-log walk for "stored at or after T" may start: ``dump-commitlog --begin``.

The walk prints, in commit-log order, every record whose store timestamp is at or after T.
Starting it later than the log's first file must not change one line of that output, so the
start is a commit-log *file* whose predecessors hold no record stored at or after T:

1. Per consume queue, :func:`search.first_at_or_after` (the bisection ``search-offset``
   runs) gives the first unit stored at or after T. Its record, and the unit before it
   (the queue's last one older than T), are read and checked; a queue whose probes saw
   time go backwards, or whose neighbours do not bracket T, or whose units cannot be read
   (consume queues behind, ahead of or not matching the commit log) ends the seek: the walk
   starts at the first file, as without it.
2. The bound is the smallest of: each queue's first unit at or after T (every record of a
   queue whose times rise lies at or after it) and the largest commit-log offset of a unit
   older than T (the broker stamps ``storeTimestamp`` under the commit log's put lock,
   ``CommitLog#asyncPutMessage``, so store times do not fall in commit-log order unless the
   clock stepped back: every record before an older-than-T record is older than T, those
   no consume queue holds — PREPARED and ROLLBACK records, records past the queues'
   dispatch — included).
3. The walk starts at the start of a file, never inside one: every file is walked from its
   own start either way, so a torn record before the bound ends that file exactly as in
   the full walk. The file before the start is read whole and must hold nothing stored at
   or after T (else the start moves back a file, and again), so store times that are out
   of order across a file boundary (a clock step, batch or queue jitter) are caught. Each
   skipped file's first record is read too: one that is not valid or not older than T
   ends the seek.

What stays assumed: no record stored at or after T lies in a skipped file behind a whole
file of older records and a first record older than T — a clock that stepped back by more
than a file's worth of messages, where no probe of any queue saw it. Without consume
queues, or with ``--no-seek``, the walk reads every file.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.answers import search
from rmqstore_cli.store.commitlog import Status


@dataclass
class Seek:
    """Where to start (``offset``, the start of ``file``) and why; ``offset`` None: from the
    first file (``reason`` says why no later start is safe, or None when there is nothing
    to skip)."""

    offset: int | None
    file: str | None = None
    reason: str | None = None


def seek_time(ms, when: int) -> Seek:
    """The start of the first commit-log file that may hold a record stored at or after
    ``when`` (module docstring), from the consume queues of ``ms`` (a ``MessageStore``)."""
    cl = ms.commitlog
    if len(cl.files) < 2:
        return Seek(None)
    try:
        bounds = _bounds(ms, search.TimeReader(cl), when)
    except StoreError as e:  # a queue that cannot be read (a directory named like a file…): no seek
        return Seek(None, reason=str(e))
    if isinstance(bounds, str):
        return Seek(None, reason=bounds)
    queues, first_new, last_old = bounds
    if not queues:
        return Seek(None, reason="no consume queue")
    if last_old is None:
        return Seek(None)  # no unit older than T: nothing is known to be skippable
    bound = last_old if first_new is None else min(first_new, last_old)
    f = cl.queue.find(bound)
    if f is None:
        return Seek(None, reason=f"no commit-log file holds offset {bound}")
    problem = _skipped_files_problem(cl, f, when)
    if problem:
        return Seek(None, reason=problem)
    return _backed_off(cl, f, when)


def _skipped_files_problem(cl, f, when: int) -> str | None:
    """Why the files before ``f`` cannot all be skipped: one does not start with a valid
    record, or starts with one stored at or after ``when``; None when they can."""
    for g in cl.files:
        if g is f:
            break
        c = cl.check_at(g.file_from_offset)
        if c is None or c.status is not Status.VALID or c.message is None:
            return f"commit-log file {g.name} does not start with a valid record"
        if c.message.store_timestamp >= when:
            return (
                f"commit-log file {g.name} starts with a record stored at or after the time (store times go backwards)"
            )
    return None


def _backed_off(cl, f, when: int) -> Seek:
    """The start at ``f``, moved back a file while the previous one holds a record stored at or
    after ``when`` (disorder across the file boundary); the first file: no seek."""
    k = cl.files.index(f)
    while k > 0 and _newest(cl, cl.files[k - 1]) >= when:  # disorder across the file boundary: back off
        k -= 1
    if k == 0:
        return Seek(None)
    return Seek(cl.files[k].file_from_offset, cl.files[k].name)


def _newest(cl, f) -> int:
    """The latest store timestamp of the records a walk finds in file ``f`` (-1: none)."""
    from rmqstore_cli.store.records.message import Message

    newest = -1
    for rec in cl.scan_blocks(f.file_from_offset, f.end_offset, every_file=True):
        ts = rec.store_timestamp if isinstance(rec, Message) else int(rec.store_timestamp.max())
        newest = max(newest, ts)
    return newest


def _bounds(ms, reader: search.TimeReader, when: int) -> tuple[int, int | None, int | None] | str:
    """(queues, the smallest commit-log offset of a queue's first unit at or after ``when``,
    the largest of a unit older than it), or why a queue cannot be trusted."""
    first_new: int | None = None
    last_old: int | None = None
    queues = 0
    for cq in ms.consume_queues():
        queues += 1
        try:
            found = _queue_bounds(cq, reader, when)
        finally:
            cq.close()  # thousands of queues: their mappings go as each is done
        if isinstance(found, str):
            return f"{cq.topic}/{cq.queue_id}: {found}"
        new, old = found
        if new is not None:
            first_new = new if first_new is None else min(first_new, new)
        if old is not None:
            last_old = old if last_old is None else max(last_old, old)
    return queues, first_new, last_old


def _queue_bounds(cq, reader: search.TimeReader, when: int) -> tuple[int | None, int | None] | str:
    """(commit-log offset of the queue's first unit at or after ``when``, offset of its last
    unit older than it), None where there is none; or why the queue cannot be trusted."""
    res = search.first_at_or_after(cq, reader, when)
    if any("backwards" in n for n in res.notes):  # search.first_at_or_after's clock-step note
        return "store times go backwards"
    a = res.offset
    if a is None:
        return "no answer"
    new = old = None
    if a < res.max_offset:
        new = _unit_at_or_after(cq, reader, a, when)
        if isinstance(new, str):
            return new
    if a > res.min_offset:
        old = _unit_before(cq, reader, a - 1, when)
        if isinstance(old, str):
            return old
    return new, old


def _unit_at_or_after(cq, reader: search.TimeReader, i: int, when: int) -> int | str:
    """The commit-log offset of unit ``i``, the first the search found at or after ``when``;
    or why it cannot be trusted (unreadable, a pre-blank unit, stored before the time)."""
    new = _time_at(cq, reader, i)
    if new is None or isinstance(new, str):
        return new or f"unit {i} is a pre-blank unit"
    if new[1] < when:
        return f"unit {i} was stored before the time"
    return new[0]


def _unit_before(cq, reader: search.TimeReader, i: int, when: int) -> int | str | None:
    """The commit-log offset of unit ``i``, the last before the search's answer; None for a
    pre-blank unit (``ConsumeQueue#fillPreBlank``: no record, no time); or why it cannot be
    trusted (unreadable, stored at or after the time)."""
    prev = _time_at(cq, reader, i)
    if prev is None or isinstance(prev, str):
        return prev
    if prev[1] >= when:
        return f"unit {i} was stored at or after the time"
    return prev[0]


def _time_at(cq, reader: search.TimeReader, i: int) -> tuple[int, int] | str | None:
    """(commit-log offset, store timestamp) of unit ``i``'s record, checked; None for a
    pre-blank unit; or why it cannot be read."""
    u = next(cq.units(i, i + 1), None)
    if u is None:
        return f"no unit {i}"
    if u.pre_blank:
        return None
    ts, why = reader.checked(u.commitlog_offset, u.size)
    if ts is None:
        return f"unit {i}: {why}"
    return u.commitlog_offset, ts
