"""Broker config kept in RocksDB (5.x, ``storeType=defaultRocksDB`` or
``configManagerVersion=v2``), read-only, as the broker loads it: topics for the topic
lists, consumer offsets for consumer-progress. Layouts: ``formats/rocksdb_cq.py``.

* v1, one database per table under ``config/``: ``topics/`` (``RocksDBTopicConfigManager``:
  key the topic, value its fastjson ``TopicConfig``) and ``consumerOffsets/``
  (``RocksDBConsumerOffsetManager#decodeOffset``: key ``topic@group``, value
  ``RocksDBOffsetSerializeWrapper``, ``{"offsetTable":{queueId:offset}}``).
* v2, ``config/rdb/`` (``ConfigStorage``): typed keys, ``TopicConfigManagerV2#parseTopicConfig``
  and ``ConsumerOffsetManagerV2#loadConsumerOffsets`` (an 8-byte offset per queue).

The broker merges the JSON files over v1 when their data version is newer (``#merge``);
consumer-progress shows both, each row naming where it came from.
"""

from __future__ import annotations

import struct
from pathlib import Path

from rmqstore_cli.formats import rocksdb_cq as fmt

from rmqstore_cli.store.layout.configfiles import DecodeError
from rmqstore_cli.store.layout.offsets import OffsetTable, decode_wrapper_offsets

_V2_OFFSET = struct.Struct(fmt.V2_OFFSET_VALUE_FORMAT)


def is_db(directory: Path) -> bool:
    """A RocksDB database is there (its ``CURRENT`` file)."""
    return (directory / "CURRENT").is_file()


def _v2_prefix(table_id: int) -> bytes:
    return fmt.V2KeyHead.build({"table_prefix": fmt.V2_TABLE, "table_id": table_id, "record_prefix": fmt.V2_DATA})


def _rows(directory: Path, prefix: bytes = b""):
    """(key, value) of the default family from ``prefix`` on, the database opened read-only."""
    from rmqstore_cli.store.files.rocksdb_db import ReadOnlyDB

    db = ReadOnlyDB(directory, f"the RocksDB config {directory.name}")
    try:
        for key, value in db.db.items(from_key=prefix):
            if not key.startswith(prefix):
                break
            yield key, value
    finally:
        db.close()


def topics(config_dir: Path) -> set[str]:
    """Topic names of ``config/topics/`` (v1) and ``config/rdb/`` (v2), where present."""
    names: set[str] = set()
    if is_db(config_dir / fmt.CONFIG_V1_TOPICS):
        names |= {k.decode("utf-8", "replace") for k, _ in _rows(config_dir / fmt.CONFIG_V1_TOPICS)}
    if is_db(config_dir / fmt.CONFIG_V2_DIR):
        for key, _ in _rows(config_dir / fmt.CONFIG_V2_DIR, _v2_prefix(fmt.V2_TOPIC)):
            try:
                names.add(fmt.V2NameKey.parse(key).name.decode("utf-8", "replace"))
            except Exception:  # construct: a key off the layout is not a topic
                continue
    return names


def consumer_offsets(config_dir: Path) -> list[OffsetTable]:
    """The consumer-offset tables in RocksDB, where present, in the shape of
    ``consumerOffset.json``'s (``topic@group`` -> queue id -> offset); a row that does not
    decode is a warning of its table, as the broker logs and skips it."""
    out = []
    v1 = config_dir / fmt.CONFIG_V1_CONSUMER_OFFSETS
    if is_db(v1):
        t = OffsetTable({}, v1)
        for key, value in _rows(v1):
            name = key.decode("utf-8", "replace")
            try:
                t.table[name] = decode_wrapper_offsets(value, name)
            except DecodeError as e:
                t.warnings.append(f"{v1}: the offsets of {name!r} do not decode ({e.what}); skipped")
        out.append(t)
    v2 = config_dir / fmt.CONFIG_V2_DIR
    if is_db(v2):
        t = OffsetTable({}, v2)
        for key, value in _rows(v2, _v2_prefix(fmt.V2_CONSUMER_OFFSET)):
            try:
                k = fmt.V2OffsetKey.parse(key)
            except Exception:
                t.warnings.append(f"{v2}: consumer-offset key {key[:80].hex()} is not in the v2 layout; skipped")
                continue
            if len(value) != fmt.V2_OFFSET_VALUE_SIZE:
                t.warnings.append(f"{v2}: consumer offset of key {key[:80].hex()} has {len(value)} bytes; skipped")
                continue
            name = f"{k.topic.decode('utf-8', 'replace')}@{k.group.decode('utf-8', 'replace')}"
            t.table.setdefault(name, {})[k.queue_id] = _V2_OFFSET.unpack(value)[0]
        out.append(t)
    return out
