"""The columnar reading path: CommitLog.scan_blocks / MessageBlock (store/commitlog/columns.py) and the
block JSON renderer (jsonblock.py) against the per-record reference (check_message,
message_dict + to_json_bytes), record for record, on real-broker stores, generated ones
and records built to trip every shortcut the columnar path takes."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import BORNHOST_V6_FLAG, MAGIC_V2, STOREHOSTADDRESS_V6_FLAG

from rmqstore_cli.jsonblock import block_lines
from rmqstore_cli.render import to_json_bytes
from rmqstore_cli.store.commitlog import AppendSpec, CommitLog
from rmqstore_cli.store.commitlog.columns import MessageBlock
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.records.message_view import message_dict
from tests.helpers import cli, fixture_dir
from tests.helpers.records import PLAIN, TOPICS, TRICKY, spec

try:
    _cjson = importlib.import_module("rmqstore_cli._cjson")
except ImportError:  # no compiler at install: the reference renders everything (tested below)
    _cjson = None
needs_c = pytest.mark.skipif(_cjson is None, reason="the C extension rmqstore_cli._cjson did not build (setup.py)")


@pytest.fixture(autouse=True)
def _kernel_for_every_block(monkeypatch):
    """The compiled renderer for blocks of any size (the suite's stores are small), under
    RMQSTORE_PURE=1 too: this file holds the C renderer to the reference."""
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    monkeypatch.setattr(FAST_PATHS, "json_min", 0)
    monkeypatch.setattr(FAST_PATHS, "pure", False)


def _blocks(root, **kw):
    cl = CommitLog(StoreConfig.load(root, None))
    return cl, [x for x in cl.scan_blocks(every_file=True, **kw)]


def _reference(blk: MessageBlock, take, body: str, properties: bool) -> bytes:
    return b"".join(
        to_json_bytes(message_dict(m, body, properties, blk.file_name)) + b"\n" for m in blk.messages(np.asarray(take))
    )


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


@pytest.mark.slow
@pytest.mark.parametrize("body", ["none", "base64", "hex"])
@pytest.mark.parametrize("properties", [True, False])
def test_block_json_equals_message_dict(tricky_store, small_store, body, properties):
    for root in _stores(tricky_store, small_store):
        _, items = _blocks(root)
        for blk in (x for x in items if isinstance(x, MessageBlock)):
            every = np.arange(blk.n)
            assert block_lines(blk, every, body, properties) == _reference(blk, every, body, properties), root
            some = every[::3]  # a selection (filters, --limit)
            assert block_lines(blk, some, body, properties) == _reference(blk, some, body, properties)


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


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--body", "base64"),
        ("--topic", "OrderTopic", "--limit", "50"),
        ("--queue-id", "1", "--no-properties"),
        ("--from-offset", "0", "--limit", "7"),
    ],
)
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
        want = want[: int(args[args.index("--limit") + 1])]
    r = cli("dump-commitlog", "--store", tricky_store, "--format", "jsonl", *args)
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == want
    j = cli("dump-commitlog", "--store", tricky_store, "--format", "json", *args)
    assert json.loads(j.stdout) == [json.loads(x) for x in want]


@needs_c  # the C loop's choices (without it, every record takes the reference)
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
    from rmqstore_cli.store.records.message import offset_msg_id

    for root in _stores(tricky_store, small_store):
        _, items = _blocks(root)
        for blk in (x for x in items if isinstance(x, MessageBlock)):
            d = blk.decode()
            names = blk.topics[0]
            cat = blk.properties.cat.tobytes()
            pairs: dict[int, dict[bytes, bytes]] = {}
            for o, (na, nb), (va, vb) in zip(
                d["property_owner"].tolist(), d["property_name"].tolist(), d["property_value"].tolist(), strict=True
            ):
                if nb > na and vb > va:  # the parser drops empty names and values; the last one wins
                    pairs.setdefault(o, {})[cat[na:nb]] = cat[va:vb]
            for i, m in enumerate(blk.messages()):
                for f in (
                    "physical_offset",
                    "total_size",
                    "magic",
                    "body_crc",
                    "queue_id",
                    "flag",
                    "queue_offset",
                    "sys_flag",
                    "born_timestamp",
                    "store_timestamp",
                    "reconsume_times",
                    "prepared_transaction_offset",
                ):
                    assert int(d[f][i]) == getattr(m, f), (root, f)
                a, b = d["body"][i]
                assert bytes(blk.buf[a:b]) == m.body and names[d["topic"][i]] == m.topic_bytes
                for w in ("born", "store"):
                    a, b = d[f"{w}_address"][i]
                    assert bytes(blk.buf[a:b]) == getattr(m, f"{w}_address") and d[f"{w}_port"][i] == getattr(
                        m, f"{w}_port"
                    )
                if len(m.store_address) == 4:
                    assert d["msg_id"][i].tobytes().hex().upper() == offset_msg_id(
                        m.store_address, m.store_port, m.physical_offset
                    )
                if m.properties_bytes.isascii():
                    want = {k.encode(): v.encode() for k, v in m.properties.items()}
                    assert pairs.get(i, {}) == want, (root, m.properties_bytes)


def test_blocks_are_bounded_in_bytes(tricky_store, monkeypatch):
    """A block spans at most MAX_BLOCK_BYTES of the log (at least one record), so big records
    come a few at a time; the records are still all there, in order."""
    import rmqstore_cli.store.commitlog.columns as columns

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


# ---------------------------------------------------------------- the C renderer (_cjson.c)


def _store_of(root, specs) -> list:
    """A store of exactly ``specs``, and its message blocks."""
    cl = CommitLog(StoreConfig.load(root, None, mapped_file_size_commit_log=4 << 20), writable=True)
    cl.open_for_append()
    for one in specs:
        cl.append(one)
    cl.close()
    return [x for x in _blocks(root)[1] if isinstance(x, MessageBlock)]


def _same_as_reference(blocks, bodies=("none", "base64", "hex")) -> None:
    for blk in blocks:
        every = np.arange(blk.n)
        for body in bodies:
            for props in (True, False):
                assert block_lines(blk, every, body, props) == _reference(blk, every, body, props), (body, props)


def _taken_by_reference(blocks, monkeypatch) -> list[bytes]:
    """PROPERTIES of the records the C loop leaves to message_dict."""
    import rmqstore_cli.jsonblock as jb

    calls: list[bytes] = []
    real = jb.message_dict
    monkeypatch.setattr(jb, "message_dict", lambda m, *a: calls.append(m.properties_bytes) or real(m, *a))
    for blk in blocks:
        block_lines(blk, np.arange(blk.n))
    return calls


def _plain(i: int, topic: str = "OrderTopic", props: bytes = PLAIN, body: bytes = b"b", **kw) -> AppendSpec:
    return AppendSpec(
        topic,
        i % 4,
        body,
        props,
        1_767_225_600_000 + i,
        1_767_225_600_000 + i,
        (bytes([10, 0, i % 256, 1]), 40000 + i),
        (b"\x0a\x00\x00\x05", 10911),
        raw_properties=True,
        **kw,
    )


@needs_c
def test_c_numbers_are_java_long_to_string(tmp_path):
    """Long.toString of every int64 edge, in every field that holds one (MessageDecoder#decode)."""
    edges = [0, 1, 9, 10, 99, 100, 101, -1, -9, -10, -100, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63), -(2**63) + 1]
    edges += [
        s * 10**k + d for k in range(19) for d in (-1, 0, 1) for s in (1, -1) if -(2**63) <= s * 10**k + d < 2**63
    ]
    small = [v for v in edges if -(2**31) <= v < 2**31]
    specs = [
        AppendSpec(
            "OrderTopic",
            small[i % len(small)],
            b"x",
            PLAIN,
            v,
            -v if v > -(2**63) else v,
            (bytes([255, 0, 9, 10]), small[i % len(small)]),
            (b"\x0a\x00\x00\x05", small[-i % len(small)]),
            flag=small[i % len(small)],
            reconsume_times=small[-i % len(small)],
            prepared_transaction_offset=v,
            queue_offset=v,
            raw_properties=True,
        )
        for i, v in enumerate(edges)
    ]
    blocks = _store_of(tmp_path / "store", specs)
    assert sum(b.n for b in blocks) == len(edges)
    _same_as_reference(blocks)


_INTERESTING = [
    0x00,
    0x01,
    0x02,
    0x1F,
    0x20,
    0x22,
    0x41,
    0x5C,
    0x7E,
    0x7F,
    0x80,
    0x85,
    0x8E,
    0x9F,
    0xA0,
    0xA6,
    0xA8,
    0xAE,
    0xBF,
    0xC0,
    0xC1,
    0xC2,
    0xDF,
    0xE0,
    0xE2,
    0xED,
    0xEF,
    0xF0,
    0xF4,
    0xF5,
    0xFF,
    0x81,
    0x90,
]


@pytest.mark.slow
@needs_c
@pytest.mark.parametrize("seed", range(2))
def test_c_plain_text_is_what_the_reference_leaves_alone(tmp_path, monkeypatch, seed):
    """A property value goes the C way exactly when it is valid UTF-8 (Python's strict
    decoder), holds nothing JSON escapes and nothing _UNSAFE_UTF8 escapes; either way the
    line is the reference's."""
    from rmqstore_cli.render import _UNSAFE_UTF8

    rng = np.random.default_rng(seed)
    pool = np.array([x for x in _INTERESTING if x not in (1, 2)] + list(range(0x20, 0x7F, 7)), np.uint8)
    cases = [bytes(rng.choice(pool, rng.integers(1, 6))) for _ in range(5000)]
    cases += ["é中🙂\u0085\u2028\u202e\u2066\u200e".encode(), "ok é 中 🙂".encode(), "\U0010ffff".encode()]
    blocks = _store_of(tmp_path / "store", [_plain(i, props=b"K\x01" + raw + b"\x02") for i, raw in enumerate(cases)])
    _same_as_reference(blocks, ("none",))
    want_reference = []
    for raw in cases:
        try:
            text = raw.decode("utf-8")
            plain = (
                not _UNSAFE_UTF8.search(raw)
                and all(0x20 <= ord(c) != 0x7F for c in text)
                and '"' not in text
                and "\\" not in text
            )
        except UnicodeDecodeError:
            plain = False
        if not plain:
            want_reference.append(b"K\x01" + raw + b"\x02")
    assert sorted(_taken_by_reference(blocks, monkeypatch)) == sorted(want_reference)


EDGE_TOPICS = [
    "Nul\x00Topic",
    "Tab\tTopic",
    "Del\x7fTopic",
    "C1\x85Topic",
    "Line\u2028Sep",
    "Bidi\u202eTopic",
    "Emoji🙂Topic",
    "Max\U0010ffff",
    'Q"uote',
    "Back\\slash",
    "Lone\udc80Surrogate",
    "中文",
    "é",
]
EDGE_PROPS = [
    b"",
    b"\x02",
    b"\x01",
    b"\x01\x02",
    b"A\x01\x02",
    b"\x01v\x02",
    b"A\x01v",
    b"A\x01v\x02\x02",
    b"A\x01v\x02B",
    b"A\x01v\x02B\x01",
    b"A\x01v\x01w\x02",
    "K\x01🙂\x02TAGS\x01🙂".encode(),
    b"K\x01\xf0\x9f\x99\x02",  # a truncated 4-byte character
    b"K\x01\xed\xa0\x80\x02",  # an encoded surrogate
    b"K\x01\xc0\xaf\x02",  # an overlong '/'
    b"K\x01\xf4\x90\x80\x80\x02",  # above U+10FFFF
    b"KEYS\x01   \x02",
    b"KEYS\x01\x02",
    b"KEYS\x01a\x02KEYS\x01b\x02",
    b"UNIQ_KEY\x01u\x02TAGS\x01",
    b"TAG\x01t\x02TAGSS\x01t\x02UNIQ_KE\x01u\x02KEY\x01k\x02",  # names near the three it looks for
    "K\x01\u2029\x02".encode(),
    "K\x01\u200f\x02".encode(),
    "K\x01\u2069\x02".encode(),
    b"K\x01a\x1fb\x02",
    b"K\x01\x7f\x02",
    b'K\x01q"\x02',
    b"K\x01b\\\x02",
    b"K\x01\x00\x02",
]


@needs_c
def test_c_escaping_edges_are_the_reference(tmp_path, monkeypatch):
    """Topics and PROPERTIES that hit every escaping rule, odd PROPERTIES shapes
    (MessageDecoder#string2messageProperties), IPv4 and IPv6 hosts, bodies of 0-7 bytes
    (base64 padding, hex), V1 and V2 records: each line is the reference's."""
    specs = [_plain(i, topic=t) for i, t in enumerate(EDGE_TOPICS)]
    specs += [_plain(i, props=p) for i, p in enumerate(EDGE_PROPS)]
    specs += [_plain(i, body=bytes(range(250, 250 + i % 6)) + b"\x00" * (i // 6)) for i in range(8)]
    specs += [spec("OrderTopic", i, PLAIN, v6=True) for i in range(3)]
    specs += [
        AppendSpec(
            "V2Topic",
            0,
            b"",
            b"",
            0,
            0,
            (bytes(16), 0),
            (bytes([0xFE, 0x80] + [0] * 13 + [1]), 65535),
            sys_flag=BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG,
            magic=MAGIC_V2,
            raw_properties=True,
        )
    ]
    blocks = _store_of(tmp_path / "store", specs)
    assert sum(b.n for b in blocks) == len(specs)
    _same_as_reference(blocks)
    taken = _taken_by_reference(blocks, monkeypatch)
    assert len(taken) < len(specs) - 15  # the plain ones (bodies, hosts, V2, clean names) went the C way


#: IPv6 addresses whose text (ipaddress.IPv6Address.compressed) hits every rule: no zero run,
#: a lone zero (not "::"), runs at the start, the end, the middle, all zeros, two runs of
#: equal length (the first is "::"), the longer run second, hextets of 1-4 hex digits, and
#: IPv4-mapped ones (left to the reference: their text differs between Python versions)
HOSTILE_V6 = [
    bytes.fromhex(h)
    for h in (
        "20010db8000100020003000400050006",
        "20010db8000000010001000100010001",
        "00000000000000000000000000000001",
        "fe800000000000000000000000000000",
        "00000000000000000000000000000000",
        "20010000000012340000000000000001",
        "20010000000000001234000000000001",
        "00010000000000010000000000000000",
        "000f00f00f00f00000000abc00000000",
        "ffffffffffffffffffffffffffffffff",
        "00000000000000000000ffffc0a80001",
        "00000000000000000000ffff00000000",
        "0000000000000000ffff0000c0a80001",
        "000000000000000000000000c0a80001",
    )
]


@needs_c
def test_c_writes_ipv6_hosts_as_the_reference(tmp_path, monkeypatch):
    """The C loop writes IPv6 born and store hosts itself (no table from Python): each line is
    the reference's; an IPv4-mapped address (::ffff:a.b.c.d) sends its record to the reference."""
    n = len(HOSTILE_V6)
    specs = [
        AppendSpec(
            "OrderTopic",
            i % 4,
            b"b",
            b"K\x01%d\x02" % i,
            1_767_225_600_000 + i,
            1_767_225_600_000 + i,
            (HOSTILE_V6[i % n], 1 + i),
            (HOSTILE_V6[i // n], 65535),
            sys_flag=BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG,
            raw_properties=True,
        )
        for i in range(n * n)
    ]
    blocks = _store_of(tmp_path / "store", specs)
    _same_as_reference(blocks)
    mapped = {k for k, h in enumerate(HOSTILE_V6) if h[:12] == bytes(10) + b"\xff\xff"}
    want = [b"K\x01%d\x02" % i for i in range(n * n) if {i % n, i // n} & mapped]
    assert _taken_by_reference(blocks, monkeypatch) == want


@needs_c
def test_c_leaves_many_properties_to_the_reference(tmp_path, monkeypatch):
    """More than PAIR_CAP pairs goes to the reference (the C loop's duplicate check stays
    bounded on a hostile record); up to it, the C loop; the lines are the reference's."""
    cap = _cjson.PAIR_CAP
    many = [b"".join(b"N%d\x01v%d\x02" % (k, k) for k in range(n)) for n in (cap - 1, cap, cap + 1, 4 * cap)]
    blocks = _store_of(tmp_path / "store", [_plain(i, props=p) for i, p in enumerate(many)])
    _same_as_reference(blocks)
    assert _taken_by_reference(blocks, monkeypatch) == many[2:]


def test_without_the_extension_every_record_takes_the_reference(tricky_store, monkeypatch):
    """The pure-Python fallback: _cjson not importable (no compiler at install)."""
    import sys

    import rmqstore_cli
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    monkeypatch.setitem(sys.modules, "rmqstore_cli._cjson", None)  # import fails, as when it did not build
    monkeypatch.delattr(rmqstore_cli, "_cjson", raising=False)
    assert FAST_PATHS.json_kernel(10**6) is None
    _, items = _blocks(tricky_store)
    for blk in (x for x in items if isinstance(x, MessageBlock)):
        every = np.arange(blk.n)
        assert block_lines(blk, every) == _reference(blk, every, "none", True)
        assert block_lines(blk, every[::2], "base64", False) == _reference(blk, every[::2], "base64", False)


@needs_c
def test_c_renders_in_threads_at_once(tricky_store):
    """The C loop runs without the GIL: blocks rendered by several threads at once (each
    its own output buffer) are each the reference's."""
    from concurrent.futures import ThreadPoolExecutor

    blocks = [b for b in _blocks(tricky_store)[1] if isinstance(b, MessageBlock)] * 8
    want = [_reference(b, np.arange(b.n), "hex", True) for b in blocks]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda b: block_lines(b, np.arange(b.n), "hex", True), blocks))
    assert got == want


def _args(tricky_store) -> list:
    from rmqstore_cli.jsonblock import render_args

    for blk in (x for x in _blocks(tricky_store)[1] if isinstance(x, MessageBlock)):
        args = list(render_args(_cjson, blk, np.arange(blk.n), "hex", True))
        born_len = args[2][:, 1]  # locs' born_len: 4 or 16
        if (born_len == 16).any() and (born_len == 4).sum() > 8:  # IPv6 and IPv4 hosts
            return args
    raise AssertionError("no block with both kinds of host")


def _bad_args(args: list) -> list:
    n, a = args[1].shape[0], args[0]
    i = int(np.flatnonzero(args[2][:, 1] == 4)[n // 4])  # a record with an IPv4 born host
    bad = []
    for k, v in [
        (1, args[1].astype(np.int32)),
        (1, np.asfortranarray(args[1])),
        (1, args[1][:, :14].copy()),
        (2, args[2][: n - 1].copy()),
        (3, args[3].astype(np.int64)),
        (3, args[3][1:].copy()),
        (5, args[5][:-1].copy()),
        (5, args[5] * 10**6),
        (7, args[7] * 100),
        (8, 3),
        (8, -1),
        (10, np.empty(64, np.uint8)),
        (10, bytes(len(args[10]))),
        (11, args[11][:-1].copy()),
        (12, -1),
        (13, 10**6),
        (0, a[:100]),
    ]:
        bad.append((k, v))
    for col, value in [
        (0, a.size - 2),  # an IPv4 address past the file's end
        (1, 8),  # an address neither 4 nor 16 bytes
        (1, -4),
        (3, 5),
        (4, a.size),
        (4, -1),
        (5, -1),
        (6, a.size - 2),
        (7, 1 << 40),
        (8, a.size + 1),
        (9, a.size - 3),
        (0, a.size - 3),
        (0, -1),
        (2, a.size),
        (3, -5),
        (3, 1 << 62),
    ]:
        locs = args[2].copy()
        locs[i, col] = value
        bad.append((2, locs))
    for value in (-1, a.size):  # body_size
        nums = args[1].copy()
        nums[i, 14] = value
        bad.append((1, nums))
    return bad


@needs_c
def test_c_rejects_every_bad_argument(tricky_store):
    """Wrong kinds, shapes, offsets outside their tables, a position outside the mapped
    file, a short output buffer: ValueError (or the buffer protocol's error), never a read
    or write outside a buffer."""
    args = _args(tricky_store)
    good = _cjson.render(*args)
    assert good > 0 and 0 < args[3].sum() < args[3].size  # tricky records among them
    for k, v in _bad_args(args):
        bad = list(args)
        bad[3] = np.ones_like(args[3])
        bad[k] = v
        with pytest.raises((ValueError, BufferError)):
            _cjson.render(*bad)
    with pytest.raises(TypeError):
        _cjson.render(*args[:-1])
    assert _cjson.render(*args) == good  # still whole after all that


def test_big_generated_store_dumps_as_the_reference(tmp_path, monkeypatch):
    """A store large enough for blocks above the default json_min, through the CLI."""
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS
    from tests.helpers import generate

    monkeypatch.setattr(FAST_PATHS, "json_min", 1000)
    root = tmp_path / "store"
    generate(root, "--body-size", "0-300", "--ipv6-ratio", "0.1", messages=6000, seed=7, small=False)
    cl = CommitLog(StoreConfig.load(root, None))
    assert len(cl.files) == 1
    want = [to_json_bytes(message_dict(m, "hex", True, cl.files[0].name)).decode() for m in cl.scan(every_file=True)]
    r = cli("dump-commitlog", "--store", root, "--format", "jsonl", "--body", "hex")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == want


def _columns_of(fn, a, pos) -> tuple:
    """``fn``'s (nums, locs) of the records at ``pos``, or the ValueError it raised."""
    from rmqstore_cli.jsonblock import LAYOUT, LOCS, NUMS

    nums, locs = np.zeros((len(pos), len(NUMS)), np.int64), np.zeros((len(pos), len(LOCS)), np.int64)
    try:
        fn(a, np.asarray(pos, np.int64), LAYOUT, nums, locs)
    except ValueError:
        return (ValueError,)
    return nums.tolist(), locs.tolist()


@needs_c
def test_c_columns_are_the_twins(tricky_store, small_store):
    """_cjson.columns reads every field render needs as jsonblock.columns (its numpy twin)
    does: on every block of the stores, and at hostile positions (inside records, in the
    zero tail, near the file's end, outside it), where both raise or both read the same."""
    from rmqstore_cli import jsonblock

    rng = np.random.default_rng(3)
    for root in _stores(tricky_store, small_store):
        for blk in (x for x in _blocks(root)[1] if isinstance(x, MessageBlock)):
            assert _columns_of(_cjson.columns, blk.a, blk.pos) == _columns_of(jsonblock.columns, blk.a, blk.pos)
            a = blk.a[: blk.next_pos + 40]  # a file that ends just after the block
            for p in [*rng.integers(0, a.size, 40).tolist(), -1, a.size, a.size - 47, a.size - 48, 1 << 40]:
                assert _columns_of(_cjson.columns, a, [p]) == _columns_of(jsonblock.columns, a, [p]), (root, p)


@needs_c
def test_c_columns_rejects_bad_arguments(tricky_store):
    """A short or out-of-range layout, wrong shapes or kinds: ValueError, nothing read."""
    from rmqstore_cli.jsonblock import LAYOUT

    blk = next(x for x in _blocks(tricky_store)[1] if isinstance(x, MessageBlock))
    n = blk.n
    good = (blk.a, blk.pos, LAYOUT, np.zeros((n, 15), np.int64), np.zeros((n, 10), np.int64))
    bad_layouts = [LAYOUT[:-1].copy(), LAYOUT * 0 - 1, np.where(np.arange(LAYOUT.size) == 2, 3, LAYOUT)]
    for k, v in [(2, x) for x in bad_layouts] + [
        (3, np.zeros((n, 14), np.int64)),
        (4, np.zeros((n + 1, 10), np.int64)),
        (1, blk.pos.astype(np.int32)),
        (3, np.zeros((n, 15), np.int32)),
    ]:
        args = list(good)
        args[k] = v
        with pytest.raises(ValueError):
            _cjson.columns(*args)
    assert _cjson.columns(*good) is None


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_lines_written_now_survive_the_buffer_reused(monkeypatch, fmt):
    """Output.write_lines_now: lines in a buffer the caller overwrites right after (jsonblock's)
    are out, after the records held before them, before it returns; a text stdout without a
    binary buffer, and --format json, take a copy instead."""
    import io
    import sys

    from rmqstore_cli.render import Output

    for stdout in (io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()):
        monkeypatch.setattr(sys, "stdout", stdout)
        out = Output(fmt)
        out.emit({"first": 1})
        buf = bytearray(b'{"a":1}\n{"b":2}\n')
        out.write_lines_now(memoryview(buf), 2)
        buf[:] = b"X" * len(buf)  # the caller's next block
        out.close()
        got = stdout.buffer.getvalue().decode() if hasattr(stdout, "buffer") else stdout.getvalue()
        want = [{"first": 1}, {"a": 1}, {"b": 2}]
        assert (json.loads(got) if fmt == "json" else [json.loads(x) for x in got.splitlines()]) == want
        assert out.count == 3
