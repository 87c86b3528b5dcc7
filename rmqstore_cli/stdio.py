"""The process's standard streams, made safe for cron jobs, ``nohup`` and pipes.

A cron daemon may start a job with stdout or stderr closed, a redirect may point them at a
full disk (``> /dev/full``), and a pipe's reader may go away (``| head -1``). Python meets
these with ``sys.stdout = None`` (an ``AttributeError`` at the first print), an
``OSError`` traceback, a ``print(file=sys.stderr)`` that silently goes to *stdout* when
stderr is None, and "Exception ignored" at the interpreter's last flush. And a descriptor
left closed is taken by the next ``open``: a store file opened as fd 1 or 2 would receive
whatever a C library or the JVM writes there.

:func:`install` (``app.main``, before anything else) settles all of it in one place:

* fds 0, 1 and 2 that are closed are occupied by ``/dev/null``, so no later open takes
  them (the JVM and C code inherit a harmless descriptor);
* ``sys.stdout`` writes through a :class:`_Sink` that turns any write failure (full,
  I/O error, bad descriptor, closed at start-up, a pipe's reader gone) into one
  :class:`OutputFault`, raised once; after it every write is dropped, so nothing fails
  again, at exit or anywhere else. ``commands.exits.command`` maps the fault to the
  documented exit code (README "Exit codes");
* ``sys.stderr`` never raises and never lands on stdout: a full or closed stderr drops
  the text, and the exit code still says what happened.

Commands whose exit status is their answer (verify) ask for :func:`keep_going_on_epipe`:
a reader that went away then only stops the printing, and the check runs to its answer.
"""

from __future__ import annotations

import errno
import io
import os
import select
import sys

#: Bytes stdout gathers before a write (Output hands over larger blocks directly).
BUFFER = 1 << 16


class OutputFault(Exception):
    """stdout could not take the output: ``err`` is the errno of the failed write
    (``EBADF`` for a stdout closed when rmqstore started)."""

    def __init__(self, err: int, closed_at_start: bool = False):
        super().__init__(err)
        self.err = err
        self.closed_at_start = closed_at_start

    @property
    def pipe_closed(self) -> bool:
        """The reader of a pipe went away (``| head -1``): no fault of the command's."""
        return self.err == errno.EPIPE

    def reason(self) -> str:
        """What went wrong, in words for the error line."""
        if self.closed_at_start:
            return "it was closed when rmqstore started"
        if self.err == errno.EPIPE:
            return "the pipe's reader went away"
        text = os.strerror(self.err)
        return text[:1].lower() + text[1:]


class _Sink(io.RawIOBase):
    """The raw layer under ``sys.stdout`` or ``sys.stderr``: ``os.write`` on a descriptor
    it never closes. The first failure is kept in :attr:`fault`; it is raised (stdout) or
    swallowed (stderr, and stdout after :func:`keep_going_on_epipe` for a closed pipe), and
    from then on every write is dropped. :attr:`dead` drops everything (set on the way out)."""

    def __init__(self, fd: int, closed_at_start: bool, raises: bool):
        super().__init__()
        self.fd = fd
        self.closed_at_start = closed_at_start
        self.raises = raises
        self.keep_going_on_epipe = False
        self.fault: OutputFault | None = None
        self.dead = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        try:
            return not self.closed_at_start and os.isatty(self.fd)
        except OSError:
            return False

    def close(self) -> None:  # the descriptor stays open: it is the process's fd 1 or 2
        io.RawIOBase.close(self)

    def write(self, b) -> int:
        n = memoryview(b).nbytes
        if self.fault is not None or self.dead:
            return n
        if self.closed_at_start:
            return self._failed(errno.EBADF, n)
        while True:
            try:
                return os.write(self.fd, b)
            except BlockingIOError:  # a non-blocking pipe inherited from the parent: wait for room
                select.select([], [self.fd], [])
            except OSError as e:
                return self._failed(e.errno or errno.EIO, n)

    def _failed(self, err: int, n: int) -> int:
        self.fault = OutputFault(err, self.closed_at_start)
        if self.raises and not (err == errno.EPIPE and self.keep_going_on_epipe):
            raise self.fault
        return n


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def _occupy(fd: int) -> None:
    """Put ``/dev/null`` at ``fd`` (closed), so the next ``open`` cannot get it."""
    nul = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
    if nul != fd:
        os.dup2(nul, fd)
        os.close(nul)


def _text(sink: _Sink, old, errors: str, line_buffering: bool) -> io.TextIOWrapper:
    """``sink`` as a text stream with ``old``'s encoding and error handler (when it had one)."""
    return io.TextIOWrapper(
        io.BufferedWriter(sink, BUFFER),
        encoding=getattr(old, "encoding", None) or "utf-8",
        errors=getattr(old, "errors", None) or errors,
        line_buffering=line_buffering,
        write_through=sink.fd == 2,
    )


def install() -> None:
    """Occupy closed standard descriptors with ``/dev/null`` and put :class:`_Sink` under
    ``sys.stdout`` and ``sys.stderr`` (see the module docstring). Idempotent."""
    if isinstance(getattr(sys.stdout, "buffer", None), io.BufferedWriter) and isinstance(sys.stdout.buffer.raw, _Sink):
        return
    closed = _occupy_closed()
    if sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # the process's stdin, never closed
    # only the process's own streams (nothing written yet: no data to carry); one a caller
    # put in their place (contextlib.redirect_stdout, an embedding program) stays
    if sys.stdout is None or sys.stdout is sys.__stdout__:
        out = _Sink(1, closed[1], raises=True)
        sys.stdout = _text(out, sys.stdout, "strict", out.isatty())
    if sys.stderr is None or sys.stderr is sys.__stderr__:
        sys.stderr = _text(_Sink(2, closed[2], raises=False), sys.stderr, "backslashreplace", True)


def _occupy_closed() -> list[bool]:
    """Which of descriptors 0, 1, 2 were closed, each now occupied by ``/dev/null``."""
    closed = [not _is_open(fd) for fd in (0, 1, 2)]
    for fd in (0, 1, 2):
        if closed[fd]:
            _occupy(fd)
    return closed


def _sink():
    """The sink under ``sys.stdout``, or None when :func:`install` did not run (tests'
    CliRunner, the library)."""
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    return raw if isinstance(raw, _Sink) else None


def stdout_closed_at_start() -> bool:
    """stdout was closed when the process started: no output can reach anyone."""
    s = _sink()
    return s is not None and s.closed_at_start


def keep_going_on_epipe(on: bool) -> None:
    """Whether a pipe whose reader went away stops the command (False: stream commands) or
    only its printing (True: verify, whose exit status is its answer)."""
    s = _sink()
    if s is not None:
        s.keep_going_on_epipe = on


def flush() -> None:
    """Write what stdout holds; :class:`OutputFault` when it cannot be written."""
    if sys.stdout is not None:
        sys.stdout.flush()


def finish() -> None:
    """On the way out: write what stdout still holds if it can, then drop anything later,
    so the interpreter's last flush never fails ("Exception ignored", exit 120)."""
    try:
        flush()
    except Exception:  # the exit code was decided already
        pass
    s = _sink()
    if s is not None:
        s.dead = True


#: ``fcntl``'s F_SETPIPE_SZ and F_GETPIPE_SZ (linux/fcntl.h).
F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
#: How large :func:`widen_pipe` makes a pipe: ``/proc/sys/fs/pipe-max-size``'s default.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int, size: int = PIPE_BYTES) -> None:
    """Grow pipe ``fd`` to ``size`` bytes (never shrink it), at most what
    ``/proc/sys/fs/pipe-max-size`` allows; a refusal (an older kernel, a lower limit, the
    user's pipe pages used up) leaves the pipe as it was. A writer of hundreds of MB into a
    default 64 KiB pipe sleeps and wakes its reader once per 64 KiB: a 1 MiB pipe does so a
    sixteenth as often (measured: a tenth of ``dump-commitlog``'s CPU was those switches)."""
    import fcntl

    try:
        with open("/proc/sys/fs/pipe-max-size", "rb") as f:
            size = min(size, int(f.read()))
        if fcntl.fcntl(fd, F_GETPIPE_SZ) < size:
            fcntl.fcntl(fd, F_SETPIPE_SZ, size)
    except (OSError, ValueError):
        pass


def widen_stdout_pipe() -> None:
    """:func:`widen_pipe` on the process's stdout when it is a pipe (``| jq``, a bench's
    reader): not a file, a terminal, a capture, nor a descriptor closed at start-up."""
    import stat

    s = _sink()
    if s is None or s.closed_at_start:
        return
    try:
        if stat.S_ISFIFO(os.fstat(s.fd).st_mode):
            widen_pipe(s.fd)
    except OSError:
        pass
