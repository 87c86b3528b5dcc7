"""The writer's index keys, put a block at a time (issue 23: the write path).

``IndexService#buildIndex`` puts ``topic#UNIQ_KEY`` and ``topic#key`` for every record the
reput dispatches. Per key that is a ``String#hashCode`` in Python and the index header packed
after every put; here the keys of a block are gathered in put order, hashed at once
(:func:`~rmqstore_cli.store.javahash.bulk.index_hashes`) and handed to
:meth:`~rmqstore_cli.store.queues.index_service.IndexService.put_keys`, which writes the bytes those puts
would (slot chains per block, the header once per block). Only the append path uses it: its
physical offsets only grow, so a deferred put never changes which keys the
``endPhyOffset`` check lets in.
"""

from __future__ import annotations

import numpy as np

from rmqstore_cli.store.javahash import index_key_hash
from rmqstore_cli.store.javahash.bulk import index_hashes
from rmqstore_cli.store.queues.index_service import IndexService


class IndexKeyBlock:
    """Index keys waiting for their put, in ``IndexService#putKey`` order; flushed when
    ``size`` are waiting and by :meth:`flush` (before the index is closed or read)."""

    def __init__(self, index: IndexService, size: int):
        self.index, self.size = index, size
        self.keys: list[str] = []
        self.phy: list[int] = []
        self.ts: list[int] = []

    def add(self, keys: list[str], phy_offset: int, store_timestamp: int) -> None:
        """``IndexService#buildIndex`` for one record's keys (``topic#key`` strings)."""
        if not keys:
            return
        self.keys.extend(keys)
        n = len(keys)
        self.phy.extend([phy_offset] * n)
        self.ts.extend([store_timestamp] * n)
        if len(self.keys) >= self.size:
            self.flush()

    def flush(self) -> None:
        """Put the waiting keys (``IndexFile#indexKeyHashMethod`` of each, in bulk)."""
        if not self.keys:
            return
        keys, self.keys = self.keys, []
        phy = np.array(self.phy, np.int64)
        ts = np.array(self.ts, np.int64)
        self.phy, self.ts = [], []
        self.index.put_keys(_hashes(keys), phy, ts)


def _hashes(keys: list[str]) -> np.ndarray:
    """``IndexFile#indexKeyHashMethod`` of each key: the ASCII keys at once over their bytes
    (byte = UTF-16 code unit), any other key by the per-string owner."""
    wide = [i for i, k in enumerate(keys) if not k.isascii()]
    if not wide:
        return index_hashes([k.encode("ascii") for k in keys])
    out = np.empty(len(keys), np.int64)
    narrow = np.ones(len(keys), bool)
    narrow[wide] = False
    ascii_at = np.flatnonzero(narrow)
    if ascii_at.size:
        out[ascii_at] = index_hashes([keys[i].encode("ascii") for i in ascii_at.tolist()])
    out[wide] = [index_key_hash(keys[i]) for i in wide]
    return out
