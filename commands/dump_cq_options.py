"""dump-cq's own options that need more than a line (one file, the messages, the compaction queue, the summary),
and what --file does: it reads one file, with a store only where one is named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rmqstore_cli.commands.which_store import pick_store

FileOpt = Annotated[
    Path | None,
    typer.Option(
        "--file",
        help="Dump this one consume-queue file directly: no store needed, and only a store named so (--store, "
        "--broker-conf, $RMQSTORE_STORE; never ~/store) resolves its units.",
    ),
]

MessagesOpt = Annotated[
    bool,
    typer.Option(
        "--messages",
        help="Print the message behind each unit (as dump-commitlog prints it) under message, "
        "like mqadmin queryMsgByOffset; null where no valid record is there.",
    ),
]

CompactionOpt = Annotated[
    bool,
    typer.Option(
        "--compaction",
        help="Read the compaction store's queue of TOPIC QUEUE_ID (compaction/compactionCq/, "
        "cleanup.policy=COMPACTION topics), resolved against its compaction log.",
    ),
]

SummaryOpt = Annotated[
    bool,
    typer.Option(
        "--summary",
        help="Per queue: min and max offset, max physical offset, pre-blank units, files "
        "(all queues, or those of TOPIC).",
    ),
]


def file_store(resolve: bool, store: Path | None, broker_conf: Path | None, opener: Callable[[], Any]) -> Any:
    """The store --file resolves against: one named (option or environment), never ~/store; None not to resolve."""
    named = pick_store(store, broker_conf, required=False)[0] if resolve else None
    return opener() if named is not None else None


def dump_file(
    file: Path, topic: str | None, queue_id: int | None, ms: Any, window: tuple, fmt: str, zone, messages: bool
) -> None:
    """--file: one consume-queue file's units; --messages needs a store to read them from."""
    from rmqstore_cli.errors import NotFound, UsageError
    from rmqstore_cli.render_cq import emit_file

    if messages and ms is None:
        raise UsageError("--messages with --file needs --store to read the messages from")
    if emit_file(file, topic, queue_id, ms, window, fmt, zone, messages) == 0:
        raise NotFound("no unit in that range")
