"""Consistency checks of a whole store, as findings (``rmqstore verify``).

The engine proves a store consistent or says exactly where it is not. It knows nothing of
terminals: :class:`Verifier` emits :class:`Finding` objects (a stable check id, a
severity, the file relative to the store root, the byte offset in that file, a detail) to
a :class:`FindingSink` and keeps a summary. It reads through the store's owners
(:class:`~rmqstore_cli.store.queues.consume_queue.ConsumeQueue`,
:class:`~rmqstore_cli.store.queues.index.IndexFile`, the commit log's mapped files and batch
walk) and decodes no layout itself.

How it reads, fast and in bounded memory (the modules):

* :mod:`.scan`: each commit-log file is walked record by record, a batch at a time;
  damage does not stop the scan (it resynchronises on the next plausible record).
* :mod:`.records`: every field of a batch gathered at once with numpy and checked
  vectorised; only body CRC, topic and properties syntax stay per record.
* :mod:`.queues`, :mod:`.index`: consume-queue units and index entries checked against each
  batch as it passes, so the store is read once; what was accounted for kept as runs
  (:mod:`.marks`); :mod:`.index_structure` checks an index file alone.
* :mod:`.recovery`: checkpoint, abort file, what the broker's recovery would truncate.
* :mod:`.limits`: how much is read at a time.

Broker-normal artefacts (docs/format/recovery.md#normal-artefacts) are info, never errors.
"""

from __future__ import annotations

from rmqstore_cli.store.checks.findings import CHECKS, ERROR, INFO, WARNING, Finding, FindingSink, VerifyOptions
from rmqstore_cli.store.verify import limits
from rmqstore_cli.store.verify.checks import first_nonzero
from rmqstore_cli.store.verify.index import IndexScan
from rmqstore_cli.store.verify.marks import Marks
from rmqstore_cli.store.verify.queues import QueueState
from rmqstore_cli.store.verify.scan import Span
from rmqstore_cli.store.verify.verifier import Verifier, open_for_verify

__all__ = [
    "CHECKS",
    "ERROR",
    "INFO",
    "WARNING",
    "Finding",
    "FindingSink",
    "IndexScan",
    "Marks",
    "QueueState",
    "Span",
    "Verifier",
    "VerifyOptions",
    "first_nonzero",
    "limits",
    "open_for_verify",
]
