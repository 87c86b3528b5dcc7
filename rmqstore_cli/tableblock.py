"""dump-commitlog's table: its columns, one record's row (the reference), and the rows of a
whole block of records at once.

:func:`message_row` + :meth:`~rmqstore_cli.render.TableWriter.line` is the reference: one
``Message``, one dict, one formatted line per record (~20 µs, most of it decoding). A dump
of 200 000 records goes in blocks (:class:`~rmqstore_cli.store.commitlog.columns.MessageBlock`), and
:func:`block_rows` lays a block's rows out as one byte matrix, column by column, with numpy:
numbers as digits, times per distinct second plus the milliseconds, topics per distinct
topic, TAGS and KEYS gathered from the PROPERTIES bytes, msgIds as hex. Each cell has a
slot of bytes in its row; a cell that is plain printable ASCII fitting its column is
written straight into its slot, any other cell (non-ASCII, controls to escape, too wide,
a number wider than its column, a kind with details) is made by the same
Python code the reference uses and written into its slot. Slots are padded with NUL bytes,
which are dropped at the end (store text never reaches a table raw, so a NUL in it is
shown as ``\\x00``). Tests compare both paths on every record of the fixtures and of
hostile stores.
"""

from __future__ import annotations

import functools

import numpy as np

from rmqstore_cli.formats.commitlog import MessageHead
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.formats.sysflag import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rmqstore_cli.render import ELLIPSIS, Col, Output, TableWriter, fit, safe_text, text_width
from rmqstore_cli.store.files.arrays import byte_rows
from rmqstore_cli.store.records.kinds import KINDS, TX_KINDS, kind_detail, record_kind, topic_kind
from rmqstore_cli.store.records.message import split_keys
from rmqstore_cli.store.records.message_view import TABLE_DECODE, table_properties, table_text
from rmqstore_cli.times import format_ms

TIME_WIDTH = len("2026-01-01 00:00:00.000")
KIND_WIDTH = max(map(len, KINDS))
#: text columns are cut (with an ellipsis) beyond these widths; narrower when the first
#: rows are all narrower
TOPIC_CAP, TAGS_CAP, KEYS_CAP = 48, 24, 40
_SP, _NUL = 0x20, 0
_PHY_AT = field_offset(MessageHead, "physical_offset")


def commitlog_columns(max_offset: int = 0, topics: list[str] = ()) -> list[Col]:
    """dump-commitlog's table: offsets as wide as the store's largest, a 23-character store
    time, the kind, the topic as wide as the store's widest known topic, tags and keys as
    their first rows and some room to grow, each capped; what the kind means last (unpadded)."""
    topic_w = min(TOPIC_CAP, max((text_width(safe_text(t)) for t in topics), default=0))
    return [
        Col("physical_offset", "offset", right=True, width=len(str(max(max_offset, 0)))),
        Col("store_time", "store time", width=TIME_WIDTH, cap=TIME_WIDTH, least=TIME_WIDTH),
        Col("kind", "kind", width=KIND_WIDTH, cap=KIND_WIDTH, least=KIND_WIDTH),
        Col("topic", "topic", cap=TOPIC_CAP, width=topic_w),
        Col("queue_id", "queue", right=True),
        Col("queue_offset", "queue offset", right=True),
        Col("tags", "tags", cap=TAGS_CAP, slack=4),
        Col("keys", "keys", cap=KEYS_CAP, slack=8),
        Col("total_size", "size", right=True, width=7),  # maxMessageSize 4 MiB: 7 digits
        Col("msg_id", "msgId", width=32),
        Col("detail", "what it is"),
    ]


def entry_columns() -> list[Col]:
    """dump-commitlog's DLedger columns (``store.message_view.entry_fields``), after the offset."""
    return [
        Col("dledger_index", "entry", right=True),
        Col("dledger_term", "term", right=True),
        Col("dledger_pos", "entry pos", right=True),
    ]


def known_topics(ms) -> list[str]:
    """The topics the store knows (topics.json, consumequeue/), for the topic column's
    width; none when they cannot be listed (the first rows decide then)."""
    try:
        return ms.topics()
    except (OSError, ValueError):
        return []


def message_row(msg, zone, delay_table: dict[int, int]) -> dict:
    """One record's table cells by name (the reference for :func:`block_rows`)."""
    props = table_properties(msg)
    topic = table_text(msg.topic_bytes)
    k = record_kind(topic, msg.sys_flag, props, msg.store_timestamp, msg.prepared_transaction_offset, delay_table)
    return {
        "physical_offset": msg.physical_offset,
        "store_time": format_ms(msg.store_timestamp, zone),
        "kind": k.kind,
        "topic": topic,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "tags": props.get("TAGS"),
        "keys": split_keys(props.get("KEYS")),
        "total_size": msg.total_size,
        "msg_id": msg.msg_id,
        "detail": kind_detail(k, lambda ms: format_ms(ms, zone)),
    }


def blank_row(rec) -> dict:
    """A BLANK end-of-file record (--show-blank)."""
    return {
        "physical_offset": rec.physical_offset,
        "kind": "blank",
        "total_size": rec.total_size,
        "detail": f"end of file {rec.file}",
    }


# ------------------------------------------------------------------ a block at once


def block_rows(blk, take: np.ndarray, out: Output, zone, delay_table: dict[int, int]) -> bytes:
    """The table rows (UTF-8, a newline after each) of records ``take`` of ``blk``; the
    table's widths are settled from this block if no row came before."""
    if not take.size:
        return b""
    t: TableWriter = out.table
    cols = {c.key: i for i, c in enumerate(t.columns)}
    rb = blk.rb if take.size == blk.n else blk.rb.take(take)
    n = int(take.size)
    names, tid_all = blk.topics
    tid = tid_all[take]
    topics = {int(i): names[int(i)].decode("utf-8", TABLE_DECODE) for i in np.unique(tid).tolist()}
    P = blk.properties
    raw = P.cat.tobytes() if P.tot else b""
    tags = _prop_text(P, raw, b"TAGS\x01", take, blk.n)
    keys = _prop_text(P, raw, b"KEYS\x01", take, blk.n, keys=True)
    kinds, details = _kinds(blk, take, rb, tid, topics, P, raw, zone, delay_table)
    if t.widths is None:
        _settle_widths(out, topics, tags, keys, rb)
    w = t.widths
    slots = [
        _numbers(rb.physical_offset, w[cols["physical_offset"]]),
        _times(rb.store_timestamp, zone),
        _fixed([fit(k, w[cols["kind"]]).encode() for k in KINDS], kinds),
        _by_id(topics, tid, w[cols["topic"]]),
        _numbers(rb.queue_id, w[cols["queue_id"]]),
        _numbers(rb.queue_offset, w[cols["queue_offset"]]),
        tags.cells(w[cols["tags"]]),
        keys.cells(w[cols["keys"]]),
        _numbers(rb.total, w[cols["total_size"]]),
        _msg_ids(blk, take, rb, w[cols["msg_id"]]),
    ]
    sep = np.full((n, len(t.SEP)), _SP, np.uint8)
    parts = []
    for s in slots:
        parts += [s, sep]
    tail = _with_slow(np.zeros((n, 0), np.uint8), details)  # the last column: not padded
    parts += [tail, np.full((n, 1), 10, np.uint8)]
    m = np.concatenate(parts, axis=1)
    _rstrip(m, m.shape[1] - 1 - tail.shape[1] - len(t.SEP) - slots[-1].shape[1], m.shape[1] - 1)
    flat = m.ravel()
    return flat[flat != _NUL].tobytes()


def _settle_widths(out: Output, topics: dict[int, str], tags: _Text, keys: _Text, rb) -> None:
    """The table's widths from this block, the first: its widest topic, tags and keys, and
    an IPv4 msgId's 32 characters unless a record has an IPv6 host (56)."""
    out.fix_widths(
        {
            "topic": max(text_width(safe_text(x)) for x in topics.values()),
            "tags": tags.widest(),
            "keys": keys.widest(),
            "msg_id": 32 if _all_v4(rb) else 56,
        }
    )


class _Text:
    """A text column read from the PROPERTIES: printable-ASCII values gathered as bytes,
    the others (and the too wide) as escaped strings."""

    def __init__(self, cat: np.ndarray, a: np.ndarray, length: np.ndarray, slow: dict[int, str], fast: np.ndarray):
        self.cat, self.a, self.length, self.slow, self.fast = cat, a, length, slow, fast

    def widest(self) -> int:
        w = int(self.length[self.fast].max()) if self.fast.any() else 0
        return max([w] + [text_width(s) for s in self.slow.values()])

    def cells(self, width: int) -> np.ndarray:
        """The column's cells, ``width`` cells each: ASCII values written (or cut, the last
        cell an ellipsis) straight from the bytes, the others fitted by the reference."""
        n = self.length.size
        m = np.full((n, width), _SP, np.uint8)
        long = self.fast & (self.length > width)
        if width and self.fast.any() and self.cat.size:
            idx = np.minimum(self.a[:, None] + np.arange(width), self.cat.size - 1)
            m = np.where(self.fast[:, None] & (np.arange(width) < self.length[:, None]), self.cat[idx], m)
        if width and long.any():  # cut: width - 1 characters and U+2026 (3 bytes in UTF-8)
            m = np.concatenate([m, np.zeros((n, 2), np.uint8)], axis=1)
            m[long, width - 1 :] = np.frombuffer(ELLIPSIS.encode(), np.uint8)
        slow = dict(self.slow)
        done: dict[str, bytes] = {}  # tags repeat: fit each distinct text once
        for i, s in slow.items():
            b = done.get(s)
            if b is None:
                b = done[s] = fit(s, width).encode("utf-8", "backslashreplace")
            slow[i] = b
        return _with_slow(m, slow)


def _prop_text(P, raw: bytes, name: bytes, take: np.ndarray, n_block: int, keys: bool = False) -> _Text:
    """A property's value per record of ``take``: fast where it is printable ASCII (for KEYS
    also no leading, trailing or double space, so the split-and-join of the reference is the
    value itself), else the reference's text (``message_view.table_text``, escaped)."""
    m, a, b = P.value(name)
    at = np.zeros(n_block, np.int64)
    ln = np.zeros(n_block, np.int64)
    at[m], ln[m] = a, b - a
    at, ln = at[take], ln[take]
    cat = P.cat if P.tot else np.zeros(1, np.uint8)
    fast = np.ones(take.size, bool)
    has = np.flatnonzero(ln > 0)
    if has.size:
        L = int(ln[has].max())
        idx = np.minimum(at[has][:, None] + np.arange(L), cat.size - 1)
        inside = np.arange(L) < ln[has][:, None]
        v = cat[idx]
        bad = ((v < 0x20) | (v > 0x7E)) & inside
        if keys:  # a leading, trailing or double space: the split-and-join changes the text
            sp = (v == _SP) & inside
            bad |= sp[:, :1] | np.take_along_axis(sp, (ln[has] - 1)[:, None], 1)
            if L > 1:
                bad[:, 1:] |= sp[:, :-1] & sp[:, 1:]
        fast[has[bad.any(1)]] = False
    slow: dict[int, str] = {}
    done: dict[bytes, str] = {}
    for i, a, n in zip(*(np.flatnonzero(~fast), at[~fast], ln[~fast]), strict=True) if not fast.all() else ():
        v = raw[a : a + n]
        text = done.get(v)
        if text is None:
            t = v.decode("utf-8", TABLE_DECODE)
            text = done[v] = safe_text(" ".join(split_keys(t)) if keys else t)
        slow[int(i)] = text
    return _Text(cat, at, ln, slow, fast)


def _kinds(blk, take, rb, tid, topics: dict[int, str], P, raw: bytes, zone, delay_table) -> tuple[np.ndarray, dict]:
    """Each record's kind (an index into KINDS) and, where the kind has one, its escaped detail."""
    by_topic = {i: topic_kind(t) for i, t in topics.items()}
    tx = rb.sys_flag & TRANSACTION_MASK
    code = _tx_kinds(tx)
    special = np.isin(tid, [i for i, k in by_topic.items() if k is not None])
    special |= (tx == TRANSACTION_COMMIT_TYPE) | (tx == TRANSACTION_ROLLBACK_TYPE)  # their half's offset
    details: dict[int, bytes] = {}
    rows = np.flatnonzero(special)
    if not rows.size:
        return code, details
    props = {name: _prop_span(P, name, blk.n, take) for name in ("REAL_TOPIC", "DELAY", "RETRY_TOPIC")}
    sts, pto = rb.store_timestamp, blk.prepared_transaction_offset[take]
    sf = rb.sys_flag
    fmt = functools.partial(format_ms, tz=zone)
    for i in rows.tolist():
        p = {name: raw[a[i] : e[i]].decode("utf-8", TABLE_DECODE) for name, (a, e) in props.items() if a[i] >= 0}
        k = record_kind(topics[int(tid[i])], int(sf[i]), p, int(sts[i]), int(pto[i]), delay_table)
        code[i] = KINDS.index(k.kind)
        d = kind_detail(k, fmt)
        if d:
            details[i] = safe_text(d).rstrip(" ").encode("utf-8", "backslashreplace")
    return code, details


def _tx_kinds(tx: np.ndarray) -> np.ndarray:
    """Each record's kind by its transaction type alone (an index into KINDS): normal, or
    the type's (``MessageSysFlag``)."""
    code = np.full(tx.size, KINDS.index("normal"), np.int64)
    for v, k in TX_KINDS.items():
        code[tx == v] = KINDS.index(k)
    return code


def _prop_span(P, name: str, n_block: int, take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where property ``name``'s value lies in the block's PROPERTIES bytes, per record of
    ``take``: (start, end), start -1 where the record has none."""
    m, a, b = P.value(name.encode() + b"\x01")
    pos = np.full(n_block, -1, np.int64)
    end = np.zeros(n_block, np.int64)
    pos[m], end[m] = a, b
    return pos[take], end[take]


def _all_v4(rb) -> bool:
    return bool((rb.store_host_len == 8).all())


def _msg_ids(blk, take: np.ndarray, rb, width: int) -> np.ndarray:
    """``MessageDecoder#createMessageId`` as upper-case hex: the store address and port
    (IPv4 4 + 4 bytes, IPv6 16 + 4) and the stored PHYSICALOFFSET (8), from the bytes."""
    n = take.size
    at, size, _ = blk.host("store")
    at, size = at[take], size[take]
    phy = byte_rows(blk.a, rb.pos + _PHY_AT, 8)
    hexd = np.frombuffer(b"0123456789ABCDEF", np.uint8)
    m = np.full((n, max(width, 56)), _NUL, np.uint8)
    for host in (4, 16):
        rows = np.flatnonzero(size == host)
        if rows.size:
            raw = np.concatenate([byte_rows(blk.a, at[rows], host + 4), phy[rows]], axis=1)
            h = np.empty((rows.size, 2 * raw.shape[1]), np.uint8)
            h[:, 0::2], h[:, 1::2] = hexd[raw >> 4], hexd[raw & 15]
            m[rows, : h.shape[1]] = h
            if h.shape[1] < width:  # padded to the column
                m[rows, h.shape[1] : width] = _SP
    return m


def _numbers(v: np.ndarray, width: int) -> np.ndarray:
    """Right-aligned decimal text of int64 values in ``width`` columns; a wider one (or
    Long.MIN_VALUE) is written whole into a wider slot."""
    v = np.asarray(v, np.int64)
    n = v.size
    neg = v < 0
    a = np.abs(v).astype(np.uint64)  # Long.MIN_VALUE stays 2^63 as uint64
    digits = np.ones(n, np.int64)
    for k in range(1, 20):
        digits += a >= np.uint64(10**k)
    size = digits + neg
    m = np.full((n, width), _SP, np.uint8)
    rest = a.copy()
    for j in range(width - 1, -1, -1):
        k = width - 1 - j  # digit k from the right
        m[:, j] = np.where(k < digits, 48 + (rest % np.uint64(10)).astype(np.uint8), m[:, j])
        m[:, j] = np.where(neg & (k == digits), 45, m[:, j])
        rest //= np.uint64(10)
    wide = np.flatnonzero(size > width)
    return _with_slow(m, {i: str(int(v[i])).encode() for i in wide.tolist()})


def _times(ts: np.ndarray, zone) -> np.ndarray:
    """:func:`~rmqstore_cli.times.format_ms` of each store time: the date and time of each
    distinct second once, the milliseconds as digits."""
    ts = np.asarray(ts, np.int64)
    sec = ts // 1000
    uniq, inv = np.unique(sec, return_inverse=True)
    heads = []
    ok = np.ones(uniq.size, bool)
    for j, s in enumerate(uniq.tolist()):
        h = format_ms(s * 1000, zone)
        if len(h) != TIME_WIDTH or not h.isascii() or not h.endswith(".000"):
            ok[j] = False
            h = " " * TIME_WIDTH
        heads.append(h[:20].encode())
    head = np.frombuffer(b"".join(heads), np.uint8).reshape(-1, 20)
    ms = ts - sec * 1000
    m = np.empty((ts.size, TIME_WIDTH), np.uint8)
    m[:, :20] = head[inv.ravel()]
    m[:, 20] = 48 + ms // 100
    m[:, 21] = 48 + ms // 10 % 10
    m[:, 22] = 48 + ms % 10
    bad = np.flatnonzero(~ok[inv.ravel()])
    return _with_slow(m, {i: fit(format_ms(int(ts[i]), zone), TIME_WIDTH).encode() for i in bad.tolist()})


def _fixed(table: list[bytes], code: np.ndarray) -> np.ndarray:
    """Cells from a small table of equally wide byte strings."""
    w = len(table[0])
    return np.frombuffer(b"".join(table), np.uint8).reshape(-1, w)[code]


def _by_id(texts: dict[int, str], ids: np.ndarray, width: int) -> np.ndarray:
    """Topic cells: each distinct topic escaped and fitted once."""
    cells = {i: fit(safe_text(t), width).encode("utf-8", "backslashreplace") for i, t in texts.items()}
    cap = max(map(len, cells.values()))
    table = np.zeros((max(cells) + 1, cap), np.uint8)
    for i, c in cells.items():
        table[i, : len(c)] = np.frombuffer(c, np.uint8)
    return table[ids]


def _with_slow(m: np.ndarray, slow: dict[int, bytes]) -> np.ndarray:
    """``m`` with the rows in ``slow`` replaced by those bytes, in slots NUL-padded to the
    longest of them."""
    if not slow:
        return m
    cap = max(m.shape[1], max(map(len, slow.values())))
    if cap > m.shape[1]:
        m = np.concatenate([m, np.zeros((m.shape[0], cap - m.shape[1]), np.uint8)], axis=1)
    rows = np.fromiter(slow, np.int64, len(slow))
    m[rows] = np.frombuffer(b"".join(b.ljust(cap, b"\0") for b in slow.values()), np.uint8).reshape(-1, cap)
    return m


def _rstrip(m: np.ndarray, lo: int, hi: int) -> None:
    """Drop (as NUL) the trailing spaces of each row's columns ``lo:hi``."""
    sub = m[:, lo:hi]
    keep = (sub != _SP) & (sub != _NUL)
    last = hi - lo - np.argmax(keep[:, ::-1], axis=1)  # one past the last kept byte
    last[~keep.any(1)] = 0
    sub[np.arange(hi - lo) >= last[:, None]] = _NUL
