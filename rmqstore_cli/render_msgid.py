"""``decode-msgid``'s output: what an id says and, with a store, the messages it names, as
JSON fields or a table row. Imports stay light: no numpy."""

from __future__ import annotations

from typing import Any

from rmqstore_cli.times import format_ms

TABLE_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("host", "host"),
    ("detail", "detail"),
    ("in_store", "in store"),
    ("basis", "basis"),
]


def id_dict(r: Any, st: Any, now_v: int, zone: Any, body: str, table: bool) -> dict:
    """One id: kind and basis, the offset reading and/or the UNIQ_KEY reading, and with a
    store whether it was found, whether the host matches, and the messages."""
    from rmqstore_cli.store.answers.msgid import OFFSET_ID, UNIQ_KEY

    d: dict = {"id": r.id, "kind": r.kind, "basis": r.basis}
    show_offset = r.kind != UNIQ_KEY
    show_uniq = r.kind != OFFSET_ID
    if show_offset:
        d["store_host"] = r.offset.store_host
        d["physical_offset"] = r.offset.physical_offset
    if show_uniq:
        d.update(uniq_fields(r.uniq, now_v, zone))
    if st is not None:
        store_fields(d, r, st, body, show_offset, show_uniq)
    if table:
        _table_cells(d, r, show_offset, show_uniq, st is not None, zone)
    return d


def uniq_fields(q: Any, now_v: int, zone: Any) -> dict:
    """A UNIQ_KEY's parts (``MessageClientIDSetter``): client IP, pid, class-loader hash,
    time in its month (and the time it nearly is, near ``now_v``), counter."""
    return {
        "client_ip": q.ip_str,
        "pid": q.pid,
        "class_loader_hash": f"{q.class_loader_hash & 0xFFFFFFFF:08X}",
        "time_in_month_ms": q.time_in_month_ms,
        "nearly_time": q.nearly_time(now_v, zone),
        "counter": q.counter,
    }


def store_fields(d: dict, r: Any, st: Any, body: str, show_offset: bool, show_uniq: bool) -> None:
    """With a store: whether the id was found, whether its host is the store's, why the
    offset reading found no message, and the messages of each reading shown."""
    from rmqstore_cli.store.answers.msgid import store_host_matches

    d["found"] = r.found
    if show_offset:
        d["host_matches_store"] = store_host_matches(r)
        if r.offset_message is None and r.offset_problem:
            d["offset_problem"] = r.offset_problem
    msgs = ([r.offset_message] if r.offset_message is not None and show_offset else []) + [
        m for m in r.uniq_messages if show_uniq
    ]
    d["messages"] = _messages(msgs, st, body)


def _messages(msgs: list, st: Any, body: str) -> list[dict]:
    """Each message once (by offset), as dump-commitlog prints it."""
    from rmqstore_cli.store.records.message_view import entry_fields, message_dict

    seen: set[int] = set()
    out = []
    for m in msgs:
        if m.offset in seen:
            continue
        seen.add(m.offset)
        f = st.commitlog.queue.find(m.offset)
        out.append(
            {**message_dict(m, body, True, f.name if f else ""), **entry_fields(st.commitlog.entry_of(m.offset))}
        )
    return out


def _table_cells(d: dict, r: Any, show_offset: bool, show_uniq: bool, in_store: bool, zone: Any) -> None:
    """The table's host, detail and in-store cells, both readings side by side."""
    hosts, details = [], []
    if show_offset:
        hosts.append(r.offset.store_host)
        details.append(f"offset {r.offset.physical_offset}")
    if show_uniq:
        hosts.append(d["client_ip"])
        details.append(
            f"pid {d['pid']}, class loader {d['class_loader_hash']}, "
            f"nearly {format_ms(d['nearly_time'], zone)}, counter {d['counter']}"
        )
    d["host"] = " | ".join(hosts)
    d["detail"] = " | ".join(details)
    if in_store:
        found = [f"{m['topic']}@{m['physical_offset']}" for m in d["messages"]]
        d["in_store"] = ", ".join(found) if found else "not found"
        if d.get("host_matches_store") is False:
            d["in_store"] += " (store host differs)"
