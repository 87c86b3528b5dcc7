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
from rmqstore_cli.store.records.fields import keys_dict

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


@dataclass
class Progress:
    """One group's position in one queue, as ``mqadmin consumerProgress`` shows it."""

    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    min_offset: int
    max_offset: int
    next_store_timestamp: int | None
    status: str  # ok, behind-min, beyond-max, no-queue

    @property
    def lag(self) -> int | None:
        """The broker's diff: max offset − consumer offset (``ConsumeStats#computeTotalDiff``);
        None when the store has no such queue (a max of 0 would make it minus the offset)."""
        return None if self.status == "no-queue" else self.max_offset - self.consumer_offset

    def to_dict(self) -> dict:
        keys = "group topic queue_id consumer_offset min_offset max_offset lag next_store_timestamp status"
        return keys_dict(self, keys)


def consumer_progress(store, table: dict[str, dict[int, int]], group: str | None = None, topic: str | None = None):
    """Per ``topic@group`` key and queue of ``table`` (filtered): the consumer offset against the
    queue's min and max offsets (``ConsumeQueue#getMinOffsetInQueue``/``#getMaxOffsetInQueue``)
    and the store time of the next message to consume. An offset below min (the messages
    expired) or above max (the broker corrects it at the next pull) is flagged in ``status``.
    Yields (Progress, None) or (None, key) for a key that is not ``topic@group``."""
    queues = _QueueProgress(store)
    for key in sorted(table):
        tg = split_key(key)
        if tg is None:
            yield None, key
            continue
        t, g = tg
        if _wanted(t, g, group, topic):
            for qid in sorted(table[key]):
                yield queues.progress(g, t, qid, table[key][qid]), None


def _wanted(t: str, g: str, group: str | None, topic: str | None) -> bool:
    """The key passes the ``group`` and ``topic`` filters (None: any)."""
    return (group is None or g == group) and (topic is None or t == topic)


class _QueueProgress:
    """The queues of the table, each opened once (its consume queue, else its BatchCQ queue),
    and the commit-log reader the next messages' store times come from (made on first need)."""

    def __init__(self, store):
        self.store = store
        self.reader = None
        self.queues: dict[tuple[str, int], tuple[object, int, int] | None] = {}

    def progress(self, g: str, t: str, qid: int, off: int) -> Progress:
        """Consumer offset ``off`` of group ``g`` on queue ``t``/``qid`` against its bounds."""
        if (t, qid) not in self.queues:
            self.queues[t, qid] = self._open(t, qid)
        q = self.queues[t, qid]
        if q is None:
            return Progress(g, t, qid, off, 0, 0, None, "no-queue")
        cq, lo, hi = q
        status = "behind-min" if off < lo else "beyond-max" if off > hi else "ok"
        ts = self._next_time(cq, off) if lo <= off < hi else None
        return Progress(g, t, qid, off, lo, hi, ts, status)

    def _open(self, t: str, qid: int) -> tuple[object, int, int] | None:
        """The queue and its min and max offsets; None when it has no file of either kind."""
        cq = self.store.consume_queue(t, qid) if qid >= 0 else None
        has_files = cq is not None and bool(cq.file_names())
        bq = None if has_files else _batch_queue(self.store, t, qid)
        if bq is not None:
            self._time_reader()
            return bq, bq.min_offset, bq.max_offset
        if not has_files:
            return None
        return cq, cq.min_offset(self._time_reader().min_offset), cq.max_offset

    def _time_reader(self):
        from rmqstore_cli.store.answers.search import TimeReader

        if self.reader is None:
            self.reader = TimeReader(self.store.commitlog)
        return self.reader

    def _next_time(self, cq, off: int) -> int | None:
        """The store time of the message at queue offset ``off`` (None: no unit or record there)."""
        from rmqstore_cli.store.queues.batch_queue import BatchConsumeQueue

        u = cq.find(off) if isinstance(cq, BatchConsumeQueue) else next(cq.units(off, off + 1), None)
        return None if u is None else self.reader.checked(u.commitlog_offset, u.size)[0]


def _batch_queue(store, topic: str, queue_id: int):
    """A BatchCQ queue's min and max are queue offsets of messages
    (``BatchConsumeQueue#getMinOffsetInQueue``/``#getMaxOffsetInQueue``); the next message
    is in the unit whose inner batch holds the offset (``#getBatchMsgIndexBuffer``)."""
    from rmqstore_cli.store.queues.batch_queue import batch_queue_of

    if queue_id < 0 or store.rocksdb_cq is not None:
        return None
    bq = batch_queue_of(store.config, topic, queue_id)
    return bq if bq is not None and bq.queue.files else None


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
