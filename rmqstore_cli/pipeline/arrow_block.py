"""Export rows for a whole block of messages at once, as a pyarrow RecordBatch.

The reference is :func:`~rmqstore_cli.pipeline.export_tasks.export_rows`: one
:func:`~rmqstore_cli.render.message_dict` per record. Here the columns of a
:class:`~rmqstore_cli.store.columns.MessageBlock` become Arrow arrays directly: numbers
without a Python object per value, hosts and topics once per distinct value, and the
PROPERTIES of the block cut into names and values where
:class:`~rmqstore_cli.store.properties.Properties` found its pairs, Arrow strings over
the bytes themselves (no Python object per value).

That cut is exact for *plain* PROPERTIES — valid UTF-8, every pair ``name\\x01value``
with both non-empty, no name twice — where the broker's parser keeps every pair in
order. Any other record (and a topic that is not valid UTF-8) takes the reference path in
its place. Tests compare both on every record of the fixtures and of built stores.
"""
from __future__ import annotations

import numpy as np

from rmqstore_cli.formats.commitlog import HEAD, HOST_ADDRESS_SIZE, HOST_SIZE, MAGIC_V2
from rmqstore_cli.render import message_dict
from rmqstore_cli.store.arrays import byte_rows
from rmqstore_cli.store.columns import MessageBlock

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_PHY = HEAD["physical_offset"]
#: an offset msgId: the store host (address and port) then PHYSICALOFFSET, for each kind
_ID_V4, _ID_V6 = HOST_SIZE[False] + _PHY.size, HOST_SIZE[True] + _PHY.size


def _msg_ids(blk: MessageBlock):
    """``MessageDecoder#createMessageId`` of every record, upper-case hex: store address,
    port and the stored PHYSICALOFFSET (32 digits for IPv4 store hosts, 56 for IPv6), as a
    pyarrow string array cut from one buffer of hex digits."""
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
    w = hexed.shape[1]
    rows = np.arange(blk.n + 1) * w
    if not v6.any():
        return _strings(hexed.ravel(), rows)
    cuts = np.empty(2 * blk.n + 1, np.int64)  # row i: its left padding, then its digits
    cuts[0::2], cuts[1::2] = rows, rows[1:] - np.where(v6, 2 * _ID_V6, 2 * _ID_V4)
    return _strings(hexed.ravel(), cuts).take(numbers(np.arange(1, 2 * blk.n, 2)))


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
        cols[f] = numbers(col.astype(np.int32 if typ == i32 else np.int64), typ)
    cols["magic"] = texts(["v1", "v2"]).take(numbers((rb.magic == MAGIC_V2).astype(np.int8)))
    colon = texts([":"])[0]
    for w in ("born", "store"):
        table, rows = blk.address_table(w)
        cols[f"{w}_host"] = pc.binary_join_element_wise(texts(table).take(numbers(rows)),
                                                        numbers(blk.host(w)[2]).cast(s), colon)
    cols["msg_id"] = _msg_ids(blk)
    same = np.zeros(n, np.int8)
    cols["file"] = texts([blk.file_name]).take(numbers(same))
    cols["store"] = texts([store]).take(numbers(same))
    cols["topic_base64"] = pa.nulls(n, s)
    cols["properties_base64"] = pa.nulls(n, s)
    ends = (rb.body_at + rb.body_len).tolist()
    cols["body"] = (texts([bytes(buf[x:y]) for x, y in zip(rb.body_at.tolist(), ends)], pa.binary()) if body
                    else pa.nulls(n, pa.binary()))
    props = _Properties(blk, plain)
    slow = np.flatnonzero(~plain).tolist()
    dicts = [message_dict(m, "none", True, blk.file_name) for m in blk.messages(np.asarray(slow))] if slow else []
    for i, d in zip(slow, dicts):
        props.patch(i, d)
    t64 = [d.get("topic_base64") for d in dicts]
    tids = numbers(tid)
    cols["topic"] = _replace(texts(topic_text).take(tids), slow, [d["topic"] for d in dicts])
    cols["topic_base64"] = _replace(cols["topic_base64"], slow, t64)
    cols["properties_base64"] = _replace(cols["properties_base64"], slow, [d.get("properties_base64") for d in dicts])
    dirs = texts([None if t is None else topic_dir(t, None) for t in topic_text]).take(tids)
    cols["topic_dir"] = _replace(dirs, slow, [topic_dir(d["topic"], b) for d, b in zip(dicts, t64)])
    cols.update(props.columns(schema))
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


def numbers(a: np.ndarray, typ=None, mask: np.ndarray | None = None):
    """An Arrow array of numpy integers over their own buffer (null where ``mask``). Export
    builds its arrays with this, :func:`texts` and :func:`flags`, never ``pa.array``: that
    imports pandas (~0.35 s CPU, a third of a small export) to ask whether its argument is a
    pandas object (as do ``pa.scalar`` and ``to_numpy(zero_copy_only=False)``)."""
    import pyarrow as pa

    a = np.ascontiguousarray(a)
    valid = None if mask is None or not mask.any() else flags(~mask).buffers()[1]
    return pa.Array.from_buffers(typ or pa.from_numpy_dtype(a.dtype), a.size, [valid, pa.py_buffer(a)])


def as_numpy(arr, dtype) -> np.ndarray:
    """The values of an Arrow integer array without nulls as ``dtype``, a view of its buffer
    where the types agree (``to_numpy`` imports pandas: see :func:`numbers`)."""
    import pyarrow as pa

    if not len(arr):
        return np.zeros(0, dtype)
    typ = pa.from_numpy_dtype(np.dtype(dtype))
    if arr.type != typ:
        arr = arr.cast(typ)
    return np.frombuffer(arr.buffers()[1], dtype)[arr.offset:arr.offset + len(arr)]


def flags(mask: np.ndarray):
    """An Arrow boolean array of a numpy bool array (bits packed as Arrow lays them out)."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.bool_(), mask.size, [None, pa.py_buffer(np.packbits(mask, bitorder="little"))])


def texts(values: list, typ=None):
    """An Arrow string (or ``typ``: binary) array of Python str or bytes values, None for null."""
    import pyarrow as pa

    raw = [b"" if v is None else v if isinstance(v, bytes) else v.encode("utf-8") for v in values]
    offsets = np.zeros(len(raw) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, raw), np.int64, len(raw)), out=offsets[1:])
    offsets = offsets.astype(np.int32)  # a block lies in one commit-log file: under 2 GiB
    nulls = np.array([v is None for v in values], bool)
    valid = flags(~nulls).buffers()[1] if nulls.any() else None
    return pa.Array.from_buffers(typ or pa.string(), len(raw), [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])


def _strings(data: np.ndarray, offsets: np.ndarray):
    """A pyarrow string array over ``data`` without a Python object per value: element i is
    ``data[offsets[i]:offsets[i + 1]]`` (valid UTF-8 wherever it is read)."""
    import pyarrow as pa

    return pa.StringArray.from_buffers(offsets.size - 1, pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(data))


def _replace(arr, rows: list[int], values: list):
    """``arr`` with ``arr[rows[k]] = values[k]`` (rows ascending)."""
    import pyarrow.compute as pc

    if not rows:
        return arr
    mask = np.zeros(len(arr), bool)
    mask[rows] = True
    return pc.replace_with_mask(arr, flags(mask), texts(values, arr.type))


class _Properties:
    """The properties columns of a block, straight from the PROPERTIES bytes of its plain
    records (:class:`~rmqstore_cli.store.properties.Properties` found the pairs): names and
    values are pieces of those bytes taken by Arrow, no Python string per pair; records
    patched in from the reference (:meth:`patch`) replace theirs."""

    def __init__(self, blk: MessageBlock, plain: np.ndarray):
        import pyarrow as pa

        n = blk.n
        self.n = n
        self.patched: dict[int, dict] = {}
        P = blk.properties
        if not P.tot:
            self.text = pa.nulls(n, pa.string())
            self.names = self.values = texts([])
            self.owner = np.zeros(0, np.int64)
            return
        self.text = _strings(P.cat, np.append(P.moff, P.tot))
        # every pair as four pieces: name, its \x01, value, what follows up to the next pair
        # (its \x02, or nothing); clipped so that malformed pairs still give ordered offsets
        name_end = np.clip(P.first1, P.starts, P.end)
        cuts = np.empty(4 * P.starts.size + 1, np.int64)
        cuts[0:-1:4], cuts[1:-1:4] = P.starts, name_end
        cuts[2:-1:4], cuts[3:-1:4], cuts[-1] = np.minimum(name_end + 1, P.end), P.end, P.tot
        pieces = _strings(P.cat, cuts)
        keep = np.flatnonzero(plain[P.owner])
        self.names, self.values = pieces.take(numbers(4 * keep)), pieces.take(numbers(4 * keep + 2))
        self.owner = P.owner[keep]

    def patch(self, i: int, d: dict) -> None:
        self.patched[i] = d

    def columns(self, schema) -> dict:
        import pyarrow as pa
        import pyarrow.compute as pc

        n, s = self.n, pa.string()
        names, values, owner = self.names, self.values, self.owner
        if self.patched:  # splice the reference's pairs in, in record order
            rows = sorted(self.patched)
            cut = np.searchsorted(owner, rows)
            parts_n, parts_v, parts_o = [], [], []
            prev = 0
            for i, c in zip(rows, cut.tolist()):
                items = list(self.patched[i]["properties"].items())
                parts_n += [names.slice(prev, c - prev), texts([x for x, _ in items])]
                parts_v += [values.slice(prev, c - prev), texts([y for _, y in items])]
                parts_o += [owner[prev:c], np.full(len(items), i)]
                prev = c
            names = pa.concat_arrays(parts_n + [names.slice(prev)])
            values = pa.concat_arrays(parts_v + [values.slice(prev)])
            owner = np.concatenate(parts_o + [owner[prev:]]).astype(np.int64)
        text = _replace(self.text, sorted(self.patched), [self.patched[i].get("properties_string")
                                                          for i in sorted(self.patched)])
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
        out = {"properties": pa.MapArray.from_arrays(numbers(offsets), names, values,
                                                     type=schema.field("properties").type),
               "properties_string": text}
        for col, name in (("tags", "TAGS"), ("uniq_key", "UNIQ_KEY"), ("keys", "KEYS")):
            hit = as_numpy(pc.indices_nonzero(pc.equal(names, texts([name])[0])), np.int64)
            at = np.full(n, -1, np.int64)
            at[owner[hit]] = hit  # plain records hold a name once; patched ones are dicts
            out[col] = values.take(numbers(at, mask=at < 0))
        words = pc.split_pattern(out.pop("keys"), pattern=" ")
        flat_words = pc.list_flatten(words)
        keep = pc.not_equal(flat_words, texts([""])[0])
        parent = as_numpy(pc.list_parent_indices(words), np.int64)
        kept = np.bincount(parent[as_numpy(pc.indices_nonzero(keep), np.int64)], minlength=n)
        koff = np.zeros(n + 1, np.int32)
        np.cumsum(kept, out=koff[1:])
        out["keys"] = pa.ListArray.from_arrays(numbers(koff), pc.filter(flat_words, keep),
                                               type=schema.field("keys").type)
        return out
