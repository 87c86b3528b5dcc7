"""The public library (``rmqstore_cli.open_store`` and what it returns), called as a script
would call it. Each answer is held against an independent one: the command line's JSON
output, the engine's own readers, or the real brokers' expected answers."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

import rmqstore_cli
from rmqstore_cli import Finding, StoreError, UsageError, open_store
from tests.helpers import cli, generate, tree_digest


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("api") / "store", "--delay-ratio", "0.1", "--transaction-ratio", "0.1", messages=2500
    )


def host(java: str) -> str:
    """A Java ``InetSocketAddress`` text as DESIGN.md writes hosts (IPv6 compressed)."""
    import ipaddress

    addr, _, port = java.rpartition(":")
    if addr.startswith("["):
        return f"[{ipaddress.IPv6Address(addr[1:-1]).compressed}]:{port}"
    return java


def jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code in (0, 1), r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_every_public_name_imports_and_nothing_else_is_listed():
    for name in rmqstore_cli.__all__:
        assert getattr(rmqstore_cli, name) is not None
    with pytest.raises(AttributeError):
        _ = rmqstore_cli.no_such_name


def test_importing_the_package_loads_no_engine():
    """``import rmqstore_cli`` (which every command does first) stays light: the API's names
    load on first use."""
    code = "import sys, rmqstore_cli; print(sorted(m for m in sys.modules if m.startswith(('numpy', 'rmqstore_cli.'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "filters, args",
    [
        ({}, []),
        ({"topic": "OrderTopic"}, ["--topic", "OrderTopic"]),
        ({"topic": "OrderTopic", "queue_id": 2}, ["--topic", "OrderTopic", "--queue-id", "2"]),
        ({"tag": "TagA"}, ["--tag", "TagA"]),
        ({"from_offset": 65536, "to_offset": 200000}, ["--from-offset", "65536", "--to-offset", "200000"]),
    ],
)
def test_messages_are_what_dump_commitlog_prints(store, filters, args):
    with open_store(store) as st:
        got = [m.as_dict() for m in st.messages(**filters)]
    assert got == jsonl("dump-commitlog", "--store", store, *args)
    assert got, "a filter that matches nothing proves little"


def test_time_window_takes_epoch_ms_datetimes_and_strings(store):
    with open_store(store) as st:
        times = [m.store_timestamp for m in st.messages(topic="OrderTopic")]
        lo, hi = times[len(times) // 4], times[len(times) // 2]
        by_ms = list(st.messages(topic="OrderTopic", begin=lo, end=hi))
        aware = dt.datetime.fromtimestamp(lo / 1000, dt.timezone.utc)
        by_dt = list(st.messages("OrderTopic", aware, dt.datetime.fromtimestamp(hi / 1000, dt.timezone.utc)))
        by_str = list(st.messages("OrderTopic", str(lo), str(hi)))
    expected = [t for t in times if lo <= t <= hi]
    assert [m.store_timestamp for m in by_ms] == expected
    assert by_dt == by_ms == by_str


def test_key_and_uniq_key_filters_find_the_message_they_name(store):
    with open_store(store) as st:
        first = next(st.messages(topic="OrderTopic"))
        by_key = list(st.messages(key=first.keys[0]))
        by_uniq = list(st.messages(uniq_key=first.uniq_key.lower()))
    assert first in by_key and all(first.keys[0] in m.keys for m in by_key)
    assert by_uniq == [first]


def test_limit_and_a_reversed_window(store):
    with open_store(store) as st:
        assert len(list(st.messages(limit=7))) == 7
        with pytest.raises(UsageError):
            list(st.messages(begin=2000, end=1000))
        with pytest.raises(UsageError):
            list(st.messages(from_offset=10, to_offset=5))


def test_message_at_reads_one_record_and_says_none_elsewhere(store):
    with open_store(store) as st:
        m = next(st.messages(topic="OrderTopic"))
        assert st.message_at(m.physical_offset) == m
        assert st.message_at(m.physical_offset + 1) is None


def test_queues_and_units_match_the_messages(store):
    with open_store(store) as st:
        queues = st.queues()
        msgs = list(st.messages())
        q = next(q for q in queues if q.topic == "OrderTopic")
        units = list(st.units(q.topic, q.queue_id))
    # CommitLogDispatcherBuildConsumeQueue: a PREPARED or ROLLBACK record gets no unit
    msgs = [m for m in msgs if m.sys_flag & 0xC in (0x0, 0x8)]
    per_queue: dict = {}
    for m in msgs:
        per_queue[(m.topic, m.queue_id)] = per_queue.get((m.topic, m.queue_id), 0) + 1
    assert {(q.topic, q.queue_id): q.max_offset for q in queues if q.topic in ("OrderTopic", "AuditTopic")} == {
        k: v for k, v in per_queue.items() if k[0] in ("OrderTopic", "AuditTopic")
    }
    offsets = {m.physical_offset for m in msgs if (m.topic, m.queue_id) == (q.topic, q.queue_id)}
    assert [u.cq_offset for u in units] == list(range(q.max_offset))
    assert {u.commitlog_offset for u in units} == offsets


def test_lookup_is_what_index_lookup_prints(store):
    with open_store(store) as st:
        key = next(st.messages(topic="OrderTopic")).keys[0]
        hits = st.lookup(key)
    printed = jsonl("index-lookup", "--store", store, key)
    assert [h.as_dict() for h in hits] == [{k: v for k, v in d.items()} for d in printed]
    assert all(key in (h.message.keys + [h.message.uniq_key]) for h in hits) and hits


def test_verify_report_is_what_the_command_prints(store, tmp_path):
    with open_store(store) as st:
        report = st.verify()
    assert report.ok and report.findings == [] and report.broker_starts
    lines = jsonl("verify", "--store", store)
    summary = lines[-1]["summary"]
    assert {k: report.summary[k] for k in ("messages", "bytes", "files", "errors")} == {
        k: summary[k] for k in ("messages", "bytes", "files", "errors")
    }


def test_verify_of_a_damaged_store_gives_the_findings_as_objects(store, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(store, bad)
    cq = sorted((bad / "consumequeue" / "OrderTopic" / "0").iterdir())[0]
    data = bytearray(cq.read_bytes())
    data[0:8] = (123456789).to_bytes(8, "big")  # the first unit now points into another record
    cq.write_bytes(bytes(data))
    with open_store(bad) as st:
        report = st.verify()
    printed = jsonl("verify", "--store", bad)[:-1]
    assert not report.ok and report.errors
    assert [f.as_dict() for f in report.findings] == printed
    assert all(isinstance(f, Finding) and f.file for f in report.findings)


@pytest.mark.parametrize("damage", ["cq", "body"])
def test_verify_on_two_processes_reports_what_one_does(store, tmp_path, damage):
    """jobs=2 runs verify's tasks on forked workers (pipeline/local.py): the same summary,
    verdict and findings (compared as sets: tasks meet them in another order)."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(store, bad)
    if damage == "cq":
        cq = sorted((bad / "consumequeue" / "OrderTopic" / "0").iterdir())[0]
        data = bytearray(cq.read_bytes())
        data[0:8] = (123456789).to_bytes(8, "big")
        cq.write_bytes(bytes(data))
    else:
        log = sorted((bad / "commitlog").iterdir())[1]
        data = bytearray(log.read_bytes())
        data[300] ^= 0xFF  # inside the first record's body or properties
        log.write_bytes(bytes(data))
    with open_store(bad) as st:
        one, two = st.verify(), st.verify(jobs=2)
    assert not one.ok and two.ok == one.ok and two.summary == one.summary

    def key(f):
        return json.dumps(f.as_dict(), sort_keys=True)

    assert sorted(map(key, two.findings)) == sorted(map(key, one.findings)) and one.findings


def test_a_read_changes_nothing(store):
    before = tree_digest(store)
    with open_store(store) as st:
        list(st.messages())
        st.queues()
        st.verify()
    assert tree_digest(store) == before


def test_not_a_store_is_a_store_error(tmp_path):
    with pytest.raises(StoreError) as e:
        open_store(tmp_path / "nothing")
    assert "no such store directory" in str(e.value)


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_the_real_brokers_answers_through_the_library(version):
    """Messages, queue bounds and units, and key look-ups against what the real broker wrote
    and answered (expected.json), not against rmqstore's own output."""
    from tests.helpers import fixture_dir

    d = fixture_dir(version)
    expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    with open_store(d / "store", d / "broker.conf") as st:
        msgs = list(st.messages())
        queues = {(q.topic, q.queue_id): q for q in st.queues()}
        units = {k: [[u.cq_offset, u.commitlog_offset, u.size, u.tags_code] for u in st.units(*k)] for k in queues}
        looked_up = [
            sorted(
                h.physical_offset
                for h in st.lookup(q["key"], q["topic"], q["begin"], q["end"], max_hits=0, broker_window=True)
            )
            for q in expected["queries"]
        ]
        meant = [
            sorted(h.physical_offset for h in st.lookup(q["key"], q["topic"], q["begin"], q["end"], max_hits=0))
            for q in expected["queries"]
        ]
    fields = (
        "physical_offset",
        "total_size",
        "magic",
        "queue_id",
        "queue_offset",
        "store_timestamp",
        "topic",
        "properties",
        "tags",
        "keys",
        "uniq_key",
        "msg_id",
        "body_size",
        "file",
    )
    assert [{k: getattr(m, k) for k in fields} for m in msgs] == [
        {k: e[k] for k in fields} for e in expected["messages"]
    ]
    # Java prints IPv6 hosts uncompressed ([0:0:0:0:0:0:0:1]); DESIGN.md's form is compressed
    assert [(m.born_host, m.store_host) for m in msgs] == [
        (host(e["born_host"]), host(e["store_host"])) for e in expected["messages"]
    ]
    on_disk = [cq for cq in expected["consume_queues"].values() if cq["exists_on_disk"]]  # fixtures README 6
    assert len(queues) == len(on_disk)
    for cq in on_disk:
        q = queues[(cq["topic"], cq["queue_id"])]
        assert (q.min_offset, q.max_offset) == (cq["min_offset"], cq["max_offset"])
        assert units[(cq["topic"], cq["queue_id"])] == cq["units"]
    assert looked_up == [sorted(q["true_offsets"]) for q in expected["queries"]]
    # what a person means: every message of the topic with the key stored in the window, but
    # ROLLBACK records, which IndexService#buildIndex does not index
    assert meant == [
        sorted(
            m.physical_offset
            for m in msgs
            if m.topic == q["topic"]
            and q["begin"] <= m.store_timestamp <= q["end"]
            and (q["key"] in m.keys or q["key"] == m.uniq_key)
            and m.sys_flag & 0xC != 0xC
        )
        for q in expected["queries"]
    ]


def test_verify_says_when_the_broker_would_not_start(store, tmp_path):
    """A torn consumerOffset.json whose .bak is torn too: ConfigManager#loadBak fails, the
    broker does not start, and the report is not ok (as verify's exit code 1)."""
    import shutil

    bad = tmp_path / "torn"
    shutil.copytree(store, bad)
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        (bad / "config" / name).write_text('{"offsetTable":{"a@b":{0:1', encoding="utf-8")
    with open_store(bad) as st:
        report = st.verify()
    assert not report.ok and not report.broker_starts
    assert "config.load-fails" in {f.check for f in report.errors}
    assert report.findings == [Finding.of(d) for d in jsonl("verify", "--store", bad)[:-1]]
