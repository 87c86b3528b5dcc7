"""What changed between two snapshots of a store (``rmqstore diff``): the files added,
removed and changed, where the two commit logs first part, and (``store/answers/queue_diff.py``)
the queues and consumer offsets.

Both stores are only read. Files are compared a chunk at a time over their mappings (the
pages released as it goes), so memory stays bounded whatever their size; a file that is
the same file in both (a hard-linked backup) is not read at all. Every row is a dict with a
``kind`` (``file``, ``divergence``, ``queue``, ``unit``, ``message``, ``offset``), the
``summary`` last: the library's records (``api/records.py``) are these dicts' fields.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rmqstore_cli.errors import UsageError
from rmqstore_cli.store.answers import queue_diff
from rmqstore_cli.store.answers.lookup import read_record
from rmqstore_cli.store.commitlog.bulk import walk_records
from rmqstore_cli.store.files.arrays import file_array
from rmqstore_cli.store.files.mapped_files import regular_size, release_pages
from rmqstore_cli.store.files.safefs import data_segments, map_file, open_read_only
from rmqstore_cli.store.message_store import MessageStore

#: Bytes of each file compared at a time (and whose mapped pages are then released).
CHUNK = 4 << 20
#: Records walked at a time when finding the record that holds the first differing byte.
WALK_BLOCK = 1 << 14
#: The top-level files of a store compared as files (``config/`` adds its ``*.json``).
ROOT_FILES = ("checkpoint",)


@dataclass
class Tally:
    """The counts of the summary, kept while rows stream out."""

    files: dict[str, int] = field(default_factory=lambda: {"added": 0, "removed": 0, "changed": 0, "same": 0})
    divergence: int | None = None
    rows: int = 0
    queues: dict[str, int] = field(default_factory=queue_diff.new_tally)

    def summary(self, a: MessageStore, b: MessageStore) -> dict:
        return {
            "kind": "summary",
            "same": self.rows == 0,
            "store_a": str(a.config.root),
            "store_b": str(b.config.root),
            "files_added": self.files["added"],
            "files_removed": self.files["removed"],
            "files_changed": self.files["changed"],
            "files_same": self.files["same"],
            "commitlog_divergence": self.divergence,
            **self.queues,
        }


def diff(a: MessageStore, b: MessageStore, topic: str | None = None, messages: bool = False) -> Iterator[dict]:
    """Every difference of ``b`` against ``a`` as rows (module docstring), then the summary.
    ``topic`` narrows it to that topic's consume-queue files, queues, messages and offsets
    (the commit log, shared by every topic, is then not compared); ``messages`` adds a row
    per message only in one store and per unit that differs in place. A queue whose files
    are the same in both stores is the same queue (when both commit logs start at the same
    offset, which bounds a queue's min offset), and is not read again."""
    _refuse_shared_commitlog(a, b)
    tally = Tally()
    logs: dict[int, int | None] = {}
    queues: set[tuple[str, str]] = set()
    for row in file_rows(a, b, topic, logs, tally):
        queues.add(queue_of(row["path"]))
        tally.rows += 1
        yield row
    if topic is None and logs:
        row = divergence_row(a, b, logs)
        if row is not None:
            tally.divergence = row["offset"]
            tally.rows += 1
            yield row
    only = _queues_differing(a, b, queues)
    for row in queue_diff.queue_rows(a, b, topic, messages, tally.queues, only):
        tally.rows += 1
        yield row
    for row in queue_diff.offset_rows(a, b, topic, tally.queues):
        tally.rows += 1
        yield row
    yield tally.summary(a, b)


def _refuse_shared_commitlog(a: MessageStore, b: MessageStore) -> None:
    """Two stores whose config points both at one commit log (``storePathCommitLog`` outside
    them) would compare that log with itself: a UsageError (the same store twice is fine)."""
    if [d.resolve() for d in a.config.commitlog_dirs] != [d.resolve() for d in b.config.commitlog_dirs]:
        return
    if a.config.root.resolve() != b.config.root.resolve():
        raise UsageError(
            f"both stores read the same commit log {a.config.commitlog_dirs[0]}",
            hint="⟦broker_conf⟧'s storePathCommitLog lies outside both stores; give a conf without it",
        )


def _queues_differing(a: MessageStore, b: MessageStore, queues: set[tuple[str, str]]) -> set[tuple[str, int]] | None:
    """The queues whose consume-queue files differ, when the files can tell (both commit logs
    start at the same offset, file consume queues on both sides); else None: every queue is read."""
    files_say = a.commitlog.min_offset == b.commitlog.min_offset and ("", "") not in queues
    files_say = files_say and a.rocksdb_cq is None and b.rocksdb_cq is None
    return {(t, int(q)) for t, q in queues if q.isdigit()} if files_say else None


# ---------------------------------------------------------------- files


def queue_of(rel: str) -> tuple[str, str]:
    """(topic, queue directory) of a consume-queue file's path; ("", "") for any other
    file under ``consumequeue/`` (a RocksDB consume queue's: every queue may differ);
    ("", "-") for a file outside it."""
    parts = rel.split("/")
    if parts[0] != "consumequeue":
        return "", "-"
    return (parts[1], parts[2]) if len(parts) == 4 else ("", "")


def store_files(ms: MessageStore, topic: str | None) -> dict[str, Path]:
    """The files compared, by their path relative to the store root (a commit log kept
    elsewhere by ``storePathCommitLog`` is still ``commitlog/<name>``)."""
    cfg = ms.config
    out: dict[str, Path] = {}
    if topic is None:
        for d in cfg.commitlog_dirs:
            listed(d, "commitlog", out)
        listed(cfg.index_dir, "index", out)
        for name, p in listed_names(cfg.root / "config"):
            if name.endswith(".json"):
                out[f"config/{name}"] = p
        for name in ROOT_FILES:
            p = cfg.root / name
            if os.path.lexists(p):
                out[name] = p
        walk_tree(cfg.consumequeue_dir, "consumequeue", out)
    else:
        walk_tree(cfg.consumequeue_dir / topic, f"consumequeue/{topic}", out)
    return out


def listed_names(d: Path) -> list[tuple[str, Path]]:
    """(name, path) of the entries of ``d`` that are not directories, sorted; none if ``d``
    is missing."""
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [(e.name, Path(e.path)) for e in entries if not e.is_dir(follow_symlinks=False)]


def listed(d: Path, rel: str, out: dict[str, Path]) -> None:
    for name, p in listed_names(d):
        out[f"{rel}/{name}"] = p


def walk_tree(d: Path, rel: str, out: dict[str, Path]) -> None:
    """Every file below ``d`` (links to directories not followed)."""
    listed(d, rel, out)
    try:
        subdirs = sorted(e.name for e in os.scandir(d) if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in subdirs:
        walk_tree(d / name, f"{rel}/{name}", out)


def file_rows(
    a: MessageStore, b: MessageStore, topic: str | None, logs: dict[int, int | None], tally: Tally
) -> Iterator[dict]:
    """A row per file added, removed or changed, in path order. ``logs`` gets each commit-log
    file that differs: its start offset and its first differing byte (None: in one store only)."""
    fa, fb = store_files(a, topic), store_files(b, topic)
    for rel in sorted(fa.keys() | fb.keys()):
        status, size_a, size_b, first = _compare_file(fa.get(rel), fb.get(rel))
        tally.files[status] += 1
        if status == "same":
            continue
        name = rel.rsplit("/", 1)[-1]
        if rel.startswith("commitlog/") and name.isdigit():
            logs[int(name)] = first
        yield {
            "kind": "file",
            "path": rel,
            "status": status,
            "size_a": size_a,
            "size_b": size_b,
            "first_difference": first,
        }


def _compare_file(pa: Path | None, pb: Path | None) -> tuple[str, int | None, int | None, int | None]:
    """(status, size in a, size in b, first differing byte) of one path in either store."""
    size_a = None if pa is None else regular_size(pa)
    size_b = None if pb is None else regular_size(pb)
    if pa is None or pb is None:
        return ("added" if pa is None else "removed"), size_a, size_b, None
    first = first_difference(pa, pb, size_a or 0, size_b or 0)
    return ("same" if first is None else "changed"), size_a, size_b, first


def first_difference(pa: Path, pb: Path, size_a: int, size_b: int) -> int | None:
    """The first byte offset where two files differ (the shorter one's length when one is a
    prefix of the other), None when they are equal; compared :data:`CHUNK` bytes at a time."""
    sa, sb = os.stat(pa), os.stat(pb)
    if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
        return None
    n = min(size_a, size_b)
    if n == 0:
        return None if size_a == size_b else 0
    fds = [open_read_only(pa), open_read_only(pb)]
    try:
        ma, mb = map_file(fds[0], size_a, pa), map_file(fds[1], size_b, pb)
    finally:
        for fd in fds:
            os.close(fd)
    try:
        return compare_maps(ma, mb, data_ranges(pa, pb, n), n, size_a == size_b)
    finally:
        for m in (ma, mb):
            close_map(m)


def data_ranges(pa: Path, pb: Path, n: int) -> list[tuple[int, int]]:
    """The ``[a, b)`` ranges of the first ``n`` bytes where either file holds data
    (``safefs.data_segments``): a hole in both reads as zeros in both, so a preallocated
    commit-log file with a few MB written is compared over those MB only."""
    segs = sorted(data_segments(pa, 0, n) + data_segments(pb, 0, n))
    out: list[tuple[int, int]] = []
    for lo, hi in segs:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def compare_maps(ma, mb, ranges: list[tuple[int, int]], n: int, same_size: bool) -> int | None:
    """:func:`first_difference` over two mappings: ``ranges`` of their first ``n`` bytes
    (:func:`data_ranges`), a chunk at a time."""
    xa, xb = file_array(ma), file_array(mb)
    try:
        for start, stop in ranges:
            for lo in range(start, stop, CHUNK):
                hi = min(stop, lo + CHUNK)
                ca, cb = xa[lo:hi], xb[lo:hi]
                if not np.array_equal(ca, cb):
                    return lo + int(np.flatnonzero(ca != cb)[0])
                release_pages(ma, lo, hi)
                release_pages(mb, lo, hi)
        return None if same_size else n
    finally:
        del xa, xb


def close_map(m) -> None:
    close = getattr(m, "close", None)
    if close is not None:
        try:
            close()
        except BufferError:  # a view still holds it: unmapped when that goes
            pass


# ---------------------------------------------------------------- the commit logs


def divergence_row(a: MessageStore, b: MessageStore, logs: dict[int, int | None]) -> dict | None:
    """Where the two commit logs first differ, over the range both hold (files before the
    later of their first files are added or removed by expiry, not a divergence): the record
    there in each store and how far each log goes past it."""
    start = max(a.commitlog.min_offset, b.commitlog.min_offset)
    found = sorted(k for k in logs if k >= start)
    if not found:
        return None
    base = found[0]
    first = logs[base]
    byte = base + (first or 0)
    offset = byte
    if first is not None:
        offset = min(record_start(ms, base, byte) for ms in (a, b))
    end_a, end_b = a.commitlog.max_offset(), b.commitlog.max_offset()
    return {
        "kind": "divergence",
        "offset": offset,
        "first_byte": byte,
        "a": record_at(a, offset),
        "b": record_at(b, offset),
        "end_a": end_a,
        "end_b": end_b,
        "past_a": max(0, end_a - offset),
        "past_b": max(0, end_b - offset),
    }


def record_start(ms: MessageStore, base: int, byte: int) -> int:
    """The start of the record of ``ms``'s file at ``base`` that holds global offset ``byte``,
    or where its records stop when they stop before it (``walk_records``: TOTALSIZE and
    MAGICCODE only, as the broker's recovery walks the file). In a DLedger data file a byte
    of an entry's header belongs to the record after it."""
    cl = ms.commitlog
    f = cl.queue.find(base)
    if f is None:
        return byte
    buf = f.buffer()
    arr = file_array(buf)
    target, pos, header, released = byte - base, 0, cl.header_of(f), 0
    try:
        while True:
            w = walk_records(buf, pos, len(buf), WALK_BLOCK, a=arr, header=header)
            if w.end > target:  # the entry (a DLedger entry: its header, then the record) that spans it
                entries = w.starts - header
                spans = entries[entries <= target]
                return base + (int(spans[-1]) if spans.size else pos) + header
            if w.stop is not None or not w.starts.size:
                return base + w.end + header
            pos = w.end
            released = release_pages(buf, released, pos)  # as compare_maps does: RSS stays a block
    finally:
        release_pages(buf, released, pos)


def record_at(ms: MessageStore, offset: int) -> dict | None:
    """The record at ``offset`` (``lookMessageByOffset``): its place in its queue and its
    ids, or None where no valid record starts."""
    rec, _why = read_record(ms.commitlog, offset)
    if rec is None:
        return None
    return {
        "topic": rec.topic,
        "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset,
        "msg_id": rec.msg_id,
        "store_timestamp": rec.store_timestamp,
        "total_size": rec.total_size,
    }
