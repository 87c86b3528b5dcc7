"""rmqstore: read, write, verify and repair Apache RocketMQ broker store directories offline.

The library::

    from rmqstore_cli import open_store

    with open_store("/data/rocketmq/store") as store:
        for m in store.messages(topic="OrderTopic", begin="2026-12-06T10:00", end="2026-12-06T10:05"):
            print(m.msg_id, m.keys)
        report = store.verify()
        for f in report.findings:
            print(f.severity, f.check, f.file, f.offset, f.detail)

Beyond reading: ``store.batches()`` (pyarrow RecordBatches of the same messages),
``message_by_id()``, ``search_offset()``, ``consumer_progress()``, ``stats()``,
``transactions()`` (what became of each transactional message), the 5.x
timer (``timer_slots()``, ``timer_units()``, ``timer_next()``, ``timer_summary()``),
``diff_stores(a, b)`` (what changed between two snapshots), and the
jobs that write: ``rebuild_index()``, ``expire()`` (a dry run unless ``dry_run=False``; the
broker's lock held only while files are deleted) and ``export()``. Each returns frozen
dataclasses whose fields are the command's JSON Lines keys (``as_dict()`` is the object
the command prints); every error is an :class:`RmqstoreError`.

The names in :data:`__all__` are the public, stable API; everything under
``rmqstore_cli.store``, ``.pipeline`` and ``.commands`` is the engine and the command line,
free to change. The names load on first use, so ``rmqstore --help`` stays instant.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_EXPORTS = {
    "open_store": "rmqstore_cli.api.store",
    "Store": "rmqstore_cli.api.store",
    "Message": "rmqstore_cli.api.records",
    "QueueInfo": "rmqstore_cli.api.records",
    "QueueUnit": "rmqstore_cli.api.records",
    "QueueComparison": "rmqstore_cli.api.records",
    "IndexHit": "rmqstore_cli.api.records",
    "Finding": "rmqstore_cli.api.records",
    "VerifyReport": "rmqstore_cli.api.records",
    "MessageId": "rmqstore_cli.api.records",
    "OffsetAtTime": "rmqstore_cli.api.records",
    "ConsumerProgress": "rmqstore_cli.api.records",
    "StatsRow": "rmqstore_cli.api.records",
    "StatsFile": "rmqstore_cli.api.records",
    "StatsReport": "rmqstore_cli.api.records",
    "StatsInterval": "rmqstore_cli.api.records",
    "TimerSlot": "rmqstore_cli.api.timer_records",
    "TimerUnit": "rmqstore_cli.api.timer_records",
    "TimerNext": "rmqstore_cli.api.timer_records",
    "TimerSummary": "rmqstore_cli.api.timer_records",
    "ExpireAction": "rmqstore_cli.api.job_records",
    "ExpireReport": "rmqstore_cli.api.job_records",
    "RebuildReport": "rmqstore_cli.api.job_records",
    "ExportReport": "rmqstore_cli.api.job_records",
    "Transaction": "rmqstore_cli.api.incident_records",
    "TransactionGroup": "rmqstore_cli.api.incident_records",
    "TransactionReport": "rmqstore_cli.api.incident_records",
    "PopMessage": "rmqstore_cli.api.incident_records",
    "PopGroup": "rmqstore_cli.api.incident_records",
    "ReviveQueue": "rmqstore_cli.api.incident_records",
    "PopReport": "rmqstore_cli.api.incident_records",
    "TraceRecord": "rmqstore_cli.api.trace_records",
    "Epoch": "rmqstore_cli.api.epoch_records",
    "EpochFinding": "rmqstore_cli.api.epoch_records",
    "EpochReport": "rmqstore_cli.api.epoch_records",
    "diff_stores": "rmqstore_cli.api.diff",
    "DiffRow": "rmqstore_cli.api.incident_records",
    "DiffFile": "rmqstore_cli.api.incident_records",
    "DiffDivergence": "rmqstore_cli.api.incident_records",
    "DiffQueue": "rmqstore_cli.api.incident_records",
    "DiffUnit": "rmqstore_cli.api.incident_records",
    "DiffMessage": "rmqstore_cli.api.incident_records",
    "DiffOffset": "rmqstore_cli.api.incident_records",
    "DiffSummary": "rmqstore_cli.api.incident_records",
    "OverdueMessage": "rmqstore_cli.api.incident_records",
    "DelayLevel": "rmqstore_cli.api.incident_records",
    "OverdueTopic": "rmqstore_cli.api.incident_records",
    "OverdueReport": "rmqstore_cli.api.incident_records",
    "RmqstoreError": "rmqstore_cli.errors",
    "StoreError": "rmqstore_cli.errors",
    "FileSizeError": "rmqstore_cli.errors",
    "UsageError": "rmqstore_cli.errors",
    "RefusedError": "rmqstore_cli.errors",
    "NotFound": "rmqstore_cli.errors",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # for type checkers and editors (``X as X``: an explicit re-export); at run time the names
    # load lazily
    from rmqstore_cli.api.diff import diff_stores as diff_stores
    from rmqstore_cli.api.epoch_records import (
        Epoch as Epoch,
        EpochFinding as EpochFinding,
        EpochReport as EpochReport,
    )
    from rmqstore_cli.api.incident_records import (
        DelayLevel as DelayLevel,
        DiffDivergence as DiffDivergence,
        DiffFile as DiffFile,
        DiffMessage as DiffMessage,
        DiffOffset as DiffOffset,
        DiffQueue as DiffQueue,
        DiffRow as DiffRow,
        DiffSummary as DiffSummary,
        DiffUnit as DiffUnit,
        OverdueMessage as OverdueMessage,
        OverdueReport as OverdueReport,
        OverdueTopic as OverdueTopic,
        PopGroup as PopGroup,
        PopMessage as PopMessage,
        PopReport as PopReport,
        ReviveQueue as ReviveQueue,
        Transaction as Transaction,
        TransactionGroup as TransactionGroup,
        TransactionReport as TransactionReport,
    )
    from rmqstore_cli.api.job_records import (
        ExpireAction as ExpireAction,
        ExpireReport as ExpireReport,
        ExportReport as ExportReport,
        RebuildReport as RebuildReport,
    )
    from rmqstore_cli.api.records import (
        ConsumerProgress as ConsumerProgress,
        Finding as Finding,
        IndexHit as IndexHit,
        Message as Message,
        MessageId as MessageId,
        OffsetAtTime as OffsetAtTime,
        QueueComparison as QueueComparison,
        QueueInfo as QueueInfo,
        QueueUnit as QueueUnit,
        StatsFile as StatsFile,
        StatsInterval as StatsInterval,
        StatsReport as StatsReport,
        StatsRow as StatsRow,
        VerifyReport as VerifyReport,
    )
    from rmqstore_cli.api.store import (
        Store as Store,
        open_store as open_store,
    )
    from rmqstore_cli.api.timer_records import (
        TimerNext as TimerNext,
        TimerSlot as TimerSlot,
        TimerSummary as TimerSummary,
        TimerUnit as TimerUnit,
    )
    from rmqstore_cli.api.trace_records import TraceRecord as TraceRecord
    from rmqstore_cli.errors import (
        FileSizeError as FileSizeError,
        NotFound as NotFound,
        RefusedError as RefusedError,
        RmqstoreError as RmqstoreError,
        StoreError as StoreError,
        UsageError as UsageError,
    )


def __getattr__(name: str) -> Any:
    """PEP 562: import a public name's module when the name is first asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rmqstore_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
