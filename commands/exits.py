"""How every command ends: engine errors as one stderr line and their exit code, output
faults (rmqstore_cli/stdio.py) as theirs, and a file that shrank under a read as the error
(README "Exit codes")."""

from __future__ import annotations

import errno
import functools
import inspect

import typer
from rmqstore_cli.commands.grammar import option_of
from rmqstore_cli.commands.lines import say

from rmqstore_cli.errors import FileSizeError, RmqstoreError

#: ``debug``: --debug given; ``done``: what a writing command has finished, as words for the
#: error line when its report is then lost (:func:`work_done`), None before that.
STATE: dict = {"debug": False, "done": None}

#: What a read command's error about an odd-sized file adds (its --allow-odd-size).
ODD_SIZE_HINT = "or pass --allow-odd-size to read it anyway"


def fail(e: RmqstoreError) -> None:
    """One stderr line and the exit code; a negative answer (exit 1: nothing matched) is an
    answer, not an error, so its line has no ``error:``."""
    from rmqstore_cli.errors import NotFound

    say(None if isinstance(e, NotFound) else "error", e.describe(option_of))  # say escapes store text
    raise typer.Exit(e.exit_code)


def command(fn=None, *, mutating: bool = False, answer: bool = False, quiet_hushes_stdout: bool = False):
    """Turn engine errors into one stderr line and their exit code (``--debug``: traceback),
    and output faults (rmqstore_cli/stdio.py) into theirs, for every command in one place:

    * the output cannot be written (stdout full, I/O error, closed): exit 5, one line;
    * a pipe's reader went away (``| head -1``): stop quietly, exit 0, as git and coreutils
      do; with ``answer`` (verify: the exit status is the answer) only the printing stops
      and the command runs on to its usual exit code;
    * ``mutating`` (its work is writing: expire, generate, rebuild-index, export): a report
      lost after the work was done (:func:`work_done`) is exit 6 with a line saying where the
      work is recorded; with stdout closed from the start it refuses before any work (exit
      5), unless ``quiet_hushes_stdout`` (expire) and its ``--quiet`` keeps it from printing.

    Used bare (``@command``) or with options (``@command(mutating=True)``)."""
    if fn is None:
        return functools.partial(command, mutating=mutating, answer=answer, quiet_hushes_stdout=quiet_hushes_stdout)
    odd_ok = "allow_odd_size" in inspect.signature(fn).parameters  # a decorated option group too

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rmqstore_cli import stdio
        from rmqstore_cli.store.files.heap import reuse_freed_blocks
        from rmqstore_cli.store.files.safefs import reset_hole_budget

        reuse_freed_blocks()  # the CLI owns its process: each batch's arrays on the pages the last one freed
        reset_hole_budget()
        STATE["done"] = None
        stdio.keep_going_on_epipe(answer)
        try:
            hushed = quiet_hushes_stdout and kwargs.get("quiet")
            if mutating and not hushed and stdio.stdout_closed_at_start():
                raise stdio.OutputFault(errno.EBADF, closed_at_start=True)
            try:
                rv = shrink_wins(fn, args, kwargs)
            except typer.Exit:
                stdio.flush()
                raise
            stdio.flush()
            return rv
        except stdio.OutputFault as e:
            raise typer.Exit(output_fault(e, fn.__name__.replace("_", "-"))) from None
        except RmqstoreError as e:
            if STATE["debug"]:
                raise
            if odd_ok and isinstance(e, FileSizeError):  # a read command: name its override
                e.hint = f"{e.hint}; {ODD_SIZE_HINT}" if e.hint else ODD_SIZE_HINT
            fail(e)
        except KeyboardInterrupt:
            say(None, "interrupted")
            raise typer.Exit(130) from None

    return wrapper


def work_done(record: str) -> None:
    """A writing command's work is complete (files deleted, written, renamed in); ``record``
    says where it is recorded, for the error line if the report is then lost (exit 6)."""
    STATE["done"] = record


def output_fault(e, name: str = "rmqstore") -> int:
    """The exit code of an output fault (README "Exit codes"), and its one stderr line: 0 and
    nothing for a pipe whose reader went away before any work was done; 6 when the work
    was done (:func:`work_done`); else 5."""
    from rmqstore_cli.errors import EXIT_OUTPUT, EXIT_REPORT_LOST

    done = STATE["done"]
    if done is None and e.pipe_closed:
        return 0
    if done is not None:
        say("error", f"cannot write {name}'s report: {e.reason()} (stdout); {name} finished: {done}")
        return EXIT_REPORT_LOST
    hint = (
        "run it with stdout open (> FILE, or > /dev/null to drop the output)"
        if e.closed_at_start
        else "free space there, or send the output elsewhere"
        if e.err in (errno.ENOSPC, errno.EDQUOT)
        else "send the output elsewhere"
    )
    say("error", f"cannot write the output: {e.reason()} (stdout); nothing was changed; {hint}")
    return EXIT_OUTPUT


def shrink_wins(fn, args, kwargs):
    """``fn(*args, **kwargs)``; if a store file shrank while it ran (``store/files/mapguard.py``:
    the guard turned the SIGBUS into zeros), that is the error, whatever ``fn`` returned or
    raised: its findings, counts or errors followed from the zeros it read."""
    from rmqstore_cli.store.files import mapguard

    at = mapguard.mark()
    try:
        rv = fn(*args, **kwargs)
    except Exception:
        shrunk = mapguard.since(at)
        if shrunk is None:
            raise
        raise shrunk from None
    shrunk = mapguard.since(at)
    if shrunk is not None:
        raise shrunk
    return rv
