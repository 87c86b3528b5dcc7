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
from rmqstore_cli.store.records.message import address_bytes, split_host

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
    topic ids, the hosts' address text ids and ports, and 1 for magic "v2"; returns the topics
    and the born and store address texts (first-seen order), the bodies and the raw PROPERTIES.
    Raises what the columns cannot take as it is (a record that is not a dict with every
    required field, a topic not a str, an offset not absent or a non-negative int, a host or
    body it cannot read): the caller then goes line by line."""
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
    born = _address_ids(col["born_host"], col["born_port"], [r["born_host"] for r in recs])
    store = _address_ids(col["store_host"], col["store_port"], [r["store_host"] for r in recs])
    for k in _REQUIRED_INTS:
        col[k][:] = np.array([int(r[k]) for r in recs], np.int64)
    for k in _DEFAULTED:
        col[k][:] = np.array([int(r.get(k, 0)) for r in recs], np.int64)
    for k, c in zip(_OFFSETS, offsets, strict=True):
        col[k][:] = [-1 if v is None else v for v in c]
    col["v2"][:] = [r.get("magic") == "v2" for r in recs]
    bodies = [record_body(r) for r in recs]
    return list(topics), born, store, bodies, [prop_bytes(r) for r in recs]


def _offset_ok(v: object) -> bool:
    """An offset the columns take as it is: absent, or a non-negative int (not a bool)."""
    return v is None or (type(v) is int and v >= 0)


def _address_ids(col: np.ndarray, ports: np.ndarray, texts: list) -> list:
    """``col`` set to the number of each host text's address text (first-seen order), ``ports``
    to its port (``split_host``); the address texts so numbered."""
    split = [split_host(t) for t in texts]
    ids: dict = {}
    col[:] = [ids.setdefault(a, len(ids)) for a, _ in split]
    ports[:] = np.array([p for _, p in split], np.int64)
    return list(ids)


def block_of(cols: tuple[list, list, list, list, list], out: np.ndarray, send_block):
    """:func:`dump_cols`' columns (the C loop's or the twin's) as a ``SendBlock``: each address
    text parsed once, the addresses numbered born column first, as they first come."""
    topics, born, store, bodies, props = cols
    c = dict(zip(DUMP_COLS, out.reshape(len(DUMP_COLS), len(bodies)), strict=True))
    addrs: dict[bytes, int] = {}
    bh = _address_column(addrs, born, c["born_host"])
    sh = _address_column(addrs, store, c["store_host"])
    return send_block(
        topics,
        list(addrs),
        c["tid"],
        *(c[k] for k in ("queue_id", "flag", "sys_flag", "born_timestamp", "store_timestamp")),
        bh,
        c["born_port"],
        sh,
        c["store_port"],
        c["reconsume_times"],
        c["prepared_transaction_offset"],
        np.where(c["v2"] != 0, MAGIC_V2, MAGIC_V1).astype(np.int64),
        c["queue_offset"],
        c["physical_offset"],
        bodies=bodies,
        props=props,
    )


def _address_column(addrs: dict[bytes, int], texts: list, ids: np.ndarray) -> np.ndarray:
    """The address ids (numbered in ``addrs`` as first seen) of a host column, from its distinct
    address texts (each parsed once, ``address_bytes``) and each record's text id."""
    return np.array([addrs.setdefault(address_bytes(t), len(addrs)) for t in texts], np.int64)[ids]
