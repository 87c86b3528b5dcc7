"""``rmqstore dump-timer``: the 5.x timer store (wheel, timer log, checkpoint) and what it delivers next."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    JAVA_INT_MAX,
    AllowOddSizeOpt,
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Fmt,
    FormatOpt,
    StoreOpt,
    TzOpt,
    command,
    complete_topic,
)
from rmqstore_cli.formats.timer import MIN_BLANK_LEN, UNIT_SIZE

#: The smallest timer-log file: one unit and the blank ``TimerLog#append`` keeps room for.
UNIT_MIN = UNIT_SIZE + MIN_BLANK_LEN

EPILOG = """Examples:

  rmqstore dump-timer --store ~/store --summary

  rmqstore dump-timer --store ~/store --begin now --end +1h

  rmqstore dump-timer --store ~/store --units --topic OrderTopic --format jsonl

  rmqstore dump-timer --store ~/store --next 20
"""

SLOT_COLUMNS = [
    ("due_time", "due time"),
    ("index", "slot"),
    ("num", "num"),
    ("first_pos", "first pos"),
    ("last_pos", "last pos"),
    ("state", "state"),
]
UNIT_COLUMNS = [
    ("pos", "pos"),
    ("due_time", "due time"),
    ("flags", "flags"),
    ("commitlog_offset", "commitlog offset"),
    ("size", "size"),
    ("real_topic", "real topic", 40),
    ("real_queue_id", "queue"),
    ("keys", "keys", 30),
    ("msg_id", "msgId"),
    ("state", "state"),
    ("message_status", "message", 60),
]
NEXT_COLUMNS = [
    ("action", "action"),
    ("source", "from"),
    ("due_time", "due time"),
    ("real_topic", "real topic", 40),
    ("real_queue_id", "queue"),
    ("keys", "keys", 30),
    ("uniq_key", "uniq key"),
    ("commitlog_offset", "commitlog offset"),
    ("message_status", "message", 60),
]


def register(app: typer.Typer) -> None:
    app.command("dump-timer", epilog=EPILOG)(dump_timer)


@command
def dump_timer(
    store: StoreOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    timer_log_file_size: Annotated[
        int | None,
        typer.Option(
            "--timer-log-file-size",
            min=UNIT_MIN,
            max=JAVA_INT_MAX,
            help="mappedFileSizeTimerLog, if not in --broker-conf (else the timer-log files' own size).",
        ),
    ] = None,
    timer_precision_ms: Annotated[
        int | None,
        typer.Option(
            "--timer-precision-ms",
            min=1,
            max=JAVA_INT_MAX,
            help="timerPrecisionMs, if not in --broker-conf (default 1000).",
        ),
    ] = None,
    allow_odd_size: AllowOddSizeOpt = False,
    units: Annotated[
        bool,
        typer.Option(
            "--units", help="Timer-log units (in log order) with the rmq_sys_wheel_timer message each points at."
        ),
    ] = False,
    next_n: Annotated[
        int | None,
        typer.Option("--next", min=1, help="What the broker does next after it starts, up to N messages (see below)."),
    ] = None,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary", help="The checkpoint, the wheel's geometry, the timer-log files and the broker's recovery."
        ),
    ] = False,
    begin: Annotated[
        str | None,
        typer.Option(
            help="Due time from (ISO 8601, epoch seconds if 10 digits, epoch ms if 13 or more, now, -2h, +2h)."
        ),
    ] = None,
    end: Annotated[str | None, typer.Option(help="Due time up to (inclusive; the forms of --begin).")] = None,
    topic: Annotated[
        str | None,
        typer.Option(
            help="With --units or --next: only messages whose real topic (REAL_TOPIC) is this.",
            autocompletion=complete_topic,
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option(help="The broker's start time for --next and --summary (the forms of --begin; default now)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="Print at most this many records.")] = None,
    fmt: FormatOpt = Fmt.table,
    tz: TzOpt = None,
) -> None:
    """Print the timer store: the wheel's slots, the timer log's units, and what comes next.

    Without --units/--next/--summary: the wheel's non-empty slots by due time, with their
    message count and timer-log chain (first and last position); state is pending (the
    checkpoint's read time has not reached it), passed (already dequeued: the broker never
    clears a slot) or misplaced (its time belongs to another slot index). --units: every
    timer-log unit up to where the broker's recovery ends the log, with the message it
    points at (topic, real topic and queue, keys, msgId) and message ok or what is wrong
    there (such a unit stalls the broker's dequeue). --begin/--end filter by due time.

    --next N replays TimerMessageStore#recover and then #enqueue and #dequeue: first the
    rmq_sys_wheel_timer messages from the recovered queue offset on (enqueue; a message
    already due goes straight to delivery), then the slots from the recovered read time on,
    each slot's chain read back from its last position: delete marks first, then its
    messages oldest first. action: deliver, enqueue, roll (put back on the wheel), deleted
    (a delete mark names it), delete-mark, stuck (the dequeue retries it for ever,
    apache/rocketmq#10668) or skip (no message there).

    JSON fields (slots): index, time_ms, first_pos, last_pos, num, magic, state. Units:
    pos, prev_pos, magic, roll, delete, enqueue_time, due_ms, commitlog_offset, size,
    topic_hash, message_status, topic, real_topic, real_queue_id, keys, uniq_key, msg_id,
    timer_out_ms, state. --next adds source, action and slot_time_ms or queue_offset.
    Exit 1 when nothing is printed or the store has no timer files.
    """
    from rmqstore_cli.commands.common import load_config, warn_odd_files

    from rmqstore_cli.errors import NotFound, UsageError
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store import timer_report
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.timer import schedule
    from rmqstore_cli.times import check_window, now_ms, parse_time, parse_tz

    zone = parse_tz(tz)
    if sum([units, next_n is not None, summary]) > 1:
        raise UsageError("choose one of --units, --next and --summary")
    b = parse_time(begin, "--begin", tz=zone) if begin else None
    e = parse_time(end, "--end", tz=zone) if end else None
    check_window(b, e, zone)
    at = parse_time(now, "--now", tz=zone) if now else now_ms()
    cfg = load_config(store, broker_conf, commitlog_file_size, cq_file_size)
    for attr, value in (
        ("mapped_file_size_timer_log", timer_log_file_size),
        ("timer_precision_ms", timer_precision_ms),
    ):
        if value is not None:
            setattr(cfg, attr, value)
            cfg.explicit.add(attr)
    cfg.allow_odd_size = allow_odd_size
    ms = MessageStore.open(cfg, zone, defer_index=True)
    warn_odd_files(cfg)
    ts = timer_report.open_timer(cfg)
    if b is not None and b == e and not (units or summary or next_n):  # one due time: TimerWheel#getSlot
        rows = timer_report.one_slot(ts, b)
        if _emit(rows, SLOT_COLUMNS, f"{cfg.root}: timer wheel", fmt, zone, limit) == 0:
            raise NotFound("no timer slot, unit or message matched")
        return
    if not cfg.timer_wheel_path.exists():
        print(f"rmqstore: warning: {timer_report.NO_WHEEL}", file=sys.stderr)
    view = schedule.load(ts)
    if summary:
        _print_summary(ts, view, timer_report.summary(ts, view, ms, at), fmt)
        return
    if next_n is not None:
        rows, notes = timer_report.next_rows(view, ms, next_n, at, topic)
        for note in notes:
            print(f"rmqstore: note: {safe_text(note)}", file=sys.stderr)
        cols, title = NEXT_COLUMNS, f"{cfg.root}: next from the timer"
    elif units:
        rows, cols, title = (
            schedule.unit_records(view, ms.commitlog, b, e, topic),
            UNIT_COLUMNS,
            f"{cfg.root}: timer log",
        )
    else:
        if topic is not None:
            raise UsageError("--topic goes with --units or --next (a slot holds messages of any topic)")
        rows, cols, title = schedule.slot_records(view, b, e), SLOT_COLUMNS, f"{cfg.root}: timer wheel"
    if _emit(rows, cols, title, fmt, zone, limit) == 0:
        raise NotFound("no timer slot, unit or message matched")


def _emit(rows, cols, title: str, fmt: Fmt, zone, limit: int | None) -> int:
    from rmqstore_cli.render import Output
    from rmqstore_cli.times import format_ms

    out = Output(fmt.value, cols, title=title)
    try:
        for r in rows:
            if limit is not None and out.count >= limit:
                break
            if fmt.value == "table":
                t = r.get("time_ms", r.get("due_ms"))
                r = dict(
                    r,
                    due_time=format_ms(t, zone) if t is not None else "",
                    keys=" ".join(r.get("keys") or []),
                    flags="".join(f for f, on in (("R", r.get("roll")), ("D", r.get("delete"))) if on),
                )
            out.emit(r)
    finally:
        out.close()
    return out.count


def _print_summary(ts, view, d: dict, fmt: Fmt) -> None:
    """One record: the checkpoint, the wheel, the timer-log files, the log's end and the recovery."""
    from rmqstore_cli.render import Output, to_json

    if fmt.value != "table":
        from rmqstore_cli.render import print_summary

        print_summary(fmt.value, d, "timer store")
        return
    cp = d["checkpoint"] or {}
    rows = [
        (
            "wheel",
            f"{d['wheel']['size']} bytes, {d['wheel']['slotsTotal']} slots x 2, "
            f"precision {d['wheel']['precisionMs']} ms; {d['slots']} non-empty slots",
        ),
        (
            "timer log",
            f"{len(d['timer_log_files'])} files, {d['units']} units, ends at {view.end.offset} ({view.end.reason})",
        ),
        *((k, to_json(v) if isinstance(v, dict) else str(v)) for k, v in cp.items()),
        *((f"recovery {k}", str(v)) for k, v in d["recovery"].items() if k != "notes"),
        *(("note", n) for n in d["recovery"]["notes"]),
    ]
    out = Output("table", [("what", "what"), ("value", "value")], title=f"{ts.config.root}: timer store")
    for k, v in rows:
        out.emit({"what": k, "value": v})
    out.close()
