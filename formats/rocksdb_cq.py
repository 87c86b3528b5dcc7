"""The RocksDB consume queue of a 5.x ``storeType=defaultRocksDB`` broker (docs/format/rocksdb.md).

The database is ``<root>/consumequeue/`` itself (``ConsumeQueueRocksDBStorage``), with the
column families ``default`` (one value per unit) and ``offset`` (each queue's min and max,
and the dispatch checkpoint). Keys and values are big-endian, as ``ByteBuffer`` writes them.
"""

from __future__ import annotations

from construct import Bytes, Const, Int8ub, Int16sb, Int32sb, Int64sb, Struct, this

from .derive import fixed_fields_format, lazy_dtypes

#: ``AbstractRocksDBStorage.CTRL_1``: the separator of every key; ``CTRL_2`` ends a queue's
#: key range (``RocksDBConsumeQueueTable#buildDeleteCQKey``).
CTRL_1, CTRL_2 = b"\x01", b"\x02"

#: ``ConsumeQueueRocksDBStorage``: the column families (``RocksDB.DEFAULT_COLUMN_FAMILY`` and
#: ``"offset"``).
DEFAULT_CF = "default"
OFFSET_CF = "offset"

#: ``RocksDBConsumeQueueTable#buildCQKeyByteBuffer0``: topic length, CTRL_1, topic, CTRL_1,
#: queueId, CTRL_1, cqOffset.
CqKey = Struct(
    "topic_length" / Int32sb,
    "sep1" / Const(CTRL_1),
    "topic" / Bytes(this.topic_length),
    "sep2" / Const(CTRL_1),
    "queue_id" / Int32sb,
    "sep3" / Const(CTRL_1),
    "cq_offset" / Int64sb,
)
#: ``RocksDBConsumeQueueTable.CQ_KEY_LENGTH_WITHOUT_TOPIC_BYTES`` (4 + 1 + 1 + 4 + 1 + 8).
CQ_KEY_FIXED = 19
#: The first field of every key (CQ and offset family), read to check a key's length, and
#: the last of a CQ key (a queue's keys are its prefix and this): the fast path's views.
KEY_TOPIC_LENGTH_FORMAT = fixed_fields_format(Struct("topic_length" / Int32sb))
KEY_CQ_OFFSET_FORMAT = fixed_fields_format(Struct("cq_offset" / Int64sb))

#: ``RocksDBConsumeQueueTable#buildCQValueByteBuffer0``: the 28-byte unit (``CQ_UNIT_SIZE``).
CqValue = Struct(
    "commitlog_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
    "store_time" / Int64sb,
)
CQ_VALUE_SIZE: int = CqValue.sizeof()
CQ_VALUE_FORMAT = fixed_fields_format(CqValue)

#: ``RocksDBConsumeQueueOffsetTable#buildOffsetKeyByteBuffer0``: topic length, CTRL_1, topic,
#: CTRL_1, ``max``/``min``, CTRL_1, queueId.
OffsetKey = Struct(
    "topic_length" / Int32sb,
    "sep1" / Const(CTRL_1),
    "topic" / Bytes(this.topic_length),
    "sep2" / Const(CTRL_1),
    "kind" / Bytes(3),
    "sep3" / Const(CTRL_1),
    "queue_id" / Int32sb,
)
#: ``OFFSET_KEY_LENGTH_WITHOUT_TOPIC_BYTES`` (4 + 1 + 1 + 3 + 1 + 4).
OFFSET_KEY_FIXED = 14
#: ``MAX_BYTES`` / ``MIN_BYTES``.
KIND_MAX, KIND_MIN = b"max", b"min"

#: ``#buildOffsetValueByteBuffer``: the commit-log offset and the cq offset of a queue's
#: first (min) or last (max) unit (``OFFSET_VALUE_LENGTH`` 16).
OffsetValue = Struct(
    "commitlog_offset" / Int64sb,
    "cq_offset" / Int64sb,
)
OFFSET_VALUE_SIZE: int = OffsetValue.sizeof()
OFFSET_VALUE_FORMAT = fixed_fields_format(OffsetValue)

#: ``RocksDBConsumeQueueOffsetTable#appendMaxPhyOffset``: under the ``max`` key of topic
#: ``TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC``, queue 0, the commit-log offset dispatch
#: has reached (8 bytes; ``#getMaxPhyOffset``).
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"
CheckpointValue = Struct("max_phy_offset" / Int64sb)
CHECKPOINT_VALUE_SIZE: int = CheckpointValue.sizeof()
CHECKPOINT_VALUE_FORMAT = fixed_fields_format(CheckpointValue)

__getattr__ = lazy_dtypes(globals(), {"CQ_VALUE_DTYPE": CqValue})

# ---------------------------------------------------------------- config in RocksDB (5.x)
#: ``storeType=defaultRocksDB`` brokers keep their config in RocksDB (``BrokerController``
#: constructor): v1, one database per table under ``config/`` (``RocksDBTopicConfigManager``,
#: ``RocksDBConsumerOffsetManager``, ``RocksDBSubscriptionGroupManager#configFilePath``),
#: key the name (``topic@group`` for offsets), value fastjson; ``configManagerVersion=v2``,
#: one database ``config/rdb`` (``ConfigStorage``) of typed keys.
CONFIG_V1_TOPICS = "topics"
CONFIG_V1_CONSUMER_OFFSETS = "consumerOffsets"
CONFIG_V2_DIR = "rdb"

#: v2 ``TablePrefix.TABLE``, ``TableId.CONSUMER_OFFSET``/``TOPIC``, ``RecordPrefix.DATA``.
V2_TABLE, V2_CONSUMER_OFFSET, V2_TOPIC, V2_DATA = 1, 1, 3, 2

#: ``ConfigHelper#keyBufOf`` / ``ConsumerOffsetManagerV2``: the 4 bytes before every record.
V2KeyHead = Struct("table_prefix" / Int8ub, "table_id" / Int16sb, "record_prefix" / Int8ub)
#: ``ConsumerOffsetManagerV2#keyOfConsumerOffset``: group, CTRL_1, topic, CTRL_1, queueId →
#: the offset (a long).
V2OffsetKey = Struct(
    "head" / V2KeyHead,
    "group_length" / Int16sb,
    "group" / Bytes(this.group_length),
    "sep1" / Const(CTRL_1),
    "topic_length" / Int16sb,
    "topic" / Bytes(this.topic_length),
    "sep2" / Const(CTRL_1),
    "queue_id" / Int32sb,
)
V2OffsetValue = Struct("offset" / Int64sb)
V2_OFFSET_VALUE_SIZE: int = V2OffsetValue.sizeof()
V2_OFFSET_VALUE_FORMAT = fixed_fields_format(V2OffsetValue)
#: ``ConfigHelper#keyBufOf(TableId.TOPIC, name)``: the topic's name.
V2NameKey = Struct("head" / V2KeyHead, "name_length" / Int16sb, "name" / Bytes(this.name_length))
