"""Blocks of valid commit-log records, decoded as columns.

``CommitLog#checkMessageAndReturnSize`` judges one record at a time; a reader that wants
every field of millions of records (dump, export, the engine's full decode) pays the
Python cost of one call, one tuple and one object per record. A :class:`MessageBlock`
holds the records that the per-record check would call VALID as numpy columns instead
(positions from the walk, fields from :class:`~rmqstore_cli.store.commitlog.bulk.RecordBatch`,
PROPERTIES from :class:`~rmqstore_cli.store.records.properties.Properties`). Only records that are
valid by a test that implies the per-record verdict enter a block; anything else (the
BLANK record, a bad magic, a size mismatch, a CRC failure, a record the vector test is
unsure of) is left to :func:`~rmqstore_cli.store.commitlog.check_message`, which stays the
one source of verdicts and reasons. :meth:`MessageBlock.messages` gives the same
``Message`` objects as the per-record scan (tested field for field).
"""

from __future__ import annotations

import struct
from functools import cached_property

import numpy as np
from rmqstore_cli.formats.commitlog import HEAD, HEAD_SIZE, HOST_SIZE, PORT

from rmqstore_cli.store.commitlog.bulk import RecordBatch, walk_records
from rmqstore_cli.store.files.arrays import byte_rows, gather_field
from rmqstore_cli.store.files.crc import body_crcs
from rmqstore_cli.store.records.message import Message
from rmqstore_cli.store.records.properties import Properties, compiled_join
from rmqstore_cli.store.records.topics import TopicIds

MAX_BLOCK = 8192
#: A block spans at most this many bytes of the log (and at least one record), so a
#: consumer that copies bodies holds a bounded amount whatever the record size.
MAX_BLOCK_BYTES = 32 << 20
_PHY = HEAD["physical_offset"]
_PORT_UNPACK = struct.Struct(PORT.fmt).unpack_from


class MessageBlock:
    """Consecutive VALID records of one commit-log file, as columns (positions in the file)."""

    def __init__(
        self, buf, a: np.ndarray, rb: RecordBatch, file_from: int, file_name: str, topic_table: TopicIds | None = None
    ):
        self.buf, self.a, self.rb = buf, a, rb
        self.topic_table = topic_table if topic_table is not None else TopicIds()
        self.file_from, self.file_name = file_from, file_name
        self.n = int(rb.pos.size)
        self._hosts: dict[str, tuple] = {}

    @property
    def pos(self) -> np.ndarray:
        return self.rb.pos

    @property
    def next_pos(self) -> int:
        """The position right after the block's last record."""
        return int(self.rb.pos[-1] + self.rb.total[-1])

    @property
    def offsets(self) -> np.ndarray:
        """Where each record lies in the log (``fileFromOffset`` + position)."""
        return self.rb.pos + self.file_from

    def take(self, idx: np.ndarray) -> MessageBlock:
        """The records at ``idx`` as a block of their own (their topic ids carried over when
        known, not looked up again): export groups a block's records by topic this way, so
        that each Parquet partition's rows are built contiguous instead of cut apart later."""
        out = MessageBlock(self.buf, self.a, self.rb.take(idx), self.file_from, self.file_name, self.topic_table)
        if "topics" in self.__dict__:
            names, tid = self.topics
            out.__dict__["topics"] = (names, tid[idx])
        return out

    # ------------------------------------------------------------- fixed fields
    @cached_property
    def flag(self) -> np.ndarray:
        return self.rb.head_field("flag")

    @cached_property
    def born_timestamp(self) -> np.ndarray:
        return self.rb.head_field("born_timestamp")

    @cached_property
    def store_timestamp(self) -> np.ndarray:
        return self.rb.store_timestamp

    @cached_property
    def reconsume_times(self) -> np.ndarray:
        return self.rb.tail_field("reconsume_times")

    @cached_property
    def prepared_transaction_offset(self) -> np.ndarray:
        return self.rb.tail_field("prepared_transaction_offset")

    def host(self, which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(address position, address length 4 or 16, port) of the born or store hosts."""
        got = self._hosts.get(which)
        if got is None:
            got = self._hosts[which] = self._host(which)
        return got

    def _host(self, which: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rb = self.rb
        at, size = (rb.pos + HEAD_SIZE, rb.born_host_len) if which == "born" else (rb.store_host_at, rb.store_host_len)
        address = size - PORT.size
        return at, address, gather_field(self.a, at + address + PORT.offset, PORT).astype(np.int64)

    @cached_property
    def topics(self) -> tuple[list[bytes], np.ndarray]:
        """(topic bytes by id, each record's topic id), from the scan's
        :class:`~rmqstore_cli.store.records.topics.TopicIds` (ids stable across the blocks of a scan)."""
        tid = self.topic_table.ids_of(self.buf, self.a, self.rb.topic_at, self.rb.topic_len)
        return self.topic_table.names, tid

    def properties_text(self, keep: np.ndarray | None = None) -> bytes:
        """The PROPERTIES bytes of every record (or of the ``keep`` ones, the others empty),
        each followed by a NUL: text to rewrite for a whole block at once."""
        rb = self.rb
        at, n = (
            (rb.props_at, rb.props_len)
            if keep is None
            else (np.where(keep, rb.props_at, 0), np.where(keep, rb.props_len, 0))
        )
        return b"\0".join(map(self.buf.__getitem__, map(slice, at.tolist(), (at + n).tolist()))) + b"\0"

    @cached_property
    def properties(self) -> Properties:
        """The block's PROPERTIES parsed at once, their bytes joined by the C loop where built
        (:func:`~rmqstore_cli.store.records.properties.compiled_join`, else sliced from the mapping)."""
        rb = self.rb
        return Properties(
            self.a, rb.props_at, rb.props_len, self.buf, joined=compiled_join(self.a, rb.props_at, rb.props_len)
        )

    def decode(self) -> dict[str, np.ndarray]:
        """Every field of every record as a column: numbers as int64, byte strings as
        [start, end) positions in the file (topic as an index into :attr:`topics`),
        PROPERTIES parsed into pairs (owner record, name and value ranges in
        ``properties.cat``, the parser's rules) and the TAGS/KEYS/UNIQ_KEY values found;
        the offset msgId as 16 raw bytes per IPv4 record. What a columnar consumer reads."""
        rb, P = self.rb, self.properties
        out = {
            "physical_offset": rb.physical_offset,
            "total_size": rb.total,
            "magic": rb.magic,
            "body_crc": rb.body_crc,
            "queue_id": rb.queue_id,
            "flag": self.flag,
            "queue_offset": rb.queue_offset,
            "sys_flag": rb.sys_flag,
            "born_timestamp": self.born_timestamp,
            "store_timestamp": self.store_timestamp,
            "reconsume_times": self.reconsume_times,
            "prepared_transaction_offset": self.prepared_transaction_offset,
            "body": np.c_[rb.body_at, rb.body_at + rb.body_len],
            "topic": self.topics[1],
        }
        for which in ("born", "store"):
            at, size, port = self.host(which)
            out[f"{which}_address"], out[f"{which}_port"] = np.c_[at, at + size], port
        if P.tot:
            out["property_owner"] = P.owner
            out["property_name"] = np.c_[P.starts, np.clip(P.first1, P.starts, P.end)]
            out["property_value"] = np.c_[np.minimum(P.first1 + 1, P.end), P.end]
            for name in ("TAGS", "KEYS", "UNIQ_KEY"):
                m, a, b = P.value(name.encode() + b"\x01")
                out[name.lower()] = np.c_[m, a, b]
        out["msg_id"] = self.msg_id_bytes(np.arange(self.n))
        return out

    def msg_id_bytes(self, t: np.ndarray) -> np.ndarray:
        """``MessageDecoder#createMessageId`` of records ``t`` with an IPv4 store host: store
        address, port and the stored PHYSICALOFFSET, 16 bytes a row."""
        a, at = self.a, self.host("store")[0][t]
        phy = byte_rows(a, self.rb.pos[t] + _PHY.offset, _PHY.size)
        return np.concatenate([byte_rows(a, at, HOST_SIZE[False]), phy], axis=1)

    def properties_holding(self, needle: bytes) -> np.ndarray:
        """Whether each record's PROPERTIES bytes hold ``needle`` (non-empty): the bytes are
        searched once for the block, so the Python work follows the hits, not the records."""
        rb = self.rb
        held = np.zeros(self.n, bool)
        if not self.n:
            return held
        lo, hi = int(rb.pos[0]), self.next_pos
        seg = self.a[lo:hi].tobytes()  # at most MAX_BLOCK_BYTES
        hits, i = [], seg.find(needle)
        while i >= 0:
            hits.append(i + lo)
            i = seg.find(needle, i + 1)
        if hits:
            at = np.asarray(hits, np.int64)
            row = np.searchsorted(rb.props_at, at, "right") - 1
            ok = row >= 0
            row, at = row[ok], at[ok]
            ok = at + len(needle) <= rb.props_at[row] + rb.props_len[row]  # inside that record's PROPERTIES
            held[row[ok]] = True
        return held

    # ------------------------------------------------------------- objects
    def messages(self, idx: np.ndarray | None = None) -> list[Message]:
        """The records (or those at ``idx``) as the per-record scan gives them."""
        rb, buf = (self.rb if idx is None else self.rb.take(idx)), self.buf
        bh, sh = rb.born_host_len.tolist(), rb.store_host_len.tolist()
        body_at, body_end = rb.body_at.tolist(), (rb.body_at + rb.body_len).tolist()
        t_at, t_end = rb.topic_at.tolist(), (rb.topic_at + rb.topic_len).tolist()
        p_at, p_end = rb.props_at.tolist(), (rb.props_at + rb.props_len).tolist()
        born_at = (rb.pos + HEAD_SIZE).tolist()
        store_at = rb.store_host_at.tolist()
        out = []
        port = _PORT_UNPACK
        ps = PORT.size
        sub = (lambda c: c) if idx is None else (lambda c: c[idx])
        for i, phy, total, magic, crc, qid, flag, qoff, sf, bts, sts, rc, pto, off in zip(
            range(rb.pos.size),
            rb.physical_offset.tolist(),
            rb.total.tolist(),
            rb.magic.tolist(),
            rb.body_crc.tolist(),
            rb.queue_id.tolist(),
            sub(self.flag).tolist(),
            rb.queue_offset.tolist(),
            rb.sys_flag.tolist(),
            sub(self.born_timestamp).tolist(),
            rb.store_timestamp.tolist(),
            sub(self.reconsume_times).tolist(),
            sub(self.prepared_transaction_offset).tolist(),
            (rb.pos + self.file_from).tolist(),
            strict=True,
        ):
            b, s = born_at[i], store_at[i]
            bl, sl = bh[i] - ps, sh[i] - ps
            out.append(
                Message(
                    phy,
                    total,
                    magic,
                    crc,
                    qid,
                    flag,
                    qoff,
                    sf,
                    bts,
                    bytes(buf[b : b + bl]),
                    port(buf, b + bl)[0],
                    sts,
                    bytes(buf[s : s + sl]),
                    port(buf, s + sl)[0],
                    rc,
                    pto,
                    bytes(buf[body_at[i] : body_end[i]]),
                    bytes(buf[t_at[i] : t_end[i]]),
                    bytes(buf[p_at[i] : p_end[i]]),
                    off,
                )
            )
        return out


def valid_block(
    buf,
    a: np.ndarray,
    pos: int,
    stop: int,
    file_from: int,
    file_name: str,
    max_n: int,
    check_crc: bool,
    topic_table: TopicIds | None = None,
    header: int = 0,
    walk_end: int | None = None,
) -> MessageBlock | None:
    """The longest run of records from ``pos`` that ``check_message`` would call VALID,
    judged by a test that implies its verdict: magic V1/V2, non-negative BODY, TOPIC and
    PROPERTIES lengths adding up to TOTALSIZE (``calMsgLength``) inside the file, and the
    body CRC when asked. None when the record at ``pos`` is not such a record. ``header``:
    the DLedger entry header before each record (``pos`` is then an entry start); ``walk_end``:
    records end there at the latest (a part of a file, whose pages past it another process
    reads), else at the file's end."""
    starts = walk_records(buf, pos, len(buf) if walk_end is None else walk_end, max_n, a=a, header=header).starts
    if starts.size and starts[-1] >= min(stop, pos + MAX_BLOCK_BYTES):  # big records: fewer per block
        starts = starts[: max(np.searchsorted(starts, min(stop, pos + MAX_BLOCK_BYTES)), int(starts[0] < stop))]
    if not starts.size:
        return None
    rb = RecordBatch.read(a, starts)
    ok = (rb.body_len >= 0) & (rb.topic_len >= 0) & (rb.props_len >= 0) & (rb.expected == rb.total)
    if check_crc and ok.any():
        crc = body_crcs(buf, rb.body_at, np.maximum(rb.body_len, 0))
        ok &= (crc == rb.body_crc) | (rb.body_len == 0)
    bad = np.flatnonzero(~ok)
    cut = int(bad[0]) if bad.size else rb.pos.size
    if cut == 0:
        return None
    return MessageBlock(buf, a, rb.head(cut) if cut < rb.pos.size else rb, file_from, file_name, topic_table)
