"""dump-commitlog's JSON records for a whole block of messages at once.

:func:`~rmqstore_cli.render.message_dict` + :func:`~rmqstore_cli.render.to_json_bytes` is
the reference: one dict and one orjson call per record, ~15 µs. Here a
:class:`~rmqstore_cli.store.columns.MessageBlock` is rendered column by column: each field
becomes one list of text fragments (numbers through a table of distinct values when
there are few, hosts and topics once per distinct value, PROPERTIES rewritten into a JSON
object by two ``str.replace`` over the whole block), and the lines are made by one
``str.join`` over the interleaved columns. Text is handled as Latin-1 so that every
byte of the store passes through unchanged and indices stay byte offsets.

A record goes this way only when the result is certain to equal the reference: IPv4
hosts, a topic of printable ASCII, well-formed PROPERTIES (each pair ``name\\x01value``
with both non-empty, no name twice) whose text needs no JSON escape and is valid, inert
UTF-8, and KEYS without empty words. Any other record is rendered by the reference, in
its place. Tests compare the two on every record of the fixtures and of hostile stores.
"""
from __future__ import annotations

import base64

import numpy as np

from rmqstore_cli.formats.commitlog import MAGIC_V2, MessageHead
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.render import _UNSAFE_UTF8, message_dict, to_json_bytes
from rmqstore_cli.store.columns import MessageBlock
from rmqstore_cli.store.message import format_host

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_PHY_AT = field_offset(MessageHead, "physical_offset")
_PLAIN = np.zeros(256, bool)
_PLAIN[0x20:0x7F] = True
_PLAIN[[0x22, 0x5C]] = False  # '"' and '\\' need escapes
_PROPS_OK = _PLAIN.copy()
_PROPS_OK[[1, 2]] = True  # the separators, rewritten below
_PROPS_OK[0x80:] = True  # UTF-8, validated per block
_PROPS_OK_BYTES = bytes(np.flatnonzero(_PROPS_OK).tolist())
_MAX_DISTINCT = 0.25


def _ints(col: np.ndarray, few: bool = True) -> list[str]:
    """Decimal text of every value; through a table of distinct values when they may be
    (``few``) and are few."""
    n = col.size
    if few and n > 64:
        u, inv = np.unique(col, return_inverse=True)
        if u.size <= n * _MAX_DISTINCT:
            tab = list(map(str, u.tolist()))
            return list(map(tab.__getitem__, inv.ravel().tolist()))
    return list(map(str, col.tolist()))


def _addresses(blk: MessageBlock, at: np.ndarray, size: np.ndarray) -> list[str]:
    """The host part of DESIGN.md's ``ip:port`` (``[v6]`` for IPv6), once per distinct address."""
    a = blk.a
    rows = np.where(np.arange(16) < size[:, None], a[np.minimum(at[:, None] + np.arange(16), a.size - 1)], 0)
    key = np.c_[rows.astype(np.uint8), size.astype(np.uint8)]
    _, first, inv = np.unique(np.ascontiguousarray(key).view("V17").ravel(), return_index=True, return_inverse=True)
    buf = blk.buf
    tab = [format_host(bytes(buf[x:x + n]), 0).rpartition(":")[0] for x, n in zip(at[first].tolist(), size[first].tolist())]
    return list(map(tab.__getitem__, inv.ravel().tolist()))


def _msg_ids(blk: MessageBlock, t: np.ndarray, store_at: np.ndarray, store_size: np.ndarray) -> list[str]:
    """Offset msgIds in hex: 32 digits for IPv4 store hosts, 56 (one by one) for IPv6."""
    raw = blk.msg_id_bytes(t)
    hexed = np.empty((raw.shape[0], 32), np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 15]
    text = hexed.tobytes().decode("ascii")
    out = [text[i:i + 32] for i in range(0, len(text), 32)]
    buf, at = blk.buf, store_at[t]
    for i in np.flatnonzero(store_size[t] != 4).tolist():
        x, p = int(at[i]), int(blk.pos[t[i]]) + _PHY_AT
        out[i] = (bytes(buf[x:x + 20]) + bytes(buf[p:p + 8])).hex().upper()
    return out


class _Props:
    """The PROPERTIES of a block as JSON text, and which records can use it."""

    def __init__(self, blk: MessageBlock, plain: np.ndarray):
        P = blk.properties
        self.P = P
        plain &= P.simple()
        if not P.tot:
            return
        cat = P.cat
        if cat.tobytes().translate(None, _PROPS_OK_BYTES):  # a byte that needs an escape somewhere
            plain[P.owners(np.flatnonzero(~_PROPS_OK[cat]))] = False
        if P.hp.size:  # non-ASCII: valid UTF-8 (simple) that a terminal cannot act on
            for m in _UNSAFE_UTF8.finditer(cat.tobytes()):
                plain[P.owners(m.start())] = False
        # every record's PROPERTIES with a NUL after each (value ranges below are positions in
        # ``cat`` plus the record number); a NUL inside a record (never a plain one) is masked
        # so that the pieces stay one per record
        raw = blk.properties_text()
        if raw.count(b"\0") != blk.n:
            c = cat.copy()
            c[c == 0] = 0x3F
            raw = np.insert(c, P.mend, 0).tobytes()
        t = self.text = raw.decode("latin-1")
        self.strings = t.replace("\x01", "\\u0001").replace("\x02", "\\u0002").split("\x00")
        self.objects = t.replace("\x02\x00", "\x00").replace("\x01", '":"').replace("\x02", '","').split("\x00")

    def values(self, name: bytes, n: int, fmt: str, absent: str) -> tuple[list[str], np.ndarray]:
        """``fmt`` of the last non-empty ``name`` value of each record (``absent`` without
        one), and the records that have one."""
        m, a, b = self.P.value(name)
        out = [absent] * n
        t = self.text
        for i, x, y in zip(m.tolist(), (a + m).tolist(), (b + m).tolist()):  # a NUL before each record
            out[i] = fmt % t[x:y]
        return out, m

    def keys(self, n: int, plain: np.ndarray) -> list[str]:
        """JSON arrays of KEYS words; records with empty words take the reference path."""
        m, a, b = self.P.value(b"KEYS\x01")
        out = ["[]"] * n
        t = self.text
        for i, x, y in zip(m.tolist(), (a + m).tolist(), (b + m).tolist()):
            k = t[x:y]
            if k[0] == " " or k[-1] == " " or "  " in k:
                plain[i] = False
            out[i] = '["' + k.replace(" ", '","') + '"]'
        return out


def block_lines(blk: MessageBlock, take: np.ndarray, body: str = "none", properties: bool = True) -> str:
    """The JSON lines (Latin-1 text, one ``\\n`` after each) of records ``take`` of ``blk``."""
    n = blk.n
    rb = blk.rb
    plain = np.ones(n, bool)
    names, tid = blk.topics
    topic_ok = np.array([bool(_PLAIN[np.frombuffer(t, np.uint8)].all()) for t in names], bool)
    plain &= topic_ok[tid]
    topic_text = [t.decode("latin-1") for t in names]
    born_at, born_size, born_port = blk.host("born")
    store_at, store_size, store_port = blk.host("store")
    props = _Props(blk, plain)
    keys = props.keys(n, plain) if props.P.tot else ["[]"] * n
    if body == "text":
        plain[:] = False
    sel = take.tolist()
    cols: list[list[str]] = []

    def col(values: list[str]) -> None:
        cols.append(values if len(values) == len(sel) else [values[i] for i in sel])

    def lit(text: str) -> None:
        cols.append([text] * len(sel))

    t = take
    lit('{"physical_offset":'), col(_ints(rb.physical_offset[t], few=False))
    lit(',"total_size":'), col(_ints(rb.total[t]))
    lit(',"magic":"'), cols.append(["v2" if m == MAGIC_V2 else "v1" for m in rb.magic[t].tolist()])
    lit('","body_crc":'), col(_ints(rb.body_crc[t], few=False))
    lit(',"queue_id":'), col(_ints(rb.queue_id[t]))
    lit(',"flag":'), col(_ints(blk.flag[t]))
    lit(',"queue_offset":'), col(_ints(rb.queue_offset[t], few=False))
    lit(',"sys_flag":'), col(_ints(rb.sys_flag[t]))
    lit(',"born_timestamp":'), col(_ints(blk.born_timestamp[t]))
    lit(',"born_host":"'), col(_addresses(blk, born_at[t], born_size[t])), lit(":"), col(_ints(born_port[t]))
    lit('","store_timestamp":'), col(_ints(blk.store_timestamp[t]))
    lit(',"store_host":"'), col(_addresses(blk, store_at[t], store_size[t])), lit(":"), col(_ints(store_port[t]))
    lit('","reconsume_times":'), col(_ints(blk.reconsume_times[t]))
    lit(',"prepared_transaction_offset":'), col(_ints(blk.prepared_transaction_offset[t]))
    lit(',"topic":"'), col(list(map(topic_text.__getitem__, tid[t].tolist())))
    if properties:
        lit('","properties":{"'), col(props.objects[:n] if props.P.tot else [""] * n)
        lit('"},"properties_string":"'), col(props.strings[:n] if props.P.tot else [""] * n)
        lit('","tags":')
    else:
        lit('","tags":')
    if props.P.tot:
        col(props.values(b"TAGS\x01", n, '"%s"', "null")[0]), lit(',"keys":'), col(keys)
        lit(',"uniq_key":'), col(props.values(b"UNIQ_KEY\x01", n, '"%s"', "null")[0])
    else:
        lit("null"), lit(',"keys":[]'), lit(',"uniq_key":null')
    lit(',"msg_id":"'), col(_msg_ids(blk, t, store_at, store_size))
    lit('","body_size":'), col(_ints(rb.body_len[t]))
    if body != "none":
        lit(',"body":"'), col(_bodies(blk, t, body)), lit(f'","body_encoding":"{body}"')
    lit(f',"file":"{blk.file_name}"}}\n')
    k = len(cols)
    parts: list[str] = [""] * (k * len(sel))
    for j, c in enumerate(cols):
        parts[j::k] = c
    slow = np.flatnonzero(~plain[t]).tolist()
    if slow:
        msgs = blk.messages(t[slow])
        for r, m in zip(slow, msgs):
            line = to_json_bytes(message_dict(m, body, properties, blk.file_name)).decode("latin-1") + "\n"
            parts[r * k:(r + 1) * k] = [line] + [""] * (k - 1)
    return "".join(parts)


def _bodies(blk: MessageBlock, t: np.ndarray, mode: str) -> list[str]:
    buf = blk.buf
    a, b = blk.rb.body_at[t].tolist(), (blk.rb.body_at + blk.rb.body_len)[t].tolist()
    if mode == "base64":
        enc = base64.b64encode
        return [enc(buf[x:y]).decode("ascii") for x, y in zip(a, b)]
    return [buf[x:y].hex() for x, y in zip(a, b)]

