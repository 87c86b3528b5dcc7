"""The quick look at a terabyte store: ``--sample`` and ``--max-bytes`` (dump-commitlog, stats),
narrowing the commit-log walk exactly (store/answers/sampling.py)."""

from __future__ import annotations

from typing import Annotated

import typer

SampleOpt = Annotated[
    int | None,
    typer.Option(
        "--sample",
        min=1,
        metavar="N",
        help="Keep every Nth record the walk passes (after the filters), the first always: what the full "
        "output prints, every Nth. Counts in summaries are then scaled by N and marked as estimates.",
    ),
]
MaxBytesOpt = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        min=1,
        metavar="BYTES",
        help="Read at most this many bytes of each commit-log file, from its start (the walk's start in its "
        "first file): the records that end within them, the rest of each file never read (as kafka-dump-log "
        "--max-bytes). Counts in summaries are then scaled by the bytes in range over the bytes read.",
    ),
]
