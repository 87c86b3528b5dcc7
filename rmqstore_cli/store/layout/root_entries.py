"""What a broker writes in its store root (``storePathRootDir``), 4.9.x and 5.x, and the
records rmqstore keeps there (expire's journal, rebuild-index's backups): the one table
``verify`` and ``stats`` account for every root entry by (docs/format/store-layout.md#the-store-root).

Each entry names the broker code that writes it and whether rmqstore reads it
(``checked``): ``verify`` names every entry it does not check (``store.unchecked-entry``,
info) and every entry no broker writes (``store.unknown-entry``, warning); ``stats``
marks the latter ``known: false``. Never silently ignored. One entry is rmqstore's own
(:data:`BACKUP_DIR`: rebuild-index's backups).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RootEntry:
    """One name a broker writes in the store root."""

    name: str
    #: stats' component: commitlog, consumequeue, index, config, or other.
    component: str
    #: The broker code that writes it (``Class#method`` at rocketmq-all-5.3.3 / 4.9.7).
    source: str
    what: str
    #: rmqstore reads and checks it (or there is nothing in it to check).
    checked: bool
    #: ``name`` is a prefix (``dledger-<selfId>``).
    prefix: bool = False


ROOT_ENTRIES: tuple[RootEntry, ...] = (
    RootEntry("commitlog", "commitlog", "MessageStoreConfig#getStorePathCommitLog", "the commit log", True),
    RootEntry(
        "consumequeue",
        "consumequeue",
        "StorePathConfigHelper#getStorePathConsumeQueue",
        "consume queues: files, or the RocksDB database of RocksDBConsumeQueueStore (storeType=defaultRocksDB)",
        True,
    ),
    RootEntry("index", "index", "StorePathConfigHelper#getStorePathIndex", "index files", True),
    RootEntry("checkpoint", "other", "StorePathConfigHelper#getStoreCheckpoint", "the store checkpoint", True),
    RootEntry("lock", "other", "StorePathConfigHelper#getLockFile", "the broker's file lock", True),
    RootEntry(
        "abort",
        "other",
        "StorePathConfigHelper#getAbortFile",
        "present while a broker runs (DefaultMessageStore#createTempFile)",
        True,
    ),
    RootEntry(
        "abort.bak",
        "other",
        "MixAll#string2File",
        "the abort file's previous content, kept by "
        "DefaultMessageStore#createTempFile (5.x); the broker never reads it",
        True,
    ),
    RootEntry(
        "config",
        "config",
        "BrokerPathConfigHelper#getConfigDir",
        "topics, offsets, subscription "
        "groups (ConfigManager#load; 5.x RocksDB config in config/topics/, consumerOffsets/, rdb/)",
        True,
    ),
    RootEntry(
        "consumequeue_ext",
        "other",
        "StorePathConfigHelper#getStorePathConsumeQueueExt",
        "consume-queue ext units (enableConsumeQueueExt)",
        False,
    ),
    RootEntry(
        "batchconsumequeue",
        "other",
        "StorePathConfigHelper#getStorePathBatchConsumeQueue",
        "5.x BatchConsumeQueue (queue.type=BatchCQ topics)",
        True,
    ),
    RootEntry("timerwheel", "other", "TimerMessageStore#getTimerWheelPath", "5.x timer wheel", True),
    RootEntry("timerlog", "other", "TimerMessageStore#getTimerLogPath", "5.x timer log", True),
    RootEntry(
        "compaction",
        "other",
        "CompactionStore.COMPACTION_DIR",
        "5.x compaction topics' log, queue and position-checkpoint",
        True,
    ),
    RootEntry(
        "kvStore",
        "other",
        "PopConsumerService.ROCKSDB_DIRECTORY",
        "5.3 pop consumption records (PopConsumerRocksdbStore)",
        False,
    ),
    RootEntry(
        "epochFileCheckpoint",
        "other",
        "MessageStoreConfig#getStorePathEpochFile",
        "5.x controller-mode epoch entries (EpochFileCache)",
        True,
    ),
    RootEntry("epochFileCheckpoint.bak", "other", "CheckpointFile#getBackFilePath", "the epoch file's backup", True),
    RootEntry(
        "brokerIdentity",
        "other",
        "MessageStoreConfig#getStorePathBrokerIdentity",
        "5.x controller-mode broker metadata (BrokerMetadata)",
        False,
    ),
    RootEntry(
        "brokerIdentity.bak",
        "other",
        "MixAll#string2File",
        "a backup name MixAll#string2File knows; 5.x deletes the file before writing it, so its broker leaves none",
        False,
    ),
    RootEntry(
        "brokerIdentity-temp",
        "other",
        "ReplicasManager (TempBrokerMetadata)",
        "5.x controller-mode registration in progress",
        False,
    ),
    RootEntry("brokerIdentity-temp.bak", "other", "MixAll#string2File", "its previous content", False),
    RootEntry(
        "transaction",
        "other",
        "StorePathConfigHelper#getTranStateTableStorePath",
        "transaction statetable/redolog of old brokers",
        False,
    ),
    RootEntry(
        "dledger-",
        "other",
        "DLedgerConfig#getDefaultPath",
        "a DLedger commit log (enableDLegerCommitLog; DLedgerCommitLog sets storeBaseDir to storePathRootDir)",
        True,
        prefix=True,
    ),
    # rmqstore's own record, where the broker keeps none in the store (it logs deletions to
    # ~/logs/rocketmqlogs/store.log: DefaultMappedFile#destroy); nothing in it for verify to check
    RootEntry(
        "rmqstore-expire.jsonl",
        "other",
        "rmqstore expire (store/write/expire_journal.py)",
        "rmqstore expire's journal: one JSON line per file it deleted, then each run's summary; no broker reads it",
        True,
    ),
)

#: rmqstore's own root entry: ``rebuild-index --in-place`` moves the sets it replaces to
#: ``<root>/rmqstore-backup/<run id>/`` (consumequeue, index, batchconsumequeue, checkpoint).
#: No broker writes or reads it (the broker opens only the names above); verify names it as
#: not checked (info), with what it is, so that the backups are neither unknown nor forgotten.
BACKUP_DIR = "rmqstore-backup"

ROOT_ENTRIES += (
    RootEntry(
        BACKUP_DIR,
        "other",
        "rmqstore rebuild-index --in-place, not a broker",
        "the consume queues, index and checkpoint that rebuild-index replaced, one directory per run; "
        "remove it once the rebuilt store is trusted",
        False,
    ),
)

_BY_NAME = {e.name: e for e in ROOT_ENTRIES if not e.prefix}
_PREFIXES = tuple(e for e in ROOT_ENTRIES if e.prefix)


def classify(name: str) -> RootEntry | None:
    """The broker entry a store-root name is, or None: no 4.9.x/5.x broker writes it."""
    e = _BY_NAME.get(name)
    if e is not None:
        return e
    return next((p for p in _PREFIXES if name.startswith(p.name) and len(name) > len(p.name)), None)


def detect_version(root) -> str | None:
    """ "5" when the store holds something only a 5.x broker writes (the timer's files), else
    None: a 4.9 and a 5.x store are otherwise the same bytes."""
    root = Path(root)
    if any(
        (root / n).exists()
        for n in (
            "timerwheel",
            "timerlog",
            "config/timercheck",
            "config/timermetrics",
            "consumequeue/CURRENT",
            "batchconsumequeue",
        )
    ):  # RocksDB CQ: 5.2+; BatchCQ
        return "5"
    return None
