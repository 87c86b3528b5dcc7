"""Replay a ``dump-commitlog --format jsonl --body base64`` stream as append specs.

Offsets, times, hosts, flags, magic and the raw PROPERTIES bytes are kept, so a whole
dump replays into a byte-identical commit log.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import TextIO

from rmqstore_cli.formats.commitlog import MAGIC_V1, MAGIC_V2
from rmqstore_cli.formats.properties import serialize_properties

from rmqstore_cli.errors import UsageError
from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.records.message import host_bytes

_REQUIRED = ("topic", "queue_id", "store_timestamp", "born_timestamp", "born_host", "store_host")


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
    missing = [k for k in _REQUIRED if k not in r]
    if missing:
        raise KeyError(f"missing {', '.join(missing)}")
    return AppendSpec(
        topic=r["topic"],
        queue_id=int(r["queue_id"]),
        body=_body(r),
        properties=_props(r),
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


def _props(r: dict) -> str | bytes:
    if "properties_base64" in r:
        return base64.b64decode(r["properties_base64"])
    if "properties_string" in r:
        return r["properties_string"]
    return serialize_properties((r.get("properties") or {}).items(), trailing_separator=True)


def _body(r: dict) -> bytes:
    if "body_base64" in r:
        return base64.b64decode(r["body_base64"], validate=True)
    if "body" not in r:
        if r.get("body_size", 0):
            raise ValueError("the record has no body (dump it with dump-commitlog --body base64)")
        return b""
    enc = r.get("body_encoding", "base64")
    if enc == "base64":
        return base64.b64decode(r["body"], validate=True)
    if enc == "hex":
        return bytes.fromhex(r["body"])
    raise ValueError(f"a {enc} body cannot be replayed exactly (dump it with dump-commitlog --body base64)")


def read_dump_blocks(src: TextIO, name: str, size: int = 4096) -> Iterator:
    """A ``dump-commitlog --format jsonl --body base64`` stream ``size`` lines (at most about
    ``BLOCK_BYTES``) at a time, as ``SendBlock`` columns
    (:class:`~rmqstore_cli.store.commitlog.blocks.SendBlock`; issue 23: each field of a block
    taken by one comprehension, each host address parsed once). A block with a line the
    columns do not take as it is (an error, an odd type) is read line by line
    (:func:`spec_from_line`), which names the line and says why."""
    import orjson

    from rmqstore_cli.store.commitlog.blocks import BLOCK_BYTES, SendBlock

    lines: list[tuple[int, str]] = []
    held = 0
    raw = getattr(src, "buffer", None)  # bytes as they are: orjson reads UTF-8 itself
    for lineno, line in enumerate(src if raw is None else raw, 1):
        if line.strip():
            lines.append((lineno, line))
            held += len(line)
        if len(lines) >= size or held >= BLOCK_BYTES:
            yield _dump_block(lines, name, orjson, SendBlock)
            lines, held = [], 0
    if lines:
        yield _dump_block(lines, name, orjson, SendBlock)


def _dump_block(lines: list[tuple[int, str]], name: str, orjson, send_block):
    try:
        return records_block([orjson.loads(line) for _, line in lines], send_block)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        return send_block.from_specs([("normal", spec_from_line(line, n, name)) for n, line in lines])


def records_block(recs: list, send_block):
    """:func:`spec_from_record` of many records as one block of columns; raises what the
    columns cannot take as it is (the caller then goes record by record)."""
    import numpy as np

    names, offsets = _checked_columns(recs)
    topics: dict[str, int] = {}
    hosts: dict[bytes, int] = {}
    seen: dict[str, tuple[bytes, int]] = {}  # a block repeats its hosts (the store's, always)
    born = [_host(seen, r["born_host"]) for r in recs]
    store = [_host(seen, r["store_host"]) for r in recs]
    tid = np.array([topics.setdefault(t, len(topics)) for t in names], np.int64)
    bh, bp = _host_ids(hosts, born)
    sh, sp = _host_ids(hosts, store)
    return send_block(
        list(topics),
        list(hosts),
        tid,
        _ints(recs, "queue_id"),
        _ints(recs, "flag", 0),
        _ints(recs, "sys_flag", 0),
        _ints(recs, "born_timestamp"),
        _ints(recs, "store_timestamp"),
        bh,
        bp,
        sh,
        sp,
        _ints(recs, "reconsume_times", 0),
        _ints(recs, "prepared_transaction_offset", 0),
        _magics(recs),
        _offsets(offsets[0]),
        _offsets(offsets[1]),
        bodies=[_body(r) for r in recs],
        props=[_prop_bytes(r) for r in recs],
    )


def _checked_columns(recs: list) -> tuple[list, list]:
    """The topics and the (queue, physical) offset columns, after checking every record is a
    dict with the required fields, a str topic and offsets that are absent or non-negative ints:
    anything else raises, so the caller goes record by record and names the line."""
    if not all(_complete(r) for r in recs):
        raise KeyError("a record lacks a field")
    names = [r["topic"] for r in recs]
    offsets = [[r.get(k) for r in recs] for k in ("queue_offset", "physical_offset")]
    if not _typed(names, offsets):
        raise TypeError("a topic or offset of another type")
    return names, offsets


def _typed(names: list, offsets: list) -> bool:
    """Every topic a str and every offset one the columns take (:func:`_offset_ok`)."""
    return all(type(t) is str for t in names) and all(_offset_ok(v) for col in offsets for v in col)


def _complete(r: object) -> bool:
    """A dict with every field :func:`spec_from_record` requires."""
    return type(r) is dict and all(k in r for k in _REQUIRED)


def _offset_ok(v: object) -> bool:
    """An offset the columns take as it is: absent, or a non-negative int (not a bool)."""
    return v is None or (type(v) is int and v >= 0)


def _offsets(col: list):
    """An offset column, -1 where the record gives none (the writer assigns it)."""
    import numpy as np

    return np.array([-1 if v is None else v for v in col], np.int64)


def _magics(recs: list):
    """The magic column: V2 (IPv6 hosts' layout) only where the record says "v2"."""
    import numpy as np

    return np.array([MAGIC_V2 if r.get("magic") == "v2" else MAGIC_V1 for r in recs], np.int64)


def _prop_bytes(r: dict) -> bytes:
    """The raw PROPERTIES bytes of a record (:func:`_props`; a string kept as it is, lone
    surrogates included)."""
    p = _props(r)
    return p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass")


def _host(seen: dict[str, tuple[bytes, int]], text: str) -> tuple[bytes, int]:
    """``host_bytes`` of an address text, parsed once per block (its hosts repeat)."""
    got = seen.get(text)
    if got is None:
        got = seen[text] = host_bytes(text)
    return got


def _host_ids(hosts: dict[bytes, int], col: list):
    """The address ids (numbered in first-seen order in ``hosts``) and the ports of a host column."""
    import numpy as np

    return (
        np.array([hosts.setdefault(a, len(hosts)) for a, _ in col], np.int64),
        np.array([p for _, p in col], np.int64),
    )


def _ints(recs: list, key: str, default: int | None = None):
    """One int64 column; a field without ``default`` is required (``KeyError`` otherwise)."""
    import numpy as np

    if default is None:
        return np.array([int(r[key]) for r in recs], np.int64)
    return np.array([int(r.get(key, default)) for r in recs], np.int64)
