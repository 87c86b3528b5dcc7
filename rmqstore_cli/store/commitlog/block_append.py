"""The arithmetic of appending a :class:`~rmqstore_cli.store.commitlog.blocks.SendBlock` at once
(numpy): which blocks the bulk path may take, the records' magic codes, queue offsets, sizes,
physical offsets and the columns :func:`~rmqstore_cli.store.commitlog.blocks.encode_records`
writes. The writer (:meth:`~rmqstore_cli.store.commitlog.writing.LogWriter.append_block`)
holds the state; this module only computes, so that the per-record path never loads numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rmqstore_cli.formats.commitlog import END_FILE_MIN_BLANK_LENGTH

from rmqstore_cli.store.commitlog import blocks as B
from rmqstore_cli.store.commitlog.blocks import SendBlock
from rmqstore_cli.store.commitlog.encode import choose_magic
from rmqstore_cli.store.files.mapped_files import MAX_FILE_OFFSET
from rmqstore_cli.store.layout.config import StoreConfig

#: ``SendBlock.link_codes``: a record a later commit/rollback or op record answers, a
#: commit/rollback record, an op record (its body names the pending record's queue offset).
LINK_PENDING, LINK_ANSWER, LINK_OP = B.KIND_LINKS["half"], B.KIND_LINKS["commit"], B.KIND_LINKS["op"]


@dataclass(slots=True)
class BlockShape:
    """What a block's records will be, before their place in the log is known."""

    topic_bytes: list[bytes]
    magic: np.ndarray
    body_len: np.ndarray
    props_len: np.ndarray
    links: np.ndarray
    pending_row: np.ndarray
    queue_offset: np.ndarray
    queue_updates: dict[str, int]
    born_v6: np.ndarray
    store_v6: np.ndarray
    sizes: np.ndarray


def follows_on(block: SendBlock, write_offset: int) -> bool:
    """A dump's block keeps its physical offsets only if it gives all of them and starts where
    the log continues; it gives every queue offset or none (else the per-record path says why)."""
    given_phy = block.physical_offset >= 0
    if given_phy.any() and (not given_phy.all() or int(block.physical_offset[0]) != write_offset):
        return False
    given_q = block.queue_offset >= 0
    return bool(given_q.all() or not given_q.any())


def block_shape(
    block: SendBlock, config: StoreConfig, queue_table: dict[str, int], pending: tuple[int, int] | None
) -> BlockShape | None:
    """The block's magic codes, lengths, queue offsets and sizes, or None for a block with a
    record ``encode_record`` would refuse. Rewrites the op records' bodies (they start with the
    pending record's queue offset) as ``StoreWriter.append_linked`` does."""
    topic_bytes = [t.encode("utf-8", "surrogatepass") for t in block.topics]
    magic = np.where(
        block.magic != 0,
        block.magic,
        np.array([choose_magic(t, config) for t in block.topics], np.int64)[block.tid],
    )
    blen = np.fromiter(map(len, block.bodies), np.int64, len(block))
    plen = np.fromiter(map(len, block.props), np.int64, len(block))
    if B.block_problem(block, magic, topic_bytes, plen):
        return None
    links = block.link_codes()
    prow = B.pending_rows(links)
    qoff, updates = B.assign_queue_offsets(block, queue_table)
    _name_pending_in_op_bodies(block, links, prow, qoff, pending, blen)
    bv6, sv6 = B.host_kinds(block)
    sizes = B.record_sizes(block, magic, bv6, sv6, topic_bytes, blen, plen)
    return BlockShape(topic_bytes, magic, blen, plen, links, prow, qoff, updates, bv6, sv6, sizes)


def _name_pending_in_op_bodies(
    block: SendBlock,
    links: np.ndarray,
    prow: np.ndarray,
    qoff: np.ndarray,
    pending: tuple[int, int] | None,
    blen: np.ndarray,
) -> None:
    """Prefix each op record's body with its pending record's queue offset: a row of this block,
    else the ``pending`` record an earlier block left (none: the body stays as it is)."""
    for i in np.flatnonzero(links == LINK_OP).tolist():
        p = int(prow[i])
        if p >= 0 or pending is not None:
            block.bodies[i] = str(int(qoff[p]) if p >= 0 else pending[1]).encode() + block.bodies[i]
            blen[i] = len(block.bodies[i])


def too_large(sizes: np.ndarray, write_offset: int, file_size: int) -> bool:
    """A record that can never fit a file, or a block that would run near ``Long.MAX_VALUE``:
    left to the per-record path, which says which record and why."""
    return (
        int(sizes.max()) + END_FILE_MIN_BLANK_LENGTH > file_size
        or write_offset + int(sizes.sum()) + 2 * file_size > MAX_FILE_OFFSET
    )


def planned_offsets(plan: list[tuple[int, int, int, int]], sizes: np.ndarray) -> np.ndarray:
    """Each record's physical offset from the file plan (file start, position, rows)."""
    phy = np.empty(len(sizes), np.int64)
    for ff, pos, i, j in plan:
        phy[i:j] = ff + pos + np.concatenate([[0], np.cumsum(sizes[i : j - 1])])
    return phy


def offsets_kept(block: SendBlock, phy: np.ndarray) -> bool:
    """The planned physical offsets are the ones a dump gave (or it gave none)."""
    return not (block.physical_offset >= 0).any() or np.array_equal(phy, block.physical_offset)


def record_columns(
    block: SendBlock, shape: BlockShape, phy: np.ndarray, pending: tuple[int, int] | None, floor: int | None
) -> dict[str, np.ndarray]:
    """The columns :func:`~rmqstore_cli.store.commitlog.blocks.encode_records` writes: a
    commit/rollback record's PREPAREDTRANSACTIONOFFSET is its pending record's offset, and
    store times never go below ``floor`` nor the previous record's."""
    prepared = block.prepared.copy()
    ans = np.flatnonzero(shape.links == LINK_ANSWER)
    if ans.size:
        p = shape.pending_row[ans]
        prepared[ans] = np.where(p >= 0, phy[np.maximum(p, 0)], pending[0] if pending else prepared[ans])
    store_ts = block.store_ts
    if floor is not None:
        store_ts = np.maximum.accumulate(np.maximum(store_ts, floor))
    return {
        "total": shape.sizes,
        "magic": shape.magic,
        "sys_flag": B.v6_flags(block.sys_flag, shape.born_v6, shape.store_v6),
        "queue_offset": shape.queue_offset,
        "phy": phy,
        "prepared": prepared,
        "bv6": shape.born_v6,
        "sv6": shape.store_v6,
        "store_ts": store_ts,
        "body_len": shape.body_len,
        "props_len": shape.props_len,
    }


def next_pending(shape: BlockShape, phy: np.ndarray, pending: tuple[int, int] | None) -> tuple[int, int] | None:
    """The (physical, queue) offset of the block's last pending record, which a later block's
    commit/rollback or op record answers; else the one carried in."""
    last = np.flatnonzero(shape.links == LINK_PENDING)
    if last.size:
        return int(phy[last[-1]]), int(shape.queue_offset[last[-1]])
    return pending
