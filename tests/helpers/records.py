"""Hand-built commit-log records that trip every shortcut of the columnar reading path
(tests/equivalence/test_jsonblock.py, test_arrow_block.py; tests/commands/test_table.py):
property strings and topics a renderer gets wrong, and a store made of them."""

from __future__ import annotations

from pathlib import Path

from rmqstore_cli.formats.commitlog import BORNHOST_V6_FLAG, MAGIC_V2, STOREHOSTADDRESS_V6_FLAG

from rmqstore_cli.store.commitlog import AppendSpec, CommitLog
from rmqstore_cli.store.layout.config import StoreConfig

PLAIN = b"KEYS\x01k1 k2\x02TAGS\x01T\x02UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D0000\x02"
TRICKY = [
    b"A\x01x\x01y\x02junk",  # a value holding \x01, then a pair without one
    b"KEYS\x01a  b\x02UNIQ_KEY\x01X",  # an empty KEYS word
    b"KEYS\x01 a\x02",
    b"KEYS\x01a \x02",
    b"TAGS\x01x\x02TAGS\x01y",  # a name twice: the last value wins, the first place stays
    b"A\x01x\x02A\x01y\x02",
    b"AB\x01x\x02AB\x01yy",  # short names twice
    b"ABCDE\x01x\x02ABCDF\x01y\x02",  # names alike in length and first bytes, not the same
    b"TAGS\x01\x02KEYS\x01k",  # an empty value is dropped
    b"\x01v\x02K\x01v",  # an empty name
    b'Q\x01say "hi" \\ back\x02',
    b"N\x01tab\there\x02",
    b"K\x01nul\x00x\x02",
    b"K\x01del\x7f\x02",
    "K\x01café 中文 ключ\x02".encode(),  # valid non-ASCII passes through raw
    b"K\x01bad\xff\x02",  # invalid UTF-8
    "K\x01line\u2028sep\x02".encode(),
    "K\x01c1\u0085\x02".encode(),
    "K\x01bidi\u202e\x02".encode(),
    b"",
    b"K\x01v\x02\x02",
    b"\x02",
    b"\x01",
    b"KEYS\x01k1 k2\x02TAGS\x01T",  # 4.9.x: no separator after the last pair
    b"TAGS\x01\xe4\xb8\xad\x02KEYS\x01\xe4\xb8\xad\xe6\x96\x87 x\x02",
]
TOPICS = ["OrderTopic", 'Quote"Topic', "Back\\slash", "Esc\x1b[31mTopic", "Ünïcode", "T" * 200, "bad\udcffutf8"]


def spec(topic: str, i: int, props: bytes, v6: bool = False) -> AppendSpec:
    """Record ``i`` of ``topic`` with raw property bytes ``props`` (V2 when the topic needs it)."""
    sys_flag = (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) if v6 else 0
    born = (bytes(range(16)), 40000 + i) if v6 else (bytes([172, 16, i % 3, 9]), 50000 + i % 5)
    store = (bytes([0x20, 1, 0xD, 0xB8] + [0] * 11 + [1]), 10911) if v6 else (b"\x0a\x00\x00\x05", 10911)
    return AppendSpec(
        topic,
        i % 3,
        b"body-%d" % i * (i % 4),
        props,
        1_767_225_600_000 + i * 7,
        1_767_225_600_000 + i,
        born,
        store,
        flag=i % 2,
        sys_flag=sys_flag,
        reconsume_times=i % 3,
        prepared_transaction_offset=i * 11 % 5,
        raw_properties=True,
        magic=MAGIC_V2 if len(topic.encode("utf-8", "surrogatepass")) > 127 else None,
    )


def write_tricky_store(root: Path) -> Path:
    """Every tricky record between plain ones, so a shifted column would show on its neighbours."""
    cl = CommitLog(StoreConfig.load(root, None, mapped_file_size_commit_log=1 << 20), writable=True)
    cl.open_for_append()
    i = 0
    for props in TRICKY:
        for s in (spec("OrderTopic", i, PLAIN), spec("OrderTopic", i + 1, props), spec("OrderTopic", i + 2, PLAIN)):
            cl.append(s)
        i += 3
    for j, topic in enumerate(TOPICS):
        cl.append(spec(topic, i + j, PLAIN))
        cl.append(spec("OrderTopic", i + j, PLAIN, v6=j % 2 == 0))
    for v in (-(2**63), 2**63 - 1, -1):  # extreme numbers in every field that holds them
        small = -(2**31) if v < 0 else 2**31 - 1
        cl.append(
            AppendSpec(
                "OrderTopic",
                small,
                b"x",
                PLAIN,
                v,
                v,
                (b"\x7f\x00\x00\x01", small),
                (b"\x0a\x00\x00\x05", small),
                flag=small,
                reconsume_times=small,
                prepared_transaction_offset=v,
                queue_offset=v,
                raw_properties=True,
            )
        )
    for j in range(300):  # enough plain records for distinct-value tables
        cl.append(spec(("OrderTopic", "T" * 200)[j % 2], j, PLAIN, v6=j % 17 == 0))
    cl.close()
    return root
