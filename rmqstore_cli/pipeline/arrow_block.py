"""Export rows for a whole block of messages at once, as a pyarrow RecordBatch.

The reference is :func:`~rmqstore_cli.pipeline.export_tasks.export_rows`: one
:func:`~rmqstore_cli.store.records.message_view.message_dict` per record. Here the columns of a
:class:`~rmqstore_cli.store.commitlog.columns.MessageBlock` become Arrow arrays directly: numbers
without a Python object per value, topics once per distinct value, the hosts and msgIds
written by C loops straight from the mapped log into Arrow buffers (``host_texts``,
``hex_ranges``; their twins in :mod:`~rmqstore_cli.store.records.texts`), and the
PROPERTIES of the block cut into names, values, TAGS, UNIQ_KEY and KEYS words by one C pass
over the mapped log (``prop_split``), Arrow strings over the bytes themselves (no Python
object per value). Every string column is built as byte ranges of one buffer joined at once
(:func:`ranges`, the engine's C ``join_ranges``): no Arrow ``take`` or compute kernel per
column (they cost several times more, and ``pyarrow.compute`` is ~40 ms to import).

That cut is exact for *plain* PROPERTIES — valid UTF-8, no NUL, no name kept twice — where
the broker's parser (``string2messageProperties``: parts between ``\\x02``, cut at the first
``\\x01``, empty names and values dropped) keeps every pair in order. Any other record (and a
topic that is not valid UTF-8) takes the reference path in its place. Tests compare both on
every record of the fixtures and of built stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rmqstore_cli.formats import properties as pf
from rmqstore_cli.formats.commitlog import HEAD, MAGIC_V2, PORT
from rmqstore_cli.store.commitlog.columns import MessageBlock
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.records import texts as texts_twin
from rmqstore_cli.store.records.message import address_text
from rmqstore_cli.store.records.message_view import message_dict
from rmqstore_cli.store.records.properties import compiled_join
from rmqstore_cli.store.records.texts import HOST_MAX

_PHY = HEAD["physical_offset"]
#: ``prop_split``'s separators (name/value, pair, KEYS words) and names (TAGS, KEYS, UNIQ_KEY).
_SEPS = np.frombuffer((pf.NAME_VALUE_SEPARATOR + pf.PROPERTY_SEPARATOR + pf.KEY_SEPARATOR).encode(), np.uint8)
_NAMES = tuple(x.encode() for x in (pf.PROPERTY_TAGS, pf.PROPERTY_KEYS, pf.PROPERTY_UNIQ_KEY))


def _loop(name: str):
    """The C loop ``name`` (:mod:`~rmqstore_cli.store.files.kernels`), or its twin of the same
    name (:mod:`~rmqstore_cli.store.records.texts`) on the reference path."""
    kern = FAST_PATHS.kernels()
    return getattr(texts_twin if kern is None else kern, name)


def _msg_ids(blk: MessageBlock):
    """``MessageDecoder#createMessageId`` of every record, upper-case hex: store address,
    port and the stored PHYSICALOFFSET (32 digits for IPv4 store hosts, 56 for IPv6), as a
    pyarrow string array: each record's host and offset bytes hexed one after another, one
    C call for the block (``hex_ranges``)."""
    store_at, store_size, _ = blk.host("store")
    at, ln = np.empty((blk.n, 2), np.int64), np.empty((blk.n, 2), np.int64)
    at[:, 0], ln[:, 0] = store_at, store_size + PORT.size
    at[:, 1], ln[:, 1] = blk.pos + _PHY.offset, _PHY.size
    out, offsets = np.empty(2 * int(ln.sum()), np.uint8), np.empty(blk.n + 1, np.int32)
    _loop("hex_ranges")(blk.a, at.ravel(), ln.ravel(), out, offsets)
    return _strings(out, offsets)


def _hosts(blk: MessageBlock, which: str):
    """``ip:port`` of every record's born or store host (DESIGN.md's host fields), one C call
    for the block (``host_texts``); a block with an IPv4-mapped IPv6 address (rare) record by
    record, as the record layer writes it."""
    at, size, port = (np.ascontiguousarray(x, np.int64) for x in blk.host(which))
    out, offsets = np.empty(blk.n * HOST_MAX, np.uint8), np.empty(blk.n + 1, np.int32)
    got = _loop("host_texts")(blk.a, at, size, port, out, offsets)
    if got < 0:
        a = blk.a
        return texts(
            [
                f"{address_text(bytes(a[p : p + s]))}:{q}"
                for p, s, q in zip(at.tolist(), size.tolist(), port.tolist(), strict=True)
            ]
        )
    return _strings(out[:got].copy(), offsets)


def block_batch(blk: MessageBlock, store: str, body: bool):
    """The export rows of every record of ``blk`` (schema: :func:`~rmqstore_cli.pipeline.schema.arrow_schema`)."""
    return _block(blk, store, body)[0]


@dataclass
class Parted:
    """A batch whose rows come as runs of one partition each (``store``, ``topic_dir``), no two
    runs of the same partition: ``keys[k]`` the partition of rows ``cuts[k]:cuts[k + 1]``. What
    the Parquet writer would otherwise find by dictionary-encoding both columns of every row
    (:class:`~rmqstore_cli.pipeline.parquet_out.PartitionedWriter`)."""

    batch: Any
    keys: list[tuple]
    cuts: list[int]

    @property
    def num_rows(self) -> int:
        return self.batch.num_rows


def block_parts(blk: MessageBlock, store: str, body: bool) -> Any:
    """:func:`block_batch` of ``blk`` whose records are grouped by topic
    (:func:`~rmqstore_cli.pipeline.export_tasks.by_topic`), as a :class:`Parted` with one run
    per topic; the bare batch when its partitions are not known from the topics alone (a record
    of the reference path, whose topic or ``topic_dir`` may differ) or two topics share one."""
    batch, slow, dirs = _block(blk, store, body)
    tid = blk.topics[1]
    if slow or not tid.size:
        return batch
    heads = [0] + (np.flatnonzero(tid[1:] != tid[:-1]) + 1).tolist()
    keys = [(store, dirs[t]) for t in tid[heads].tolist()]
    if len(set(keys)) < len(keys):
        return batch
    return Parted(batch, keys, heads + [tid.size])


def _block(blk: MessageBlock, store: str, body: bool) -> tuple[Any, bool, list]:
    """(:func:`block_batch`, whether a record took the reference path, each topic's
    ``topic_dir`` by topic id)."""
    import pyarrow as pa

    from rmqstore_cli.pipeline.schema import arrow_schema, topic_dir

    schema = arrow_schema()
    rb, n, buf = blk.rb, blk.n, blk.buf
    names, tid = blk.topics
    topic_text = []
    for t in names:
        try:
            topic_text.append(t.decode("utf-8"))
        except UnicodeDecodeError:
            topic_text.append(None)
    bad_topic = np.array([x is None for x in topic_text], bool)
    props = _Properties(blk, ~bad_topic[tid])
    plain = props.plain
    cols: dict = {}
    i32, i64, s = pa.int32(), pa.int64(), pa.string()
    ms = schema.field("store_timestamp").type  # epoch milliseconds, as they are stored
    for f, col, typ in (
        ("physical_offset", rb.physical_offset, i64),
        ("total_size", rb.total, i32),
        ("body_crc", rb.body_crc, i32),
        ("queue_id", rb.queue_id, i32),
        ("flag", blk.flag, i32),
        ("queue_offset", rb.queue_offset, i64),
        ("sys_flag", rb.sys_flag, i32),
        ("born_timestamp", blk.born_timestamp, ms),
        ("store_timestamp", blk.store_timestamp, ms),
        ("reconsume_times", blk.reconsume_times, i32),
        ("prepared_transaction_offset", blk.prepared_transaction_offset, i64),
        ("body_size", rb.body_len, i32),
    ):
        cols[f] = numbers(col.astype(np.int32 if typ == i32 else np.int64, copy=False), typ)
    cols["magic"] = lookup(["v1", "v2"], (rb.magic == MAGIC_V2).astype(np.int64))
    for w in ("born", "store"):
        cols[f"{w}_host"] = _hosts(blk, w)
    cols["msg_id"] = _msg_ids(blk)
    same = np.zeros(n, np.int64)
    cols["file"] = lookup([blk.file_name], same)
    cols["store"] = lookup([store], same)
    cols["topic_base64"] = pa.nulls(n, s)
    cols["properties_base64"] = pa.nulls(n, s)
    cols["body"] = (
        texts(
            [bytes(buf[x:y]) for x, y in zip(rb.body_at.tolist(), (rb.body_at + rb.body_len).tolist(), strict=True)],
            pa.binary(),
        )
        if body
        else pa.nulls(n, pa.binary())
    )
    slow = np.flatnonzero(~plain).tolist()
    dicts = [message_dict(m, "none", True, blk.file_name) for m in blk.messages(np.asarray(slow))] if slow else []
    for i, d in zip(slow, dicts, strict=True):
        props.patch(i, d)
    t64 = [d.get("topic_base64") for d in dicts]
    cols["topic"] = _replace(lookup(topic_text, tid), slow, [d["topic"] for d in dicts])
    cols["topic_base64"] = _replace(cols["topic_base64"], slow, t64)
    cols["properties_base64"] = _replace(cols["properties_base64"], slow, [d.get("properties_base64") for d in dicts])
    dirs = [None if t is None else topic_dir(t, None) for t in topic_text]
    patched = [topic_dir(d["topic"], b) for d, b in zip(dicts, t64, strict=True)]
    cols["topic_dir"] = _replace(lookup(dirs, tid), slow, patched)
    cols.update(props.columns(schema))
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema), bool(slow), dirs


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
    # its own integer type, then numpy's astype: ``cast`` imports pyarrow.compute (~40 ms)
    own = {pa.from_numpy_dtype(t): t for t in (np.int8, np.int16, np.int32, np.int64)}[arr.type]
    return np.frombuffer(arr.buffers()[1], own)[arr.offset : arr.offset + len(arr)].astype(dtype, copy=False)


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
    return pa.Array.from_buffers(
        typ or pa.string(), len(raw), [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))]
    )


def ranges(src: np.ndarray, at: np.ndarray, ln: np.ndarray, mask: np.ndarray | None = None):
    """A pyarrow string array whose element i is the bytes ``src[at[i]:at[i] + ln[i]]``
    (null where ``mask``; with (n, k) ``at`` and ``ln``, its k ranges one after another):
    what ``take`` of a string array gives, as one join of byte ranges
    (the C loop, :func:`~rmqstore_cli.store.records.properties.compiled_join`; a numpy gather on the
    reference path), several times cheaper than Arrow's per-element take."""
    import pyarrow as pa

    at, ln = np.ascontiguousarray(at, np.int64), np.ascontiguousarray(ln, np.int64)
    if mask is not None:
        at, ln = np.where(mask, 0, at), np.where(mask, 0, ln)
    data = _join(src, at.ravel(), ln.ravel())
    per = ln.sum(axis=1) if ln.ndim == 2 else ln
    offsets = np.zeros(per.size + 1, np.int32)  # a block lies in one commit-log file: under 2 GiB
    np.cumsum(per, out=offsets[1:])
    valid = flags(~mask).buffers()[1] if mask is not None and mask.any() else None
    return pa.StringArray.from_buffers(per.size, pa.py_buffer(offsets), pa.py_buffer(data), valid)


def _join(src: np.ndarray, at: np.ndarray, ln: np.ndarray) -> np.ndarray:
    """The byte ranges ``src[at[i]:at[i] + ln[i]]`` one after another (int64 ``at``, ``ln``):
    the C loop, or a numpy gather where it is not built."""
    data = compiled_join(src, at, ln)
    if data is None:
        data = src[np.repeat(at - (np.cumsum(ln) - ln), ln) + np.arange(int(ln.sum()))]
    return data


def lookup(values: list, idx: np.ndarray):
    """``texts(values).take(idx)`` (str, bytes or None values; ``idx`` int64), through
    :func:`ranges`: a column of few distinct values (topics, hosts) without Arrow's take."""
    raw = [b"" if v is None else v if isinstance(v, bytes) else v.encode("utf-8") for v in values]
    if len(values) == 1 and values[0] is not None:  # one value (file, store): repeated, no ranges
        return _strings(np.frombuffer(raw[0] * idx.size, np.uint8), np.arange(idx.size + 1) * len(raw[0]))
    ln = np.fromiter(map(len, raw), np.int64, len(raw))
    nulls = np.array([v is None for v in values], bool)
    src = np.frombuffer(b"".join(raw), np.uint8)
    return ranges(src, (np.cumsum(ln) - ln)[idx], ln[idx], nulls[idx] if nulls.any() else None)


def _strings(data: np.ndarray, offsets: np.ndarray):
    """A pyarrow string array over ``data`` without a Python object per value: element i is
    ``data[offsets[i]:offsets[i + 1]]`` (valid UTF-8 wherever it is read)."""
    import pyarrow as pa

    return pa.StringArray.from_buffers(
        offsets.size - 1, pa.py_buffer(offsets.astype(np.int32, copy=False)), pa.py_buffer(data)
    )


def _replace(arr, rows: list[int], values: list):
    """``arr`` (a string array of this module, not sliced) with ``arr[rows[k]] = values[k]``
    (rows ascending; str or None values): both as byte ranges of one buffer, one :func:`ranges`."""
    if not rows:
        return arr
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], np.int32)[: n + 1].astype(np.int64)
    null = (
        np.zeros(n, bool)
        if not arr.null_count
        else ~np.unpackbits(np.frombuffer(bufs[0], np.uint8), count=n, bitorder="little").astype(bool)
    )
    old = np.frombuffer(bufs[2], np.uint8)[: off[-1]] if bufs[2] is not None else np.zeros(0, np.uint8)
    raw = [b"" if v is None else v.encode("utf-8") for v in values]
    ln_new = np.fromiter(map(len, raw), np.int64, len(raw))
    at, ln = off[:-1].copy(), np.diff(off)
    at[rows], ln[rows] = off[-1] + np.cumsum(ln_new) - ln_new, ln_new
    null[rows] = [v is None for v in values]
    return ranges(np.concatenate([old, np.frombuffer(b"".join(raw), np.uint8)]), at, ln, null)


class _Properties:
    """The properties columns of a block, straight from the PROPERTIES bytes of its plain
    records in the mapped log: one pass (the C loop ``prop_split``; its twin in
    :mod:`~rmqstore_cli.store.records.texts`) cuts each record's pairs, TAGS, UNIQ_KEY and
    KEYS words as byte ranges, then each column is those ranges joined at once
    (:func:`ranges`), no Python string per pair; records patched in from the reference
    (:meth:`patch`) replace theirs. ``eligible``: the records that may be plain (their topic
    is UTF-8); :attr:`plain` those whose PROPERTIES the cut reproduces."""

    def __init__(self, blk: MessageBlock, eligible: np.ndarray):
        n = blk.n
        self.n, self.src = n, blk.a
        self.patched: dict[int, dict] = {}
        at, ln = (np.ascontiguousarray(x, np.int64) for x in (blk.rb.props_at, blk.rb.props_len))
        self.at, self.ln = at, ln
        tot = int(ln.sum())
        plain = np.ascontiguousarray(eligible, np.uint8)
        self.pairs, self.words = np.empty(n, np.int64), np.empty(n, np.int64)
        self.tags, self.uniq = np.empty((n, 2), np.int64), np.empty((n, 2), np.int64)
        # room for every pair (3 bytes at least: name, separator, value) and KEYS word
        prow, wrow = np.empty((tot // 3 + 1, 4), np.int64), np.empty((tot // 2 + n, 2), np.int64)
        got = _loop("prop_split")(
            blk.a, at, ln, _SEPS, _NAMES, plain, self.pairs, self.words, self.tags, self.uniq, prow, wrow
        )
        self.prow, self.wrow = prow[: got[0]], wrow[: got[1]]
        self.plain = plain.view(bool)

    def patch(self, i: int, d: dict) -> None:
        self.patched[i] = d

    def _pairs(self):
        """(names, values, count) of every record's pairs in record order, patched ones spliced
        in before the record's own (``count[i]``: record i's pairs)."""
        import pyarrow as pa

        names, values = (
            ranges(self.src, self.prow[:, 0], self.prow[:, 1]),
            ranges(self.src, self.prow[:, 2], self.prow[:, 3]),
        )
        if not self.patched:
            return names, values, self.pairs
        rows = sorted(self.patched)
        count = self.pairs.copy()
        cut = (np.cumsum(count) - count)[rows]  # pairs of the records before each patched one
        parts_n, parts_v = [], []
        prev = 0
        for i, c in zip(rows, cut.tolist(), strict=True):
            items = list(self.patched[i]["properties"].items())
            parts_n += [names.slice(prev, c - prev), texts([x for x, _ in items])]
            parts_v += [values.slice(prev, c - prev), texts([y for _, y in items])]
            count[i] += len(items)
            prev = c
        return pa.concat_arrays(parts_n + [names.slice(prev)]), pa.concat_arrays(parts_v + [values.slice(prev)]), count

    def columns(self, schema) -> dict:
        import pyarrow as pa

        n = self.n
        names, values, count = self._pairs()
        rows = sorted(self.patched)
        text = _replace(
            ranges(self.src, self.at, self.ln), rows, [self.patched[i].get("properties_string") for i in rows]
        )
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(count, out=offsets[1:])
        out = {
            "properties": pa.MapArray.from_arrays(
                numbers(offsets), names, values, type=schema.field("properties").type
            ),
            "properties_string": text,
        }
        for col, where in (("tags", self.tags), ("uniq_key", self.uniq)):
            got = ranges(self.src, where[:, 0], where[:, 1], where[:, 0] < 0)
            out[col] = _replace(got, rows, [self.patched[i].get(col) for i in rows])
        out["keys"] = self._keys(schema)
        return out

    def _keys(self, schema):
        """The KEYS column: each record's KEYS words (``split_keys``, as ``IndexService#buildIndex``
        splits them, cut by ``prop_split``), patched records' from their dicts."""
        import pyarrow as pa

        flat = ranges(self.src, self.wrow[:, 0], self.wrow[:, 1])
        count = self.words
        if self.patched:
            from rmqstore_cli.store.files.arrays import stable_argsort

            w_owner = np.repeat(np.arange(self.n), self.words)
            extra = [(i, w) for i in sorted(self.patched) for w in self.patched[i].get("keys") or []]
            w_owner = np.concatenate([w_owner, np.array([i for i, _ in extra], np.int64)])
            order = stable_argsort(w_owner)
            flat = pa.concat_arrays([flat, texts([w for _, w in extra])]).take(numbers(order))
            count = np.bincount(w_owner, minlength=self.n)
        koff = np.zeros(self.n + 1, np.int32)
        np.cumsum(count, out=koff[1:])
        return pa.ListArray.from_arrays(numbers(koff), flat, type=schema.field("keys").type)
