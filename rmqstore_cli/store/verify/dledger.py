"""verify's DLedger checks: the entries, ``index/``, ``checkpoint`` and ``currterm`` of a
DLedger commit log, as ``DLedgerMmapFileStore#recover`` reads them.

The commit-log scan (:mod:`.scan`) already walks the entries (a header ``recover`` rejects
is a ``dledger.entry`` finding and stops the log there, which ``recovery.truncate`` reports);
this pass checks what the walk does not: each entry's ``pos`` and ``bodySize``, indexes that
follow each other and terms that never go back, every index unit against its entry (a
disagreement makes ``recover`` rewrite the index from there), units past the last entry
(truncated), the checkpoint's ``committedIndex`` (``DLedgerCommitLog#getMaxOffset`` is the
committed entry's end) and ``currterm``; and a divided store whose old ``commitlog/`` is gone.
"""

from __future__ import annotations

import numpy as np
from rmqstore_cli.formats.dledger import BODY_OFFSET, ENTRY_MAGIC, INDEX_FILE_SIZE, INDEX_UNIT_SIZE

from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.commitlog.dledger import committed_index, current_term, header_of, read_entry
from rmqstore_cli.store.files.arrays import byte_rows, file_array
from rmqstore_cli.store.files.mapped_files import MappedFileQueue

_BATCH = 1 << 16


class DLedgerChecks:
    """The DLedger part of :class:`~rmqstore_cli.store.verify.Verifier` (no-op on other stores)."""

    def check_dledger(self) -> None:
        dl = self.config.dledger_dir
        if dl is None:
            return
        files = [f for f in self.mfq.files if header_of(self.config, f)]
        units = MappedFileQueue(dl / "index", INDEX_FILE_SIZE)
        # the summary names DLedger's own files: its entry files (of the commit log's) and index
        self.files["dledger_entries"] += len(files)
        self.files["dledger_index"] += len(units.files)
        self.files["dledger_checkpoint"] += int((dl / "checkpoint").is_file())
        self.dl_last = (-1, -1)  # index and term of the last entry
        for uf in units.files:  # MmapFileList#doLoad: a file of another length stops the broker
            try:
                size = uf.path.stat().st_size
            except OSError:  # a dangling link: the buffer read below names it
                continue
            if size != INDEX_FILE_SIZE:
                self._add(
                    "dledger.index",
                    self.rel(uf.path),
                    None,
                    f"{size} bytes, DLedger's index files are "
                    f"{INDEX_FILE_SIZE}: MmapFileList#doLoad fails and the broker exits",
                )
        try:
            self._dledger_old_log(files)
            for f in files:
                self._dledger_file(f, units)
            self._dledger_index_tail(units)
        finally:
            units.close()
        self._dledger_checkpoint(dl)

    def _dledger_old_log(self, files) -> None:
        """``DLedgerCommitLog#recover``: below the first data file lies the old commit log
        (``dividedCommitlogOffset``), unless DLedger expired its own first entries."""
        if not files or files[0].file_from_offset == 0:
            return
        first = read_entry(files[0].buffer(), 0)
        plain = [f for f in self.mfq.files if not header_of(self.config, f)]
        if first is not None and first.magic == ENTRY_MAGIC and first.index == 0 and not plain:
            self._add(
                "dledger.old-log",
                self.rel(files[0].path),
                0,
                f"the DLedger log starts at entry 0 at offset {files[0].file_from_offset}, but no old "
                f"commitlog/ file holds the offsets below it (dividedCommitlogOffset)",
            )

    def _dledger_file(self, f, units: MappedFileQueue) -> None:
        buf = f.buffer()
        a = file_array(buf)
        rel, base, pos = self.rel(f.path), f.file_from_offset, 0
        while True:
            w = walk_records(buf, pos, len(buf), _BATCH, header=BODY_OFFSET, a=a)
            if w.starts.size:
                self._dledger_entries(a, w.starts - BODY_OFFSET, base, rel, units)
            if w.stop is not None:
                return
            pos = w.end

    def _entry_stop(self, check: str, rel: str, base: int, pos: int, detail: str | None) -> None:
        """An entry header ``DLedgerMmapFileStore#recover`` rejects: its loop breaks there, a
        stop of the commit log; a finding unless ``detail`` is None (past the shown ones)."""
        if detail is not None:
            self._add(check, rel, pos, detail)
        self.stops.append((base + pos, check, rel))

    def _dledger_entries(self, a: np.ndarray, at: np.ndarray, base: int, rel: str, units) -> None:
        """One batch of entries (their file positions ``at``): pos, bodySize, order, the unused
        fields, index units. A header ``DLedgerMmapFileStore#recover`` rejects (pos, bodySize,
        index, term) is where its loop breaks: a stop of the commit log (``recovery.truncate``)."""
        from rmqstore_cli.formats.dledger import ENTRY_DTYPE

        e = byte_rows(a, at, BODY_OFFSET).view(ENTRY_DTYPE).ravel()
        idx, term, size = e["index"].astype(np.int64), e["term"].astype(np.int64), e["size"].astype(np.int64)
        for k in np.flatnonzero((e["pos"] != base + at) | (e["body_size"].astype(np.int64) + BODY_OFFSET != size)):
            detail = (
                f"entry {int(idx[k])}: pos {int(e['pos'][k])}, bodySize "
                f"{int(e['body_size'][k])}, size {int(size[k])} at position {base + int(at[k])}"
            )
            self._entry_stop("dledger.entry", rel, base, int(at[k]), detail)
        prev_i = np.concatenate(([self.dl_last[0]], idx[:-1]))
        prev_t = np.concatenate(([self.dl_last[1]], term[:-1]))
        first = self.dl_last[0] < 0
        bad = (idx != prev_i + 1) | (term < prev_t)
        if first:
            bad[0] = term[0] < 0 or idx[0] < 0
        for n, k in enumerate(np.flatnonzero(bad).tolist()):
            detail = (
                f"entry index {int(idx[k])} term {int(term[k])} after "
                f"index {int(prev_i[k])} term {int(prev_t[k])}: recovery stops here"
                if n < 100
                else None
            )
            self._entry_stop("dledger.order", rel, base, int(at[k]), detail)
        unused = np.flatnonzero((e["channel"] != 0) | (e["chain_crc"] != 0) | (e["body_crc"] != 0))
        for k in unused[:100].tolist():
            self._add(
                "dledger.unused-field",
                rel,
                int(at[k]),
                f"entry {int(idx[k])}: channel {int(e['channel'][k])}, "
                f"chainCrc {int(e['chain_crc'][k])}, bodyCrc {int(e['body_crc'][k])}; no DLedger version sets "
                "them (DLedgerEntryCoder#encode writes 0) and recovery ignores them: changed bytes",
            )
        self._count_only("dledger.unused-field", max(0, unused.size - 100))
        self._dledger_units(at, base, idx, term, size, units)
        self.dl_last = (int(idx[-1]), int(term[-1]))

    def _dledger_units(
        self, at: np.ndarray, base: int, idx: np.ndarray, term: np.ndarray, size: np.ndarray, units: MappedFileQueue
    ) -> None:
        """Each entry's ``index/`` unit against the entry (``DLedgerMmapFileStore#recover``
        compares magic, pos, size, index and term, and rewrites the index from the first that
        differs); a finding names the unit's file and its offset in that file."""
        from rmqstore_cli.formats.dledger import INDEX_DTYPE

        unit = np.zeros(at.size, INDEX_DTYPE)
        have = np.zeros(at.size, bool)
        off = idx * INDEX_UNIT_SIZE
        for uf in units.files:
            ub = uf.buffer()
            m = (off >= uf.file_from_offset) & (off + INDEX_UNIT_SIZE <= uf.file_from_offset + len(ub))
            if m.any():
                unit[m] = (
                    byte_rows(file_array(ub), off[m] - uf.file_from_offset, INDEX_UNIT_SIZE).view(INDEX_DTYPE).ravel()
                )
                have |= m
        wrong = (
            ~have
            | (unit["magic"] != ENTRY_MAGIC)
            | (unit["pos"] != base + at)
            | (unit["size"] != size)
            | (unit["index"] != idx)
            | (unit["term"] != term)
        )
        for k in np.flatnonzero(wrong)[:100]:
            name, at_unit = self._unit_place(units, int(off[k]))
            self._add(
                "dledger.index",
                name,
                at_unit,
                f"entry {int(idx[k])} at {base + int(at[k])} (size {int(size[k])}, term {int(term[k])}): "
                + (
                    "no index unit holds it"
                    if not have[k]
                    else f"its unit says pos {int(unit['pos'][k])}, size {int(unit['size'][k])}, index "
                    f"{int(unit['index'][k])}, term {int(unit['term'][k])}, magic {int(unit['magic'][k])}"
                )
                + "; recovery rewrites the index from here",
                physical_offset=base + int(at[k]),
            )
        self._count_only("dledger.index", max(0, int(wrong.sum()) - 100))

    def _unit_place(self, units: MappedFileQueue, offset: int) -> tuple[str, int | None]:
        """The ``index/`` file holding the unit at logical ``offset`` and its offset in it; for
        an offset no file holds, the name the file would have (``MmapFileList``: files named by
        their start) and None."""
        uf = units.find(offset) if offset >= 0 else None
        if uf is not None:
            return self.rel(uf.path), offset - uf.file_from_offset
        start = max(offset, 0) // INDEX_FILE_SIZE * INDEX_FILE_SIZE
        return self.rel(self.config.dledger_dir / "index" / f"{start:020d}"), None

    def _dledger_index_tail(self, units: MappedFileQueue) -> None:
        """``recover`` truncates ``index/`` to ``(lastEntryIndex + 1) * 32``: units after it."""
        start = (self.dl_last[0] + 1) * INDEX_UNIT_SIZE
        uf = units.find(start)
        if uf is None:
            return
        ub = uf.buffer()
        p = start - uf.file_from_offset
        if p + 4 <= len(ub) and any(ub[p : p + INDEX_UNIT_SIZE]):
            self._add(
                "dledger.index-tail",
                self.rel(uf.path),
                p,
                f"index units after the last entry {self.dl_last[0]}: recovery truncates index/ at {start}",
            )

    def _dledger_checkpoint(self, dl) -> None:
        """``DLedgerMmapFileStore#recover`` then ``updateCommittedIndex``; ``MemberState#loadTerm``."""
        last, last_term = self.dl_last
        rel = self.rel(dl / "checkpoint")
        end_index, committed = committed_index(dl)
        if committed is None:
            self._add(
                "dledger.checkpoint",
                rel,
                None,
                "no committedIndex: until a leader commits again the broker "
                "serves no message (DLedgerCommitLog#getMaxOffset)",
            )
        elif committed < last:
            self._add(
                "dledger.checkpoint",
                rel,
                None,
                f"committedIndex {committed} < last entry {last}: entries "
                f"after it are not served until committed (getData stops at the committed position)",
            )
        elif committed > last:
            self._add(
                "dledger.checkpoint",
                rel,
                None,
                f"committedIndex {committed} > last entry {last}: "
                "recovery lowers it to the last entry (entries were lost)",
            )
        if end_index is not None and end_index != last:
            self._add("dledger.checkpoint", rel, None, f"endIndex {end_index}, but the last entry is {last}")
        term = current_term(dl)
        if last >= 0 and (term is None or term < last_term):
            self._add(
                "dledger.term",
                self.rel(dl / "currterm"),
                None,
                f"currTerm {term} is older than the last entry's term {last_term}",
            )
