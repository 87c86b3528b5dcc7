"""POP consumption's records in the revive topic: checkpoints, acks and batch acks.

A POP consumer's broker keeps no per-message state on disk but these records
(docs/format/pop.md):

- ``PopMessageProcessor#buildCkMsg`` puts a checkpoint (``PopCheckPoint``, TAGS ``ck``) in
  ``rmq_sys_REVIVE_LOG_<brokerClusterName>`` (``PopAckConstants#buildClusterReviveTopic``),
  queue ``reviveQid``, with TIMER_DELIVER_MS = pop time + invisible time - 1000
  (``PopAckConstants.ackTimeInterval``);
- ``AckMessageProcessor#appendAck`` and ``PopBufferMergeService#putAckToStore`` /
  ``#putBatchAckToStore`` put an ack (``AckMsg``, TAGS ``ack``) or a batch ack
  (``BatchAckMsg``, TAGS ``bAck``) in the same revive queue;
- the bodies are ``JSON.toJSONString`` (fastjson) of those classes: the ``@JSONField``
  short names on their fields (the group is ``PopCheckPoint#cid`` and ``AckMsg#consumerGroup``,
  both ``@JSONField(name = "c")``), sorted by name (fastjson's ``JavaBeanSerializer`` default), null fields
  left out, and the getter-only ``PopCheckPoint#getReviveTime`` written as ``reviveTime``;
  ``AckMsg``'s fields also read under their long names (``alternateNames``, as 4.9-era
  bodies were written).

Everything here is a pure function of a body's bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: PopAckConstants.REVIVE_TOPIC (TopicValidator.SYSTEM_TOPIC_PREFIX + "REVIVE_LOG_")
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
#: PopAckConstants.REVIVE_GROUP (MixAll.CID_RMQ_SYS_PREFIX + "REVIVE_GROUP"): the revive
#: queues' consumer offsets in consumerOffset.json
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
#: PopAckConstants.ackTimeInterval: a checkpoint is delivered this long before its revive time
ACK_TIME_INTERVAL_MS = 1000
#: BrokerConfig#reviveQueueNum's default
REVIVE_QUEUE_NUM = 8
#: MixAll.RETRY_GROUP_TOPIC_PREFIX; KeyBuilder's V1 and V2 separators
RETRY_PREFIX = "%RETRY%"
RETRY_SEPARATOR_V1 = "_"
RETRY_SEPARATOR_V2 = "+"
#: MessageConst.PROPERTY_FIRST_POP_TIME: set by PopReviveService#reviveRetry on a first revive
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"

#: PopCheckPoint's @JSONField names -> our field names: PopCheckPoint#startOffset "so",
#: #popTime "pt", #invisibleTime "it", #bitMap "bm", #num "n", #queueId "q", #topic "t",
#: #cid "c", #reviveOffset "ro", #queueOffsetDiff "d", #brokerName "bn", #rePutTimes "rp"
CK_FIELDS = {
    "so": "start_offset",
    "pt": "pop_time",
    "it": "invisible_time",
    "bm": "bitmap",
    "n": "num",
    "q": "queue_id",
    "t": "topic",
    "c": "group",
    "ro": "revive_offset",
    "d": "offset_diffs",
    "bn": "broker_name",
    "rp": "reput_times",
}
#: AckMsg's @JSONField names and alternateNames -> our field names: AckMsg#ackOffset "ao",
#: #startOffset "so", #consumerGroup "c", #topic "t", #queueId "q", #popTime "pt",
#: #brokerName "bn", each with its long name in alternateNames; BatchAckMsg#ackOffsetList "aol"
ACK_FIELDS = {
    "ao": "ack_offset",
    "ackOffset": "ack_offset",
    "so": "start_offset",
    "startOffset": "start_offset",
    "c": "group",
    "consumerGroup": "group",
    "t": "topic",
    "topic": "topic",
    "q": "queue_id",
    "queueId": "queue_id",
    "pt": "pop_time",
    "popTime": "pop_time",
    "bn": "broker_name",
    "brokerName": "broker_name",
    "aol": "ack_offsets",
    "ackOffsetList": "ack_offsets",
}


class BodyError(ValueError):
    """A revive record's body the broker's ``JSON.parseObject`` would refuse or misread."""


@dataclass(frozen=True)
class CheckPoint:
    """A ``PopCheckPoint``: ``num`` messages popped from ``topic``/``queue_id`` by ``group``
    at ``pop_time``, invisible for ``invisible_time`` ms; message ``i`` is at queue offset
    ``start_offset + offset_diffs[i]`` (``#ackOffsetByIndex``; no diffs: ``start_offset + i``,
    the old form); bit ``i`` of ``bitmap`` set means acked. ``revive_offset`` as written
    (the revive service sets it to the record's queue offset when it reads it)."""

    start_offset: int
    pop_time: int
    invisible_time: int
    bitmap: int
    num: int
    queue_id: int
    topic: str | None
    group: str | None
    revive_offset: int = 0
    offset_diffs: tuple[int, ...] = ()
    broker_name: str | None = None
    reput_times: str | None = None

    @property
    def revive_time(self) -> int:
        """``PopCheckPoint#getReviveTime``: when the unacked messages are revived."""
        return self.pop_time + self.invisible_time

    def offsets(self) -> list[int]:
        """The popped messages' queue offsets, index by index (``#ackOffsetByIndex``)."""
        if not self.offset_diffs:
            return [self.start_offset + i for i in range(self.num)]
        return [self.start_offset + self.offset_diffs[i] for i in range(min(self.num, len(self.offset_diffs)))]

    def index_of_ack(self, ack_offset: int) -> int:
        """``PopCheckPoint#indexOfAck``: the bit an ack of ``ack_offset`` sets, -1 for none."""
        if ack_offset < self.start_offset:
            return -1
        if not self.offset_diffs:
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        d = ack_offset - self.start_offset
        return self.offset_diffs.index(d) if d in self.offset_diffs else -1


@dataclass(frozen=True)
class Ack:
    """An ``AckMsg`` (``ack_offsets`` = (ack_offset,)) or a ``BatchAckMsg`` (``batch``: its
    ``ackOffsetList``); it names its checkpoint by topic, group, queue, start offset, pop
    time and broker name (``PopReviveService#consumeReviveMessage``'s merge key)."""

    batch: bool
    ack_offsets: tuple[int, ...]
    start_offset: int
    group: str | None
    topic: str | None
    queue_id: int
    pop_time: int
    broker_name: str | None = None


def _object(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise BodyError(f"not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyError("not a JSON object")
    return obj


def _long(v: Any, name: str, bits: int = 64) -> int:
    """A number field as fastjson reads it into a Java long or int (a quoted number too)."""
    if isinstance(v, bool) or v is None:
        raise BodyError(f"{name}: {v!r} is not a number")
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise BodyError(f"{name}: {v!r} is not a number") from None
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
        raise BodyError(f"{name}: {n} out of range")
    return n


def _text(v: Any) -> str | None:
    return None if v is None else str(v)


def parse_checkpoint(body: bytes) -> CheckPoint:
    """A ``ck`` record's body (``JSON.parseObject(raw, PopCheckPoint.class)``); unknown keys
    (``reviveTime``) ignored as fastjson ignores them."""
    raw = _object(body)
    f = {CK_FIELDS[k]: v for k, v in raw.items() if k in CK_FIELDS}
    diffs = f.get("offset_diffs")
    if diffs is not None and not isinstance(diffs, list):
        raise BodyError("d: not a list")
    return CheckPoint(
        start_offset=_long(f.get("start_offset", 0), "so"),
        pop_time=_long(f.get("pop_time", 0), "pt"),
        invisible_time=_long(f.get("invisible_time", 0), "it"),
        bitmap=_long(f.get("bitmap", 0), "bm", 32) & 0xFFFFFFFF,
        num=_long(f.get("num", 0), "n", 8),
        queue_id=_long(f.get("queue_id", 0), "q", 32),
        topic=_text(f.get("topic")),
        group=_text(f.get("group")),
        revive_offset=_long(f.get("revive_offset", 0), "ro"),
        offset_diffs=tuple(_long(d, "d", 32) for d in diffs or ()),
        broker_name=_text(f.get("broker_name")),
        reput_times=_text(f.get("reput_times")),
    )


def parse_ack(body: bytes, batch: bool) -> Ack:
    """An ``ack`` (``batch`` False) or ``bAck`` record's body (``JSON.parseObject`` into
    ``AckMsg`` or ``BatchAckMsg``)."""
    raw = _object(body)
    f = {ACK_FIELDS[k]: v for k, v in raw.items() if k in ACK_FIELDS}
    if batch:
        lst = f.get("ack_offsets") or []
        if not isinstance(lst, list):
            raise BodyError("aol: not a list")
        offsets = tuple(_long(x, "aol") for x in lst)
    else:
        offsets = (_long(f.get("ack_offset", 0), "ao"),)
    return Ack(
        batch=batch,
        ack_offsets=offsets,
        start_offset=_long(f.get("start_offset", 0), "so"),
        group=_text(f.get("group")),
        topic=_text(f.get("topic")),
        queue_id=_long(f.get("queue_id", 0), "q", 32),
        pop_time=_long(f.get("pop_time", 0), "pt"),
        broker_name=_text(f.get("broker_name")),
    )


def checkpoint_body(ck: CheckPoint) -> bytes:
    """``JSON.toJSONString(ck)`` as the broker writes it (fields sorted by name, nulls left
    out, ``reviveTime`` from the getter): what ``generate`` puts in a ``ck`` record."""
    d: dict[str, Any] = {"bm": ck.bitmap, "bn": ck.broker_name, "c": ck.group, "d": list(ck.offset_diffs) or None}
    d |= {"it": ck.invisible_time, "n": ck.num, "pt": ck.pop_time, "q": ck.queue_id, "reviveTime": ck.revive_time}
    d |= {"ro": ck.revive_offset, "rp": ck.reput_times, "so": ck.start_offset, "t": ck.topic}
    return _dumps(d)


def ack_body(ack: Ack) -> bytes:
    """``JSON.toJSONString`` of an ``AckMsg`` or ``BatchAckMsg`` (a batch ack's inherited
    ``ackOffset`` stays 0 and is written)."""
    d: dict[str, Any] = {"ao": 0 if ack.batch else ack.ack_offsets[0]}
    if ack.batch:
        d["aol"] = list(ack.ack_offsets)
    d |= {"bn": ack.broker_name, "c": ack.group, "pt": ack.pop_time, "q": ack.queue_id}
    d |= {"so": ack.start_offset, "t": ack.topic}
    return _dumps(d)


def _dumps(d: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in d.items() if v is not None}, separators=(",", ":"), ensure_ascii=False).encode()


def retry_topics(group: str, topic: str) -> tuple[str, ...]:
    """Where ``PopReviveService#reviveRetry`` puts a revived message: a retry topic's own
    messages back in it, others in ``KeyBuilder#buildPopRetryTopic`` (V1 ``%RETRY%group_topic``,
    V2 ``%RETRY%group+topic`` with ``enableRetryTopicV2``)."""
    if topic.startswith(RETRY_PREFIX):
        return (topic,)
    return (RETRY_PREFIX + group + RETRY_SEPARATOR_V1 + topic, RETRY_PREFIX + group + RETRY_SEPARATOR_V2 + topic)


def ck_uniq_key(ck: CheckPoint) -> str:
    """``PopMessageProcessor#genCkUniqueId``: the ck record's UNIQ_KEY."""
    return f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.group}@{ck.pop_time}@{ck.broker_name}@{CK_TAG}"


def ack_uniq_key(ack: Ack) -> str:
    """``PopMessageProcessor#genAckUniqueId`` and ``#genBatchAckUniqueId`` (Java's
    ``List#toString``: ``[1, 2]``)."""
    if ack.batch:
        lst = "[" + ", ".join(str(x) for x in ack.ack_offsets) + "]"
        return f"{ack.topic}@{ack.queue_id}@{lst}@{ack.group}@{ack.pop_time}@{BATCH_ACK_TAG}"
    return f"{ack.topic}@{ack.queue_id}@{ack.ack_offsets[0]}@{ack.group}@{ack.pop_time}@{ack.broker_name}@{ACK_TAG}"
