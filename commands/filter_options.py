"""The message filters' options, declared once for every command that filters commit-log
records the same way (dump-commitlog, export): the engine's
:class:`~rmqstore_cli.store.records.filters.MessageFilter` and an offset range [from, to)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rmqstore_cli.commands import grammar
from rmqstore_cli.commands.completion import complete_queue_id, complete_topic

FromOffsetOpt = Annotated[int | None, grammar.from_offset_option("Start at this physical offset (a message start).")]
ToOffsetOpt = Annotated[int | None, grammar.to_offset_option("Stop before this physical offset.")]
TopicFilterOpt = Annotated[str | None, grammar.topic_option("Only messages of this topic.", complete_topic)]
QueueIdFilterOpt = Annotated[
    int | None, typer.Option("--queue-id", help="Only this queue id.", autocompletion=complete_queue_id)
]
KeyFilterOpt = Annotated[str | None, typer.Option("--key", help="Only messages whose KEYS contain this key.")]
UniqKeyFilterOpt = Annotated[str | None, typer.Option("--uniq-key", help="Only the message with this UNIQ_KEY.")]
TagFilterOpt = Annotated[str | None, typer.Option("--tag", help="Only messages with this TAGS value.")]
BeginFilterOpt = Annotated[str | None, grammar.begin_option("Store time")]
EndFilterOpt = Annotated[str | None, grammar.end_option("Store time")]


def message_filter(
    topic: str | None,
    queue_id: int | None,
    key: str | None,
    uniq_key: str | None,
    tag: str | None,
    times: tuple[str | None, str | None, str | None],
    zone: Any = None,
) -> Any:
    """The engine's filter of these options; ``times``: --begin, --end and --now (relative
    times read against --now, else the clock; a reversed window is a usage error)."""
    from rmqstore_cli.store.records.filters import MessageFilter

    begin, end, now = times
    b, e = grammar.window(begin, end, grammar.clock(now, zone), zone)
    return MessageFilter(topic, queue_id, key, uniq_key, tag, b, e)
