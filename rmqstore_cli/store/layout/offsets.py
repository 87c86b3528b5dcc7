"""ConsumerOffsetManager's file, ``config/consumerOffset.json``, read as the broker loads it.

The broker writes it with fastjson (``ConfigManager#persist``), whose integer map keys are
not quoted — ``{"offsetTable":{"T@g":{0:250,1:250}}}`` is not strict JSON — and loads it
with ``ConfigManager#load``: a missing or empty file, or one that does not decode, makes it
read ``consumerOffset.json.bak`` instead (``#loadBak``); a missing or empty ``.bak`` leaves
the table empty (the broker starts with no offsets), a ``.bak`` that does not decode stops
the broker. Keys are ``topic@group`` (``ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rmqstore_cli.errors import StoreError
from rmqstore_cli.store.layout.configfiles import DecodeError, fastjson_object, read_config_text

CONSUMER_OFFSET_FILE = "consumerOffset.json"  # BrokerPathConfigHelper#getConsumerOffsetPath
LMQ_CONSUMER_OFFSET_FILE = "lmqConsumerOffset.json"  # BrokerPathConfigHelper#getLmqConsumerOffsetPath
DELAY_OFFSET_FILE = "delayOffset.json"  # StorePathConfigHelper#getDelayOffsetStorePath
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
#: The name delay-level rows carry as their group: the delay service is the "consumer".
DELAY_GROUP = "ScheduleMessageService"
TOPIC_GROUP_SEPARATOR = "@"


def _int_long_map(queues: dict, key: str) -> dict[int, int]:
    """A fastjson ``Map<Integer, Long>``; what it cannot bind is a DecodeError."""
    row = {}
    for qid, off in queues.items():
        try:
            q = int(qid)
        except ValueError:
            raise DecodeError(f"queue id {qid!r} of {key!r} is not an integer") from None
        if isinstance(off, bool) or not isinstance(off, int) or not -(1 << 63) <= off < (1 << 63):
            raise DecodeError(f"offset {off!r} of {key!r} queue {qid} is not a long")
        if not -(1 << 31) <= q < (1 << 31):
            raise DecodeError(f"queue id {qid} of {key!r} is not an int")
        row[q] = off
    return row


def decode_delay_table(data: bytes) -> dict[str, dict[int, int]]:
    """``ScheduleMessageService#decode`` (``DelayOffsetSerializeWrapper``): ``offsetTable`` maps a
    delay level to the offset reached in ``SCHEDULE_TOPIC_XXXX`` queue level − 1
    (``#delayLevel2QueueId``); returned in the consumer table's shape."""
    obj = fastjson_object(data)
    table = (obj or {}).get("offsetTable") or {}
    if not isinstance(table, dict):
        raise DecodeError("offsetTable is not an object")
    levels = _int_long_map(table, "offsetTable")
    return {f"{SCHEDULE_TOPIC}@{DELAY_GROUP}": {lvl - 1: off for lvl, off in levels.items()}} if levels else {}


def decode_offset_table(data: bytes) -> dict[str, dict[int, int]]:
    """``ConsumerOffsetManager#decode``: the ``offsetTable`` map, each value a map of queue id
    (int) to offset (long). Anything fastjson could not bind to those types is a DecodeError."""
    obj = fastjson_object(data)
    if obj is None:  # fastjson: "null" decodes to no object, and the table stays as it was
        return {}
    table = obj.get("offsetTable", {})
    if table is None:
        table = {}
    if not isinstance(table, dict):
        raise DecodeError("offsetTable is not an object")
    out: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        if queues is None:
            continue
        if not isinstance(queues, dict):
            raise DecodeError(f"the offsets of {key!r} are not an object")
        out[key] = _int_long_map(queues, key)
    return out


@dataclass
class OffsetTable:
    """The table the broker would load, the file it came from, and what happened on the way."""

    table: dict[str, dict[int, int]]
    path: Path | None
    warnings: list[str] = field(default_factory=list)


def load_consumer_offsets(
    config_dir: Path, name: str = CONSUMER_OFFSET_FILE, decode=decode_offset_table, optional: bool = False
) -> OffsetTable:
    """``ConfigManager#load`` then ``#loadBak`` for ``consumerOffset.json`` (or ``name``, read by
    ``decode``; module docstring). A file over the size cap, or not a regular file, is an error
    (StoreError), not a fallback. ``optional``: no warning when neither file exists."""
    import os

    main = config_dir / name
    bak = config_dir / (name + ".bak")
    if optional and not os.path.lexists(main) and not os.path.lexists(bak):
        return OffsetTable({}, None)
    warnings: list[str] = []
    loaded = _load_main(main, bak, decode, warnings)
    if loaded is not None:
        return loaded
    bdata = read_config_text(bak)
    if not bdata:
        warnings.append(
            f"{bak} is {'empty' if bdata is not None else 'absent'}: the broker starts with no offsets from it"
        )
        return OffsetTable({}, None, warnings)
    try:
        return OffsetTable(decode(bdata), bak, warnings)
    except DecodeError as e:
        raise StoreError(
            f"neither {main.name} nor {bak.name} decodes ({e.what}): the broker would not start",
            path=bak,
            offset=e.offset,
            hint="ConfigManager#loadBak fails, so BrokerController#initialize does",
        ) from None


def _load_main(main: Path, bak: Path, decode, warnings: list[str]) -> OffsetTable | None:
    """``ConfigManager#load``: the main file's table, or None (and a warning saying why the
    broker falls back to ``bak``) when it is absent, empty or does not decode."""
    data = read_config_text(main)
    if not data:
        warnings.append(
            f"{main} is {'empty' if data is not None else 'absent'}; the broker loads {bak.name} "
            "(ConfigManager#loadBak)"
        )
        return None
    try:
        return OffsetTable(decode(data), main)
    except DecodeError as e:
        at = f":{e.offset}" if e.offset is not None else ""
        warnings.append(
            f"{main}{at} does not decode ({e.what}); the broker loads {bak.name} instead (ConfigManager#load)"
        )
        return None


def split_key(key: str) -> tuple[str, str] | None:
    """``topic@group`` → (topic, group), as ``ConsumerOffsetManager`` splits it; None when
    the key does not have exactly one separator."""
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


def decode_lmq_offset_table(data: bytes) -> dict[str, dict[int, int]]:
    """``LmqConsumerOffsetManager#decode`` (``lmqConsumerOffset.json``, the file a broker with
    ``enableLmq`` loads instead of ``consumerOffset.json``): its ``offsetTable`` as
    :func:`decode_offset_table` reads it, plus ``lmqOffsetTable``, ``topic@group`` -> one
    offset of queue 0 (``#queryOffset``: an LMQ group's queue id is always 0)."""
    out = decode_offset_table(data)
    obj = fastjson_object(data) or {}
    lmq = obj.get("lmqOffsetTable") or {}
    if not isinstance(lmq, dict):
        raise DecodeError("lmqOffsetTable is not an object")
    for key, off in lmq.items():
        if off is None:
            continue
        out.setdefault(key, {}).update(_int_long_map({0: off}, key))
    return out


def decode_wrapper_offsets(data: bytes, key: str) -> dict[int, int]:
    """``RocksDBConsumerOffsetManager#decodeOffset``: one ``topic@group``'s
    ``RocksDBOffsetSerializeWrapper``, its ``offsetTable`` of queue id -> offset."""
    obj = fastjson_object(data)
    table = (obj or {}).get("offsetTable") or {}
    if not isinstance(table, dict):
        raise DecodeError("offsetTable is not an object")
    return _int_long_map(table, key)
