"""rebuild-index's commit-log files in parts, so that one large file is dispatched on several
processes (the local engine's ``--jobs``), and so that what one task holds until it spills
follows a part, not a file (:data:`MAX_PART_BYTES`): step 1's positions (``rebuild_tasks.py``) then
number parts of files, in log order, and every later step reads them as it reads files.

A part starts at a record (an entry in a DLedger data file) the dispatch's own walk meets
(``rebuild.dispatch_file_records``: TOTALSIZE and MAGICCODE from the file's start, the chain
of sizes) and ends where the next starts. The dispatch's result does not depend on where its
blocks are cut, so the parts' units and keys, in order, are the file's; where dispatch stops
inside a part (the end of the log, or the rest of the file skipped by the reput) the later
parts of the file are not dispatched (``plan_dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: A commit-log file is split into parts of at least this many bytes.
MIN_PART_BYTES = 32 << 20
#: Records walked at a time while looking for the cuts.
WALK_CHUNK = 1 << 16
#: A step-1 task holds what it captured of its part (units and index keys, with their
#: copies ~0.7 KB a small message) until it spills: a file's data is cut into parts of at most this many bytes
#: whatever the jobs, so rebuild-index's peak memory follows a part, not a file (issue 35).
MAX_PART_BYTES = 64 << 20


def cut_any(names: list, want: int) -> bool:
    """Whether :func:`cut_files` may cut any of ``names`` (name, start, end): the engine
    wants ``want`` > 1 parts, or a file is larger than :data:`MAX_PART_BYTES`."""
    return want > 1 or any(end - start > MAX_PART_BYTES for _, start, end in names)


@dataclass(frozen=True)
class Parts:
    """Step 1's positions: each one's file, first record and the next part's (None: the
    file's end), and its bytes (the progress bar's)."""

    spans: list[tuple[int, int, int | None]]
    sizes: list[int]

    @property
    def files(self) -> list[int]:
        return [s[0] for s in self.spans]

    def split(self) -> bool:
        """Whether any file is in more than one part."""
        return len(self.spans) > len(set(self.files))


def whole_files(names: list) -> Parts:
    """One part per file: the files themselves."""
    return Parts([(i, 0, None) for i in range(len(names))], [end - start for _, start, end in names])


def cut_files(config, names: list, want: int, run_map) -> Parts:
    """``names`` cut into about ``want`` parts of like bytes: each file larger than the log's
    bytes over ``want`` (at least :data:`MIN_PART_BYTES`), and each whose data is larger
    than :data:`MAX_PART_BYTES`, at records its walk meets (:func:`record_cuts`, one task
    a file through ``run_map``)."""
    sizes = [end - start for _, start, end in names]
    share = max(MIN_PART_BYTES, -(-sum(sizes) // max(1, want)))
    todo = [(i, -(-n // share) if n > share else 1) for i, n in enumerate(sizes) if n > min(share, MAX_PART_BYTES)]
    cuts = dict(
        zip([i for i, _ in todo], run_map(lambda t: record_cuts(config, *t), todo) if todo else [], strict=True)
    )
    spans: list[tuple[int, int, int | None]] = []
    out: list[int] = []
    for i, n in enumerate(sizes):
        starts = [0, *cuts.get(i, [])]
        stops = [*starts[1:], None]
        spans += [(i, a, b) for a, b in zip(starts, stops, strict=True)]
        out += [(n if b is None else b) - a for a, b in zip(starts, stops, strict=True)]
    return Parts(spans, out)


def record_cuts(config, i: int, n: int) -> list[int]:
    """Where commit-log file ``i`` is cut into about ``n`` parts of like bytes of its data
    (more if a part would be larger than :data:`MAX_PART_BYTES`): the first record at or
    past each n-th (none past the walk's first stop)."""
    from rmqstore_cli.formats.commitlog import HEAD_SIZE
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.commitlog.bulk import walk_records
    from rmqstore_cli.store.files.arrays import data_end_guess, file_array
    from rmqstore_cli.store.files.mapped_files import release_pages

    cl = CommitLog(config)
    try:
        f = cl.files[i]
        header = cl.header_of(f)
        buf = f.buffer()
        a = file_array(buf)
        data = data_end_guess(a)
        n = max(n, -(-data // MAX_PART_BYTES))
        targets = [k * data // n for k in range(1, n)]
        cuts: list[int] = []
        pos, kind, released = 0, None, 0
        while kind is None and targets and pos < targets[-1]:
            P, pos, kind = walk_records(buf, pos, len(buf), WALK_CHUNK, HEAD_SIZE, a, header=header)
            _take_cuts(cuts, targets, P - header)  # only the cuts leave numpy, not every start
            released = release_pages(buf, released, pos)  # walked: resident memory stays a chunk
        if kind is None:
            _take_cuts(cuts, targets, np.array([pos]))  # the next record: where the walk would go on
        del a
        return sorted(set(cuts) - {0})
    finally:
        cl.close()


def _take_cuts(cuts: list[int], targets: list[int], starts: np.ndarray) -> None:
    """The first of ``starts`` (the walk's next records, in order) at or past each target
    not met yet (``cuts`` has one a target met): what a search over every start would pick,
    without keeping them (a Python int a record of the file)."""
    while len(cuts) < len(targets) and starts.size and starts[-1] >= targets[len(cuts)]:
        cuts.append(int(starts[np.searchsorted(starts, targets[len(cuts)])]))
