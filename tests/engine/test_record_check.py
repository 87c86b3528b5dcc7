"""Every verdict and reason of the per-record check (``CommitLog#checkMessageAndReturnSize``) on
a record the encoder wrote, then damaged one field at a time: the fast path and the careful
decode must agree on the valid record and name each damage the way the commands print it."""

from __future__ import annotations

import pytest
from rmqstore_cli.formats.commitlog import MAGIC_V1

from rmqstore_cli.store.commitlog import END_OF_DATA, AppendSpec, Status, blank_record, check_message, encode_record
from rmqstore_cli.store.commitlog.layout import (
    HEAD_STRUCT,
    MIDDLE_STRUCTS,
    PREFIX_STRUCT,
    PROPERTIES_LENGTH_SIZE,
    PROPERTIES_LENGTH_STRUCT,
)
from rmqstore_cli.store.layout.config import StoreConfig

HOST = (bytes([10, 0, 0, 5]), 10911)
BODY = b"hello, broker"
PROPS = "KEYS\x01k1\x02"


def record() -> bytearray:
    spec = AppendSpec("TopicA", 3, BODY, PROPS, 1_700_000_000_123, 1_700_000_000_000, HOST, HOST, magic=MAGIC_V1)
    return encode_record(spec, StoreConfig())


def body_at() -> int:
    return HEAD_STRUCT.size + MIDDLE_STRUCTS[(False, False)].size


def test_valid_record_decodes_all_fields():
    buf = bytes(record())
    for crc in (False, True):
        c = check_message(buf, 0, len(buf), 4096, check_crc=crc)
        assert (c.status, c.size, c.reason) == (Status.VALID, len(buf), "")
        m = c.message
        assert (m.topic, m.queue_id, m.body, m.store_timestamp, m.offset) == (
            "TopicA",
            3,
            BODY,
            1_700_000_000_123,
            4096,
        )
        assert m.properties_bytes == PROPS.encode()


def test_body_crc_mismatch_is_invalid_only_when_checked():
    buf = record()
    buf[body_at()] ^= 0xFF
    assert check_message(bytes(buf), 0, len(buf), 0).status is Status.VALID
    c = check_message(bytes(buf), 0, len(buf), 0, check_crc=True)
    assert c.status is Status.INVALID
    assert c.reason.startswith("body CRC mismatch (stored ")


def test_size_mismatch_keeps_the_message_and_the_stored_size():
    buf = record() + bytearray(8)
    PREFIX_STRUCT.pack_into(buf, 0, len(buf), MAGIC_V1)
    c = check_message(bytes(buf), 0, len(buf), 0)
    assert c.status is Status.SIZE_MISMATCH
    assert c.size == len(buf)
    assert c.reason == f"total size {len(buf)} but fields add up to {len(buf) - 8}"
    assert c.message is not None and c.message.body == BODY


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b.__setitem__(slice(4, 8), b"\x01\x02\x03\x04"), "bad magic code 0x01020304"),
        (lambda b: b.__setitem__(body_at() + len(BODY), 200), "bad topic length -56"),
        (
            lambda b: PROPERTIES_LENGTH_STRUCT.pack_into(
                b, len(b) - len(PROPS.encode()) - PROPERTIES_LENGTH_SIZE, 1000
            ),
            "properties length 1000 runs past the file's end",
        ),
    ],
)
def test_damaged_field_is_invalid_with_its_reason(damage, reason):
    buf = record()
    damage(buf)
    c = check_message(bytes(buf), 0, len(buf), 0)
    assert (c.status, c.size, c.reason) == (Status.INVALID, -1, reason)


def test_ends_of_the_data():
    zeros = bytes(64)
    assert check_message(zeros, 0, 64, 0).reason == END_OF_DATA
    assert check_message(zeros, 60, 64, 0).reason == "fewer than 8 bytes left in the file"
    blank = blank_record(64) + bytes(56)
    assert check_message(blank, 0, 64, 0).status is Status.BLANK


def test_records_cut_by_the_files_end():
    buf = bytes(record())
    c = check_message(buf, 0, len(buf) - 1, 0)
    assert c.reason == f"total size {len(buf)} does not fit in the {len(buf) - 1} bytes left"
    short = bytearray(buf[: HEAD_STRUCT.size + 4])
    PREFIX_STRUCT.pack_into(short, 0, len(short), MAGIC_V1)
    c = check_message(bytes(short), 0, len(short), 0)
    assert (c.status, c.reason) == (Status.INVALID, "record truncated in its fixed fields")
