"""stats' answer when --topic matches no queue (split from commands/stats.py to keep it short)."""

from __future__ import annotations


def no_topic(ms, topic: str) -> None:
    from rmqstore_cli.commands.common import no_such_topic

    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import safe_text

    nf = no_such_topic(ms, topic)
    raise (
        nf
        if nf is not None
        else NotFound(
            f"topic '{safe_text(topic)}' has no consume queue",
            path=ms.config.consumequeue_dir / topic,
            hint="--exact counts its records from the commit log",
        )
    )
