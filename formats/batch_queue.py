"""Batch consume-queue units and the compaction store's files
(docs/format/batch-consume-queue.md, docs/format/compaction.md).

5.x ``BatchConsumeQueue`` (``batchconsumequeue/<topic>/<queueId>/``, topics with
``queue.type=BatchCQ``) and its subclass ``SparseConsumeQueue`` (the compaction store's
``compaction/compactionCq/<topic>/<queueId>/``) write the same 46-byte unit; the
compaction log (``compaction/compactionLog/<topic>/<queueId>/``) holds commit-log records.
"""

from __future__ import annotations

from construct import GreedyBytes, Int16sb, Int32sb, Int64sb, Prefixed, Struct

from .derive import fixed_fields_format

#: ``BatchConsumeQueue#putBatchMessagePositionInfo``: one 46-byte unit per (inner-batch) message.
BatchConsumeQueueUnit = Struct(
    "commitlog_offset" / Int64sb,
    "size" / Int32sb,
    "tags_code" / Int64sb,
    "store_time" / Int64sb,
    "msg_base_offset" / Int64sb,
    "batch_size" / Int16sb,
    "compacted_offset" / Int32sb,
    "reserved" / Int32sb,
)
#: ``BatchConsumeQueue.CQ_STORE_UNIT_SIZE``.
BATCH_CQ_UNIT_SIZE: int = BatchConsumeQueueUnit.sizeof()
BCQ_UNIT_FORMAT = fixed_fields_format(BatchConsumeQueueUnit)
#: ``BatchConsumeQueue.INVALID_POS``: the compactedOffset every unit is written with.
INVALID_POS = -1

#: ``MessageStoreConfig#mapperFileSizeBatchConsumeQueue`` default (300 000 units).
DEFAULT_BCQ_FILE_SIZE = 300_000 * BATCH_CQ_UNIT_SIZE

#: ``CompactionStore``: directories under the store root, and ``CompactionPositionMgr``'s file.
COMPACTION_DIR = "compaction"
COMPACTION_LOG_DIR = "compactionLog"
COMPACTION_CQ_DIR = "compactionCq"
POSITION_CHECKPOINT = "position-checkpoint"
#: ``CompactionPositionMgr#setOffset``: the key of ``queueOffsetMap`` is ``topic + "_" + queueId``.
POSITION_KEY_SEPARATOR = "_"
#: Most bytes of a position-checkpoint read (one long per compacted queue).
POSITION_CHECKPOINT_LIMIT = 16 * 1024 * 1024

#: ``MessageConst.PROPERTY_INNER_NUM`` / ``PROPERTY_INNER_BASE``: an inner batch's message
#: count and its first queue offset (``CommitLog#setBatchSizeIfNeeded``).
PROPERTY_INNER_NUM = "INNER_NUM"
PROPERTY_INNER_BASE = "INNER_BASE"
#: ``TopicAttributes.QUEUE_TYPE_ATTRIBUTE`` and the value that sends a topic to batchconsumequeue/.
QUEUE_TYPE_ATTRIBUTE = "queue.type"
BATCH_CQ_TYPE = "BatchCQ"
#: ``CQType`` values a topic's ``queue.type`` may hold, and the default (``TopicAttributes``).
CQ_TYPES = ("SimpleCQ", BATCH_CQ_TYPE, "RocksDBCQ")
SIMPLE_CQ_TYPE = "SimpleCQ"

#: ``MessageDecoder#encodeMessage``: one message of a client's batch, as the body of an
#: inner-batch record holds it (MAGICCODE and BODYCRC written as 0, the flag the message's).
InnerBatchMessage = Struct(
    "total_size" / Int32sb,
    "magic" / Int32sb,
    "body_crc" / Int32sb,
    "flag" / Int32sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "properties" / Prefixed(Int16sb, GreedyBytes),
)
#: TOTALSIZE .. BODYLENGTH and PROPERTIES length: the bytes of an inner message besides its data.
INNER_MESSAGE_OVERHEAD = 4 * 5 + 2
