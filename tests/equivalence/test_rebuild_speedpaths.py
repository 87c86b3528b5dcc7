"""rebuild-index's block paths (fastdispatch: new topics of a block registered at once,
TAGS and keys hashed by store/javahash/bulk.py, IndexFile.put_keys' slot grouping) against the
per-record Dispatcher, which ``generate --from-jsonl`` writes through: same bytes. And the
bulk writers (put_many, put_keys, write_entries + link_blocks) against their per-record
ones."""

from __future__ import annotations

import base64
import json
import random

import pytest

from tests.helpers import cli

# long topics alike in their first, middle-8 and last bytes, non-ASCII topics, short ones
TOPICS = (
    [f"T{i}" for i in range(12)]
    + ["支付Topic", "Topic-🎉"]
    + [f"LongTopicName-{m}-shared-suffix" for m in ("aaaa", "aaab", "baaa")]
    + ["X" * 40 + c + "Y" * 40 for c in "abc"]
)
KEYS = ["order-%d", "订单-%d", "k%d-🎉", "AaAa", "BBBB", "minhash-280000磁龟", "x\u07ff\u0800\uffff%d", ""]


def _records(n: int, seed: int, topics: list[str] = TOPICS) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        words = [rnd.choice(KEYS).replace("%d", str(i)) for _ in range(rnd.randint(0, 3))]
        props = [b"UNIQ_KEY\x01" + f"U{i:08X}".encode(), b"KEYS\x01" + " ".join(words).encode()]
        if rnd.random() < 0.05:  # malformed UTF-8 in a key: the decoder's U+FFFD rules
            props.append(b"KEYS\x01ok " + rnd.choice([b"\xe6\x94", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf"]) + b" ok2")
        if rnd.random() < 0.8:
            props.append(("TAGS\x01" + rnd.choice(["Pay", "支付标签", "t-🎉", "Tag With Blank", "AaBB"])).encode())
        out.append(
            {
                "topic": rnd.choice(topics) if i >= 3 else topics[-1],
                "queue_id": rnd.randrange(4),
                "store_timestamp": 1795317650000 + i * 41,
                "born_timestamp": 1795317640000 + i,
                "born_host": "10.0.0.1:5000",
                "store_host": "10.1.2.3:10911",
                "sys_flag": 0,
                "magic": "v1",
                "properties_base64": base64.b64encode(b"\x02".join(props)).decode(),
                "body_base64": base64.b64encode(rnd.randbytes(rnd.randint(0, 64))).decode(),
            }
        )
    return out


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# a block's new topics are taken by their bytes a few at a time, the rest looked up again
# (fastdispatch._topic_ids): hundreds of topics new in one block, interleaved, some alike
MANY_TOPICS = TOPICS + [f"M{i}" for i in range(400)] + [f"LongTopicName-{i:04d}-shared-suffix" for i in range(80)]


@pytest.mark.parametrize("topics", [TOPICS, MANY_TOPICS], ids=["few-topics", "many-new-topics"])
def test_block_paths_write_what_the_per_record_dispatch_writes(tmp_path, topics):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _records(2500, 5, topics)), encoding="utf-8")
    store = tmp_path / "store"
    # one commit-log file holds every record (one block sees all topics appear); few slots
    # and small index files: chains inside a block and rolled files
    r = cli(
        "generate",
        "--store",
        store,
        "--from-jsonl",
        src,
        "--commitlog-file-size",
        str(4 << 20),
        "--cq-file-size",
        "6000",
        "--index-slots",
        "97",
        "--index-max",
        "1500",
        "--tz",
        "UTC",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--output", out, "--tz", "UTC", "--format", "json")
    assert r.exit_code == 0, r.stderr
    want_cq, got_cq = _tree(store / "consumequeue"), _tree(out / "consumequeue")
    assert got_cq == want_cq and len(want_cq) > len(TOPICS)
    assert len({k.split("/")[0] for k in want_cq}) > (300 if topics is MANY_TOPICS else 15)
    want_ix, got_ix = _tree(store / "index"), _tree(out / "index")
    assert got_ix == want_ix and len(want_ix) > 2
    assert json.loads(r.stdout)["messages"] == 2500


def test_properties_without_checks_give_the_same_values_and_keys():
    """Properties(checks=False), what dispatch uses, parses pairs and values exactly as the
    checked parser does (repeated names, empty values, missing \\x01, non-ASCII)."""
    import numpy as np

    from rmqstore_cli.store.records.properties import Properties

    rnd = random.Random(8)
    names = [b"KEYS", b"TAGS", b"UNIQ_KEY", b"DELAY", b"X"]
    msgs = []
    for i in range(400):
        pairs = []
        for _ in range(rnd.randint(0, 5)):
            v = rnd.choice([b"", b"a b", b" k1  k2 ", f"订单-{i}", b"x\x01y", b"v%d" % i])
            pairs.append(rnd.choice(names) + rnd.choice([b"\x01", b""]) + (v if isinstance(v, bytes) else v.encode()))
        msgs.append(b"\x02".join(pairs) + rnd.choice([b"", b"\x02"]))
    buf = b"".join(msgs)
    pl = np.array([len(m) for m in msgs], np.int64)
    ps = np.cumsum(pl) - pl
    arr = np.frombuffer(buf, np.uint8)
    full, lean = Properties(arr, ps, pl, buf), Properties(arr, ps, pl, buf, checks=False)
    for name in (b"KEYS\x01", b"TAGS\x01", b"UNIQ_KEY\x01", b"DELAY\x01"):
        assert [x.tolist() for x in lean.value(name)] == [x.tolist() for x in full.value(name)]
    keep = np.array([rnd.random() < 0.8 for _ in msgs])
    assert [x.tolist() for x in lean.key_ranges(keep)] == [x.tolist() for x in full.key_ranges(keep)]
    assert lean.hp.tolist() == full.hp.tolist() and lean.non_ascii_msg.tolist() == full.non_ascii_msg.tolist()
    assert len(full.key_ranges(keep)[0]) > 100


def _index_bytes(path) -> bytes:
    return path.read_bytes()


def test_put_keys_writes_what_put_key_writes_and_the_chunked_writer_too(tmp_path):
    """``IndexService.put_keys`` (blocks of ``IndexFile.put_keys``, rolling files) against
    one ``put_key`` per key; and the Spark tasks' writer (``write_entries`` per chunk, then
    ``link_blocks`` and the header) against ``put_keys`` on one file: the same bytes."""
    import numpy as np

    from rmqstore_cli.store.javahash import index_key_hash
    from rmqstore_cli.store.queues.index import IndexFile, time_diff, time_diffs, write_entries
    from rmqstore_cli.store.queues.index_service import IndexService

    rnd = random.Random(5)
    keys = [f"T#{rnd.choice(KEYS).replace('%d', str(rnd.randrange(40)))}" for _ in range(300)]
    phy = np.cumsum([rnd.randint(0, 300) for _ in keys]).astype(np.int64)
    ts = np.array([1795317650000 + i * rnd.choice([0, 7, 999, 1000, 2500]) for i in range(len(keys))], np.int64)
    hashes = np.array([index_key_hash(k) for k in keys], np.int64)
    slots, per = 7, 64  # few slots: long chains; 63 keys a file: several files
    one = IndexService(tmp_path / "one", slots, per, writable=True)
    for k, p, t in zip(keys, phy.tolist(), ts.tolist(), strict=True):
        one.put_key(k, p, t)
    one.close()
    many = IndexService(tmp_path / "many", slots, per, writable=True)
    for a, b in ((0, 1), (1, 40), (40, 41), (41, 300)):
        many.put_keys(hashes[a:b], phy[a:b], ts[a:b])
    many.close()
    want = {p.name: p.read_bytes() for p in sorted((tmp_path / "one").iterdir())}
    assert {p.name: p.read_bytes() for p in sorted((tmp_path / "many").iterdir())} == want and len(want) == 5

    n = per - 1  # the first file's keys, as chunks of a Spark rebuild
    path = tmp_path / "part"
    IndexFile.create(path, slots, per, roots=[tmp_path]).close()
    blocks = []
    for a, b in ((0, 10), (10, 11), (11, n)):
        diff = time_diffs(ts[a:b], int(ts[0]))
        if a == 0:
            diff[0] = time_diff(int(ts[0]), 0)
        blocks.append(np.stack(write_entries(path, slots, a + 1, hashes[a:b], phy[a:b], diff)))
    f = IndexFile(path, slots, per, writable=True, roots=[tmp_path])
    used = f.link_blocks(blocks)
    h = f.header
    h.begin_phy_offset, h.begin_timestamp, h.end_phy_offset, h.end_timestamp = (
        int(phy[0]),
        int(ts[0]),
        int(phy[n - 1]),
        int(ts[n - 1]),
    )
    h.hash_slot_count, h.index_count = used, n + 1
    f.write_header()
    f.close()
    assert path.read_bytes() == want[min(want)]


def test_put_many_writes_what_put_writes(tmp_path):
    """``ConsumeQueueWriter.put_many`` (one append for units that follow on, else unit by
    unit) against one ``put`` per unit: pre-blank, duplicates, gaps and a file roll."""
    import numpy as np

    from rmqstore_cli.store.queues.consume_queue import ConsumeQueueWriter

    runs = [(7, 5), (12, 30), (12, 3), (50, 4), (20, 2), (54, 1)]  # (first cq offset, units)
    size = 20 * 16
    one = ConsumeQueueWriter(tmp_path / "one", "T", 0, size)
    many = ConsumeQueueWriter(tmp_path / "many", "T", 0, size)
    for first, n in runs:
        q = np.arange(first, first + n, dtype=np.int64)
        phy, sz, tags = q * 100, np.full(n, 90, np.int64), q * 3 - 40
        for j in range(n):
            one.put(int(phy[j]), int(sz[j]), int(tags[j]), int(q[j]))
        many.put_many(phy, sz, tags, q)
    one.flush()
    many.flush()
    want = _tree(tmp_path / "one")
    assert _tree(tmp_path / "many") == want and len(want) == 3  # 47 units: a gap is appended at the end
