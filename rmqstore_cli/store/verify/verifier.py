"""The Verifier: every check over one store, its findings to a sink, its summary.

The checks are grouped by what they read, one module each (:mod:`.scan` the commit-log
walk, :mod:`.records` a batch of records, :mod:`.queues`, :mod:`.index`, :mod:`.recovery`);
:class:`Verifier` joins them and runs them in phases, each public so that a pipeline can
run a phase on a part of the store (``pipeline.verify_tasks``): :meth:`infer_sizes`,
:meth:`open_store`, :meth:`scan_commitlog` (or :meth:`open_commitlog` then
:meth:`scan_file_at` per file), :meth:`finish_queues`, :meth:`finish_index`,
:meth:`check_index_missing`, :meth:`check_checkpoint`, :meth:`check_recovery`,
:meth:`check_configs`.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.checks.findings import (
    CHECKS,
    ERROR,
    INFO,
    WARNING,
    Finding,
    FindingList,
    FindingSink,
    VerifyOptions,
    text,
)
from rmqstore_cli.store.files import mapguard
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.files.lock import abort_exists, lock_holder
from rmqstore_cli.store.files.mapped_files import entries, is_file_entry, queue_tree
from rmqstore_cli.store.files.safefs import kind_of
from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
from rmqstore_cli.store.layout.config import StoreConfig, data_files
from rmqstore_cli.store.queues.index import index_file_paths
from rmqstore_cli.store.verify.bcq import BatchQueueChecks
from rmqstore_cli.store.verify.configs import ConfigChecks
from rmqstore_cli.store.verify.dledger import DLedgerChecks
from rmqstore_cli.store.verify.epochs import EpochChecks
from rmqstore_cli.store.verify.index import IndexChecks
from rmqstore_cli.store.verify.lmq import LmqChecks
from rmqstore_cli.store.verify.overdue import OverdueChecks
from rmqstore_cli.store.verify.queues import QueueChecks
from rmqstore_cli.store.verify.records import RecordChecks
from rmqstore_cli.store.verify.recovery import RecoveryChecks
from rmqstore_cli.store.verify.rocksdb import RocksDBChecks
from rmqstore_cli.store.verify.root import RootChecks
from rmqstore_cli.store.verify.scan import CommitLogScan
from rmqstore_cli.store.verify.timer import TimerChecks


class Verifier(
    CommitLogScan,
    RecordChecks,
    QueueChecks,
    LmqChecks,
    IndexChecks,
    RecoveryChecks,
    DLedgerChecks,
    TimerChecks,
    OverdueChecks,
    BatchQueueChecks,
    RocksDBChecks,
    RootChecks,
    ConfigChecks,
    EpochChecks,
):
    """Run every check over one store; iterate :meth:`run` for findings, then read ``summary``."""

    #: Free an index file's arrays and mapping once the scan has passed all its entries.
    retire_index_files = True
    #: Read the entries of an index file in offset order as the scan passes them
    #: (:meth:`IndexScan.entries_in`) instead of loading the whole file.
    stream_index_files = True

    def __init__(
        self, config: StoreConfig, options: VerifyOptions | None = None, progress=None, sink: FindingSink | None = None
    ):
        self.config = config
        self.opt = options or VerifyOptions()
        self.root = config.root
        self.counts: Counter[str] = Counter()
        #: infer_sizes' listing of the consume-queue directories (root, tree), which the queues'
        #: open takes once instead of listing them again
        self.queue_listing: tuple | None = None
        self.by_severity: Counter[str] = Counter()
        self.messages = 0
        self.bytes = 0  # total size of the records counted in messages (not of the files)
        self.files = Counter()
        #: A part of the store not checked, and why (not the store's fault: a missing binding).
        self.skipped: dict[str, str] = {}
        self.progress = progress  # callable(bytes_done) or None
        #: Where findings go (default: a list :meth:`run` drains).
        self.sink: FindingSink = sink if sink is not None else FindingList()
        #: While True, findings are neither counted nor emitted (:meth:`muted`).
        self.mute = False
        self.notes: list[str] = []

    def _add(
        self,
        check: str,
        file: str,
        offset: int | None,
        detail: str,
        severity: str | None = None,
        subject: tuple | None = None,
        **extra,
    ) -> None:
        """Count a finding; emit it to the sink unless ``max_findings`` of its check came before."""
        if self.mute:
            return
        sev = severity or CHECKS[check][0]
        self.counts[check] += 1
        self.by_severity[sev] += 1
        if self.opt.max_findings is None or self.counts[check] <= self.opt.max_findings:
            file, detail = text(file), text(detail)  # a non-UTF-8 name on disk: shown escaped
            extra = {k: text(v) if isinstance(v, str) else v for k, v in extra.items()}
            self.sink.emit(Finding(check, sev, file, offset, detail, extra, subject))

    @contextmanager
    def muted(self) -> Iterator[None]:
        """Run phases whose findings are another part's (a pipeline task opens the whole
        store but reports only its own file)."""
        self.mute = True
        try:
            yield
        finally:
            self.mute = False

    def _count_only(self, check: str, k: int) -> None:
        """Findings of ``check`` beyond ``max_findings`` that were never built: counted only."""
        if k:
            self.counts[check] += k
            self.by_severity[CHECKS[check][0]] += k

    def _drain(self) -> Iterator[Finding]:
        drain = getattr(self.sink, "drain", None)
        if drain is not None:
            yield from drain()

    def rel(self, p: Path | str) -> str:
        return os.path.relpath(p, self.root)

    @property
    def summary(self) -> dict:
        return {
            "store": str(self.root),
            "messages": self.messages,
            "bytes": self.bytes,
            "files": {k: n for k, n in self.files.items() if n},
            "commitlog_min_offset": getattr(self, "cl_min", 0),
            "commitlog_end_offset": getattr(self, "cl_end", 0),
            "consume_queues": len(getattr(self, "queues", {})),
            "errors": self.by_severity.get(ERROR, 0),
            "warnings": self.by_severity.get(WARNING, 0),
            "infos": self.by_severity.get(INFO, 0),
            "findings": dict(sorted(self.counts.items())),
            "notes": self.notes,
            "skipped": dict(self.skipped),
            "c_extensions": FAST_PATHS.extensions(),  # which loops ran: a slow run is never silent
            **({"epochs": self.epochs} if getattr(self, "epochs", None) else {}),
        }

    @property
    def ok(self) -> bool:
        return self.by_severity.get(ERROR, 0) == 0

    def run(self) -> Iterator[Finding]:
        """Every check, the findings as they come (with the default sink). A file that shrank
        while it was read is a ShrunkError (``mapguard.check``) after the log's scan and at
        the end, not findings about the zeros it left."""
        self.infer_sizes()
        yield from self._drain()
        self.open_store()
        yield from self._drain()
        yield from self.scan_commitlog()
        mapguard.check_all()
        self.finish_queues()
        self.check_rocksdb()
        yield from self._drain()
        self.finish_index()
        yield from self._drain()
        self.check_index_missing()
        self.check_checkpoint()
        self.check_recovery()
        self.check_epochs()
        self.check_timer()
        self.check_overdue()
        self.check_batch_queues()
        self.check_configs()
        mapguard.check_all()
        yield from self._drain()
        for q in self.queues.values():
            q.close()
        for f in self.index_files:
            f.close()
        self.close_rocksdb()

    def open_store(self, index: bool = True) -> None:
        """The lock, the checkpoint, the abort file, the consume queues and (``index``) the
        index files checked alone; without ``index`` only what lies in index/ is looked at."""
        cfg = self.config
        pid = None if self.not_regular(self.root / "lock") else lock_holder(self.root)
        if pid is not None:
            self._add(
                "store.live-broker",
                "lock",
                0,
                f"pid {pid} holds the lock: the broker is running, so files may change while they are checked",
            )
        p = cfg.checkpoint_path
        self.checkpoint = None
        if self.not_regular(p):
            pass
        elif p.exists():
            try:
                self.checkpoint = StoreCheckpoint.read(p)
            except StoreError as e:
                self._add("checkpoint.missing", "checkpoint", 0, f"unreadable checkpoint: {e.message}")
        else:
            self._add(
                "checkpoint.missing",
                "checkpoint",
                None,
                "no checkpoint file: the broker starts from zero times and recovers from the first commit-log file",
                severity=WARNING,
            )
        self.abort = abort_exists(self.root)
        self.check_root_entries()
        self.open_queues()
        if index:
            self.open_index()
        else:
            self.index_files = []
            for p in index_file_paths(cfg.index_dir):  # a FIFO, device or directory in index/: a finding
                self.not_regular(p)

    def not_regular(self, path: Path) -> bool:
        """Whether ``path`` exists (links followed) but is not a regular file: then it is a
        ``store.not-regular`` finding, and the caller skips it (opening a FIFO could hang,
        mapping a device could read forever)."""
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if not os.path.islink(path):
                return False
            what = f"a symbolic link to nothing ({os.readlink(path)})"
        except OSError as e:
            what = f"unreadable ({e.strerror})"
        else:
            if stat.S_ISREG(st.st_mode):
                return False
            what = kind_of(st.st_mode)
        self._add("store.not-regular", self.rel(path), None, f"{what} where a store file belongs")
        return True

    def infer_sizes(self) -> None:
        """Like ``StoreConfig.infer_sizes`` but a disagreeing file is a finding, not the end."""
        cfg = self.config
        tree = queue_tree(cfg.consumequeue_dir)
        self.queue_listing = (cfg.consumequeue_dir, tree)  # open_queues reads it: listed once
        kinds = [
            ("mapped_file_size_commit_log", "commitlog", data_file_sizes(cfg.commitlog_dirs)),
            ("mapped_file_size_consume_queue", "cq", entry_sizes(e for _, qs in tree for _, es in qs for e in es)),
        ]
        for attr, label, sizes in kinds:
            sizes.pop(0, None)  # an empty file tells no size (it is a file-size finding later)
            if not sizes:
                continue
            want = cfg.cq_file_size if label == "cq" else getattr(cfg, attr)
            if attr in cfg.explicit or want in sizes and (len(sizes) == 1 or sizes[want] * 2 >= sum(sizes.values())):
                continue
            size = max(sizes.items(), key=lambda kv: (kv[1], kv[0] == want, kv[0]))[0]
            if len(sizes) > 1 and sizes[size] * 2 <= sum(sizes.values()):
                raise StoreError(
                    f"{label} files disagree on their size ({dict(sizes)}) and none is the majority",
                    path=cfg.root,
                    hint="pass the broker's sizes or ⟦broker_conf⟧",
                )
            setattr(cfg, attr, size)
            self.notes.append(f"{attr} = {size} inferred from the files")
        files = data_files([cfg.index_dir])
        sizes = Counter(p.stat().st_size for p in files)
        if sizes and cfg.index_file_size not in sizes and not {"max_hash_slot_num", "max_index_num"} & cfg.explicit:
            from rmqstore_cli.store.queues.index import infer_index_geometry

            size = sizes.most_common(1)[0][0]
            same = [p for p in files if p.stat().st_size == size]
            try:
                slots, entries = infer_index_geometry(same, size)
            except StoreError:  # a damaged file spoils the joint inference: let the files vote
                votes: Counter = Counter()
                for p in same:
                    try:
                        votes[infer_index_geometry([p], size)] += 1
                    except StoreError:
                        pass
                if not votes:
                    raise
                slots, entries = votes.most_common(1)[0][0]
            cfg.max_hash_slot_num, cfg.max_index_num = slots, entries
            self.notes.append(f"maxHashSlotNum = {slots}, maxIndexNum = {entries} inferred from the index files")


def data_file_sizes(dirs) -> Counter:
    """How many files of ``dirs`` named by digits have each length (``config.data_files``'
    files, ``stat``ed through their entries: no ``Path`` a file for 20 000 queues)."""
    return entry_sizes(e for d in dirs for e in entries(d))


def entry_sizes(listed) -> Counter:
    """:func:`data_file_sizes` of entries listed already."""
    return Counter(os.stat(e.path).st_size for e in listed if e.name.isdigit() and is_file_entry(e))


def open_for_verify(config: StoreConfig) -> StoreConfig:
    """Refuse what is not a store (exit 3), as every command does (``MessageStore.open``);
    sizes are inferred later, tolerantly (:meth:`Verifier.infer_sizes`)."""
    from rmqstore_cli.store.message_store import MessageStore

    return MessageStore.open(config, infer_sizes=False).config
