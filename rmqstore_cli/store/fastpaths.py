"""Where the engine chooses its fast paths: the one policy.

Every bulk reader has a reference loop (Python and numpy) and a compiled twin
(:mod:`~rmqstore_cli.store.kernels`, :mod:`~rmqstore_cli.jsonkernel`; numba) that gives the
same result to the bit (tests compare). numba's import and cached code cost ~0.3 s once, so
small jobs stay on the reference loops and big ones switch; once numba is loaded, by
whichever reader, every walk runs compiled (it is paid for). The thresholds and that state
live here, in :data:`FAST_PATHS`, and nowhere else; a caller may also force a path with the
``compiled`` parameter of :func:`~rmqstore_cli.store.commitlog.bulk.walk_records`.
"""
from __future__ import annotations

from types import ModuleType

import numpy as np


class FastPaths:
    """When the compiled loops run instead of the reference ones (one per process).

    * ``walk_after`` — records walked in this process before the commit-log walk compiles
      (the compiled walk saves ~0.4–0.7 µs a record);
    * ``for_bytes`` — a task that reads a commit-log file at least this large (a pipeline
      task: one file, its own process on a Spark worker) compiles at once, since counting
      records alone would leave every task of a 1 GiB file on the reference loops;
    * ``json_min`` — dump renders a block of at least this many JSON lines with the
      compiled renderer (the reference spends ~0.3 s on ~25 000 records; scan blocks grow
      64, 128, … so a dump of fewer than ~4 000 records never loads numba);
    * ``key_block`` — the append path (generate) puts its index keys this many at a time
      (:class:`~rmqstore_cli.store.keyblock.IndexKeyBlock`: hashed in bulk, the header once
      per block); 0 puts each key as it comes (the reference, ``IndexService#putKey``);
    * ``gen_block`` — the append path (generate, ``--from-jsonl``) encodes, writes and
      dispatches this many sends at a time (``CommitLog.append_block``, ``FastDispatcher``);
      0 appends and dispatches each send as it comes (the reference, ``CommitLog.append``).
    """

    def __init__(self, walk_after: int = 500_000, for_bytes: int = 64 << 20, json_min: int = 4096,
                 key_block: int = 1 << 16, gen_block: int = 1 << 13):
        self.walk_after, self.for_bytes, self.json_min = walk_after, for_bytes, json_min
        self.key_block = key_block
        self.gen_block = gen_block
        self.walked = 0
        self._walk = None  # None: not chosen yet; False: no numba; else the compiled walk

    def compile(self) -> bool:
        """Use the compiled loops from now on (numba loaded); False without numba."""
        if self._walk is None:
            try:
                from rmqstore_cli.store.kernels import walk
            except ImportError:  # pragma: no cover - numba is a dependency
                walk = False
            self._walk = walk
        return bool(self._walk)

    def for_file(self, nbytes: int) -> bool:
        """A task about to read ``nbytes`` of commit log: compile when that is
        :attr:`for_bytes` or more (True then, unless numba is missing)."""
        return nbytes >= self.for_bytes and self.compile()

    def kernels(self, checked: int, big_job: bool = False) -> ModuleType | None:
        """The compiled check loops (:mod:`~rmqstore_cli.store.kernels`: walk, body CRCs,
        joins) for a reader that has checked ``checked`` records: from :attr:`walk_after`
        on, or at once for a big job (:meth:`for_file`); None before, or without numba."""
        if (checked < self.walk_after and not big_job) or not self.compile():
            return None
        from rmqstore_cli.store import kernels

        return kernels

    def walk_loop(self, compiled: bool | None = None):
        """The compiled walk to use, or None for the reference loop: ``compiled`` forces
        either; None lets the records walked so far decide."""
        if compiled is None:
            if self._walk is None and self.walked >= self.walk_after:
                self.compile()
            return self._walk or None
        if compiled:
            from rmqstore_cli.store.kernels import walk

            return walk
        return None

    def body_crcs(self, buf, a: np.ndarray | None, at: np.ndarray, ln: np.ndarray) -> np.ndarray:
        """:func:`~rmqstore_cli.store.commitlog.bulk.body_crcs` (``UtilAll#crc32`` of every body),
        small bodies in the compiled loop once the walk runs compiled (numba is paid for),
        long ones and all before (or without ``a``, ``buf`` as a uint8 array) by zlib."""
        from rmqstore_cli.store.commitlog.bulk import body_crcs

        if not self._walk or a is None:
            return body_crcs(buf, at, ln)
        from rmqstore_cli.store import kernels as k

        got = np.empty(at.size, np.int64)
        if k.small_body_crcs(a, at, ln, k.SMALL_BODY, k.CRC_TABLES, got):
            big = np.flatnonzero(ln >= k.SMALL_BODY)
            got[big] = body_crcs(buf, at[big], ln[big])
        return got

    def json_kernel(self, n: int) -> ModuleType | None:
        """The compiled JSON renderer for a block of ``n`` lines, or None for the reference
        (a small block, or no numba); loading it compiles the walks too."""
        if n < self.json_min:
            return None
        try:
            from rmqstore_cli import jsonkernel
        except ImportError:
            return None
        self.compile()
        return jsonkernel


#: The process's policy.
FAST_PATHS = FastPaths()
