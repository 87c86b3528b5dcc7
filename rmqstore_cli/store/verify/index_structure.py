"""One index file checked alone: slots, chains, counts, header against entries
(docs/format/index.md#checking-an-index-file).

Vectorised and in bounded chunks: memory does not grow with the file. Slots and entries are
read ``limits.INDEX_CHUNK`` at a time (:meth:`IndexFile.entry_columns`, mapped pages
released after each chunk), and the links and slot heads into each range of
``limits.INDEX_TARGETS`` entries are counted in one pass over the links (the first range in
the pass that checks the entries, as links only go to older entries; a file of E entries
takes E / INDEX_TARGETS - 1 more passes). Findings met out of their turn wait in
:class:`~rmqstore_cli.store.checks.findings.Deferred` (at most ``max_findings`` of each
kind), so they come out in the order of a single pass over the whole file: slots, entries,
chains, slot heads, branches, orphans, header, order, tail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.formats.index import HASH_SLOT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, IndexEntry, IndexHeader

from rmqstore_cli.store.checks.findings import Deferred
from rmqstore_cli.store.verify import limits

#: Offsets of the header fields a finding names (``IndexHeader``), and of prevIndex in an entry.
_BEGIN_TS, _BEGIN_PHY, _END_PHY, _SLOT_COUNT, _INDEX_COUNT = (
    field_offset(IndexHeader, k)
    for k in ("begin_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")
)
_PREV_AT = field_offset(IndexEntry, "prev_index")


def slot_of(h: np.ndarray, slots: int) -> np.ndarray:
    """The slot of each key hash (-1 for a negative hash, which no slot holds). In the hashes'
    own int32 (keyHash and hashSlotNum are Java ints): a 32-bit remainder is ~3.5 times
    faster than a 64-bit one, the same numbers."""
    if h.dtype != np.int32 or not 0 < slots < 1 << 31:
        h = h.astype(np.int64)
        return np.where(h >= 0, h % slots, -1)
    return np.where(h >= 0, h % np.int32(slots), np.int32(-1))


@dataclass
class LinkFindings:
    """What the passes over the links find, waiting to come out in a single pass's order."""

    cap: int | None
    #: entry -> prev, cross (0: broken link, 1: other slot), slot of prev, own slot
    chain: Deferred = None
    #: slot -> entry number it heads, that entry's hash and slot
    heads_bad: Deferred = None
    #: entry -> number of places reaching it
    branch: Deferred = None
    #: entry -> its hash
    orphan: Deferred = None
    #: slot -> its value (outside the written entries)
    bad_slots: Deferred = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("chain", "heads_bad", "branch", "orphan", "bad_slots"):
            setattr(self, name, Deferred(self.cap))


class LinkTargets:
    """Entries t0..t1-1 (numbers t0+1..t1): their hashes and how often they are reached."""

    def __init__(
        self,
        t0: int,
        t1: int,
        slots: int,
        found: LinkFindings,
        slot_chunks: Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]],
    ):
        self.t0, self.t1, self.slots, self.found, self.slot_chunks = t0, t1, slots, found, slot_chunks
        self.h = np.empty(t1 - t0, np.int32)
        self.refs = np.zeros(t1 - t0, np.int32)  # at most slots + entries: below 2**31
        self.pending: list[np.ndarray] = []
        self.waiting = 0

    def count(self, tgt: np.ndarray) -> None:
        self.pending.append(tgt)
        self.waiting += tgt.size
        if self.waiting >= self.refs.size:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.refs += np.bincount(np.concatenate(self.pending), minlength=self.refs.size)
            self.pending, self.waiting = [], 0

    def links(self, a: int, h: np.ndarray, prev: np.ndarray) -> None:
        """Links of entries a.. (hashes h, prevIndex prev) into these targets."""
        m = np.flatnonzero((prev > self.t0) & (prev <= self.t1) & (prev <= np.arange(a, a + prev.size)))
        if not m.size:
            return
        tgt = prev[m].astype(np.int64) - 1 - self.t0
        self.count(tgt)
        own, theirs = slot_of(h[m], self.slots), slot_of(self.h[tgt], self.slots)
        x = np.flatnonzero(own != theirs)
        self.found.chain.add(m[x] + a, prev[m[x]], np.ones(x.size, np.int64), theirs[x], own[x])

    def heads(self) -> None:
        for at, vals in self.slot_chunks():
            m = np.flatnonzero((vals > self.t0) & (vals <= self.t1))
            if not m.size:
                continue
            tgt = vals[m] - 1 - self.t0
            self.count(tgt)
            theirs = slot_of(self.h[tgt], self.slots)
            x = np.flatnonzero(theirs != at[m])
            self.found.heads_bad.add(at[m[x]], vals[m[x]], self.h[tgt[x]], theirs[x])

    def finish(self) -> None:
        self.heads()
        self.flush()
        br = np.flatnonzero(self.refs > 1)
        self.found.branch.add(br + self.t0, self.refs[br])
        orph = np.flatnonzero(self.refs == 0)
        self.found.orphan.add(orph + self.t0, self.h[orph])


@dataclass
class EntryPass:
    """What one pass over the entries in order learns besides links: offsets' range and order."""

    lo: int | None = None
    hi: int = -1
    first_phy: int | None = None
    last_phy: int | None = None
    back_n: int = 0
    back_first: tuple[int, int, int] | None = None

    def offsets(self, a: int, phy: np.ndarray) -> None:
        if self.first_phy is None:
            self.first_phy = int(phy[0])
        last = self.last_phy
        steps = np.concatenate([[last], phy]) if last is not None else phy
        back = np.flatnonzero(steps[1:] < steps[:-1])
        if back.size and self.back_first is None:
            k = int(back[0])
            self.back_first = (k + a - (last is not None), int(steps[k]), int(steps[k + 1]))
        self.back_n += back.size
        self.last_phy = int(phy[-1])
        self.lo = int(phy.min()) if self.lo is None else min(self.lo, int(phy.min()))
        self.hi = max(self.hi, int(phy.max()))


class IndexStructure:
    """The structure check of :class:`~rmqstore_cli.store.verify.Verifier` (one index file alone)."""

    def _index_structure(self, f) -> None:
        """Slots, entries, chains, heads, branches, orphans, header, order, tail of ``f``."""
        if f.stored_count > f.max_num:
            self._add(
                "index.header", f.rel, _INDEX_COUNT, f"indexCount {f.stored_count} exceeds maxIndexNum {f.max_num}"
            )
        if f.length < f.entries_base:
            self._add("index.header", f.rel, 0, "file too short for its slots")
            f.known_range = (-1, -1)
            return
        found = LinkFindings(self.opt.max_findings)
        used, slot_chunks = self._index_slots(f, found.bad_slots)
        n = f.n  # entries 1..n-1 (array index 0..E-1)
        if used != f.hash_slot_count and n > 1:
            self._add(
                "index.slot-count", f.rel, _SLOT_COUNT, f"hashSlotCount {f.hash_slot_count}, but {used} slots are used"
            )
        for s, v in found.bad_slots.rows():
            self._add(
                "index.slot",
                f.rel,
                INDEX_HEADER_SIZE + HASH_SLOT_SIZE * s,
                f"slot {s} holds {v}, outside the written entries 1..{n - 1}",
            )
        self._count_only("index.slot", found.bad_slots.dropped)
        if n <= 1:
            f.known_range = (-1, -1)
            if f.length >= f.entries_base + 2 * INDEX_ENTRY_SIZE:
                first = self._index_nonzero(f, f.entries_base + INDEX_ENTRY_SIZE)
                if first is not None:
                    self._add("index.tail", f.rel, first, "non-zero bytes in an index file with no entries")
            return
        seen = self._index_entries(f, found, slot_chunks)
        self._report_links(f, found)
        self._index_header_vs_entries(f, seen)

    def _index_slots(self, f, bad_slots: Deferred):
        """Count the used slots, defer the ones outside the written entries; the used slots
        again, a chunk at a time (kept while as few as ``INDEX_TARGETS``)."""
        S, C, n = f.slots, max(1, int(limits.INDEX_CHUNK)), f.n
        used = 0
        kept: list | None = []
        for a in range(0, S, C):
            at, vals = f.slot_values(a, min(S, a + C))
            used += at.size
            bad = (vals < 0) | (vals >= max(n, 1))
            bad_slots.add(at[bad], vals[bad])
            if kept is not None:  # int32, half the bytes: slot numbers and entry numbers fit
                keep = used <= max(1, int(limits.INDEX_TARGETS))
                kept = kept + [(at.astype(np.int32), vals.astype(np.int32))] if keep else None

        def slot_chunks():
            """(slot numbers, values) of the used slots, a chunk at a time."""
            if kept is not None:
                yield from kept
                return
            for a in range(0, S, C):
                yield f.slot_values(a, min(S, a + C))

        return used, slot_chunks

    def _index_entries(self, f, found: LinkFindings, slot_chunks) -> EntryPass:
        """One pass over the entries in order: fields, links that leave the older entries,
        offsets going back; and, as links only go to older entries, the links into the
        first INDEX_TARGETS entries too (their hashes are read before any link to them).
        Then one more pass over the links for each later range of targets."""
        E, C, T = f.entry_count, max(1, int(limits.INDEX_CHUNK)), max(1, int(limits.INDEX_TARGETS))
        seen = EntryPass()
        first = LinkTargets(0, min(E, T), f.slots, found, slot_chunks)
        for a in range(0, E, C):
            b = min(E, a + C)
            h, phy, diff, prev = f.columns(a, b, "key_hash", "phy_offset", "time_diff", "prev_index")
            for i in np.flatnonzero((h < 0) | (diff < 0)).tolist():
                self._add(
                    "index.entry",
                    f.rel,
                    f.entry_offset(a + i),
                    f"entry {a + i + 1}: keyHash {int(h[i])}, timeDiff {int(diff[i])} (both must be >= 0)",
                )
            broken = np.flatnonzero((prev < 0) | (prev > np.arange(a, b)))  # prev >= own number
            z = np.zeros(broken.size, np.int64)
            found.chain.add(broken + a, prev[broken], z, z, z)
            seen.offsets(a, phy)
            if a < first.t1:
                first.h[a : min(b, first.t1)] = h[: min(b, first.t1) - a]
            first.links(a, h, prev)
            del h, phy, diff, prev
        f.known_range = (seen.lo, seen.hi)
        f.phy_ordered = seen.back_n == 0
        first.finish()
        del first
        for t0 in range(T, E, T):  # later target ranges: one more pass over the links each
            tg = LinkTargets(t0, min(E, t0 + T), f.slots, found, slot_chunks)
            for a in range(t0, tg.t1, C):
                tg.h[a - t0 : min(tg.t1, a + C) - t0] = f.columns(a, min(tg.t1, a + C), "key_hash")[0]
            for a in range(t0 + 1, E, C):  # a link goes to an older entry: sources after t0 only
                h, prev = f.columns(a, min(E, a + C), "key_hash", "prev_index")
                tg.links(a, h, prev)
            tg.finish()
            del tg
        return seen

    def _report_links(self, f, found: LinkFindings) -> None:
        """Chains, slot heads, branches and orphans, in a single pass's order."""
        for i, p, cross, theirs, own in found.chain.rows():
            why = (
                f"links to entry {p} of slot {theirs}, not its own slot {own}"
                if cross
                else f"points to entry {p}, not an older one: the chain loops or leaves the written entries"
            )
            self._add("index.chain", f.rel, f.entry_offset(i) + _PREV_AT, f"entry {i + 1} {why}")
        self._count_only("index.chain", found.chain.dropped)
        for s, e, he, se in found.heads_bad.rows():
            self._add(
                "index.slot",
                f.rel,
                INDEX_HEADER_SIZE + HASH_SLOT_SIZE * s,
                f"slot {s} heads entry {e}, whose hash {he} belongs to slot {se}",
            )
        self._count_only("index.slot", found.heads_bad.dropped)
        for e, r in found.branch.rows():
            self._add(
                "index.chain", f.rel, f.entry_offset(e), f"entry {e + 1} is reached from {r} places: chains branch"
            )
        self._count_only("index.chain", found.branch.dropped)
        rows = list(found.orphan.rows())
        if rows:
            phys = f.entry_phys(np.array([r[0] for r in rows], np.int64)).tolist()
            for (e, he), pe in zip(rows, phys, strict=True):
                self._add(
                    "index.orphan",
                    f.rel,
                    f.entry_offset(e),
                    f"entry {e + 1} (hash {he}, offset {pe}) is on no slot's chain",
                )
        self._count_only("index.orphan", found.orphan.dropped)

    def _index_header_vs_entries(self, f, seen: EntryPass) -> None:
        """The header against the entries, their order, the bytes after the last entry."""
        if f.begin_phy != seen.first_phy:
            self._add(
                "index.header",
                f.rel,
                _BEGIN_PHY,
                f"beginPhyOffset {f.begin_phy}, first entry points at {seen.first_phy}",
            )
        if f.end_phy != seen.last_phy:
            self._add(
                "index.header", f.rel, _END_PHY, f"endPhyOffset {f.end_phy}, last entry points at {seen.last_phy}"
            )
        if f.begin_ts > f.end_ts:
            self._add("index.header", f.rel, _BEGIN_TS, f"beginTimestamp {f.begin_ts} after endTimestamp {f.end_ts}")
        if seen.back_first is not None:
            i, p0, p1 = seen.back_first
            self._add(
                "index.order",
                f.rel,
                f.entry_offset(i + 1),
                f"entry {i + 2} points at {p1}, below entry {i + 1}'s {p0}"
                + (f" ({seen.back_n} such steps)" if seen.back_n > 1 else ""),
            )
        tail_start = f.entries_base + f.n * INDEX_ENTRY_SIZE
        if f.length > tail_start:
            first = self._index_nonzero(f, tail_start)
            if first is not None:
                self._add(
                    "index.tail",
                    f.rel,
                    first,
                    f"non-zero bytes after the last entry {f.n - 1} (indexCount {f.stored_count})",
                )
