"""Where ``dump-commitlog`` walks: the [start, stop) the offsets and the file name give, a
start that must be a message start, the later start ``--begin`` allows (store/answers/seek.py), and
the compaction log read in place of the commit log. Each returns what to say on stderr rather
than saying it: the command owns stderr."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rmqstore_cli.errors import UsageError, setting


@dataclass(frozen=True)
class Range:
    """[start, stop) of a walk (None: the log's start, its end), and a note to say, if any."""

    start: int | None
    stop: int | None
    note: str | None = None


def walk_range(cl: Any, from_offset: int | None, to_offset: int | None, file: str | None) -> Range:
    """[start, stop) of the walk from --from-offset, --to-offset and --file (a commit-log
    file's 20-digit name); a start that is no message start refused (or noted when past the
    data)."""
    start, stop = from_offset, to_offset
    if file is not None:
        f = next((x for x in cl.files if x.name == file), None)
        if f is None:
            raise UsageError(
                f"no commit-log file named {file!r}",
                hint=f"files: {cl.files[0].name} … {cl.files[-1].name}" if cl.files else "the commit log is empty",
            )
        start = max(start or 0, f.file_from_offset)
        stop = min(stop, f.end_offset) if stop is not None else f.end_offset
    if start is not None and check_message_start(cl, start):
        return Range(
            start, stop, f"offset {start} lies at or past the end of the commit log's data: no message from there"
        )
    return Range(start, stop)


def seek_start(ms: Any, begin: int, rng: Range) -> Range:
    """--begin's start (``store.seek``): ``rng`` from a later file start when the consume
    queues show the files before hold nothing stored that late."""
    from rmqstore_cli.store.answers.seek import seek_time

    sk = seek_time(ms, begin)
    if sk.offset is None:
        if sk.reason is not None and rng.start is None:
            return Range(None, rng.stop, f"--begin: reading from the first commit-log file ({sk.reason})")
        return Range(rng.start, rng.stop)
    if rng.start is not None and rng.start >= sk.offset:
        return Range(rng.start, rng.stop)
    return Range(
        sk.offset,
        rng.stop,
        f"--begin: starting at commit-log file {sk.file} (offset {sk.offset}): the files before hold nothing "
        "stored that late",
    )


def compaction_log(ms: Any, spec: str) -> Any:
    """--compaction-log TOPIC/QUEUE_ID: that queue's compaction log (``CompactionLog``)."""
    from rmqstore_cli.store.queues.compaction import CompactionStore

    topic, sep, qid = spec.rpartition("/")
    if not sep or not topic or not (qid.isascii() and qid.isdigit()):
        raise UsageError(f"{setting('compaction_log')} {spec!r}: give TOPIC/QUEUE_ID", hint="e.g. DeviceStateTopic/0")
    return CompactionStore(ms.config).log(topic, int(qid))


def check_message_start(cl: Any, offset: int) -> bool:
    """A start offset must be a message start; say which starts lie around it. True when it
    lies at or past the end of the log's data: the same (empty) answer as the exact end."""
    f = cl.queue.find(offset)
    if f is None:
        return _past_the_files(cl, offset)
    if _is_record_start(cl, f, offset):
        return False
    before, after, data_end = _starts_around(cl, f, offset)
    if after is None and f is cl.files[-1] and offset >= data_end:
        return True
    raise UsageError(
        f"offset {offset} is not the start of a message",
        path=f.path,
        offset=offset - f.file_from_offset,
        hint=f"nearest starts: {before} before, {after if after is not None else 'none'} after",
    )


def _past_the_files(cl: Any, offset: int) -> bool:
    """An offset no file holds: before the first file is an error; past the last file's end is
    the end of the log (True); in a gap between files, False."""
    if cl.files and offset < cl.files[0].file_from_offset:
        raise UsageError(
            f"offset {offset} lies before the commit log's first file",
            hint=f"the log starts at {cl.files[0].file_from_offset}",
        )
    return bool(cl.files) and offset >= cl.files[-1].end_offset


def _is_record_start(cl: Any, f: Any, offset: int) -> bool:
    """A file's start, or a valid record whose stored offset names this very position."""
    from rmqstore_cli.store.commitlog import Status

    if offset == f.file_from_offset:
        return True
    c = cl.check_at(offset)
    return c is not None and c.status is Status.VALID and c.message.physical_offset == offset


def _starts_around(cl: Any, f: Any, offset: int) -> tuple[int | None, int | None, int]:
    """The record starts in ``f`` nearest before and after ``offset`` (None: none), and the end
    of the last record before it (the file's start when none)."""
    from rmqstore_cli.store.commitlog import Blank

    before, after = None, None
    data_end = f.file_from_offset
    for rec in cl.scan(f.file_from_offset, f.end_offset, include_blank=True):
        at = rec.physical_offset if isinstance(rec, Blank) else rec.offset
        if at >= offset:
            after = at
            break
        before = at
        data_end = at + rec.total_size
    return before, after, data_end


def stop_warnings(cl: Any, compaction: bool) -> list[str]:
    """Where the walk found the log cut short (the rest of that file skipped); a compaction
    log's gaps and trailing zeros are how the broker leaves them, so only its unexpected stops."""
    if compaction:
        from rmqstore_cli.store.queues.compaction import unexpected_stops

        cl.stops = unexpected_stops(cl)
    return [f"{s.reason} at offset {s.offset} ({s.file}); the rest of that file was skipped" for s in cl.stops]


def walk(
    cl: Any, rng: Range, flt: Any, limit: int | None, crc: bool, blank: bool, blocks: bool, part: tuple | None = None
) -> Iterator[tuple]:
    """What a walk of [rng.start, rng.stop) passes (``store.filters.MessageFilter``), at most
    ``limit`` records: (a BLANK, None), (a record, None) or, with ``blocks``, (a
    ``MessageBlock``, the indices of its rows that pass). ``crc``: check body CRCs, a
    mismatch ending the log as in recovery; ``blank``: the BLANK records too. ``part``: only
    that part of the walk (``CommitLog.scan_part``; dump-commitlog --jobs)."""
    passed = 0
    # records decoded one by one for a property filter: only the candidates of each block
    # (a DLedger log's records carry their entry's header: read one by one as before)
    sieve = not blocks and not flt.columnar() and not cl.is_dledger
    if part is not None:
        scan = cl.scan_part(part, rng.stop, crc, blank, blocks or sieve)
    else:
        scan = cl.scan_blocks(
            rng.start, rng.stop, check_crc=crc, include_blank=blank, every_file=True, blocks=blocks or sieve
        )
    for rec in scan:
        room = None if limit is None else limit - passed
        if room is not None and room <= 0:
            break
        items, n = _passing(rec, flt, room, sieve)
        passed += n
        yield from items


def _passing(rec: Any, flt: Any, room: int | None, sieve: bool) -> tuple[list[tuple], int]:
    """What :func:`walk` yields of one scanned item, and how many records of it passed."""
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.records.message import Message

    if isinstance(rec, Blank):
        return [(rec, None)], 0
    if isinstance(rec, Message):
        return ([(rec, None)], 1) if flt.matches(rec) else ([], 0)
    if sieve:
        kept = sieved(rec, flt, room)
        return [(m, None) for m in kept], len(kept)
    take = flt.select(rec)[:room]  # a MessageBlock
    return [(rec, take)], int(take.size)


def sieved(blk: Any, flt: Any, room: int | None) -> list:
    """The records of a block that pass ``flt``, at most ``room``: only the candidates its
    columns and PROPERTIES bytes leave (``MessageFilter.candidates``) are decoded, each
    then judged by ``MessageFilter.matches``, the per-record verdict."""
    out: list = []
    for m in blk.messages(flt.candidates(blk)):
        if room is not None and len(out) >= room:
            break
        if flt.matches(m):
            out.append(m)
    return out


def plan(
    ms: Any, from_offset: int | None, to_offset: int | None, file: str | None, seek_begin: int | None
) -> tuple[Range, list[str]]:
    """The walk's [start, stop) (:func:`walk_range`, then :func:`seek_start` for
    ``seek_begin``), and the notes to say about it."""
    rng = walk_range(ms.commitlog, from_offset, to_offset, file)
    notes = [rng.note] if rng.note else []
    if seek_begin is not None:
        rng = seek_start(ms, seek_begin, rng)
        notes += [rng.note] if rng.note else []
    return rng, notes


def data_end(cl: Any) -> str | None:
    """Where the log's data ends, when the walk found a clean end (--show-blank)."""
    end = cl.end
    return f"data ends at offset {end.offset} ({end.reason})" if end is not None and end.clean else None
