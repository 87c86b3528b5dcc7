"""Expiry of commit-log, consume-queue and index files, by the broker's rules (docs/format/expiry.md).

The broker's cleaning threads become a *plan* (a list of files, each with the rule that
condemns it) and an *executor* that deletes them, so ``--dry-run`` and a real run decide
with the same code:

* commit log — ``CleanCommitLogService#deleteExpiredFiles`` →
  ``MappedFileQueue#deleteExpiredFileByTime``: files 0 … n−2 in order (never the newest),
  a file goes when ``now ≥ mtime + fileReservedTime`` or, in a forced clean, while the disk
  is too full; stop at the first file that stays.
* consume queues — ``CleanConsumeQueueService#deleteExpiredFiles`` →
  ``ConsumeQueue#deleteExpiredFile`` → ``MappedFileQueue#deleteExpiredFileByOffset(min, 20)``:
  per queue, files 0 … n−2 in order, a file goes when the physical offset of its **last
  unit** is below the commit log's new minimum; stop at the first file that stays. The
  newest file always stays, so an idle queue keeps units pointing below the minimum.
* index — ``IndexService#deleteExpiredFile(min)``: files 0 … n−2 in name order while
  ``endPhyOffset < min``.

The consume-queue and index rules run only when the commit log's minimum is above 0 (the
service compares it with its ``lastPhysicalMinOffset``, 0 after a start).

Safety: every file is *proven* before it is condemned (the expected name pattern, the
configured size, a regular file and not a symlink, in the expected directory) and proven
again, by inode, just before it is unlinked. Deletion order is the broker's, oldest first
(commit log, then consume queues, then index), and each directory is fsynced after its
phase, so a run killed at any point leaves a contiguous store that the next run finishes.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE, UNIT_FORMAT
from rmqstore_cli.formats.index import HEADER_FORMAT, INDEX_HEADER_SIZE

from rmqstore_cli.errors import RefusedError, StoreError
from rmqstore_cli.store.commitlog.dledger import expiry_candidates
from rmqstore_cli.store.files.mapped_files import MappedFileQueue, fsync_dir, queue_dirs
from rmqstore_cli.store.files.safefs import O_NOFOLLOW, check_inside, is_inside, open_read_only, real
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.queues.consume_queue import UNIT_DTYPE

COMMITLOG = "commitlog"
CONSUMEQUEUE = "consumequeue"
INDEX = "index"
KINDS = (COMMITLOG, CONSUMEQUEUE, INDEX)

HOUR_MS = 3_600_000
_OFFSET_NAME = re.compile(r"[0-9]{20}")  # UtilAll#offset2FileName
_INDEX_NAME = re.compile(r"[0-9]{17}")  # UtilAll#timeMillisToHumanString
_UNIT = struct.Struct(UNIT_FORMAT)
_HEADER = struct.Struct(HEADER_FORMAT)

#: ``(used, usable)`` bytes of the partition holding a path, as ``java.io.File`` reports
#: them (total − free, usable). Tests replace this to simulate a full disk.
UsageSource = Callable[[Path], "tuple[int, int] | None"]


def disk_usage(path: Path) -> tuple[int, int] | None:
    """``File#getTotalSpace − #getFreeSpace`` and ``#getUsableSpace`` from ``statvfs``."""
    try:
        s = os.statvfs(path)
    except OSError:
        return None
    total, free, usable = s.f_blocks * s.f_frsize, s.f_bfree * s.f_frsize, s.f_bavail * s.f_frsize
    if total <= 0:
        return None
    return total - free, usable


def used_ratio(used: int, usable: int) -> float:
    """``UtilAll#getDiskPartitionSpaceUsedPercent``: used / (used + usable), rounded *up* to
    a whole percent, as a fraction (0.86)."""
    entire = used + usable
    if entire <= 0:
        return -1.0
    pct = used * 100 // entire + (1 if used * 100 % entire else 0)
    return pct / 100.0


@dataclass
class Condemned:
    """One file the plan deletes, the rule that condemns it, and the identity it was proven by."""

    kind: str
    path: Path
    file: str  # path relative to the store root (absolute if outside it)
    size: int  # apparent length
    freed: int  # bytes the unlink gives back to the partition (blocks; 0 if hard-linked elsewhere)
    rule: str  # "expired" | "disk-full" | "below-min"
    reason: str  # one line for people
    st_dev: int
    st_ino: int
    mtime_ns: int
    topic: str | None = None
    queue_id: int | None = None
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "file": self.file,
            "path": str(self.path),
            "bytes": self.size,
            "bytes_freed": self.freed,
            "rule": self.rule,
            "reason": self.reason,
        }
        if self.topic is not None:
            d["topic"], d["queue_id"] = self.topic, self.queue_id
        d.update(self.detail)
        return d


@dataclass
class Problem:
    """A file the rules would delete but that could not be proven a store file."""

    kind: str
    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.message} ({self.path})"


@dataclass
class QueueMin:
    topic: str
    queue_id: int
    files_deleted: int
    min_offset: int  # logical offset after correctMinOffset (4.9.7 rule), projected


@dataclass
class ExpiryPlan:
    now_ms: int
    reserved_hours: float
    disk_ratio: float | None
    max_files: int | None
    commitlog_min_before: int
    commitlog_min_after: int
    actions: list[Condemned] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    queue_mins: list[QueueMin] = field(default_factory=list)
    index_first: dict | None = None  # first index file kept: name, begin/end phy offset
    disk: dict | None = None  # usage before and projected after, for --disk-ratio
    #: Where files may be deleted (``StoreConfig.write_roots``): checked again at each unlink.
    roots: list[Path] = field(default_factory=list)

    def of(self, kind: str) -> list[Condemned]:
        return [a for a in self.actions if a.kind == kind]


class _DiskProjection:
    """Disk usage of the commit-log partitions, projected as the plan frees files.

    The broker re-measures before each clean run; offline the plan projects instead, so
    ``--dry-run`` and the real run decide the same files. Several commit-log directories
    (multi-path) count as the least used one, as ``CleanCommitLogService#isSpaceToDelete``.
    """

    def __init__(self, dirs: list[Path], source: UsageSource):
        self.parts: dict[int, list[int]] = {}
        self.dir_dev: list[int] = []
        for d in dirs:
            try:
                dev = os.stat(d).st_dev
            except OSError:
                continue
            if dev not in self.parts:
                u = source(d)
                if u is None:
                    continue
                self.parts[dev] = [u[0], u[1]]
            self.dir_dev.append(dev)
        self.before = self.ratio()

    def ratio(self) -> float:
        ratios = [used_ratio(*self.parts[dev]) for dev in self.dir_dev if dev in self.parts]
        return min(ratios) if ratios else -1.0

    def free(self, dev: int, nbytes: int) -> None:
        p = self.parts.get(dev)
        if p is not None:
            p[0] = max(0, p[0] - nbytes)
            p[1] += nbytes


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _prove(path: Path, real_dir: str, name_re: re.Pattern, size: int) -> os.stat_result:
    """Raise StoreError unless ``path`` is a store file of the expected shape: the name
    pattern, the configured size, a regular file (not a symlink) whose directory really is
    ``real_dir`` (a symlinked topic or queue directory leading elsewhere is refused)."""
    if not name_re.fullmatch(path.name):
        raise StoreError("not a store file name", path=path)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise StoreError("is a symlink, not a store file; left alone", path=path)
    if not stat.S_ISREG(st.st_mode):
        raise StoreError("not a regular file; left alone", path=path)
    if st.st_size != size:
        raise StoreError(f"has {st.st_size} bytes, expected {size}; left alone", path=path)
    if os.path.realpath(path.parent) != real_dir:
        raise StoreError(f"lies outside {real_dir}; left alone", path=path)
    return st


def _freed(st: os.stat_result) -> int:
    return st.st_blocks * 512 if st.st_nlink <= 1 else 0


def _condemn(kind: str, path: Path, root: Path, st: os.stat_result, rule: str, reason: str, **kw) -> Condemned:
    return Condemned(
        kind,
        path,
        _relative(path, root),
        st.st_size,
        _freed(st),
        rule,
        reason,
        st.st_dev,
        st.st_ino,
        st.st_mtime_ns,
        **kw,
    )


# ----------------------------------------------------------------- planning
def check_data_dirs(config: StoreConfig) -> None:
    """Refuse (exit 4) a store whose ``commitlog/``, ``consumequeue/`` or ``index/`` is a
    symbolic link leading out of ``config.write_roots`` (README, Safety): such a directory
    is read through, but expire deletes only files whose real path lies inside those roots.
    A commit log on another disk is the broker's own layout when ``storePathCommitLog``
    names it, which ``--broker-conf`` makes a root."""
    roots = config.write_roots
    for d in [*config.commitlog_dirs, config.consumequeue_dir, config.index_dir]:
        if os.path.lexists(d) and not is_inside(d, roots):
            hint = (
                "if that is the broker's layout, pass ⟦broker_conf⟧ with storePathCommitLog set to it"
                if d in config.commitlog_dirs
                else "work on a copy, or replace the link by the directory"
            )
            raise RefusedError(
                f"{d.name}/ is a symbolic link to {real(d)}, outside the store "
                f"({', '.join(real(r) for r in roots)}); nothing is deleted through it",
                path=d,
                hint=hint,
            )


def plan_expiry(
    config: StoreConfig,
    now_ms: int,
    reserved_hours: float,
    *,
    disk_ratio: float | None = None,
    max_files: int | None = None,
    usage: UsageSource | None = None,
) -> ExpiryPlan:
    """Decide what the broker's cleaning would delete now. Reads headers and one unit per
    consume-queue file; changes nothing. Sizes in ``config`` must already be checked."""
    root = config.root
    cl = MappedFileQueue(config.commitlog_dirs, config.mapped_file_size_commit_log)
    min_before = cl.files[0].file_from_offset if cl.files else -1
    plan = ExpiryPlan(now_ms, reserved_hours, disk_ratio, max_files, min_before, min_before, roots=config.write_roots)
    for p in cl.strays:
        plan.notes.append(f"{_relative(p, root)} is not a commit-log file name; left alone")
    _plan_commitlog(plan, cl, config, usage)
    if plan.commitlog_min_after > 0:  # CleanConsumeQueueService: minOffset > lastPhysicalMinOffset (0)
        _plan_consume_queues(plan, config)
        _plan_index(plan, config)
    for extra in ("consumequeue_ext", "batchconsumequeue"):
        if (root / extra).is_dir():
            plan.notes.append(f"{extra}/ is not expired by rmqstore (the broker trims it when it next runs)")
    return plan


def _plan_commitlog(plan: ExpiryPlan, cl: MappedFileQueue, config: StoreConfig, usage: UsageSource | None) -> None:
    """``MappedFileQueue#deleteExpiredFileByTime`` (+ the forced clean of ``#isSpaceToDelete``)."""
    disk = _DiskProjection(config.commitlog_dirs, usage or disk_usage) if plan.disk_ratio is not None else None
    files = cl.files
    cands, extra_hours, note = expiry_candidates(config, files)  # never the newest (still written) file
    if note:
        plan.notes.append(note)
    reserved_hours = plan.reserved_hours + extra_hours
    for i, f in enumerate(cands):
        if not _condemn_commitlog_file(plan, f, config, disk, reserved_hours):
            break
        plan.commitlog_min_after = files[i + 1].file_from_offset if i + 1 < len(files) else f.end_offset
    if disk is not None:
        plan.disk = {"used_ratio_before": disk.before, "used_ratio_after": disk.ratio(), "threshold": plan.disk_ratio}


def _condemn_commitlog_file(
    plan: ExpiryPlan, f, config: StoreConfig, disk: _DiskProjection | None, reserved_hours: float
) -> bool:
    """One candidate of ``#deleteExpiredFileByTime``: condemned when expired or the disk is
    over the ratio; False (the walk stops, "avoid deleting files in the middle") when it is
    neither, the ``max_files`` cap is reached or the file cannot be proven."""
    try:
        st = os.lstat(f.path)
    except OSError as e:
        plan.problems.append(Problem(COMMITLOG, f.path, f"cannot stat: {e.strerror}"))
        return False
    mtime_ms = st.st_mtime_ns // 1_000_000  # File#lastModified
    expired = plan.now_ms >= mtime_ms + int(reserved_hours * HOUR_MS)
    if not (expired or (disk is not None and disk.ratio() > plan.disk_ratio)):
        return False
    if plan.max_files is not None and len(plan.actions) >= plan.max_files:
        plan.notes.append(f"stopped after --max-files {plan.max_files} commit-log files")
        return False
    try:
        st = _prove(f.path, os.path.realpath(f.path.parent), _OFFSET_NAME, config.mapped_file_size_commit_log)
    except (StoreError, OSError) as e:
        plan.problems.append(Problem(COMMITLOG, f.path, getattr(e, "message", None) or str(e)))
        return False
    age_h = (plan.now_ms - mtime_ms) / HOUR_MS
    rule, reason = _commitlog_rule(plan, disk, expired, age_h, reserved_hours)
    detail = {"file_from_offset": f.file_from_offset, "mtime_ms": mtime_ms, "age_hours": round(age_h, 3)}
    plan.actions.append(_condemn(COMMITLOG, f.path, config.root, st, rule, reason, detail=detail))
    if disk is not None:
        disk.free(st.st_dev, _freed(st))
    return True


def _commitlog_rule(
    plan: ExpiryPlan, disk: _DiskProjection | None, expired: bool, age_h: float, reserved_hours: float
) -> tuple[str, str]:
    """Why a commit-log file goes: its age (``fileReservedTime``) or the disk's use (``#isSpaceToDelete``)."""
    if expired:
        return "expired", f"modified {age_h:.1f} h ago, reserved {reserved_hours:g} h"
    return "disk-full", f"disk {disk.ratio():.0%} used > {plan.disk_ratio:.0%} (modified {age_h:.1f} h ago)"


def _plan_consume_queues(plan: ExpiryPlan, config: StoreConfig) -> None:
    """``ConsumeQueue#deleteExpiredFile(min)`` for every queue directory on disk."""
    root, size, clmin = config.root, config.cq_file_size, plan.commitlog_min_after
    cq_real = os.path.realpath(config.consumequeue_dir)
    for topic, qid, qdir in queue_dirs(config.consumequeue_dir):
        real_dir = os.path.join(cq_real, topic, qdir.name)
        q = MappedFileQueue(qdir, size)
        for p in q.strays:
            plan.notes.append(f"{_relative(p, root)} is not a consume-queue file name; left alone")
        deleted = 0
        for i in range(len(q.files) - 1):  # never the newest file
            f = q.files[i]
            try:
                st = _prove(f.path, real_dir, _OFFSET_NAME, size)
                fd = open_read_only(f.path, O_NOFOLLOW)
                try:
                    raw = os.pread(fd, CQ_STORE_UNIT_SIZE, size - CQ_STORE_UNIT_SIZE)
                finally:
                    os.close(fd)
            except (StoreError, OSError) as e:
                plan.problems.append(Problem(CONSUMEQUEUE, f.path, getattr(e, "message", None) or str(e)))
                break
            last_phy = _UNIT.unpack(raw)[0]  # the file's last unit (mappedFileSize − unitSize)
            if last_phy >= clmin:
                break
            reason = f"last unit points at {last_phy} < commit-log min {clmin}"
            plan.actions.append(
                _condemn(
                    CONSUMEQUEUE,
                    f.path,
                    root,
                    st,
                    "below-min",
                    reason,
                    topic=topic,
                    queue_id=qid,
                    detail={"last_unit_offset": last_phy},
                )
            )
            deleted += 1
        if deleted:
            kept = q.files[deleted]
            plan.queue_mins.append(
                QueueMin(topic, qid, deleted, _projected_queue_min(kept.path, kept.file_from_offset, clmin))
            )


def _projected_queue_min(path: Path, file_from_offset: int, clmin: int, chunk_units: int = 4096) -> int:
    """``#correctMinOffset`` (4.9.7) on the first file that stays: its first valid unit
    pointing at or above the commit log's minimum, else that file's start. Read in chunks,
    so a 6 MB file costs one small read when the answer is near its start."""
    base = file_from_offset // CQ_STORE_UNIT_SIZE
    try:
        fd = open_read_only(path)  # not proven (it stays): a FIFO must not hang the plan
    except StoreError:
        return base
    try:
        pos = 0
        while True:
            raw = os.pread(fd, chunk_units * CQ_STORE_UNIT_SIZE, pos * CQ_STORE_UNIT_SIZE)
            n = len(raw) // CQ_STORE_UNIT_SIZE
            if n == 0:
                return base
            units = np.frombuffer(raw, dtype=UNIT_DTYPE, count=n)
            phy, size = units["commitlog_offset"], units["size"]
            bad = np.flatnonzero((phy < 0) | (size <= 0))  # the queue's end (ConsumeQueue#recover)
            limit = int(bad[0]) if len(bad) else n
            hits = np.flatnonzero(phy[:limit] >= clmin)
            if len(hits):
                return base + pos + int(hits[0])
            if limit < n:
                return base
            pos += n
    finally:
        os.close(fd)


def _read_index_header(path: Path) -> tuple[int, int, int, int]:
    fd = open_read_only(path, O_NOFOLLOW)
    try:
        raw = os.pread(fd, INDEX_HEADER_SIZE, 0)
    finally:
        os.close(fd)
    if len(raw) < INDEX_HEADER_SIZE:
        raise StoreError("shorter than an index header", path=path)
    return _HEADER.unpack(raw)[:4]


def _plan_index(plan: ExpiryPlan, config: StoreConfig) -> None:
    """``IndexService#deleteExpiredFile(min)``."""
    root, idir, clmin = config.root, config.index_dir, plan.commitlog_min_after
    paths = _index_paths(plan, idir, root)
    if not paths:
        return
    size = config.index_file_size
    kept_from = 0
    for i in range(len(paths) - 1):  # never the newest file
        p = paths[i]
        try:
            st = _prove(p, os.path.realpath(idir), _INDEX_NAME, size)
            _, _, begin_phy, end_phy = _read_index_header(p)
        except (StoreError, OSError) as e:
            plan.problems.append(Problem(INDEX, p, getattr(e, "message", None) or str(e)))
            break
        if end_phy >= clmin:
            break
        reason = f"endPhyOffset {end_phy} < commit-log min {clmin}"
        detail = {"begin_phy_offset": begin_phy, "end_phy_offset": end_phy}
        plan.actions.append(_condemn(INDEX, p, root, st, "below-min", reason, detail=detail))
        kept_from = i + 1
    plan.index_first = _index_first(paths[kept_from])


def _index_paths(plan: ExpiryPlan, idir: Path, root: Path) -> list[Path]:
    """``IndexService#load``: the index files of the directory, sorted by name; any other
    name is noted and never counted (so never taken for the newest file)."""
    try:
        entries = sorted((p for p in idir.iterdir() if not p.name.startswith(".")), key=lambda p: p.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    for p in entries:
        if not _INDEX_NAME.fullmatch(p.name):
            plan.notes.append(f"{_relative(p, root)} is not an index file name; left alone")
    return [p for p in entries if _INDEX_NAME.fullmatch(p.name)]


def _index_first(path: Path) -> dict:
    """The first index file that stays, with its header's offsets when it can be read."""
    try:
        _, _, b, e = _read_index_header(path)
    except (StoreError, OSError):
        return {"file": path.name}
    return {"file": path.name, "begin_phy_offset": b, "end_phy_offset": e}


# ----------------------------------------------------------------- executing
@dataclass
class ExpiryResult:
    deleted: list[Condemned] = field(default_factory=list)
    error: StoreError | RefusedError | None = None


def _unlink_proven(a: Condemned, roots: list[Path] | None = None) -> None:
    """Unlink ``a.path`` only if its directory's real path lies inside ``roots`` and the
    directory entry is still the inode the plan proved."""
    if roots:
        check_inside(a.path.parent, roots, f"delete {a.path.name}")
    dfd = os.open(a.path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        st = os.stat(a.path.name, dir_fd=dfd, follow_symlinks=False)
        if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != (
            a.st_dev,
            a.st_ino,
            a.size,
            a.mtime_ns,
        ) or not stat.S_ISREG(st.st_mode):
            raise StoreError(
                "changed since it was checked; not deleted",
                path=a.path,
                hint="something else is writing this store; run again when it is quiet",
            )
        os.unlink(a.path.name, dir_fd=dfd)
    finally:
        os.close(dfd)


def execute_plan(
    plan: ExpiryPlan, on_delete: Callable[[Condemned], None] | None = None, pause_ms: int = 0
) -> ExpiryResult:
    """Delete the plan's files in its order; stop at the first failure.

    Each kind's directories are fsynced before the next kind starts, so after a crash the
    consume queues and index never lose files the commit log still needs.
    """
    res = ExpiryResult()
    dirs: set[Path] = set()
    kind = None
    for a in plan.actions:
        if a.kind != kind:
            for d in sorted(dirs):
                fsync_dir(d)
            dirs.clear()
            kind = a.kind
        try:
            _unlink_proven(a, plan.roots)
        except FileNotFoundError:
            res.error = StoreError(
                "vanished before it was deleted", path=a.path, hint="is another expire or the broker running? run again"
            )
            break
        except (StoreError, RefusedError) as e:  # RefusedError: the directory now leads out of the roots
            res.error = e
            break
        except OSError as e:
            res.error = StoreError(
                f"cannot delete: {e.strerror}",
                path=a.path,
                hint="check the directory's permissions (read-only snapshot?)",
            )
            break
        res.deleted.append(a)
        dirs.add(a.path.parent)
        if on_delete is not None:
            on_delete(a)
        if pause_ms > 0:
            time.sleep(pause_ms / 1000)
    for d in sorted(dirs):
        fsync_dir(d)
    return res
