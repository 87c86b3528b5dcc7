"""Export rows for a whole block of messages at once, as a pyarrow RecordBatch.

The reference is :func:`~rmqstore_cli.pipeline.export_tasks.export_rows`: one
:func:`~rmqstore_cli.render.message_dict` per record. Here the columns of a
:class:`~rmqstore_cli.store.columns.MessageBlock` become Arrow arrays directly: numbers
without a Python object per value, hosts and topics once per distinct value, and the
PROPERTIES of the block split into names and values by one ``re.split`` over their text.

That split is exact for *plain* PROPERTIES — valid UTF-8, every pair ``name\\x01value``
with both non-empty, no name twice — where the broker's parser keeps every pair in
order. Any other record (and a topic that is not valid UTF-8) takes the reference path in
its place. Tests compare both on every record of the fixtures and of built stores.
"""
from __future__ import annotations

import re

import numpy as np

from rmqstore_cli.formats.commitlog import HEAD, HOST_ADDRESS_SIZE, HOST_SIZE, MAGIC_V2
from rmqstore_cli.render import message_dict
from rmqstore_cli.store.arrays import byte_rows
from rmqstore_cli.store.columns import MessageBlock

_PAIR_SEPARATORS = re.compile("[\x00\x01\x02]")
_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_PHY = HEAD["physical_offset"]
#: an offset msgId: the store host (address and port) then PHYSICALOFFSET, for each kind
_ID_V4, _ID_V6 = HOST_SIZE[False] + _PHY.size, HOST_SIZE[True] + _PHY.size


def _msg_ids(blk: MessageBlock) -> list[str]:
    """``MessageDecoder#createMessageId`` of every record, upper-case hex: store address,
    port and the stored PHYSICALOFFSET (32 digits for IPv4 store hosts, 56 for IPv6)."""
    store_at, store_size, _ = blk.host("store")
    v6 = store_size != HOST_ADDRESS_SIZE[False]
    if v6.any():
        h4, h6, pad = HOST_SIZE[False], HOST_SIZE[True], _ID_V6 - _ID_V4
        raw = np.zeros((blk.n, _ID_V6), np.uint8)  # right-aligned: IPv4 rows start at byte 12
        host, phy = byte_rows(blk.a, store_at, h6), byte_rows(blk.a, blk.pos + _PHY.offset, _PHY.size)
        raw[~v6, pad:pad + h4], raw[v6, :h6], raw[:, h6:] = host[~v6, :h4], host[v6], phy
    else:
        raw = blk.msg_id_bytes(np.arange(blk.n))
    hexed = np.empty((blk.n, 2 * raw.shape[1]), np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 15]
    text = hexed.tobytes().decode("ascii")
    w = hexed.shape[1]
    return [text[i * w + w - n:i * w + w] for i, n in enumerate(np.where(v6, 2 * _ID_V6, 2 * _ID_V4).tolist())]


def _plain_properties(blk: MessageBlock) -> np.ndarray:
    """Records whose PROPERTIES the flat split reproduces (:meth:`Properties.simple`, and no
    NUL, which ends a record's text below)."""
    P = blk.properties
    plain = P.simple()
    if P.tot:
        plain[P.owners(np.flatnonzero(P.cat == 0))] = False
    return plain


def block_batch(blk: MessageBlock, store: str, body: bool):
    """The export rows of every record of ``blk`` (schema: :func:`~rmqstore_cli.pipeline.schema.arrow_schema`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from rmqstore_cli.pipeline.schema import arrow_schema, topic_dir

    schema = arrow_schema()
    rb, n, buf = blk.rb, blk.n, blk.buf
    names, tid = blk.topics
    topic_text = []
    plain = _plain_properties(blk)
    for t in names:
        try:
            topic_text.append(t.decode("utf-8"))
        except UnicodeDecodeError:
            topic_text.append(None)
    bad_topic = np.array([x is None for x in topic_text], bool)
    plain &= ~bad_topic[tid]
    cols: dict = {}
    i32, i64, s = pa.int32(), pa.int64(), pa.string()
    for f, col, typ in (("physical_offset", rb.physical_offset, i64), ("total_size", rb.total, i32),
                        ("body_crc", rb.body_crc, i32), ("queue_id", rb.queue_id, i32), ("flag", blk.flag, i32),
                        ("queue_offset", rb.queue_offset, i64), ("sys_flag", rb.sys_flag, i32),
                        ("born_timestamp", blk.born_timestamp, i64), ("store_timestamp", blk.store_timestamp, i64),
                        ("reconsume_times", blk.reconsume_times, i32),
                        ("prepared_transaction_offset", blk.prepared_transaction_offset, i64),
                        ("body_size", rb.body_len, i32)):
        cols[f] = pa.array(col.astype(np.int32 if typ == i32 else np.int64), typ)
    cols["magic"] = pa.array(["v1", "v2"], s).take(pa.array((rb.magic == MAGIC_V2).astype(np.int8)))
    for w in ("born", "store"):
        table, rows = blk.address_table(w)
        cols[f"{w}_host"] = pc.binary_join_element_wise(pa.array(table, s).take(pa.array(rows)),
                                                        pa.array(blk.host(w)[2]).cast(s), pa.scalar(":"))
    cols["msg_id"] = pa.array(_msg_ids(blk), s)
    cols["file"] = pa.array([blk.file_name] * n, s)
    cols["store"] = pa.array([store] * n, s)
    cols["topic_base64"] = pa.nulls(n, s)
    cols["properties_base64"] = pa.nulls(n, s)
    cols["body"] = pa.array([bytes(buf[x:y]) for x, y in zip(rb.body_at.tolist(), (rb.body_at + rb.body_len).tolist())]
                            if body else [None] * n, pa.binary())
    topic = [topic_text[i] for i in tid.tolist()]
    props = _Properties(blk, plain)
    slow = np.flatnonzero(~plain).tolist()
    if slow:
        b64: list = [None] * n
        t64: list = [None] * n
        for i, m in zip(slow, blk.messages(np.asarray(slow))):
            d = message_dict(m, "none", True, blk.file_name)
            topic[i] = d["topic"]
            props.patch(i, d)
            b64[i], t64[i] = d.get("properties_base64"), d.get("topic_base64")
        cols["properties_base64"] = pa.array(b64, s)
        cols["topic_base64"] = pa.array(t64, s)
    cols["topic"] = pa.array(topic, s)
    t64 = cols["topic_base64"].to_pylist() if slow else [None] * n
    dirs = {}
    cols["topic_dir"] = pa.array([dirs.get((t, b)) or dirs.setdefault((t, b), topic_dir(t, b))
                                  for t, b in zip(topic, t64)], s)
    cols.update(props.columns(schema))
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


class _Properties:
    """The properties columns of a block: pairs of plain records from one split of their
    text; records patched in from the reference (:meth:`patch`) replace theirs."""

    def __init__(self, blk: MessageBlock, plain: np.ndarray):
        n = blk.n
        self.n = n
        self.patched: dict[int, dict] = {}
        k = np.bincount(blk.properties.owner, minlength=n) if blk.properties.tot else np.zeros(n, np.int64)
        self.k = np.where(plain, k, 0)
        text = blk.properties_text(plain).decode("utf-8", "surrogateescape")
        self.strings = text.split("\x00")[:n]
        # a plain record gives name, value, name, value, ...; any other record one empty piece
        flat = np.array(_PAIR_SEPARATORS.split(text.replace("\x02\x00", "\x00")), dtype=object)
        pieces = np.where(self.k > 0, 2 * self.k, 1)
        first = np.cumsum(pieces) - pieces
        owner = np.repeat(np.arange(n), self.k)
        j = np.arange(owner.size) - np.repeat(np.cumsum(self.k) - self.k, self.k)
        name_at = first[owner] + 2 * j
        self.names, self.values, self.owner = flat[name_at], flat[name_at + 1], owner

    def patch(self, i: int, d: dict) -> None:
        self.patched[i] = d

    def columns(self, schema) -> dict:
        import pyarrow as pa
        import pyarrow.compute as pc

        n, s = self.n, pa.string()
        names, values, owner, counts = self.names, self.values, self.owner, self.k.copy()
        strings = self.strings
        if self.patched:  # splice the reference's pairs in, in record order
            rows = sorted(self.patched)
            cut = np.searchsorted(owner, rows)
            parts_n, parts_v, parts_o = [], [], []
            prev = 0
            for i, c in zip(rows, cut.tolist()):
                items = list(self.patched[i]["properties"].items())
                parts_n += [names[prev:c], np.array([x for x, _ in items], dtype=object)]
                parts_v += [values[prev:c], np.array([y for _, y in items], dtype=object)]
                parts_o += [owner[prev:c], np.full(len(items), i)]
                counts[i] = len(items)
                prev = c
            names = np.concatenate(parts_n + [names[prev:]])
            values = np.concatenate(parts_v + [values[prev:]])
            owner = np.concatenate(parts_o + [owner[prev:]]).astype(np.int64)
            strings = list(strings)
            for i in rows:
                strings[i] = self.patched[i].get("properties_string")
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        name_arr, value_arr = pa.array(names, s), pa.array(values, s)
        out = {"properties": pa.MapArray.from_arrays(pa.array(offsets), name_arr, value_arr,
                                                     type=schema.field("properties").type),
               "properties_string": pa.array(strings, s)}
        for col, name in (("tags", "TAGS"), ("uniq_key", "UNIQ_KEY"), ("keys", "KEYS")):
            hit = np.flatnonzero(pc.equal(name_arr, pa.scalar(name)).to_numpy(zero_copy_only=False))
            vals = np.full(n, None, dtype=object)
            vals[owner[hit]] = values[hit]  # plain records hold a name once; patched ones are dicts
            out[col] = pa.array(vals, s)
        words = pc.split_pattern(out.pop("keys"), pattern=" ")
        flat_words = pc.list_flatten(words)
        keep = pc.not_equal(flat_words, pa.scalar(""))
        parent = pc.list_parent_indices(words).to_numpy()
        kept = np.bincount(parent[keep.to_numpy(zero_copy_only=False)], minlength=n)
        koff = np.zeros(n + 1, np.int32)
        np.cumsum(kept, out=koff[1:])
        out["keys"] = pa.ListArray.from_arrays(pa.array(koff), pc.filter(flat_words, keep),
                                               type=schema.field("keys").type)
        return out
