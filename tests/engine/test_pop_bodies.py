"""formats/pop.py against bodies as the broker writes them: ``JSON.toJSONString`` (fastjson)
of PopCheckPoint, AckMsg and BatchAckMsg, whose @JSONField names and order are written out
here from the broker's source (fields sorted by name, nulls left out, the getter-only
``getReviveTime`` as ``reviveTime``), and the long-name bodies the broker's own
AckMsgTest / BatchAckMsgTest parse."""

from __future__ import annotations

import pytest
from rmqstore_cli.formats.pop import (
    Ack,
    BodyError,
    CheckPoint,
    ack_body,
    ack_uniq_key,
    checkpoint_body,
    ck_uniq_key,
    parse_ack,
    parse_checkpoint,
    retry_topics,
)

#: PopMessageProcessor#appendCheckPoint's checkpoint of three messages at queue offsets 100,
#: 102 and 105 (queueOffsetDiff 0, 2, 5), as JSON.toJSONString writes it
CK = (
    b'{"bm":0,"bn":"broker-a","c":"GID_order","d":[0,2,5],"it":60000,"n":3,"pt":1700000000000,"q":1,'
    b'"reviveTime":1700000060000,"ro":0,"so":100,"t":"OrderTopic"}'
)
#: AckMessageProcessor#appendAck's AckMsg (short names)
ACK = b'{"ao":102,"bn":"broker-a","c":"GID_order","pt":1700000000000,"q":1,"so":100,"t":"OrderTopic"}'
#: PopBufferMergeService#putBatchAckToStore's BatchAckMsg: the inherited ackOffset stays 0
BACK = b'{"ao":0,"aol":[100,105],"bn":"broker-a","c":"GID_order","pt":1700000000000,"q":1,"so":100,"t":"OrderTopic"}'


def test_a_checkpoint_as_the_broker_writes_it():
    ck = parse_checkpoint(CK)
    assert (ck.start_offset, ck.num, ck.bitmap, ck.queue_id) == (100, 3, 0, 1)
    assert (ck.topic, ck.group, ck.broker_name, ck.reput_times) == ("OrderTopic", "GID_order", "broker-a", None)
    assert ck.revive_time == 1700000060000
    assert ck.offsets() == [100, 102, 105]  # PopCheckPoint#ackOffsetByIndex
    assert [ck.index_of_ack(o) for o in (99, 100, 101, 102, 105, 106)] == [-1, 0, -1, 1, 2, -1]
    assert checkpoint_body(ck) == CK  # generate writes the same bytes
    assert ck_uniq_key(ck) == "OrderTopic@1@100@GID_order@1700000000000@broker-a@ck"


def test_an_old_checkpoint_without_diffs_counts_from_its_start():
    ck = parse_checkpoint(b'{"bm":5,"c":"g","it":1000,"n":4,"pt":1,"q":0,"so":7,"t":"T"}')
    assert ck.offsets() == [7, 8, 9, 10]
    assert [ck.index_of_ack(o) for o in (7, 10, 11)] == [0, 3, -1]
    assert ck.bitmap == 5 and ck.broker_name is None


def test_a_reput_checkpoint_keeps_its_reput_times():
    ck = parse_checkpoint(b'{"bm":0,"c":"g","d":[0],"it":1000,"n":1,"pt":1,"q":0,"rp":"2","so":7,"t":"T"}')
    assert ck.reput_times == "2" and ck.offsets() == [7]


def test_acks_short_and_long_names():
    a = parse_ack(ACK, False)
    assert (a.ack_offsets, a.start_offset, a.group, a.topic, a.queue_id, a.pop_time) == (
        (102,),
        100,
        "GID_order",
        "OrderTopic",
        1,
        1700000000000,
    )
    assert ack_body(a) == ACK
    # AckMsgTest's longString: alternateNames
    long = parse_ack(
        b'{"ackOffset":100,"brokerName":"brokerName","consumerGroup":"group","popTime":1670212915531,'
        b'"queueId":3,"startOffset":200,"topic":"topic"}',
        False,
    )
    assert long == Ack(False, (100,), 200, "group", "topic", 3, 1670212915531, "brokerName")
    assert ack_uniq_key(a) == "OrderTopic@1@102@GID_order@1700000000000@broker-a@ack"


def test_batch_acks_short_and_long_names():
    b = parse_ack(BACK, True)
    assert b.ack_offsets == (100, 105) and b.batch
    assert ack_body(b) == BACK
    # BatchAckMsgTest's longString (a space after the comma, no brokerName)
    long = parse_ack(
        b'{"ackOffsetList":[100, 101],"consumerGroup":"group","popTime":1679454922000,"queueId":3,'
        b'"startOffset":200,"topic":"topic"}',
        True,
    )
    assert long.ack_offsets == (100, 101) and long.broker_name is None
    assert ack_uniq_key(b) == "OrderTopic@1@[100, 105]@GID_order@1700000000000@bAck"  # List#toString


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[1,2]", b'{"so":"x"}', b'{"n":300}', b'{"d":5}', b'{"q":true}', b"\xff"],
)
def test_bodies_the_broker_cannot_read(body):
    with pytest.raises(BodyError):
        parse_checkpoint(body)


def test_retry_topics_v1_v2_and_a_retry_topic_itself():
    assert retry_topics("g", "T") == ("%RETRY%g_T", "%RETRY%g+T")
    assert retry_topics("g", "%RETRY%g_T") == ("%RETRY%g_T",)


def test_checkpoint_fields_round_trip():
    ck = CheckPoint(5, 10, 20, 3, 2, 0, "T", "g", 9, (0, 1), None, "1")
    assert parse_checkpoint(checkpoint_body(ck)) == ck
