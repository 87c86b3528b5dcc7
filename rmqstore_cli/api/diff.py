"""``diff_stores``: what changed between two snapshots of a store (``rmqstore diff``).

The question after a failover (what did the slave not have?) and between two backups,
answered offline: both stores are only read.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from rmqstore_cli.api.incident_records import (
    DiffDivergence,
    DiffFile,
    DiffMessage,
    DiffOffset,
    DiffQueue,
    DiffRow,
    DiffSummary,
    DiffUnit,
)
from rmqstore_cli.api.store import Store, open_store

#: The record of each row kind of ``store.store_diff``.
ROW_TYPES: dict[str, type[DiffRow]] = {
    "file": DiffFile,
    "divergence": DiffDivergence,
    "queue": DiffQueue,
    "unit": DiffUnit,
    "message": DiffMessage,
    "offset": DiffOffset,
    "summary": DiffSummary,
}

StoreLike = Store | str | os.PathLike[str]


def diff_stores(
    a: StoreLike,
    b: StoreLike,
    *,
    broker_conf: str | os.PathLike[str] | None = None,
    topic: str | None = None,
    messages: bool = False,
) -> Iterator[DiffRow]:
    """What changed from store ``a`` to store ``b`` (each a :class:`Store` or a path, opened
    with ``broker_conf``; files of an odd size are read up to their real length, as after a
    torn copy), as rows streamed in this order:

    * :class:`DiffFile` per file added, removed or changed (``commitlog/``, ``consumequeue/``,
      ``index/``, ``config/*.json``, ``checkpoint``), compared a chunk at a time;
    * one :class:`DiffDivergence`: where the two commit logs first part;
    * :class:`DiffQueue` per consume queue that differs (and with ``messages``, a
      :class:`DiffUnit` per unit that differs in place and a :class:`DiffMessage` per message
      only one store holds);
    * :class:`DiffOffset` per consumer offset that moved backwards;
    * the :class:`DiffSummary` last (``same``: no row before it).

    ``topic`` narrows it to that topic (its consume-queue files, queues, messages and
    offsets; the commit log is then not compared). Stores given as paths are closed when
    the rows end."""
    from rmqstore_cli.store.answers.store_diff import diff

    opened = []
    stores = []
    for s in (a, b):
        if isinstance(s, Store):
            stores.append(s)
        else:
            st = open_store(s, broker_conf, allow_odd_size=True)
            opened.append(st)
            stores.append(st)
    try:
        for row in diff(stores[0].engine, stores[1].engine, topic, messages):
            yield ROW_TYPES[row.pop("kind")](**row)
    finally:
        for st in opened:
            st.close()
