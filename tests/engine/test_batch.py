"""The bulk readers (commitlog.bulk, arrays, javahash, properties) against the per-record engine functions.

``java_hash``/``index_key_hash`` (store/records/message.py), ``parse_properties``
(MessageDecoder#string2messageProperties) and ``check_message``
(CommitLog#checkMessageAndReturnSize) are the references; the vectorised code used by
rebuild-index and verify must agree with them on every input.
"""

from __future__ import annotations

import base64
import json
import mmap
import random
import struct

import numpy as np
from rmqstore_cli.formats.properties import parse_properties

from rmqstore_cli.store.commitlog import CommitLog, Status, bulk, check_message
from rmqstore_cli.store.files import arrays, crc, mapped_files
from rmqstore_cli.store.javahash import bulk as javahash, index_key_hash, java_hash
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.records import properties
from rmqstore_cli.store.records.message import body_crc
from tests.helpers import cli, generate

# "AuditTopic#minhash-280000磁龟".hashCode() == Integer.MIN_VALUE (IndexFile#indexKeyHashMethod -> 0)
MIN_VALUE_KEY = "AuditTopic#minhash-280000磁龟"

TEXTS = [
    "",
    "a",
    "AaAa",
    "BBBB",
    "PaymentTopic#order-1",
    "x" * 300,
    "支付标签",
    "T#emoji-🎉",
    "\U0001f600" * 3,
    "mixed ascii 和 中文 and 🎉 again",
    MIN_VALUE_KEY,
    "Topic#" + "k" * 1000,
    "é",
    "\x7f\x01\x02",
]
BAD_UTF8 = [b"\xff", b"ab\xc3", b"\xed\xa0\x80x", b"key-\xe4\xb8", b"\xf0\x9f\x8e", b"ok\x80\x80ok"]


def _random_texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    alphabet = "abcXYZ09 #-_" + "磁龟支付é" + "🎉😀"
    return ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 40))) for _ in range(n)]


# ---------------------------------------------------------------- hashes


def test_java_hashes_match_java_hash_and_utf16_length():
    texts = TEXTS + _random_texts(500, 1)
    h, lens = javahash.java_hashes([t.encode() for t in texts])
    assert javahash.java_int(h).tolist() == [java_hash(t) for t in texts]
    assert lens.tolist() == [len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts]


def test_java_hashes_decode_bad_utf8_like_the_broker():
    """Bad bytes become U+FFFD, as ``new String(bytes, UTF_8)`` makes them."""
    h, lens = javahash.java_hashes(BAD_UTF8 + [b"fine"])
    want = [b.decode("utf-8", "replace") for b in BAD_UTF8] + ["fine"]
    assert javahash.java_int(h).tolist() == [java_hash(t) for t in want]
    assert lens.tolist() == [len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in want]


def test_java_hashes_empty_inputs():
    h, lens = javahash.java_hashes([])
    assert h.size == 0 and lens.size == 0
    h, lens = javahash.java_hashes([b"", b""])
    assert h.tolist() == [0, 0] and lens.tolist() == [0, 0]


def test_index_hashes_match_index_key_hash_including_min_value():
    assert java_hash(MIN_VALUE_KEY) == -(1 << 31)
    keys = TEXTS + _random_texts(300, 2) + [f"Topic#k-{i}" for i in range(200)]
    got = javahash.index_hashes([k.encode() for k in keys]).tolist()
    assert got == [index_key_hash(k) for k in keys]
    assert got[TEXTS.index(MIN_VALUE_KEY)] == 0
    assert all(x >= 0 for x in got)


def test_concat_hashes_is_hash_of_the_concatenation():
    texts = _random_texts(200, 3)
    prefixes = [t[: len(t) // 2] + "#" for t in texts]
    rests = [t[len(t) // 2 :] for t in texts]
    hp, _ = javahash.java_hashes([p.encode() for p in prefixes])
    hr, lr = javahash.java_hashes([r.encode() for r in rests])
    got = javahash.java_int(javahash.concat_hashes(hp, lr, hr)).tolist()
    assert got == [java_hash(p + r) for p, r in zip(prefixes, rests, strict=True)]


def test_range_hashes_of_arbitrary_ranges():
    rnd = random.Random(4)
    data = bytes(rnd.randrange(32, 127) for _ in range(5000))
    a = np.array([rnd.randrange(0, 5000) for _ in range(400)], np.int64)
    b = np.minimum(a + np.array([rnd.randrange(0, 300) for _ in range(400)], np.int64), 5000)
    got = javahash.java_int(javahash.RangeHashes(np.frombuffer(data, np.uint8))(a, b)).tolist()
    assert got == [java_hash(data[x:y].decode()) for x, y in zip(a.tolist(), b.tolist(), strict=True)]


def test_pow31_tables_are_inverse_powers():
    fw, bw = javahash.pow31_tables(3000)
    assert fw.size >= 3000 and bw.size >= 3000
    assert [int(x) for x in fw[:5]] == [1, 31, 961, 29791, 923521]
    assert int(fw[2999]) == pow(31, 2999, 1 << 32)
    assert np.all(fw[:3000] * bw[:3000] == 1)


# ---------------------------------------------------------------- gather, release


def test_gather_reads_big_endian_and_clips():
    raw = bytes(range(256)) * 4
    a = np.frombuffer(raw, np.uint8)
    pos = np.array([0, 5, 100, 1016], np.int64)
    for width, dt, fmt in ((1, "i1", "b"), (2, ">i2", ">h"), (4, ">i4", ">i"), (4, ">u4", ">I"), (8, ">i8", ">q")):
        got = arrays.gather(a, pos, width, dt)
        assert got.dtype.isnative
        assert got.tolist() == [struct.unpack_from(fmt, raw, p)[0] for p in pos.tolist()]
    assert arrays.gather(a, np.array([len(raw) + 10], np.int64), 4, ">i4").size == 1  # clipped, no IndexError
    assert arrays.gather(a, np.zeros(0, np.int64), 8, ">i8").size == 0


def test_release_pages_keeps_the_data_and_returns_the_mark(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(256)) * (4 * mmap.PAGESIZE // 256))
    with open(p, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        before = mm[:]
        assert mapped_files.release_pages(mm, 0, 2 * mmap.PAGESIZE + 17) == 2 * mmap.PAGESIZE
        assert mapped_files.release_pages(mm, 2 * mmap.PAGESIZE, 100) == 2 * mmap.PAGESIZE  # nothing to do
        assert mm[:] == before
        mm.close()
    assert mapped_files.release_pages(b"not a mapping", 0, 1 << 20) == 1 << 20


# ---------------------------------------------------------------- stores: vectorised vs per record


def _messages(store, conf=None):
    cfg = StoreConfig.load(store, conf)
    cfg.infer_sizes()
    cl = CommitLog(cfg)
    try:
        return list(cl.scan(skip_mismatch=True, every_file=True))
    finally:
        cl.close()


def _check_store_hashes(store, conf=None) -> int:
    msgs = _messages(store, conf)
    assert msgs
    tags = [m.properties.get("TAGS", "") for m in msgs]
    h, _ = javahash.java_hashes([t.encode("utf-8", "surrogatepass") for t in tags])
    assert javahash.java_int(h).tolist() == [java_hash(t) if t else 0 for t in tags]
    keys = [f"{m.topic}#{k}" for m in msgs for k in ([m.uniq_key] if m.uniq_key else []) + list(m.keys)]
    if keys:
        assert javahash.index_hashes([k.encode("utf-8", "surrogatepass") for k in keys]).tolist() == [
            index_key_hash(k) for k in keys
        ]
    return len(msgs)


def test_hashes_on_real_broker_fixtures(fixture):
    store, conf, _ = fixture
    assert _check_store_hashes(store, conf) > 0


def test_hashes_on_a_generated_store(small_store):
    assert _check_store_hashes(small_store) > 100


# ---------------------------------------------------------------- PROPERTIES: picking and batch parse

_NAMES = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "INNER_NUM", "CLUSTER", "TAG", "KEYSX", "XTAGS", "", "__CRC32#"]
_VALUES = [
    "",
    "a",
    "Tag With Blank",
    "支付标签",
    " pad-11 tail-11 ",
    "x\x01y",
    "AaAa BBBB",
    "k1  k2",
    "3",
    "TAGS\x01inner",
    "🎉 emoji",
    "minhash-280000磁龟",
]


def _damage(pairs: list[bytes], rnd: random.Random) -> list[bytes]:
    """Sometimes a pair without \\x01, a KEYS value of invalid UTF-8, a pair named \\xff."""
    if rnd.random() < 0.1:
        pairs.insert(rnd.randint(0, len(pairs)), b"junk")
    if rnd.random() < 0.1:
        pairs.append(b"KEYS\x01bad-\xff\xfe utf8-\xe4\xb8")
    if rnd.random() < 0.05:
        pairs.append(b"\xff\x01x")
    return pairs


def _random_props(n: int, seed: int) -> list[bytes]:
    """PROPERTIES as a broker or a buggy client might write them: repeated names, empty
    names and values, pairs without \\x01, values holding \\x01 or a name, invalid UTF-8."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        pairs = _damage(
            [f"{rnd.choice(_NAMES)}\x01{rnd.choice(_VALUES)}".encode() for _ in range(rnd.randint(0, 6))], rnd
        )
        s = b"\x02".join(pairs) + (b"\x02" if pairs and rnd.random() < 0.5 else b"")
        out.append(s)
    return out


def _parsed(p: bytes) -> dict[str, str]:
    return parse_properties(p.decode("utf-8", "replace"))


def test_pick_property_is_what_the_parser_keeps():
    for p in _random_props(3000, 11) + [
        b"TAGS\x01a",
        b"TAGS\x01a\x02TAGS\x01",
        b"TAGS\x01",
        b"\x02TAGS\x01b\x02",
        b"X\x01TAGS\x01v",
        b"KEYS\x01a\x02X\x01y TAGS\x01z",
    ]:
        d = _parsed(p)
        for name in ("TAGS", "KEYS", "UNIQ_KEY", "DELAY", "INNER_NUM"):
            got = properties.pick_property(p, name.encode() + b"\x01")
            want = d.get(name)
            assert (got.decode("utf-8", "replace") if got is not None else None) == want, (p, name)


def test_props_well_formed_means_no_pair_is_dropped():
    for p in _random_props(3000, 12) + [b"A\x01x\x01y\x02junk", b"junk\x02A\x01x\x01y", b"A\x01\x01\x02B"]:
        text = p.decode("utf-8", "replace")
        parts = text.split("\x02")
        if parts and parts[-1] == "":
            parts.pop()
        dropped = [x for x in parts if not (0 < x.find("\x01") < len(x) - 1)]
        assert not (properties.props_well_formed(p) and dropped), p  # a cheap test: it may only doubt


def test_props_well_formed_is_exactly_one_separator_per_nonempty_pair():
    """A value's extra \\x01 must not hide a pair without one (``A\\x01x\\x01y\\x02junk``,
    whose 'junk' the broker's parser drops); every well-formed shape passes the fast test."""
    import random

    rnd = random.Random(5)
    alphabet = [b"A", b"b", b"\x01", b"\x02", "é".encode()]
    for _ in range(20000):
        p = b"".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
        parts = p.split(b"\x02")
        if parts and parts[-1] == b"":
            parts.pop()
        want = bool(parts) and all(x.count(b"\x01") == 1 and 0 < x.find(b"\x01") < len(x) - 1 for x in parts)
        assert properties.props_well_formed(p) == want, p
    assert not properties.props_well_formed(b"A\x01x\x01y\x02junk")
    assert properties.props_well_formed(b"KEYS\x01a b\x02TAGS\x01t\x02") and properties.props_well_formed(b"TAGS\x01t")


def test_batch_properties_match_the_parser_and_java_hash():
    props = _random_props(2000, 13)
    blob = b"".join(b"HEAD" + p for p in props)
    starts, pos = [], 0
    for p in props:
        starts.append(pos + 4)
        pos += 4 + len(p)
    arr = np.frombuffer(blob, np.uint8)
    pr = properties.Properties(arr, np.array(starts, np.int64), np.array([len(p) for p in props], np.int64), blob)
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "DELAY"):
        m, a, b = pr.value(name.encode() + b"\x01")
        got = {int(i): bytes(pr.cat[x:y]).decode("utf-8", "replace") for i, x, y in zip(m, a, b, strict=True)}
        want = {i: d[name] for i, p in enumerate(props) if name in (d := _parsed(p))}
        assert got == want, name
    for i, p in enumerate(props):
        tags = _parsed(p).get("TAGS")
        assert pr.tags_code[i] == (java_hash(tags) if tags else 0)
    # index keys: topic#UNIQ_KEY and topic#word for each KEYS word, rollback records excluded
    topics = [b"PaymentTopic", "支付Topic".encode(), b"AuditTopic"]
    tid = np.array([i % 3 for i in range(len(props))], np.int64)
    indexable = np.array([i % 7 != 0 for i in range(len(props))], bool)
    pfx = javahash.java_hashes([t + b"#" for t in topics])[0].astype(np.uint64)
    keys = pr.index_keys(tid, pfx, indexable, topics)
    got = sorted(zip(keys.owner.tolist(), keys.hash.tolist(), strict=True))
    want = []
    for i, p in enumerate(props):
        d = _parsed(p)
        if not indexable[i]:
            continue
        topic = topics[i % 3].decode()
        words = ([d["UNIQ_KEY"]] if "UNIQ_KEY" in d else []) + [w for w in d.get("KEYS", "").split(" ") if w]
        want += [(i, index_key_hash(f"{topic}#{w}")) for w in words]
    assert got == sorted(want)
    suspects = set(pr.suspects().tolist())
    for i, p in enumerate(props):  # every record with a pair the parser drops, or bad UTF-8, is a suspect
        parts = [x for x in p.split(b"\x02")]
        if parts and parts[-1] == b"":
            parts.pop()
        bad_utf8 = p != p.decode("utf-8", "replace").encode()
        if bad_utf8 or any(not (0 < x.find(b"\x01") < len(x) - 1) for x in parts):
            assert i in suspects, p


# ---------------------------------------------------------------- RecordBatch vs check_message


def _walk_file(buf) -> list[int]:
    """Record starts of one commit-log file (TOTALSIZE + MAGICCODE walk,
    docs/format/commitlog.md#reading-a-commit-log-file)."""
    out, pos = [], 0
    while pos + 8 <= len(buf):
        total, magic = struct.unpack_from(">iI", buf, pos)
        if magic not in (0xDAA320A7, 0xDAA320AB) or total < 8 or total > len(buf) - pos:
            break
        out.append(pos)
        pos += total
    return out


def _check_record_batches(store, conf=None) -> dict[str, int]:
    cfg = StoreConfig.load(store, conf)
    cfg.infer_sizes()
    cl = CommitLog(cfg)
    seen = {"records": 0, "v2": 0, "ipv6": 0, "mismatch": 0}
    try:
        for f in cl.files:
            buf = f.buffer()
            starts = _walk_file(buf)
            if not starts:
                continue
            a = np.frombuffer(buf, np.uint8)
            r = bulk.RecordBatch(a, np.array(starts, np.int64))
            cols = {
                k: getattr(r, k).tolist()
                for k in (
                    "total",
                    "magic",
                    "sys_flag",
                    "body_len",
                    "body_at",
                    "topic_len",
                    "topic_at",
                    "props_len",
                    "props_at",
                    "expected",
                    "body_crc",
                    "queue_id",
                    "queue_offset",
                    "physical_offset",
                    "store_timestamp",
                    "born_host_len",
                    "store_host_len",
                )
            }
            cols["computed_crc"] = crc.body_crcs(buf, r.body_at, np.maximum(r.body_len, 0)).tolist()
            del r, a
            for i, p in enumerate(starts):
                c = check_message(buf, p, len(buf), f.file_from_offset)
                seen["records"] += 1
                if c.status is Status.SIZE_MISMATCH:
                    seen["mismatch"] += 1
                    assert cols["expected"][i] != cols["total"][i]
                    continue
                assert c.status is Status.VALID, c.reason
                m = c.message
                assert cols["expected"][i] == cols["total"][i] == m.total_size
                assert (cols["magic"][i], cols["sys_flag"][i], cols["body_crc"][i], cols["queue_id"][i]) == (
                    m.magic,
                    m.sys_flag,
                    m.body_crc,
                    m.queue_id,
                )
                assert (cols["queue_offset"][i], cols["physical_offset"][i], cols["store_timestamp"][i]) == (
                    m.queue_offset,
                    m.physical_offset,
                    m.store_timestamp,
                )
                assert (cols["born_host_len"][i] - 4, cols["store_host_len"][i] - 4) == (
                    len(m.born_address),
                    len(m.store_address),
                )
                ba, bl = cols["body_at"][i], cols["body_len"][i]
                ta, tl = cols["topic_at"][i], cols["topic_len"][i]
                pa, pl = cols["props_at"][i], cols["props_len"][i]
                assert buf[ba : ba + bl] == m.body
                assert cols["computed_crc"][i] == body_crc(m.body)  # UtilAll#crc32
                assert buf[ta : ta + tl] == m.topic_bytes
                assert buf[pa : pa + pl] == m.properties_bytes
                seen["v2"] += m.magic == 0xDAA320AB
                seen["ipv6"] += len(m.born_address) == 16 or len(m.store_address) == 16
            f.close()
    finally:
        cl.close()
    return seen


def test_record_batch_matches_check_message_on_fixtures(fixture):
    store, conf, _ = fixture
    seen = _check_record_batches(store, conf)
    assert seen["records"] > 100 and seen["ipv6"] > 0


def test_record_batch_matches_check_message_on_generated_v2_and_ipv6(tmp_path):
    store = generate(
        tmp_path / "s",
        "--broker-version",
        "5",
        "--retry-ratio",
        "0.3",
        "--ipv6-ratio",
        "0.2",
        "--delay-ratio",
        "0.1",
        "--transaction-ratio",
        "0.1",
        messages=1500,
    )
    seen = _check_record_batches(store)
    assert seen["records"] >= 1500 and seen["v2"] > 0 and seen["ipv6"] > 0


def test_record_batch_sees_a_size_mismatch(small_store):
    """A record whose TOTALSIZE disagrees with its fields: check_message says SIZE_MISMATCH,
    RecordBatch's calMsgLength disagrees with its TOTALSIZE (and nothing else is misread)."""
    cfg = StoreConfig.load(small_store)
    cfg.infer_sizes()
    first = sorted((small_store / "commitlog").iterdir())[0]
    data = bytearray(first.read_bytes())
    starts = _walk_file(data)
    p, nxt = starts[3], starts[4]
    # grow the body length by one: the record keeps its TOTALSIZE, the fields now add up to one more
    body_len_at = bulk.RecordBatch(np.frombuffer(bytes(data), np.uint8), np.array([p], np.int64)).body_len_at[0]
    n = struct.unpack_from(">i", data, body_len_at)[0]
    struct.pack_into(">i", data, body_len_at, n + 1)
    first.write_bytes(bytes(data))
    seen = _check_record_batches(small_store)
    assert seen["mismatch"] >= 1
    assert nxt in _walk_file(data)  # the walk goes on past it


# ---------------------------------------------------------------- whole stores: batch path vs per-record dispatch


def _tricky_records(n: int, seed: int) -> list[dict]:
    """Messages whose PROPERTIES exercise every rule of the parser: repeated names, empty
    values, pairs without \\x01, values holding \\x01 or another name, non-ASCII and
    surrogate-pair keys, invalid UTF-8, a key hashing to Integer.MIN_VALUE, rollbacks,
    IPv6 hosts and V2 records."""
    rnd = random.Random(seed)
    keys = ["AaAa", "BBBB", "k1  k2", " pad ", "支付-7", "emoji-🎉", "minhash-280000磁龟", "x\x01y", "", "TAGS\x01z"]
    out = []
    for i in range(n):
        topic = rnd.choice(["PaymentTopic", "AuditTopic", "支付Topic"])
        pairs = [b"UNIQ_KEY\x01" + f"U{i:08X}".encode()]
        for _ in range(rnd.randint(0, 4)):
            pairs.append(f"{rnd.choice(['KEYS', 'TAGS', 'KEYS', 'CLUSTER', 'XTAGS'])}\x01{rnd.choice(keys)}".encode())
        pairs = _damage(pairs, rnd)
        if rnd.random() < 0.1:
            pairs.append(b"TAGS\x01")  # an empty last TAGS: the parser keeps an earlier one
        props = b"\x02".join(pairs) + (b"\x02" if rnd.random() < 0.5 else b"")
        v6 = rnd.random() < 0.2
        sys_flag = (rnd.choice([0, 0, 0, 8, 12, 4]) if topic != "AuditTopic" else 0) | (0x10 | 0x20 if v6 else 0)
        out.append(
            {
                "topic": topic,
                "queue_id": rnd.randrange(3),
                "store_timestamp": 1795317650000 + i * 37,
                "born_timestamp": 1795317640000 + i,
                "born_host": "[2001:db8::1]:10911" if v6 else "10.0.0.1:5000",
                "store_host": "[2001:db8::53]:10911" if v6 else "10.1.2.3:10911",
                "sys_flag": sys_flag,
                "magic": "v2" if rnd.random() < 0.2 else "v1",
                "properties_base64": base64.b64encode(props).decode(),
                "body_base64": base64.b64encode(rnd.randbytes(rnd.randint(0, 300))).decode(),
            }
        )
    return out


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_rebuild_of_tricky_properties_equals_the_per_record_dispatch(tmp_path):
    """generate --from-jsonl writes consume queues and index through the per-record
    Dispatcher; rebuild-index (batch Properties, RecordBatch, vectorised hashes) must
    write the same bytes from the commit log alone."""
    src = tmp_path / "dump.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _tricky_records(1200, 21)), encoding="utf-8")
    store = tmp_path / "store"
    r = cli(
        "generate",
        "--store",
        store,
        "--from-jsonl",
        src,
        "--commitlog-file-size",
        "65536",
        "--cq-file-size",
        "2000",
        "--index-slots",
        "64",
        "--index-max",
        "400",
        "--tz",
        "UTC",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    seen = _check_record_batches(store)
    assert seen["records"] == 1200 and seen["v2"] > 0 and seen["ipv6"] > 0
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--output", out, "--tz", "UTC", "--format", "json")
    assert r.exit_code == 0, r.stderr
    want_cq, got_cq = _tree(store / "consumequeue"), _tree(out / "consumequeue")
    assert got_cq == want_cq and len(want_cq) > 3
    want_ix, got_ix = _tree(store / "index"), _tree(out / "index")
    assert got_ix == want_ix and want_ix


def test_first_crc_failure_is_the_first_record_check_message_rejects(small_store):
    """Recovery's checkCRCOnRecover (rebuild._first_crc_failure, on crc.body_crcs) stops at
    the first record whose body CRC check_message(check_crc=True) finds wrong."""
    from rmqstore_cli.store.write.fastdispatch import FastDispatcher
    from rmqstore_cli.store.write.rebuild import _first_crc_failure

    last = sorted((small_store / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    starts = _walk_file(data)
    a = np.frombuffer(bytes(data), np.uint8)
    P = np.array(starts, np.int64)
    assert _first_crc_failure(bytes(data), P, FastDispatcher.fields(a, P), len(data), 0, False) is None
    fields = FastDispatcher.fields(a, P)
    with_body = [i for i in range(len(starts)) if fields["body_len"][i] > 0]
    k = with_body[len(with_body) // 2]
    data[int(fields["body_at"][k])] ^= 0x01
    buf = bytes(data)
    a = np.frombuffer(buf, np.uint8)
    got = _first_crc_failure(buf, P, FastDispatcher.fields(a, P), len(buf), 0, False)
    want = next(i for i, p in enumerate(starts) if check_message(buf, p, len(buf), 0, True).status is Status.INVALID)
    assert got == want == k
