"""``rmqstore diff``: what changed between two snapshots of a store (``rmqstore_cli.diff_stores``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import BrokerConfOpt, Fmt, FormatOpt, command, conf_path, no_such_topic
from rmqstore_cli.commands.grammar import limit_option
from rmqstore_cli.commands.lines import note, warn

from rmqstore_cli.render import Col

EPILOG = """Examples:

  rmqstore diff /backup/master-store /data/rocketmq/store

  rmqstore diff old-master new-master --topic OrderTopic --messages --format jsonl | jq 'select(.kind == "message")'

  rmqstore diff a b --format json | jq .messages_only_a
"""

#: a path or queue (what) is cut last: at least 40 cells before A and B go under the row
COLUMNS = [("kind", "kind"), Col("what", "what", right=None, cap=60, least=40), ("a", "A", 40), ("b", "B", 40)]
COLUMNS += [("detail", "detail", 80)]


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
    from rmqstore_cli.render import Output, print_summary, to_json

    conf = conf_path(broker_conf)
    stores = [open_store(p, conf, allow_odd_size=True) for p in (store_a, store_b)]
    missing = [no_such_topic(st.engine, topic) for st in stores] if topic is not None else [None]
    if all(missing):
        raise missing[0]  # in neither store: the closest names, exit 1
    out = None if fmt is Fmt.json else Output(fmt.value, COLUMNS, title=f"diff {store_a} {store_b}")
    rows: list[dict] = []
    shown = total = 0
    summary: dict = {}
    try:
        for r in diff_stores(stores[0], stores[1], topic=topic, messages=messages):
            d = r.as_dict()
            if d["kind"] == "summary":
                summary = d
                continue
            total += 1
            if not limit or shown < limit:
                shown += 1
                if out is None:
                    rows.append(d)
                else:
                    out.emit(d if fmt is Fmt.jsonl else cells(d))
    finally:
        if out is not None:
            out.close()
        for st in stores:
            for w in st.warnings:
                warn(w)
            st.close()
    if fmt is Fmt.json:
        sys.stdout.write(to_json({**{k: v for k, v in summary.items() if k != "kind"}, "rows": rows}) + "\n")
    elif fmt is Fmt.jsonl:
        sys.stdout.write(to_json(summary) + "\n")
    else:
        print_summary("table", {k: v for k, v in summary.items() if k != "kind"}, title="diff")
    if total > shown:
        note(f"{total - shown} more rows not shown (--limit {limit})")
    if not summary["same"]:
        raise typer.Exit(1)


def cells(d: dict) -> dict:
    """One table row of a diff row: kind, what it is about, A's side, B's side, and a word."""
    k = d["kind"]
    if k == "file":
        at = "" if d["first_difference"] is None else f", first difference at byte {d['first_difference']}"
        return {"kind": k, "what": d["path"], "a": d["size_a"], "b": d["size_b"], "detail": d["status"] + at}
    if k == "divergence":
        a, b = (record(d[s]) for s in ("a", "b"))
        past = f"A goes {d['past_a']} bytes past it, B {d['past_b']}"
        return {"kind": k, "what": f"commit log at {d['offset']}", "a": a, "b": b, "detail": past}
    where = f"{d['topic']}/{d['queue_id']}"
    if k == "queue":
        a, b = (
            f"{d['min_offset_' + s]}..{d['max_offset_' + s]}" if d["max_offset_" + s] is not None else "-" for s in "ab"
        )
        parts = [f"only in A: {d['messages_only_a']}", f"only in B: {d['messages_only_b']}"]
        if d["units_changed"]:
            parts.append(f"{d['units_changed']} units differ from {d['first_changed']}")
        return {"kind": k, "what": where, "a": a, "b": b, "detail": "; ".join(parts)}
    if k == "unit":
        a, b = (record(d[s]) for s in ("a", "b"))
        return {"kind": k, "what": f"{where}@{d['queue_offset']}", "a": a, "b": b, "detail": "differs in place"}
    if k == "message":
        side = {"a": d["msg_id"] or "-", "b": ""} if d["side"] == "a" else {"a": "", "b": d["msg_id"] or "-"}
        crc = f"only in {d['side'].upper()}; body crc {d['body_crc']}"
        return {"kind": k, "what": f"{where}@{d['queue_offset']}", **side, "detail": crc}
    gone = "gone in B" if d["b"] is None else "moved backwards"
    return {"kind": k, "what": f"{d['group']} {where}", "a": d["a"], "b": d["b"], "detail": gone}


def record(r: dict | None) -> str:
    """A divergence side (topic/queue@offset msgid) or a unit (offset+size tags code) in a cell."""
    if r is None:
        return "-"
    if "topic" in r:
        return f"{r['topic']}/{r['queue_id']}@{r['queue_offset']} {r['msg_id']}"
    return f"{r['commitlog_offset']}+{r['size']} tags {r['tags_code']}"
