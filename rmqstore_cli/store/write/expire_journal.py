"""expire's journal: the record of what it deleted, kept in the store root
(``rmqstore-expire.jsonl``).

The broker records each deletion in its store log (``DefaultMappedFile#destroy``: "delete
file[REF:0] <name> OK", under ``~/logs/rocketmqlogs``). rmqstore writes nothing outside the
store or under $HOME, so its record lives in the store root, named in the table of root
entries (:mod:`~rmqstore_cli.store.layout.root_entries`) that verify and stats account by. A
report that could not be written (stdout full, closed, or a pipe cut: exit 6) is then never
the only record of what went.

A run that deletes appends the lines ``expire --format jsonl`` prints, each with the run's
id under ``"run"`` (:func:`run_id`): one line per file right after its unlink, then the
run's summary (``"kind": "summary"``); the file is fsynced at the end. A run killed
part-way leaves the lines of what it deleted and no summary. Before a run
appends, a journal over :data:`LIMIT` bytes loses its oldest lines down to :data:`KEEP`
(written beside and renamed in). Writing the journal never stops the deletions, which are
what a full disk needs: the first failure is kept in :attr:`ExpiryJournal.error`, the
command says it once, and the summary's ``journal`` is then null.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from rmqstore_cli.errors import RmqstoreError
from rmqstore_cli.store.files import safefs

NAME = "rmqstore-expire.jsonl"
#: Past this many bytes, the oldest lines go before a run appends …
LIMIT = 1 << 20
#: … down to the newest lines within this many bytes.
KEEP = 1 << 19


def run_id() -> str:
    """A run's id: its start (UTC), its pid and a random tag (two runs of one process in one
    millisecond still differ), e.g. ``2026-11-22T04:00:01.250Z/4242/9f3a``."""
    import secrets

    now = time.time()
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        f"/{os.getpid()}/{secrets.token_hex(2)}"
    )


class ExpiryJournal:
    """The journal of one expire run in the store at ``root`` (opened, and trimmed, at once)."""

    def __init__(self, root: Path, run: str | None = None):
        self.root = Path(root)
        self.path = self.root / NAME
        self.run = run or run_id()
        #: Why the journal could not be written (one line), or None while it records everything.
        self.error: str | None = None
        self._fd: int | None = None
        try:
            _trim(self.path, self.root)
            self._fd = safefs.open_for_write(self.path, [self.root], create=True, append=True)
        except RmqstoreError as e:
            self.error = str(e)

    def add(self, record: dict) -> None:
        """Append one record (a JSON object on one line, the run's id first)."""
        if self._fd is None:
            return
        import orjson

        line = memoryview(orjson.dumps({"run": self.run, **record}) + b"\n")
        try:
            while line:
                line = line[os.write(self._fd, line) :]
        except OSError as e:
            self._failed(e, "append to")

    def close(self) -> None:
        """fsync and close (a failure is kept like a write's)."""
        if self._fd is None:
            return
        try:
            os.fsync(self._fd)
        except OSError as e:
            self._failed(e, "sync")
        finally:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _failed(self, e: OSError, doing: str) -> None:
        self.error = str(safefs.os_error(e, self.path, doing))
        os.close(self._fd)
        self._fd = None


def _trim(path: Path, root: Path) -> None:
    """Drop the oldest lines of a journal over :data:`LIMIT` bytes, keeping whole lines of
    the last :data:`KEEP` bytes. A link or anything but a regular file is left for
    ``open_for_write`` to refuse."""
    st, what = safefs.stat_regular(path, "read", follow_links=False, missing_ok=True)
    if st is None or what is not None or st.st_size <= LIMIT:
        return
    fd = safefs.open_read_only(path, safefs.O_NOFOLLOW)
    try:
        tail = os.pread(fd, KEEP, st.st_size - KEEP)
    except OSError as e:
        raise safefs.os_error(e, path, "read") from None
    finally:
        os.close(fd)
    safefs.replace_file(path, tail[tail.find(b"\n") + 1 :], [root])
