"""Java compatibility: JDK-computed vectors (docs/format/hashes.md#check-values) and
the worked example of docs/format/commitlog.md#a-synthetic-record."""

from __future__ import annotations

import datetime as dt
import json

import crcmod.predefined
from rmqstore_cli.formats.commitlog import MAGIC_V1

from rmqstore_cli.store.commitlog import AppendSpec, CommitLog, Status, check_message, encode_record
from rmqstore_cli.store.javahash import index_key_hash, java_hash
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.records.message import (
    JavaHashMap,
    body_crc,
    decode_offset_msg_id,
    decode_uniq_key,
    encode_uniq_key,
    host_bytes,
    offset_msg_id,
)
from rmqstore_cli.store.write.send_path import BrokerProfile, broker_map, stored_properties
from tests.helpers import VECTORS


def _vectors():
    return json.loads((VECTORS / "java-hash-crc.json").read_text(encoding="utf-8"))


def test_string_hashcode_matches_jdk_vectors():
    v = _vectors()
    for case in v["hash"]:
        s = case["s"]
        # the JSON carries UTF-16 surrogate pairs; Python joins them into one code point
        assert s.encode("utf-8", "surrogatepass").hex() == case["utf8_hex"]
        assert java_hash(s) == case["java_hash"], s
        assert index_key_hash(s) == case["index_hash"], s


def test_crc_matches_jdk_vectors_and_crcmod():
    crc32 = crcmod.predefined.mkCrcFun("crc-32")  # an independent CRC implementation
    for case in _vectors()["crc32"]:
        body = bytes.fromhex(case["body_hex"])
        assert crc32(body) == case["crc32"]
        assert body_crc(body) == case["rocketmq_body_crc"]


def test_index_hash_of_min_value_is_zero():
    assert java_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0


def test_hashmap_order_matches_jdk_example():
    """docs/format/properties.md#property-order: KEYS, TAGS, UNIQ_KEY, WAIT, CLUSTER inserted in that order."""
    for cap, expected in (
        (16, ["KEYS", "UNIQ_KEY", "CLUSTER", "WAIT", "TAGS"]),
        (128, ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]),
    ):
        m = JavaHashMap(cap)
        for k in ("KEYS", "TAGS", "UNIQ_KEY", "WAIT", "CLUSTER"):
            m.put(k, "x")
        assert [k for k, _ in m.items()] == expected


def test_hashmap_resize_keeps_bucket_order():
    m = JavaHashMap(16)
    keys = [f"K{i}" for i in range(13)]
    for k in keys:
        m.put(k, "v")
    assert m.capacity == 32
    order = [k for k, _ in m.items()]
    assert sorted(order) == sorted(keys)

    def bucket(k):
        h = java_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & 31

    assert [bucket(k) for k in order] == sorted(bucket(k) for k in order)


WORKED_RECORD = (
    "000000CB DAA320A7 69C865ED 00000001 00000000 0000000000000007 0000000040001000 00000000 "
    "0000018BCFE56800 C0A8010A 0000D431 0000018BCFE5687B 0A000005 00002A9F 00000000 0000000000000000 "
    "0000000E 48656C6C6F20526F636B65744D51 09 546F70696354657374 0059"
)


def _worked_spec(profile: BrokerProfile) -> AppendSpec:
    client = [
        ("KEYS", "OrderID-1"),
        ("TAGS", "TagA"),
        ("UNIQ_KEY", "C0A8010A30391B6D358647B760000001"),
        ("WAIT", "true"),
    ]
    props = stored_properties(broker_map(client, profile, "DefaultCluster"), profile)
    return AppendSpec(
        "TopicTest",
        1,
        b"Hello RocketMQ",
        props,
        1700000000123,
        1700000000000,
        host_bytes("192.168.1.10:54321"),
        host_bytes("10.0.0.5:10911"),
        magic=MAGIC_V1,
    )


def test_worked_example_record_bytes(tmp_path):
    """docs/format/commitlog.md#a-synthetic-record: the 4.9.7 record, byte for byte, through the append path."""
    cfg = StoreConfig.load(tmp_path, None, mapped_file_size_commit_log=1 << 30)
    cl = CommitLog(cfg, writable=True)
    cl.open_for_append()
    cl._write_offset = 1073745920  # file 00000000001073741824, position 4096
    cl.topic_queue_table["TopicTest-1"] = 7
    res = cl.append(_worked_spec(BrokerProfile("4.9")))
    cl.close()
    head = bytes.fromhex(WORKED_RECORD.replace(" ", ""))
    assert res.size == 203
    assert res.record[: len(head)] == head
    props = res.record[114:].decode()
    assert props == (
        "KEYS\x01OrderID-1\x02UNIQ_KEY\x01C0A8010A30391B6D358647B760000001\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA"
    )
    assert res.msg_id == "0A00000500002A9F0000000040001000"
    assert (tmp_path / "commitlog" / "00000000001073741824").stat().st_size == 1 << 30


def test_worked_example_on_5x_keeps_wait_and_orders_by_capacity_128():
    spec = _worked_spec(BrokerProfile("5"))
    rec = encode_record(spec, StoreConfig())
    assert len(rec) == 214
    c = check_message(bytes(rec), 0, len(rec), 0)
    assert c.status is Status.VALID
    assert list(c.message.properties) == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]


def test_offset_msg_id_ipv4_and_ipv6():
    assert offset_msg_id(bytes([10, 0, 0, 5]), 10911, 1073745920) == "0A00000500002A9F0000000040001000"
    v6 = host_bytes("[2001:db8::5]:10911")
    mid = offset_msg_id(v6[0], v6[1], 1073745920)
    assert mid == "20010DB800000000000000000000000500002A9F0000000040001000"
    d = decode_offset_msg_id(mid.lower())
    assert (d.store_host, d.physical_offset) == ("[2001:db8::5]:10911", 1073745920)


def test_uniq_key_encode_decode_worked_example():
    key = encode_uniq_key(bytes([192, 168, 1, 10]), 12345, 0x1B6D3586, 0x47B76000, 1)
    assert key == "C0A8010A30391B6D358647B760000001"
    u = decode_uniq_key(key)
    assert (u.ip_str, u.pid, u.class_loader_hash, u.counter) == ("192.168.1.10", 12345, 0x1B6D3586, 1)
    # getNearlyTimeFromID evaluated on 2026-11-21 UTC gives 2026-11-14T22:13:20Z (docs/format/message-ids.md#uniq_key)
    now = int(dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc).timestamp() * 1000)
    nearly = u.nearly_time(now, dt.timezone.utc)
    assert dt.datetime.fromtimestamp(nearly / 1000, dt.timezone.utc) == dt.datetime(
        2026, 11, 14, 22, 13, 20, tzinfo=dt.timezone.utc
    )


def test_uniq_key_ipv6_example():
    u = decode_uniq_key("20010DB8000000000000000000000010FFFF1B6D358647B76000FFFF")
    assert u.ip_str == "2001:0db8:0000:0000:0000:0000:0000:0010"
    assert u.pid == 65535 and u.counter == 0xFFFF


def test_ipv4_mapped_host_is_stored_as_ipv4():
    assert host_bytes("[::ffff:172.16.5.6]:4242") == (bytes([172, 16, 5, 6]), 4242)


def test_engine_crc32_is_zlibs_on_every_length_and_view():
    """store/crc.crc32 (zlib-ng when installed) gives zlib's CRC-32 for any length (the
    folding paths start at 16, 64 and 256 bytes), offset and buffer kind."""
    import os
    import zlib

    from rmqstore_cli.store.files.crc import crc32 as engine_crc32

    data = os.urandom(70000)
    view = memoryview(data)
    for n in list(range(0, 300)) + [511, 512, 513, 4095, 4096, 16384, 65537]:
        for start in (0, 1, 7):
            assert engine_crc32(view[start : start + n]) == zlib.crc32(view[start : start + n]), (n, start)
    assert engine_crc32(bytearray(data[:1000])) == zlib.crc32(data[:1000])
