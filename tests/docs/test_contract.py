"""The scripting contract (docs/conventions.md, "Scripting"): every record a command prints in --format jsonl
or json validates against its schema in schemas/; stdout carries only data and stderr only
diagnostics; documented exit codes; no colour when not a terminal nor under NO_COLOR; the same
input gives the same bytes twice."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter

import jsonschema
import pytest

from tests.helpers import fixture_dir, run
from tests.helpers.contract import SCHEMAS, USED, on_pty, validate

pytestmark = pytest.mark.slow  # every command in a subprocess, every schema


def test_schemas_are_valid_json_schemas():
    for p in SCHEMAS.glob("*.json"):
        jsonschema.Draft202012Validator.check_schema(json.loads(p.read_text(encoding="utf-8")))


def test_schemas_readme_lists_every_schema():
    text = (SCHEMAS / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in SCHEMAS.glob("*.json") if f"({p.name})" not in text]
    assert not missing, f"schemas/README.md does not list {missing}"


def jsonl(*args, code: int = 0) -> list[dict]:
    """Run with --format jsonl: exit code as documented, stdout nothing but JSON lines, stderr
    nothing but 'rmqstore: ...' diagnostics."""
    r = run(*args, "--format", "jsonl")
    assert r.returncode == code, (args, r.returncode, r.stderr.decode())
    out = r.stdout.decode("utf-8")
    assert out == "" or out.endswith("\n")
    _diagnostics_only(r.stderr)
    return [json.loads(ln) for ln in out.splitlines()]


def _diagnostics_only(err: bytes) -> None:
    for ln in err.decode("utf-8").splitlines():
        assert ln.startswith("rmqstore: "), f"stderr line is not a diagnostic: {ln!r}"


def _check_all(records: list[dict], kind_of) -> None:
    assert records
    for rec in records:
        validate(rec, kind_of(rec))


def _json_equals_jsonl(*args) -> None:
    """--format json is the JSON Lines records as one array."""
    a = run(*args, "--format", "json")
    b = run(*args, "--format", "jsonl")
    assert a.returncode == b.returncode
    assert json.loads(a.stdout) == [json.loads(x) for x in b.stdout.decode().splitlines()]


@pytest.fixture(scope="module")
def sample(small_store_master) -> dict:
    """A message with keys, its ids, and a topic/queue from the small store."""
    msgs = jsonl("dump-commitlog", "--store", small_store_master)
    uses = Counter(x["uniq_key"] for x in msgs)  # a transaction's records share their UNIQ_KEY
    m = next(x for x in msgs if x["keys"] and x["uniq_key"] and x["topic"] == "OrderTopic" and uses[x["uniq_key"]] == 1)
    return {"store": small_store_master, "msg": m, "n": len(msgs)}


def test_dump_commitlog_records(sample):
    s = sample["store"]
    recs = jsonl("dump-commitlog", "--store", s, "--show-blank", "--body", "base64")
    _check_all(recs, lambda r: "commitlog-blank" if r["magic"] == "blank" else "message")
    assert {"commitlog-blank", "message"} <= USED  # small files: BLANK records end them
    assert any(":" in r.get("born_host", "") and r["born_host"].startswith("[") for r in recs)  # IPv6 in the sample
    _check_all(
        jsonl("dump-commitlog", "--store", s, "--body", "text", "--no-properties", "--limit", "50"), lambda r: "message"
    )
    _json_equals_jsonl("dump-commitlog", "--store", s, "--limit", "30")


def test_dump_commitlog_decompressed_records(tmp_path):
    s = tmp_path / "z"
    jsonl("generate", "--store", s, "--messages", "60", "--compress-ratio", "0.5")
    recs = jsonl("dump-commitlog", "--store", s, "--body", "base64", "--decompress")
    _check_all(recs, lambda r: "message")
    assert any(r.get("compression") == "zlib" and "body_decompressed_size" in r for r in recs)


def test_dump_commitlog_trace_records(tmp_path):
    s = tmp_path / "t"
    jsonl("generate", "--store", s, "--messages", "60", "--trace-messages", "12", "--transaction-ratio", "0.5")
    recs = jsonl("dump-commitlog", "--store", s, "--trace")
    _check_all(recs, lambda r: "trace-record")
    assert {r["type"] for r in recs} == {"Pub", "SubBefore", "SubAfter", "EndTransaction"}
    _json_equals_jsonl("dump-commitlog", "--store", s, "--trace")


def test_dump_cq_records(sample):
    s, m = sample["store"], sample["msg"]
    _check_all(jsonl("dump-cq", m["topic"], str(m["queue_id"]), "--store", s), lambda r: "cq-unit")
    _check_all(jsonl("dump-cq", m["topic"], str(m["queue_id"]), "--store", s, "--no-resolve"), lambda r: "cq-unit")
    f = sorted((s / "consumequeue" / m["topic"] / str(m["queue_id"])).iterdir())[0]
    _check_all(jsonl("dump-cq", "--file", f), lambda r: "cq-unit")
    _check_all(jsonl("dump-cq", "--summary", "--store", s), lambda r: "cq-summary")
    _json_equals_jsonl("dump-cq", m["topic"], str(m["queue_id"]), "--store", s)


def test_dump_cq_batch_and_compaction_records(sample_tarball):
    """BatchCQ queues (5.3.3 bcq sample) and compaction queues (compaction sample): bcq-unit."""
    b, c = sample_tarball("bcq") / "store", sample_tarball("compaction") / "store"
    _check_all(jsonl("dump-cq", "BulkTopic", "0", "--store", b), lambda r: "bcq-unit")
    _check_all(jsonl("dump-cq", "BulkTopic", "0", "--store", b, "--no-resolve"), lambda r: "bcq-unit")
    _check_all(jsonl("dump-cq", "DeviceStateTopic", "1", "--compaction", "--store", c), lambda r: "bcq-unit")
    _check_all(
        jsonl("dump-cq", "--file", b / "batchconsumequeue" / "BulkTopic" / "0" / f"{0:020d}"), lambda r: "bcq-unit"
    )
    _check_all(jsonl("dump-cq", "--summary", "--store", c), lambda r: "cq-summary")
    _check_all(jsonl("dump-commitlog", "--compaction-log", "DeviceStateTopic/1", "--store", c), lambda r: "message")
    _json_equals_jsonl("dump-cq", "BulkTopic", "0", "--store", b)


def test_search_offset_records(sample):
    s, m = sample["store"], sample["msg"]
    for extra in (
        (),
        ("--scan",),
        ("--broker", "--broker-version", "4.9"),
        ("--broker", "--broker-version", "5"),
        ("--broker", "--broker-version", "5", "--boundary", "upper"),
    ):
        _check_all(
            jsonl("search-offset", "--store", s, "--topic", m["topic"], "--time", str(m["store_timestamp"]), *extra),
            lambda r: "search-offset",
        )
    recs = jsonl("search-offset", "--store", s, "--topic", m["topic"], "--time", "+1d")
    _check_all(recs, lambda r: "search-offset")
    assert all(r["offset"] == r["max_offset"] and r["store_timestamp"] is None for r in recs)
    _json_equals_jsonl("search-offset", "--store", s, "--topic", m["topic"], "--time", str(m["store_timestamp"]))


def test_dump_cq_messages_records(sample):
    s, m = sample["store"], sample["msg"]
    recs = jsonl("dump-cq", m["topic"], str(m["queue_id"]), "--store", s, "--messages", "--limit", "50")
    _check_all(recs, lambda r: "cq-unit")
    assert any(r["message"] == {**m} for r in recs if r["cq_offset"] == m["queue_offset"])


def test_consumer_progress_records(small_store_master, tmp_path):
    import shutil

    s = tmp_path / "store"
    shutil.copytree(small_store_master, s)
    (s / "config").mkdir(exist_ok=True)
    (s / "config" / "consumerOffset.json").write_text(  # fastjson: integer keys unquoted
        '{"offsetTable":{"OrderTopic@g1":{0:5,1:0,2:99999999},"Gone@g1":{0:3}}}', encoding="utf-8"
    )
    (s / "config" / "delayOffset.json").write_text('{"offsetTable":{1:0,3:2}}', encoding="utf-8")
    recs = jsonl("consumer-progress", "--store", s)
    _check_all(recs, lambda r: "consumer-progress")
    assert {"ok", "beyond-max", "no-queue"} <= {r["status"] for r in recs}
    assert any("delay_level" in r for r in recs)
    _json_equals_jsonl("consumer-progress", "--store", s)
    assert [r["lag"] for r in recs if r["status"] == "no-queue"] == [None]
    groups = jsonl("consumer-progress", "--store", s, "--by", "group")
    _check_all(groups, lambda r: "consumer-progress-group")
    _json_equals_jsonl("consumer-progress", "--store", s, "--by", "group")


def test_diff_records(small_store_master, tmp_path):
    import shutil

    b = tmp_path / "b"
    shutil.copytree(small_store_master, b)
    (b / "config").mkdir(exist_ok=True)
    (b / "config" / "consumerOffset.json").write_text('{"offsetTable":{"OrderTopic@g1":{0:5}}}', encoding="utf-8")
    a = tmp_path / "a"
    shutil.copytree(small_store_master, a)
    (a / "config").mkdir(exist_ok=True)
    (a / "config" / "consumerOffset.json").write_text('{"offsetTable":{"OrderTopic@g1":{0:9}}}', encoding="utf-8")
    queue = sorted((b / "consumequeue" / "OrderTopic").iterdir())[0]
    first = sorted(queue.iterdir())[0]
    data = bytearray(first.read_bytes())
    data[12:20] = bytes(8)  # the first unit's tags code: a unit changed in place
    first.write_bytes(bytes(data))
    shutil.rmtree(b / "consumequeue" / "OrderTopic" / sorted(os.listdir(b / "consumequeue" / "OrderTopic"))[-1])
    last = sorted((b / "commitlog").iterdir())[-1]
    with open(last, "r+b") as f:  # the log's tail gone: a divergence
        f.truncate(last.stat().st_size // 2)
    recs = jsonl("diff", a, b, "--messages", code=1)
    _check_all(recs, lambda r: "diff-summary" if r["kind"] == "summary" else "diff-row")
    assert {"file", "divergence", "queue", "unit", "message", "offset"} <= {r["kind"] for r in recs}
    r = run("diff", a, b, "--format", "json")
    assert r.returncode == 1
    validate(json.loads(r.stdout), "diff-summary")


def test_pop_records(tmp_path):
    s = tmp_path / "pop"
    r = run("generate", "--store", s, "--messages", "100", "--broker-version", "5", "--pop-messages", "40")
    assert r.returncode == 0, r.stderr
    now = ("--now", str(1_767_225_600_000 + 3_600_000 + 90_000))
    for by, kind in (("message", "pop-message"), ("group", "pop-group"), ("revive-queue", "pop-revive-queue")):
        recs = jsonl("pop", "--store", s, "--by", by, *now)
        _check_all(recs[:-1], lambda r, kind=kind: kind)
        validate(recs[-1], "pop-summary")
    r = run("pop", "--store", s, "--format", "json", *now)
    validate(json.loads(r.stdout), "pop-report")


def test_index_lookup_records(sample):
    s, m = sample["store"], sample["msg"]
    recs = jsonl("index-lookup", m["keys"][0], "--store", s, "--show-collisions", "--limit", "1000000")
    _check_all(recs, lambda r: "index-hit")
    assert any(r["physical_offset"] == m["physical_offset"] and r["message"] == m for r in recs)
    _check_all(jsonl("index-lookup", m["uniq_key"], "--store", s, "--topic", m["topic"]), lambda r: "index-hit")
    _json_equals_jsonl("index-lookup", m["keys"][0], "--store", s)


def test_decode_msgid_records(sample):
    s, m = sample["store"], sample["msg"]
    ids = (m["msg_id"], m["uniq_key"], "00000000000000000000000000000000")
    recs = jsonl("decode-msgid", *ids, "--now", "2026-01-02")
    _check_all(recs, lambda r: "msgid")
    assert [r["kind"] for r in recs] == ["offset_msg_id", "uniq_key", "ambiguous"]
    recs = jsonl("decode-msgid", *ids[:2], "--store", s, "--body", "hex", "--now", "2026-01-02")
    _check_all(recs, lambda r: "msgid")
    assert all(r["found"] and r["messages"][0]["physical_offset"] == m["physical_offset"] for r in recs)
    beyond = m["msg_id"][:16] + "0000000FFFFFFF00"  # this store's host, an offset past its end
    bad = jsonl("decode-msgid", beyond, "--store", s, code=1)  # not found: still printed, exit 1
    assert bad[0]["found"] is False and bad[0]["messages"] == []
    _check_all(bad, lambda r: "msgid")


def test_verify_records(small_store):
    with open(small_store / "commitlog" / "00000000000000000000", "r+b") as f:  # damage one body byte
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0xFF]))
    recs = jsonl("verify", "--store", small_store, code=1)
    _check_all(recs, lambda r: "verify-summary" if "summary" in r else "verify-finding")
    assert "summary" in recs[-1] and all("summary" not in r for r in recs[:-1])
    assert any(r.get("severity") == "error" for r in recs[:-1])
    r = run("verify", "--store", small_store, "--format", "json")
    assert r.returncode == 1
    validate(json.loads(r.stdout), "verify-report")
    _check_all(jsonl("verify", "--list-checks"), lambda r: "verify-check")


def test_verify_records_of_several_stores(small_store, small_store_master):
    with open(small_store / "commitlog" / "00000000000000000000", "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0xFF]))
    recs = jsonl("verify", "--store", small_store_master, "--store", small_store, code=1)
    _check_all(recs, lambda r: "verify-summary" if "summary" in r else "verify-finding")
    assert [s["store"] for s in recs[-1]["summary"]["stores"]] == [str(small_store_master), str(small_store)]
    assert {r["store"] for r in recs[:-1]} == {str(small_store)}


@pytest.mark.parametrize("several", [False, True], ids=["one store", "two stores"])
def test_verify_records_are_the_same_on_either_engine(small_store, small_store_master, several):
    """#31: on one store --engine spark nested its summary as {"summary": {"stores": [...]}}
    and tagged every finding with store, unlike the local engine ({"summary": {"store",
    "messages", ...}}): a cron script broke when the engine changed. Both engines now print
    what the schema says for the number of stores, and the same records."""
    pytest.importorskip("pyspark")
    with open(small_store / "commitlog" / "00000000000000000000", "r+b") as f:  # one error finding
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0xFF]))
    stores = ["--store", small_store] + (["--store", small_store_master] if several else [])
    local = jsonl("verify", *stores, code=1)
    spark = jsonl("verify", *stores, "--engine", "spark", "--spark-master", "local[2]", code=1)
    for recs in (local, spark):
        _check_all(recs, lambda r: "verify-summary" if "summary" in r else "verify-finding")
        summary = recs[-1]["summary"]
        if several:
            assert [s["store"] for s in summary["stores"]] == [str(small_store), str(small_store_master)]
            assert all(r["store"] == str(small_store) for r in recs[:-1])
        else:
            assert "stores" not in summary and summary["store"] == str(small_store) and summary["errors"] >= 1
            assert all("store" not in r for r in recs[:-1])
    assert sorted(map(json.dumps, spark[:-1])) == sorted(map(json.dumps, local[:-1]))
    assert spark[-1] == local[-1]
    one = run("verify", *stores, "--engine", "spark", "--spark-master", "local[2]", "--format", "json")
    validate(json.loads(one.stdout), "verify-report")
    assert json.loads(one.stdout)["summary"] == local[-1]["summary"]


def test_expire_records(small_store):
    args = ("expire", "--store", small_store, "--reserved-hours", "0", "--now", "2030-01-01")
    recs = jsonl(*args, "--dry-run")
    _check_all(recs, lambda r: "expire-summary" if r["kind"] == "summary" else "expire-action")
    assert recs[-1]["kind"] == "summary" and all(r["kind"] != "summary" for r in recs[:-1])
    assert {r["kind"] for r in recs[:-1]} == {"commitlog", "consumequeue", "index"}  # every kind of action
    r = run(*args, "--dry-run", "--format", "json")
    validate(json.loads(r.stdout), "expire-summary")
    recs = jsonl(*args)
    assert recs[-1]["files"] == len(recs) - 1 > 0
    _check_all(recs, lambda r: "expire-summary" if r["kind"] == "summary" else "expire-action")


def test_summaries_of_writing_commands(small_store, tmp_path):
    [g] = jsonl("generate", "--store", tmp_path / "g", "--messages", "50")
    validate(g, "generate-summary")
    [rb] = jsonl("rebuild-index", "--store", small_store, "--output", tmp_path / "rebuilt")
    validate(rb, "rebuild-summary")
    [rb] = jsonl("rebuild-index", "--store", small_store, "--in-place", "--dry-run")
    validate(rb, "rebuild-summary")
    [rc] = jsonl("rebuild-index", "--store", small_store, "--recover")
    validate(rc, "rebuild-recover")
    last = sorted((small_store / "commitlog").iterdir())[-1]
    os.truncate(last, last.stat().st_size - 100)  # a copy that lost its end
    for extra in (("--dry-run",), ()):
        [rp] = jsonl("repair", "--store", small_store, "--commitlog-file-size", "65536", "--pad", last, *extra)
        validate(rp, "repair-action")
    assert rp["done"] and rp["action"] == "pad"
    pytest.importorskip("pyarrow", reason="export needs pyarrow (the spark extra)")
    [ex] = jsonl("export", "--store", small_store, "--output", tmp_path / "pq")
    validate(ex, "export-summary")


def test_stats_records(small_store_master):
    s = small_store_master
    for args in ((), ("--by", "queue", "--exact"), ("--by", "file")):
        recs = jsonl("stats", "--store", s, *args)
        _check_all(recs[:-1], lambda r: "stats-file" if "component" in r else "stats-row")
        validate(recs[-1], "stats-summary")
        r = run("stats", "--store", s, *args, "--format", "json")
        validate(json.loads(r.stdout), "stats-report")
    assert {"stats-row", "stats-file"} <= USED


def test_stats_traffic_records(small_store_master):
    """stats --by minute|hour: interval lines and the summary, jsonl and json."""
    for by in ("minute", "hour"):
        recs = jsonl("stats", "--store", small_store_master, "--by", by)
        _check_all(recs[:-1], lambda r: "stats-interval")
        _check_all(recs[-1:], lambda r: "stats-traffic-summary")
        r = run("stats", "--store", small_store_master, "--by", by, "--format", "json")
        _check_all([json.loads(r.stdout)], lambda r: "stats-traffic")


def test_dump_timer_records(sample_tarball):
    """dump-timer on the real 5.3.3 timer sample: slots, units, next and the summary."""
    store = sample_tarball("timer") / "store"
    _check_all(jsonl("dump-timer", "--store", store), lambda r: "timer-slot")
    _check_all(jsonl("dump-timer", "--store", store, "--units"), lambda r: "timer-unit")
    _check_all(jsonl("dump-timer", "--store", store, "--next", "5", "--now", "1795510300000"), lambda r: "timer-next")
    _check_all(jsonl("dump-timer", "--store", store, "--summary", "--now", "1795510300000"), lambda r: "timer-summary")
    _json_equals_jsonl("dump-timer", "--store", store, "--units")
    late = ("--overdue", "--now", "1795600000000")
    _check_all(jsonl("dump-timer", "--store", store, *late), lambda r: "timer-overdue")
    _check_all(jsonl("dump-timer", "--store", store, *late, "--summary"), lambda r: "timer-overdue-summary")
    _json_equals_jsonl("dump-timer", "--store", store, *late)
    delay = (fixture_dir("5.3.3") / "store", "--overdue", "--now", "2100-01-01T00:00Z")  # delay levels only
    _check_all(jsonl("dump-timer", "--store", *delay), lambda r: "timer-overdue")
    _check_all(jsonl("dump-timer", "--store", *delay, "--summary"), lambda r: "timer-overdue-summary")


def test_every_schema_is_exercised():
    """Runs last in this file (pytest keeps file order): a schema no command produced is stale."""
    unused = {p.stem for p in SCHEMAS.glob("*.json")} - USED
    if len(USED) < 5:
        pytest.skip("run the whole file to check this")
    assert not unused, f"schemas no test output matched: {sorted(unused)}"


# ----------------------------------------------------------------- exit codes, streams


def test_exit_codes_and_one_line_errors(small_store_master, tmp_path):
    cases = [
        (1, ("dump-commitlog", "--store", small_store_master, "--topic", "NoSuchTopic")),
        (1, ("index-lookup", "no-such-key-anywhere", "--store", small_store_master)),
        (3, ("dump-commitlog", "--store", tmp_path / "missing")),
        (3, ("verify", "--store", tmp_path)),
    ]
    for code, args in cases:
        r = run(*args, "--format", "jsonl")
        assert r.returncode == code, (args, r.stderr)
        assert r.stdout == b"", args  # nothing half-printed on stdout
        lines = r.stderr.decode().splitlines()
        # exit 1 is a negative answer: one plain line, no "error:" (issue 16); else one error line
        assert len([ln for ln in lines if ln.startswith("rmqstore: error: ")]) == (code != 1), lines
        assert code != 1 or len([ln for ln in lines if not ln.startswith("rmqstore: note: ")]) == 1, lines
        assert "Traceback" not in r.stderr.decode()
    r = run("dump-commitlog", "--format", "xml")
    assert r.returncode == 2 and r.stdout == b"" and b"'xml' is not one of" in r.stderr


def test_refused_while_a_broker_holds_the_lock(small_store):
    """Exit 4: the broker's lock file is held (FileChannel#tryLock = fcntl F_SETLK)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time\n"
            f"fd=os.open({str(small_store / 'lock')!r}, os.O_RDWR|os.O_CREAT)\n"
            "fcntl.lockf(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"held\n"
        for args in (
            ("expire", "--store", small_store, "--reserved-hours", "0"),
            ("rebuild-index", "--store", small_store, "--in-place"),
        ):
            r = run(*args, "--format", "jsonl")
            assert r.returncode == 4 and r.stdout == b"", (args, r.stderr)
            assert r.stderr.decode().startswith("rmqstore: error: ")
    finally:
        holder.kill()
        holder.wait()


# ----------------------------------------------------------------- colour, ordering

_SGR = re.compile(rb"\x1b\[([0-9;]*)m")


def _colour_codes(out: bytes) -> set[str]:
    """SGR parameters that set a colour (30-49, 90-107); bold/reset are not colour."""
    codes = set()
    for params in _SGR.findall(out):
        for p in params.decode().split(";"):
            if p.isdigit() and (30 <= int(p) <= 49 or 90 <= int(p) <= 107):
                codes.add(p)
    return codes


def test_no_escape_sequences_when_not_a_terminal(small_store_master, tmp_path):
    for args in (
        ("dump-commitlog", "--limit", "20"),
        ("dump-cq", "--summary"),
        ("verify",),
        ("index-lookup", "order-1"),
        ("rebuild-index", "--output", tmp_path / "out"),
        ("expire", "--dry-run", "--reserved-hours", "0"),
    ):
        r = run(*args, "--store", small_store_master, env={"TERM": "xterm-256color", "FORCE_COLOR": ""})
        assert r.returncode in (0, 1)
        assert b"\x1b" not in r.stdout and b"\x1b" not in r.stderr, args


def test_no_colour_under_no_color_on_a_terminal(small_store_master):
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    # RMQSTORE_PROGRESS_DELAY=0: verify's bar drawn at once (else only after 2 s)
    env.update(TERM="xterm-256color", COLUMNS="160", NO_COLOR="1", RMQSTORE_PROGRESS_DELAY="0")
    for args in (("dump-cq", "--summary"), ("dump-commitlog", "--limit", "5"), ("verify",)):
        out = on_pty([*args, "--store", small_store_master], env)
        assert b"\n" in out and not _colour_codes(out), (args, out[:300])
    # the control: on a terminal without NO_COLOR (or with it empty, which no-color.org says to
    # ignore), verify's progress bar (stderr) is coloured
    del env["NO_COLOR"]
    assert _colour_codes(on_pty(["verify", "--store", small_store_master], env))
    assert _colour_codes(on_pty(["verify", "--store", small_store_master], dict(env, NO_COLOR="")))


def test_same_input_same_bytes(small_store_master, sample):
    s, m = small_store_master, sample["msg"]
    for args, fmts in (
        (("dump-commitlog", "--show-blank"), ("jsonl",)),
        (("dump-cq", "--summary"), ("jsonl", "table")),
        (("dump-cq", m["topic"], "0"), ("jsonl",)),
        (("index-lookup", m["keys"][0], "--show-collisions"), ("jsonl", "table")),
        (("decode-msgid", m["msg_id"], m["uniq_key"], "--now", "2026-01-02"), ("jsonl", "table")),
        (("verify",), ("jsonl",)),
        (("expire", "--dry-run", "--reserved-hours", "0", "--now", "2030-01-01"), ("jsonl", "table")),
    ):
        for fmt in fmts:
            a = run(*args, "--store", s, "--format", fmt)
            b = run(*args, "--store", s, "--format", fmt)
            assert a.returncode == b.returncode and a.stdout == b.stdout and a.stdout, (args, fmt)
