"""``rmqstore diff``: what changed between two snapshots of a store (``rmqstore_cli.diff_stores``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import BrokerConfOpt, Fmt, FormatOpt, command, conf_path, no_such_topic
from rmqstore_cli.commands.grammar import limit_option
from rmqstore_cli.commands.lines import note, warn

EPILOG = """Examples:

  rmqstore diff /backup/master-store /data/rocketmq/store

  rmqstore diff old-master new-master --topic OrderTopic --messages --format jsonl | jq 'select(.kind == "message")'

  rmqstore diff a b --format json | jq .messages_only_a
"""


def register(app: typer.Typer) -> None:
    app.command("diff", epilog=EPILOG)(diff)


@command
def diff(
    store_a: Annotated[Path, typer.Argument(metavar="STORE_A", help="The first store (the old one, the master).")],
    store_b: Annotated[Path, typer.Argument(metavar="STORE_B", help="The second store (the new one, the slave).")],
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Only this topic's queues and offsets.")] = None,
    messages: Annotated[
        bool, typer.Option("--messages", help="A row per message only in one store and per unit that differs.")
    ] = False,
    limit: Annotated[int | None, limit_option("Print at most N rows (0: all); the summary counts them all.")] = None,
    broker_conf: BrokerConfOpt = None,
    fmt: FormatOpt = Fmt.table,
) -> None:
    """What changed between two snapshots of a store: files, the commit logs, queues, consumer offsets.

    Files added, removed and changed under commitlog/, consumequeue/, index/, config/*.json
    and checkpoint (sizes, and the first differing byte); where the two commit logs first
    part (the global offset, the record there in each, how far each goes past it); per
    consume queue the queue offset ranges only one store holds and the units that differ in
    place (same queue offset, other commit-log offset, size or tags code); the consumer
    offsets of config/consumerOffset.json that moved backwards from STORE_A to STORE_B
    (those that moved forward are counted). Both stores are only read; --broker-conf
    applies to both, and files of an odd size are read up to their real length.
    Exit 0 when the stores are the same, 1 when they differ (as diff(1)).

    JSON fields: kind (file, divergence, queue, unit, message, offset, summary); file:
    path, status (added, removed, changed), size_a, size_b, first_difference; divergence:
    offset, first_byte, a, b (topic, queue_id, queue_offset, msg_id, store_timestamp,
    total_size), end_a, end_b, past_a, past_b; queue: topic, queue_id, min_offset_a,
    max_offset_a, min_offset_b, max_offset_b, only_a, only_b ([from, to) ranges),
    messages_only_a, messages_only_b, units_changed, first_changed; unit: topic, queue_id,
    queue_offset, a, b (commitlog_offset, size, tags_code); message: side, topic, queue_id,
    queue_offset, physical_offset, size, msg_id, body_crc, store_timestamp; offset: group,
    topic, queue_id, a, b.
    """
    from rmqstore_cli import diff_stores, open_store
    from rmqstore_cli.render_diff import emit_diff_rows, print_diff_summary

    conf = conf_path(broker_conf)
    stores = [open_store(p, conf, allow_odd_size=True) for p in (store_a, store_b)]
    missing = [no_such_topic(st.engine, topic) for st in stores] if topic is not None else [None]
    if all(missing):
        raise missing[0]  # in neither store: the closest names, exit 1
    try:
        rows = diff_stores(stores[0], stores[1], topic=topic, messages=messages)
        tally = emit_diff_rows(rows, fmt.value, limit, f"diff {store_a} {store_b}")
    finally:
        for st in stores:
            for w in st.warnings:
                warn(w)
            st.close()
    print_diff_summary(fmt.value, tally)
    if tally.total > tally.shown:
        note(f"{tally.total - tally.shown} more rows not shown (--limit {limit})")
    if not tally.summary["same"]:
        raise typer.Exit(1)
