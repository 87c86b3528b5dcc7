"""One smoke test per command, in the fast tier (plain ``pytest``): each command run once on a
real broker's store (tests/fixtures/) with an answer from that broker's expected.json, or on
a small generated store. The exhaustive tests of each command are its own module's, many
marked ``slow``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import cli, fixture_dir, writable_copy


def _run(command: str, *args, code: int = 0) -> str:
    r = cli(command, *map(str, args))
    assert r.exit_code == code, (command, r.stderr)
    return r.stdout


def _sample(version: str = "4.9.7") -> tuple[list, dict]:
    d = fixture_dir(version)
    return ["--store", d / "store", "--broker-conf", d / "broker.conf"], json.loads((d / "expected.json").read_text())


def _jsonl(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


def test_generate_writes_a_store_verify_finds_sound(tmp_path):
    summary = json.loads(_run("generate", "--store", tmp_path / "s", "--messages", "200", "--format", "json"))
    assert summary["messages"] >= 200 and summary["consume_queue_units"] > 0 and summary["index_keys"] > 0
    assert json.loads(_run("verify", "--store", tmp_path / "s", "--format", "json"))["summary"]["errors"] == 0


def test_dump_commitlog_gives_the_brokers_records():
    store, want = _sample("5.3.3")
    got = _jsonl(_run("dump-commitlog", *store, "--format", "jsonl"))
    assert [(m["physical_offset"], m["msg_id"]) for m in got] == [
        (m["physical_offset"], m["msg_id"]) for m in want["messages"]
    ]


def test_dump_cq_summary_gives_the_brokers_queue_bounds():
    store, want = _sample()
    got = {
        f"{q['topic']}/{q['queue_id']}": (q["min_offset"], q["max_offset"])
        for q in _jsonl(_run("dump-cq", "--summary", *store, "--format", "jsonl"))
    }
    on_disk = {k: (q["min_offset"], q["max_offset"]) for k, q in want["consume_queues"].items() if q["exists_on_disk"]}
    assert got == on_disk


def test_dump_timer_summary_is_the_brokers_checkpoint(sample_tarball):
    s = sample_tarball("timer")
    want = json.loads((s / "expected.json").read_text())
    got = json.loads(
        _run(
            "dump-timer",
            "--summary",
            "--store",
            s / "store",
            "--broker-conf",
            s / "broker.conf",
            "--now",
            "1795510300000",
            "--format",
            "json",
        )
    )
    assert got["checkpoint"]["lastTimerLogFlushPos"] == want["timerCheckpoint"]["lastTimerLogFlushPos"]
    assert got["wheel"]["slotsTotal"] == want["timerWheel"]["slotsTotal"]


def test_search_offset_finds_the_first_unit_at_a_stored_time():
    store, want = _sample()
    units = want["consume_queues"]["AuditTopic/0"]["units"]
    times = {m["physical_offset"]: m["store_timestamp"] for m in want["messages"]}
    cq_offset, phy = units[40][0], units[40][1]
    first = min(u[0] for u in units if times[u[1]] == times[phy])
    [row] = _jsonl(_run("search-offset", *store, "--topic", "AuditTopic", "--time", times[phy], "--format", "jsonl"))
    assert row["offset"] == first <= cq_offset


def test_consumer_progress_reads_the_offsets_file(tmp_path):
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    (store / "config").mkdir()
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{"AuditTopic@g":{0:100}}}')
    [row] = _jsonl(_run("consumer-progress", "--store", store, "--broker-conf", d / "broker.conf", "--format", "jsonl"))
    assert (row["group"], row["consumer_offset"], row["lag"], row["status"]) == ("g", 100, 8, "ok")


def test_transactions_pairs_the_brokers_half_and_op_records():
    store, want = _sample()
    out = _jsonl(_run("transactions", *store, "--format", "jsonl", "--state", "rolled-back"))
    ops = {m["physical_offset"] for m in want["messages"] if m["topic"] == "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
    half = [r for r in out[:-1] if r["kind"] == "half"]
    assert half and all(r["op_offset"] in ops and r["end_offset"] is None for r in half)


def test_pop_reads_back_the_pops_generate_wrote(tmp_path):
    _run("generate", "--store", tmp_path / "s", "--messages", "50", "--broker-version", "5", "--pop-messages", "20")
    out = _jsonl(_run("pop", "--store", tmp_path / "s", "--format", "jsonl"))
    summary = out[-1]["summary"]
    assert len(out[:-1]) == summary["popped"] == 20
    assert sum(summary[s] for s in ("acked", "revived", "invisible", "overdue")) == 20 and summary["acked"] > 0


def test_stats_counts_the_brokers_queue_units():
    store, want = _sample()
    rows = json.loads(_run("stats", *store, "--format", "json"))["rows"]
    units = sum(len(q["units"]) for k, q in want["consume_queues"].items() if k.startswith("PaymentTopic/"))
    assert [r["messages"] for r in rows if r["topic"] == "PaymentTopic"] == [units]


def test_index_lookup_gives_the_true_hits_of_a_brokers_query():
    store, want = _sample()
    q = next(q for q in want["queries"] if q["key"] == "batch-Y" and q["topic"] == "PaymentTopic")
    got = _jsonl(
        _run(
            "index-lookup",
            q["key"],
            *store,
            "--topic",
            q["topic"],
            "--begin",
            q["begin"],
            "--end",
            q["end"],
            "--broker-window",
            "--limit",
            "1000000",
            "--format",
            "jsonl",
        )
    )
    assert len(q["true_offsets"]) == 5
    assert [h["physical_offset"] for h in got] == q["true_offsets"]


def test_decode_msgid_finds_the_record_of_an_offset_msgid():
    store, want = _sample()
    m = want["messages"][123]
    [row] = _jsonl(_run("decode-msgid", m["msg_id"], *store, "--format", "jsonl"))
    assert row["found"] and row["physical_offset"] == m["physical_offset"]


def test_expire_dry_run_lists_and_deletes_nothing(tmp_path):
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    s = json.loads(
        _run(
            "expire",
            "--store",
            store,
            "--broker-conf",
            d / "broker.conf",
            "--dry-run",
            "--reserved-hours",
            "0",
            "--format",
            "json",
        )
    )
    assert s["dry_run"] and s["deleted"]["commitlog"] == len(before) - 1  # the newest file stays
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == before


def test_verify_finds_the_real_brokers_store_sound():
    store, want = _sample("5.3.3")
    s = json.loads(_run("verify", *store, "--format", "json"))["summary"]
    assert s["errors"] == 0 and s["messages"] == len(want["messages"])


def test_rebuild_index_writes_the_brokers_consume_queues(tmp_path):
    d = fixture_dir("4.9.7")
    _run(
        "rebuild-index",
        "--store",
        d / "store",
        "--broker-conf",
        d / "broker.conf",
        "--output",
        tmp_path / "out",
        "--format",
        "json",
    )
    for f in (d / "store" / "consumequeue").rglob("*"):
        if f.is_file():
            assert (
                tmp_path / "out" / "consumequeue" / f.relative_to(d / "store" / "consumequeue")
            ).read_bytes() == f.read_bytes(), f


def test_export_writes_a_row_per_record(tmp_path):
    pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
    store, want = _sample()
    s = json.loads(_run("export", *store, "--output", tmp_path / "out", "--format", "json"))
    assert s["rows"] == len(want["messages"]) and s["unreadable_ranges"] == 0
    shutil.rmtree(tmp_path / "out")


def test_repair_pads_a_torn_copy_of_the_brokers_store_back_to_what_it_loads(tmp_path):
    """A commit-log file of the 4.9.7 store cut inside a record (a torn copy): repair --pad
    gives it its size back, a BLANK at its last good record, and every good message stays."""
    d = fixture_dir("4.9.7")
    store = writable_copy(d / "store", tmp_path / "store")
    first = sorted((store / "commitlog").iterdir())[0]
    before = [
        m
        for m in _jsonl(
            _run("dump-commitlog", "--store", store, "--broker-conf", d / "broker.conf", "--format", "jsonl")
        )
        if m["file"] == first.name
    ]
    cut = before[-2]["physical_offset"] + 10  # inside the second-last record of the file
    first.write_bytes(first.read_bytes()[:cut])
    record = json.loads(
        _run("repair", "--store", store, "--broker-conf", d / "broker.conf", "--pad", first, "--format", "json")
    )
    assert record["done"] and record["records"] == len(before) - 2 and record["blank"] == "written"
    after = _jsonl(_run("dump-commitlog", "--store", store, "--broker-conf", d / "broker.conf", "--format", "jsonl"))
    assert [m for m in after if m["file"] == first.name] == before[:-2]
    # the broker starts; what still points at the two torn records (their queue units and index
    # entries, the queue offsets they leave out) is what verify reports, nothing else
    v = json.loads(_run("verify", "--store", store, "--broker-conf", d / "broker.conf", "--format", "json", code=1))
    assert v["summary"]["broker_start"]["starts"]
    errors = [f for f in v["findings"] if f["severity"] == "error"]
    assert {f["check"] for f in errors} == {"cq.unit-target", "index.entry-target", "commitlog.queue-offset"}
    lost = {m["physical_offset"] for m in before[-2:]}
    assert all(f["physical_offset"] in lost for f in errors if f["check"] != "commitlog.queue-offset")


def test_diff_finds_where_a_slave_copy_of_the_brokers_log_ends(tmp_path):
    """The 5.3.3 store against a copy whose log lost its last record (zeroed, as a
    slave that stopped following): the logs part there, and only A has it."""
    d = fixture_dir("5.3.3")
    slave = writable_copy(d / "store", tmp_path / "slave")
    want = json.loads((d / "expected.json").read_text())["messages"]
    gone = max(want, key=lambda m: m["physical_offset"])
    last = max(
        (p for p in (slave / "commitlog").iterdir() if int(p.name) <= gone["physical_offset"]), key=lambda p: p.name
    )
    at = gone["physical_offset"] - int(last.name)
    with open(last, "r+b") as f:
        f.seek(at)
        f.write(bytes(last.stat().st_size - at))
    conf = ("--broker-conf", d / "broker.conf")
    assert _jsonl(_run("diff", d / "store", writable_copy(d / "store", tmp_path / "same"), *conf, "--format", "jsonl"))[
        0
    ]["same"]
    rows = _jsonl(_run("diff", d / "store", slave, *conf, "--format", "jsonl", code=1))
    [div] = [r for r in rows if r["kind"] == "divergence"]
    assert (div["offset"], div["a"]["msg_id"], div["b"], div["past_b"]) == (
        gone["physical_offset"],
        gone["msg_id"],
        None,
        0,
    )


def test_every_command_has_its_smoke_test():
    """A new command gets a smoke test here (each test above runs its command with _run)."""
    from rmqstore_cli.app import COMMANDS

    smoked = set(re.findall(r'_run\(\s*"([a-z-]+)"', Path(__file__).read_text(encoding="utf-8")))
    assert smoked == {name for name, _, _ in COMMANDS}
