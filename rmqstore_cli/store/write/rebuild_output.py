"""rebuild-index's output: the set the engine builds (``build``: the plan, tasks and join of
``pipeline/rebuild_tasks.py``, on this machine or on Spark), put where it belongs. Beside the
store (``--output``: :func:`rebuild_to`, the store only read, its commit log linked or copied)
or in place of the store's own ``consumequeue/``, ``index/`` and checkpoint (``--in-place``:
:func:`rebuild_in_place`, crash-safe under a journal that
:func:`~rmqstore_cli.store.write.rebuild_journal.recover_journal` finishes after a crash; the
journal and the swap are ``rebuild_journal.py``'s). Either way the set is built in a staging
directory, fsynced, and renamed into place; a failure removes what the run wrote.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

from rmqstore_cli.errors import StoreError, UsageError
from rmqstore_cli.store.files import mapguard, safefs
from rmqstore_cli.store.files.lock import StoreLock, refuse_if_live
from rmqstore_cli.store.files.mapped_files import fsync_dir
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.layout.root_entries import BACKUP_DIR
from rmqstore_cli.store.write.rebuild import BCQ_DIR, Build, DispatchReport, Progress, RebuildOptions
from rmqstore_cli.store.write.rebuild_journal import (
    JOURNAL,
    STAGING_PREFIX,
    checkpoint_backup_bytes,
    recover_journal,
    rmtree_quietly,
    roll_forward,
    write_journal,
)


def _rebuilds_batch_queues(config: StoreConfig, opts: RebuildOptions) -> bool:
    """A whole rebuild of the queues of a store with BatchCQ topics writes batchconsumequeue/ too."""
    from rmqstore_cli.store.queues.batch_queue import batch_topics

    return opts.build_cq and opts.topics is None and bool(batch_topics(config.root))


def _fsync_tree(path: Path) -> None:
    """Make everything written below ``path`` durable before it is renamed into place: one
    ``syncfs`` of its file system where that reports a failed write-back (Linux 5.8+,
    :func:`_syncfs`), instead of an fsync per file and directory (20 000 queues: 37 000
    fsyncs, each a journal commit); elsewhere every file and directory is fsynced."""
    if not path.exists() or _syncfs(path):
        return
    for dirpath, _, names in os.walk(path):
        for n in names:
            fd = os.open(os.path.join(dirpath, n), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def _syncfs(path: Path) -> bool:
    """``syncfs(2)`` of the file system holding ``path``: True when done; False where there is
    none, or where its failures go unreported (Linux before 5.8 returns 0 whatever the
    write-back did), so the caller fsyncs each file. A failure is a StoreError naming ``path``."""
    fn = _syncfs_call()
    if fn is None:
        return False
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise safefs.os_error(OSError(err, os.strerror(err)), path, "sync the rebuilt files")
    finally:
        os.close(fd)
    return True


def _syncfs_call():
    """libc's ``syncfs`` on Linux 5.8+ (where it reports write-back errors), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (5, 8):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


def _new_checkpoint(
    base: StoreCheckpoint | None, rep: DispatchReport, opts: RebuildOptions, fresh: bool
) -> StoreCheckpoint:
    cp = StoreCheckpoint() if fresh or base is None else StoreCheckpoint(**asdict(base))
    if fresh and rep.last_store_timestamp:
        cp.physic_msg_timestamp = rep.last_store_timestamp
    if opts.build_cq and opts.topics is None and rep.last_store_timestamp:
        cp.logics_msg_timestamp = rep.last_store_timestamp
    if opts.build_index:
        cp.index_msg_timestamp = rep.index_msg_timestamp
    return cp


def _run_id() -> str:
    return time.strftime("%Y%m%d%H%M%S") + f"{time.time_ns() // 1_000_000 % 1000:03d}-{os.getpid()}"


# ----------------------------------------------------------------- --output


def check_output(out: Path, stores: list[Path]) -> None:
    """Refuse an ``--output`` that is, lies inside, or contains a directory being read (a
    store root, its data directories — which may be links to another disk — or a commit-log
    directory the config names): the stores are only read. Real paths are
    compared, so a link cannot smuggle the output into a store. A file (or a path through
    a file) where the output directory belongs is refused too. UsageError (exit 2)."""
    o = safefs.real(out)
    for st in stores:
        r = safefs.real(st)
        if o == r:
            raise UsageError(
                f"⟦output⟧ {out} is the store {st} itself", hint="use ⟦in_place⟧ to replace the store's own files"
            )
        if safefs.is_inside(o, [r]):
            raise UsageError(
                f"⟦output⟧ {out} lies inside the store {st}, which rebuild-index only reads",
                hint="choose a directory outside the store, or use ⟦in_place⟧",
            )
        if safefs.is_inside(r, [o]):
            raise UsageError(
                f"⟦output⟧ {out} contains the store {st}, which rebuild-index only reads",
                hint="choose a directory outside the store",
            )
    p = Path(o)
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    if not p.is_dir():
        raise UsageError(f"⟦output⟧ {out}: {p} is not a directory", hint="choose a directory for ⟦output⟧")


def rebuild_to(
    config: StoreConfig,
    out: Path,
    opts: RebuildOptions,
    copy_commitlog: bool = False,
    progress: Progress | None = None,
    *,
    build: Build,
) -> tuple[DispatchReport, dict]:
    """Write ``out/consumequeue``, ``out/index`` and ``out/checkpoint``; the source is only read.
    ``out/commitlog`` becomes a symlink to the source's (a copy with ``copy_commitlog``).

    On any failure (a full disk, a read-only file system) whatever this run wrote beside
    the store is removed again, and the error is one line."""
    check_output(out, [config.root, *config.commitlog_dirs, config.consumequeue_dir, config.index_dir])
    out = Path(safefs.real(out))
    parts = [
        p
        for p, on in (
            ("consumequeue", opts.build_cq),
            ("index", opts.build_index),
            (BCQ_DIR, _rebuilds_batch_queues(config, opts)),
        )
        if on
    ]
    for p in parts:
        if os.path.lexists(out / p):
            raise UsageError(f"{out / p} already exists", hint="choose an empty ⟦output⟧ directory")
    plan = {
        "output": str(out),
        "writes": [str(out / p) for p in parts] + [str(out / "checkpoint")],
        "commitlog": ("copy of " if copy_commitlog else "symlink to ") + ",".join(map(str, config.commitlog_dirs)),
    }
    if opts.dry_run:
        rep = build(config, out / ".dry-run-never-written", opts, progress)
        return rep, plan
    made = _made_dirs(out)
    created: list[Path] = []
    staging = out / (STAGING_PREFIX + _run_id())
    try:
        out.mkdir(parents=True, exist_ok=True)
        rep = build(config, staging, opts, progress)
        mapguard.check_all()  # nothing is renamed into place from a read a shrinking file spoilt
        for p in parts:
            (staging / p).mkdir(parents=True, exist_ok=True)
        _fsync_tree(staging)
        for p in parts:
            os.rename(staging / p, out / p)
            created.append(out / p)
        base = StoreCheckpoint.read(config.checkpoint_path) if config.checkpoint_path.exists() else None
        for name in ("checkpoint", "checkpoint.tmp"):
            if not os.path.lexists(out / name):
                created.append(out / name)
        _new_checkpoint(base, rep, opts, fresh=True).write(out / "checkpoint")
        if not os.path.lexists(out / "commitlog"):
            created.append(out / "commitlog")
        _reference_commitlog(config, out, copy_commitlog, rep)
        fsync_dir(out)
    except BaseException as e:
        _undo_output(out, created + [staging, out / (STAGING_PREFIX + "commitlog")], made)
        if isinstance(e, OSError):
            raise safefs.os_error(e, e.filename or out, "write the rebuilt set") from None
        raise
    finally:
        if os.path.lexists(staging):
            rmtree_quietly(staging, [out])
    return rep, plan


def _made_dirs(out: Path) -> list[Path]:
    """The directories ``out.mkdir(parents=True)`` will create, deepest first."""
    made = []
    p = out
    while not os.path.lexists(p) and p.parent != p:
        made.append(p)
        p = p.parent
    return made


def _undo_output(out: Path, paths: list[Path], made: list[Path]) -> None:
    """Remove what a failed ``--output`` run wrote (links unlinked, never followed), then
    the output directories it created, if empty. Best effort: the error that got us here
    is the one reported."""
    for p in paths:
        try:
            if os.path.islink(p) or p.is_file():
                p.unlink()
            elif p.is_dir():
                safefs.rmtree_inside(p, [out])
        except (OSError, StoreError):
            pass
    for d in made:
        try:
            d.rmdir()
        except OSError:
            break


def _reference_commitlog(config: StoreConfig, out: Path, copy: bool, rep: DispatchReport) -> None:
    dl = config.dledger_dir
    if dl is not None and dl.is_dir():  # DLedger: data/, index/, checkpoint, currterm go together
        _reference_dir(dl.resolve(), out / dl.name, copy)
    target = out / "commitlog"
    if target.exists() or target.is_symlink():
        return
    dirs = [d.resolve() for d in config.commitlog_dirs if d.is_dir() and (dl is None or d.parent != dl)]
    if not dirs:
        return
    if not copy:
        if len(dirs) == 1:
            target.symlink_to(dirs[0], target_is_directory=True)
        return
    tmp = out / (STAGING_PREFIX + "commitlog")
    tmp.mkdir(exist_ok=True)
    for d in dirs:
        for p in sorted(d.iterdir()):
            if p.is_file() and p.name.isdigit():
                _sparse_copy(p, tmp / p.name)
    os.rename(tmp, target)


def _reference_dir(src: Path, target: Path, copy: bool) -> None:
    """``target`` a symlink to the directory ``src``, or (``copy``) a sparse copy of its tree."""
    if target.exists() or target.is_symlink():
        return
    if not copy:
        target.symlink_to(src, target_is_directory=True)
        return
    tmp = target.with_name(STAGING_PREFIX + target.name)
    tmp.mkdir(exist_ok=True)
    for p in sorted(src.rglob("*")):
        if p.is_dir():
            (tmp / p.relative_to(src)).mkdir(exist_ok=True)
        elif p.is_file():
            _sparse_copy(p, tmp / p.relative_to(src))
    os.rename(tmp, target)


def _sparse_copy(src: Path, dst: Path, chunk: int = 1 << 20) -> None:
    """Copy keeping zero runs as holes (commit-log files are preallocated, mostly zero at the tail)."""
    zero = bytes(chunk)
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        while True:
            b = fi.read(chunk)
            if not b:
                break
            if b == zero[: len(b)]:
                fo.seek(len(b), os.SEEK_CUR)
            else:
                fo.write(b)
        fo.truncate(size)
        fo.flush()
        os.fsync(fo.fileno())
    shutil.copystat(src, dst)  # expiry reads mtimes


# ----------------------------------------------------------------- --in-place


def rebuild_in_place(
    config: StoreConfig,
    opts: RebuildOptions,
    no_backup: bool = False,
    progress: Progress | None = None,
    *,
    build: Build,
) -> tuple[DispatchReport | None, dict]:
    """Replace the store's own ``consumequeue/`` and ``index/`` (or the selected topics'
    queue directories) and update its checkpoint.

    Crash safety (every step is a rename on one file system, and is repeatable):

    1. journal ``<root>/.rebuild-index.journal`` := state *building*; build the new set in
       ``<root>/.rebuild-index-<id>/``, put a marker file ``.rebuild-<id>`` in each new
       directory, fsync everything. A crash here leaves the old set untouched; the next
       run deletes the staging directory (roll back).
    2. journal := *swapping* (lists every target, staged and backup path). For each
       directory: ``renameat2(RENAME_EXCHANGE)`` swaps new and old atomically (the target
       never disappears), the old one is renamed to ``rmqstore-backup/<id>/<name>`` (a root
       entry verify knows: :data:`~rmqstore_cli.store.layout.root_entries.BACKUP_DIR`), then the marker is
       removed. Without RENAME_EXCHANGE (some file systems) the old one is renamed away
       first, then the new one in. The marker tells a re-run whether a target already is
       the new set, so a re-run after a crash completes the swap (roll forward). The
       checkpoint is copied to ``rmqstore-backup/<id>/checkpoint`` and replaced by an atomic rename.
    3. journal := *cleanup*: with ``no_backup`` the backups are deleted; the staging
       directory and then the journal are removed.

    At any moment each of ``consumequeue/`` and ``index/`` is a complete old or complete
    new set (in the no-exchange fallback: briefly absent, with the journal saying how to
    finish). Any later run of rebuild-index on the store (or ``--recover``) finishes first.
    """
    root = config.root
    refuse_if_live(root)
    lock = StoreLock(root, hint="stop the broker or the other rebuild first")
    lock.acquire()
    try:
        prior = recover_journal(root)
        if (
            prior is not None
            and prior.get("outcome") == "completed"
            and prior.get("options") == opts.key()
            and not opts.dry_run
        ):
            return None, {
                "recovered": prior["id"],
                "outcome": "completed the interrupted rebuild",
                "backups": [] if prior["no_backup"] else [p[2] for p in prior["parts"]],
            }
        run = _run_id()
        staging = root / (STAGING_PREFIX + run)
        keep = root / BACKUP_DIR / run  # the replaced sets, where verify and stats know them (root_entries)
        parts, backup_dirs = _swap_parts(config, opts, staging, keep)
        cp = config.checkpoint_path
        plan = {
            "in_place": str(root),
            "replaces": [p[0] for p in parts] + [str(cp)],
            "backups": [] if no_backup else [p[2] for p in parts] + [str(keep / cp.name)],
            "staging": str(staging),
        }
        if prior is not None:
            plan["recovered"] = prior["id"]
            plan["recovery_outcome"] = prior["outcome"]
        if not no_backup:  # refused before anything changes, not halfway through the swap
            checkpoint_backup_bytes(cp)
        if opts.dry_run:
            rep = build(config, staging / ".dry-run-never-written", opts, progress)
            return rep, plan
        marker = f".rebuild-{run}"
        journal = {
            "id": run,
            "state": "building",
            "staging": str(staging),
            "parts": parts,
            "checkpoint": [str(cp), str(staging / "checkpoint"), str(keep / cp.name)],
            "no_backup": no_backup,
            "marker": marker,
            "options": opts.key(),
            "backup_dirs": backup_dirs,
        }
        return _build_and_swap(config, journal, opts, progress, build), plan
    finally:
        lock.release()


def _swap_parts(
    config: StoreConfig, opts: RebuildOptions, staging: Path, keep: Path
) -> tuple[list[list[str]], list[str]]:
    """What the swap replaces, as the journal lists it: per directory ``[target, staged,
    backup, "replace"]`` (the whole ``consumequeue/``, or each selected topic's directory in
    it; ``index/``; ``batchconsumequeue/`` with the queues), and the backup directories
    ``--no-backup`` removes once empty, innermost first."""
    root = config.root
    parts: list[list[str]] = []
    backup_dirs: list[str] = []
    if opts.build_cq:
        cq = config.consumequeue_dir
        if opts.topics is None:
            parts.append([str(cq), str(staging / "consumequeue"), str(keep / cq.name), "replace"])
        else:
            backup_dirs.append(str(keep / cq.name))
            for t in sorted(set(opts.topics)):
                parts.append([str(cq / t), str(staging / "consumequeue" / t), str(keep / cq.name / t), "replace"])
    if opts.build_index:
        ix = config.index_dir
        parts.append([str(ix), str(staging / "index"), str(keep / ix.name), "replace"])
    if _rebuilds_batch_queues(config, opts):
        parts.append([str(root / BCQ_DIR), str(staging / BCQ_DIR), str(keep / BCQ_DIR), "replace"])
    backup_dirs += [str(keep), str(keep.parent)]  # --no-backup: removed once empty
    return parts, backup_dirs


def _build_and_swap(
    config: StoreConfig, journal: dict, opts: RebuildOptions, progress: Progress | None, build: Build
) -> DispatchReport:
    """Steps 1 to 3 of :func:`rebuild_in_place` under ``journal``: a failure while building
    (or while saying *swapping*) rolls back at once, the old set untouched; a failure once
    swapping leaves the journal for the next run to roll forward, and says so."""
    root, staging = config.root, Path(journal["staging"])
    try:
        write_journal(root, journal)
        rep = _build_staging(config, staging, journal["parts"], journal["marker"], opts, progress, build)
    except BaseException as e:  # full disk, read-only file system, interrupt: roll back now
        _roll_back(root, staging)
        if isinstance(e, OSError):
            raise safefs.os_error(e, e.filename or staging, "write the rebuilt set") from None
        raise
    journal["state"] = "swapping"
    try:
        write_journal(root, journal)
    except BaseException:
        _roll_back(root, staging)
        raise
    try:
        roll_forward(root, journal)
    except OSError as e:
        err = safefs.os_error(e, e.filename or root, "finish the swap")
        err.hint = "the next rebuild-index run (or --recover) completes it"
        raise err from None
    except StoreError as e:
        e.hint = (e.hint + "; " if e.hint else "") + "the next rebuild-index run (or --recover) completes the swap"
        raise
    return rep


def _build_staging(
    config: StoreConfig,
    staging: Path,
    parts: list[list[str]],
    marker: str,
    opts: RebuildOptions,
    progress: Progress | None,
    build: Build,
) -> DispatchReport:
    """Step 1 of :func:`rebuild_in_place`: the new set in ``staging``, marked and fsynced."""
    staging.mkdir()
    rep = build(config, staging, opts, progress)
    mapguard.check_all()  # a read a shrinking file spoilt is rolled back, never swapped in
    for part in parts:
        staged = Path(part[1])
        if opts.topics is None:
            staged.mkdir(parents=True, exist_ok=True)
        if staged.exists():
            (staged / marker).write_bytes(b"")
        else:
            part[3] = "remove"
    cp = config.checkpoint_path
    base = StoreCheckpoint.read(cp) if cp.exists() else None
    _new_checkpoint(base, rep, opts, fresh=False).write(staging / "checkpoint")
    _fsync_tree(staging)
    return rep


def _roll_back(root: Path, staging: Path) -> None:
    """Undo step 1 after a failure (the old set was never touched): the staging directory
    and then the journal go. If even that fails (the disk is gone), the journal still says
    *building* and the next run rolls back."""
    try:
        rmtree_quietly(staging, [root])
        safefs.unlink_inside(root / JOURNAL, [root])
        fsync_dir(root)
    except (OSError, StoreError):
        pass
