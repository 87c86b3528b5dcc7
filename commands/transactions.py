"""``rmqstore transactions``: what happened to the transactional messages, offline."""

from __future__ import annotations

import sys
from datetime import tzinfo
from enum import Enum
from typing import Annotated, Any

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

  rmqstore transactions --store ~/store --now 2026-11-20T04:00

  rmqstore transactions --state pending --format jsonl | jq -c '{uniq_key, age_ms, check_times}'

  rmqstore transactions --group tx-group --topic OrderTopic --format json | jq .summary
"""


class State(str, Enum):
    pending = "pending"
    committed = "committed"
    rolled_back = "rolled-back"
    discard = "discard"


GROUP_COLUMNS = [("producer_group", "producer group", 40), ("topic", "topic", 40), ("committed", "committed")]
GROUP_COLUMNS += [("rolled_back", "rolled back"), ("pending", "pending"), ("discard", "discard")]
GROUP_COLUMNS += [("oldest", "oldest pending born"), ("max_check_times", "max checks")]
TX_COLUMNS = [("producer_group", "producer group", 32), ("topic", "topic", 32), ("uniq_key", "uniq key")]
TX_COLUMNS += [("kind", "kind"), ("state", "state"), ("age", "age"), ("checks", "checks")]
TX_COLUMNS += [("half_offset", "half offset"), ("discard_reason", "discard reason")]


def register(app: typer.Typer) -> None:
    app.command("transactions", epilog=EPILOG)(transactions)


@command
@store_options(cq_file_size=False)
def transactions(
    state: Annotated[
        list[State] | None, typer.Option("--state", help="Only transactions in this state (repeatable).")
    ] = None,
    topic: Annotated[
        str | None, typer.Option("--topic", "-t", help="Only this real topic.", autocompletion=complete_topic)
    ] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only this producer group.")] = None,
    now: NowOpt = None,
    limit: Annotated[int | None, limit_option("Print at most N transactions (the counts cover all).")] = None,
    source: StoreSource = FROM_OPTIONS,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Per producer group and topic: transactional messages committed, rolled back, pending or to be discarded.

    Read from the commit log alone (mqadmin answers this only from a live broker): each
    half message (RMQ_SYS_TRANS_HALF_TOPIC, TransactionalMessageBridge#parseHalfMessageInner)
    is paired with the COMMIT record naming it (PREPAREDTRANSACTIONOFFSET,
    EndTransactionProcessor) and the op record listing its half queue offset
    (RMQ_SYS_TRANS_OP_HALF_TOPIC, TAGS d). Committed: a COMMIT record names it; rolled-back:
    an op record ends it with no commit; pending: nothing ends it yet, so the broker checks
    it back with the producer; discard: pending, but the broker's next check gives it up
    (TransactionalMessageServiceImpl#needDiscard: its TRANSACTION_CHECK_TIMES reached
    transactionCheckMax, from --broker-conf, default 15; #needSkip: born more than
    fileReservedTime hours before --now). Halves re-put by the check (same UNIQ_KEY) count
    as one transaction. Pre-4.3 PREPARED records in the real topic (kind prepared) are
    paired with their COMMIT or ROLLBACK record. The table lists the groups, then the
    transactions in --state (default: pending and discard). Exit 1 when no transaction
    matches.

    JSON fields: producer_group, topic, queue_id, uniq_key, state, kind (half, prepared),
    half_offset, half_queue_offset, half_records, check_times, born_timestamp,
    store_timestamp, age_ms, end_offset, op_offset, discard_reason (check-max,
    file-reserved-time). jsonl ends with one {"summary": …} line (counts by state,
    committed_without_op, ops_without_half, ends_without_prepare, bad_op_entries, now,
    transaction_check_max, file_reserved_time, groups); json prints {"transactions": […],
    "groups": […], "summary": …}.
    """
    states, shown = states_wanted(state, fmt is Fmt.table, ["pending", "discard"])
    with source.api(tz) as st:
        rep = st.transactions(topic=topic, group=group, state=shown, now=now, limit=limit or None)
        tell_warnings(st)
    if rep.summary["transactions"] == 0 or (states and rep.summary["matched"] == 0):
        raise nothing_matched("transactional message", st.config.root, None, group=group, topic=topic, state=states)
    _render(fmt, rep, tz)
    if rep.summary["shown"] < rep.summary["matched"]:
        note(f"{rep.summary['matched'] - rep.summary['shown']} more transactions not shown (--limit)")


def _render(fmt: Fmt, rep: Any, tz: str | None) -> None:
    """The report in --format: JSON as the API's records say it (jsonl: a line per transaction, then the
    summary), else the groups, the transactions shown and the commits the broker will still check back."""
    from rmqstore_cli.render import to_json
    from rmqstore_cli.times import parse_tz

    if fmt is not Fmt.table:
        lines = [rep.as_dict()] if fmt is Fmt.json else [t.as_dict() for t in rep.transactions]
        sys.stdout.write("".join(to_json(d) + "\n" for d in lines + ([{"summary": rep.summary}] * (fmt is Fmt.jsonl))))
        return
    zone, s = parse_tz(tz), rep.summary
    _group_table(s, rep.groups, zone)
    if rep.transactions:
        _transaction_table(rep.transactions, s["transaction_check_max"])
    if s["committed_without_op"]:
        note(f"{s['committed_without_op']} committed transactions have no op record: the broker checks them back")


def _group_table(s: dict[str, Any], groups: list[Any], zone: tzinfo | None) -> None:
    """A row per producer group and topic, under the counts by state and the limit and --now they rest on."""
    from rmqstore_cli.render import Output
    from rmqstore_cli.times import format_ms

    title = (
        f"{s['store']}: {s['transactions']} transactions: {s['committed']} committed, {s['rolled_back']} rolled back, "
        f"{s['pending']} pending, {s['discard']} to discard (transactionCheckMax {s['transaction_check_max']}, "
        f"now {format_ms(s['now'], zone)})"
    )
    out = Output("table", GROUP_COLUMNS, title=title)
    for g in groups:
        ts = g.oldest_pending_born_timestamp
        out.emit({**g.as_dict(), "oldest": "" if ts is None else format_ms(ts, zone)})
    out.close()


def _transaction_table(transactions: list[Any], check_max: int) -> None:
    """After a blank line, a row per transaction shown: its age and checks out of transactionCheckMax."""
    from rmqstore_cli.render import Output
    from rmqstore_cli.times import format_age

    sys.stdout.write("\n")
    out = Output("table", TX_COLUMNS, title="transactions")
    for t in transactions:
        age_text = "" if t.age_ms is None else format_age(t.age_ms)
        checks_text = "" if t.check_times is None else f"{t.check_times}/{check_max}"
        out.emit({**t.as_dict(), "age": age_text, "checks": checks_text, "discard_reason": t.discard_reason or ""})
    out.close()
