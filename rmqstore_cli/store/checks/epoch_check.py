"""The epoch file against the commit log: what verify reports and ``dump-commitlog --summary``
shows (docs/format/ha.md#epoch-file, #what-the-next-start-truncates).

The rules are the broker's: ``EpochFileCache#appendEntry`` only appends an entry whose epoch
and start offset are both greater than the last one's; the last epoch ends at the log's end
(``EpochFileCache#setLastEpochEntryEndOffset(getMaxPhyOffset())``); when the broker truncates
its log (``AutoSwitchHAService#truncateInvalidMsg`` on ``changeToMaster``, after recovery cut
the log at its last valid record, ``CommitLog#recoverNormally``), it removes every entry that
starts at or after the cut (``EpochFileCache#truncateSuffixByOffset``).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqstore_cli.store.layout.epoch_file import (
    EpochEntry,
    EpochFile,
    EpochFileRead,
    EpochIssue,
    EpochSpan,
    epoch_spans,
)


@dataclass(frozen=True)
class EpochReport:
    """The findings and the summary (``as_summary``) of one epoch file."""

    issues: tuple[EpochIssue, ...]
    summary: dict


def file_issues(ef: EpochFile) -> list[EpochIssue]:
    """The header and lines: a rejected file (the broker reads the ``.bak``), a number that
    stops the broker's read, lines ``EpochEntrySerializer#fromLine`` ignores."""
    out: list[EpochIssue] = []
    for r in (ef.main, ef.backup):
        name = r.path.name
        for n in r.skipped_lines:
            out.append(
                EpochIssue("epoch.skipped-line", name, n, f"line {n} is not <epoch>-<offset>: the broker skips it")
            )
        if r.fatal:
            out.append(
                EpochIssue(
                    "epoch.unreadable",
                    name,
                    None,
                    f"{r.problem}: Integer#parseInt throws NumberFormatException, which CheckpointFile#read "
                    "does not catch (no fallback to the .bak)",
                )
            )
        elif r.problem is not None and r is ef.main:
            fallback = "it reads the .bak instead" if ef.used == "bak" else "the .bak gives no entries either"
            out.append(
                EpochIssue("epoch.rejected", name, None, f"{r.problem}: CheckpointFile#read rejects it; {fallback}")
            )
    if ef.used is None and ef.main.exists and not ef.main.fatal:
        out.append(EpochIssue("epoch.rejected", ef.main.path.name, None, "neither the file nor its .bak gives entries"))
    return out


def order_issues(r: EpochFileRead) -> list[EpochIssue]:
    """Entries the broker would never have appended (``EpochFileCache#appendEntry``): each
    epoch and each start offset must be greater than the previous entry's."""
    out: list[EpochIssue] = []
    prev: EpochEntry | None = None
    for e in r.entries:
        if prev is not None and e.epoch <= prev.epoch:
            out.append(
                EpochIssue(
                    "epoch.order",
                    r.path.name,
                    e.line,
                    f"epoch {e.epoch} follows epoch {prev.epoch} (line {prev.line}): epochs must increase",
                    {"epoch": e.epoch},
                )
            )
        elif prev is not None and e.start_offset <= prev.start_offset:
            out.append(
                EpochIssue(
                    "epoch.start-order",
                    r.path.name,
                    e.line,
                    f"epoch {e.epoch} starts at {e.start_offset}, not after epoch {prev.epoch}'s start "
                    f"{prev.start_offset}",
                    {"epoch": e.epoch, "physical_offset": e.start_offset},
                )
            )
        prev = e
    return out


def log_issues(r: EpochFileRead, log_end: int, cut: int) -> list[EpochIssue]:
    """Entries beyond the log's end, and those the next truncation removes (``cut`` < ``log_end``)."""
    out = []
    for e in r.entries:
        if e.start_offset > log_end:
            out.append(
                EpochIssue(
                    "epoch.beyond-end",
                    r.path.name,
                    e.line,
                    f"epoch {e.epoch} starts at {e.start_offset}, {e.start_offset - log_end} bytes past the "
                    f"commit log's end {log_end}",
                    {"epoch": e.epoch, "physical_offset": e.start_offset},
                )
            )
    dropped = [e for e in r.entries if e.start_offset >= cut]
    if cut < log_end and dropped:
        out.append(
            EpochIssue(
                "epoch.truncated",
                r.path.name,
                dropped[0].line,
                f"the next start cuts the log at {cut} ({log_end - cut} bytes): "
                f"EpochFileCache#truncateSuffixByOffset then drops epoch(s) "
                f"{', '.join(str(e.epoch) for e in dropped)}",
                {"physical_offset": cut, "epochs": [e.epoch for e in dropped]},
            )
        )
    return out


def check_epoch_file(ef: EpochFile, log_min: int, log_end: int, cut: int | None = None) -> EpochReport:
    """Every finding about the epoch file and its summary, against the log's [``log_min``,
    ``log_end``) and the offset the next start's recovery cuts the log at (``cut``; None: the end)."""
    cut = log_end if cut is None else cut
    chosen = {"file": ef.main, "bak": ef.backup}.get(ef.used or "")
    issues = file_issues(ef)
    if chosen is not None:
        issues += order_issues(chosen) + log_issues(chosen, log_end, cut)
    return EpochReport(tuple(issues), epoch_summary(ef, log_min, log_end, cut))


def epoch_summary(ef: EpochFile, log_min: int, log_end: int, cut: int) -> dict:
    """The summary block: which file the broker uses, the epochs' spans, the last epoch's end
    and what the next start's truncation removes."""
    spans = epoch_spans(ef.entries, log_end)
    return {
        **_used_file(ef),
        "epochs": [{"epoch": s.epoch, "start": s.start_offset, "end": s.end_offset, "bytes": s.bytes} for s in spans],
        **_last_epoch(spans),
        "commitlog_min_offset": log_min,
        "commitlog_end_offset": log_end,
        **_truncation(ef, log_end, cut),
    }


def _used_file(ef: EpochFile) -> dict:
    """The file the broker loads (the epoch file or its .bak; None: neither), its entry count and CRCs."""
    chosen = {"file": ef.main, "bak": ef.backup}.get(ef.used or "")
    return {
        "file": {"file": ef.main.path.name, "bak": ef.backup.path.name}.get(ef.used or ""),
        "entries": len(ef.entries),
        "crc_stored": chosen.stored_crc if chosen is not None else None,
        "crc_computed": chosen.crc if chosen is not None else None,
    }


def _last_epoch(spans: list[EpochSpan]) -> dict:
    """The last epoch and where it ends (the log's end: ``EpochFileCache#setLastEpochEntryEndOffset``)."""
    last = spans[-1] if spans else None
    return {"last_epoch": last.epoch if last else None, "last_epoch_end": last.end_offset if last else None}


def _truncation(ef: EpochFile, log_end: int, cut: int) -> dict:
    """What the next start's truncation at ``cut`` removes: nothing when it is at or past the log's end."""
    cuts = cut < log_end
    return {
        "truncate_at": cut if cuts else None,
        "truncate_bytes": max(0, log_end - cut),
        "epochs_dropped": [e.epoch for e in ef.entries if cuts and e.start_offset >= cut],
    }


class EpochTally:
    """Records counted per epoch by their offset (``add`` an array of offsets, or one):
    the span holding an offset is the last whose start is at or before it, and the offset
    lies before its end. Offsets before the first epoch or past the last end count nowhere."""

    def __init__(self, spans: list[EpochSpan]):
        import numpy as np

        self.spans = spans
        self.starts = np.array([s.start_offset for s in spans], dtype=np.int64)
        self.ends = np.array([s.end_offset for s in spans], dtype=np.int64)
        self.counts = np.zeros(len(spans), dtype=np.int64)

    def add(self, offsets) -> None:
        import numpy as np

        if not len(self.spans):
            return
        offs = np.atleast_1d(np.asarray(offsets, dtype=np.int64))
        i = np.searchsorted(self.starts, offs, side="right") - 1
        ok = (i >= 0) & (offs < self.ends[np.maximum(i, 0)])
        self.counts += np.bincount(i[ok], minlength=len(self.spans))

    def rows(self) -> list[dict]:
        return [
            {"epoch": s.epoch, "start": s.start_offset, "end": s.end_offset, "bytes": s.bytes, "messages": int(n)}
            for s, n in zip(self.spans, self.counts, strict=True)
        ]


def tally_log(cl, spans: list[EpochSpan]) -> EpochTally:
    """Every record of the commit log ``cl`` counted per epoch (one walk, whole blocks at a time)."""
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.records.message import Message

    t = EpochTally(spans)
    for rec in cl.scan_blocks(every_file=True):
        if isinstance(rec, Message):
            t.add(rec.physical_offset)
        elif not isinstance(rec, Blank):
            t.add(rec.offsets)
    return t
