"""Independent test code that writes a RocksDB consume queue (and RocksDB config) the way a
5.3.3 broker lays it out, through the binding, from the Java's documented layouts
(``RocksDBConsumeQueueTable``, ``RocksDBConsumeQueueOffsetTable``, ``RocksDBConsumerOffsetManager``,
``ConsumerOffsetManagerV2``): ``struct`` here, never rmqstore's formats."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

CTRL_1 = b"\x01"


def cq_key(topic: str, qid: int, cq_offset: int) -> bytes:
    """RocksDBConsumeQueueTable#buildCQKeyByteBuffer0."""
    t = topic.encode()
    return (
        struct.pack(">i", len(t)) + CTRL_1 + t + CTRL_1 + struct.pack(">i", qid) + CTRL_1 + struct.pack(">q", cq_offset)
    )


def cq_value(phy: int, size: int, tags: int, store_time: int) -> bytes:
    """RocksDBConsumeQueueTable#buildCQValueByteBuffer0: 28 bytes."""
    return struct.pack(">qiqq", phy, size, tags, store_time)


def offset_key(topic: str, qid: int, kind: str) -> bytes:
    """RocksDBConsumeQueueOffsetTable#buildOffsetKeyByteBuffer0."""
    t = topic.encode()
    return struct.pack(">i", len(t)) + CTRL_1 + t + CTRL_1 + kind.encode() + CTRL_1 + struct.pack(">i", qid)


def write_cq_db(
    path: Path,
    queues: dict[tuple[str, int], list[tuple[int, int, int, int, int]]],
    offset_family: bool = True,
    checkpoint: int | None = None,
    extra: list[tuple[bytes, bytes]] = (),
) -> None:
    """``queues``: (topic, qid) -> units (cqOffset, phy, size, tags, storeTime). The offset
    family gets min and max rows per queue (#putMaxPhyAndCqOffset, #updateCqOffset) and the
    CHECKPOINT_TOPIC row (#appendMaxPhyOffset)."""
    from rocksdict import AccessType, Options, Rdict

    path.mkdir(parents=True, exist_ok=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(path), options=opts, access_type=AccessType.read_write())
    off = db.create_column_family("offset", Options(raw_mode=True)) if offset_family else None
    for (topic, qid), units in queues.items():
        for cq, phy, size, tags, ts in units:
            db[cq_key(topic, qid, cq)] = cq_value(phy, size, tags, ts)
        if off is not None and units:
            first, last = units[0], units[-1]
            off[offset_key(topic, qid, "min")] = struct.pack(">qq", first[1], first[0])
            off[offset_key(topic, qid, "max")] = struct.pack(">qq", last[1], last[0])
    if off is not None and checkpoint is not None:
        off[offset_key("CHECKPOINT_TOPIC", 0, "max")] = struct.pack(">q", checkpoint)
    for k, v in extra:
        db[k] = v
    db.close()
    for junk in ("rocksdict-config.json",):  # the binding's own file, no broker writes it
        if (path / junk).exists():
            os.unlink(path / junk)


def write_kv_db(path: Path, rows: dict[bytes, bytes]) -> None:
    """A RocksDB of the default family only (the broker's v1 and v2 config databases)."""
    from rocksdict import AccessType, Options, Rdict

    path.mkdir(parents=True, exist_ok=True)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(path), options=opts, access_type=AccessType.read_write())
    for k, v in rows.items():
        db[k] = v
    db.close()
    (path / "rocksdict-config.json").unlink(missing_ok=True)


def v2_offset_key(group: str, topic: str, qid: int) -> bytes:
    """ConsumerOffsetManagerV2#keyOfConsumerOffset."""
    g, t = group.encode(), topic.encode()
    return (
        bytes([1])
        + struct.pack(">h", 1)
        + bytes([2])
        + struct.pack(">h", len(g))
        + g
        + CTRL_1
        + struct.pack(">h", len(t))
        + t
        + CTRL_1
        + struct.pack(">i", qid)
    )


def v2_topic_key(topic: str) -> bytes:
    """ConfigHelper#keyBufOf(TableId.TOPIC, topic)."""
    t = topic.encode()
    return bytes([1]) + struct.pack(">h", 3) + bytes([2]) + struct.pack(">h", len(t)) + t


def file_cq_units(cq_root: Path) -> dict[tuple[str, int], list[tuple[int, int, int, int]]]:
    """The 20-byte units (phy, size, tags) of every file queue, up to each queue's first
    zero unit, keyed by queue, with their cq offsets: (cqOffset, phy, size, tags)."""
    out = {}
    for tdir in sorted(p for p in cq_root.iterdir() if p.is_dir()):
        for qdir in sorted(p for p in tdir.iterdir() if p.is_dir()):
            units = []
            for f in sorted(qdir.iterdir()):
                data = f.read_bytes()
                base = int(f.name) // 20
                for i in range(len(data) // 20):
                    phy, size, tags = struct.unpack_from(">qiq", data, i * 20)
                    if size <= 0:
                        break
                    units.append((base + i, phy, size, tags))
            out[tdir.name, int(qdir.name)] = units
    return out


def to_rocksdb_store(src: Path, dst: Path, store_times: dict[int, int], **kw) -> dict:
    """``dst``: a copy of the file-CQ store ``src`` whose consume queue is a RocksDB
    database holding the same units (store times from ``store_times``: phy -> time), as a
    ``storeType=defaultRocksDB`` broker keeps it. Returns the queues written."""
    shutil.copytree(src, dst)
    units = file_cq_units(dst / "consumequeue")
    shutil.rmtree(dst / "consumequeue")
    queues = {q: [(c, p, s, t, store_times[p]) for c, p, s, t in us] for q, us in units.items()}
    end = max((p + s for us in queues.values() for _, p, s, _, _ in us), default=0)
    write_cq_db(dst / "consumequeue", queues, checkpoint=kw.pop("checkpoint", end), **kw)
    return queues


def store_times(store: Path) -> dict[int, int]:
    """physical offset -> store time of every record (dump-commitlog, the CLI's own reader)."""
    from tests.helpers import cli

    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return {m["physical_offset"]: m["store_timestamp"] for m in map(json.loads, r.stdout.splitlines())}
