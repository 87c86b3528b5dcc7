"""Replay a ``dump-commitlog --format jsonl --body base64`` stream as append specs.

Offsets, times, hosts, flags, magic and the raw PROPERTIES bytes are kept, so a whole
dump replays into a byte-identical commit log.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Iterator
from typing import TextIO

from rmqstore_cli.formats.commitlog import MAGIC_V1, MAGIC_V2

from rmqstore_cli.errors import UsageError
from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.records.message import host_bytes
from rmqstore_cli.store.write.replay_cols import REQUIRED, record_body, record_props


def spec_from_line(line: str | bytes, lineno: int, name: str) -> AppendSpec:
    """One line of the dump, or a one-line error naming it."""
    import orjson

    try:
        try:  # orjson: ~4x faster; what it refuses (lone surrogates, NaN, huge ints) json decides
            r = orjson.loads(line)
        except orjson.JSONDecodeError:
            r = json.loads(line)
        return spec_from_record(r)
    except (ValueError, KeyError, TypeError, binascii.Error) as e:
        raise UsageError(
            f"{name}:{lineno}: not a dump-commitlog record: {e}",
            hint="produce it with dump-commitlog --format jsonl --body base64",
        ) from None


def spec_from_record(r: dict) -> AppendSpec:
    missing = [k for k in REQUIRED if k not in r]
    if missing:
        raise KeyError(f"missing {', '.join(missing)}")
    return AppendSpec(
        topic=r["topic"],
        queue_id=int(r["queue_id"]),
        body=record_body(r),
        properties=record_props(r),
        store_timestamp=int(r["store_timestamp"]),
        born_timestamp=int(r["born_timestamp"]),
        born_host=host_bytes(r["born_host"]),
        store_host=host_bytes(r["store_host"]),
        flag=int(r.get("flag", 0)),
        sys_flag=int(r.get("sys_flag", 0)),
        reconsume_times=int(r.get("reconsume_times", 0)),
        prepared_transaction_offset=int(r.get("prepared_transaction_offset", 0)),
        magic=MAGIC_V2 if r.get("magic") == "v2" else MAGIC_V1,
        queue_offset=r.get("queue_offset"),
        physical_offset=r.get("physical_offset"),
        raw_properties=True,
    )


def read_dump_blocks(src: TextIO, name: str, size: int = 4096) -> Iterator:
    """A ``dump-commitlog --format jsonl --body base64`` stream ``size`` lines (at most about
    ``BLOCK_BYTES``) at a time, as ``SendBlock`` columns
    (:class:`~rmqstore_cli.store.commitlog.blocks.SendBlock`; issue 35: read by one C loop per
    block, each host address parsed once). A block with a line the columns do not take as it
    is (an error, an odd type) is read line by line (:func:`spec_from_line`), which names the
    line and says why."""
    from rmqstore_cli.store.commitlog.blocks import BLOCK_BYTES, SendBlock

    lines: list[tuple[int, str]] = []
    held = 0
    raw = getattr(src, "buffer", None)  # bytes as they are: orjson reads UTF-8 itself
    for lineno, line in enumerate(src if raw is None else raw, 1):
        if line.strip():
            lines.append((lineno, line))
            held += len(line)
        if len(lines) >= size or held >= BLOCK_BYTES:
            yield _dump_block(lines, name, SendBlock)
            lines, held = [], 0
    if lines:
        yield _dump_block(lines, name, SendBlock)


def _dump_block(lines: list[tuple[int, bytes | str]], name: str, send_block):
    """One block of lines: the C reader's columns (``kernels.dump_cols``) when it takes every
    line, else its twin's (:func:`~rmqstore_cli.store.write.replay_cols.dump_cols`), else (a line
    the columns do not take as it is) line by line, which names the line and says why."""
    import numpy as np

    from rmqstore_cli.store.files.fastpaths import FAST_PATHS
    from rmqstore_cli.store.files.kernels import DUMP_COLS
    from rmqstore_cli.store.write.replay_cols import block_of, dump_cols

    raw = [line for _, line in lines]
    out = np.empty(len(DUMP_COLS) * len(raw), np.int64)
    k = FAST_PATHS.kernels()
    try:
        cols = k.dump_cols(raw, out) if k is not None else None
        return block_of(cols if cols is not None else dump_cols(raw, out), out, send_block)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return send_block.from_specs([("normal", spec_from_line(line, n, name)) for n, line in lines])
