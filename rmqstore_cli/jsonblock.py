"""dump-commitlog's JSON records for a whole block of messages at once.

:func:`~rmqstore_cli.store.records.message_view.message_dict` + :func:`~rmqstore_cli.render.to_json_bytes` is
the reference: one dict and one orjson call per record, ~15 µs. Rendering a block with
numpy (one column of text per field, or byte segments assembled in a matrix) still costs
5–7 µs a record, above the 5 µs the issue allows with the scan and start-up included. So
here the block's fields are laid out as two integer matrices — the numbers, and where each
variable part lies in the mapped file, read from the records' bytes by one C pass
(``columns``, whose numpy twin of the same name is here) — and one C loop
(``rmqstore_cli/_cjson.c``, the optional extension ``setup.py`` builds at install) writes
every line, checking each record's PROPERTIES as it goes, into a buffer the writer writes
as it is (issue 35: no numpy gather per field, no copy of the lines into bytes).

A record goes that way only when the result is certain to equal the reference, which the
C loop decides as it goes (see there); any other record is rendered by the reference, in
its place. So is every record when the extension did not build (no compiler at install),
and a selection of fewer than ``FAST_PATHS.json_min`` (16) records, where setting up the
block costs more than the reference (the extension itself loads in well under a
millisecond). Tests compare the two on every record of the fixtures and of hostile stores.
"""

from __future__ import annotations

import threading
from types import ModuleType

import numpy as np

from rmqstore_cli.formats.commitlog import (
    AFTER_BORN_HOST,
    AFTER_BORN_HOST_SIZE,
    AFTER_STORE_HOST,
    BORNHOST_V6_FLAG,
    HEAD,
    HEAD_SIZE,
    HOST_ADDRESS_SIZE,
    MAGIC_V2,
    PORT,
    PROPERTIES_LENGTH,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_LENGTH,
)
from rmqstore_cli.render import to_json_bytes
from rmqstore_cli.store.commitlog.bulk import RecordBatch
from rmqstore_cli.store.commitlog.columns import MessageBlock
from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from rmqstore_cli.store.records.message_view import message_dict

_PHY_AT = HEAD["physical_offset"].offset
#: the offset msgId (MessageDecoder#createMessageId) is the store address, its port and the
#: stored PHYSICALOFFSET: the C loop hex-encodes those bytes, these sizes long
_ID_SIZES = (PORT.size, HEAD["physical_offset"].size)
#: the field names around the values, in the order the C loop writes them
_LITERALS = (
    b'{"physical_offset":',
    b',"total_size":',
    b',"magic":"',
    b'","body_crc":',
    b',"queue_id":',
    b',"flag":',
    b',"queue_offset":',
    b',"sys_flag":',
    b',"born_timestamp":',
    b',"born_host":"',
    b'","store_timestamp":',
    b',"store_host":"',
    b'","reconsume_times":',
    b',"prepared_transaction_offset":',
    b',"topic":"',
    b'","properties":{',
    b'},"properties_string":"',
    b'","tags":',
    b',"keys":',
    b',"uniq_key":',
    b',"msg_id":"',
    b'","body_size":',
    b',"body":"',
)
#: render's columns of numbers and of positions (nums, locs: ``_cjson.c``'s N_ and L_ names)
NUMS = tuple(
    "physical_offset total_size v2 body_crc queue_id flag queue_offset sys_flag born_timestamp born_port"
    " store_timestamp store_port reconsume_times prepared_transaction_offset body_size".split()
)
LOCS = tuple("born_at born_len store_at store_len topic_at topic_len props_at props_len body_at phy_at".split())


def _at_size(*fields) -> list[int]:
    """Each ``formats`` field's offset and size, one after the other (LAYOUT's pairs)."""
    return [x for f in fields for x in (f.offset, f.size)]


#: where ``columns`` reads each field (``MessageDecoder#decode``), in ``_cjson.c``'s Y_ order
LAYOUT = np.array(
    [HEAD_SIZE, *_at_size(HEAD["physical_offset"], HEAD["total_size"], HEAD["magic"]), MAGIC_V2]
    + _at_size(*(HEAD[k] for k in ("body_crc", "queue_id", "flag", "queue_offset", "sys_flag", "born_timestamp")))
    + [BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, HOST_ADDRESS_SIZE[False], HOST_ADDRESS_SIZE[True]]
    + _at_size(PORT, AFTER_BORN_HOST["store_timestamp"])
    + [AFTER_BORN_HOST_SIZE]
    + _at_size(*(AFTER_STORE_HOST[k] for k in ("reconsume_times", "prepared_transaction_offset", "body_length")))
    + [TOPIC_LENGTH[False].size, TOPIC_LENGTH[True].size, PROPERTIES_LENGTH.size],
    np.int64,
)
#: the properties the C loop looks for, in its order (TAGS, KEYS, UNIQ_KEY): padded rows and lengths
_FOUND = (b"TAGS", b"KEYS", b"UNIQ_KEY")
_FOUND_NAMES = np.array([np.frombuffer(x.ljust(8, b"\0"), np.uint8) for x in _FOUND])
_FOUND_LENS = np.array([len(x) for x in _FOUND], np.int64)


def block_lines(
    blk: MessageBlock, take: np.ndarray, body: str = "none", properties: bool = True, copy: bool = True
) -> bytes | memoryview:
    """The JSON lines (UTF-8, a ``\\n`` after each) of records ``take`` of ``blk``; with
    ``copy`` False possibly a view of the thread's output buffer, which the next block of
    the thread overwrites (a writer that writes it at once saves copying every line)."""
    k = FAST_PATHS.json_kernel(take.size) if body != "text" else None
    if k is None:
        return b"".join(_reference(blk, take, body, properties))
    args = render_args(k, blk, take, body, properties)
    size = k.render(*args)
    ok, out, ends = args[3], args[10], args[11]
    if ok.all():
        return out[:size].tobytes() if copy else memoryview(out)[:size]
    return _with_reference(blk, out, ends, ok, take, body, properties)


def render_args(k: ModuleType, blk: MessageBlock, take: np.ndarray, body: str, properties: bool) -> tuple:
    """The arguments of ``k.render`` (``_cjson.c``) for records ``take`` of ``blk``: the
    mapped file, ``nums`` and ``locs``, the ``ok`` flags (all set), the literal texts, the
    property names it looks for, the body mode, the output buffer and ``ends``, and the
    sizes the msgId is made of (the hosts, IPv4 and IPv6, it writes from the file's bytes)."""
    every = take.size == blk.n
    rb = blk.rb if every else blk.rb.take(take)
    nums, locs = np.empty((take.size, len(NUMS)), np.int64), np.empty((take.size, len(LOCS)), np.int64)
    k.columns(blk.a, rb.pos, LAYOUT, nums, locs)
    mode = {"none": k.BODY_NONE, "base64": k.BODY_BASE64, "hex": k.BODY_HEX}[body]
    tail = (b'","body_encoding":"%s"' % body.encode(),) if mode else (b"",)
    lits = _LITERALS + tail + (b',"file":"%s"}\n' % blk.file_name.encode(),)
    lit_off = np.cumsum([0] + [len(x) for x in lits])
    body_out = {k.BODY_NONE: 0 * rb.body_len, k.BODY_BASE64: (rb.body_len + 2) // 3 * 4, k.BODY_HEX: 2 * rb.body_len}
    # sized for the worst case (the C loop checks each line's bound and raises rather than
    # write past it): per record the literals, 15 numbers of up to 20 characters, two hosts
    # (IPv6 text up to 41) with ports, the msgId (56), quotes and nulls stay under 1 024
    # bytes; the topic once; PROPERTIES at most 16 times; the body as encoded
    bound = int(lit_off[-1] + 1024) * take.size + int((rb.topic_len + 16 * rb.props_len + body_out[mode]).sum())
    return (
        blk.a,
        nums,
        locs,
        np.ones(take.size, bool),
        np.frombuffer(b"".join(lits), np.uint8),
        lit_off,
        _FOUND_NAMES,
        _FOUND_LENS,
        mode,
        properties,
        _buffer(bound),
        np.empty(take.size, np.int64),
        *_ID_SIZES,
    )


def columns(a: np.ndarray, pos: np.ndarray, layout: np.ndarray, nums: np.ndarray, locs: np.ndarray) -> None:
    """The reference of ``_cjson.columns``: render's ``nums`` and ``locs`` of the records at
    ``pos`` of the file ``a``, a numpy gather per field (:class:`RecordBatch`, which reads
    ``formats`` itself: ``layout`` is what the C loop is told). ValueError, as there, when a
    field of some record lies outside ``a`` (the fields lie in order, PROPERTIESLENGTH last)."""
    rb = RecordBatch(a, pos)
    bad = np.flatnonzero((pos < 0) | (rb.props_len_at > a.size - PROPERTIES_LENGTH.size))
    if bad.size:
        raise ValueError(f"_cjson.columns: record {bad[0]}: a field outside the file")
    blk = MessageBlock(None, a, rb, 0, "")
    born_at, born_len, born_port = blk.host("born")
    store_at, store_len, store_port = blk.host("store")
    nums[:] = np.stack(
        [rb.physical_offset, rb.total, rb.v2, rb.body_crc, rb.queue_id, blk.flag, rb.queue_offset, rb.sys_flag]
        + [blk.born_timestamp, born_port, blk.store_timestamp, store_port, blk.reconsume_times]
        + [blk.prepared_transaction_offset, rb.body_len],
        axis=1,
    )
    locs[:] = np.stack(
        [born_at, born_len, store_at, store_len, rb.topic_at, rb.topic_len, rb.props_at, rb.props_len, rb.body_at]
        + [rb.pos + _PHY_AT],
        axis=1,
    )


_OUT = threading.local()
#: The output buffer a bound past :data:`SMALL_BUFFER` gets at once: address space, not
#: memory (only the pages a block's lines reach are ever touched, ~7 MB for 8 192 records of
#: 256-byte bodies). Sized for the bound of a whole block (~26 MB there), so that the walk's
#: blocks (64 records, doubling up to MAX_BLOCK) do not each get a larger buffer whose pages
#: are faulted in and zeroed again: ten buffers were 3 % of a dump's CPU.
RESERVE = 64 << 20
#: Below this a buffer is what the block needs (doubling): numpy gives the larger ones huge
#: pages, whose first touch zeroes 2 MB, more than a small dump writes.
SMALL_BUFFER = 4 << 20


def _buffer(size: int) -> np.ndarray:
    """An output buffer of at least ``size`` bytes, the same one for every block of a thread
    (its pages are faulted in once, not per block; the C loop runs without the GIL, so two
    threads must not share one)."""
    have = getattr(_OUT, "buf", None)
    if have is None or have.size < size:
        grown = max(size, 2 * (0 if have is None else have.size))
        _OUT.buf = np.empty(grown if grown <= SMALL_BUFFER else max(grown, RESERVE), np.uint8)
    return _OUT.buf


def _reference(blk: MessageBlock, take: np.ndarray, body: str, properties: bool) -> list[bytes]:
    return [to_json_bytes(message_dict(m, body, properties, blk.file_name)) + b"\n" for m in blk.messages(take)]


def _with_reference(
    blk: MessageBlock, out: np.ndarray, ends: np.ndarray, ok: np.ndarray, take: np.ndarray, body: str, properties: bool
) -> bytes:
    """The C loop's lines with the records it left out rendered by the reference in their places."""
    slow = np.flatnonzero(~ok)
    starts = np.r_[0, ends[:-1]]
    pieces, done = [], 0
    for i, line in zip(slow.tolist(), _reference(blk, take[slow], body, properties), strict=True):
        at = int(starts[i])
        pieces += [out[done:at].tobytes(), line]
        done = int(ends[i])
    pieces.append(out[done : int(ends[-1])].tobytes())
    return b"".join(pieces)
