"""LMQ and multi-dispatch (RIP-28; docs/format/lmq.md): the extra consume-queue units a
message gets, and the offsets a broker assigns them.

A message whose ``INNER_MULTI_DISPATCH`` lists queue names (``%LMQ%a,%LMQ%b``) and whose
``INNER_MULTI_QUEUE_OFFSET`` lists one offset per name is dispatched, after its own unit,
to ``consumequeue/<name>/<0 for %LMQ% names with enableLmq, else its queueId>/`` at that
offset with its own physical offset, size and tagsCode
(``ConsumeQueue#multiDispatchLmqQueue``, ``#doDispatchLmqQueue``). This module decides that
list; the consume-queue writers own the bytes.

4.9.x and 5.x differ (``DefaultMessageStore#checkMultiDispatchQueue`` against 5.x
``MultiDispatchUtils#isNeedHandleMultiDispatch``): 5.x skips messages of retry, ``rmq_sys_``
and schedule topics and names holding ``/``; 4.9.x fans every message out and joins a
name with ``/`` into the path (rmqstore never writes outside a queue directory: such a
name is refused and reported). Both stop at an offset ``Long#parseLong`` rejects (the
broker's reput throws there and retries that message for ever) and write nothing when
the two lists differ in length (``"[bug] queues.length!=queueOffsets.length"``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqstore_cli.formats.consume_queue import CQ_STORE_UNIT_SIZE

from rmqstore_cli.store.queues.consume_queue import unsafe_topic
from rmqstore_cli.store.records.message import SCHEDULE_TOPIC

LMQ_PREFIX = "%LMQ%"  # MixAll.LMQ_PREFIX
LMQ_QUEUE_ID = 0  # MixAll.LMQ_QUEUE_ID
MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # MessageConst.PROPERTY_INNER_MULTI_DISPATCH
MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"  # MessageConst.PROPERTY_INNER_MULTI_QUEUE_OFFSET
SPLITTER = ","  # MixAll.MULTI_DISPATCH_QUEUE_SPLITTER
RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
SYSTEM_PREFIX = "rmq_sys_"  # TopicValidator.SYSTEM_TOPIC_PREFIX
_JAVA_WHITESPACE = frozenset(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
#: The largest cq offset whose byte position (× 20, CQ_STORE_UNIT_SIZE) is a Java long.
MAX_CQ_OFFSET = _LONG_MAX // CQ_STORE_UNIT_SIZE


def is_lmq(name: str) -> bool:
    """``MixAll#isLmq``."""
    return name.startswith(LMQ_PREFIX)


def is_blank(s: str | None) -> bool:
    """``StringUtils#isBlank`` (Java's ``Character#isWhitespace`` for the usual characters)."""
    return s is None or all(c in _JAVA_WHITESPACE or c.isspace() for c in s)


def java_split(s: str) -> list[str]:
    """``String#split(",")``: trailing empty strings removed."""
    parts = s.split(SPLITTER)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_long(s: str) -> int | None:
    """``Long#parseLong``, or None where it throws."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body or not body.isascii() or not body.isdigit():
        return None
    v = int(s)
    return v if _LONG_MIN <= v <= _LONG_MAX else None


def lmq_queue_id(name: str, queue_id: int, enable_lmq: bool) -> int:
    """The queue a listed name gets: 0 for ``%LMQ%`` names with ``enableLmq``, else the
    message's own (``MultiDispatch#queueKey``, ``ConsumeQueue#multiDispatchLmqQueue``)."""
    return LMQ_QUEUE_ID if enable_lmq and is_lmq(name) else queue_id


def broker5_store(root) -> bool:
    """Whether the 5.x rules apply: the store holds a file only a 5.x broker writes
    (:func:`~rmqstore_cli.store.layout.root_entries.detect_version`; the two are otherwise the same bytes)."""
    from rmqstore_cli.store.layout.root_entries import detect_version

    return detect_version(root) == "5"


def excluded_topic(topic: str) -> bool:
    """5.x ``MultiDispatchUtils#isNeedHandleMultiDispatch``: no fan-out for retry, system and
    schedule topics (4.9.x has no such rule)."""
    return topic.startswith(RETRY_PREFIX) or topic.startswith(SYSTEM_PREFIX) or topic == SCHEDULE_TOPIC


@dataclass(frozen=True, slots=True)
class Target:
    """One extra unit: queue ``name``/``queue_id`` at cq offset ``offset``."""

    name: str
    queue_id: int
    offset: int


@dataclass(slots=True)
class FanOut:
    """What dispatch writes for one message's two properties, and what is wrong with them.

    ``problem``: None, ``count`` (lists of different lengths: nothing written), ``offset``
    (an offset ``Long#parseLong`` rejects: the names before it written, then the broker's
    reput stalls at this message), ``range`` (a negative offset, or one whose byte position
    overflows a long: no unit for it), ``name`` (a name that cannot be one directory: ``/``,
    ``..``, empty, ... — :func:`~rmqstore_cli.store.queues.consume_queue.unsafe_topic`)."""

    targets: list[Target] = field(default_factory=list)
    problem: str | None = None
    detail: str = ""


def fan_out(
    topic: str, queue_id: int, names: str | None, offsets: str | None, *, enable_lmq: bool, broker5: bool = False
) -> FanOut | None:
    """``checkMultiDispatchQueue`` then ``ConsumeQueue#multiDispatchLmqQueue`` for one
    message: None when the message is not multi-dispatched (either property blank, or on
    5.x a topic :func:`excluded_topic` refuses)."""
    if is_blank(names) or is_blank(offsets):
        return None
    if broker5 and excluded_topic(topic):
        return None
    queues, offs = java_split(names), java_split(offsets)
    if len(queues) != len(offs):
        return FanOut([], "count", f"{len(queues)} queue names but {len(offs)} offsets")
    return _fan_out_targets(queues, offs, queue_id, enable_lmq, broker5)


def _fan_out_targets(queues: list[str], offs: list[str], queue_id: int, enable_lmq: bool, broker5: bool) -> FanOut:
    """``ConsumeQueue#multiDispatchLmqQueue``'s loop over the listed (name, offset) pairs: a
    name that cannot be a directory is a problem (skipped on 5.x when it holds a separator);
    an offset ``Long#parseLong`` rejects ends the loop; an out-of-range one gets no unit."""
    out = FanOut()
    for name, raw in zip(queues, offs, strict=True):
        why = unsafe_topic(name)
        if why is not None:  # never a directory here (the dispatcher refuses it, verify skips it)
            out.problem, out.detail = "name", f"queue name {name!r} cannot be a directory ({why})"
            if broker5 and "/" in name:
                continue  # 5.x: StringUtils.contains(queueName, File.separator) -> skipped
        value = parse_long(raw)
        if value is None:
            return FanOut(out.targets, "offset", f"offset {raw!r} of {name!r} is not a long")
        if not 0 <= value <= MAX_CQ_OFFSET:  # offset × 20 is no file position: no unit written
            out.problem, out.detail = "range", f"offset {value} of {name!r} is no consume-queue position"
            continue
        out.targets.append(Target(name, lmq_queue_id(name, queue_id, enable_lmq), value))
    return out


def queue_key(name: str, queue_id: int, enable_lmq: bool) -> str:
    """``MultiDispatch#queueKey``: the counter of a listed name, ``<name>-<queueId>``."""
    return f"{name}-{lmq_queue_id(name, queue_id, enable_lmq)}"


class OffsetCounters:
    """The broker's next-offset counters of the listed names, as ``CommitLog`` keeps them
    (``lmqTopicQueueTable`` for LMQ keys, ``topicQueueTable`` for the others, which a real
    topic's queue of the same key shares): ``assign`` is ``MultiDispatch#wrapMultiDispatch``,
    ``advance`` ``#updateMultiQueueOffset`` (not called for PREPARED/ROLLBACK messages)."""

    def __init__(self, enable_lmq: bool, topic_table: dict[str, int] | None = None):
        self.enable_lmq = enable_lmq
        #: ``topicQueueTable``: ``topic-queueId`` -> next offset, shared with the writer.
        self.topic_table = topic_table if topic_table is not None else {}
        self.lmq_table: dict[str, int] = {}

    def _table(self, key: str) -> dict[str, int]:
        return self.lmq_table if self.enable_lmq and is_lmq(key) else self.topic_table

    def assign(self, names: str, queue_id: int) -> str:
        """The ``INNER_MULTI_QUEUE_OFFSET`` value for ``names`` (a counter first seen starts at 0)."""
        out = []
        for name in java_split(names):
            key = queue_key(name, queue_id, self.enable_lmq)
            out.append(str(self._table(key).setdefault(key, 0)))
        return SPLITTER.join(out)

    def advance(self, names: str, offsets: str, queue_id: int) -> None:
        """Each counter to its offset + 1 (``updateMultiQueueOffset``)."""
        for name, raw in zip(java_split(names), java_split(offsets), strict=True):
            key = queue_key(name, queue_id, self.enable_lmq)
            self._table(key)[key] = int(raw) + 1


# ------------------------------------------------------------- in bulk
def multi_ranges(pr) -> tuple | None:
    """The two properties of a block's messages that hold both (a
    :class:`~rmqstore_cli.store.records.properties.Properties`): (message indexes, names, offsets),
    the values as str lists; None when no message has both."""
    import numpy as np

    nm, na, nb = pr.value(MULTI_DISPATCH.encode() + b"\x01")
    if not nm.size:
        return None
    om, oa, ob = pr.value(MULTI_QUEUE_OFFSET.encode() + b"\x01")
    both, ni, oi = np.intersect1d(nm, om, assume_unique=True, return_indices=True)
    if not both.size:
        return None
    raw = pr.cat.tobytes()

    def texts(a, b, sel):
        return [raw[x:y].decode("utf-8", "replace") for x, y in zip(a[sel].tolist(), b[sel].tolist(), strict=True)]

    return both, texts(na, nb, ni), texts(oa, ob, oi)


def fan_out_units(idx, multi, tids, qid, phy, size, tags, qoff) -> tuple:
    """The units of records ``idx`` (their own) and of ``multi`` (record, topic id, queue
    id, cq offset rows) as one set of columns in dispatch order: per record its own unit,
    then its listed queues in order (``putMessagePositionInfoWrapper``). Returns the
    arguments of ``FastDispatcher._consume_queues``."""
    import numpy as np

    rec, mt, mq, mo = multi
    at = np.concatenate([idx, rec])
    order = np.argsort(at, kind="stable")  # own unit first, listed queues in their order
    cols = (
        np.concatenate([tids[idx], mt]),
        np.concatenate([qid[idx], mq]),
        phy[at],
        size[at],
        tags[at],
        np.concatenate([qoff[idx], mo]),
    )
    cols = tuple(np.asarray(c, dtype=np.int64)[order] for c in cols)
    return (np.arange(len(at)), *cols)


def listed_offset(
    props: dict[str, str], topic: str, msg_queue_id: int, queue_id: int | None, enable_lmq: bool = True
) -> int | None:
    """The offset a message's properties list for queue ``topic``/``queue_id`` (any queue
    id when None), or None when it lists none there: a unit of that queue pointing at the
    message is then its multi-dispatch unit, not the message's own."""
    names, offsets = props.get(MULTI_DISPATCH), props.get(MULTI_QUEUE_OFFSET)
    if is_blank(names) or is_blank(offsets):
        return None
    queues, offs = java_split(names), java_split(offsets)
    if len(queues) != len(offs) or topic not in queues:
        return None
    if queue_id is not None and lmq_queue_id(topic, msg_queue_id, enable_lmq) != queue_id:
        return None
    return parse_long(offs[queues.index(topic)])


# ------------------------------------------------------------- at append
class MultiDispatchAppender:
    """``MultiDispatch#wrapMultiDispatch`` and ``#updateMultiQueueOffset`` around
    ``CommitLog#append`` (``DefaultAppendMessageCallback#doAppend``): a message whose
    INNER_MULTI_DISPATCH is set gets INNER_MULTI_QUEUE_OFFSET from the counters, and its
    properties are re-serialised from the broker's HashMap without WAIT
    (``removeWaitStorePropertyString``, docs/format/lmq.md#append); after the append NOT and COMMIT
    messages advance the counters, PREPARED and ROLLBACK ones do not. A replayed record (its
    queue offset given) keeps its properties and only advances them. The broker version is
    the stored string's: 5.x keeps the last separator and sizes the map for 128."""

    def __init__(self, config, topic_table: dict[str, int]):
        self.counters = OffsetCounters(config.enable_lmq, topic_table)
        for key, value in topic_table.items():  # recoverTopicQueueTable: LMQ queues' ends
            if config.enable_lmq and is_lmq(key):
                self.counters.lmq_table[key] = value

    def wrap(self, spec) -> None:
        """Before the append: assign the offsets and re-encode the properties."""
        from rmqstore_cli.formats.properties import serialize_properties

        from rmqstore_cli.store.records.message import PROPERTY_WAIT, JavaHashMap
        from rmqstore_cli.store.records.properties import parse_properties

        if spec.queue_offset is not None or spec.raw_properties or not isinstance(spec.properties, str):
            return
        props = parse_properties(spec.properties)
        names = props.get(MULTI_DISPATCH)
        if is_blank(names):
            return
        broker5 = spec.properties.endswith("\x02")
        if broker5 and excluded_topic(spec.topic):
            return
        m = JavaHashMap(128 if broker5 else 16)
        for k, v in props.items():
            m.put(k, v)
        m.put(MULTI_QUEUE_OFFSET, self.counters.assign(names, spec.queue_id))
        m.remove(PROPERTY_WAIT)
        spec.properties = serialize_properties(m.items(), broker5)

    def advance(self, spec, sys_flag_type: int) -> None:
        """After the append: ``updateMultiQueueOffset`` for NOT and COMMIT messages."""
        from rmqstore_cli.formats.commitlog import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE

        from rmqstore_cli.store.records.properties import parse_properties

        if sys_flag_type not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return
        text = spec.properties if isinstance(spec.properties, str) else spec.properties.decode("utf-8", "replace")
        props = parse_properties(text)
        names, offsets = props.get(MULTI_DISPATCH), props.get(MULTI_QUEUE_OFFSET)
        if is_blank(names) or is_blank(offsets) or len(java_split(names)) != len(java_split(offsets)):
            return
        if all(parse_long(x) is not None for x in java_split(offsets)):
            self.counters.advance(names, offsets, spec.queue_id)
