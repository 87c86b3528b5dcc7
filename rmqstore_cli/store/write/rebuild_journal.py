"""The ``--in-place`` rebuild's journal and swap: the journal written and read back
(``.rebuild-index.journal``), each directory swapped with its staged twin
(``renameat2(RENAME_EXCHANGE)``, else two renames), rolled forward after a crash once the
swap had begun, and the backups cleaned up. :func:`recover_journal` finishes what an
interrupted run left; ``rebuild_output.rebuild_in_place`` runs the swap.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import time
from pathlib import Path

from rmqstore_cli.formats.checkpoint import CHECKPOINT_FILE_SIZE

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files import safefs
from rmqstore_cli.store.files.mapped_files import fsync_dir

JOURNAL = ".rebuild-index.journal"
STAGING_PREFIX = ".rebuild-index-"

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (``renameat2(RENAME_EXCHANGE)``); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    e = ctypes.get_errno()
    if e in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(e, os.strerror(e), str(a))


def _step() -> None:
    """Test hook: RMQSTORE_TEST_SWAP_DELAY seconds between the steps of a swap, so a test
    can kill the process inside the critical section."""
    d = os.environ.get("RMQSTORE_TEST_SWAP_DELAY")
    if d:
        time.sleep(float(d))


def write_journal(root: Path, data: dict) -> None:
    """The journal, written beside under a fresh ``O_EXCL`` name and renamed over: a link
    planted at a fixed temp name (``.rebuild-index.journal.tmp``) is never written through."""
    safefs.replace_file(root / JOURNAL, json.dumps(data).encode(), [root])
    fsync_dir(root)


def read_journal(root: Path) -> dict | None:
    """The journal, read under :data:`safefs.JOURNAL_LIMIT` (a FIFO, ``/dev/zero`` or a huge
    file is one error line), and refused unless every path in it lies inside the store."""
    if not os.path.lexists(root / JOURNAL):
        return None
    try:
        j = safefs.load_json(root / JOURNAL, safefs.JOURNAL_LIMIT, "rebuild journal")
    except StoreError as e:
        e.message = f"unreadable rebuild journal: {e.message}"
        e.hint = "inspect it; remove it only if no .rebuild-index-* directory remains"
        raise
    why = _journal_problem(root, j)
    if why:
        raise StoreError(
            f"rebuild journal refused: {why}",
            path=root / JOURNAL,
            hint="it was not written by this rebuild-index; inspect it, nothing was changed",
        )
    return j


def _journal_problem(root: Path, j) -> str | None:
    """A journal drives renames and deletions: every path it names must lie inside the
    store by its *real* path (a directory link inside the store that leads out does not
    count as inside), so a crafted or foreign journal cannot make a re-run touch anything
    else. A path's last component is renamed or removed, never followed."""
    if not isinstance(j, dict) or j.get("state") not in ("building", "swapping", "cleanup"):
        return "not a journal (no known state)"
    base = safefs.real(root)
    return _staging_problem(j, base) or _paths_problem(j, base) or _names_problem(j)


def _inside(p, base: str) -> bool:
    """``p`` is a path string whose parent lies inside ``base`` by its real path and whose last
    component is a name (relative paths resolve against the working directory, as renames do)."""
    if not (isinstance(p, str) and "\0" not in p and p):
        return False
    a = os.path.abspath(p)
    name = os.path.basename(a)
    return name not in ("", ".", "..") and safefs.is_inside(os.path.dirname(a), [base])


def _staging_problem(j: dict, base: str) -> str | None:
    """The staging directory must be a ``.rebuild-index-*`` directory right in the store."""
    staging = j.get("staging")
    if (
        _inside(staging, base)
        and safefs.real(os.path.dirname(os.path.abspath(staging))) == base
        and os.path.basename(staging).startswith(STAGING_PREFIX)
    ):
        return None
    return "its staging directory is not a .rebuild-index-* directory of the store"


def _part_ok(x, base: str) -> bool:
    """A part is [target, staged, backup, "replace" or "remove"], its three paths inside."""
    return (
        isinstance(x, list) and len(x) == 4 and x[3] in ("replace", "remove") and all(_inside(q, base) for q in x[:3])
    )


def _paths_problem(j: dict, base: str) -> str | None:
    """The parts, the checkpoint's three paths and the backup directories must lie inside."""
    parts = j.get("parts", [])
    if not isinstance(parts, list) or not all(_part_ok(x, base) for x in parts):
        return "a part names a path outside the store"
    if not _checkpoint_ok(j.get("checkpoint"), base):
        return "its checkpoint paths lie outside the store"
    bdirs = j.get("backup_dirs", [])
    if not isinstance(bdirs, list) or not all(_inside(q, base) for q in bdirs):
        return "a backup directory lies outside the store"
    return None


def _checkpoint_ok(cp, base: str) -> bool:
    """No checkpoint, or its three paths (target, staged, backup) inside."""
    return cp is None or (isinstance(cp, list) and len(cp) == 3 and all(_inside(q, base) for q in cp))


def _names_problem(j: dict) -> str | None:
    """The marker is a ``.rebuild-*`` file name (no directory), ``no_backup`` a boolean."""
    m = j.get("marker")
    if not (isinstance(m, str) and m.startswith(".rebuild-") and "/" not in m and "\0" not in m):
        return "bad marker name"
    if not isinstance(j.get("no_backup"), bool):
        return "bad no_backup flag"
    return None


def _swap_dir(target: Path, staged: Path, backup: Path, marker: str) -> None:
    """Put ``staged`` (which holds ``marker``) at ``target``, the old ``target`` at ``backup``.
    Idempotent: the marker tells whether ``target`` already is the new set."""
    if (target / marker).exists():  # exchanged already; staged (if still there) is the old set
        if staged.exists():
            backup.parent.mkdir(parents=True, exist_ok=True)
            _step()
            os.rename(staged, backup)
        _step()
        (target / marker).unlink()
        return
    if not staged.exists():
        return  # done earlier
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        if _exchange(staged, target):
            fsync_dir(target.parent)
            backup.parent.mkdir(parents=True, exist_ok=True)
            _step()
            os.rename(staged, backup)
        else:  # no RENAME_EXCHANGE: a moment without target; the journal rolls it forward
            backup.parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, backup)
            _step()
            os.rename(staged, target)
    else:
        os.rename(staged, target)
    fsync_dir(target.parent)
    _step()
    (target / marker).unlink()


def roll_forward(root: Path, j: dict) -> None:
    marker = j["marker"]
    for target, staged, backup, kind in j["parts"]:
        target, staged, backup = Path(target), Path(staged), Path(backup)
        if kind == "replace":
            _swap_dir(target, staged, backup, marker)
        elif target.exists():  # "remove": the rebuilt set has no such directory
            backup.parent.mkdir(parents=True, exist_ok=True)
            _step()
            os.rename(target, backup)
    cp = j.get("checkpoint")
    if cp:
        target, staged, backup = map(Path, cp)
        if staged.exists():
            if os.path.lexists(target) and not os.path.lexists(backup) and not j["no_backup"]:
                data = checkpoint_backup_bytes(target)
                if data is not None:
                    backup.parent.mkdir(parents=True, exist_ok=True)
                    safefs.replace_file(backup, data, [root])
            _step()
            os.replace(staged, target)
    fsync_dir(root)
    j["state"] = "cleanup"
    write_journal(root, j)
    _cleanup(root, j)


def checkpoint_backup_bytes(path: Path) -> bytes | None:
    """The checkpoint's bytes for its backup: only a regular file of the size the format
    allows (``CHECKPOINT_FILE_SIZE``, read under that cap), so a checkpoint that is a link
    to ``/dev/zero``, a FIFO or a huge sparse file can never make the backup unbounded.
    None when there is nothing to back up (it vanished). Anything else: StoreError."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise safefs.os_error(e, path, "read the checkpoint") from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > CHECKPOINT_FILE_SIZE:
        what = safefs.kind_of(st.st_mode) if not stat.S_ISREG(st.st_mode) else f"{st.st_size} bytes"
        raise StoreError(
            f"checkpoint is {what}, not a regular file of at most {CHECKPOINT_FILE_SIZE} bytes; not backed up",
            path=path,
            hint="move it away, or pass ⟦no_backup⟧ to replace it without a backup",
        )
    return safefs.read_bounded(path, CHECKPOINT_FILE_SIZE, "checkpoint")


def _cleanup(root: Path, j: dict) -> None:
    """Delete what the journal says is left over: only below the store's real root, never
    through a link (``safefs.rmtree_inside``/``unlink_inside``)."""
    roots = [root]
    if j["no_backup"]:
        for _, _, backup, _ in j["parts"]:
            rmtree_quietly(Path(backup), roots)
        cp = j.get("checkpoint")
        if cp and os.path.lexists(cp[2]):
            safefs.unlink_inside(cp[2], roots)
        for extra in j.get("backup_dirs", []):  # innermost first
            if Path(extra).is_dir() and not Path(extra).is_symlink() and not any(Path(extra).iterdir()):
                Path(extra).rmdir()
    rmtree_quietly(Path(j["staging"]), roots)
    safefs.unlink_inside(root / JOURNAL, roots)
    fsync_dir(root)


def rmtree_quietly(path: Path, roots: list[Path]) -> None:
    """``rmtree`` of a directory this rebuild made (staging, backups): skipped when it is a
    link or missing; refused (RefusedError) when its real path leaves the roots."""
    if os.path.islink(path) or not os.path.lexists(path):
        return
    safefs.rmtree_inside(path, roots)


def _remove_stale_staging(root: Path) -> None:
    """Staging directories of runs killed before their journal was written (links skipped)."""
    for p in root.glob(STAGING_PREFIX + "*"):
        rmtree_quietly(p, [root])


def recover_journal(root: Path) -> dict | None:
    """Finish what an interrupted in-place rebuild left: roll back while it was building,
    roll forward once it had started swapping, finish clean-up. Returns the journal."""
    j = read_journal(root)
    if j is None:
        _remove_stale_staging(root)
        return None
    if j["state"] == "building":
        rmtree_quietly(Path(j["staging"]), [root])
        safefs.unlink_inside(root / JOURNAL, [root])
        fsync_dir(root)
        j["outcome"] = "rolled back"
    elif j["state"] == "swapping":
        roll_forward(root, j)
        j["outcome"] = "completed"
    else:
        _cleanup(root, j)
        j["outcome"] = "completed"
    _remove_stale_staging(root)
    return j
