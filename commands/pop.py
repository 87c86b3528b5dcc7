"""``rmqstore pop``: what became of the messages POP consumers popped, offline."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer
from rmqstore_cli.commands.common import Fmt, FormatOpt, TzOpt, command, complete_topic
from rmqstore_cli.commands.grammar import NowOpt, limit_option
from rmqstore_cli.commands.lines import note
from rmqstore_cli.commands.source_options import (
    FROM_OPTIONS,
    StoreSource,
    nothing_matched,
    states_wanted,
    store_options,
    tell_warnings,
)

EPILOG = """Examples:

  rmqstore pop --store ~/store --now 2026-11-20T04:00 --verbose

  rmqstore pop --state overdue --format jsonl | jq -c '{group, topic, queue_id, queue_offset, revive_time}'

  rmqstore pop --by revive-queue --format jsonl | jq -c '{queue_id, committed_offset, behind}'
"""


class State(str, Enum):
    acked = "acked"
    revived = "revived"
    invisible = "invisible"
    overdue = "overdue"


class By(str, Enum):
    message = "message"
    group = "group"
    revive_queue = "revive-queue"


def register(app: typer.Typer) -> None:
    app.command("pop", epilog=EPILOG)(pop)


@command
@store_options(cq_file_size=False)
def pop(
    state: Annotated[
        list[State] | None, typer.Option("--state", help="Only messages in this state (repeatable).")
    ] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", "-t", help="Only this topic (as popped).", autocompletion=complete_topic)
    ] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this POP consumer group.")] = None,
    by: Annotated[
        By, typer.Option("--by", help="The rows of --format jsonl: popped messages, groups or revive queues.")
    ] = By.message,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="The table lists the messages in --state too.")
    ] = False,
    now: NowOpt = None,
    limit: Annotated[int | None, limit_option("Print at most N messages (the counts cover all).")] = None,
    source: StoreSource = FROM_OPTIONS,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Per POP consumer group and topic: popped messages acked, revived, invisible or overdue; revive progress.

    Read from the files alone (the broker keeps POP state nowhere else): each checkpoint in
    rmq_sys_REVIVE_LOG_<cluster> (TAGS ck, PopMessageProcessor#buildCkMsg; one still in
    rmq_sys_wheel_timer is not yet delivered) lists the messages one pop took; the acks
    (TAGS ack) and batch acks (bAck) that name it set their bits, as
    PopReviveService#consumeReviveMessage merges them. A popped message is acked; revived
    (a message with its UNIQ_KEY stored in %RETRY%<group>_<topic> or %RETRY%<group>+<topic>
    after the pop, PopReviveService#reviveRetry); invisible (its revive time, pop time +
    invisible time, after --now: it is revived then); or overdue (revive time passed,
    nothing in the retry topic: the revive service has not reached it, or lost it). Revive
    progress: per revive queue, the offset committed for CID_RMQ_SYS_REVIVE_GROUP in
    config/consumerOffset.json against the queue's max offset (the service reads from
    committed + 1). The table lists the groups and the revive queues, then (--verbose) the
    messages in --state (default: invisible and overdue). Exit 1 when nothing was popped
    (or none matches).

    JSON fields (--by message): group, topic, queue_id, queue_offset, state, ack (ck, ack,
    batch-ack), uniq_key, pop_time, invisible_time, revive_time, revive_topic,
    revive_queue, revive_queue_offset, revive_processed, ck_offset, reput_times,
    broker_name, retry_topic, retry_offset, retry_store_timestamp. jsonl ends with one
    {"summary": …} line; json prints {"messages": […], "groups": […], "revive_queues": […],
    "summary": …}.
    """
    from rmqstore_cli.render_pop import emit
    from rmqstore_cli.times import parse_tz

    states, shown = states_wanted(state, fmt is Fmt.table, ["invisible", "overdue"])
    with source.api(tz) as st:
        rep = st.pop(topic=topic, group=group, state=shown, now=now, limit=limit or None)
        tell_warnings(st)
    if rep.summary["popped"] == 0 or (states and rep.summary["matched"] == 0):
        filters = {"group": group, "topic": topic, "state": states}
        raise nothing_matched("popped message", st.config.root, "no checkpoint in the revive topic", **filters)
    emit(fmt.value, rep, parse_tz(tz), by.value, verbose)
    if rep.summary["shown"] < rep.summary["matched"] and (fmt is not Fmt.table or verbose):
        note(f"{rep.summary['matched'] - rep.summary['shown']} more messages not shown (--limit)")
    if rep.summary["overdue"]:
        note(f"{rep.summary['overdue']} popped messages are overdue: due for revive, not in the retry topic")
