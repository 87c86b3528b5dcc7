"""The rich consoles the output goes through (stdout's and stderr's, made once), and
whether a stream is a terminal."""

from __future__ import annotations

import os
import sys
from typing import Any


def isatty(f: Any) -> bool:
    """Whether ``f`` is a terminal (False for a stream without one, or closed)."""
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


_console = None
_err_console = None


def console():
    global _console
    if _console is None:
        from rich.console import Console

        # piped tables (less, files) get room for a msgId instead of 80 folded columns
        width = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
        # a write that fails (full, closed, a pipe's reader gone) raises stdio.OutputFault, not
        # the BrokenPipeError rich handles itself: every format ends the same way (commands.exits)
        _console = Console(highlight=False, no_color=bool(os.environ.get("NO_COLOR")), soft_wrap=False, width=width)
    return _console


def err_console():
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True, highlight=False, no_color=bool(os.environ.get("NO_COLOR")))
    return _err_console
