"""Will the broker start on this store? The verdict verify's summary ends with.

It replays, from verify's findings and a few facts verify gathered, the start-up path of the
broker (``BrokerController#initialize`` → managers' ``ConfigManager#load`` →
``DefaultMessageStore#load`` → ``#recover`` → ``#start``) for the store's version, and names
for each thing on that path what the broker would do (the Java exception or log line) and
the command that repairs it. A reason is *fatal* when the broker would not start.

What stops a start (``fatal``):
- a manager's ``.bak`` that does not decode after its file did not (``ConfigManager#loadBak``
  returns false; see ``store/layout/configfiles.py``);
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
(``truncateDirtyLogicFiles``), a missing ``index/`` while indexing is on, no checkpoint,
messages after the consume queues' end that a normal recovery leaves undispatched
(:func:`normal_dispatch_reasons`).

Versions (``--broker-version``): "4.9"; "5.3.1", any 5.0-5.3.1 broker; "5", 5.3.2 and later
(5.3.3). They differ in ``CommitLog#recoverNormally`` (see :func:`normal_recovery_start`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.store.checks.startup_queues import KnownEnd, QueueEnd, queue_ends
from rmqstore_cli.store.layout.configfiles import ConfigLoad, config_repair, load_broker_configs


@dataclass
class Reason:
    """One thing on the broker's start-up path, what the broker does with it and the repair."""

    fatal: bool
    file: str
    detail: str
    repair: str | None = None
    #: the verify finding that reports the same thing (None: only this reason says it)
    check: str | None = None

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
        return {
            "starts": self.starts,
            "recovery": self.recovery,
            "version": self.version,
            "version_source": self.version_source,
            "reasons": [r.as_dict() for r in self.reasons],
        }

    def line(self) -> str:
        """The one line verify's table ends with."""
        fatal = [r for r in self.reasons if r.fatal]
        said = "" if self.version_source != "assumed" else ", assumed: pass --broker-version"
        head = (
            f"broker start ({self.version}{said}): "
            + ("would start" if self.starts else "would NOT start")
            + f", {self.recovery} recovery"
        )
        if fatal:
            return (
                head
                + f": {fatal[0].file}: {fatal[0].detail}"
                + (f" (+{len(fatal) - 1} more)" if len(fatal) > 1 else "")
            )
        others = len(self.reasons)
        return head + (
            f"; {others} thing(s) it repairs or loses on the way (see broker_start.reasons)" if others else ""
        )


def family(version: str) -> str:
    """ "5" for every 5.x value of --broker-version ("5.3.1", "5"), else "4.9": the rules that
    did not change within 5.x (all but normal recovery)."""
    return "5" if version.startswith("5") else "4.9"


def recovers_from_cq(version: str) -> bool:
    """5.3.2+ ``CommitLog#recoverNormally@rocketmq-all-5.3.2``: starts at the consume queues'
    end and dispatches what follows it (apache/rocketmq 5.3.1..5.3.2); before, the third-last
    file and no dispatch."""
    return version == "5"


def normal_recovery_start(version: str, file_froms: list[int], max_cq: int) -> int:
    """Index of the commit-log file ``CommitLog#recoverNormally`` starts from.

    4.9.7 and 5.0-5.3.1 (``recoverNormally@rocketmq-all-5.3.1``): the third-last file.
    5.3.2+ (``recoverNormally@rocketmq-all-5.3.2``, same in 5.3.3): from the last file back,
    the first whose ``getFileFromOffset() <= maxPhyOffsetOfConsumeQueue`` (its loop stops at
    index 0, so no queue, -1, means the first file)."""
    if not recovers_from_cq(version):
        return max(0, len(file_froms) - 3)
    i = len(file_froms) - 1
    while i > 0 and file_froms[i] > max_cq:
        i -= 1
    return max(i, 0)


def normal_dispatched(version: str, first: int, count: int, max_cq: int, process: int) -> bool:
    """Does ``CommitLog#recoverNormally`` dispatch a run of ``count`` undispatched messages
    from physical offset ``first`` on? 5.3.2+ only: ``doDispatch = getCommitLogOffset() >
    maxPhyOffsetOfConsumeQueue`` (strictly: the message starting at that end is not), and
    only before the recovered end ``process``. 4.9.7/5.0-5.3.1: ``doDispatch`` is false."""
    if not recovers_from_cq(version) or first >= process:
        return False
    return first > max_cq or (first == max_cq and count > 1)


def resolve_version(root, option: str | None) -> tuple[str, str]:
    """The version verify predicts for and how it knows: ``option`` (--broker-version), else
    the store's (timer or RocksDB files: "5", ``root_entries.detect_version``), else "4.9" assumed."""
    if option is not None:
        return option, "option"
    from rmqstore_cli.store.layout.root_entries import detect_version

    v = detect_version(root)
    return (v, "detected") if v is not None else ("4.9", "assumed")


def config_reasons(loads: list[ConfigLoad]) -> list[Reason]:
    """What ``ConfigManager#load``/``#loadBak`` do with each config file that is not simply
    loaded (verify reports each as a ``config.*`` finding, store/verify/configs.py); the repair
    keeps what is on disk (``configfiles.config_repair``), never moves a file aside."""
    out = []
    for ld in loads:
        name = f"config/{ld.config.name}"
        why = "; ".join(ld.notes)
        if ld.source == "fails" and not ld.config.gates_start:
            out.append(
                Reason(
                    False,
                    name + ".bak",
                    f"{why}: 'load {ld.config.name}.bak Failed'; its caller ignores "
                    f"{ld.config.manager}#load's false: the broker starts with it empty",
                    _config_repair(ld),
                    check="config.lost",
                )
            )
        elif ld.source == "fails":
            out.append(
                Reason(
                    True,
                    name + ".bak",
                    f"{why}: 'load {ld.config.name}.bak Failed' "
                    f"({ld.config.manager}#load returns false, BrokerController#initialize fails)",
                    _config_repair(ld),
                    check="config.load-fails",
                )
            )
        elif ld.source == "bak" and ld.file_state != "ok":
            how = "'load ... failed, and try to load backup file'; " if ld.file_state == "torn" else ""
            out.append(
                Reason(
                    False,
                    name,
                    f"{why}: {how}the broker loads the .bak, losing changes since its last persist",
                    _config_repair(ld),
                    check="config.backup-loaded",
                )
            )
        elif ld.source == "none" and ld.file_state in ("empty", "torn"):
            out.append(
                Reason(
                    False,
                    name,
                    f"{why}: the broker starts with an empty {ld.config.manager} "
                    "(ConfigManager#loadBak finds no backup)",
                    _config_repair(ld),
                    check="config.lost",
                )
            )
        elif ld.source == "unreadable":
            out.append(
                Reason(False, name, f"{why}: cannot tell what the broker makes of it", None, check="config.unreadable")
            )
    return out


def _config_repair(ld: ConfigLoad) -> str:
    """A config reason's repair: the command when there is one, else what to do."""
    said, command = config_repair(ld)
    return command or said


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
    return (
        family(version) == "5"
        and q.recovered_end > 0
        and q.recovered_end == q.last_file_from
        and not consume_queues_truncated
        and not q.redispatched
    )


def min_offset_reasons(
    version: str, queues: list[QueueEnd], consume_queues_truncated: bool, repair: str
) -> list[Reason]:
    """One fatal reason per queue :func:`empty_last_file_throws` is true of."""
    out = []
    for q in queues:
        if empty_last_file_throws(version, q, consume_queues_truncated):
            out.append(
                Reason(
                    True,
                    f"consumequeue/{q.topic}/{q.queue_id}/{q.last_file_from:020d}",
                    "the queue's last file is empty after recovery: ConsumeQueue#correctMinOffset "
                    "throws java.lang.IllegalArgumentException (Buffer#position(-20)), 'load exception' "
                    "(5.0.0-5.3.3, apache/rocketmq#9728); rebuilding the topic's queues from the commit log "
                    "loses no unit",
                    f"{repair} --topic {shlex.quote(q.topic)}",
                )
            )
    return out


#: Findings that mean the broker's file loading fails (``MappedFileQueue#doLoad`` returns false).
LOAD_FAILS = {"commitlog.file-size", "cq.file-size", "bcq.file-size"}
#: Their repair when verify's finding names no command (``store/write/repair.py`` pads a commit-log or
#: consume-queue file cut short): the file is as long as another size makes it.
SIZE_REPAIR = (
    "give the broker the size the store was written with (mappedFileSize* in broker.conf); a batch "
    "consume-queue file cut short is rewritten from the commit log by rmqstore rebuild-index --in-place "
    "--only cq once its length is restored"
)
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
    "bcq.queue-type": (
        "ConsumeQueueStore#queueTypeShouldBe throws and DefaultMessageStore#load fails",
        "give the topic the queue.type its directory has (the queue.type attribute of its entry in "
        "config/topics.json: BatchCQ for batchconsumequeue/, SimpleCQ for consumequeue/); moving "
        "the directory instead makes its messages unconsumable",
    ),
    "timer.wheel-size": (
        "TimerWheel throws 'Timer wheel length ... != expected' (TimerMessageStore is not built)",
        "restore timerwheel from a backup, or start the broker version that wrote it; no repair "
        "rebuilds it exactly (moving it aside makes the broker start an empty wheel and lose the "
        "pending timer messages)",
    ),
}


def finding_reasons(findings: list[dict], version: str, empty_last: set[str]) -> list[Reason]:
    """Reasons from verify's findings (as dicts). ``empty_last``: the files of those findings
    that are empty and last in their directory (5.x deletes such a file and goes on)."""
    out = []
    for f in findings:
        check, name = f["check"], f["file"]
        if check in LOAD_FAILS:
            if family(version) == "5" and name in empty_last:
                out.append(Reason(False, name, "'size is 0, auto delete' (MappedFileQueue#doLoad, 5.x)", check=check))
            else:
                detail = f["detail"].split("; repair", 1)[0]
                out.append(
                    Reason(
                        True,
                        name,
                        f"{detail}: 'length not matched message store config value, "
                        "please check it manually' (MappedFileQueue#doLoad returns false)",
                        _repair_of(f["detail"]) or SIZE_REPAIR,
                        check=check,
                    )
                )
        elif check == "store.not-regular" and name.startswith(("commitlog", "consumequeue", "batchconsumequeue")):
            out.append(
                Reason(
                    True,
                    name,
                    f"{f['detail']}: MappedFileQueue#doLoad cannot map it",
                    "replace it with the regular file it should be (for a link: restore what it points "
                    "to); it holds no message itself",
                    check=check,
                )
            )
        elif check == "store.live-broker":
            out.append(
                Reason(
                    True,
                    name,
                    "a running broker holds the lock: DefaultMessageStore#start throws "
                    "'Lock failed,MQ already started'",
                    "stop the running broker first",
                    check=check,
                )
            )
        elif check in FATAL:
            out.append(Reason(True, name, f"{f['detail']}: {FATAL[check][0]}", FATAL[check][1], check=check))
        elif check in SURVIVES:
            out.append(Reason(False, name, f"{SURVIVES[check]}: {f['detail']}", _repair_of(f["detail"]), check=check))
    return out


def truncation_reason(max_cq_phy: int, process_offset: int, repair: str) -> Reason | None:
    """``CommitLog#recoverNormally``/``#recoverAbnormally``: consume-queue units at or beyond the
    recovered end are cut by ``DefaultMessageStore#truncateDirtyLogicFiles``."""
    if max_cq_phy <= process_offset:
        return None
    return Reason(
        False,
        "consumequeue",
        f"'maxPhyOffsetOfConsumeQueue({max_cq_phy}) >= processOffset({process_offset}), "
        "truncate dirty logic files': units pointing at or after the commit log's end are dropped and "
        "consumers beyond them are reset",
        repair,
    )


def _repair_of(detail: str) -> str | None:
    """verify's details end with the repair command when there is one."""
    at = detail.find("rmqstore ")
    return detail[at:] if at >= 0 else None


def start_findings(verdict: BrokerStart, summary: dict) -> list:
    """``broker.no-start``: one error finding per fatal reason that no verify finding reports
    (e.g. 5.0-5.3.3's empty last consume-queue file); a reason with a finding of its own
    (``config.load-fails``, ``commitlog.file-size``, …) is that finding. Counted into ``summary``
    (errors, findings per check), so verify's exit code says when the broker would not start.
    A live broker's lock is not one: ``store.live-broker`` (a warning) says the store is in use,
    not that it is damaged."""
    from rmqstore_cli.store.checks.findings import ERROR, Finding

    out = [
        Finding(
            "broker.no-start",
            ERROR,
            r.file,
            None,
            f"{r.detail}: the broker does not start" + (f"; repair: {r.repair}" if r.repair else ""),
        )
        for r in verdict.reasons
        if r.fatal and r.check is None
    ]
    if out:
        summary["errors"] = summary.get("errors", 0) + len(out)
        counts = summary.setdefault("findings", {})
        counts["broker.no-start"] = counts.get("broker.no-start", 0) + len(out)
        summary["findings"] = dict(sorted(counts.items()))
    return out


def predict(version: str, abnormal: bool, reasons: list[Reason]) -> BrokerStart:
    """The verdict: the broker starts unless a reason is fatal."""
    return BrokerStart(not any(r.fatal for r in reasons), "abnormal" if abnormal else "normal", version, reasons)


#: verify's findings of messages with no unit: the broker dispatches them again at start-up
#: when they lie in what its recovery re-reads.
UNDISPATCHED = ("cq.not-dispatched", "cq.missing-unit")
#: Every finding :func:`assess` reads (verify keeps these beside its capped findings).
STARTUP_CHECKS = frozenset(
    LOAD_FAILS
    | SURVIVES.keys()
    | FATAL.keys()
    | set(UNDISPATCHED)
    | {"store.not-regular", "store.live-broker", "abort.unclean-shutdown"}
)


def predict_start(
    config, version: str | None, findings: list[dict], summary: dict, known: dict[str, KnownEnd] | None = None
) -> tuple[BrokerStart, list]:
    """verify's conclusion for one store (either engine): the ``broker_start`` verdict, put in
    ``summary``, and the ``broker.no-start`` findings it adds (:func:`start_findings`).

    The verdict is :func:`assess` for ``version`` (--broker-version) or the one the store
    shows (:func:`resolve_version`: timer or RocksDB files mean 5), else 4.9, "assumed" (a
    4.9 and a 5.x store are otherwise the same bytes); an ``abort`` file means the broker
    recovers abnormally (``DefaultMessageStore#load``). ``findings``: the verify findings
    (as dicts) of :data:`STARTUP_CHECKS`. ``known``: the queues' recovered ends verify read
    already (``startup_queues.queue_ends``)."""
    from rmqstore_cli.store.files.lock import abort_exists

    v, source = resolve_version(config.root, version)
    verdict = assess(config, v, findings, summary, abort_exists(config.root), known)
    verdict.version_source = source
    summary["broker_start"] = verdict.as_dict()
    return verdict, start_findings(verdict, summary)


def assess(
    config, version: str, findings: list[dict], summary: dict, abnormal: bool, known: dict[str, KnownEnd] | None = None
) -> BrokerStart:
    """``broker_start`` for one store from verify's findings and summary (either engine), the
    config files and the consume queues' recovered ends (``known``: those read already)."""
    reasons = config_reasons(load_broker_configs(Path(config.root) / "config", family(version), config.enable_lmq))
    truncate = [f for f in findings if f["check"] == "recovery.truncate"]
    process = (
        truncate[0].get("physical_offset", summary["commitlog_end_offset"])
        if truncate
        else summary["commitlog_end_offset"]
    )
    aborts = [f for f in findings if f["check"] == "abort.unclean-shutdown"]
    undispatched: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for f in findings:
        if f["check"] in UNDISPATCHED and f.get("physical_offset") is not None:
            undispatched.setdefault((f.get("topic"), f.get("queue_id")), []).append(
                (f["physical_offset"], f.get("count") or 1)
            )
    # Messages verify found without a unit are dispatched again by recovery: the abnormal
    # one from its start file on (every version), the normal one after
    # maxPhyOffsetOfConsumeQueue in 5.3.2+ only (:func:`normal_dispatched`).
    ends, max_cq = queue_ends(config, known)
    start = aborts[0].get("recovery_start") if abnormal and aborts else None
    for q in ends:
        runs = undispatched.get((q.topic, q.queue_id), ())
        q.redispatched = any(
            p >= start if start is not None else normal_dispatched(version, p, n, max_cq, process) for p, n in runs
        )
    repair = f"rmqstore rebuild-index --store {shlex.quote(str(config.root))} --in-place --only cq"
    reasons += min_offset_reasons(version, ends, max_cq >= process, repair)
    cut = truncation_reason(max_cq, process, repair)
    if cut is not None:
        reasons.append(cut)
    if not abnormal and not (Path(config.consumequeue_dir) / "CURRENT").exists():  # RocksDB queues: not modelled
        tail = sorted(r for rs in undispatched.values() for r in rs if max_cq <= r[0] < process)
        reasons += normal_dispatch_reasons(
            version, max_cq, tail, repair, process if process < summary["commitlog_end_offset"] else None
        )
    reasons += finding_reasons(findings, version, _empty_last_files(config, findings))
    return predict(version, abnormal, reasons)


def normal_dispatch_reasons(
    version: str, max_cq: int, tail: list[tuple[int, int]], repair: str, cut: int | None = None
) -> list[Reason]:
    """What becomes of the messages after the consume queues' end (``tail``: (first physical
    offset, count) runs at or after maxPhyOffsetOfConsumeQueue, before the recovered end) when
    the last shutdown was clean, per version:

    - 4.9.7: ``recoverNormally`` does not dispatch; ``DefaultMessageStore#start@rocketmq-all-4.9.7``
      sets the reput to the queues' end, so the reput dispatches them after start;
    - 5.0-5.3.1: ``recoverNormally@rocketmq-all-5.3.1`` does not dispatch (``doDispatch =
      false``) and ``DefaultMessageStore#start`` sets the reput to ``getConfirmOffset()``, the
      log's end (``doRecheckReputOffsetFromCq`` is off by default): they never get a unit;
    - 5.3.2+: ``recoverNormally@rocketmq-all-5.3.2`` dispatches those with ``commitLogOffset >
      maxPhyOffsetOfConsumeQueue``; one that starts exactly there is never dispatched (the reput
      starts at the log's end).

    ``cut``: where recovery truncates the log, if it does; the runs' counts then include
    messages after it, so no count is given.
    """
    if not tail:
        return []
    n = sum(c for _, c in tail)
    what = (
        f"{n} message(s) from {tail[0][0]} on"
        if cut is None
        else f"the messages from {tail[0][0]} to the recovered end {cut}"
    ) + f", after the consume queues' end {max_cq} (maxPhyOffsetOfConsumeQueue)"
    if family(version) == "4.9":
        return [
            Reason(
                False,
                "commitlog",
                f"{what}: recoverNormally does not dispatch them; the reput does after "
                "start (DefaultMessageStore#start sets reputFromOffset to the consume queues' end)",
            )
        ]
    if not recovers_from_cq(version):
        return [
            Reason(
                False,
                "commitlog",
                f"{what}: never dispatched: 5.0-5.3.1 CommitLog#recoverNormally does not "
                "dispatch (doDispatch=false) and DefaultMessageStore#start puts the reput at the commit log's "
                "end (recheckReputOffsetFromCq=false); consumers never see them",
                repair,
            )
        ]
    skipped = tail[0][0] == max_cq
    which = "those" if cut is not None else f"the {n - skipped}"
    out = (
        [
            Reason(
                False,
                "commitlog",
                f"{what}: 5.3.2+ CommitLog#recoverNormally dispatches {which} after "
                f"{max_cq} (commitLogOffset > maxPhyOffsetOfConsumeQueue)",
            )
        ]
        if n > skipped
        else []
    )
    if skipped:
        out.append(
            Reason(
                False,
                "commitlog",
                f"the message at {max_cq} starts exactly at maxPhyOffsetOfConsumeQueue: "
                "5.3.2+ CommitLog#recoverNormally skips it (commitLogOffset > maxPhyOffsetOfConsumeQueue is "
                "false) and the reput starts at the commit log's end: it never gets a unit",
                repair,
            )
        )
    return out


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
