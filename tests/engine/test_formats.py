"""The construct declarations and the hot-path views derived from them agree on every field;
every codec round-trips (hypothesis)."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings, strategies as st
from rmqstore_cli.formats.batch_queue import BATCH_CQ_UNIT_SIZE, BatchConsumeQueueUnit
from rmqstore_cli.formats.checkpoint import CHECKPOINT_V5_FORMAT, CheckpointV5
from rmqstore_cli.formats.commitlog import (
    BORNHOST_V6_FLAG,
    MAGIC_V1,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    BlankRecord,
    MessageRecord,
)
from rmqstore_cli.formats.consume_queue import (
    ConsumeQueueExtUnit,
    ConsumeQueueUnit,
)
from rmqstore_cli.formats.derive import numpy_dtype
from rmqstore_cli.formats.index import ENTRY_FORMAT, HEADER_FORMAT, IndexEntry, IndexHeader
from rmqstore_cli.formats.properties import parse_properties, serialize_properties

from rmqstore_cli.store.commitlog import CommitLog, Status, check_message
from rmqstore_cli.store.layout.config import StoreConfig
from tests.helpers import fixture_dir

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def records(draw):
    born_v6, store_v6 = draw(st.booleans()), draw(st.booleans())
    magic = draw(st.sampled_from([MAGIC_V1, MAGIC_V2]))
    sys_flag = draw(i32) & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    sys_flag |= (BORNHOST_V6_FLAG if born_v6 else 0) | (STOREHOSTADDRESS_V6_FLAG if store_v6 else 0)
    topic_max = 300 if magic == MAGIC_V2 else 127

    def host(v6):
        return {"address": draw(st.binary(min_size=16 if v6 else 4, max_size=16 if v6 else 4)), "port": draw(i32)}

    return dict(
        magic=magic,
        body_crc=draw(i32),
        queue_id=draw(i32),
        flag=draw(i32),
        queue_offset=draw(i64),
        physical_offset=draw(i64),
        sys_flag=sys_flag,
        born_timestamp=draw(i64),
        born_host=host(born_v6),
        store_timestamp=draw(i64),
        store_host=host(store_v6),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
        body=draw(st.binary(max_size=300)),
        topic=draw(st.binary(max_size=topic_max)),
        properties=draw(st.binary(max_size=300)),
    )


@settings(max_examples=300, deadline=None)
@given(records())
def test_message_record_round_trip_and_hot_path_agree(rec):
    raw = MessageRecord.build(rec)
    parsed = MessageRecord.parse(raw)
    assert parsed.total_size == len(raw)
    assert MessageRecord.build(parsed) == raw  # encode(decode(bytes)) == bytes
    c = check_message(raw, 0, len(raw), 0)  # the struct hot path
    assert c.status is Status.VALID
    m = c.message
    _assert_decoded_as(m, parsed)


def _assert_decoded_as(m, parsed) -> None:
    """Every field of the engine's Message ``m`` equals construct's decoding ``parsed``."""
    for name in (
        "total_size",
        "magic",
        "body_crc",
        "queue_id",
        "flag",
        "queue_offset",
        "physical_offset",
        "sys_flag",
        "born_timestamp",
        "store_timestamp",
        "reconsume_times",
        "prepared_transaction_offset",
        "body",
    ):
        assert getattr(m, name) == parsed[name], name
    assert (m.born_address, m.born_port) == (parsed.born_host.address, parsed.born_host.port)
    assert (m.store_address, m.store_port) == (parsed.store_host.address, parsed.store_host.port)
    assert (m.topic_bytes, m.properties_bytes) == (parsed.topic, parsed.properties)


@settings(max_examples=200, deadline=None)
@given(st.lists(records(), min_size=1, max_size=4))
def test_named_positions_read_every_field_as_the_declaration_decodes_it(recs):
    """The bulk read (RecordBatch, MessageBlock: offsets from formats.commitlog's named
    positions, no number of their own) gives every field construct decodes."""
    from rmqstore_cli.formats.commitlog import RECORD_FIXED_SIZE, record_length

    from rmqstore_cli.store.commitlog.bulk import RecordBatch
    from rmqstore_cli.store.commitlog.columns import MessageBlock

    raws = [MessageRecord.build(r) for r in recs]
    buf = b"".join(raws)
    pos = np.cumsum([0] + [len(r) for r in raws[:-1]]).astype(np.int64)
    blk = MessageBlock(buf, np.frombuffer(buf, np.uint8), RecordBatch(np.frombuffer(buf, np.uint8), pos), 0, "f")
    assert RECORD_FIXED_SIZE == 74  # CommitLog#calMsgLength's constant part
    for i, (raw, m) in enumerate(zip(raws, blk.messages(), strict=True)):
        parsed = MessageRecord.parse(raw)
        assert (
            blk.rb.expected[i]
            == len(raw)
            == record_length(parsed.sys_flag, parsed.magic, len(parsed.body), len(parsed.topic), len(parsed.properties))
        )
        _assert_decoded_as(m, parsed)


def test_message_id_formats_match_declarations():
    """formats/message_id.py is construct-free (decode-msgid imports it for free): its
    formats against construct declarations of the same bytes."""
    from construct import Int16ub, Int32sb, Int32ub, Int64sb, Struct
    from rmqstore_cli.formats.derive import fixed_fields_format
    from rmqstore_cli.formats.message_id import OFFSET_MSG_ID_TAIL_FORMAT, UNIQ_KEY_TAIL_FORMAT, UNIQ_KEY_TAIL_SIZE

    offset_tail = Struct("port" / Int32sb, "physical_offset" / Int64sb)
    uniq_tail = Struct(
        "pid" / Int16ub, "class_loader_hash" / Int32sb, "time_in_month_ms" / Int32ub, "counter" / Int16ub
    )
    assert struct.calcsize(OFFSET_MSG_ID_TAIL_FORMAT) == struct.calcsize(fixed_fields_format(offset_tail))
    assert OFFSET_MSG_ID_TAIL_FORMAT.replace("i", "l") == fixed_fields_format(offset_tail)
    assert UNIQ_KEY_TAIL_FORMAT.replace("i", "l").replace("I", "L") == fixed_fields_format(uniq_tail)
    assert UNIQ_KEY_TAIL_SIZE == uniq_tail.sizeof()
    from rmqstore_cli.formats.commitlog import HOST_ADDRESS_SIZE
    from rmqstore_cli.formats.message_id import ADDRESS_SIZES, OFFSET_MSG_ID_TAIL_SIZE

    assert ADDRESS_SIZES == (HOST_ADDRESS_SIZE[False], HOST_ADDRESS_SIZE[True])
    assert OFFSET_MSG_ID_TAIL_SIZE == offset_tail.sizeof()


def test_hot_path_agrees_with_declaration_on_real_broker_records():
    for version in ("4.9.7", "5.3.3"):
        d = fixture_dir(version)
        cfg = StoreConfig.load(d / "store", d / "broker.conf")
        cl = CommitLog(cfg)
        n = 0
        for m in cl.scan():
            f = cl.queue.find(m.physical_offset)
            buf = f.buffer()
            pos = m.physical_offset - f.file_from_offset
            parsed = MessageRecord.parse(bytes(buf[pos : pos + m.total_size]))
            assert parsed.topic == m.topic_bytes and parsed.properties == m.properties_bytes
            assert parsed.store_timestamp == m.store_timestamp and parsed.body == m.body
            assert MessageRecord.build(parsed) == bytes(buf[pos : pos + m.total_size])
            n += 1
        assert n > 500
        cl.close()


def test_blank_record():
    raw = BlankRecord.build({"total_size": 678})
    assert raw == bytes.fromhex("000002A6CBD43194")
    c = check_message(raw + bytes(670), 0, 678, 0)
    assert c.status is Status.BLANK


def _dtype_agrees(struct_decl, values: dict):
    raw = struct_decl.build(values)
    arr = np.frombuffer(raw, dtype=numpy_dtype(struct_decl))
    for k, v in values.items():
        assert int(arr[k][0]) == v, k
    return raw


@given(i64, i32, i64)
def test_cq_unit_round_trip_and_numpy_view(offset, size, tags):
    vals = {"commitlog_offset": offset, "size": size, "tags_code": tags}
    raw = _dtype_agrees(ConsumeQueueUnit, vals)
    assert len(raw) == 20
    assert dict(ConsumeQueueUnit.parse(raw), _io=None) | {"_io": None} == vals | {"_io": None}


@given(i64, i32, i64, i64, i64, st.integers(-(2**15), 2**15 - 1), i32, i32)
def test_batch_cq_unit(offset, size, tags, store_time, base, batch, compacted, reserved):
    vals = dict(
        commitlog_offset=offset,
        size=size,
        tags_code=tags,
        store_time=store_time,
        msg_base_offset=base,
        batch_size=batch,
        compacted_offset=compacted,
        reserved=reserved,
    )
    raw = _dtype_agrees(BatchConsumeQueueUnit, vals)
    assert len(raw) == BATCH_CQ_UNIT_SIZE == 46
    assert BatchConsumeQueueUnit.build(BatchConsumeQueueUnit.parse(raw)) == raw


@given(i64, i64, st.binary(max_size=16))
def test_cq_ext_unit(tags, t, bitmap):
    vals = dict(size=20 + len(bitmap), tags_code=tags, msg_store_time=t, bitmap_size=len(bitmap), filter_bitmap=bitmap)
    raw = ConsumeQueueExtUnit.build(vals)
    assert len(raw) == 20 + len(bitmap)
    assert ConsumeQueueExtUnit.build(ConsumeQueueExtUnit.parse(raw)) == raw


@given(i64, i64, i64, i64, i32, i32, i32, i64, i32, i32)
def test_index_header_and_entry_agree_with_struct(b, e, bp, ep, hsc, ic, kh, po, td, pi):
    hv = dict(
        begin_timestamp=b, end_timestamp=e, begin_phy_offset=bp, end_phy_offset=ep, hash_slot_count=hsc, index_count=ic
    )
    raw = IndexHeader.build(hv)
    assert len(raw) == 40 and struct.unpack(HEADER_FORMAT, raw) == tuple(hv.values())
    ev = dict(key_hash=kh, phy_offset=po, time_diff=td, prev_index=pi)
    raw = _dtype_agrees(IndexEntry, ev)
    assert len(raw) == 20 and struct.unpack(ENTRY_FORMAT, raw) == tuple(ev.values())


@given(i64, i64, i64, i64, i64)
def test_checkpoint(a, b, c, d, e):
    vals = dict(
        physic_msg_timestamp=a,
        logics_msg_timestamp=b,
        index_msg_timestamp=c,
        master_flushed_offset=d,
        confirm_phy_offset=e,
    )
    raw = CheckpointV5.build(vals)
    assert struct.unpack(CHECKPOINT_V5_FORMAT, raw) == tuple(vals.values())


def test_properties_parse_broker_example():
    """The example in docs/format/properties.md#parsing of MessageDecoder#string2messageProperties."""
    s = "A\x01\x02B\x01x\x01y\x02\x01v\x02K\x011\x02K\x012\x02ab"
    assert parse_properties(s) == {"B": "x\x01y", "K": "2"}


def _broker_parse(s: str) -> dict:
    """The broker's index walk, literally, to check the split-based parser against."""
    out, i, n = {}, 0, len(s)
    while i < n:
        j = s.find("\x02", i)
        j = n if j < 0 else j
        if j - i >= 3:
            k = s.find("\x01", i)
            if i < k < j - 1:
                out[s[i:k]] = s[k + 1 : j]
        i = j + 1
    return out


@given(st.text(alphabet=st.sampled_from("ab\x01\x02é"), max_size=40))
def test_properties_parse_equals_broker_walk(s):
    assert parse_properties(s) == _broker_parse(s)


@given(
    st.lists(
        st.tuples(
            st.text(alphabet="ABCKZ_", min_size=1, max_size=6), st.text(alphabet="xyz 9-订", min_size=1, max_size=8)
        ),
        max_size=8,
    ),
    st.booleans(),
)
def test_properties_round_trip(items, trailing):
    s = serialize_properties(items, trailing)
    assert parse_properties(s) == dict(items)
    assert s.endswith("\x02") == (trailing and bool(items))


def test_index_and_record_dtypes_match_the_declarations():
    """The numpy views formats/ exports have the declarations' sizes and field names."""
    from rmqstore_cli.formats import commitlog as C, index as I

    for dtype, size, s in (
        (I.HEADER_DTYPE, I.INDEX_HEADER_SIZE, IndexHeader),
        (I.ENTRY_DTYPE, I.INDEX_ENTRY_SIZE, IndexEntry),
        (I.SLOT_DTYPE, I.HASH_SLOT_SIZE, I.IndexSlot),
        (C.HEAD_DTYPE, C.HEAD_SIZE, C.MessageHead),
        (C.PREFIX_DTYPE, struct.calcsize(C.PREFIX_FORMAT), C.RecordPrefix),
    ):
        assert dtype.itemsize == size and list(dtype.names) == [sc.name for sc in s.subcons]
    assert [f.offset for f in C.HEAD.values()] == [C.HEAD_DTYPE.fields[n][1] for n in C.HEAD]
