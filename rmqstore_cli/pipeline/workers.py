"""Worker processes for the local engine: how many (:func:`default_jobs`) and the map that
runs a task over items on forked processes (:func:`fork_map`). Apart from ``local.py`` so
that verify's engine, which needs only these, does not load the export modules (pyarrow's
columns, the Parquet writer) with them: ~30-50 ms of every verify's start-up."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: How many parts each process gets when commit-log files are split (verify's scan tasks,
#: rebuild-index's step 1; a file larger than its share in parts): two, so that a part that
#: costs more (damage, a file's zero tail) leaves the others less idle.
PARTS_PER_JOB = 2

#: The default ``--jobs`` (0) of verify, export and dump-commitlog runs one process for stores whose commit
#: logs hold fewer bytes than this (:func:`jobs_for`): forking the workers and joining their
#: results costs more than a second process saves on a log this small (a 1 000-send store:
#: verify took 0.27 s of CPU by default against 0.23 s in one process). Two of the smallest
#: scan parts (``MIN_PART_BYTES``).
ONE_PROCESS_BELOW = 64 << 20


def default_jobs() -> int:
    """Every core this process may run on (``sched_getaffinity``: a container's or taskset's
    share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def stored_bytes(stats: Iterable[os.stat_result]) -> int:
    """The bytes files hold on disk, not their length: a new commit-log file is sparse until
    written (``MappedFile#init`` maps its whole size, which extends it; only
    ``warmMapedFileEnable`` writes it through first), so a store of a thousand messages is a
    1 GiB file of which a few hundred KiB are stored. Where ``stat`` has no blocks (Windows),
    the length."""
    return sum(min(st.st_size, getattr(st, "st_blocks", st.st_size) * 512) for st in stats)


def jobs_for(stored: int) -> int:
    """The default ``--jobs`` for commit logs of ``stored`` bytes on disk (:func:`stored_bytes`):
    one process below :data:`ONE_PROCESS_BELOW`, else every core this process may use."""
    return 1 if stored < ONE_PROCESS_BELOW else default_jobs()


#: ``prctl``'s option: the signal a process gets when its parent ends (linux/prctl.h)
PR_SET_PDEATHSIG = 1

#: The task and items of the :func:`fork_map` under way, and :func:`fork_map_then`'s second
#: task: forked workers inherit them, so none is pickled (closures and plans included); only
#: the results travel back (and the second task's arguments, which are made after the fork).
_FORKED: list[Any] = [None, (), None]


def _forked_task(i: int):
    fn, items, _ = _FORKED
    return fn(items[i])


def _forked_then(args: tuple):
    return _FORKED[2](*args)


def fork_map(
    fn: Callable[[Any], Any], items: Sequence[Any], jobs: int, each: Callable[[Any], None] | None = None
) -> list:
    """``[fn(x) for x in items]``, on up to ``jobs`` forked processes when there is more than
    one item and more than one job; results in item order, each handed to ``each`` (a
    progress bar) as it comes back. The workers are forked at this call, so they see
    everything the caller built before it (the verify engine's join context, rebuild's plan)
    without it being pickled."""
    items = list(items)
    if jobs <= 1 or len(items) <= 1 or not can_fork():
        return _collect((fn(x) for x in items), each)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    workers = min(jobs, len(items))
    _FORKED[:] = [fn, items, None]
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, context, initializer=die_with_parent, initargs=(os.getpid(),)) as ex:
            got = ex.map(_forked_task, range(len(items)), chunksize=max(1, len(items) // (4 * workers)))
            return _collect(got, each)
    finally:
        _FORKED[:] = [None, (), None]


def fork_map_then(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    then: Callable[..., Any],
    more: Callable[[Callable[[int], Any]], Iterable[tuple]],
    jobs: int,
    each: Callable[[Any], None] | None = None,
) -> tuple[list, list]:
    """:func:`fork_map`'s ``[fn(x) for x in items]``, then ``[then(*y) for y in more(got)]`` on
    the same workers: they are forked and handed ``items`` first, and ``more`` runs in this
    process meanwhile (verify's walk to where a commit-log file is cut into parts runs beside
    the index files' checks instead of before them), ``got(i)`` waiting for ``fn(items[i])``.
    ``more``'s argument tuples are made after the fork, so they are pickled: small ones
    (numbers, spans, index headers), never a plan; each goes to the workers as made. Results in
    item order, each handed to ``each`` as it comes back; this process goes on while the
    workers end (the interpreter's exit waits for them)."""
    items = list(items)
    if jobs <= 1 or not can_fork():
        first = _collect((fn(x) for x in items), each)
        return first, _collect((then(*y) for y in more(first.__getitem__)), each)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    _FORKED[:] = [fn, items, then]
    ex = ProcessPoolExecutor(
        jobs, multiprocessing.get_context("fork"), initializer=die_with_parent, initargs=(os.getpid(),)
    )
    try:
        first = [ex.submit(_forked_task, i) for i in range(len(items))]
        later = [ex.submit(_forked_then, y) for y in more(lambda i: first[i].result())]
        got = _collect((f.result() for f in first), each), _collect((f.result() for f in later), each)
    except BaseException:
        ex.shutdown(cancel_futures=True)
        raise
    finally:
        _FORKED[:] = [None, (), None]
    ex.shutdown(wait=False)  # every result is in: the workers' exit (unmapping what they mapped) goes on meanwhile
    return got


def die_with_parent(parent: int) -> None:
    """A forked worker ends when the process that forked it does, even by SIGKILL (Linux's
    ``PR_SET_PDEATHSIG``): the workers inherit the task pipe's write end, so a parent's death
    never reaches them as end of file; left alone they would wait on it for ever, each
    holding its memory and the store's files open (a snapshot's volume then cannot be
    unmounted), one more set for every killed cron run. A parent already gone before the
    call (the worker was adopted) ends it at once; elsewhere than Linux nothing is set."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: no prctl
        pass
    if os.getppid() != parent:
        os._exit(1)


def _collect(results: Iterable[Any], each: Callable[[Any], None] | None) -> list:
    out = []
    for r in results:
        out.append(r)
        if each is not None:
            each(r)
    return out


def can_fork() -> bool:
    """Whether this platform forks processes (not Windows)."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()
