"""``rmqstore repair --pad``: make a commit-log file the broker loads again, keeping every good
message in it and in the files after it.

What the broker does with a commit-log file (4.9.7 and 5.3.3 alike):

- ``MappedFileQueue#doLoad``: a file whose length is not ``mappedFileSizeCommitLog`` ("length
  not matched message store config value, please check it manually") makes ``load`` return
  false: the broker does not start (5.x first deletes an *empty* last file).
- ``CommitLog#recoverNormally`` / ``#recoverAbnormally`` walk the records with
  ``#checkMessageAndReturnSize`` (CRCs checked, ``checkCRCOnRecover``): a valid record is kept;
  ``BLANK_MAGIC_CODE`` returns size 0, and recovery goes on with the next file; anything else
  (the zeros after the data included: magic 0 is "illegal") ends the log there
  (``processOffset``) and ``MappedFileQueue#truncateDirtyFiles`` deletes every later file.

So a file cut short (a copy or a disk that lost its end) keeps every message if it is given
its length back with zeros after its last good record: for the last file, recovery then ends
the log at that record itself; for a file before the last, a BLANK record there (what
``CommitLog.DefaultAppendMessageCallback#doAppend`` writes when a message does not fit)
sends recovery on to the next file instead of deleting it. The same BLANK repairs a full
file before the last whose data ends in zeros without one. Moving such a file aside instead
would drop every message in it (and, for a middle file, leave a gap).

A consume-queue file cut short (``cq.file-size``) is derived data: it is padded with zeros
after its last whole 20-byte unit (``ConsumeQueue#recover`` ends the queue there), which lets
``rebuild-index --only cq --topic T`` (refusing odd sizes, as the broker does) rewrite the
topic's queues from the commit log, every unit back.

The repair is exact or refused: the bytes after the last good record must be what a cut
leaves (nothing, zeros, fewer than 8 bytes, or a record whose TOTALSIZE runs past the cut),
never a record that is damaged inside the file (verify names that damage), and a file
longer than the configured size may only carry zeros beyond it.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from rmqstore_cli.formats.commitlog import END_FILE_MIN_BLANK_LENGTH, MAGIC_V1, MAGIC_V2, PREFIX_FORMAT, RecordPrefix

from rmqstore_cli.errors import RefusedError, UsageError, setting
from rmqstore_cli.store.commitlog import Status, blank_record, check_message

_PREFIX_SIZE = RecordPrefix.sizeof()  # TOTALSIZE and MAGICCODE: what a cut may leave less of
_BLANK_SIZE = END_FILE_MIN_BLANK_LENGTH  # the BLANK the broker writes (and keeps room for)


@dataclass
class PadPlan:
    """What ``repair --pad`` does to one commit-log file, and why."""

    file: str  # the path as given
    kind: str  # "commitlog" or "consumequeue"
    last: bool  # the newest commit-log file (recovery ends the log in it)
    length: int  # its length now
    size: int  # mappedFileSizeCommitLog: its length after
    records: int  # good records kept (checkMessageAndReturnSize, CRCs checked); units of a queue file
    data_end: int  # where the last good record ends: recovery's processOffset in this file
    dropped: int  # bytes after data_end that were not zeros (a record cut by the file's end)
    blank: str  # "kept" (the file's own BLANK), "written" (at data_end) or "none"
    action: str  # "pad" or "none" (the file is already what the broker loads)
    note: str  # what the broker does with the file after this

    def as_dict(self) -> dict:
        return asdict(self)


def _majority_size(paths, target: Path, what: str, option: str) -> int:
    """The length the other files of ``paths`` share (never the damaged file's own)."""
    sizes: Counter[int] = Counter()
    for p in paths:
        try:
            if not os.path.samefile(p, target):
                sizes[p.stat().st_size] += 1
        except OSError:
            continue
    sizes.pop(0, None)
    top = sizes.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        raise UsageError(
            f"the {what} file size cannot be told from the other files", hint=f"pass {option} or ⟦broker_conf⟧"
        )
    return top[0][0]


def commitlog_size(config, target: Path) -> int:
    """``mappedFileSizeCommitLog``: the configured one, else the store's other commit-log files'."""
    if "mapped_file_size_commit_log" in config.explicit:
        return config.mapped_file_size_commit_log
    from rmqstore_cli.store.layout.config import data_files

    return _majority_size(data_files(config.commitlog_dirs), target, "commit-log", "⟦commitlog_file_size⟧")


def cq_size(config, target: Path) -> int:
    """``mappedFileSizeConsumeQueue`` (rounded up to whole units, as the broker's getter does):
    the configured one, else the store's other consume-queue files'."""
    if "mapped_file_size_consume_queue" in config.explicit:
        return config.cq_file_size
    from rmqstore_cli.store.layout.config import data_files, subdirs

    files = data_files(q for t in subdirs(config.consumequeue_dir) for q in subdirs(t))
    return _majority_size(files, target, "consume-queue", "⟦cq_file_size⟧")


def _queue_of(config, path: Path) -> tuple[str, int] | None:
    """(topic, queue id) when ``path`` is a file of the store's ``consumequeue/TOPIC/QUEUE/``."""
    try:
        parent = path.resolve().parent
        same = os.path.samefile(parent.parent.parent, config.consumequeue_dir)
    except OSError:
        return None
    if same and path.name.isdigit() and parent.name.isdigit():
        return parent.parent.name, int(parent.name)
    return None


def _find_file(config, path: Path):
    """The store's commit-log file at ``path`` (a MappedFile of its queue) and whether it is
    the last, or a usage error naming what it is not."""
    from rmqstore_cli.store.commitlog.dledger import header_of
    from rmqstore_cli.store.files.mapped_files import MappedFileQueue

    q = MappedFileQueue(config.commitlog_dirs, config.mapped_file_size_commit_log)
    for i, f in enumerate(q.files):
        try:
            same = os.path.samefile(f.path, path)
        except OSError:
            same = False
        if same:
            if header_of(config, f):
                raise RefusedError(
                    "a DLedger data file: DLedgerMmapFileStore frames its entries differently; "
                    "repair --pad pads only plain commit-log files",
                    path=path,
                )
            return f, i == len(q.files) - 1
    raise UsageError(
        f"{path} is not a commit-log or consume-queue file of the store {config.root}",
        hint="give a file of its commitlog/ or consumequeue/TOPIC/QUEUE/ (with ⟦broker_conf⟧ when "
        "storePathCommitLog names another directory)",
    )


def plan_pad(config, path: Path) -> PadPlan:
    """Read the file (never write it) and say what padding it keeps: for a commit-log file,
    every record ``#checkMessageAndReturnSize`` accepts from its start, up to the first it
    does not; for a consume-queue file, its whole units."""
    from rmqstore_cli.store.files.safefs import map_file, open_read_only

    path = Path(path)
    queue = _queue_of(config, path)
    if queue is None:
        f, last = _find_file(config, path)
        size, base = commitlog_size(config, path), f.file_from_offset
    else:
        size = cq_size(config, path)
        names = sorted(p.name for p in path.parent.iterdir() if p.name.isdigit())
        last = names[-1] == path.name if names else True
    fd = open_read_only(path)
    try:
        length = os.fstat(fd).st_size
        buf = map_file(fd, length, path)
        try:
            if queue is not None:
                return _plan_queue_file(buf, str(path), length, size, last)
            return _plan(buf, str(path), base, length, size, last, config.force_verify_prop_crc)
        finally:
            if not isinstance(buf, bytes):
                buf.close()
    finally:
        os.close(fd)


def _plan_queue_file(buf, name: str, length: int, size: int, last: bool) -> PadPlan:
    """A consume-queue file: its whole units kept, zeros to ``size`` (the cut unit and what the
    cut lost come back from the commit log: rebuild-index)."""
    from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

    if length > size and any(buf[size:length]):
        raise RefusedError(
            f"{length} bytes, and units beyond mappedFileSizeConsumeQueue={size}: the file was "
            "written with another size",
            path=name,
            hint="pass the size the broker wrote it with (⟦cq_file_size⟧ or ⟦broker_conf⟧); nothing was changed",
        )
    keep = min(length, size) // CQ_STORE_UNIT_SIZE * CQ_STORE_UNIT_SIZE
    units = sum(1 for p in range(0, keep, CQ_STORE_UNIT_SIZE) if any(buf[p : p + CQ_STORE_UNIT_SIZE]))
    dropped = length - keep if any(buf[keep:length]) else 0
    return PadPlan(
        name,
        "consumequeue",
        last,
        length,
        size,
        units,
        keep,
        dropped,
        "none",
        "none" if length == size else "pad",
        "ConsumeQueue#recover ends the queue at its last whole unit; rebuild-index --only cq --topic "
        "rewrites the queue from the commit log",
    )


def _plan(buf, name: str, base: int, length: int, size: int, last: bool, force_crc: bool) -> PadPlan:
    """A commit-log file: its good records kept, a BLANK written where recovery must go on to
    the next file, zeros to ``size``; refused where padding cannot make it exact."""
    pos, records, blank = _good_records(buf, base, length, force_crc)
    if length > size and any(buf[size:length]):
        raise RefusedError(
            f"{length} bytes, and data beyond mappedFileSizeCommitLog={size}: the file was written with another size",
            path=name,
            hint="pass the size the broker wrote it with (⟦commitlog_file_size⟧ or ⟦broker_conf⟧); nothing was changed",
        )
    if length == size and last:  # loaded as it is; recovery ends the log at its first bad record itself
        return PadPlan(
            name,
            "commitlog",
            last,
            length,
            size,
            records,
            pos,
            0,
            "kept" if blank else "none",
            "none",
            f"the broker loads it; its recovery ends the log at {base + pos}",
        )
    _refuse_no_room(name, pos, size, last, blank)
    dropped = _cut_tail(buf, name, pos, length, size, blank)
    state, note = _blank_state(blank, last)
    action = "none" if length == size and state == "kept" else "pad"
    return PadPlan(name, "commitlog", last, length, size, records, pos, dropped, state, action, note)


def _refuse_no_room(name: str, pos: int, size: int, last: bool, blank: bool) -> None:
    """Refused when the good records (and the BLANK a file before the last needs, or the one
    it has) do not fit a file of ``size`` bytes."""
    if pos + (0 if last and not blank else _BLANK_SIZE) > size:
        raise RefusedError(
            f"its records end at {pos}, past where a {size}-byte file has room for them (and a BLANK)",
            path=name,
            hint="check mappedFileSizeCommitLog; nothing was changed",
        )


def _good_records(buf, base: int, length: int, force_crc: bool) -> tuple[int, int, bool]:
    """Where the records ``CommitLog#checkMessageAndReturnSize`` accepts from the file's start
    end, how many there are, and whether what stops them is a BLANK. Runs of records the block
    test (``columns.valid_block``, whose verdict implies VALID) accepts are taken a block at a
    time; the record where a block stops is judged alone. A whole-record CRC
    (``force_crc``) is checked record by record, as the scan does."""
    pos, records = 0, 0
    blocks = None if force_crc else _ValidBlocks(buf, base, length)
    while True:
        blk = blocks.at(pos) if blocks is not None else None
        if blk is not None:
            pos, records = blk.next_pos, records + len(blk.pos)
            continue
        c = check_message(buf, pos, length, base, check_crc=True, force_prop_crc=force_crc)
        if c.status is not Status.VALID:
            return pos, records, c.status is Status.BLANK
        pos += c.size
        records += 1


class _ValidBlocks:
    """The block path of :func:`_good_records` over one file's mapping."""

    def __init__(self, buf, base: int, length: int):
        from rmqstore_cli.store.files.arrays import file_array

        self.buf, self.base, self.length = buf, base, length
        self.a = file_array(buf)

    def at(self, pos: int):
        """The run of surely-valid records at ``pos`` (a ``MessageBlock``), or None."""
        from rmqstore_cli.store.commitlog.columns import MAX_BLOCK, valid_block

        if pos >= self.length:
            return None
        return valid_block(self.buf, self.a, pos, self.length, self.base, "", MAX_BLOCK, True)


def _cut_tail(buf, name: str, pos: int, length: int, size: int, blank: bool) -> int:
    """The bytes after the last good record that padding drops (0 when they are zeros); refused
    when they are not what a cut by the file's end leaves (damage inside the file)."""
    rest = b"" if blank else buf[pos : min(length, size)]  # after a BLANK "the remaining space may be any value"
    if not any(rest):
        return 0
    why = _not_a_cut(rest, size - pos, length >= size)
    if why:
        raise RefusedError(
            f"the bytes at {pos} are {why}, not a record cut short by the file's end: damage "
            "inside the file, which padding cannot make exact",
            path=name,
            hint="rmqstore verify names it; nothing was changed",
        )
    return len(rest)


def _blank_state(blank: bool, last: bool) -> tuple[str, str]:
    """What becomes of the BLANK (kept, none, written) and what the broker's recovery then does:
    before the last file it must find a BLANK to go on to the next one."""
    if blank:
        return "kept", "the broker's recovery goes on to the next file at its BLANK"
    if last:
        return "none", "the broker's recovery ends the log after its last good record and appends there"
    return "written", "the broker's recovery goes on to the next file at the BLANK"


def _not_a_cut(rest: bytes, room: int, full: bool) -> str:
    """Why ``rest`` (the bytes after the last good record, up to the file's end) is not what a
    cut leaves behind ("" when it is: fewer than 8 bytes, or a V1/V2 record whose TOTALSIZE runs
    past the end and would have fit the full file)."""
    import struct

    if len(rest) < _PREFIX_SIZE:
        return "" if not full else f"{len(rest)} stray bytes"
    total, magic = struct.unpack_from(PREFIX_FORMAT, rest, 0)
    if magic not in (MAGIC_V1, MAGIC_V2):
        return f"no record (magic 0x{magic:08X})"
    if full or not len(rest) < total <= room:
        return f"a record of {total} bytes that the file holds or cannot hold"
    return ""


def apply_pad(config, plan: PadPlan) -> None:
    """Write the plan: the good records, the BLANK when the plan writes one, zeros to the
    configured size; beside the file, then renamed over it (``safefs.rewrite_prefix``)."""
    from rmqstore_cli.store.files.safefs import rewrite_prefix

    if plan.action != "pad":
        return
    keep = plan.data_end + (_BLANK_SIZE if plan.blank == "kept" else 0)
    tail = blank_record(plan.size - plan.data_end) if plan.blank == "written" else b""
    rewrite_prefix(Path(plan.file), keep, tail, plan.size, config.write_roots)


def pad_command(root: Path, size: int, path: Path, queue: str | None = None) -> str:
    """The repair verify prints for a file :func:`plan_pad` can make whole: a commit-log file
    (``--commitlog-file-size``), or a consume-queue file of topic ``queue`` (``--cq-file-size``,
    then rebuild-index of that topic)."""
    q = shlex.quote
    opt = "--commitlog-file-size" if queue is None else "--cq-file-size"
    pad = " ".join(["rmqstore repair --store", q(str(root)), opt, str(size), "--pad", q(str(path))])
    if queue is None:
        return pad
    return (
        f"{pad} && rmqstore rebuild-index --store {q(str(root))} --cq-file-size {size} --in-place --only cq "
        f"--topic {q(queue)}"
    )


def run_pad(config, path: Path, dry_run: bool, live_said=None, done=None) -> PadPlan:
    """``repair --pad``: the plan for ``path`` and, unless ``dry_run``, the file rewritten,
    under the store's lock (a live broker refused). A dry run only reads, so it goes on under
    a live broker: ``live_said(pid)`` is told first. ``done(plan)`` is called once a padded
    file is in place, before the lock is released."""
    from rmqstore_cli.store.files.lock import StoreLock, check_lock_file, lock_holder, refuse_if_live

    root = config.root
    lock = StoreLock(root, hint="a broker or another rmqstore command is starting; try again later")
    if dry_run:  # only reads
        check_lock_file(root)
        live = lock_holder(root)
        if live is not None and live_said is not None:
            live_said(live)
    else:
        refuse_if_live(root, hint=f"stop the broker, or repair a copy; {setting('dry_run')} says what would be written")
        lock.acquire()
    try:
        plan = plan_pad(config, path)
        if not dry_run:
            apply_pad(config, plan)
            if plan.action == "pad" and done is not None:
                done(plan)
    finally:
        lock.release()
    return plan
