"""``dump-commitlog --jobs N``: the walk's JSON lines rendered on forked processes, written
in commit-log order, the bytes one process writes.

The walk (``store.answers.log_range.walk``, every file) is cut into parts: each commit-log
file, and a file holding more than :data:`PART_BYTES` at the records rebuild-index's split
walk meets (``rebuild_parts.record_cuts``). A part is walked on its own
(``CommitLog.scan_part``): since the walk goes on with the next file after a stop, the
files' walks do not depend on each other, and a part that starts at a record of the
file's chain of sizes walks what the whole walk does from there. Part k goes to worker
k mod N, which renders its parts in order into a pipe of its own as frames (data, then the
part's result: count, end, stops and how it ended); the driver reads the parts in order
from the workers' pipes and writes them out, reading the other pipes ahead while it waits
on one. A worker's output is at most its pipe and :data:`AHEAD_BYTES` ahead of the
driver's writes: memory stays bounded however large the log.

The driver joins the parts as the one walk would: a part that ended its file (a stop, a
BLANK) drops the file's later parts, one that ended the walk (the last file, the end
offset) all later parts; a part whose walk ran past its cut (a record the chain of sizes
and the checks see differently) has the rest of its file walked again from where it went
on. ``json`` is rendered as ``jsonl`` and joined here (``[``, ``,`` and ``]``): the same
lines. A worker's error reaches the driver after that part's output, raised there.
"""

from __future__ import annotations

import errno
import io
import os
import pickle
import signal
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli import stdio
from rmqstore_cli.errors import RmqstoreError
from rmqstore_cli.pipeline import workers
from rmqstore_cli.pipeline.workers import can_fork, die_with_parent

#: A commit-log file holding more than this is cut into parts of about this many bytes: few
#: enough that a part's fixed cost is small (a scan, its first block), small enough that its
#: output (JSON lines ~ twice the log's bytes) fits in what the driver reads ahead
#: (:data:`AHEAD_BYTES`), so that the other workers finish their parts while it writes one.
PART_BYTES = 2 << 20
#: Each worker's pipe (``F_SETPIPE_SZ``; at most ``/proc/sys/fs/pipe-max-size``, 1 MiB by
#: default): how far its output may run ahead of the driver, with one frame.
PIPE_BYTES = 1 << 20
#: Bytes the driver reads ahead of each worker's pipe while it waits on another's: with the
#: pipe, how far a worker's output may run ahead (a part's, :data:`PART_BYTES` of the log,
#: is ~ twice that as JSON lines: the worker then goes on with its next part).
AHEAD_BYTES = 8 << 20
#: Bytes a worker gathers into one data frame.
FRAME_BYTES = 1 << 18
#: A frame's head: its data's bytes, or -1 - the bytes of the pickled result that ends a part.
HEAD_BYTES = 8


def _head(n: int) -> bytes:
    """A frame's head (a pipe between two processes of this machine, not a store format)."""
    return n.to_bytes(HEAD_BYTES, "little", signed=True)


def jobs_for(ms: Any, fmt: str, limit: int | None, narrowing: Any, jobs: int) -> int:
    """The processes a walk printed as ``fmt`` runs on for ``--jobs`` ``jobs`` (0: verify's
    rule over the commit-log files, ``workers.jobs_for``). One where the output of a
    part depends on the others': a table (its widths settle on the first rows), a ``limit``,
    a narrowing (--sample, --max-bytes); and for a DLedger log (its parts are not cut)."""
    if fmt == "table" or limit is not None or narrowing.active or jobs == 1 or not can_fork():
        return 1
    cl = ms.commitlog
    if cl.is_dledger:
        return 1
    return jobs or workers.jobs_for(workers.stored_bytes(os.stat(f.path) for f in cl.files))


@dataclass(frozen=True)
class Walk:
    """What every part's walk shares: the store, the range, the filter, the options."""

    ms: Any
    rng: Any
    flt: Any
    zone: Any
    show: Any
    blank: bool
    crc: bool


@dataclass
class Joined:
    """What the driver has joined so far: records printed, the log's end and stops."""

    shown: int = 0
    end: Any = None
    stops: list = field(default_factory=list)


def plan_parts(cl: Any, rng: Any) -> tuple[list, list[tuple[int, int, int | None]]]:
    """The walk's files (``queue.files_from`` its start) and its parts (file number, first
    byte, cut: the next part's first byte, None: the file's end). Past ``rng.stop`` only the
    first file, where the walk that reached no earlier stop ends."""
    start = cl.min_offset if rng.start is None else rng.start
    files = cl.queue.files_from(start)
    parts: list[tuple[int, int, int | None]] = []
    for i, f in enumerate(files):
        if rng.stop is not None and f.file_from_offset >= rng.stop:
            parts.append((i, 0, None))
            break
        pos = max(0, start - f.file_from_offset)
        stop = f.end_offset if rng.stop is None else min(rng.stop, f.end_offset)
        cuts = [c for c in _cuts(cl, f, stop) if c > pos]
        parts += list(zip([i] * (len(cuts) + 1), [pos, *cuts], [*cuts, None], strict=True))
    return files, parts


def _cuts(cl: Any, f: Any, stop: int) -> list[int]:
    """Where file ``f`` is cut (rebuild-index's record cuts), before ``stop``: none for a file
    holding at most :data:`PART_BYTES` on disk."""
    stored = min(workers.stored_bytes([os.stat(f.path)]), stop - f.file_from_offset)
    if stored <= PART_BYTES:
        return []
    from rmqstore_cli.pipeline.rebuild_parts import record_cuts

    return [c for c in record_cuts(cl.config, cl.files.index(f), -(-stored // PART_BYTES)) if c < stop]


def print_parts(w: Walk, fmt: str, jobs: int) -> int:
    """The walk printed as ``fmt`` (jsonl or json) by ``jobs`` forked workers; the records
    printed. Sets the log's ``end`` and ``stops`` as the one walk does."""
    cl = w.ms.commitlog
    files, parts = plan_parts(cl, w.rng)
    stdio.widen_stdout_pipe()
    out = JsonJoin() if fmt == "json" else Lines()
    pool = Pool(w, files)
    got = Joined()
    try:
        if parts:  # none: the walk starts past the last file
            pool.start(parts, jobs)
            _join(pool, parts, got, out)
    finally:
        pool.stop()
        out.close()
    cl.end, cl.stops = got.end, got.stops
    return got.shown


def _join(pool: Pool, parts: list, got: Joined, out: Any) -> None:
    """Each part's output written (or dropped, where the one walk would not go) and its
    result joined in, in order; a part that ran past its cut has its file's rest walked again."""
    skip = -1  # the file whose later parts the walk does not reach
    for k, (i, _, cut) in enumerate(parts):
        r = pool.read(k, out if i != skip else None)
        if i == skip:
            continue
        outcome = _add(r, got)
        torn = isinstance(outcome, tuple) and outcome[1] != cut
        if torn:
            outcome = _again(pool, (i, outcome[1], None), got, out)
        if outcome == "end":
            return
        if outcome == "file" or torn:
            skip = i


def _again(pool: Pool, part: tuple, got: Joined, out: Any) -> Any:
    """A file's rest walked by one more worker (a part ran past its cut): its outcome."""
    again = Pool(pool.walk, pool.files)
    try:
        again.start([part], 1)
        return _add(again.read(0, out), got)
    finally:
        again.stop()


def _add(r: tuple, got: Joined) -> Any:
    """One part's result joined in (an error raised); its outcome."""
    if r[0] == "error":
        raise r[1]
    _, shown, end, stops, outcome = r
    got.shown += shown
    got.end = end if end is not None else got.end
    got.stops += stops
    return outcome


class Pool:
    """The workers of one :func:`print_parts` (or of a file's rest walked again): each a
    forked process and its pipe, read ahead (:class:`Ahead`) while the driver waits on another."""

    def __init__(self, w: Walk, files: list):
        self.walk, self.files = w, files
        self.procs: list[tuple[int, Ahead]] = []  # (pid, its pipe)

    def start(self, parts: list, jobs: int) -> None:
        """Fork ``jobs`` workers (at most one a part), worker j walking parts j, j + jobs, ..."""
        n = max(1, min(jobs, len(parts)))
        parent = os.getpid()
        sys.stdout.flush()
        for j in range(n):
            r, wfd = os.pipe()
            stdio.widen_pipe(r, PIPE_BYTES)  # a lower pipe-max-size: a worker less far ahead
            pid = os.fork()
            if pid == 0:  # the worker: never returns
                os.close(r)
                for _, a in self.procs:
                    os.close(a.fd)
                _work(self.walk, self.files, parts[j::n], wfd, parent)
            os.close(wfd)
            self.procs.append((pid, Ahead(r)))

    def read(self, k: int, out: Any) -> tuple:
        """Part ``k``'s frames from its worker: the data written to ``out`` (None: dropped),
        then its result."""
        a = self.procs[k % len(self.procs)][1]
        while True:
            n = int.from_bytes(self._take(a, HEAD_BYTES), "little", signed=True)
            if n < 0:
                return pickle.loads(self._take(a, -1 - n))
            while n:
                if not a.size:  # nothing read ahead: wait for the pipe (spliced straight out)
                    n -= self._pump(a, out, n)
                    continue
                b = a.pop(n)
                n -= len(b)
                if out is not None:
                    out.write(b)

    def _take(self, a: Ahead, n: int) -> bytes:
        """``n`` bytes of ``a`` (a frame's head or result)."""
        while a.size < n:
            self._pump(a)
        got = []
        while n:
            got.append(a.pop(n))
            n -= len(got[-1])
        return b"".join(got)

    def _pump(self, need: Ahead, out: Any = None, n: int = 0) -> int:
        """Wait for ``need``'s pipe, reading meanwhile every pipe that has something and room
        (:data:`AHEAD_BYTES`): the other workers go on while the driver waits for this one.
        Up to ``n`` bytes of ``need``'s are spliced straight to ``out`` where it can take them
        (:meth:`Lines.splice`): how many."""
        import select

        if need.eof:  # the worker ended before its part's frames did
            raise _gone()
        ahead = [a for _, a in self.procs if a is need or (a.size < AHEAD_BYTES and not a.eof)]
        ready, _, _ = select.select(ahead, [], [])
        moved = 0
        for a in ready:
            got = out.splice(a.fd, n) if a is need and n and out is not None else None
            if got is None:
                a.fill()
            else:
                moved, a.eof = got, not got
        return moved

    def stop(self) -> None:
        """Every worker ended and reaped, its pipe closed (a worker still writing is killed:
        the output was closed, or an error ended the walk)."""
        for pid, a in self.procs:
            os.close(a.fd)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
        self.procs = []


class Ahead:
    """A worker's pipe and what the driver read of it ahead: chunks as ``os.read`` gave them."""

    def __init__(self, fd: int):
        self.fd = fd
        self.chunks: deque[memoryview] = deque()
        self.size = 0
        self.eof = False

    def fileno(self) -> int:
        return self.fd

    def fill(self) -> None:
        b = os.read(self.fd, PIPE_BYTES)
        self.eof = not b
        if b:
            self.chunks.append(memoryview(b))
            self.size += len(b)

    def pop(self, n: int) -> memoryview:
        """At most ``n`` bytes from the front (those of one chunk)."""
        c = self.chunks[0]
        if len(c) <= n:
            self.chunks.popleft()
        else:
            self.chunks[0], c = c[n:], c[:n]
        self.size -= len(c)
        return c


def _gone() -> RmqstoreError:
    return RmqstoreError("a dump-commitlog worker process ended before its part was written")


def _work(w: Walk, files: list, parts: list, fd: int, parent: int) -> None:
    """A worker: its parts walked and rendered, in order, as frames into ``fd``; then it
    ends (``os._exit``: nothing of the driver's runs again here). A closed pipe (the driver
    gone or done) ends it quietly."""
    code = 0
    try:
        die_with_parent(parent)
        frames = Frames(fd)
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(frames, FRAME_BYTES), encoding="utf-8")
        for r in _results(w, files, parts):
            sys.stdout.flush()
            frames.result(pickle.dumps(r))
            if r[0] == "error":
                break
    except BaseException:  # noqa: BLE001 - a worker never unwinds into the driver's code
        code = 1
    os._exit(code)


def _results(w: Walk, files: list, parts: list) -> Iterator[tuple]:
    """Each part printed as JSON lines; its result, or the error that ended it."""
    from rmqstore_cli.render_commitlog import Printer
    from rmqstore_cli.store.answers.log_range import walk

    cl = w.ms.commitlog
    p = Printer(w.ms, "jsonl", w.zone, w.show)
    blocks = p.columnar(w.flt)
    for i, pos, cut in parts:
        try:
            shown = p.items(walk(cl, w.rng, w.flt, None, w.crc, w.blank, blocks, (files, i, pos, cut)))
        except RmqstoreError as e:
            p.out.close()
            yield ("error", e)
            return
        p.out.close()
        yield ("done", shown, cl.end, cl.stops, cl.part_outcome)


class Frames(io.RawIOBase):
    """A worker's stdout: each write one data frame into the pipe; :meth:`result` ends a part."""

    def __init__(self, fd: int):
        super().__init__()
        self.fd = fd

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        n = memoryview(b).nbytes
        if n:
            _send(self.fd, [_head(n), b])
        return n

    def result(self, payload: bytes) -> None:
        _send(self.fd, [_head(-1 - len(payload)), payload])


def _send(fd: int, bufs: list) -> None:
    views = [memoryview(b).cast("B") for b in bufs]
    while views:
        n = os.writev(fd, views)
        while views and n >= len(views[0]):
            n -= len(views.pop(0))
        if views:
            views[0] = views[0][n:]


def _splice_fd() -> int | None:
    """stdout's descriptor where :meth:`Lines.splice` may write to it: the process's own
    stdout (not a test's capture), open when it started."""
    if not hasattr(os, "splice") or stdio.stdout_closed_at_start():
        return None
    try:
        return sys.stdout.buffer.raw.fileno()
    except (AttributeError, OSError, ValueError):  # a capture (tests' CliRunner): no descriptor
        return None


class Lines:
    """jsonl: the workers' lines as they are."""

    def __init__(self):
        self.buf = sys.stdout.buffer
        sys.stdout.flush()
        self.fd = _splice_fd()

    def write(self, b: Any) -> None:
        self.buf.write(b)

    def splice(self, fd: int, n: int) -> int | None:
        """Up to ``n`` bytes of pipe ``fd`` moved to stdout in the kernel (``splice(2)``: not
        copied through this process, a copy less of every byte); 0 at the pipe's end. None
        where stdout cannot take them so (no descriptor, a terminal, a file opened to append):
        then they are read and written. A failed write is the output fault any write's is."""
        if self.fd is None:
            return None
        self.buf.flush()
        try:
            return os.splice(fd, self.fd, n)
        except OSError as e:
            if e.errno != errno.EINVAL:
                from rmqstore_cli.stdio import OutputFault

                raise OutputFault(e.errno or errno.EIO) from None
            self.fd = None
            return None

    def close(self) -> None:
        self.buf.flush()


class JsonJoin(Lines):
    """json: the workers' lines joined into one array as ``render.Output`` writes it: ``[``,
    a comma after each line but the last, ``]`` (``[]`` when none)."""

    def __init__(self):
        super().__init__()
        self.fd = None  # each byte is looked at: never spliced
        self.started = False
        self.newline = False  # a line's newline held back: the comma goes before it

    def write(self, data: Any) -> None:
        b = bytes(data)
        if not b:
            return
        head = (b",\n" if self.newline else b"") if self.started else b"[\n"
        self.started = True
        self.newline = b.endswith(b"\n")
        body = b[:-1] if self.newline else b
        self.buf.write(head + body.replace(b"\n", b",\n"))

    def close(self) -> None:
        self.buf.write(b"\n]\n" if self.started else b"[]\n")
        self.buf.flush()
