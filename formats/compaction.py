"""What a 5.x broker writes when it dispatches a compaction topic's message
(``CompactionLog#asyncPutMessage``, docs/format/compaction.md).

The compaction log's records and BLANK are the commit log's (:mod:`.commitlog`) and its
queue's units are the 46-byte ``BatchConsumeQueue`` units (:mod:`.batch_queue`); this
file holds the rest: the topic attribute that makes a topic a compaction topic, the
default file sizes, and the end-of-file rule's numbers.
"""

from __future__ import annotations

from construct import Int64sb

from .commitlog import MessageHead
from .derive import field_offset

#: ``TopicAttributes.CLEANUP_POLICY_ATTRIBUTE`` and ``CleanupPolicy.COMPACTION``: a topic
#: whose ``cleanup.policy`` is COMPACTION is dispatched to the compaction store
#: (``CompactionService#putRequest``, ``CleanupPolicyUtils#getDeletePolicy``).
CLEANUP_POLICY_ATTRIBUTE = "cleanup.policy"
COMPACTION_POLICY = "COMPACTION"

#: ``MessageStoreConfig#compactionMappedFileSize`` and ``#compactionCqMappedFileSize`` defaults.
DEFAULT_COMPACTION_MAPPED_FILE_SIZE = 100 * 1024 * 1024
DEFAULT_COMPACTION_CQ_MAPPED_FILE_SIZE = 10 * 1024 * 1024

#: ``CompactionLog.END_FILE_MIN_BLANK_LENGTH``: room a log file keeps for its BLANK (size, magic).
COMPACTION_END_BLANK_LENGTH = 4 + 4


def position_checkpoint_text(items: list[tuple[str, int]]) -> str:
    """``CompactionPositionMgr#encode(true)`` as ``ConfigManager#persist`` writes it: fastjson's
    pretty format (tab indents, no spaces, properties sorted: ``empty`` then ``queueOffsetMap``,
    whose entries come in the map's iteration order, as given; an empty map is ``{}``)."""
    import json

    if not items:
        return '{\n\t"empty":true,\n\t"queueOffsetMap":{}\n}'
    entries = ",\n".join(f"\t\t{json.dumps(k, ensure_ascii=False)}:{v}" for k, v in items)
    return '{\n\t"empty":false,\n\t"queueOffsetMap":{\n' + entries + "\n\t}\n}"


# The two longs ``CompactionAppendMessageCallback#doAppend`` reads and rewrites in a copied
# record: QUEUEOFFSET (``logicOffsetPos = 4 + 4 + 4 + 4 + 4``) and PHYSICALOFFSET after it.
RecordLong = Int64sb
QUEUE_OFFSET_POS = field_offset(MessageHead, "queue_offset")
PHYSICAL_OFFSET_POS = field_offset(MessageHead, "physical_offset")
