"""generate --from-jsonl's lines as a block's columns (issue 35: the JSON parse per line).

:func:`dump_cols` is the reference (orjson's dict per line, then one comprehension per field)
and the twin of the C loop of the same name (``_cdump.c``, :mod:`~rmqstore_cli.store.files.kernels`),
which reads each line once, straight into the columns, and gives up (None) on any line it is not
certain to read as this does; :func:`block_of` makes either's columns a
:class:`~rmqstore_cli.store.commitlog.blocks.SendBlock`. The per-record rules (a body's
base64, the raw PROPERTIES) are here too: ``replay.spec_from_record`` applies them line by line.
"""

from __future__ import annotations

import base64

import numpy as np
from rmqstore_cli.formats.commitlog import MAGIC_V1, MAGIC_V2
from rmqstore_cli.formats.properties import serialize_properties

from rmqstore_cli.store.files.kernels import DUMP_COLS
from rmqstore_cli.store.records.message import host_bytes

#: The fields a record must have (``spec_from_record``).
REQUIRED = ("topic", "queue_id", "store_timestamp", "born_timestamp", "born_host", "store_host")
#: The int columns read with a default when the record has none, and those it must have.
_DEFAULTED = ("flag", "sys_flag", "reconsume_times", "prepared_transaction_offset")
_REQUIRED_INTS = ("queue_id", "born_timestamp", "store_timestamp")
_OFFSETS = ("queue_offset", "physical_offset")


def record_props(r: dict) -> str | bytes:
    """A record's PROPERTIES: raw bytes (``properties_base64``), its string, or its map serialised."""
    if "properties_base64" in r:
        return base64.b64decode(r["properties_base64"])
    if "properties_string" in r:
        return r["properties_string"]
    return serialize_properties((r.get("properties") or {}).items(), trailing_separator=True)


def record_body(r: dict) -> bytes:
    """A record's body (base64 or hex as the dump wrote it; none only when it was empty)."""
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


def prop_bytes(r: dict) -> bytes:
    """The raw PROPERTIES bytes of a record (:func:`record_props`; a string kept as it is, lone
    surrogates included)."""
    p = record_props(r)
    return p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass")


def dump_cols(lines: list, out: np.ndarray) -> tuple[list, list, list, list, list]:
    """The records of dump lines (bytes or str) as a block's columns: ``out`` (int64,
    ``len(DUMP_COLS)`` columns of ``len(lines)`` items one after another) gets the int fields,
    topic and host text ids and 1 for magic "v2"; returns the topics and the born and store host
    texts (first-seen order), the bodies and the raw PROPERTIES. Raises what the columns cannot
    take as it is (a record that is not a dict with every required field, a topic not a str, an
    offset not absent or a non-negative int, a bad body): the caller then goes line by line."""
    import orjson

    recs = [orjson.loads(line) for line in lines]
    if not all(type(r) is dict and all(k in r for k in REQUIRED) for r in recs):
        raise KeyError("a record lacks a field")
    names = [r["topic"] for r in recs]
    offsets = [[r.get(k) for r in recs] for k in _OFFSETS]
    if not all(type(t) is str for t in names) or not all(_offset_ok(v) for c in offsets for v in c):
        raise TypeError("a topic or offset of another type")
    col = dict(zip(DUMP_COLS, out.reshape(len(DUMP_COLS), len(lines)), strict=True))
    topics: dict[str, int] = {}
    col["tid"][:] = [topics.setdefault(t, len(topics)) for t in names]
    hosts = {k: _text_ids(col[k], [r[k] for r in recs]) for k in ("born_host", "store_host")}
    for k in _REQUIRED_INTS:
        col[k][:] = np.array([int(r[k]) for r in recs], np.int64)
    for k in _DEFAULTED:
        col[k][:] = np.array([int(r.get(k, 0)) for r in recs], np.int64)
    for k, c in zip(_OFFSETS, offsets, strict=True):
        col[k][:] = [-1 if v is None else v for v in c]
    col["v2"][:] = [r.get("magic") == "v2" for r in recs]
    bodies = [record_body(r) for r in recs]
    return list(topics), hosts["born_host"], hosts["store_host"], bodies, [prop_bytes(r) for r in recs]


def _offset_ok(v: object) -> bool:
    """An offset the columns take as it is: absent, or a non-negative int (not a bool)."""
    return v is None or (type(v) is int and v >= 0)


def _text_ids(col: np.ndarray, texts: list) -> list:
    """``col`` set to each text's number (first-seen order); the texts so numbered."""
    ids: dict = {}
    col[:] = [ids.setdefault(t, len(ids)) for t in texts]
    return list(ids)


def block_of(cols: tuple[list, list, list, list, list], out: np.ndarray, send_block):
    """:func:`dump_cols`' columns (the C loop's or the twin's) as a ``SendBlock``: each host text
    parsed once (``host_bytes``), the addresses numbered born column first, as they first come."""
    topics, born, store, bodies, props = cols
    c = dict(zip(DUMP_COLS, out.reshape(len(DUMP_COLS), len(bodies)), strict=True))
    addrs: dict[bytes, int] = {}
    bh, bp = _host_columns(addrs, born, c["born_host"])
    sh, sp = _host_columns(addrs, store, c["store_host"])
    return send_block(
        topics,
        list(addrs),
        c["tid"],
        *(c[k] for k in ("queue_id", "flag", "sys_flag", "born_timestamp", "store_timestamp")),
        bh,
        bp,
        sh,
        sp,
        c["reconsume_times"],
        c["prepared_transaction_offset"],
        np.where(c["v2"] != 0, MAGIC_V2, MAGIC_V1).astype(np.int64),
        c["queue_offset"],
        c["physical_offset"],
        bodies=bodies,
        props=props,
    )


def _host_columns(addrs: dict[bytes, int], texts: list, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The address ids (numbered in ``addrs`` as first seen) and ports of a host column, from its
    distinct texts and each record's text id."""
    parsed = [host_bytes(t) for t in texts]
    addr_id = np.array([addrs.setdefault(a, len(addrs)) for a, _ in parsed], np.int64)
    port = np.array([p for _, p in parsed], np.int64)
    return addr_id[ids], port[ids]
