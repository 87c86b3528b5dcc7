"""Will the broker start on this store? The verdict verify's summary ends with.

It replays, from verify's findings and a few facts verify gathered, the start-up path of the
broker (``BrokerController#initialize`` → managers' ``ConfigManager#load`` →
``DefaultMessageStore#load`` → ``#recover`` → ``#start``) for the store's version, and names
for each thing on that path what the broker would do (the Java exception or log line) and
the command that repairs it. A reason is *fatal* when the broker would not start.

What stops a start (``fatal``):
- a manager's ``.bak`` that does not decode after its file did not (``ConfigManager#loadBak``
  returns false; see ``store/configfiles.py``);
- a commit-log or consume-queue file whose length is not the configured size
  (``MappedFileQueue#doLoad``: "length not matched message store config value, please check
  it manually", load returns false; 5.x first deletes an empty *last* file: "size is 0, auto
  delete") or that is not a regular file (its ``File#length`` is 0 or a directory's);
- 5.0.0–5.3.3 only, ``ConsumeQueue#correctMinOffset`` on a queue whose recovered last file is
  empty (apache/rocketmq#9728): see :func:`empty_last_file_throws`;
- a live broker holding ``lock`` (``DefaultMessageStore#start``: "Lock failed,MQ already
  started").

What the broker survives, with loss (not fatal): a config file replaced by its ``.bak`` or by
nothing, recovery truncating the commit log, consume-queue units beyond the commit log's end
(``truncateDirtyLogicFiles``), a missing ``index/`` while indexing is on, no checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.configfiles import ConfigLoad, load_broker_configs


@dataclass
class Reason:
    """One thing on the broker's start-up path, what the broker does with it and the repair."""

    fatal: bool
    file: str
    detail: str
    repair: str | None = None

    def as_dict(self) -> dict:
        return {"fatal": self.fatal, "file": self.file, "detail": self.detail, "repair": self.repair}


@dataclass
class BrokerStart:
    """``broker_start`` in verify's summary."""

    starts: bool
    recovery: str  # "normal" | "abnormal"
    version: str
    reasons: list[Reason] = field(default_factory=list)
    version_source: str = "option"  # "option" | "detected" | "assumed"

    def as_dict(self) -> dict:
        return {"starts": self.starts, "recovery": self.recovery, "version": self.version,
                "version_source": self.version_source, "reasons": [r.as_dict() for r in self.reasons]}

    def line(self) -> str:
        """The one line verify's table ends with."""
        fatal = [r for r in self.reasons if r.fatal]
        said = "" if self.version_source != "assumed" else ", assumed: pass --broker-version"
        head = (f"broker start ({self.version}{said}): "
                + ("would start" if self.starts else "would NOT start")
                + f", {self.recovery} recovery")
        if fatal:
            return head + f": {fatal[0].file}: {fatal[0].detail}" + (f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else "")
        others = len(self.reasons)
        return head + (f"; {others} thing(s) it repairs or loses on the way (see broker_start.reasons)" if others else "")


@dataclass
class QueueEnd:
    """A consume queue as ``ConsumeQueue#recover`` leaves it (the inputs of
    :func:`empty_last_file_throws`)."""

    topic: str
    queue_id: int
    last_file_from: int  # the file offset of the queue's last file after recover's truncateDirtyFiles
    recovered_end: int  # recover's processOffset: the logical end of the valid units
    redispatched: bool = False  # recovery dispatches a message of this queue at or after recovered_end


def config_reasons(loads: list[ConfigLoad]) -> list[Reason]:
    """What ``ConfigManager#load``/``#loadBak`` do with each config file that is not simply loaded."""
    out = []
    for ld in loads:
        name = f"config/{ld.config.name}"
        why = "; ".join(ld.notes)
        if ld.source == "fails":
            out.append(Reason(True, name + ".bak", f"{why}: 'load {ld.config.name}.bak Failed' "
                              f"({ld.config.manager}#load returns false, BrokerController#initialize fails)",
                              f"restore config/{ld.config.name} from a backup, or move it and its .bak aside "
                              f"(the broker then starts with an empty {ld.config.manager})"))
        elif ld.source == "bak" and ld.notes and "does not decode" in ld.notes[0]:
            out.append(Reason(False, name, f"{why}: 'load {ld.config.name} failed, and try to load backup file'; "
                              "the broker loads the .bak, losing changes since its last persist",
                              f"none needed; compare config/{ld.config.name}.bak with what you expect"))
        elif ld.source == "none" and any("does not decode" in n for n in ld.notes):
            out.append(Reason(False, name, f"{why}: the broker starts with an empty {ld.config.manager} "
                              "(ConfigManager#loadBak finds no backup)",
                              f"restore config/{ld.config.name} from a backup before starting"))
        elif ld.source == "unreadable":
            out.append(Reason(False, name, f"{why}: cannot tell what the broker makes of it", None))
    return out


def empty_last_file_throws(version: str, q: QueueEnd, consume_queues_truncated: bool) -> bool:
    """5.0.0–5.3.3 ``ConsumeQueue#correctMinOffset`` (apache/rocketmq#9728, #10108).

    It reads the queue's last unit with ``lastMappedFile.selectMappedBuffer(readPosition - 20,
    20)`` before any try/catch; when recover left the last file empty (read position 0) that
    is ``position(-20)``: IllegalArgumentException, "load exception" in
    ``DefaultMessageStore#load`` and no start. It happens when all of these hold:
    - recover's end is the start of a kept file, beyond 0 (``#getMaxOffset`` > minLogicOffset 0):
      the file after a full one is all zeros (lost to async flush);
    - the commit log's recovery does not call ``truncateDirtyLogicFiles`` (only when
      maxPhyOffsetOfConsumeQueue >= its processOffset; that call would take the zero unit as a
      unit below the offset and move the read position to 20);
    - no message of the queue at or after that offset is dispatched during recovery (it
      would be written at position 0).
    4.9.x reads the first file from position 0 with ``selectMappedBuffer(0)`` (null when empty)
    inside its try/catch: it cannot throw here. (#10108's trace says 4.9.3 but its line numbers
    are not stock 4.9.3's.)
    """
    return (version == "5" and q.recovered_end > 0 and q.recovered_end == q.last_file_from
            and not consume_queues_truncated and not q.redispatched)


def min_offset_reasons(version: str, queues: list[QueueEnd], consume_queues_truncated: bool,
                       repair: str) -> list[Reason]:
    """One fatal reason per queue :func:`empty_last_file_throws` is true of."""
    out = []
    for q in queues:
        if empty_last_file_throws(version, q, consume_queues_truncated):
            out.append(Reason(True, f"consumequeue/{q.topic}/{q.queue_id}/{q.last_file_from:020d}",
                              "the queue's last file is empty after recovery: ConsumeQueue#correctMinOffset "
                              "throws java.lang.IllegalArgumentException (Buffer#position(-20)), 'load exception' "
                              "(5.0.0-5.3.3, apache/rocketmq#9728)",
                              f"move the empty file aside, or {repair} --topic {q.topic}"))
    return out


#: Findings that mean the broker's file loading fails (``MappedFileQueue#doLoad`` returns false).
LOAD_FAILS = {"commitlog.file-size", "cq.file-size", "bcq.file-size"}
#: Findings the broker survives with loss, and what it does.
SURVIVES = {
    "recovery.truncate": "recovery truncates the commit log",
    "store.not-regular": "the broker cannot load it",
    "commitlog.gap": "'[BUG]The mappedFile queue's data is damaged' (MappedFileQueue#checkSelf); messages in the "
                     "gap are gone",
    "index.missing": "the broker starts an empty index: key queries find no older message",
    "checkpoint.missing": "the broker starts from zero times",
    "timer.log-truncate": "TimerMessageStore#recover truncates the timer log",
}
#: Findings the broker does not start with, what it says, and the repair.
FATAL = {
    "bcq.queue-type": ("ConsumeQueueStore#queueTypeShouldBe throws and DefaultMessageStore#load fails",
                       "give the topic the queue.type its directory has in config/topics.json, or move the "
                       "directory aside (its messages are then not consumable from it)"),
    "timer.wheel-size": ("TimerWheel throws 'Timer wheel length ... != expected' (TimerMessageStore is not built)",
                         "give the broker the wheel it wrote, or move timerwheel aside (the broker makes an empty one "
                         "and the pending timer messages are lost)"),
}


def finding_reasons(findings: list[dict], version: str, empty_last: set[str]) -> list[Reason]:
    """Reasons from verify's findings (as dicts). ``empty_last``: the files of those findings
    that are empty and last in their directory (5.x deletes such a file and goes on)."""
    out = []
    for f in findings:
        check, name = f["check"], f["file"]
        if check in LOAD_FAILS:
            if version == "5" and name in empty_last:
                out.append(Reason(False, name, "'size is 0, auto delete' (MappedFileQueue#doLoad, 5.x)"))
            else:
                out.append(Reason(True, name, f"{f['detail']}: 'length not matched message store config value, "
                                  "please check it manually' (MappedFileQueue#doLoad returns false)",
                                  "give the broker the size the store was written with (broker.conf), or move "
                                  "the file aside"))
        elif check == "store.not-regular" and name.startswith(("commitlog", "consumequeue", "batchconsumequeue")):
            out.append(Reason(True, name, f"{f['detail']}: MappedFileQueue#doLoad cannot map it",
                              "replace it with the regular file it should be, or move it aside"))
        elif check == "store.live-broker":
            out.append(Reason(True, name, "a running broker holds the lock: DefaultMessageStore#start throws "
                              "'Lock failed,MQ already started'", "stop the running broker first"))
        elif check in FATAL:
            out.append(Reason(True, name, f"{f['detail']}: {FATAL[check][0]}", FATAL[check][1]))
        elif check in SURVIVES:
            out.append(Reason(False, name, f"{SURVIVES[check]}: {f['detail']}", _repair_of(f["detail"])))
    return out


def truncation_reason(max_cq_phy: int, process_offset: int, repair: str) -> Reason | None:
    """``CommitLog#recoverNormally``/``#recoverAbnormally``: consume-queue units at or beyond the
    recovered end are cut by ``DefaultMessageStore#truncateDirtyLogicFiles``."""
    if max_cq_phy <= process_offset:
        return None
    return Reason(False, "consumequeue", f"'maxPhyOffsetOfConsumeQueue({max_cq_phy}) >= processOffset({process_offset}), "
                  "truncate dirty logic files': units pointing at or after the commit log's end are dropped and "
                  "consumers beyond them are reset", repair)


def _repair_of(detail: str) -> str | None:
    """verify's details end with the repair command when there is one."""
    at = detail.find("rmqstore ")
    return detail[at:] if at >= 0 else None


def predict(version: str, abnormal: bool, reasons: list[Reason]) -> BrokerStart:
    """The verdict: the broker starts unless a reason is fatal."""
    return BrokerStart(not any(r.fatal for r in reasons), "abnormal" if abnormal else "normal", version, reasons)


#: verify's findings of messages with no unit: the broker dispatches them again at start-up
#: when they lie in what its recovery re-reads.
UNDISPATCHED = ("cq.not-dispatched", "cq.missing-unit")
#: Every finding :func:`assess` reads (verify keeps these beside its capped findings).
STARTUP_CHECKS = frozenset(LOAD_FAILS | SURVIVES.keys() | FATAL.keys() | set(UNDISPATCHED)
                           | {"store.not-regular", "store.live-broker", "abort.unclean-shutdown"})


def queue_ends(config) -> tuple[list[QueueEnd], int]:
    """Every consume queue as ``ConsumeQueue#recover`` leaves it, and maxPhyOffsetOfConsumeQueue
    (``ConsumeQueueStore#getMaxPhyOffsetInConsumeQueue``: the largest end, offset + size, of a
    queue's last valid unit; -1 when none). A queue that cannot be opened is skipped (verify
    reports it)."""
    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE
    from rmqstore_cli.store.consume_queue import ConsumeQueue
    from rmqstore_cli.store.mapped_files import queue_dirs

    ends, max_phy = [], -1
    for topic, qid, d in queue_dirs(config.consumequeue_dir):
        try:
            cq = ConsumeQueue(config.consumequeue_dir, topic, qid, config.mapped_file_size_consume_queue, directory=d)
        except StoreError:
            continue
        try:
            end = cq.max_offset
            if end > cq.min_file_offset:
                last = next(cq.units(end - 1, end))
                max_phy = max(max_phy, last.commitlog_offset + last.size)
            kept = cq.file_path(end) is not None and end % cq.units_per_file == 0
            last_from = end * CQ_STORE_UNIT_SIZE if kept else -1
            ends.append(QueueEnd(topic, qid, last_from, end * CQ_STORE_UNIT_SIZE))
        except StoreError:
            continue
        finally:
            cq.close()
    return ends, max_phy


def assess(config, version: str, findings: list[dict], summary: dict, abnormal: bool) -> BrokerStart:
    """``broker_start`` for one store from verify's findings and summary (either engine), the
    config files and the consume queues' recovered ends."""
    reasons = config_reasons(load_broker_configs(Path(config.root) / "config", version))
    truncate = [f for f in findings if f["check"] == "recovery.truncate"]
    process = truncate[0].get("physical_offset", summary["commitlog_end_offset"]) if truncate \
        else summary["commitlog_end_offset"]
    aborts = [f for f in findings if f["check"] == "abort.unclean-shutdown"]
    undispatched: dict[tuple[str, int], list[int]] = {}
    for f in findings:
        if f["check"] in UNDISPATCHED and f.get("physical_offset") is not None:
            undispatched.setdefault((f.get("topic"), f.get("queue_id")), []).append(f["physical_offset"])
    # Messages verify found without a unit are dispatched again by recovery: the abnormal
    # one from its start file on, the normal one after maxPhyOffsetOfConsumeQueue
    # (5.x CommitLog#recoverAbnormally / #recoverNormally's doDispatch).
    ends, max_cq = queue_ends(config)
    start = aborts[0].get("recovery_start") if abnormal and aborts else None
    for q in ends:
        offsets = undispatched.get((q.topic, q.queue_id), ())
        q.redispatched = any(p >= start if start is not None else p > max_cq for p in offsets)
    repair = f"rmqstore rebuild-index --store {config.root} --in-place --only cq"
    reasons += min_offset_reasons(version, ends, max_cq >= process, repair)
    cut = truncation_reason(max_cq, process, repair)
    if cut is not None:
        reasons.append(cut)
    reasons += finding_reasons(findings, version, _empty_last_files(config, findings))
    return predict(version, abnormal, reasons)


def _empty_last_files(config, findings: list[dict]) -> set[str]:
    """Files of size findings that are empty and the last of their directory (5.x's
    ``MappedFileQueue#doLoad`` deletes such a file)."""
    import os

    out = set()
    for f in findings:
        if f["check"] in LOAD_FAILS:
            p = Path(config.root) / f["file"]
            try:
                if p.stat().st_size == 0 and p.name == max(n for n in os.listdir(p.parent) if not n.startswith(".")):
                    out.add(f["file"])
            except (OSError, ValueError):
                continue
    return out
