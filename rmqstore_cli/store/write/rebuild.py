"""rebuild-index: consume queues and index files regenerated from the commit log.

What a broker builds when it starts on a store whose ``consumequeue/`` and ``index/`` are
gone: recovery finds the end of the log, then the reput service dispatches every record
from the commit log's first file (docs/format/recovery.md#dispatch, docs/format/recovery.md#recovery):

* **before the recovery region** (files a broker's recovery does not re-check) the reput
  rules: no CRC; a *size mismatch* is skipped undispatched; an *invalid* record makes a
  master jump to the end of that file's data (``ReputMessageService#doReput``:
  ``reputFromOffset += result.getSize() - readSize``), so the rest of that file is lost;
* **in the recovery region** (4.9.7 ``recoverNormally``: the last three files;
  ``recoverAbnormally`` with an ``abort`` file: from the newest file whose first record's
  store time is ≤ the checkpoint's ``minTimestamp``) recovery's rules decide where the log
  ends: body CRC checked (``checkCRCOnRecover``), invalid *or* size mismatch = end of log.
  Nothing after that end is dispatched (the broker truncates it).

Here: those rules for one commit-log file (:func:`dispatch_file_records`, :func:`classify_stop`,
:func:`recovery_start`), the report, the options and the sizes' sources. The engine that runs
them over the whole log, one task per commit-log file, then per queue and index file, is
``pipeline/rebuild_tasks.py`` (``rebuild_staged``). Records are walked and dispatched in
blocks by :mod:`fastdispatch` (same bytes as the per-record
:class:`~rmqstore_cli.store.write.dispatch.Dispatcher`).

The built set is put beside the store or in place of its own by :mod:`~rmqstore_cli.store.write.rebuild_output`
(in-place replacement is crash-safe; the protocol is described at its ``rebuild_in_place``).
"""

from __future__ import annotations

import datetime as _dt
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.commitlog import (
    BORNHOST_V6_FLAG,
    HEAD_FORMAT,
    HEAD_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    STORE_TIMESTAMP_FORMAT,
    HostV4,
    HostV6,
    MessageHead,
)
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

from rmqstore_cli.errors import UsageError, setting
from rmqstore_cli.store.commitlog import ScanEnd, Status, check_framed, check_message, is_clean_end
from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.files import mapguard
from rmqstore_cli.store.files.arrays import file_array
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.files.mapped_files import MappedFile, release_pages
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import SIZE_LEAST, StoreConfig
from rmqstore_cli.store.write.fastdispatch import FastDispatcher

_HEAD = struct.Struct(HEAD_FORMAT)
_HEAD_FIELDS = [sc.name for sc in MessageHead.subcons]
_STORE_TIMESTAMP = struct.Struct(STORE_TIMESTAMP_FORMAT)
BATCH = 32768


@dataclass
class Skipped:
    """Bytes the reput passes over without dispatching."""

    offset: int
    size: int
    file: str
    reason: str


@dataclass
class DispatchReport:
    messages: int = 0
    files: int = 0
    bytes: int = 0
    queues: int = 0
    units: int = 0
    cq_files: int = 0
    index_files: int = 0
    index_keys: int = 0
    last_store_timestamp: int = 0
    index_msg_timestamp: int = 0
    recovery: str = ""
    recovery_first_file: str | None = None
    stop: ScanEnd | None = None
    skipped: list[Skipped] = field(default_factory=list)
    seconds: float = 0.0
    #: Topics whose records got no consume queue: their names cannot be a directory.
    refused_topics: dict[str, str] = field(default_factory=dict)
    #: messages whose multi-dispatch properties the broker's dispatch rejects, per
    #: problem (``store/lmq.FanOut``): count, offset, name.
    multi_dispatch_problems: dict[str, int] = field(default_factory=dict)
    #: Index files not named after their first entry's store time, which is no date
    #: (negative, or after 9999; ``IndexService#next_name``): (file name, that store time).
    fallback_index_names: list[tuple[str, int]] = field(default_factory=list)


Progress = Callable[[int, int, int, int], None]  # (files done, bytes done, bytes total, messages)


# ----------------------------------------------------------------- recovery region


def recovery_start(
    files: list[MappedFile], abort: bool, checkpoint: StoreCheckpoint | None, dledger: bool = False
) -> int:
    """Index of the first file the broker's recovery scans (docs/format/recovery.md#normal-recovery).

    Normal (no ``abort``): the third-last file (4.9.7 and 5.0–5.3.1 ``recoverNormally``).
    Abnormal: newest back to the first file whose first record is a message with store time
    ≠ 0 and ≤ ``StoreCheckpoint#getMinTimestamp`` (``isMappedFileMatchedRecover``); none → 0.
    ``dledger``: ``DLedgerMmapFileStore#recover`` starts at the third-last file either way.
    """
    if not files:
        return 0
    if not abort or dledger:
        return max(0, len(files) - 3)
    min_ts = checkpoint.min_timestamp if checkpoint else 0
    for i in range(len(files) - 1, -1, -1):
        if _matched_recover(files[i].buffer(), min_ts):
            return i
    return 0


def _matched_recover(buf, min_ts: int) -> bool:
    """``isMappedFileMatchedRecover``: the file's first record is a message whose store time is
    not 0 and not after the checkpoint's ``min_ts``."""
    if len(buf) < HEAD_SIZE + HostV6.sizeof() + _STORE_TIMESTAMP.size:  # the widest born host
        return False
    head = dict(zip(_HEAD_FIELDS, _HEAD.unpack_from(buf, 0), strict=True))
    if head["magic"] not in (MAGIC_V1, MAGIC_V2):
        return False
    bh = HostV6.sizeof() if head["sys_flag"] & BORNHOST_V6_FLAG else HostV4.sizeof()
    ts = _STORE_TIMESTAMP.unpack_from(buf, HEAD_SIZE + bh)[0]
    return ts != 0 and ts <= min_ts


_STOP = {None: None, "blank": "blank"}  # walk_records' stop kinds; the rest cannot start a record


def dispatch_file_records(
    fd: FastDispatcher,
    f,
    recovering: bool,
    check_crc: bool,
    force_prop_crc: bool,
    skipped: list,
    batch: int = BATCH,
    after_block=None,
    header: int = 0,
    part: tuple[int, int | None] = (0, None),
) -> tuple[int | None, str]:
    """Dispatch one commit-log file, block by block, as recovery (``recovering``: CRC checked,
    a size mismatch or invalid record ends the log) or the reput (a size mismatch is skipped
    into ``skipped``). Returns (position where dispatch stopped in the file or None, why).
    ``header``: a DLedger data file's entry header before each record (``commitlog.dledger``);
    the position returned is then the entry's, where ``DLedgerMmapFileStore#recover`` cuts.
    ``part``: the records from a record start (or entry start) on, up to the first at or past
    a position (None: the file's end); None also when the part ends there.
    A file that shrank meanwhile is a ShrunkError (``mapguard.check``), not a stop: the zeros
    the guard left would read as the end of the log."""
    got = _dispatch_file(fd, f, recovering, check_crc, force_prop_crc, skipped, batch, after_block, header, part)
    mapguard.check(f.buffer())
    return got


def _dispatch_file(
    fd: FastDispatcher,
    f,
    recovering: bool,
    check_crc: bool,
    force_prop_crc: bool,
    skipped: list,
    batch: int,
    after_block,
    header: int,
    part: tuple[int, int | None] = (0, None),
) -> tuple[int | None, str]:
    run = _FileRun(fd, f, recovering, check_crc, force_prop_crc, skipped, after_block, header)
    pos, stop = part
    while True:
        if stop is not None and pos >= stop:  # the next part's first record
            return None, ""
        walk = walk_records(run.buf, pos, run.limit, batch, HEAD_SIZE, run.a, header=header)
        P, end_pos, why = walk if stop is None else _before(walk, stop, header)
        why = _STOP.get(why, "invalid")
        if len(P):
            stopped = run.block(P, pos, end_pos)
            if stopped is not None:
                return stopped
        pos = end_pos
        if why is None:
            continue
        if why == "blank":
            return None, ""
        return pos, check_framed(run.buf, pos, run.limit, f.file_from_offset, header).reason


def _before(walk, stop: int, header: int) -> tuple:
    """A walk's records that start (their entries, in a DLedger file) before ``stop``, the
    next part's first: (starts, where the walk goes on, why it stopped)."""
    P, end_pos, why = walk
    if not P.size or P[-1] - header < stop:
        return P, end_pos, why
    k = int(np.searchsorted(P - header, stop))
    return P[:k], int(P[k]) - header, None


class _FileRun:
    """One commit-log file's dispatch (:func:`dispatch_file_records`), a block of records at a time."""

    def __init__(
        self,
        fd: FastDispatcher,
        f,
        recovering: bool,
        check_crc: bool,
        force_prop_crc: bool,
        skipped: list,
        after_block,
        header: int,
    ):
        self.fd, self.f, self.recovering = fd, f, recovering
        self.check_crc, self.force_prop_crc = check_crc, force_prop_crc
        self.skipped, self.after_block, self.header = skipped, after_block, header
        self.buf = f.buffer()
        self.limit = len(self.buf)
        self.a = file_array(self.buf)

    def block(self, P: np.ndarray, pos: int, end_pos: int) -> tuple[int, str] | None:
        """Dispatch the records starting at ``P`` (walked from ``pos`` to ``end_pos``); returns
        where dispatch stopped in the file and why, or None to go on."""
        fields = self.fd.fields(self.a, P, self._crc_small())
        cut = self.fd.layout(self.a, P, fields, self.limit)
        mism = fields["mismatch"][:cut]
        if self.recovering:
            cut = self._recovery_cut(P, fields, mism, cut)
            take = np.arange(cut)
        else:
            take = self._reput_take(P, mism)
        d_stop = self.fd.dispatch(self.buf, self.a, P, fields, take)
        if d_stop is not None:
            cut = d_stop
        stop_at = int(P[cut]) if cut < len(P) else None
        release_pages(self.buf, pos, stop_at if stop_at is not None else end_pos)
        if self.after_block:
            self.after_block(end_pos)
        return None if stop_at is None else self._stop(stop_at)

    def _crc_small(self) -> int:
        """Recovery's body CRCs are read in the same pass as the fields (the C loop): those
        of bodies under this size; 0 when none are needed or the loop is not there."""
        kern = FAST_PATHS.kernels()
        if kern is None or not (self.recovering and self.check_crc) or self.force_prop_crc:
            return 0
        return kern.SMALL_BODY

    def _recovery_cut(self, P: np.ndarray, fields, mism: np.ndarray, cut: int) -> int:
        """Recovery ends the log at the first size mismatch, or (``checkCRCOnRecover``) at the
        first record whose CRC fails: the records before it are dispatched."""
        bad = np.flatnonzero(mism)
        if len(bad):
            cut = int(bad[0])
        if self.check_crc:
            k = _first_crc_failure(
                self.buf, P[:cut], fields, self.limit, self.f.file_from_offset, self.force_prop_crc, self.a
            )
            if k is not None:
                cut = min(cut, k)
        return cut

    def _reput_take(self, P: np.ndarray, mism: np.ndarray) -> np.ndarray:
        """The reput dispatches every record but the size mismatches, each noted as skipped."""
        f = self.f
        for p in P[np.flatnonzero(mism)].tolist():
            c = check_message(self.buf, p, self.limit, f.file_from_offset)
            self.skipped.append(Skipped(f.file_from_offset + p, c.size, f.name, c.reason))
        return np.flatnonzero(~mism)

    def _stop(self, stop_at: int) -> tuple[int, str]:
        """Why dispatch stopped at the record at ``stop_at`` (the entry's position in a DLedger file)."""
        c = check_message(
            self.buf,
            stop_at,
            self.limit,
            self.f.file_from_offset,
            self.recovering and self.check_crc,
            self.force_prop_crc,
        )
        if c.status is Status.VALID:  # only the dispatch check failed (DELAY)
            return stop_at - self.header, "DELAY property is not an int (the broker's check throws)"
        return stop_at - self.header, c.reason or f"DELAY of the record is not an int ({c.status.value})"


def classify_stop(
    f, stop_at: int, reason: str, recovering: bool, last_file: bool
) -> tuple[ScanEnd | None, Skipped | None]:
    """Where dispatch stopped in a file: in the recovery region the end of the log (clean at
    the zero tail of the last file); before it, the rest of the file skipped, as a master's
    ``ReputMessageService#doReput`` does."""
    off = f.file_from_offset + stop_at
    if recovering:
        buf = f.buffer()
        clean = is_clean_end(buf, stop_at, reason, last_file)
        end = ScanEnd(off, reason, f.name, clean)
        if not clean and not last_file:
            end.reason = reason + "; later files are dropped by recovery"
        return end, None
    return None, Skipped(
        off,
        len(f.buffer()) - stop_at,
        f.name,
        f"invalid record: {reason}; the master's reput skips the rest of the file",
    )


def cq_file_count(first: int, last: int, file_size: int) -> int:
    """Consume-queue files a queue holding units ``first .. last`` spans."""
    return (last * CQ_STORE_UNIT_SIZE) // file_size - (first * CQ_STORE_UNIT_SIZE) // file_size + 1


def _first_crc_failure(
    buf, P: np.ndarray, fields: dict, limit: int, file_from: int, force: bool, a: np.ndarray | None = None
) -> int | None:
    """Recovery's ``checkCRCOnRecover``: index of the first record whose body CRC (or, with
    ``forceVerifyPropCRC``, whole-record CRC) fails; ``a``, ``buf`` as a uint8 array, lets
    small bodies take the compiled CRC loop (:meth:`FastPaths.body_crcs`)."""
    if force:
        for j, p in enumerate(P.tolist()):
            if check_message(buf, p, limit, file_from, True, True).status is Status.INVALID:
                return j
        return None
    n = len(P)
    bl, at = np.maximum(fields["body_len"][:n], 0), fields["body_at"][:n]
    got = fields.get("body_crc_of")
    if got is None:
        got = FAST_PATHS.body_crcs(buf, a, at, bl)
    else:  # the small bodies' CRCs came with the fields (-1: longer, left to zlib)
        got = got[:n].copy()
        big = np.flatnonzero(got < 0)
        got[big] = FAST_PATHS.body_crcs(buf, a, at[big], bl[big])
    bad = np.flatnonzero((got != fields["crc"][:n]) & (bl > 0))
    return int(bad[0]) if len(bad) else None


# ----------------------------------------------------------------- sizes

#: The setting that gives each size (:func:`~rmqstore_cli.errors.setting`): (broker.conf name, keyword).
SIZE_SETTINGS = {attr: (prop, keyword) for attr, (prop, keyword, _) in SIZE_LEAST.items()}


def size_sources(
    config: StoreConfig, opts: RebuildOptions, options: dict[str, int | None], broker_conf: str | os.PathLike | None
) -> dict[str, dict]:
    """Where each size the rebuild writes with came from: the option, the broker config,
    the store's files of that kind, or nothing (None: the broker's default, unchecked).
    ``options``: attribute -> the value given on the command line (or None)."""
    from rmqstore_cli.store.files.mapped_files import queue_dirs
    from rmqstore_cli.store.message_store import is_rocksdb_store

    def files_in(d: Path) -> bool:
        try:
            return any(x.name.isdigit() and x.is_file() for x in d.iterdir())
        except OSError:
            return False

    on_disk = {
        "mapped_file_size_commit_log": "the commit-log files",
        "mapped_file_size_consume_queue": "the store's consume-queue files"
        if any(files_in(q) for _, _, q in queue_dirs(config.consumequeue_dir))
        else "the broker's default (a RocksDB consume queue has no file size)"
        if is_rocksdb_store(config)
        else None,
        "max_hash_slot_num": "the store's index files" if files_in(config.index_dir) else None,
    }
    on_disk["max_index_num"] = on_disk["max_hash_slot_num"]
    wanted = ["mapped_file_size_commit_log"]
    if opts.build_cq:
        wanted.append("mapped_file_size_consume_queue")
    if opts.build_index:
        wanted += ["max_hash_slot_num", "max_index_num"]
    out = {}
    for attr in wanted:
        prop, keyword = SIZE_SETTINGS[attr]
        if options.get(attr) is not None:
            src = "--" + keyword.replace("_", "-")  # a command line's words, as --broker-conf below
        elif attr in config.explicit:
            src = f"--broker-conf {broker_conf}"
        else:
            src = on_disk[attr]
        out[prop] = {"value": getattr(config, attr), "from": src}
    return out


def refuse_unsourced_sizes(sources: dict[str, dict], config: StoreConfig) -> None:
    """A set being rebuilt whose sizes nothing tells (no option, no broker config, no file
    of that kind left in the store) would silently get the broker's defaults — a 420 MB
    index file where the store used 8 KB ones. Refused, naming the options (UsageError)."""
    missing = [prop for prop, v in sources.items() if v["from"] is None]
    if not missing:
        return
    names = {prop: (attr, keyword) for attr, (prop, keyword) in SIZE_SETTINGS.items()}
    defaults = ", ".join(f"{p}={getattr(StoreConfig(), names[p][0])}" for p in missing)
    sets = _sets_missing(missing)
    what = " and ".join(sets) if sets else "the commit log"
    opts = " and ".join(setting(names[p][1]) for p in missing)
    verb = "have" if len(sets) > 1 else "has"
    raise UsageError(
        f"{what} {verb} no files to tell {'/'.join(missing)}, and neither ⟦broker_conf⟧ nor an "
        f"option sets them (the broker's defaults would be {defaults})",
        path=config.root,
        hint=f"pass ⟦broker_conf⟧, or {opts}",
    )


def _sets_missing(missing: list[str]) -> list[str]:
    """The directories (consumequeue/, index/) whose sizes are among the ``missing`` settings."""
    kinds = (("consumequeue/", ("mappedFileSizeConsumeQueue",)), ("index/", ("maxHashSlotNum", "maxIndexNum")))
    return [d for d, props in kinds if set(props) & set(missing)]


# ----------------------------------------------------------------- building a set


@dataclass
class RebuildOptions:
    build_cq: bool = True
    build_index: bool = True
    topics: list[str] | None = None
    tz: _dt.tzinfo | None = None
    dry_run: bool = False

    def key(self) -> dict:
        return {
            "build_cq": self.build_cq,
            "build_index": self.build_index,
            "topics": sorted(self.topics) if self.topics is not None else None,
        }


#: The engine that builds a set: ``build(config, dest, opts, progress)`` dispatches the store's
#: commit log into ``dest`` (``pipeline/local.rebuild_build``: the plan, tasks and join of
#: ``pipeline/rebuild_tasks.py``, on this machine; ``pipeline/spark.rebuild_build``: on Spark).
Build = Callable[[StoreConfig, Path, "RebuildOptions", "Progress | None"], DispatchReport]

#: where a BatchCQ topic's queues are (``BatchConsumeQueue``), rebuilt with consumequeue/.
BCQ_DIR = "batchconsumequeue"
