"""dump-commitlog's JSON records for a whole block of messages at once.

:func:`~rmqstore_cli.render.message_dict` + :func:`~rmqstore_cli.render.to_json_bytes` is
the reference: one dict and one orjson call per record, ~15 µs. Even one Python string per
field costs more than the 5 µs a record the issue allows, so here no Python object is made
per record: a line is a row of *segments* (:class:`_Line`), each a byte range per record
of some source array — the field names between values, the digits of a number column
(made four at a time from a table), a row of a table of distinct values (hosts, topics),
the block's PROPERTIES rewritten into JSON by a few ``bytes.replace`` over the whole block.
Rendering copies every segment into one matrix (a row per record, a column range per
segment, as wide as the longest value) and keeps the bytes each record uses with one
boolean mask: a few numpy passes over the output bytes.

A record goes this way only when the result is certain to equal the reference: a topic of
printable ASCII, PROPERTIES empty or well formed (each pair ``name\\x01value`` with both
non-empty, no name twice) whose text needs no JSON escape and is valid, inert UTF-8, and
KEYS without empty words. Any other record is rendered by the reference, in its place.
Tests compare the two on every record of the fixtures and of hostile stores.
"""
from __future__ import annotations

import base64

import numpy as np

from rmqstore_cli.formats.commitlog import MAGIC_V2, MessageHead
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.render import _UNSAFE_UTF8, message_dict, to_json_bytes
from rmqstore_cli.store.batch import byte_rows
from rmqstore_cli.store.columns import MessageBlock
from rmqstore_cli.store.message import format_host

_HEX = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_HEX_LOWER = np.frombuffer(b"0123456789abcdef", np.uint8)
_PHY_AT = field_offset(MessageHead, "physical_offset")
_PLAIN = np.zeros(256, bool)
_PLAIN[0x20:0x7F] = True
_PLAIN[[0x22, 0x5C]] = False  # '"' and '\\' need escapes
_PROPS_OK = _PLAIN.copy()
_PROPS_OK[[1, 2]] = True  # the separators, rewritten below
_PROPS_OK[0x80:] = True  # UTF-8, validated per block
_PROPS_OK_BYTES = bytes(np.flatnonzero(_PROPS_OK).tolist())
_POW10 = np.array([10 ** k for k in range(1, 20)], np.uint64)
#: "0000" … "9999" as little-endian uint32s: four digits per table look-up
_DIGITS4 = np.frombuffer(b"".join(b"%04d" % i for i in range(10000)), np.uint32)
_COLUMNS = np.arange(1 << 12)
#: bytes of the segment matrix rendered at once (rows are split to stay under it)
MATRIX_BYTES = 2 << 20


def _padded(a: np.ndarray, extra: int) -> np.ndarray:
    """``a`` followed by ``extra`` zero bytes, so that every window of a segment lies inside."""
    out = np.zeros(a.size + extra, np.uint8)
    out[:a.size] = a
    return out


def _columns(w: int) -> np.ndarray:
    return _COLUMNS[:w] if w <= _COLUMNS.size else np.arange(w)


def _windows(src: np.ndarray, w: int) -> np.ndarray:
    """Every ``w``-byte window of ``src`` (a view; ``sliding_window_view`` without its checks,
    which cost more than the copy of a small segment)."""
    return np.ndarray((src.size - w + 1, w), np.uint8, src, 0, (1, 1))


def _digits(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The decimal text of each int64 of ``v``: a matrix with the text right-aligned in each
    row (a '-' before negative numbers), and each text's length."""
    v = np.asarray(v, np.int64)
    n = v.size
    neg = v < 0
    x = v.astype(np.uint64)
    if neg.any():
        x = np.where(neg, ~x + np.uint64(1), x)  # the magnitude; 2**63 for Long.MIN_VALUE
    length = np.searchsorted(_POW10, x, "right") + 1
    k = (int(length.max()) + 3) // 4 if n else 1
    rows = np.empty((n, k + 1), np.uint32)  # a first word for the sign
    for j in range(k, 0, -1):
        q = x // np.uint64(10000)
        rows[:, j] = _DIGITS4[(x - q * np.uint64(10000)).astype(np.intp)]
        x = q
    m = rows.view(np.uint8).reshape(n, 4 * k + 4)
    if neg.any():
        length = length + neg
        m[neg, m.shape[1] - length[neg]] = ord("-")
    return m, length


LIT, LEFT, RIGHT = range(3)


class _Line:
    """A JSON line as a row of segments, rendered for many records at once.

    A segment is a literal (the same bytes for every record), a byte range of a source
    array per record (LEFT: ``start``, ``length``; sources are padded so that a window as
    wide as the longest value stays inside from any start), or a matrix with a row per
    record holding its value right-aligned (RIGHT: numbers; copied without a gather)."""

    def __init__(self) -> None:
        self.segments: list[tuple[int, np.ndarray, np.ndarray | None, np.ndarray | int]] = []
        self._literal = b""

    def lit(self, text: bytes) -> None:
        self._literal += text

    def _end_literal(self) -> None:
        if self._literal:
            self.segments.append((LIT, np.frombuffer(self._literal, np.uint8), None, len(self._literal)))
            self._literal = b""

    def ranges(self, src: np.ndarray, start: np.ndarray, length: np.ndarray) -> None:
        self._end_literal()
        self.segments.append((LEFT, src, start, length))

    def rows(self, matrix: np.ndarray, length: np.ndarray) -> None:
        """A value per record, right-aligned in its row of ``matrix``."""
        self._end_literal()
        self.segments.append((RIGHT, matrix, None, length))

    def number(self, v: np.ndarray) -> None:
        self.rows(*_digits(v))

    def table(self, values: list[bytes], idx: np.ndarray) -> None:
        """Row ``idx`` of a table of distinct values (hosts, topics, …)."""
        lens = np.array([len(x) for x in values], np.int64)
        width = max(int(lens.max()), 1)
        src = np.zeros((len(values) + 1) * width, np.uint8)
        src[:len(values) * width].reshape(len(values), width)[:] = \
            [np.frombuffer(x.ljust(width, b"\0"), np.uint8) for x in values]
        self.ranges(src, idx.astype(np.int64) * width, lens[idx])

    def text(self, data: bytes, length: np.ndarray) -> None:
        """One value per record, laid end to end in ``data`` (record order)."""
        start = np.cumsum(length) - length
        self.ranges(_padded(np.frombuffer(data, np.uint8), int(length.max()) if length.size else 0), start, length)

    def _rows(self, rows: np.ndarray, n: int):
        self._end_literal()
        if rows.size == n and (n == 0 or int(rows[-1]) == n - 1):  # every record (rows are increasing)
            return self.segments
        return [(k, d[rows] if k == RIGHT else d, None if b is None else b[rows], c if k == LIT else c[rows])
                for k, d, b, c in self.segments]

    def render(self, rows: np.ndarray, n: int) -> bytes:
        """The lines of records ``rows`` (of ``n``)."""
        return b"".join(_render(self._rows(rows, n), 0, rows.size))

    def lengths(self, rows: np.ndarray, n: int) -> np.ndarray:
        """Each rendered record's length in bytes."""
        out = np.zeros(rows.size, np.int64)
        for k, _, _, c in self._rows(rows, n):
            out += c
        return out


def _render(segs, lo: int, hi: int) -> list:
    """Records ``lo:hi`` of the segments, the rows halved until their matrix fits MATRIX_BYTES."""
    if hi == lo:
        return [b""]
    widths = [c if k == LIT else int(c[lo:hi].max()) for k, _, _, c in segs]
    total = sum(widths)
    if total * (hi - lo) > MATRIX_BYTES and hi - lo > 1:
        mid = (lo + hi) // 2
        return _render(segs, lo, mid) + _render(segs, mid, hi)
    m = np.empty((hi - lo, total), np.uint8)
    keep = None
    at = 0
    for (kind, d, b, c), w in zip(segs, widths):
        if not w:
            continue
        if kind == LIT:
            m[:, at:at + w] = d
            at += w
            continue
        if kind == LEFT:
            m[:, at:at + w] = _windows(d, w)[b[lo:hi]]
        else:
            m[:, at:at + w] = d[lo:hi, d.shape[1] - w:]
        cl = c[lo:hi]
        if int(cl.min()) < w:
            if keep is None:
                keep = np.ones((hi - lo, total), bool)
            if w == 1:  # an optional quote: one column
                keep[:, at] = cl
            elif kind == LEFT:
                np.less(_columns(w), cl[:, None], out=keep[:, at:at + w])
            else:
                np.greater_equal(_columns(w), (w - cl)[:, None], out=keep[:, at:at + w])
        at += w
    return [m.data if keep is None else m[keep].data]


_HOSTS: dict[bytes, str] = {}  # address bytes → text, kept across blocks (a store has few hosts)


def _address_table(blk: MessageBlock, at: np.ndarray, size: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The host part of DESIGN.md's ``ip:port`` (``[v6]`` for IPv6) of each distinct address,
    and each record's row in that table."""
    a, buf = blk.a, blk.buf
    v6 = size != 4
    inv = np.empty(size.size, np.int64)
    tab: list[str] = []
    for rows, width in ((np.flatnonzero(~v6), 4), (np.flatnonzero(v6), 16)):
        if not rows.size:
            continue
        key = np.ascontiguousarray(byte_rows(a, at[rows], width)).view(">u4" if width == 4 else "V16").ravel()
        _, first, got = np.unique(key, return_index=True, return_inverse=True)
        inv[rows] = got.ravel() + len(tab)
        for x in at[rows[first]].tolist():
            raw = bytes(buf[x:x + width])
            text = _HOSTS.get(raw)
            if text is None:
                if len(_HOSTS) > 1 << 16:
                    _HOSTS.clear()
                text = _HOSTS[raw] = format_host(raw, 0).rpartition(":")[0]
            tab.append(text)
    return tab, inv


def _addresses(blk: MessageBlock, at: np.ndarray, size: np.ndarray) -> list[str]:
    """Each record's address text (see :func:`_address_table`)."""
    tab, inv = _address_table(blk, at, size)
    return list(map(tab.__getitem__, inv.tolist()))


def _msg_id_hex(blk: MessageBlock, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``MessageDecoder#createMessageId`` of records ``t`` in upper-case hex, right-aligned in
    a row each: 32 digits for IPv4 store hosts, 56 for IPv6."""
    store_at, store_size, _ = blk.host("store")
    v6 = store_size[t] != 4
    if v6.any():
        raw = np.zeros((t.size, 28), np.uint8)
        host, phy = byte_rows(blk.a, store_at[t], 20), byte_rows(blk.a, blk.pos[t] + _PHY_AT, 8)
        raw[~v6, 12:20], raw[v6, :20], raw[:, 20:] = host[~v6, :8], host[v6], phy
    else:
        raw = blk.msg_id_bytes(t)
    hexed = np.empty((t.size, 2 * raw.shape[1]), np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 15]
    return hexed, np.where(v6, 56, 32)


def _msg_ids(blk: MessageBlock, t: np.ndarray, *_unused) -> list[str]:
    """Offset msgIds of records ``t`` as text."""
    hexed, length = _msg_id_hex(blk, t)
    text = hexed.tobytes().decode("ascii")
    w = hexed.shape[1]
    return [text[i * w + w - n:i * w + w] for i, n in enumerate(length.tolist())]


class _Props:
    """The PROPERTIES of a block as JSON segments, and which records can use them."""

    def __init__(self, blk: MessageBlock, plain: np.ndarray):
        P = self.P = blk.properties
        n = blk.n
        self.has = (blk.rb.props_len > 0).astype(np.int64)
        plain &= P.simple() | (self.has == 0)
        if not P.tot:
            return
        cat = P.cat
        if cat.tobytes().translate(None, _PROPS_OK_BYTES):  # a byte that needs an escape somewhere
            plain[P.owners(np.flatnonzero(~_PROPS_OK[cat]))] = False
        lead = P.hp[(cat[P.hp] == 0xC2) | (cat[P.hp] == 0xE2)]  # where an unsafe character may start
        if lead.size:  # non-ASCII: valid UTF-8 (simple) that a terminal cannot act on
            text = cat.tobytes()
            for x in lead.tolist():
                if _UNSAFE_UTF8.match(text, x):
                    plain[P.owners(x)] = False
        # every record's PROPERTIES with a NUL after each; a NUL inside a record (never a
        # plain one) is masked so that the pieces stay one per record
        raw = blk.properties_text()
        if raw.count(b"\0") != n:
            c = cat.copy()
            c[c == 0] = 0x3F
            raw = np.insert(c, P.mend, 0).tobytes()
        self.raw = raw

    def _pieces(self, line: _Line, text: bytes) -> None:
        """The NUL-ended pieces of ``text``, one per record, as a segment."""
        a = np.frombuffer(text, np.uint8)
        ends = np.flatnonzero(a == 0)
        start = np.empty_like(ends)
        start[0], start[1:] = 0, ends[:-1] + 1
        line.ranges(_padded(a, int((ends - start).max())), start, ends - start)

    def json(self, line: _Line) -> None:
        """``"properties":{…},"properties_string":"…"`` (empty PROPERTIES: ``{}`` and ``""``)."""
        line.lit(b',"properties":{')
        if not self.P.tot:
            line.lit(b'},"properties_string":"')
            return
        quote = (np.frombuffer(b'"', np.uint8), np.zeros_like(self.has), self.has)
        line.ranges(*quote)
        r = self.raw
        self._pieces(line, r.replace(b"\x02\x00", b"\x00").replace(b"\x01", b'":"').replace(b"\x02", b'","'))
        line.ranges(*quote)
        line.lit(b'},"properties_string":"')
        self._pieces(line, r.replace(b"\x01", b"\\u0001").replace(b"\x02", b"\\u0002"))

    def value(self, line: _Line, name: bytes, n: int) -> None:
        """``"…"`` of the last non-empty ``name`` value of each record, ``null`` without one."""
        m, a, b = self.P.value(name)
        has = np.zeros(n, np.int64)
        has[m] = 1
        if not m.size:
            line.lit(b"null")
            return
        null = self.P.cat.size  # 'null' follows the PROPERTIES bytes
        src = _padded(np.r_[self.P.cat, np.frombuffer(b"null", np.uint8)], int(max((b - a).max(), 4)))
        start, length = np.full(n, null, np.int64), np.full(n, 4, np.int64)
        start[m], length[m] = a, b - a
        quote = (np.frombuffer(b'"', np.uint8), np.zeros(n, np.int64), has)
        line.ranges(*quote)
        line.ranges(src, start, length)
        line.ranges(*quote)

    def keys(self, line: _Line, n: int, plain: np.ndarray) -> None:
        """JSON arrays of KEYS words; records with empty words take the reference path."""
        m, a, b = self.P.value(b"KEYS\x01")
        if not m.size:
            line.lit(b"[]")
            return
        text = self.P.cat[:int(b.max())].tobytes()
        words = np.zeros(n, np.int64)
        words[m] = 1
        joined = b"\0".join(map(text.__getitem__, map(slice, a.tolist(), b.tolist())))
        j = np.frombuffer(joined, np.uint8)
        sp = j == 0x20
        edge = np.r_[True, j[:-1] == 0] & sp | np.r_[j[1:] == 0, True] & sp | np.r_[sp[1:] & sp[:-1], False]
        if edge.any():  # a leading, trailing or double space: an empty word
            plain[m[np.searchsorted(np.flatnonzero(j == 0), np.flatnonzero(edge))]] = False
        quoted = joined.replace(b" ", b'","') + b"\0"
        q = np.frombuffer(quoted, np.uint8)
        ends = np.flatnonzero(q == 0)
        start, length = np.zeros(n, np.int64), np.zeros(n, np.int64)
        start[m] = np.r_[0, ends[:-1] + 1]
        length[m] = ends - start[m]
        quote = (np.frombuffer(b'"', np.uint8), np.zeros(n, np.int64), words)
        line.lit(b"[")
        line.ranges(*quote)
        line.ranges(_padded(q, int(length.max())), start, length)
        line.ranges(*quote)
        line.lit(b"]")


def block_lines(blk: MessageBlock, take: np.ndarray, body: str = "none", properties: bool = True) -> bytes:
    """The JSON lines (UTF-8, a ``\\n`` after each) of records ``take`` of ``blk``."""
    n, rb = blk.n, blk.rb
    plain = np.ones(n, bool)
    names, tid = blk.topics
    plain &= np.array([bool(_PLAIN[np.frombuffer(t, np.uint8)].all()) for t in names], bool)[tid]
    if body == "text":
        plain[:] = False
    props = _Props(blk, plain)
    line = _Line()
    line.lit(b'{"physical_offset":'), line.number(rb.physical_offset)
    line.lit(b',"total_size":'), line.number(rb.total)
    line.lit(b',"magic":"'), line.table([b"v1", b"v2"], (rb.magic == MAGIC_V2).astype(np.int64))
    line.lit(b'","body_crc":'), line.number(rb.body_crc)
    line.lit(b',"queue_id":'), line.number(rb.queue_id)
    line.lit(b',"flag":'), line.number(blk.flag)
    line.lit(b',"queue_offset":'), line.number(rb.queue_offset)
    line.lit(b',"sys_flag":'), line.number(rb.sys_flag)
    line.lit(b',"born_timestamp":'), line.number(blk.born_timestamp)
    for which in ("born", "store"):
        if which == "store":
            line.lit(b'","store_timestamp":'), line.number(blk.store_timestamp)
        at, size, port = blk.host(which)
        tab, inv = _address_table(blk, at, size)
        line.lit(b',"%s_host":"' % which.encode()), line.table([x.encode() for x in tab], inv)
        line.lit(b":"), line.number(port)
    line.lit(b'","reconsume_times":'), line.number(blk.reconsume_times)
    line.lit(b',"prepared_transaction_offset":'), line.number(blk.prepared_transaction_offset)
    line.lit(b',"topic":"'), line.table(names, tid)
    line.lit(b'"')
    if properties:
        props.json(line)
        line.lit(b'"')
    line.lit(b',"tags":'), props.value(line, b"TAGS\x01", n)
    line.lit(b',"keys":'), props.keys(line, n, plain) if props.P.tot else line.lit(b"[]")
    line.lit(b',"uniq_key":'), props.value(line, b"UNIQ_KEY\x01", n)
    line.lit(b',"msg_id":"')
    line.rows(*_msg_id_hex(blk, np.arange(n)))
    line.lit(b'","body_size":'), line.number(rb.body_len)
    if body in ("base64", "hex"):
        line.lit(b',"body":"'), _bodies(line, blk, body), line.lit(b'","body_encoding":"%s"' % body.encode())
    line.lit(b',"file":"%s"}\n' % blk.file_name.encode())
    return _with_reference(blk, line, take, plain, body, properties)


def _with_reference(blk: MessageBlock, line: _Line, take: np.ndarray, plain: np.ndarray, body: str,
                    properties: bool) -> bytes:
    """The rendered lines of ``take``, the records that are not plain rendered by the reference in their place."""
    fast = plain[take]
    if fast.all():
        return line.render(take, blk.n)
    rows = take[fast]
    out = line.render(rows, blk.n)
    ends = np.r_[0, np.cumsum(line.lengths(rows, blk.n))].tolist()  # where each fast record's line ends
    slow = np.flatnonzero(~fast)
    pieces, done = [], 0
    for i, (k, m) in enumerate(zip(slow.tolist(), blk.messages(take[slow]))):
        upto = ends[k - i]  # the fast records before this one: k of them, less the i slow ones
        pieces += [out[done:upto], to_json_bytes(message_dict(m, body, properties, blk.file_name)) + b"\n"]
        done = upto
    pieces.append(out[done:])
    return b"".join(pieces)


def _bodies(line: _Line, blk: MessageBlock, mode: str) -> None:
    rb, buf = blk.rb, blk.buf
    a, b = rb.body_at.tolist(), (rb.body_at + rb.body_len).tolist()
    if mode == "base64":
        enc = base64.b64encode
        line.text(b"".join([enc(buf[x:y]) for x, y in zip(a, b)]), (rb.body_len + 2) // 3 * 4)
        return
    raw = np.frombuffer(b"".join(map(buf.__getitem__, map(slice, a, b))), np.uint8)
    hexed = np.empty(2 * raw.size, np.uint8)
    hexed[0::2], hexed[1::2] = _HEX_LOWER[raw >> 4], _HEX_LOWER[raw & 15]
    line.text(hexed.tobytes(), 2 * rb.body_len)
