"""The columnar reading path: CommitLog.scan_blocks / MessageBlock (store/columns.py) and the
block JSON renderer (jsonblock.py) against the per-record reference (check_message,
message_dict + to_json_bytes), record for record, on real-broker stores, generated ones
and records built to trip every shortcut the columnar path takes."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rmqstore_cli.formats.commitlog import BORNHOST_V6_FLAG, MAGIC_V2, STOREHOSTADDRESS_V6_FLAG
from rmqstore_cli.jsonblock import block_lines
from rmqstore_cli.render import message_dict, to_json_bytes
from rmqstore_cli.store.columns import MessageBlock
from rmqstore_cli.store.commitlog import AppendSpec, CommitLog
from rmqstore_cli.store.config import StoreConfig

from conftest import cli, fixture_dir

PLAIN = b"KEYS\x01k1 k2\x02TAGS\x01T\x02UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D0000\x02"
TRICKY = [
    b"A\x01x\x01y\x02junk",  # a value holding \x01, then a pair without one
    b"KEYS\x01a  b\x02UNIQ_KEY\x01X",  # an empty KEYS word
    b"KEYS\x01 a\x02", b"KEYS\x01a \x02",
    b"TAGS\x01x\x02TAGS\x01y",  # a name twice: the last value wins, the first place stays
    b"A\x01x\x02A\x01y\x02", b"AB\x01x\x02AB\x01yy",  # short names twice
    b"ABCDE\x01x\x02ABCDF\x01y\x02",  # names alike in length and first bytes, not the same
    b"TAGS\x01\x02KEYS\x01k",  # an empty value is dropped
    b"\x01v\x02K\x01v",  # an empty name
    b'Q\x01say "hi" \\ back\x02',
    b"N\x01tab\there\x02", b"K\x01nul\x00x\x02", b"K\x01del\x7f\x02",
    "K\x01café 中文 ключ\x02".encode(),  # valid non-ASCII passes through raw
    b"K\x01bad\xff\x02",  # invalid UTF-8
    "K\x01line\u2028sep\x02".encode(), "K\x01c1\u0085\x02".encode(), "K\x01bidi\u202e\x02".encode(),
    b"", b"K\x01v\x02\x02", b"\x02", b"\x01",
    b"KEYS\x01k1 k2\x02TAGS\x01T",  # 4.9.x: no separator after the last pair
    b"TAGS\x01\xe4\xb8\xad\x02KEYS\x01\xe4\xb8\xad\xe6\x96\x87 x\x02",
]
TOPICS = ["OrderTopic", 'Quote"Topic', "Back\\slash", "Esc\x1b[31mTopic", "Ünïcode", "T" * 200, "bad\udcffutf8"]


def _spec(topic: str, i: int, props: bytes, v6: bool = False) -> AppendSpec:
    sys_flag = (BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG) if v6 else 0
    born = (bytes(range(16)), 40000 + i) if v6 else (bytes([172, 16, i % 3, 9]), 50000 + i % 5)
    store = (bytes([0x20, 1, 0xD, 0xB8] + [0] * 11 + [1]), 10911) if v6 else (b"\x0a\x00\x00\x05", 10911)
    return AppendSpec(topic, i % 3, b"body-%d" % i * (i % 4), props, 1_767_225_600_000 + i * 7,
                      1_767_225_600_000 + i, born, store, flag=i % 2, sys_flag=sys_flag, reconsume_times=i % 3,
                      prepared_transaction_offset=i * 11 % 5, raw_properties=True,
                      magic=MAGIC_V2 if len(topic.encode("utf-8", "surrogatepass")) > 127 else None)


@pytest.fixture(scope="module")
def tricky_store(tmp_path_factory):
    """Every tricky record between plain ones, so a shifted column would show on its neighbours."""
    root = tmp_path_factory.mktemp("tricky") / "store"
    cl = CommitLog(StoreConfig.load(root, None, mapped_file_size_commit_log=1 << 20), writable=True)
    cl.open_for_append()
    i = 0
    for props in TRICKY:
        for spec in (_spec("OrderTopic", i, PLAIN), _spec("OrderTopic", i + 1, props), _spec("OrderTopic", i + 2, PLAIN)):
            cl.append(spec)
        i += 3
    for j, topic in enumerate(TOPICS):
        cl.append(_spec(topic, i + j, PLAIN))
        cl.append(_spec("OrderTopic", i + j, PLAIN, v6=j % 2 == 0))
    for j, v in enumerate((-2**63, 2**63 - 1, -1)):  # extreme numbers in every field that holds them
        small = -2**31 if v < 0 else 2**31 - 1
        cl.append(AppendSpec("OrderTopic", small, b"x", PLAIN, v, v, (b"\x7f\x00\x00\x01", small),
                             (b"\x0a\x00\x00\x05", small), flag=small, reconsume_times=small,
                             prepared_transaction_offset=v, queue_offset=v, raw_properties=True))
    for j in range(300):  # enough plain records for distinct-value tables
        cl.append(_spec(("OrderTopic", "T" * 200)[j % 2], j, PLAIN, v6=j % 17 == 0))
    cl.close()
    return root


@pytest.fixture(autouse=True)
def _kernel_for_every_block(monkeypatch):
    """The compiled renderer for blocks of any size (the suite's stores are small)."""
    from rmqstore_cli.store.fastpaths import FAST_PATHS

    monkeypatch.setattr(FAST_PATHS, "json_min", 0)


def _blocks(root, **kw):
    cl = CommitLog(StoreConfig.load(root, None))
    return cl, [x for x in cl.scan_blocks(every_file=True, **kw)]


def _reference(blk: MessageBlock, take, body: str, properties: bool) -> bytes:
    return b"".join(to_json_bytes(message_dict(m, body, properties, blk.file_name)) + b"\n"
                    for m in blk.messages(np.asarray(take)))


def _stores(tricky_store, small_store):
    return [fixture_dir("4.9.7") / "store", fixture_dir("5.3.3") / "store", tricky_store, small_store]


def test_blocks_give_the_per_record_scan(tricky_store, small_store):
    """scan_blocks: the same records, stops and end as the per-record scan."""
    for root in _stores(tricky_store, small_store):
        cl = CommitLog(StoreConfig.load(root, None))
        ref = list(cl.scan(include_blank=True, every_file=True))
        ref_end, ref_stops = cl.end, cl.stops
        got = []
        n_blocks = 0
        for x in cl.scan_blocks(include_blank=True, every_file=True):
            if isinstance(x, MessageBlock):
                n_blocks += 1
                got.extend(x.messages())
            else:
                got.append(x)
        assert got == ref and cl.end == ref_end and cl.stops == ref_stops, root
        assert n_blocks > 0


@pytest.mark.parametrize("body", ["none", "base64", "hex"])
@pytest.mark.parametrize("properties", [True, False])
def test_block_json_equals_message_dict(tricky_store, small_store, body, properties):
    for root in _stores(tricky_store, small_store):
        _, items = _blocks(root)
        for blk in (x for x in items if isinstance(x, MessageBlock)):
            every = np.arange(blk.n)
            assert block_lines(blk, every, body, properties) == \
                _reference(blk, every, body, properties), root
            some = every[::3]  # a selection (filters, --limit)
            assert block_lines(blk, some, body, properties) == \
                _reference(blk, some, body, properties)


def test_tricky_records_all_decode_and_are_escaped(tricky_store):
    """The renderer's output is JSON, one object per record, with nothing raw a terminal acts on."""
    _, items = _blocks(tricky_store)
    raw = b"".join(block_lines(b, np.arange(b.n)) for b in items if isinstance(b, MessageBlock))
    assert b"\x1b" not in raw and b"\x00" not in raw and b"\x7f" not in raw
    assert "\u2028".encode() not in raw and "\u202e".encode() not in raw
    records = [json.loads(x) for x in raw.decode("utf-8").splitlines()]
    dup = next(r for r in records if r["properties_string"] == "TAGS\u0001x\u0002TAGS\u0001y")
    assert dup["properties"] == {"TAGS": "y"} and dup["tags"] == "y"
    assert next(r for r in records if r["properties_string"].startswith("KEYS\u0001a  b"))["keys"] == ["a", "b"]


@pytest.mark.parametrize("args", [(), ("--body", "base64"), ("--topic", "OrderTopic", "--limit", "50"),
                                  ("--queue-id", "1", "--no-properties"), ("--from-offset", "0", "--limit", "7")])
def test_dump_commitlog_jsonl_is_the_reference(tricky_store, args):
    """The command's columnar output equals one message_dict per record of the per-record scan."""
    cl = CommitLog(StoreConfig.load(tricky_store, None))
    body = args[args.index("--body") + 1] if "--body" in args else "none"
    props = "--no-properties" not in args
    want = []
    for m in cl.scan(every_file=True):
        if "--topic" in args and m.topic != "OrderTopic" or "--queue-id" in args and m.queue_id != 1:
            continue
        want.append(to_json_bytes(message_dict(m, body, props, "00000000000000000000")).decode())
    if "--limit" in args:
        want = want[:int(args[args.index("--limit") + 1])]
    r = cli("dump-commitlog", "--store", tricky_store, "--format", "jsonl", *args)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == want
    j = cli("dump-commitlog", "--store", tricky_store, "--format", "json", *args)
    assert json.loads(j.stdout) == [json.loads(x) for x in want]


def test_only_records_that_need_it_take_the_reference_path(tricky_store, monkeypatch):
    """The shortcuts are used: plain records (IPv4 or IPv6, V1 or V2) reach message_dict
    only for a topic that needs escapes; each tricky one either does or renders identically
    (tested above)."""
    import rmqstore_cli.jsonblock as jb

    calls = []
    real = jb.message_dict
    monkeypatch.setattr(jb, "message_dict", lambda m, *a: calls.append(m.properties_bytes) or real(m, *a))
    _, items = _blocks(tricky_store)
    n = sum(len(block_lines(b, np.arange(b.n))) > 0 and b.n for b in items if isinstance(b, MessageBlock))
    assert n > 3 * len(TRICKY) + 300
    assert calls.count(PLAIN) == 4  # only the topics that need escapes or are not valid UTF-8
    assert 10 <= len(calls) <= len(TRICKY) + len(TOPICS)


def test_decode_gives_every_field(tricky_store, small_store):
    """MessageBlock.decode: every column agrees with the per-record decode (check_message)."""
    from rmqstore_cli.store.message import offset_msg_id

    for root in _stores(tricky_store, small_store):
        _, items = _blocks(root)
        for blk in (x for x in items if isinstance(x, MessageBlock)):
            d = blk.decode()
            names = blk.topics[0]
            cat = blk.properties.cat.tobytes()
            pairs: dict[int, dict[bytes, bytes]] = {}
            for o, (na, nb), (va, vb) in zip(d["property_owner"].tolist(), d["property_name"].tolist(),
                                              d["property_value"].tolist()):
                if nb > na and vb > va:  # the parser drops empty names and values; the last one wins
                    pairs.setdefault(o, {})[cat[na:nb]] = cat[va:vb]
            for i, m in enumerate(blk.messages()):
                for f in ("physical_offset", "total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset",
                          "sys_flag", "born_timestamp", "store_timestamp", "reconsume_times",
                          "prepared_transaction_offset"):
                    assert int(d[f][i]) == getattr(m, f), (root, f)
                a, b = d["body"][i]
                assert bytes(blk.buf[a:b]) == m.body and names[d["topic"][i]] == m.topic_bytes
                for w in ("born", "store"):
                    a, b = d[f"{w}_address"][i]
                    assert bytes(blk.buf[a:b]) == getattr(m, f"{w}_address") and d[f"{w}_port"][i] == getattr(m, f"{w}_port")
                if len(m.store_address) == 4:
                    assert d["msg_id"][i].tobytes().hex().upper() == offset_msg_id(m.store_address, m.store_port,
                                                                                  m.physical_offset)
                if m.properties_bytes.isascii():
                    want = {k.encode(): v.encode() for k, v in m.properties.items()}
                    assert pairs.get(i, {}) == want, (root, m.properties_bytes)


def test_blocks_are_bounded_in_bytes(tricky_store, monkeypatch):
    """A block spans at most MAX_BLOCK_BYTES of the log (at least one record), so big records
    come a few at a time; the records are still all there, in order."""
    import rmqstore_cli.store.columns as columns

    monkeypatch.setattr(columns, "MAX_BLOCK_BYTES", 2000)
    cl = CommitLog(StoreConfig.load(tricky_store, None))
    ref = list(cl.scan(every_file=True))
    got, spans = [], []
    for x in cl.scan_blocks(every_file=True):
        if isinstance(x, MessageBlock):
            got.extend(x.messages())
            spans.append((x.n, x.next_pos - int(x.pos[0])))
        else:
            got.append(x)
    assert got == ref
    assert all(n == 1 or span <= 2000 + 1000 for n, span in spans) and max(n for n, _ in spans) > 1


# ---------------------------------------------------------------- the compiled kernel

def test_kernel_numbers_are_java_long_to_string():
    from numba import njit

    from rmqstore_cli.jsonkernel import _int

    @njit
    def text(v, out):
        return _int(out, 0, v)

    edges = [0, 1, 9, 10, 99, 100, 101, -1, -9, -10, -100, 2**31 - 1, -2**31, 2**63 - 1, -2**63, -2**63 + 1]
    edges += [s * 10 ** k + d for k in range(19) for d in (-1, 0, 1) for s in (1, -1) if -2**63 <= s * 10 ** k + d < 2**63]
    out = np.zeros(32, np.uint8)
    for v in edges:
        n = text(np.int64(v), out)
        assert out[:n].tobytes() == str(v).encode(), v


_INTERESTING = [0x00, 0x01, 0x02, 0x1F, 0x20, 0x22, 0x41, 0x5C, 0x7E, 0x7F, 0x80, 0x85, 0x8E, 0x9F, 0xA0, 0xA6, 0xA8,
                0xAE, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x81, 0x90]


@pytest.mark.parametrize("seed", range(4))
def test_kernel_plain_text_is_what_the_reference_leaves_alone(seed):
    """_text_end accepts a name/value exactly when it is valid UTF-8 (Python's strict
    decoder), holds nothing JSON escapes and nothing _UNSAFE_UTF8 escapes."""
    from rmqstore_cli.jsonkernel import _text_end
    from rmqstore_cli.render import _UNSAFE_UTF8

    rng = np.random.default_rng(seed)
    pool = np.array(_INTERESTING + list(range(0x20, 0x7F, 7)), np.uint8)
    cases = [bytes(rng.choice(pool, rng.integers(1, 6))) for _ in range(20000)]
    cases += ["é中🙂\u0085\u2028\u202e\u2066\u200e".encode(), "ok é 中 🙂".encode()]
    for raw in cases:
        try:
            text = raw.decode("utf-8")
            want = not _UNSAFE_UTF8.search(raw) and all(0x20 <= ord(c) != 0x7F for c in text) \
                and '"' not in text and "\\" not in text
        except UnicodeDecodeError:
            want = False
        a = np.frombuffer(raw, np.uint8)
        assert (_text_end(a, 0, a.size, 2) == a.size) == want, raw


def test_without_numba_every_record_takes_the_reference(tricky_store, monkeypatch):
    from rmqstore_cli.store.fastpaths import FAST_PATHS

    monkeypatch.setattr(FAST_PATHS, "json_kernel", lambda n: None)
    _, items = _blocks(tricky_store)
    for blk in (x for x in items if isinstance(x, MessageBlock)):
        every = np.arange(blk.n)
        assert block_lines(blk, every) == _reference(blk, every, "none", True)


def test_big_generated_store_dumps_as_the_reference(tmp_path, monkeypatch):
    """A store large enough for blocks above the default json_min, through the CLI."""
    from conftest import generate
    from rmqstore_cli.store.fastpaths import FAST_PATHS

    monkeypatch.setattr(FAST_PATHS, "json_min", 1000)
    root = tmp_path / "store"
    generate(root, "--body-size", "0-300", "--ipv6-ratio", "0.1", messages=6000, seed=7, small=False)
    cl = CommitLog(StoreConfig.load(root, None))
    assert len(cl.files) == 1
    want = [to_json_bytes(message_dict(m, "hex", True, cl.files[0].name)).decode() for m in cl.scan(every_file=True)]
    r = cli("dump-commitlog", "--store", root, "--format", "jsonl", "--body", "hex")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == want


def test_distinct_rows_even_when_the_mix_collides():
    from rmqstore_cli.store.arrays import distinct_rows

    rng = np.random.default_rng(3)
    raw = rng.integers(0, 4, (500, 16)).astype(np.uint8)
    raw[:, :14] = 0  # few distinct rows
    first, inv = distinct_rows(raw)
    assert (raw[first[inv]] == raw).all() and len({r.tobytes() for r in raw}) == first.size
    mix = 0x9E3779B97F4A7C15  # rows (0, 5) and (1, 5 ^ mix) mix to the same number
    collide = np.array([[0, 5], [1, 5 ^ mix], [0, 5]], "<u8").view(np.uint8)
    first, inv = distinct_rows(collide)
    assert first.size == 2 and inv.tolist() == [0, 1, 0]
    v4 = rng.integers(0, 3, (300, 4)).astype(np.uint8)  # IPv4 addresses: 4-byte rows
    first, inv = distinct_rows(v4)
    assert (v4[first[inv]] == v4).all() and len({r.tobytes() for r in v4}) == first.size
