"""rebuild-index's commit-log files in parts, so that one large file is dispatched on several
processes (the local engine's ``--jobs``): step 1's positions (``rebuild_tasks.py``) then
number parts of files, in log order, and every later step reads them as it reads files.

A part starts at a record (an entry in a DLedger data file) the dispatch's own walk meets
(``rebuild.dispatch_file_records``: TOTALSIZE and MAGICCODE from the file's start, the chain
of sizes) and ends where the next starts. The dispatch's result does not depend on where its
blocks are cut, so the parts' units and keys, in order, are the file's; where dispatch stops
inside a part (the end of the log, or the rest of the file skipped by the reput) the later
parts of the file are not dispatched (``plan_dispatch``)."""

from __future__ import annotations

from dataclasses import dataclass

#: A commit-log file is split into parts of at least this many bytes.
MIN_PART_BYTES = 32 << 20
#: Records walked at a time while looking for the cuts.
WALK_CHUNK = 1 << 16


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
    bytes over ``want`` (at least :data:`MIN_PART_BYTES`) at records its walk meets
    (:func:`record_cuts`, one task a file through ``run_map``)."""
    sizes = [end - start for _, start, end in names]
    share = max(MIN_PART_BYTES, -(-sum(sizes) // max(1, want)))
    todo = [(i, -(-n // share)) for i, n in enumerate(sizes) if n > share]
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
    """Where commit-log file ``i`` is cut into about ``n`` parts of like bytes of its data:
    the first record at or past each n-th (none past the walk's first stop)."""
    import numpy as np

    from rmqstore_cli.formats.commitlog import HEAD_SIZE
    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.commitlog.bulk import walk_records
    from rmqstore_cli.store.files.arrays import data_end_guess, file_array

    cl = CommitLog(config)
    try:
        f = cl.files[i]
        header = cl.header_of(f)
        buf = f.buffer()
        a = file_array(buf)
        data = data_end_guess(a)
        targets = [k * data // n for k in range(1, n)]
        cuts: list[int] = []
        pos, kind, t = 0, None, 0
        while kind is None and targets and pos < targets[-1]:
            P, pos, kind = walk_records(buf, pos, len(buf), WALK_CHUNK, HEAD_SIZE, a, header=header)
            S = P - header  # the chunk's record starts: only the cuts leave numpy, not every start
            while t < len(targets) and S.size and targets[t] <= S[-1]:
                cuts.append(int(S[np.searchsorted(S, targets[t])]))
                t += 1
        if kind is None:
            cuts += [pos] * (len(targets) - t)  # the next record: where the walk would go on
        del a
        return sorted(set(cuts) - {0})
    finally:
        cl.close()
