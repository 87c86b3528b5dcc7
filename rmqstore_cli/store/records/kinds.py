"""What a commit-log record is, as the broker's services treat it (dump-commitlog's ``kind``).

The broker keeps no "kind" field: a record's role follows from its topic, its sysflag's
transaction bits and a few properties.

- ``half``: topic ``RMQ_SYS_TRANS_HALF_TOPIC``. ``TransactionalMessageBridge#parseHalfMessageInner``
  stores a PREPARED send there with REAL_TOPIC/REAL_QID and the transaction bits reset to
  NOT_TYPE; the transaction check reads it back.
- ``op``: topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC``: ``TransactionalMessageBridge#addRemoveTagInTransactionOp``
  marks half messages done (TAGS ``d``, the body their queue offsets).
- ``delay``: topic ``SCHEDULE_TOPIC_XXXX`` (``TopicValidator#RMQ_SYS_SCHEDULE_TOPIC``):
  ``ScheduleMessageService`` delivers it to REAL_TOPIC at
  ``computeDeliverTimestamp(level, storeTimestamp)`` = store time + the level's delay
  (``messageDelayLevel``; store time + 1 s for a level not in the table), the level being
  DELAY capped at the highest one, as ``CommitLog#checkMessageAndReturnSize`` computes the
  consume-queue tags code.
- ``prepared`` / ``commit`` / ``rollback``: the sysflag's transaction type
  (``MessageSysFlag#getTransactionValue``); a COMMIT or ROLLBACK record written by
  ``EndTransactionProcessor#endMessageTransaction`` names its half message's commit-log
  offset in PREPAREDTRANSACTIONOFFSET.
- ``retry`` / ``dlq``: topics ``%RETRY%group`` and ``%DLQ%group`` (``MixAll``), the original
  topic in RETRY_TOPIC.
- ``normal``: anything else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from rmqstore_cli.formats.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from rmqstore_cli.store.records.message import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

RETRY_PREFIX = "%RETRY%"  # MixAll.RETRY_GROUP_TOPIC_PREFIX
DLQ_PREFIX = "%DLQ%"  # MixAll.DLQ_GROUP_TOPIC_PREFIX
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"  # MessageConst.PROPERTY_RETRY_TOPIC
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1

#: kinds decided by the topic alone (else by the transaction bits, else normal)
TOPIC_KINDS = {TRANS_HALF_TOPIC: "half", TRANS_OP_HALF_TOPIC: "op", SCHEDULE_TOPIC: "delay"}
TX_KINDS = {
    TRANSACTION_PREPARED_TYPE: "prepared",
    TRANSACTION_COMMIT_TYPE: "commit",
    TRANSACTION_ROLLBACK_TYPE: "rollback",
}
#: every kind a table shows (``blank``: an end-of-file record, with --show-blank)
KINDS = ("normal", "prepared", "commit", "rollback", "half", "op", "delay", "retry", "dlq", "blank")


class Kind(NamedTuple):
    """A record's kind and what the broker will do with it: the real topic (half, delay),
    the delay level and delivery time (delay), the original topic (retry, dlq), the half
    message's offset (commit, rollback)."""

    kind: str
    real_topic: str | None = None
    level: int | None = None
    deliver_at: int | None = None
    origin: str | None = None
    half_offset: int | None = None


def topic_kind(topic: str) -> str | None:
    """The kind a topic alone decides (half, op, delay, retry, dlq), else None."""
    k = TOPIC_KINDS.get(topic)
    if k is not None:
        return k
    if topic.startswith(RETRY_PREFIX):
        return "retry"
    if topic.startswith(DLQ_PREFIX):
        return "dlq"
    return None


def parse_java_int(text: str | None) -> int | None:
    """``Integer#parseInt`` (radix 10): the value, or None where Java throws
    ``NumberFormatException`` (not a signed decimal, or outside the int range)."""
    if text is None or not _JAVA_INT.fullmatch(text):
        return None
    v = int(text)
    return v if _INT_MIN <= v <= _INT_MAX else None


def delay_level(delay: str | None, table: dict[int, int]) -> int | None:
    """The level ``CommitLog#checkMessageAndReturnSize`` uses: DELAY as a Java int, capped
    at the highest level; None when there is no usable DELAY (absent, not an int, < 1)."""
    v = parse_java_int(delay)
    if v is None:
        return None
    level = min(v, max(table) if table else 0)
    return level if level > 0 else None


def deliver_timestamp(level: int, store_timestamp: int, table: dict[int, int]) -> int:
    """``ScheduleMessageService#computeDeliverTimestamp``."""
    return store_timestamp + table.get(level, 1000)


def record_kind(
    topic: str,
    sys_flag: int,
    props: dict[str, str],
    store_timestamp: int,
    prepared_transaction_offset: int,
    delay_table: dict[int, int],
) -> Kind:
    """The :class:`Kind` of one record (the module docstring gives the rules, in order)."""
    k = topic_kind(topic)
    if k in ("half", "op", "delay"):
        if k == "op":
            return Kind(k)
        real = props.get("REAL_TOPIC")
        if k == "half":
            return Kind(k, real)
        level = delay_level(props.get("DELAY"), delay_table)
        return Kind(k, real, level, deliver_timestamp(level, store_timestamp, delay_table) if level else None)
    tx = TX_KINDS.get(sys_flag & TRANSACTION_MASK)
    if tx is not None:
        return Kind(tx, half_offset=prepared_transaction_offset if tx != "prepared" else None)
    if k is not None:
        return Kind(k, origin=props.get(PROPERTY_RETRY_TOPIC))
    return Kind("normal")


def kind_detail(k: Kind, format_time) -> str:
    """The words after the kind in a table row (raw store text: the caller escapes it):
    ``-> TOPIC at TIME (level N)``, ``of TOPIC``, ``half at OFFSET``."""
    if k.real_topic is not None or k.deliver_at is not None:
        out = f"-> {k.real_topic}" if k.real_topic is not None else "->"
        if k.deliver_at is not None:
            out += f" at {format_time(k.deliver_at)} (level {k.level})"
        return out
    if k.origin is not None:
        return f"of {k.origin}"
    if k.half_offset is not None:
        return f"half at {k.half_offset}"
    return ""
