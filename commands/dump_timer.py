"""``rmqstore dump-timer``: the 5.x timer store (wheel, timer log, checkpoint) and what it delivers next."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rmqstore_cli.commands import common, grammar, lines, timer_options

EPILOG = """Examples:

  rmqstore dump-timer --store ~/store --summary

  rmqstore dump-timer --store ~/store --begin now --end +1h

  rmqstore dump-timer --store ~/store --units --topic OrderTopic --format jsonl

  rmqstore dump-timer --store ~/store --next --limit 20 --now 2026-11-22T10:00

  rmqstore dump-timer --store ~/store --overdue --summary --now 2026-11-22T10:00

--next takes no number: --limit caps what it prints. The old --next N still works (a
note says to type --next --limit N) and replays N rows before --topic keeps its own.
"""


def register(app: typer.Typer) -> None:
    # extra words: the N of the old --next N (grammar.old_count)
    app.command("dump-timer", epilog=EPILOG, context_settings={"allow_extra_args": True})(dump_timer)


@common.command
def dump_timer(
    ctx: typer.Context,
    store: common.StoreOpt = None,
    broker_conf: common.BrokerConfOpt = None,
    commitlog_file_size: common.CommitlogSizeOpt = None,
    cq_file_size: common.CqSizeOpt = None,
    timer_log_file_size: timer_options.TimerLogSizeOpt = None,
    timer_precision_ms: timer_options.TimerPrecisionOpt = None,
    allow_odd_size: common.AllowOddSizeOpt = False,
    units: timer_options.UnitsOpt = False,
    next_: timer_options.NextOpt = False,
    summary: timer_options.SummaryOpt = False,
    overdue: timer_options.OverdueOpt = False,
    begin: Annotated[str | None, grammar.begin_option("Due time")] = None,
    end: Annotated[str | None, grammar.end_option("Due time")] = None,
    topic: timer_options.TopicOpt = None,
    now: grammar.NowOpt = None,
    limit: Annotated[int | None, grammar.limit_option("Print at most this many records.")] = None,
    fmt: common.FormatOpt = common.Fmt.table,
    tz: common.TzOpt = None,
) -> None:
    """Print the timer store: the wheel's slots, the timer log's units, and what comes next.

    Without --units/--next/--summary: the wheel's non-empty slots by due time, with their
    message count and timer-log chain (first and last position); state is pending (the
    checkpoint's read time has not reached it), passed (already dequeued: the broker never
    clears a slot) or misplaced (its time belongs to another slot index). --units: every
    timer-log unit up to where the broker's recovery ends the log, with the message it
    points at (topic, real topic and queue, keys, msgId) and message ok or what is wrong
    there (such a unit stalls the broker's dequeue). --begin/--end filter by due time.

    --next replays TimerMessageStore#recover and then #enqueue and #dequeue: first the
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
    --overdue: the timer wheel's and the delay levels' (SCHEDULE_TOPIC_XXXX) messages due
    before --now and not delivered (a 4.x store: delay levels only). Fields: source (timer,
    delay), state (behind, passed, not-enqueued, pending, no-level), due_ms, late_ms,
    real_topic, level, queue_offset, timer_pos, commitlog_offset, size, msg_id, uniq_key,
    keys. With --summary: the levels and, per real topic, count, oldest and max lateness.
    --now is the broker's start time for --next and --summary, and what --begin now or -2h
    is read against.
    Exit 1 when nothing is printed or the store has no timer files.
    """
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.render_timer import print_timer_summary
    from rmqstore_cli.store.answers import timer_report
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.timer import schedule
    from rmqstore_cli.times import parse_tz

    zone = parse_tz(tz)
    replay = grammar.old_count(ctx.args, next_, "--next", "--next --limit N")
    if sum([units, next_, summary and not overdue, overdue]) > 1:
        raise UsageError("choose one of --units, --next, --summary and --overdue (--overdue --summary goes)")
    at = grammar.clock(now, zone)
    b, e = grammar.window(begin, end, at, zone)
    cfg = common.load_config(store, broker_conf, commitlog_file_size, cq_file_size)
    timer_report.set_sizes(cfg, timer_log_file_size, timer_precision_ms)
    cfg.allow_odd_size = allow_odd_size
    ms = MessageStore.open(cfg, zone, defer_index=True)
    common.warn_odd_files(cfg)
    if overdue:
        timer_options.dump_overdue(ms, at, (b, e), topic, summary, fmt.value, zone, limit)
        return
    ts = timer_report.open_timer(cfg)
    mode = _mode(next_, units)
    if _one_due_time(b, e, units or summary or next_):  # one due time: TimerWheel#getSlot
        _emit(timer_report.one_slot(ts, b), mode, cfg.root, fmt.value, zone, limit)
        return
    if not cfg.timer_wheel_path.exists():
        lines.warn(timer_report.NO_WHEEL)
    view = schedule.load(ts)
    if summary:
        print_timer_summary(cfg.root, view.end, timer_report.summary(ts, view, ms, at), fmt.value)
        return
    rows = _view_rows(view, ms, mode, (b, e), topic, replay, at)
    _emit(rows, mode, cfg.root, fmt.value, zone, limit)


def _view_rows(view: Any, ms: Any, mode: str, window: tuple, topic: str | None, replay: Any, at: int) -> Any:
    """The slots, units or replay rows, their notes on stderr first; --topic has no meaning for a slot."""
    from rmqstore_cli.errors import UsageError
    from rmqstore_cli.store.answers import timer_report

    if mode == "slots" and topic is not None:
        raise UsageError("--topic goes with --units or --next (a slot holds messages of any topic)")
    rows, notes = timer_report.dump_rows(view, ms, mode, window, topic, replay, at)
    for n in notes:
        lines.note(n)
    return rows


def _mode(next_: bool, units: bool) -> str:
    """What the rows are: --next's replay, --units' timer-log units, else the wheel's slots."""
    return "next" if next_ else "units" if units else "slots"


def _one_due_time(b: int | None, e: int | None, other_view: bool) -> bool:
    """--begin equal to --end (and no other view) asks for the one slot of that due time."""
    return b is not None and b == e and not other_view


def _emit(rows: Any, mode: str, root: Any, fmt: str, zone: Any, limit: int | None) -> None:
    """Print the rows; none printed is exit 1 (NotFound), whatever the view."""
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render_timer import emit_rows

    if emit_rows(rows, mode, root, fmt, zone, limit) == 0:
        raise NotFound("no timer slot, unit or message matched")
