"""Record magic codes and ``MessageSysFlag`` bits (docs/format/commitlog.md#sysflag,
docs/format/commitlog.md#blank-record, docs/format/commitlog.md#whole-record-crc).

Plain numbers, no construct: importing them is free.
"""

MAGIC_V1 = 0xDAA320A7  # MessageDecoder.MESSAGE_MAGIC_CODE (V1)
MAGIC_V2 = 0xDAA320AB  # MessageDecoder.MESSAGE_MAGIC_CODE_V2 (5.1.0+)
MAGIC_BLANK = 0xCBD43194  # CommitLog.BLANK_MAGIC_CODE
END_FILE_MIN_BLANK_LENGTH = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH

# MessageSysFlag
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700

# CommitLog.CRC32_RESERVED_LEN: "__CRC32#" + \x01 + 10 digits + \x02
CRC32_PROPERTY = "__CRC32#"
CRC32_RESERVED_LEN = len(CRC32_PROPERTY) + 1 + 10 + 1
