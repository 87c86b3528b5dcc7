"""Hostile things planted in a store, and what a refusal must look like (tests/safety/
test_hostile_reads.py, tests/commands/test_stats.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def one_line(r: subprocess.CompletedProcess, code: int, *needles: str) -> str:
    """The run exited ``code`` with no traceback, and its error line holds every needle."""
    err = r.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    assert r.returncode == code, (r.returncode, err)
    line = next((x for x in err.splitlines() if x.startswith("rmqstore: error:")), "")
    for n in needles:
        assert n in line, (n, err)
    return line


def plant(path: Path, kind: str) -> None:
    """Replace the file at ``path`` with a FIFO (``fifo``), a link to /dev/zero (``devzero``)
    or a directory (anything else)."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
