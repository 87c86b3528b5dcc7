"""Trace bodies parsed (formats/trace.py) against bodies written out here in the client's
field order, one type at a time (``TraceDataEncoder#encoderFromContextBean``), with the field
counts older and newer clients write (``#decoderFromTraceDataString``'s length rules)."""

from __future__ import annotations

from rmqstore_cli.formats.trace import encode_context, parse_trace_body, trace_keys

C, F = "\x01", "\x02"  # TraceConstants.CONTENT_SPLITOR, FIELD_SPLITOR

PUB = ["Pub", "1700000000000", "DefaultRegion", "pg", "OrderTopic", "MSGID1", "TagA", "k1 k2", "10.0.0.5:10911",
       "123", "7", "0", "OFFSETID1", "true"]  # fmt: skip
SUB_BEFORE = ["SubBefore", "1700000000100", "DefaultRegion", "cg", "REQ1", "MSGID1", "2", "k1 k2"]
SUB_AFTER = ["SubAfter", "REQ1", "MSGID1", "15", "false", "k1 k2", "4", "1700000000115", "cg"]
END_TX = ["EndTransaction", "1700000000050", "DefaultRegion", "pg", "OrderTopic", "MSGID1", "TagA", "k1 k2",
          "10.0.0.5:10911", "1", "TXID1", "COMMIT_MESSAGE", "false"]  # fmt: skip


def body(*contexts: list[str]) -> bytes:
    return "".join(C.join(c) + F for c in contexts).encode()


def test_every_type_in_one_body_in_order() -> None:
    got = parse_trace_body(body(PUB, SUB_BEFORE, SUB_AFTER, END_TX))
    assert [e.type for e in got] == ["Pub", "SubBefore", "SubAfter", "EndTransaction"]
    pub, before, after, end = got
    assert pub.fields["timestamp"] == 1700000000000 and pub.fields["topic"] == "OrderTopic"
    assert pub.fields["msg_id"] == "MSGID1" and pub.fields["offset_msg_id"] == "OFFSETID1"
    assert (pub.fields["body_length"], pub.fields["cost_time"], pub.fields["msg_type"]) == (123, 7, 0)
    assert pub.fields["success"] is True and pub.extra == () and pub.field_count == 14
    assert before.fields["request_id"] == "REQ1" and before.fields["retry_times"] == 2
    assert before.fields["keys"] == "k1 k2" and before.fields["group"] == "cg"
    assert after.fields["success"] is False and after.fields["context_code"] == 4
    assert after.fields["timestamp"] == 1700000000115 and after.fields["group"] == "cg"
    assert end.fields["transaction_id"] == "TXID1" and end.fields["transaction_state"] == "COMMIT_MESSAGE"
    assert end.fields["from_transaction_check"] is False and end.fields["msg_type"] == 1


def test_older_and_newer_field_counts() -> None:
    """A 13-field Pub has success where the offset msgId would be; a 15-field one a client
    host; a 6-field SubAfter (no context code, no time) and a 7-field one; fields past the
    layout are kept, unnamed, in ``extra``."""
    old_pub, new_pub, more = PUB[:12] + ["true"], PUB + ["10.1.1.1"], PUB + ["10.1.1.1", "x", "y"]
    got = parse_trace_body(body(old_pub, new_pub, more, SUB_AFTER[:6], SUB_AFTER[:7]))
    assert got[0].fields["success"] is True and "offset_msg_id" not in got[0].fields
    assert got[1].fields["client_host"] == "10.1.1.1" and got[1].extra == ()
    assert got[2].extra == ("x", "y") and got[2].field_count == 17
    assert "context_code" not in got[3].fields and got[3].fields["keys"] == "k1 k2"
    assert got[4].fields["context_code"] == 4 and "timestamp" not in got[4].fields


def test_unknown_type_and_bad_number() -> None:
    bad = SUB_BEFORE[:6] + ["two", "k"]
    got = parse_trace_body(body(["PullAfter", "a", "b"], bad))
    assert got[0].type == "PullAfter" and got[0].fields == {} and got[0].extra == ("a", "b")
    assert got[1].fields["retry_times"] == "two" and got[1].problems == ("retry_times 'two' is not a number",)


def test_encoder_writes_the_client_order_and_keys() -> None:
    values = dict(zip(
        ("request_id", "msg_id", "cost_time", "success", "keys", "context_code", "timestamp", "group"),
        ("REQ1", "MSGID1", 15, False, "k1 k2", 4, 1700000000115, "cg"),
        strict=True,
    ))  # fmt: skip
    assert encode_context("SubAfter", values) == C.join(SUB_AFTER) + F
    assert trace_keys([("M1", "k1 k2"), ("M2", None), ("M1", "k2")]) == "M1 k1 k2 M2"
