"""The write path a block at a time (issue 23): many sends encoded as records at once.

The bulk twin of :func:`~rmqstore_cli.store.commitlog.encode_record` (one record,
``MessageExtEncoder#encode``) and :meth:`CommitLog.append
<rmqstore_cli.store.commitlog.CommitLog.append>` (``DefaultAppendMessageCallback#doAppend``):
a :class:`SendBlock` holds sends as columns; :func:`encode_records` packs the fixed fields of
every record with numpy (positions and dtypes from ``formats/commitlog.py``) and
:func:`encode_join` (its C twin when built: one new ``bytes``, no object a record) joins them
with their body CRCs, the bodies, topics and properties. Queue offsets, physical offsets
and the file roll are assigned for the whole block by ``CommitLog.append_block``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np
from rmqstore_cli.formats.commitlog import (
    AFTER_BORN_HOST,
    AFTER_BORN_HOST_SIZE,
    AFTER_STORE_HOST,
    AFTER_STORE_HOST_SIZE,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    HEAD,
    HEAD_SIZE,
    HOST_ADDRESS_SIZE,
    HOST_SIZE,
    MAGIC_V1,
    MAGIC_V2,
    PORT,
    PROPERTIES_LENGTH,
    RECORD_FIXED_SIZE,
    STOREHOSTADDRESS_V6_FLAG,
    TOPIC_LENGTH,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
)
from rmqstore_cli.formats.properties import MAX_PROPERTIES_LENGTH

from rmqstore_cli.store.files.arrays import stable_argsort
from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.files.fastpaths import FAST_PATHS

#: What a send is to the writer's transaction links (``StoreWriter.append_linked``): it
#: sets the pending record (half, prepared), answers it (commit, rollback: its
#: PREPAREDTRANSACTIONOFFSET), or is its op record (body = the half's queue offset).
KIND_LINKS = {"half": 1, "prepared": 1, "commit": 2, "rollback": 2, "op": 3}
#: A block holds at most about this many bytes of bodies (or of dump lines), whatever its
#: count of sends: memory stays bounded with large messages.
BLOCK_BYTES = 32 << 20
_WIDE = HOST_ADDRESS_SIZE[True]


@dataclass
class SendBlock:
    """Sends as columns (the bulk twin of a list of ``(kind, AppendSpec)``). Topics and
    host addresses are ids into the ``topics`` and ``hosts`` tables; ``magic`` 0 lets the
    topic choose (``choose_magic``); ``queue_offset``/``physical_offset`` -1 are assigned."""

    topics: list[str]
    hosts: list[bytes]
    tid: np.ndarray
    queue_id: np.ndarray
    flag: np.ndarray
    sys_flag: np.ndarray
    born_ts: np.ndarray
    store_ts: np.ndarray
    born_host: np.ndarray
    born_port: np.ndarray
    store_host: np.ndarray
    store_port: np.ndarray
    reconsume: np.ndarray
    prepared: np.ndarray
    magic: np.ndarray
    queue_offset: np.ndarray
    physical_offset: np.ndarray
    bodies: list[bytes]
    props: list[bytes]
    kinds: list[str] = field(default_factory=list)
    #: generate's rule: a store time never goes below the previous record's
    floor_store_ts: bool = False
    #: the ``(kind, AppendSpec)`` pairs the block was made of (:meth:`from_specs`), if any
    source: list | None = None
    #: the properties are stored bytes already (a replayed dump's: ``AppendSpec.raw_properties``)
    raw_props: bool = True
    #: :data:`KIND_LINKS` of ``kinds``, when the maker has them as a column (else
    #: :meth:`link_codes` computes them once)
    links: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.bodies)

    @classmethod
    def from_specs(cls, sends: list, floor_store_ts: bool = False) -> SendBlock:
        """Columns of ``(kind, AppendSpec)`` pairs (a workload's or a replayed dump's)."""
        topics: dict[str, int] = {}
        hosts: dict[bytes, int] = {}
        rows = []
        for _, s in sends:
            t = topics.setdefault(s.topic, len(topics))
            b = hosts.setdefault(s.born_host[0], len(hosts))
            h = hosts.setdefault(s.store_host[0], len(hosts))
            rows.append(
                (
                    t,
                    s.queue_id,
                    s.flag,
                    s.sys_flag,
                    s.born_timestamp,
                    s.store_timestamp,
                    b,
                    s.born_host[1],
                    h,
                    s.store_host[1],
                    s.reconsume_times,
                    s.prepared_transaction_offset,
                    s.magic or 0,
                    -1 if s.queue_offset is None else s.queue_offset,
                    -1 if s.physical_offset is None else s.physical_offset,
                )
            )
        cols = np.array(rows, dtype=np.int64).reshape(-1, 15).T
        props = [
            p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in (s.properties for _, s in sends)
        ]
        return cls(
            list(topics),
            list(hosts),
            *cols,
            bodies=[s.body for _, s in sends],
            props=props,
            kinds=[k for k, _ in sends],
            floor_store_ts=floor_store_ts,
            source=sends,
        )

    def specs(self) -> Iterator[tuple[str, object]]:
        """The block as ``(kind, AppendSpec)`` pairs, for the per-record path (the reference)."""
        from rmqstore_cli.store.commitlog.append import AppendSpec

        if self.source is not None:
            yield from self.source
            return
        cols = [
            c.tolist()
            for c in (
                self.tid,
                self.queue_id,
                self.flag,
                self.sys_flag,
                self.born_ts,
                self.store_ts,
                self.born_host,
                self.born_port,
                self.store_host,
                self.store_port,
                self.reconsume,
                self.prepared,
                self.magic,
                self.queue_offset,
                self.physical_offset,
            )
        ]
        kinds = self.kinds or ["normal"] * len(self)
        for i, (t, q, fl, sf, bt, st, bh, bp, sh, sp, rc, pr, mg, qo, po) in enumerate(zip(*cols, strict=True)):
            props = self.props[i] if self.raw_props else self.props[i].decode("utf-8", "surrogatepass")
            yield (
                kinds[i],
                AppendSpec(
                    self.topics[t],
                    q,
                    self.bodies[i],
                    props,
                    st,
                    bt,
                    (self.hosts[bh], bp),
                    (self.hosts[sh], sp),
                    flag=fl,
                    sys_flag=sf,
                    reconsume_times=rc,
                    prepared_transaction_offset=pr,
                    magic=mg or None,
                    queue_offset=None if qo < 0 else qo,
                    physical_offset=None if po < 0 else po,
                    raw_properties=self.raw_props,
                ),
            )

    def rows(self, i: int, j: int) -> SendBlock:
        """Sends ``[i, j)`` as a block of their own (the writer's cut, ``FAST_PATHS.gen_block``)."""
        cut = {f: getattr(self, f)[i:j] for f in _COLUMNS}
        return SendBlock(
            self.topics,
            self.hosts,
            **cut,
            bodies=self.bodies[i:j],
            props=self.props[i:j],
            kinds=self.kinds[i:j],
            floor_store_ts=self.floor_store_ts,
            source=None if self.source is None else self.source[i:j],
            raw_props=self.raw_props,
            links=None if self.links is None else self.links[i:j],
        )

    def link_codes(self) -> np.ndarray:
        """:data:`KIND_LINKS` per send (0: no link), computed once per block."""
        if self.links is None:
            get = KIND_LINKS.get
            self.links = np.fromiter((get(k, 0) for k in self.kinds), np.int8, len(self.kinds))
            if not self.kinds:
                self.links = np.zeros(len(self), np.int8)
        return self.links

    def sends(self) -> int:
        """How many of the block's records are sends (``--messages`` counts them): all but the
        records a transaction adds after its send (commit, rollback, op)."""
        return len(self) - int(np.count_nonzero(self.link_codes() >= KIND_LINKS["commit"]))


_COLUMNS = (
    "tid",
    "queue_id",
    "flag",
    "sys_flag",
    "born_ts",
    "store_ts",
    "born_host",
    "born_port",
    "store_host",
    "store_port",
    "reconsume",
    "prepared",
    "magic",
    "queue_offset",
    "physical_offset",
)


def send_blocks(sends: Iterable[tuple[str, object]], size: int, floor_store_ts: bool) -> Iterator[SendBlock]:
    """``(kind, AppendSpec)`` pairs as blocks of at most ``size`` sends and about
    :data:`BLOCK_BYTES` of bodies (bounded memory)."""
    chunk: list = []
    held = 0
    for item in sends:
        chunk.append(item)
        held += len(item[1].body)
        if len(chunk) >= size or held >= BLOCK_BYTES:
            yield SendBlock.from_specs(chunk, floor_store_ts)
            chunk, held = [], 0
    if chunk:
        yield SendBlock.from_specs(chunk, floor_store_ts)


def pending_rows(links: np.ndarray) -> np.ndarray:
    """Per send, the row of the latest half/prepared send before it in the block (-1: one
    of an earlier block): the record a commit, rollback or op answers."""
    at = np.where(links == 1, np.arange(links.size), -1)
    last = np.maximum.accumulate(at) if at.size else at
    return np.concatenate([[-1], last[:-1]]).astype(np.int64)


def assign_queue_offsets(block: SendBlock, table: dict[str, int]) -> tuple[np.ndarray, dict[str, int]]:
    """``CommitLog#asyncPutMessage``'s queue offsets for the block (``topicQueueTable``, NOT and
    COMMIT records only, the next of their queue; others keep a given offset or 0) and the
    table's new entries (``table`` itself is left alone until the block is written). A
    block either gives every offset (a replayed dump) or none."""
    updates: dict[str, int] = {}
    tran = block.sys_flag & TRANSACTION_MASK
    counted = (tran == TRANSACTION_NOT_TYPE) | (tran == TRANSACTION_COMMIT_TYPE)
    given = block.queue_offset >= 0
    qoff = np.where(given, block.queue_offset, 0)
    rows = np.flatnonzero(counted)
    if not rows.size:
        return qoff, updates
    key = block.tid[rows] * (1 << 32) + (block.queue_id[rows] & 0xFFFFFFFF)
    order = stable_argsort(key)
    sk = key[order]
    starts = np.flatnonzero(np.concatenate([[True], sk[1:] != sk[:-1]]))
    ends = np.append(starts[1:], rows.size)
    rank = np.arange(rows.size) - np.repeat(starts, ends - starts)
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        r = rows[order[s:e]]
        name = f"{block.topics[int(block.tid[r[0]])]}-{int(block.queue_id[r[0]])}"
        if given[r[0]]:
            updates[name] = int(qoff[r[-1]]) + 1
            continue
        base = table.get(name, 0)
        qoff[r] = base + rank[s:e]
        updates[name] = base + (e - s)
    return qoff, updates


def plan_files(write_offset: int, file_from: int, file_size: int, sizes: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Where ``doAppend`` puts each record: ``(file_from, pos, first, end)`` per run of records
    ``[first, end)`` written at ``pos`` of the file starting at ``file_from``; a record that
    leaves less than ``END_FILE_MIN_BLANK_LENGTH`` after it goes to the next file, after a
    BLANK (``END_OF_FILE``) at the end of this one. ``sizes`` all fit an empty file."""
    plan = []
    pos, i, n = write_offset - file_from, 0, sizes.size
    while i < n:
        ends = pos + np.cumsum(sizes[i:])
        k = int(np.searchsorted(ends, file_size - END_FILE_MIN_BLANK_LENGTH, side="right"))
        if k:
            plan.append((file_from, pos, i, i + k))
            i += k
            pos = int(ends[k - 1])
        if i < n:
            file_from, pos = file_from + file_size, 0
    return plan


def host_kinds(block: SendBlock) -> tuple[np.ndarray, np.ndarray]:
    """BORNHOST and STOREHOST are IPv6 (16-byte addresses), per send."""
    wide = np.array([len(h) == _WIDE for h in block.hosts], bool)
    return wide[block.born_host], wide[block.store_host]


def record_sizes(
    block: SendBlock,
    magic: np.ndarray,
    bv6: np.ndarray,
    sv6: np.ndarray,
    topic_bytes: list[bytes],
    blen: np.ndarray,
    plen: np.ndarray,
) -> np.ndarray:
    """``MessageExtEncoder#calMsgLength`` of every send (``formats.commitlog.record_length``)."""
    tlen = np.array([len(t) for t in topic_bytes], np.int64)[block.tid]
    return (
        RECORD_FIXED_SIZE
        + np.where(bv6, HOST_SIZE[True], HOST_SIZE[False])
        + np.where(sv6, HOST_SIZE[True], HOST_SIZE[False])
        + np.where(magic == MAGIC_V2, TOPIC_LENGTH[True].size, TOPIC_LENGTH[False].size)
        + blen
        + tlen
        + plen
    )


def block_problem(block: SendBlock, magic: np.ndarray, topic_bytes: list[bytes], plen: np.ndarray) -> bool:
    """A send ``encode_record`` refuses (properties too long, a long topic in a V1 record):
    the block then goes through the per-record path, which says which and where."""
    if plen.size and int(plen.max()) > MAX_PROPERTIES_LENGTH:
        return True
    tl = np.array([len(t) for t in topic_bytes], np.int64)[block.tid]
    return bool(np.any((magic == MAGIC_V1) & (tl > 127)))


@functools.lru_cache(maxsize=4)
def fixed_dtype(born_v6: bool, store_v6: bool) -> np.dtype:
    """TOTALSIZE … BODYLENGTH for the given host kinds as one packed numpy record (the fields
    and big-endian dtypes of ``formats.commitlog``: HEAD, BORNHOST, AFTER_BORN_HOST, STOREHOST,
    AFTER_STORE_HOST), so a block's fixed fields are columns assigned at once."""
    fields = [(n, f.dtype) for n, f in HEAD.items()]
    fields += [("born_address", np.uint8, (HOST_ADDRESS_SIZE[born_v6],)), ("born_port", PORT.dtype)]
    fields += [(n, f.dtype) for n, f in AFTER_BORN_HOST.items()]
    fields += [("store_address", np.uint8, (HOST_ADDRESS_SIZE[store_v6],)), ("store_port", PORT.dtype)]
    fields += [(n, f.dtype) for n, f in AFTER_STORE_HOST.items()]
    dt = np.dtype(fields)
    assert (
        dt.itemsize
        == HEAD_SIZE + HOST_SIZE[born_v6] + AFTER_BORN_HOST_SIZE + HOST_SIZE[store_v6] + AFTER_STORE_HOST_SIZE
    )
    return dt


def encode_records(block: SendBlock, i: int, j: int, cols: dict, topic_parts: list[bytes]) -> tuple[bytes, np.ndarray]:
    """``MessageExtEncoder#encode`` of sends ``[i, j)`` with their ``cols`` (total, magic,
    sys_flag, queue_offset, phy, prepared, bv6, sv6, store_ts, body_len, props_len: per send
    of the block): the records' bytes, one after the other, and where each starts. The fixed
    fields are packed by numpy, one array per pair of host kinds; :func:`encode_join` (the C
    loop when built) adds the body CRCs and joins them with the bodies, topics and properties."""
    c = {
        "total_size": cols["total"],
        "magic": cols["magic"],
        "queue_id": block.queue_id,
        "flag": block.flag,
        "queue_offset": cols["queue_offset"],
        "physical_offset": cols["phy"],
        "sys_flag": cols["sys_flag"],
        "born_timestamp": block.born_ts,
        "born_port": block.born_port,
        "store_timestamp": cols["store_ts"],
        "store_port": block.store_port,
        "reconsume_times": block.reconsume,
        "prepared_transaction_offset": cols["prepared"],
        "body_length": cols["body_len"],
    }
    c = {k: v[i:j] for k, v in c.items()}
    table = np.zeros((max(1, len(block.hosts)), _WIDE), np.uint8)
    for h, addr in enumerate(block.hosts):
        table[h, : len(addr)] = np.frombuffer(addr, np.uint8)
    born, store = block.born_host[i:j], block.store_host[i:j]
    grp = 2 * cols["bv6"][i:j].astype(np.int64) + cols["sv6"][i:j]
    fixed = []
    for g, (b6, s6) in enumerate(_HOST_PAIRS):
        rows = np.flatnonzero(grp == g)
        arr = np.zeros(rows.size, fixed_dtype(b6, s6))  # BODYCRC: the join's
        for name in arr.dtype.names:
            if name == "born_address":
                arr[name] = table[born[rows], : HOST_ADDRESS_SIZE[b6]]
            elif name == "store_address":
                arr[name] = table[store[rows], : HOST_ADDRESS_SIZE[s6]]
            elif name in c:
                arr[name] = c[name][rows]
        fixed.append(arr.view(np.uint8).reshape(-1))
    gsize = np.array([fixed_dtype(b6, s6).itemsize for b6, s6 in _HOST_PAIRS], np.int64)
    pidx = 2 * block.tid[i:j].astype(np.int64) + (cols["magic"][i:j] == MAGIC_V2)
    k = FAST_PATHS.kernels()
    join = encode_join if k is None else k.encode_join
    data = join(fixed, gsize, grp, block.bodies[i:j], topic_parts, pidx, block.props[i:j], *_JOIN_LAYOUT)
    rec_start = np.concatenate([[0], np.cumsum(cols["total"][i:j])[:-1]]).astype(np.int64)
    return data, rec_start


#: The pairs of host kinds (born IPv6, store IPv6): group ``2 * born + store`` of encode_join.
_HOST_PAIRS = ((False, False), (False, True), (True, False), (True, True))
#: What encode_join writes besides the parts: where BODYCRC lies, PROPERTIESLENGTH's size.
_JOIN_LAYOUT = (HEAD["body_crc"].offset, PROPERTIES_LENGTH.size)


def encode_join(
    fixed: list,
    gsize: np.ndarray,
    grp: np.ndarray,
    bodies: list,
    parts: list,
    pidx: np.ndarray,
    props: list,
    crc_at: int,
    plen_size: int,
) -> bytes:
    """The reference of the C ``encode_join``: record ``r`` is the next row of ``fixed[grp[r]]``
    (rows of ``gsize[g]`` bytes, in order) with ``crc32(bodies[r]) & 0x7FFFFFFF`` (``UtilAll#crc32``)
    big-endian at ``crc_at``, then ``bodies[r]``, ``parts[pidx[r]]`` (TOPICLENGTH + TOPIC),
    PROPERTIESLENGTH (``plen_size`` big-endian bytes) and ``props[r]``."""
    n = len(bodies)
    if len(grp) != n or len(pidx) != n or len(props) != n or len(gsize) != len(fixed):
        raise ValueError("encode_join: grp, pidx, bodies and props differ in length, or gsize is not one a group")
    if n and (int(grp.min()) < 0 or int(grp.max()) >= len(fixed)):
        raise ValueError("encode_join: a record's group is out of range")
    crc = np.fromiter(map(crc32, bodies), np.int64, n) & 0x7FFFFFFF
    rows = np.empty(n, object)
    for g, (f, size) in enumerate(zip(fixed, gsize.tolist(), strict=True)):
        at = np.flatnonzero(grp == g)
        a = np.frombuffer(f, np.uint8).reshape(-1, size).copy() if size else np.empty((0, 0), np.uint8)
        if a.shape[0] != at.size or size < crc_at + 4:
            raise ValueError(f"encode_join: group {g} holds {a.shape[0]} rows of {size} bytes, needs {at.size}")
        a[:, crc_at : crc_at + 4] = _big_endian(crc[at], 4)
        rows[at] = row_bytes(a)
    lens = np.fromiter(map(len, props), np.int64, n)
    if np.any(lens >= 1 << (8 * plen_size - 1)) or np.any((pidx < 0) | (pidx >= len(parts))):
        raise ValueError("encode_join: a topic part or properties length out of range")
    out: list = [b""] * (5 * n)
    out[0::5], out[1::5], out[4::5] = rows.tolist(), bodies, props
    out[2::5] = list(map(parts.__getitem__, pidx.tolist()))
    out[3::5] = row_bytes(_big_endian(lens, plen_size)) if n else []
    return b"".join(out)


def _big_endian(values: np.ndarray, size: int) -> np.ndarray:
    """Each of ``values`` (non-negative, below ``256 ** size``) as ``size`` big-endian bytes, a row each."""
    return ((values[:, None] >> (8 * np.arange(size - 1, -1, -1))) & 0xFF).astype(np.uint8)


def row_bytes(rows: np.ndarray) -> list[bytes]:
    """Each row of a 2-D uint8 array as one ``bytes`` (a void view's ``tolist``: every byte
    kept, NULs too, no Python slice a row)."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.shape[1]))).ravel().tolist()


def dispatch_fields(block: SendBlock, i: int, j: int, cols: dict, starts: np.ndarray) -> dict[str, np.ndarray]:
    """What the reput reads of records ``[i, j)`` just encoded at ``starts`` (the columns of
    ``FastDispatcher.fields``), from the block's columns instead of the bytes: where each
    record's topic and properties lie, and its fixed fields."""
    bv6, sv6, v2 = cols["bv6"][i:j], cols["sv6"][i:j], cols["magic"][i:j] == MAGIC_V2
    body_at = (
        starts
        + HEAD_SIZE
        + AFTER_BORN_HOST_SIZE
        + AFTER_STORE_HOST_SIZE
        + np.where(bv6, HOST_SIZE[True], HOST_SIZE[False])
        + np.where(sv6, HOST_SIZE[True], HOST_SIZE[False])
    )
    topic_at = body_at + cols["body_len"][i:j] + np.where(v2, TOPIC_LENGTH[True].size, TOPIC_LENGTH[False].size)
    topic_len = np.array([len(t.encode("utf-8", "surrogatepass")) for t in block.topics], np.int64)[block.tid[i:j]]
    return {
        "total": cols["total"][i:j],
        "queue_id": block.queue_id[i:j],
        "queue_offset": cols["queue_offset"][i:j],
        "phy": cols["phy"][i:j],
        "sys_flag": cols["sys_flag"][i:j],
        "store_ts": cols["store_ts"][i:j],
        "topic_len": topic_len,
        "topic_at": topic_at,
        "props_len": cols["props_len"][i:j],
        "props_at": topic_at + topic_len + PROPERTIES_LENGTH.size,
    }


def topic_parts(topic_bytes: list[bytes]) -> list[bytes]:
    """TOPICLENGTH + topic per topic id, V1 then V2 (index ``2 * id + is_v2``); the lengths
    packed by numpy for every topic at once (a block of 20 000 topics: no array a topic)."""
    lens = np.fromiter(map(len, topic_bytes), np.int64, len(topic_bytes))
    out: list[bytes] = [b""] * (2 * len(topic_bytes))
    for v2 in (False, True):
        f = TOPIC_LENGTH[v2]
        fits = lens < 1 << (8 * f.size - 1)  # a V1 part of a long topic is never used
        heads = row_bytes(np.where(fits, lens, 0).astype(f.dtype).view(np.uint8).reshape(lens.size, f.size))
        out[v2::2] = list(map(bytes.__add__, heads, topic_bytes))
    return out


def v6_flags(sys_flag: np.ndarray, bv6: np.ndarray, sv6: np.ndarray) -> np.ndarray:
    """SYSFLAG with the host-kind bits set from the hosts, as ``encode_record`` does."""
    s = sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    return s | np.where(bv6, BORNHOST_V6_FLAG, 0) | np.where(sv6, STOREHOSTADDRESS_V6_FLAG, 0)
