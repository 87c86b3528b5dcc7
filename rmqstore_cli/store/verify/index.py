"""Index files against the commit log (docs/format/index.md).

Entries are checked against each batch of records as it passes (numpy look-ups by
physical offset); memory is bounded by a file, not by the store (issue 22): an index
file's entries are read as a window as the scan passes them (:meth:`IndexScan.entries_in`),
and which were accounted for is kept as runs (:class:`~rmqstore_cli.store.verify.marks.Marks`).
"""

from __future__ import annotations

import os
import re
import shlex
from functools import cached_property
from itertools import pairwise
from pathlib import Path

import numpy as np
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.formats.index import INDEX_ENTRY_SIZE, IndexHeader

from rmqstore_cli.store.commitlog import Status
from rmqstore_cli.store.files.mapped_files import release_pages
from rmqstore_cli.store.layout.config import SIZE_LEAST
from rmqstore_cli.store.queues.index import IndexFile, index_file_paths
from rmqstore_cli.store.records.properties import IndexKeys
from rmqstore_cli.store.verify import limits
from rmqstore_cli.store.verify.checks import first_nonzero, member
from rmqstore_cli.store.verify.index_structure import IndexStructure
from rmqstore_cli.store.verify.marks import Marks, Sparse

_INDEX_NAME = re.compile(r"\d{17}")
_END_TS = field_offset(IndexHeader, "end_timestamp")
_BEGIN_TS = field_offset(IndexHeader, "begin_timestamp")


class IndexScan:
    """One index file as verify reads it (:class:`IndexFile` reads the header, slots and
    entries in bulk): which entries the scan accounted for, and the entries read as the
    scan passes them."""

    def __init__(self, path: Path, slots: int, max_num: int, root: Path):
        self.file = IndexFile(path, slots, max_num, lenient=True)
        self.path = path
        self.name = path.name
        self.rel = os.path.relpath(path, root)
        self.slots, self.max_num = slots, max_num
        self.size = self.file.size
        self.length = self.file.length
        h = self.file.header
        self.begin_ts, self.end_ts, self.begin_phy, self.end_phy = (
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
        )
        self.hash_slot_count, self.stored_count = h.hash_slot_count, self.file.stored_count
        self.entries_base = self.file.entries_base
        self.n = self.file.entry_limit  # entries 1 .. n-1 are readable
        self.entry_count = self.file.readable_entries
        self.phy = self.hash = self.sorted_phy = self.order = None
        #: (min, max) entry offset once known: read by :meth:`phy_range`, or set by the
        #: structure check (or a pipeline task) that has read them already.
        self.known_range: tuple[int, int] | None = None
        self.phy_ordered: bool | None = None  # entries in offset order (known once phy_range read them)
        self.checked = Marks(self.entry_count)
        #: Entries in offset order read as the scan passes them (:meth:`entries_in`), never
        #: all at once: the window [_wa, _wa + len(_wphy)) and the next entry to read.
        self.stream = False
        self.retired = False
        #: The entries a stream reads, [from, to): the whole file, or a task's window of it.
        self.stream_span = (0, self.entry_count)
        self._wa = self._next = 0
        self._wphy = np.zeros(0, np.int64)
        self._whash = np.zeros(0, np.int32)
        self._wlo: int | None = None

    @property
    def mm(self):
        return self.file.mm

    @property
    def phy_min(self) -> int:
        return self.phy_range()[0]

    @property
    def phy_max(self) -> int:
        return self.phy_range()[1]

    def phy_range(self) -> tuple[int, int]:
        """(smallest, largest) offset of the entries ((-1, -1) without entries), read in
        chunks the first time unless the structure check has set it."""
        if self.known_range is None:
            lo, hi, last, ordered = None, -1, None, True
            for a in range(0, self.entry_count, limits.INDEX_CHUNK):
                phy = self.columns(a, min(self.entry_count, a + limits.INDEX_CHUNK), "phy_offset")[0]
                lo = int(phy.min()) if lo is None else min(lo, int(phy.min()))
                hi = max(hi, int(phy.max()))
                ordered = ordered and (last is None or last <= int(phy[0])) and bool(np.all(phy[1:] >= phy[:-1]))
                last = int(phy[-1])
            self.known_range = (-1 if lo is None else lo, hi)
            self.phy_ordered = ordered
        return self.known_range

    def columns(self, a: int, b: int, *names: str) -> list[np.ndarray]:
        """Fields ``names`` of entries array index a..b-1 (entry numbers a+1..b), pages released."""
        return self.file.entry_columns(a, b, *names)

    def entry_phys(self, idx: np.ndarray) -> np.ndarray:
        """Offsets of the entries at array indices ``idx`` (a few: findings' details)."""
        return self.file.entry_phys(idx)

    def slot_values(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(slot numbers, values) of the non-zero slots among slots a..b-1; pages released."""
        return self.file.slot_values(a, b)

    def load(self) -> None:
        """The entries' offsets and hashes as arrays (again, after :meth:`unload`), read in
        chunks: the mapped pages are released, the arrays (12 bytes an entry) stay."""
        E = self.entry_count
        self.read_entries(0, E)
        self.order = (
            None
            if self.phy.size < 2 or bool(np.all(self.phy[1:] >= self.phy[:-1]))
            else np.argsort(self.phy, kind="stable")
        )
        self.sorted_phy = self.phy if self.order is None else self.phy[self.order]
        if self.known_range is None:
            self.known_range = (int(self.sorted_phy[0]), int(self.sorted_phy[-1])) if E else (-1, -1)

    def read_entries(self, a: int, b: int) -> None:
        """Offsets and hashes of entries a..b-1 into arrays sized for the whole file (the
        rest allocated, not read), in chunks, the mapped pages released."""
        self.phy = np.empty(self.entry_count, np.int64)
        self.hash = np.empty(self.entry_count, np.int32)
        for s in range(a, b, limits.INDEX_CHUNK):
            e = min(b, s + limits.INDEX_CHUNK)
            self.phy[s:e], self.hash[s:e] = self.columns(s, e, "phy_offset", "key_hash")

    def unload(self) -> None:
        """Drop the arrays and the mapped pages until the scan reaches this file's entries
        (:meth:`ensure_loaded`): index files are checked one after another, not all at once."""
        self.phy = self.hash = self.sorted_phy = self.order = None
        self.file.drop_pages()

    def ensure_loaded(self) -> None:
        if self.phy is None and not self.stream:
            self.load()

    def entries_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(entry array indices, offsets, hashes) of the entries pointing into ``[lo, hi)``.

        Streaming (entries in offset order, the scan's ``lo`` never going back): a window
        read ``limits.INDEX_CHUNK`` entries at a time, entries below ``lo`` dropped, so memory is
        what one batch of records points at, not 12 bytes an entry of the whole index file
        (240 MB for a full default file, issue 22). Otherwise the whole file's arrays."""
        if not self.stream:
            self.ensure_loaded()
            sel = self.in_range(lo, hi)
            if not sel.size or self.order is not None:
                return sel, self.phy[sel], self.hash[sel]
            run = slice(int(sel[0]), int(sel[-1]) + 1)  # entries in offset order: a run of them, sliced
            return sel, self.phy[run], self.hash[run]
        if self._wlo is not None and lo < self._wlo:  # the scan went back: read again from the start
            self._wa = self._next = self.stream_span[0]
            self._wphy, self._whash = self._wphy[:0], self._whash[:0]
        self._wlo = lo
        k = int(np.searchsorted(self._wphy, lo, "left"))
        wphy, whash = self._wphy[k:], self._whash[k:]
        self._wa += k
        E = self.stream_span[1]
        while self._next < E and (not wphy.size or wphy[-1] < hi):
            a = self._next
            b = min(E, a + limits.INDEX_CHUNK)
            p, h = self.columns(a, b, "phy_offset", "key_hash")
            self._next = b
            if wphy.size:
                wphy, whash = np.concatenate([wphy, p]), np.concatenate([whash, h])
            else:  # the window was empty (it starts at a): skip what lies below lo
                k = int(np.searchsorted(p, lo, "left"))
                self._wa = a + k
                wphy, whash = p[k:], h[k:]
        self._wphy, self._whash = wphy, whash
        n = int(np.searchsorted(wphy, hi, "left"))
        return np.arange(self._wa, self._wa + n), wphy[:n], whash[:n]

    def entry_phy(self, i: int) -> int:
        """Offset of entries array index ``i`` (from the arrays if loaded, else read)."""
        if self.phy is not None:
            return int(self.phy[i])
        return int(self.columns(i, i + 1, "phy_offset")[0][0])

    def unchecked(self):
        """(first index, unchecked entry indices, their offsets) per chunk of ``limits.INDEX_CHUNK``
        entries that has any: offsets from the arrays if loaded, else read from the file."""
        for a in range(0, self.entry_count, limits.INDEX_CHUNK):
            b = min(self.entry_count, a + limits.INDEX_CHUNK)
            un = self.checked.unmarked(a, b)
            if not un.size:
                continue
            phy = self.phy[un] if self.phy is not None else self.columns(a, b, "phy_offset")[0][un - a]
            yield a, un, np.asarray(phy, np.int64)

    def entry_offset(self, i: int) -> int:
        """Byte offset of entry number ``i + 1`` (entries array index i)."""
        return self.entries_base + (i + 1) * INDEX_ENTRY_SIZE

    def in_range(self, lo: int, hi: int) -> np.ndarray:
        a = np.searchsorted(self.sorted_phy, lo, "left")
        b = np.searchsorted(self.sorted_phy, hi, "left")
        idx = np.arange(a, b)
        return idx if self.order is None else self.order[idx]

    def retire(self) -> None:
        """The scan has passed every entry's offset: keep what ``finish_index`` reads (the
        entries never matched, the first and the last), free the rest and the mapping, so
        verify's memory does not grow with the number of index files. A streaming file
        drops its window (its pages are released as read; the finish reads what it needs)."""
        if self.stream:
            self._wphy, self._whash = self._wphy[:0], self._whash[:0]
            self.retired = True
            return
        keep = np.union1d(self.checked.unmarked(0, self.phy.size), [0, self.phy.size - 1])
        self.phy = Sparse(self.phy.size, keep, self.phy[keep])
        self.hash = self.sorted_phy = self.order = None
        self.retired = True
        self.close_file()

    def close_file(self) -> None:
        """Unmap the file once (a view still alive: the GC unmaps it)."""
        if self.file is not None:
            try:
                self.file.close()
            except BufferError:
                pass
            self.file = None

    def close(self) -> None:
        self.phy = self.hash = self.sorted_phy = None
        self.close_file()


class KeyPairs:
    """A batch's index keys as the pairs ``(offset - lo) * 2^31 + hash`` (in the keys' order,
    and sorted), and as (offset, hash) in put order: each made when first asked for, so that
    a batch whose entries are its keys as put (the usual case) sorts nothing."""

    def __init__(self, absP: np.ndarray, keys: IndexKeys, lo: int):
        self.absP, self.keys, self.lo = absP, keys, lo

    @cached_property
    def pair(self) -> np.ndarray:
        own = self.keys.owner
        return (self.absP[own] - self.lo) * (1 << 31) + self.keys.hash if own.size else np.zeros(0, np.int64)

    @cached_property
    def sorted(self) -> np.ndarray:
        return np.sort(self.pair)

    def put_equal(self, ephy: np.ndarray, eh: np.ndarray) -> bool:
        """Whether entries with offsets ``ephy`` and hashes ``eh`` are the keys, one for one
        in put order (``IndexService#buildIndex``): then each is at a record's start and
        carries one of its keys, and every key has its entry."""
        own, h = self.keys.put_order()
        return own.size == ephy.size and np.array_equal(self.absP[own], ephy) and np.array_equal(h, eh)


class IndexChecks(IndexStructure):
    """The index part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    def open_index(self) -> None:
        cfg = self.config
        self.index_files: list[IndexScan] = []
        for p in index_file_paths(cfg.index_dir):
            if self.not_regular(p):
                continue
            f = self.open_index_file(p)
            if self.retire_index_files:
                f.unload()
            f.stream = self.stream_index_files and bool(f.phy_ordered)
            self.index_files.append(f)
        self.check_index_order()

    def open_index_file(self, p: Path) -> IndexScan:
        """Open one index file and check it alone (name, size, structure); the pipeline runs
        this as one task per index file."""
        cfg = self.config
        f = IndexScan(p, cfg.max_hash_slot_num, cfg.max_index_num, self.root)
        self.files["index"] += 1
        if not _INDEX_NAME.fullmatch(p.name):
            self._add("index.file-name", f.rel, None, "name is not yyyyMMddHHmmssSSS")
        if f.length != f.size:
            self._add(
                "index.file-size",
                f.rel,
                None,
                f"{f.length} bytes, expected {f.size} (maxHashSlotNum={f.slots}, maxIndexNum={f.max_num})",
            )
        self._index_structure(f)
        return f

    def check_index_order(self) -> None:
        """Checks across ``self.index_files`` (header values only) and ``index_end``."""
        for a, b in pairwise(self.index_files):
            if b.n > 1 and a.n > 1 and b.begin_phy < a.end_phy:
                self._add(
                    "index.order",
                    b.rel,
                    16,
                    f"beginPhyOffset {b.begin_phy} is below the previous file's endPhyOffset {a.end_phy}",
                )
        self.index_end = max((f.end_phy for f in self.index_files if f.n > 1), default=-1)

    def _index_nonzero(self, f: IndexScan, start: int) -> int | None:
        """First non-zero byte of index file ``f`` from ``start``, its pages released as read."""
        arr = np.frombuffer(f.mm, np.uint8)
        step = 1 << 26
        for a in range(start, f.length, step):
            b = min(f.length, a + step)
            at = first_nonzero(f.path, arr, a, b)
            release_pages(f.mm, a, b)
            if at is not None:
                return at
        return None

    def check_index_batch(self, absP, total, keys: IndexKeys, base, rel) -> None:
        """The index entries pointing into a batch of records: each must point at a record's
        start and carry one of its keys' hashes (``IndexService#buildIndex``); with ``deep``,
        each key of the batch must have an entry."""
        lo, hi = int(absP[0]), int(absP[-1] + total[-1])
        pairs = KeyPairs(absP, keys, lo)
        entry_pairs = []
        for f in self.index_active:
            if f.end_phy < lo and f.begin_phy < lo and f.phy_max < lo:
                continue
            got = self._check_file_entries(f, lo, hi, absP, keys, pairs)
            if got is not None:
                entry_pairs.append(got)
        if self.opt.deep and keys.owner.size:
            self._check_missing_keys(absP, keys, pairs.pair, entry_pairs, base, rel)

    def _check_file_entries(self, f: IndexScan, lo: int, hi: int, absP, keys: IndexKeys, pairs: KeyPairs):
        """One index file's entries in ``[lo, hi)``: ``index.entry-target`` for one at no
        record's start, ``index.entry-hash`` for one whose hash is none of its record's keys.
        Returns the (offset, hash) pairs of the entries at a record's start (None: no entry)."""
        sel, ephy, eh = f.entries_in(lo, hi)
        if not sel.size:
            return None
        f.checked[sel] = True
        ep = (ephy - lo) * (1 << 31) + eh
        if pairs.put_equal(ephy, eh):  # the usual case: the batch's keys as put, in order (no search)
            return ep
        j = np.searchsorted(absP, ephy)
        is_start = (j < absP.size) & (absP[np.minimum(j, absP.size - 1)] == ephy)
        for k in np.flatnonzero(~is_start).tolist():
            e = int(sel[k])
            self._add(
                "index.entry-target",
                f.rel,
                f.entry_offset(e),
                f"entry {e + 1} -> {int(ephy[k])}: no message starts there",
                physical_offset=int(ephy[k]),
            )
        ok = np.flatnonzero(is_start)
        if not ok.size:
            return ep[is_start]
        # the entries are exactly the batch's keys in another order (one sort, no search)
        pair_sorted = pairs.sorted
        same = ok.size == pair_sorted.size and np.array_equal(np.sort(ep[ok]), pair_sorted)
        bad = ok[:0] if same else ok[~member(ep[ok], pair_sorted)]
        for k in bad.tolist():
            e = int(sel[k])
            mine = [keys.text(x) for x in np.flatnonzero(keys.owner == int(j[k])).tolist()]
            self._add(
                "index.entry-hash",
                f.rel,
                f.entry_offset(e),
                f"entry {e + 1} -> {int(ephy[k])}: hash {int(eh[k])} is none of the message's keys {mine[:5]}",
                physical_offset=int(ephy[k]),
            )
        return ep[is_start]

    def _check_missing_keys(self, absP, keys: IndexKeys, pair, entry_pairs: list, base: int, rel: str) -> None:
        """``index.missing-key``: a key of a record up to the index's end that no index file
        has an entry for (``deep`` only: every entry of the batch's range must be read)."""
        own = keys.owner
        cand = np.flatnonzero(absP[own] <= self.index_end)
        if not cand.size:
            return
        allp = np.concatenate(entry_pairs) if entry_pairs else np.zeros(0, np.int64)
        missing = cand[~member(pair[cand], np.sort(allp))]
        for x in missing.tolist():
            m = int(own[x])
            self._add(
                "index.missing-key",
                rel,
                int(absP[m]) - base,
                f"key {keys.text(x)!r} (hash {int(keys.hash[x])}) of the message at {int(absP[m])} is in no index file",
                physical_offset=int(absP[m]),
            )

    def finish_index(self) -> None:
        """The entries no record accounted for, a chunk of the file at a time (two passes
        when some are neither expired nor beyond the end: the counts come first)."""
        for f in self.index_files:
            if not f.entry_count:
                continue
            rest_n = self._report_outside(f)
            if rest_n:
                self._report_unread_targets(f)
            self._index_header_times(f)

    def _report_outside(self, f: IndexScan) -> int:
        """``index.expired`` and ``index.beyond-end`` for the unchecked entries pointing below
        the commit log's first offset or at or past its end (counted, the first named).
        Returns how many unchecked entries point inside the log."""
        below_n = beyond_n = rest_n = 0
        below_at = beyond_at = beyond_phy = None
        for _, un, phy in f.unchecked():
            below = phy < self.cl_min
            beyond = phy >= self.cl_end
            if below.any():
                below_at = int(un[below][0]) if below_at is None else below_at
                below_n += int(below.sum())
            if beyond.any():
                if beyond_at is None:
                    beyond_at, beyond_phy = int(un[beyond][0]), int(phy[beyond][0])
                beyond_n += int(beyond.sum())
            rest_n += int((~below & ~beyond).sum())
        if below_n:
            self._add(
                "index.expired",
                f.rel,
                f.entry_offset(below_at),
                f"{below_n} entries point below the commit log's first offset {self.cl_min}",
                count=below_n,
            )
        if beyond_n:
            self._add(
                "index.beyond-end",
                f.rel,
                f.entry_offset(beyond_at),
                f"{beyond_n} entries point at or beyond the end of the commit log's data "
                f"({self.cl_end}), e.g. {beyond_phy}",
                count=beyond_n,
            )
        return rest_n

    def _report_unread_targets(self, f: IndexScan) -> None:
        """``index.entry-target`` for an unchecked entry inside the log: the scan never read a
        record there (no file holds it, or it lies in unreadable bytes)."""
        for _, un, phy in f.unchecked():
            rest = np.flatnonzero((phy >= self.cl_min) & (phy < self.cl_end))
            for e, off in zip(un[rest].tolist(), phy[rest].tolist(), strict=True):
                c = self._check_at(off)
                why = self._no_file_reason(off) if c is None else "it lies in unreadable bytes"
                self._add(
                    "index.entry-target",
                    f.rel,
                    f.entry_offset(e),
                    f"entry {e + 1} -> {off}: {why}",
                    physical_offset=off,
                )

    def _index_header_times(self, f: IndexScan) -> None:
        """endTimestamp is the store time of the last entry's message; beginTimestamp the first's."""
        for which, e, stored, hoff in (
            ("end", f.entry_count - 1, f.end_ts, _END_TS),
            ("begin", 0, f.begin_ts, _BEGIN_TS),
        ):
            c = self._check_at(f.entry_phy(e))
            if c is None or c.message is None or c.status is not Status.VALID:
                continue
            if c.message.store_timestamp != stored:
                self._add(
                    "index.header",
                    f.rel,
                    hoff,
                    f"{which}Timestamp {stored}, but entry {e + 1}'s message "
                    f"has store time {c.message.store_timestamp}",
                )

    def repair_command(self, *args: str) -> str:
        """The rebuild-index command line that repairs a finding, for its detail: with the sizes
        this check was given (broker.conf or options), so the repair writes files of the store's
        geometry instead of the broker defaults (a lost index/ leaves nothing to infer from)."""
        cfg = self.config
        sizes = [
            f"--{kw.replace('_', '-')} {getattr(cfg, a)}" for a, (_, kw, _) in SIZE_LEAST.items() if a in cfg.explicit
        ]
        return " ".join(
            [
                "rmqstore rebuild-index --store",
                shlex.quote(str(self.root)),
                *sizes,
                "--in-place",
                *map(shlex.quote, args),
            ]
        )

    def check_index_missing(self) -> None:
        """``messageIndexEnable`` (the default) with keys in the log but no entry in any index
        file: the index was lost (or never built); the broker does not rebuild it by itself."""
        if self.first_indexable is None:
            return
        d = self.config.index_dir
        state = (
            "is missing"
            if not d.exists()
            else "holds no index file"
            if not self.index_files
            else "holds no index entry"
        )
        self._add(
            "index.missing",
            self.rel(d),
            None,
            f"index/ {state}, but messageIndexEnable=true and messages carry keys (the first at offset "
            f"{self.first_indexable}): every index-lookup finds nothing; repair: "
            + self.repair_command("--only", "index"),
            physical_offset=self.first_indexable,
        )
