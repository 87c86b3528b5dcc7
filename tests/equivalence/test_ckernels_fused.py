"""verify's fused C loops (``record_cols``: a batch's fields and small bodies' CRCs in one
pass; ``topic_ids``: topic ids by a hash table) against their reference twins of the same
name (store/verify/batch_fused.py) on random and hostile input, and their argument checks.

``record_cols`` reads ``MessageDecoder#decode``'s fields; its twin is ``RecordBatch`` with
zlib's CRC (``UtilAll#crc32``): equal columns whenever every field lies inside the buffer,
-1 from both otherwise. ``topic_ids`` equals a dict look-up of the topic bytes, whatever
the names (empty, one byte apart, sharing long prefixes) and however they are added.
"""

from __future__ import annotations

import json
import random
import struct

import numpy as np
import pytest
from rmqstore_cli.formats.commitlog import BORNHOST_V6_FLAG, HEAD_SIZE, MAGIC_V1, MAGIC_V2, STOREHOSTADDRESS_V6_FLAG

from rmqstore_cli.store.commitlog.bulk import RecordBatch, walk_records
from rmqstore_cli.store.files.arrays import file_array
from rmqstore_cli.store.records.topics import TopicTable, topic_ids
from rmqstore_cli.store.verify.batch_fused import COLS, RecordColumns, record_cols
from tests.helpers import generate, needs_c, run


@pytest.fixture
def K():
    needs_c()
    from rmqstore_cli.store.files import kernels

    return kernels


def test_the_columns_are_named_alike(K):
    assert K.REC_COLS == COLS


def _record(rnd: random.Random) -> bytes:
    """One record with fields drawn from the edges (lengths negative, zero, past the end)."""
    sysf = rnd.choice((0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG))
    sysf |= rnd.getrandbits(3) << 1
    v2 = rnd.random() < 0.5
    body = rnd.randbytes(rnd.choice((0, 1, 7, 255, 767, 768, 769, 2000)))
    topic = rnd.randbytes(rnd.choice((0, 1, 5, 17, 40)))
    props = rnd.randbytes(rnd.choice((0, 3, 60)))
    bhl = 20 if sysf & BORNHOST_V6_FLAG else 8
    shl = 20 if sysf & STOREHOSTADDRESS_V6_FLAG else 8
    body_len = rnd.choice((len(body),) * 4 + (-1, -(1 << 31), (1 << 31) - 1, len(body) + 1, 1 << 20))
    topic_len = rnd.choice((len(topic),) * 4 + (-1, -128 if not v2 else -(1 << 15), 127, 300))
    props_len = rnd.choice((len(props),) * 4 + (-1, -(1 << 15), (1 << 15) - 1))
    rec = bytearray(
        struct.pack(
            ">iIiiiqqiq", 0, MAGIC_V2 if v2 else MAGIC_V1, rnd.getrandbits(31), rnd.getrandbits(10), 0, 5, 9, sysf, 1
        )
    )
    rec += rnd.randbytes(bhl) + struct.pack(">q", rnd.getrandbits(62)) + rnd.randbytes(shl)
    rec += struct.pack(">iqi", 0, -1, body_len) + body
    rec += struct.pack(">h" if v2 else ">b", max(min(topic_len, 127 if not v2 else 32767), -128 if not v2 else -32768))
    rec += topic + struct.pack(">h", props_len) + props
    struct.pack_into(">i", rec, 0, len(rec))
    return bytes(rec)


def _both(K, a: np.ndarray, pos: np.ndarray, small: int):
    outs = [np.full(len(COLS) * pos.size, 7, np.int64) for _ in range(2)]
    got = (record_cols(a, pos, small, outs[0]), K.record_cols(a, pos, small, outs[1]))
    return got, outs


def test_hostile_records_read_like_the_reference(K):
    rnd = random.Random(35)
    for k in range(1500):
        b = b"".join(_record(rnd) for _ in range(rnd.randrange(1, 6)))
        cut = rnd.choice((len(b), len(b), rnd.randrange(0, len(b) + 1)))
        a = np.frombuffer(b[:cut], np.uint8) if cut else np.zeros(0, np.uint8)
        walked = walk_records(b, 0, len(b), 100, 1).starts
        pos = np.concatenate([walked, [rnd.randrange(0, len(b) + 60)] * rnd.randrange(0, 2)]).astype(np.int64)
        small = rnd.choice((0, 1, 256, 768, 1 << 30))
        (want, got), (w, g) = _both(K, a, pos, small)
        assert want == got, (k, cut, pos.tolist(), small)
        if got >= 0:  # -1: out partly written, the caller reads RecordBatch instead
            assert np.array_equal(w, g), k
            cols = g.reshape(len(COLS), pos.size)
            r = RecordBatch(a, pos)
            for j, name in enumerate(COLS[:-1]):
                assert cols[j].tolist() == getattr(r, name).tolist(), (k, name)


def test_a_generated_store_reads_like_record_batch(K, tmp_path):
    s = generate(tmp_path / "s", "--body-size", "900", messages=400, seed=8)
    f = sorted((s / "commitlog").iterdir())[0]
    a = file_array(f.read_bytes())
    pos = walk_records(a.tobytes(), 0, a.size, 10_000, 1).starts.astype(np.int64)
    assert pos.size >= 50
    for kern, small in ((None, K.SMALL_BODY), (K, K.SMALL_BODY), (None, 4096), (K, 4096)):
        r = RecordColumns.read(kern, a, pos, small)
        ref = RecordBatch(a, pos)
        for name in COLS[:-1]:
            assert getattr(r, name).tolist() == getattr(ref, name).tolist(), name
        assert r.crc is not None and (r.crc[np.maximum(ref.body_len, 0) < small] >= 0).all()
        assert (r.crc[ref.body_len >= small] == -1).all()
        done = np.flatnonzero(r.crc >= 0)
        assert done.size > 0 or small < 900  # 900-byte bodies: long for the C loop's default only
        assert r.crc[done].tolist() == ref.body_crc[done].tolist()  # a generated store's CRCs hold
        h = r.head(3)
        assert h.total.tolist() == ref.total[:3].tolist() and h.crc.size == 3


def test_a_field_past_the_end_falls_back_to_record_batch(K):
    rec = _record(random.Random(1))
    a = np.frombuffer(rec + rec[: HEAD_SIZE + 10], np.uint8)
    pos = np.array([0, len(rec)], np.int64)
    for kern in (None, K):
        r = RecordColumns.read(kern, a, pos, 768)
        assert r.crc is None and r.total.tolist() == RecordBatch(a, pos).total.tolist()


def _attrs(r: RecordBatch) -> dict:
    """Every column of a batch (the head and MAGICCODE too, read when asked for), as lists."""
    _ = r.magic, r._head
    return {k: v.tolist() for k, v in vars(r).items() if k != "a"}


def test_record_batch_read_by_the_c_loop_is_the_numpy_batch(K):
    """RecordBatch.read (record_cols' one pass; valid_block's) gives every column
    RecordBatch's gathers do, for hostile records, cut ones (the gathers then) and taken rows."""
    rnd = random.Random(47)
    for k in range(800):
        b = b"".join(_record(rnd) for _ in range(rnd.randrange(1, 6)))
        cut = rnd.choice((len(b), len(b), rnd.randrange(1, len(b) + 1)))
        a = np.frombuffer(b[:cut], np.uint8)
        pos = walk_records(b, 0, len(b), 100, 1).starts.astype(np.int64)
        got, want = RecordBatch.read(a, pos), RecordBatch(a, pos)
        assert _attrs(got) == _attrs(want), (k, cut)
        idx = np.array(sorted(rnd.sample(range(pos.size), rnd.randrange(0, pos.size + 1))), np.int64)
        assert _attrs(RecordBatch.read(a, pos).take(idx)) == _attrs(want.take(idx)), k


def test_record_cols_checks_its_arguments(K):
    a, pos = np.zeros(100, np.uint8), np.zeros(2, np.int64)
    for call, exc in [
        (lambda: K.record_cols(a, pos, 0, np.zeros(len(COLS) * 2 - 1, np.int64)), ValueError),
        (lambda: K.record_cols(a, pos.astype(np.int32), 0, np.zeros(len(COLS) * 2, np.int64)), TypeError),
        (lambda: K.record_cols(a, pos, 0, bytes(8 * len(COLS) * 2)), BufferError),
        (lambda: record_cols(a, pos, 0, np.zeros(3, np.int64)), ValueError),
    ]:
        with pytest.raises(exc):
            call()
    out = np.zeros(len(COLS) * 2, np.int64)
    assert K.record_cols(a, np.array([-1, 0], np.int64), 0, out) == -1 == record_cols(a, np.array([-1, 0]), 0, out)
    assert K.record_cols(a, pos[:0], 768, out[:0]) == 0 == record_cols(a, pos[:0], 768, out[:0])


def _names(rnd: random.Random, n: int) -> list[bytes]:
    base = [b"", b"a", b"b", b"ab", b"TopicTest", b"TopicTesu", b"x" * 40, b"x" * 39 + b"y", "主题".encode()]
    out = list(dict.fromkeys(base + [rnd.randbytes(rnd.randrange(0, 30)) for _ in range(n)]))
    rnd.shuffle(out)
    return out


def test_topic_ids_like_a_dict(K):
    rnd = random.Random(7)
    for k in range(200):
        names = _names(rnd, rnd.randrange(0, 60))
        known = names[: rnd.randrange(0, len(names) + 1)]
        topics = [rnd.choice(names) if rnd.random() < 0.9 else rnd.randbytes(4) for _ in range(50)]
        buf = b"".join(topics) + b"!"
        a = np.frombuffer(buf, np.uint8)
        tl = np.array([len(t) for t in topics], np.int64)
        ta = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
        hostile = rnd.randrange(0, 50)
        tl[hostile] = rnd.choice((-1, len(buf), 1 << 40, tl[hostile]))
        ta[hostile] = rnd.choice((ta[hostile], len(buf), -3, 1 << 62))
        tables = [TopicTable(), TopicTable()]
        for j, t in enumerate(known):  # added in two steps: the C table grows and keeps its slots
            for tt in tables:
                tt.add(t)
            if j == len(known) // 2:
                assert np.array_equal(tables[0].lookup(None, a, ta, tl), tables[1].lookup(K, a, ta, tl))
        want, got = tables[0].lookup(None, a, ta, tl), tables[1].lookup(K, a, ta, tl)
        assert np.array_equal(want, got), k
        ids = {t: i for i, t in enumerate(known)}
        assert got[:hostile].tolist() == [ids.get(t, -1) for t in topics[:hostile]]


def test_topic_ids_checks_its_arguments(K):
    a, ta, tl = np.frombuffer(b"abc", np.uint8), np.zeros(2, np.int64), np.ones(2, np.int64)
    names, noff, out = np.frombuffer(b"ab", np.uint8), np.array([0, 1, 2], np.int64), np.zeros(2, np.int64)

    def slots(size: int, fill: int = -1) -> np.ndarray:
        s = np.full(size + 1, fill, np.int64)
        s[0] = 0
        return s

    for call in [
        lambda: K.topic_ids(a, ta, tl, names, noff, slots(4), out),  # not above twice the names
        lambda: K.topic_ids(a, ta, tl, names, noff, slots(6), out),  # not a power of two
        lambda: K.topic_ids(a, ta, tl, names, noff, np.zeros(0, np.int64), out),
        lambda: K.topic_ids(a, ta, tl, names, np.array([0, 1, 3], np.int64), slots(8), out),  # past names
        lambda: K.topic_ids(a, ta, tl, names, np.array([1, 0, 2], np.int64), slots(8), out),  # backwards
        lambda: K.topic_ids(a, ta, tl, names, noff, slots(8, fill=0), out),  # no free slot
        lambda: K.topic_ids(a, ta, tl[:1], names, noff, slots(8), out),
        lambda: K.topic_ids(a, ta, tl, names, np.zeros(0, np.int64), slots(8), out),
    ]:
        with pytest.raises(ValueError):
            call()
    s = slots(8)
    s[0] = 5  # more names than there are
    with pytest.raises(ValueError):
        K.topic_ids(a, ta, tl, names, noff, s, out)
    assert K.topic_ids(a, ta, tl, names, noff, slots(8), out) == 0 and out.tolist() == [0, 0]
    assert topic_ids(a, ta, tl, names, noff, slots(8), out) == 0 and out.tolist() == [0, 0]


def test_delays_add_at_once_unless_a_rule_throws_or_overflows():
    from rmqstore_cli.store.verify.records import RecordChecks
    from rmqstore_cli.store.write.dispatch import InvalidForDispatch

    tags, ts, m = np.array([5, 6, 7, 8], np.int64), np.array([100, 200, 300, 400], np.int64), np.array([0, 2, 3])
    assert RecordChecks._add_delays(tags, ts, m, [1000, False, 7]) and tags.tolist() == [1100, 6, 7, 407]
    assert RecordChecks._add_delays(tags, ts, m, [False, False, False]) and tags.tolist() == [1100, 6, 7, 407]
    for got in ([1, InvalidForDispatch("no"), 2], [1, (1 << 63) - 350, 2], [-(1 << 64), 1, 2]):
        assert not RecordChecks._add_delays(tags, ts, m, got) and tags.tolist() == [1100, 6, 7, 407]


def test_a_delay_the_broker_throws_at_is_one_finding_on_both_paths(tmp_path):
    """Schedule-topic records of every DELAY level and one of DELAY "x" (written as DELAY
    17, as --from-jsonl stops at a bad one, then patched in place to "x7")."""
    rows = []
    for i in range(30):
        props = f"UNIQ_KEY\x01U{i:04d}\x02DELAY\x01{1 + i % 4}\x02REAL_TOPIC\x01T\x02REAL_QID\x010\x02"
        rows.append(
            {
                "topic": "SCHEDULE_TOPIC_XXXX",
                "queue_id": i % 4,
                "store_timestamp": 1795317650000 + i * 10,
                "born_timestamp": 1795317640000 + i,
                "born_host": "10.0.0.1:5000",
                "store_host": "10.1.2.3:10911",
                "properties_string": props,
                "body_base64": "aGVsbG8=",
            }
        )
    rows[12]["properties_string"] = rows[12]["properties_string"].replace("DELAY\x011", "DELAY\x0117")
    src = tmp_path / "dump.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    store = tmp_path / "store"
    run("generate", "--store", store, "--from-jsonl", src, "--format", "json")
    log = sorted((store / "commitlog").iterdir())[0]
    b = bytearray(log.read_bytes())
    at = b.index(b"DELAY\x0117\x02")
    b[at + 6] = ord("x")  # the CRC is of the body only: the record stays whole
    log.write_bytes(bytes(b))
    outs = []
    for pure in ("0", "1"):
        r = run("verify", "--store", store, "--format", "json", env={"RMQSTORE_PURE": pure})
        outs.append(json.loads(r.stdout)["findings"])
    assert outs[0] == outs[1]
    throws = [f for f in outs[0] if f["check"] == "commitlog.properties" and "throws" in json.dumps(f)]
    assert len(throws) == 1, outs[0]


_CRC_CHECK = """
import zlib
import numpy as np
from rmqstore_cli.store.files import kernels as K
a = np.random.default_rng(3).integers(0, 256, 1 << 17, dtype=np.uint8)
steps = (256, 512, 1024, 2048, 4096, 8192, 16384)
lens = list(range(0, 300)) + [n + d for n in steps for d in (-17, -16, -1, 0, 1, 15, 16, 63)]
lens += [100_000, (1 << 17) - 13]
ln = np.array([n for n in lens for s in (0, 1, 7, 13, 63)], np.int64)
at = np.array([s for n in lens for s in (0, 1, 7, 13, 63)], np.int64)
ok = at + ln <= a.size
at, ln = at[ok], ln[ok]
out = np.empty(at.size, np.int64)
assert K.small_body_crcs(a, at, ln, 1 << 40, out) == 0
b = a.tobytes()
want = [zlib.crc32(b[x : x + n]) & 0x7FFFFFFF for x, n in zip(at.tolist(), ln.tolist())]
assert out.tolist() == want
print(K.CLMUL_BITS)
"""


@pytest.mark.parametrize(("no_clmul", "no_wide"), [("", ""), ("", "1"), ("1", "")])
def test_crc_by_folding_and_by_table_equal_zlib_at_every_length_and_alignment(K, no_clmul, no_wide):
    """The tables, 128-bit folding and 512-bit folding (whichever this CPU has: CLMUL_BITS
    says which ran), every length to 300 and those around each step, odd alignments."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RMQSTORE_NO_CLMUL": no_clmul, "RMQSTORE_NO_VPCLMUL": no_wide}
    r = subprocess.run([sys.executable, "-c", _CRC_CHECK], env=env, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == str(0 if no_clmul else min(K.CLMUL_BITS, 128) if no_wide else K.CLMUL_BITS)
