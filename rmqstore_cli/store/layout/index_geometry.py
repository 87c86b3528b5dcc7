"""The index files' geometry (maxHashSlotNum, maxIndexNum) read back from files of a
non-default size, which their header does not store: each candidate geometry checked
against the newest entries' chains, by ``pread`` of the few pages it touches."""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from rmqstore_cli.formats import index as index_layout

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.files.safefs import open_read_only, os_error

_HEADER = struct.Struct(index_layout.HEADER_FORMAT)
_SLOT = struct.Struct(index_layout.SLOT_FORMAT)
_ENTRY = struct.Struct(index_layout.ENTRY_FORMAT)


def infer_index_geometry(files: list[Path], size: int) -> tuple[int, int]:
    """Find (maxHashSlotNum, maxIndexNum) for index files of a non-default ``size``.

    The header does not store them. For each geometry that fits the size, the newest
    entry of a file must head its own slot's chain (``slot[hash % S] == indexCount-1``)
    and its predecessor must be older; the unique geometry all files agree on wins.
    Each file is read by ``pread`` of the few pages a candidate touches (a small cache),
    never whole: a 420 MB file costs a few MB, and a hole on a full tmpfs is never mapped.
    """
    body = size - index_layout.INDEX_HEADER_SIZE
    max_slots = body // index_layout.HASH_SLOT_SIZE
    if max_slots > 2_000_000:
        raise StoreError(
            f"index files of {size} bytes are not the default size",
            path=files[0],
            hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
        )
    samples: list = []
    try:
        _sample_files(files, size, samples)
        if body < 0 or not samples:
            raise StoreError(
                f"cannot tell the index geometry of {size}-byte files",
                path=files[0],
                hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
            )
        candidates = [
            (s, n) for s, n in geometries(body, max_slots) if all(_geometry_fits(d, d.count, s, n) for d in samples)
        ]
    finally:
        for data in samples:
            data.close()
    if len(candidates) != 1:
        raise StoreError(
            f"cannot tell the index geometry of {size}-byte files ({len(candidates)} candidates)",
            path=files[0],
            hint="pass ⟦index_slots⟧ and ⟦index_max⟧, or ⟦broker_conf⟧",
        )
    return candidates[0]


def _sample_files(files: list[Path], size: int, samples: list) -> None:
    """A page reader per file holding more than one entry (the others tell nothing), into
    ``samples`` (the caller closes them, also on an error)."""
    for p in files:
        data = _PageReader(p, size)
        samples.append(data)
        count = data.unpack(_HEADER, 0)[5]
        if count > 1:
            data.count = count
        else:
            samples.pop().close()


def geometries(body: int, max_slots: int) -> Iterator[tuple[int, int]]:
    """Every (slots, entries) whose slot table and whole entries fill the ``body`` after the header.

    ``body - S * slot`` is a multiple of ``entry`` only for S in one residue class modulo
    ``entry / gcd(slot, entry)`` (5 for 4-byte slots and 20-byte entries): those S are
    stepped through, not every S up to ``max_slots`` (and no numpy: decode-msgid needs none)."""
    slot, entry = index_layout.HASH_SLOT_SIZE, index_layout.INDEX_ENTRY_SIZE
    g = math.gcd(slot, entry)
    if body % g:
        return
    m = entry // g
    first = (body // g) * pow(slot // g, -1, m) % m or m
    for s in range(first, max_slots + 1, m):
        rest = body - s * slot
        if rest <= 0:
            return
        yield s, rest // entry


class _PageReader:
    """``unpack`` at any position of a file through ``pread`` of whole pages, the last
    :attr:`PAGES` kept: bounded memory however large the file, and no mapping."""

    PAGE = 4096
    PAGES = 256

    def __init__(self, path: Path, size: int):
        from collections import OrderedDict

        self.path, self.size = path, size
        self.fd = open_read_only(path)
        self.pages: OrderedDict[int, bytes] = OrderedDict()
        self.count = 0

    def _page(self, n: int) -> bytes:
        b = self.pages.get(n)
        if b is None:
            try:
                b = os.pread(self.fd, self.PAGE, n * self.PAGE)
            except OSError as e:
                raise os_error(e, self.path, "read") from None
            self.pages[n] = b
            if len(self.pages) > self.PAGES:
                self.pages.popitem(last=False)
        return b

    def unpack(self, st: struct.Struct, pos: int) -> tuple:
        if pos < 0 or pos + st.size > self.size:
            raise StoreError(f"read past the end of the {self.size}-byte file", path=self.path, offset=pos)
        first, last = pos // self.PAGE, (pos + st.size - 1) // self.PAGE
        raw = b"".join(self._page(n) for n in range(first, last + 1))
        off = pos - first * self.PAGE
        if off + st.size > len(raw):  # the file is shorter than its stat said
            raise StoreError("index file ends early", path=self.path, offset=pos)
        return st.unpack_from(raw, off)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _geometry_fits(data: _PageReader, count: int, s: int, n: int) -> bool:
    """Entries of one chain share a slot: ``hash(prev) % S == hash(entry) % S`` for the
    newest entries, and the newest entry heads its slot's chain."""
    if count > n:
        return False
    base = index_layout.INDEX_HEADER_SIZE + s * index_layout.HASH_SLOT_SIZE
    for k in range(count - 1, max(0, count - 257), -1):
        key_hash, _, diff, prev = data.unpack(_ENTRY, base + k * index_layout.INDEX_ENTRY_SIZE)
        if key_hash < 0 or diff < 0 or not 0 <= prev < k:
            return False
        if (
            k == count - 1
            and data.unpack(_SLOT, index_layout.INDEX_HEADER_SIZE + (key_hash % s) * index_layout.HASH_SLOT_SIZE)[0]
            != k
        ):
            return False
        if prev > 0:
            prev_hash = data.unpack(_ENTRY, base + prev * index_layout.INDEX_ENTRY_SIZE)[0]
            if prev_hash % s != key_hash % s:
                return False
    return True
