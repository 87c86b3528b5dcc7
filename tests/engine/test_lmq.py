"""LMQ / multi-dispatch (docs/format/lmq.md; ``ConsumeQueue#multiDispatchLmqQueue``,
``MultiDispatch#wrapMultiDispatch``): the real 4.9.7 LMQ sample read and rebuilt byte for
byte, and stores made here from the plain 4.9.7 sample by independent code (plain struct:
properties added to each record, sizes and offsets recomputed as the store would, the
expected LMQ units written) that rebuild and verify must agree with."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.helpers import cli, fixture_dir

CQ_FILE = 2000
LMQ_CONF = (
    "mappedFileSizeCommitLog={cl}\nmappedFileSizeConsumeQueue=2000\nmessageIndexEnable={idx}\n"
    "enableLmq=true\nenableMultiDispatch=true\n"
)


def _json(r) -> dict:
    assert r.exit_code in (0, 1), r.stderr
    return json.loads(r.stdout)


def _verify(store: Path, conf: Path | None = None) -> dict:
    args = ["verify", "--store", store, "--format", "json"] + (["--broker-conf", conf] if conf else [])
    return _json(cli(*args))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ the real sample
@pytest.fixture(scope="module")
def lmq(sample_tarball):
    d = sample_tarball("lmq")
    return d / "store", d / "broker.conf", json.loads((d / "expected.json").read_text())


def test_rebuild_index_reproduces_every_queue_of_the_real_sample(lmq, tmp_path):
    """``ConsumeQueue#putMessagePositionInfoWrapper`` -> ``#multiDispatchLmqQueue``: %LMQ%
    queues in queue 0, MirrorTopic (not LMQ) in the message's queue id; the index too."""
    store, conf, _ = lmq
    r = cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", tmp_path / "out")
    assert r.exit_code == 0, r.stderr
    want, got = _tree(store / "consumequeue"), _tree(tmp_path / "out" / "consumequeue")
    assert any(k.startswith("%LMQ%alpha/0/") for k in want) and any(k.startswith("MirrorTopic/1/") for k in want)
    assert got == want
    # index names are creation wall times; contents are identical
    assert sorted(_tree(tmp_path / "out" / "index").values()) == sorted(_tree(store / "index").values())


def test_rebuild_without_multi_dispatch_writes_no_lmq_queue(lmq, tmp_path):
    """``DefaultMessageStore#checkMultiDispatchQueue``: enableMultiDispatch=false, no fan-out."""
    store, _, _ = lmq
    conf = tmp_path / "plain.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=262144\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\nmaxIndexNum=400\n"
    )
    assert cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", tmp_path / "out").exit_code == 0
    names = {p.name for p in (tmp_path / "out" / "consumequeue").iterdir()}
    assert names == {"CartTopic", "ShipTopic"}


@pytest.mark.parametrize("engine", ["local", "decomposed"])
def test_pipeline_rebuild_reproduces_the_real_sample(lmq, tmp_path, engine):
    """pipeline/rebuild_tasks.py (the Spark tasks, run in process): the same bytes."""
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions
    from tests.helpers.rebuild_reference import build_set

    store, conf, _ = lmq
    build = build_set if engine == "local" else rebuild_build
    build(StoreConfig.load(store, conf), tmp_path / "o", RebuildOptions(tz=dt.timezone.utc))
    assert _tree(tmp_path / "o" / "consumequeue") == _tree(store / "consumequeue")


def test_verify_real_sample_is_clean_and_checks_the_fan_out(lmq):
    store, conf, _ = lmq
    rep = _verify(store, conf)
    assert rep["findings"] == [] and rep["summary"]["errors"] == 0
    rep = _verify(store)  # no broker.conf: checked as enabled, said so
    assert [f["check"] for f in rep["findings"]] == ["lmq.assumed"]


def test_every_reader_agrees_with_expected_json(lmq):
    store, conf, exp = lmq
    for q in exp["consumeQueues"]:
        rows = [
            json.loads(x)
            for x in cli(
                "dump-cq", q["topic"], str(q["queueId"]), "--store", store, "--broker-conf", conf, "--format", "jsonl"
            ).stdout.splitlines()
        ]
        assert [r["cq_offset"] for r in rows] == list(range(q["minOffset"], q["maxOffset"])), q
        assert all(r["status"] == "ok" for r in rows), q
    for s in exp["lmqSamples"]:
        r = cli(
            "dump-cq",
            s["queue"],
            str(s["queueId"]),
            "--store",
            store,
            "--broker-conf",
            conf,
            "--from-offset",
            str(s["offset"]),
            "--limit",
            "1",
            "--messages",
            "--format",
            "jsonl",
        )
        row = json.loads(r.stdout.splitlines()[0])
        assert (row["cq_offset"], row["commitlog_offset"], row["size"], row["tags_code"], row["status"]) == (
            s["offset"],
            s["commitLogOffset"],
            s["size"],
            s["tagsCode"],
            "ok",
        )
        msg = row["message"]
        assert (msg["topic"], msg["queue_id"]) == (s["msgTopic"], s["msgQueueId"])
        assert msg["properties"]["INNER_MULTI_DISPATCH"] == s["INNER_MULTI_DISPATCH"]
        assert msg["properties"]["INNER_MULTI_QUEUE_OFFSET"] == s["INNER_MULTI_QUEUE_OFFSET"]
    st = _json(cli("stats", "--store", store, "--format", "json"))
    assert st["summary"]["messages"] == exp["messageCount"]
    lmq_rows = {r["topic"]: r["messages"] for r in st["rows"] if r.get("multi_dispatch")}
    assert lmq_rows == {"%LMQ%alpha": 130, "%LMQ%beta": 115, "MirrorTopic": 8}
    assert st["summary"]["multi_dispatch_units"] == 253


def test_offset_counters_replay_the_real_store(lmq):
    """``MultiDispatch#wrapMultiDispatch``/``#updateMultiQueueOffset`` replayed over the log
    give every message's INNER_MULTI_QUEUE_OFFSET and the final counters of expected.json."""
    from rmqstore_cli.store.write.lmq import MULTI_DISPATCH, MULTI_QUEUE_OFFSET, OffsetCounters

    store, conf, exp = lmq
    rows = [
        json.loads(x)
        for x in cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl").stdout.splitlines()
    ]
    c = OffsetCounters(enable_lmq=True)
    n = 0
    for m in rows:
        names = m["properties"].get(MULTI_DISPATCH)
        if names:
            assert c.assign(names, m["queue_id"]) == m["properties"][MULTI_QUEUE_OFFSET]
            c.advance(names, m["properties"][MULTI_QUEUE_OFFSET], m["queue_id"])
            n += 1
            assert "WAIT" not in m["properties"]  # removeWaitStorePropertyString
    assert n == exp["multiDispatchMessageCount"]
    assert "{" + ", ".join(f"{k}={v}" for k, v in sorted(c.lmq_table.items())) + "}" == exp["finalLmqCounters"]


def test_verify_finds_damaged_lmq_queues(lmq, tmp_path):
    store, conf, _ = lmq
    s = tmp_path / "s"
    shutil.copytree(store, s)
    alpha = s / "consumequeue" / "%LMQ%alpha" / "0" / "00000000000000000000"
    raw = bytearray(alpha.read_bytes())
    raw[5 * 20 + 12 : 5 * 20 + 20] = (7).to_bytes(8, "big")  # unit 5's tagsCode
    alpha.write_bytes(bytes(raw))
    shutil.rmtree(s / "consumequeue" / "%LMQ%beta")
    rep = _verify(s, conf)
    checks = {f["check"] for f in rep["findings"]}
    assert {"lmq.unit-mismatch", "lmq.missing-unit"} <= checks, checks
    mism = [f for f in rep["findings"] if f["check"] == "lmq.unit-mismatch"]
    assert len(mism) == 1 and "tagsCode 7" in mism[0]["detail"]
    # rebuild puts them back
    out = tmp_path / "out"
    assert cli("rebuild-index", "--store", s, "--broker-conf", conf, "--output", out, "--only", "cq").exit_code == 0
    assert _tree(out / "consumequeue") == _tree(store / "consumequeue")


def test_verify_reports_a_unit_no_message_lists(lmq, tmp_path):
    """Units swapped: each points at a message listing the queue at another offset; a unit
    past the end: the queue's end is not the counter the log implies."""
    store, conf, _ = lmq
    s = tmp_path / "s"
    shutil.copytree(store, s)
    alpha = s / "consumequeue" / "%LMQ%alpha" / "0"
    raw = bytearray((alpha / "00000000000000000000").read_bytes())
    raw[3 * 20 : 4 * 20], raw[4 * 20 : 5 * 20] = raw[4 * 20 : 5 * 20], raw[3 * 20 : 4 * 20]  # units 3 and 4 swapped
    (alpha / "00000000000000000000").write_bytes(bytes(raw))
    second = bytearray((alpha / "00000000000000002000").read_bytes())
    second[30 * 20 : 31 * 20] = raw[0:20]  # unit 130, one past the end, a copy of unit 0
    (alpha / "00000000000000002000").write_bytes(bytes(second))
    rep = _verify(s, conf)
    checks = [f["check"] for f in rep["findings"]]
    assert sorted(checks) == ["cq.unit-target", "lmq.queue-end", "lmq.unit-mismatch", "lmq.unit-mismatch"], checks
    target = next(f for f in rep["findings"] if f["check"] == "cq.unit-target")
    assert "lists %LMQ%alpha at offset 0 of queue 0, not 130" in target["detail"]
    assert all("points at" in f["detail"] for f in rep["findings"] if f["check"] == "lmq.unit-mismatch")


# ------------------------------------------------------------------ independent stores
BLANK_MAGIC = 0xCBD43194  # CommitLog.BLANK_MAGIC_CODE


def _java_hash(s: str) -> int:
    h = 0
    for u in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (31 * h + u) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _pick(i: int, m: dict) -> str | None:
    """Which names a record of the plain sample gets (NOT-type records of some topics)."""
    if m["sys_flag"] & 0xC:
        return None
    if m["topic"] == "%RETRY%cg-sample" and i % 4 == 0:
        return "%LMQ%a"  # 4.9.x fans retry topics out too (5.x would not)
    if m["topic"] not in ("PaymentTopic", "AuditTopic", "Refund.Topic-2"):
        return None
    return "%LMQ%b,Mirror" if i % 5 == 0 else "%LMQ%a,%LMQ%b" if i % 3 == 0 else "%LMQ%a" if i % 4 == 1 else None


def _independent_store(dest: Path, extra=None, index: bool = False) -> tuple[Path, dict]:
    """The plain 4.9.7 sample's records, in order, in one 1 MiB commit-log file, with
    INNER_MULTI_DISPATCH/INNER_MULTI_QUEUE_OFFSET appended to the picked records' properties
    (``extra(i, m)`` may give other raw values), TOTALSIZE and PHYSICALOFFSET recomputed.
    Returns the store and the expected LMQ units: (queue, qid) -> {offset: (phy, size, tags)}."""
    src = fixture_dir("4.9.7")
    exp = json.loads((src / "expected.json").read_text())
    files = {p.name: p.read_bytes() for p in (src / "store" / "commitlog").iterdir()}
    out = bytearray()
    counters: dict[str, int] = {}
    units: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = {}
    for i, m in enumerate(exp["messages"]):
        base = int(m["file"])
        rec = files[m["file"]][m["physical_offset"] - base : m["physical_offset"] - base + m["total_size"]]
        props = m["properties_string"].encode()
        assert rec.endswith(props)
        names = _pick(i, m)
        raw = extra(i, m) if extra else None
        listed = []
        if raw is not None:
            add = raw
        elif names:
            offs = []
            for nm in names.split(","):
                qid = 0 if nm.startswith("%LMQ%") else m["queue_id"]
                key = f"{nm}-{qid}"
                offs.append(counters.get(key, 0))
                counters[key] = offs[-1] + 1
                listed.append((nm, qid, offs[-1]))
            add = f"INNER_MULTI_DISPATCH\x01{names}\x02INNER_MULTI_QUEUE_OFFSET\x01{','.join(map(str, offs))}\x02"
        else:
            add = ""
        new_props = props + (b"\x02" if props and add and not props.endswith(b"\x02") else b"") + add.encode()
        body = rec[: len(rec) - len(props) - 2]
        new = bytearray(body + struct.pack(">h", len(new_props)) + new_props)
        struct.pack_into(">i", new, 0, len(new))
        struct.pack_into(">q", new, 28, len(out))  # PHYSICALOFFSET
        tags = m["properties"].get("TAGS")
        for nm, qid, off in listed:
            units.setdefault((nm, qid), {})[off] = (len(out), len(new), _java_hash(tags) if tags else 0)
        out += new
    size = 1 << 20
    assert len(out) + 8 <= size
    (dest / "commitlog").mkdir(parents=True)
    (dest / "commitlog" / f"{0:020d}").write_bytes(bytes(out) + b"\0" * (size - len(out)))
    (dest / "broker.conf").write_text(LMQ_CONF.format(cl=size, idx=str(index).lower()))
    return dest, units


def _write_units(cq_root: Path, units: dict) -> None:
    """The expected LMQ queue files: 20-byte units at offset × 20, files of 2000 bytes."""
    for (name, qid), by_off in units.items():
        d = cq_root / name / str(qid)
        d.mkdir(parents=True)
        top = max(by_off) + 1
        for start in range(0, top * 20, CQ_FILE):
            buf = bytearray(CQ_FILE)
            for off, (phy, size, tags) in by_off.items():
                if start <= off * 20 < start + CQ_FILE:
                    struct.pack_into(">qiq", buf, off * 20 - start, phy, size, tags)
            (d / f"{start:020d}").write_bytes(bytes(buf))


def test_independent_store_rebuilds_and_verifies(tmp_path):
    store, units = _independent_store(tmp_path / "s")
    assert {k for k in units} >= {("%LMQ%a", 0), ("%LMQ%b", 0)} and any(k[0] == "Mirror" for k in units)
    _write_units(tmp_path / "want", units)
    conf = store / "broker.conf"
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", out)
    assert r.exit_code == 0, r.stderr
    got = {k: v for k, v in _tree(out / "consumequeue").items() if k.startswith(("%LMQ%", "Mirror/"))}
    assert got == _tree(tmp_path / "want")
    rep = _verify(out, conf)
    assert rep["summary"]["errors"] == 0, rep["findings"]
    assert not [f for f in rep["findings"] if f["check"].startswith("lmq.")]


@pytest.mark.slow
def test_independent_store_spark_engine(tmp_path, spark):
    """Spark's rebuild (pipeline/rebuild_tasks.py on local[2]) writes the same LMQ queues."""
    from rmqstore_cli.pipeline import spark as sp
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions

    store, units = _independent_store(tmp_path / "s")
    _write_units(tmp_path / "want", units)
    sp.rebuild_build(
        spark, StoreConfig.load(store, store / "broker.conf"), tmp_path / "o", RebuildOptions(tz=dt.timezone.utc)
    )
    got = {k: v for k, v in _tree(tmp_path / "o" / "consumequeue").items() if k.startswith(("%LMQ%", "Mirror/"))}
    assert got == _tree(tmp_path / "want")


@pytest.mark.parametrize(
    "raw, problem, written",
    [
        ("INNER_MULTI_DISPATCH\x01%LMQ%x,%LMQ%y\x02INNER_MULTI_QUEUE_OFFSET\x010\x02", "queue names but", set()),
        ("INNER_MULTI_DISPATCH\x01%LMQ%x,%LMQ%y\x02INNER_MULTI_QUEUE_OFFSET\x010,zz\x02", "is not a long", {"%LMQ%x"}),
        ("INNER_MULTI_DISPATCH\x01%LMQ%x,a/b\x02INNER_MULTI_QUEUE_OFFSET\x010,0\x02", "contains '/'", {"%LMQ%x"}),
        (
            "INNER_MULTI_DISPATCH\x01..,%LMQ%x\x02INNER_MULTI_QUEUE_OFFSET\x010,0\x02",
            "not a directory name",
            {"%LMQ%x"},
        ),
        (
            "INNER_MULTI_DISPATCH\x01%LMQ%y,%LMQ%x\x02INNER_MULTI_QUEUE_OFFSET\x01-5,0\x02",
            "no consume-queue position",
            {"%LMQ%x"},
        ),
        (
            "INNER_MULTI_DISPATCH\x01%LMQ%y,%LMQ%x\x02INNER_MULTI_QUEUE_OFFSET\x019223372036854775807,0\x02",
            "no consume-queue position",
            {"%LMQ%x"},
        ),
    ],
)
def test_malformed_multi_dispatch_properties(tmp_path, raw, problem, written):
    """``ConsumeQueue#multiDispatchLmqQueue``: lists of different lengths write nothing; an
    offset ``Long#parseLong`` rejects ends the message's units there; a name with '/' is
    refused (a 4.9 broker would join it into a path). A finding each, never a traceback."""
    store, _ = _independent_store(tmp_path / "s", extra=lambda i, m: raw if i == 5 else "")
    conf = store / "broker.conf"
    out = tmp_path / "out"
    r = cli("rebuild-index", "--store", store, "--broker-conf", conf, "--output", out, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert "malformed INNER_MULTI_DISPATCH" in r.stderr and "Traceback" not in r.stderr
    lmq_dirs = {p.name for p in (out / "consumequeue").iterdir() if p.name.startswith("%LMQ%") or "/" in p.name}
    assert lmq_dirs == written
    if "directory" in problem or "/" in problem:
        assert len(json.loads(r.stdout)["refused_topics"]) == 1
    rep = _verify(store, conf)
    bad = [f for f in rep["findings"] if f["check"] == "lmq.malformed"]
    assert len(bad) == 1 and problem in bad[0]["detail"], rep["findings"]


def test_append_re_encodes_as_the_real_4_9_7_store(lmq):
    """``MultiDispatch#wrapMultiDispatch`` at append (store/lmq.MultiDispatchAppender): from
    each multi-dispatch message's properties as the producer sent them (no offsets, WAIT
    present or not), the counters replayed over the log give the stored string exactly:
    offsets in the order of the names, WAIT removed, HashMap order."""
    from types import SimpleNamespace

    from rmqstore_cli.formats.properties import serialize_properties

    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.lmq import MULTI_QUEUE_OFFSET, MultiDispatchAppender

    store, conf, _ = lmq
    rows = [
        json.loads(x)
        for x in cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl").stdout.splitlines()
    ]
    app = MultiDispatchAppender(StoreConfig.load(store, conf), {})
    checked = 0
    for i, m in enumerate(rows):
        props = dict(m["properties"])
        if MULTI_QUEUE_OFFSET in props:
            props.pop(MULTI_QUEUE_OFFSET)
            sent = list(props.items()) + ([("WAIT", "true")] if i % 2 else [])
            spec = SimpleNamespace(
                topic=m["topic"],
                queue_id=m["queue_id"],
                queue_offset=None,
                raw_properties=False,
                properties=serialize_properties(sent, False),
            )
            app.wrap(spec)
            assert spec.properties == m["properties_string"], i
            checked += 1
        app.advance(SimpleNamespace(properties=m["properties_string"], queue_id=m["queue_id"]), m["sys_flag"] & 0xC)
    assert checked == 165


@pytest.mark.slow
def test_generate_lmq_store_rebuilds_and_verifies(tmp_path):
    """generate --lmq-ratio: offsets the store assigns (PREPARED/ROLLBACK not advancing),
    LMQ queues dispatched; verify is clean and rebuild-index writes the same queues."""
    from tests.helpers import SMALL

    s = tmp_path / "g"
    r = cli(
        "generate",
        "--store",
        s,
        "--messages",
        "1500",
        "--lmq-ratio",
        "0.4",
        "--lmq-queues",
        "3",
        "--transaction-ratio",
        "0.3",
        *SMALL,
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    lmq_dirs = sorted(p.name for p in (s / "consumequeue").iterdir() if p.name.startswith("%LMQ%"))
    assert lmq_dirs == ["%LMQ%q0", "%LMQ%q1", "%LMQ%q2"]
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=2000\nmaxHashSlotNum=64\n"
        "maxIndexNum=400\nenableLmq=true\nenableMultiDispatch=true\n"
    )
    rep = _verify(s, conf)
    assert rep["findings"] == [], rep["findings"]
    out = tmp_path / "out"
    assert cli("rebuild-index", "--store", s, "--broker-conf", conf, "--output", out, "--only", "cq").exit_code == 0
    assert _tree(out / "consumequeue") == _tree(s / "consumequeue")
    rows = [json.loads(x) for x in cli("dump-commitlog", "--store", s, "--format", "jsonl").stdout.splitlines()]
    prepared = [m for m in rows if m["sys_flag"] & 0xC == 4 and "INNER_MULTI_DISPATCH" in m["properties"]]
    assert prepared  # they were given offsets that the next message reuses
    listed = {}
    for m in rows:
        if m["sys_flag"] & 0xC in (0, 8) and "INNER_MULTI_DISPATCH" in m["properties"]:
            for n, o in zip(
                m["properties"]["INNER_MULTI_DISPATCH"].split(","),
                m["properties"]["INNER_MULTI_QUEUE_OFFSET"].split(","),
                strict=True,
            ):
                listed.setdefault(n, []).append(int(o))
            assert "WAIT" not in m["properties"]
    assert all(v == list(range(len(v))) for v in listed.values())


def test_fan_out_rules_of_4_9_and_5():
    """``ConsumeQueue#multiDispatchLmqQueue`` (4.9.7) and 5.x ``MultiDispatchUtils``: the
    queue id, ``String#split`` dropping trailing empties, blank properties, the 5.x skips."""
    from rmqstore_cli.store.write.lmq import Target, fan_out

    fo = fan_out("T", 3, "%LMQ%a,Mirror,", "7,2,", enable_lmq=True)
    assert fo.problem is None and fo.targets == [Target("%LMQ%a", 0, 7), Target("Mirror", 3, 2)]
    assert fan_out("T", 3, "%LMQ%a", "7", enable_lmq=False).targets == [Target("%LMQ%a", 3, 7)]
    assert (
        fan_out("T", 3, " ", "1", enable_lmq=True) is None and fan_out("T", 3, "%LMQ%a", None, enable_lmq=True) is None
    )
    assert fan_out("T", 1, "%LMQ%a", "+5", enable_lmq=True).targets == [Target("%LMQ%a", 0, 5)]
    assert fan_out("T", 1, "%LMQ%a", "9223372036854775808", enable_lmq=True).problem == "offset"
    retry = fan_out("%RETRY%g", 0, "%LMQ%a", "1", enable_lmq=True)
    assert retry.targets == [Target("%LMQ%a", 0, 1)]  # 4.9.x: retry topics fan out too
    for topic in ("%RETRY%g", "rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX"):
        assert fan_out(topic, 0, "%LMQ%a", "1", enable_lmq=True, broker5=True) is None
    five = fan_out("T", 0, "a/b,%LMQ%a", "0,4", enable_lmq=True, broker5=True)
    assert five.targets == [Target("%LMQ%a", 0, 4)] and five.problem == "name"


def test_rebuild_one_lmq_queue_and_dry_run(lmq, tmp_path):
    """``--topic %LMQ%beta`` rebuilds that queue alone (its messages are other topics'),
    and ``--dry-run`` counts the LMQ units with the others."""
    store, conf, _ = lmq
    r = cli(
        "rebuild-index",
        "--store",
        store,
        "--broker-conf",
        conf,
        "--output",
        tmp_path / "o",
        "--topic",
        "%LMQ%beta",
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    assert _tree(tmp_path / "o" / "consumequeue") == {
        f"%LMQ%beta/{k}": v for k, v in _tree(store / "consumequeue" / "%LMQ%beta").items()
    }
    d = _json(
        cli(
            "rebuild-index",
            "--store",
            store,
            "--broker-conf",
            conf,
            "--output",
            tmp_path / "d",
            "--dry-run",
            "--format",
            "json",
        )
    )
    assert (d["consume_queues"], d["consume_queue_units"]) == (8, 653)  # 400 own + 130 + 115 + 8 fanned out


def test_lmq_units_of_messages_newer_than_the_checkpoint_are_not_yet_dispatched(lmq, tmp_path):
    """A listed unit missing for a message stored after the checkpoint's logicsMsgTimestamp:
    the broker's reput writes it on start (info, ``lmq.not-dispatched``), not an error."""
    store, conf, _ = lmq
    s = tmp_path / "s"
    shutil.copytree(store, s)
    shutil.rmtree(s / "consumequeue" / "%LMQ%beta")
    cp = bytearray((s / "checkpoint").read_bytes())
    cp[8:16] = (1795510225060).to_bytes(8, "big")  # logicsMsgTimestamp: inside the sample's time range
    (s / "checkpoint").write_bytes(bytes(cp))
    rep = _verify(s, conf)
    lmq_checks = {f["check"] for f in rep["findings"] if f["check"].startswith("lmq.")}
    assert lmq_checks == {"lmq.missing-unit", "lmq.not-dispatched"}, rep["findings"]
