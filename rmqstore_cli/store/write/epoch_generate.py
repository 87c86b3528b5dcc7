"""``generate``'s epoch file: the entries a spec names, at offsets of the store just written,
laid down as ``CheckpointFile#write`` writes them (docs/format/ha.md#epoch-file)."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

from rmqstore_cli.errors import UsageError, setting
from rmqstore_cli.store.commitlog import CommitLog
from rmqstore_cli.store.files.safefs import replace_file
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.layout.epoch_file import encode_epoch_file, epoch_file_path
from rmqstore_cli.store.records.message import Message

SPEC_HELP = "comma-separated <epoch>-<start>, start a byte offset, @N (the Nth record's offset, from 0) or end"


def parse_spec(spec: str) -> list[tuple[int, str]]:
    """``"1-0,2-@500,3-end"`` -> [(1, "0"), (2, "@500"), (3, "end")]; the order is kept (an
    out-of-order file is what a test may want)."""
    out = []
    for part in spec.split(","):
        epoch, sep, start = part.strip().partition("-")
        ok = sep and epoch.isdigit() and (start.isdigit() or start == "end" or start[1:].isdigit() and start[:1] == "@")
        if not ok:
            raise UsageError(f"{setting('epoch_file')}: {part!r} is not <epoch>-<start> ({SPEC_HELP})")
        out.append((int(epoch), start))
    return out


def resolve(entries: list[tuple[int, str]], cl: CommitLog) -> list[tuple[int, int]]:
    """Each start as an offset of ``cl``: a number as given, ``end`` the log's end, ``@N`` the
    Nth record's offset (past the last record: the end)."""
    end = cl.max_offset()
    out = []
    for epoch, start in entries:
        if start == "end":
            off = end
        elif start.startswith("@"):
            recs = (r for r in cl.scan() if isinstance(r, Message))
            rec = next(islice(recs, int(start[1:]), None), None)
            off = rec.physical_offset if rec is not None else end
        else:
            off = int(start)
        out.append((epoch, off))
    return out


def write_epoch_file(config: StoreConfig, spec: str) -> Path:
    """Write the store's ``epochFileCheckpoint`` for ``spec``; its path."""
    cl = CommitLog(config)
    try:
        entries = resolve(parse_spec(spec), cl)
    finally:
        cl.close()
    path = epoch_file_path(config.root)
    replace_file(path, encode_epoch_file(entries), [config.root])
    return path
