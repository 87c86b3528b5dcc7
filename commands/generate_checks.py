"""generate's option combinations refused before anything is read or written (exit 2)."""

from __future__ import annotations


def check_version(broker_version: str) -> None:
    """--broker-version: the two brokers whose bytes generate writes."""
    from rmqstore_cli.errors import UsageError

    if broker_version not in ("4.9", "5"):
        raise UsageError(f"--broker-version must be 4.9 or 5, not {broker_version!r}")


def check_5x_topics(
    broker_version: str, topics: int, bcq_topics: int, compaction_topics: int | bool, appending: bool
) -> None:
    """--bcq-topics and --compaction-topics: 5.x topic kinds, at most --topics of them; a
    compaction topic is declared by a new store only (an append continues the compaction
    logs the store has: ``store.compaction_writer.compaction_dispatch``)."""
    from rmqstore_cli.errors import UsageError

    if bcq_topics and (broker_version != "5" or bcq_topics > topics):
        raise UsageError("--bcq-topics needs --broker-version 5 and at most --topics topics")
    if compaction_topics and (broker_version != "5" or bcq_topics + compaction_topics > topics or appending):
        raise UsageError(
            "--compaction-topics needs --broker-version 5, a new store (not --append or --from-jsonl) "
            "and at most --topics topics with --bcq-topics"
        )
    if compaction_topics is True:
        raise UsageError("--compaction-run needs --compaction-topics")


def check_outcomes(text: str | None) -> None:
    """``--transaction-outcomes`` refused before any file is written (the writer lays down
    the store's first files: checkpoint, config, lock)."""
    if text is not None:
        from rmqstore_cli.store.write.producer import parse_outcomes

        parse_outcomes(text)
