"""The library's jobs beyond reading messages (``Store.stats``, ``consumer_progress``,
``search_offset``, ``message_by_id``, the timer, ``rebuild_index``, ``expire``, ``export``,
``batches``), called as a script would call them. Each answer is held against an
independent one: the command line's JSON output on the same store, or a count made from
``Store.messages``."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rmqstore_cli import (
    ConsumerProgress,
    ExpireAction,
    ExpireReport,
    ExportReport,
    MessageId,
    NotFound,
    OffsetAtTime,
    RebuildReport,
    RefusedError,
    StatsReport,
    StatsRow,
    TimerSlot,
    TimerUnit,
    UsageError,
    open_store,
)
from tests.helpers import SMALL, cli, generate, tree_digest


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    st = generate(
        tmp_path_factory.mktemp("jobs") / "store", "--delay-ratio", "0.1", "--transaction-ratio", "0.1", messages=2000
    )
    config = st / "config"
    config.mkdir(exist_ok=True)
    offsets = '{"offsetTable":{"OrderTopic@cg-orders":{0:3,1:10000,2:0},"NoSuchTopic@cg-x":{0:5},"not-a-key":{0:1}}}'
    (config / "consumerOffset.json").write_text(offsets, encoding="utf-8")
    (config / "delayOffset.json").write_text('{"offsetTable":{2:1}}', encoding="utf-8")
    return st


def jsonl(*args: object, code: tuple[int, ...] = (0,)) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code in code, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


# ---------------------------------------------------------------------- message ids
def test_message_by_id_finds_an_offset_msg_id_and_a_uniq_key(store):
    with open_store(store) as st:
        m = next(iter(st.messages(topic="OrderTopic", limit=1)))
        by_offset = st.message_by_id(m.msg_id)
        by_uniq = st.message_by_id(m.uniq_key.lower())
    assert isinstance(by_offset, MessageId)
    assert by_offset.kind == "offset_msg_id" and by_offset.found and by_offset.host_matches_store
    assert [x.physical_offset for x in by_offset.messages] == [m.physical_offset]
    assert by_uniq.kind == "uniq_key" and by_uniq.store_host is None
    assert [x.physical_offset for x in by_uniq.messages] == [m.physical_offset]
    for got, text in ((by_offset, m.msg_id), (by_uniq, m.uniq_key)):
        want = jsonl("decode-msgid", text, "--store", store, "--now", "2026-12-01T00:00Z")[0]
        with open_store(store) as st:
            got = st.message_by_id(text, now="2026-12-01T00:00Z")
        assert got.as_dict() == want


def test_message_by_id_refuses_what_is_no_id_and_misses_an_unknown_one(store):
    with open_store(store) as st:
        with pytest.raises(UsageError, match="not a message id"):
            st.message_by_id("xyz")
        r = st.message_by_id("0A0000010000000000000000FFFF0000")
    assert not r.found and r.messages == []


# ---------------------------------------------------------------------- queue positions
@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({}, []),
        ({"queue_id": 1}, ["--queue-id", "1"]),
        ({"scan": True}, ["--scan"]),
        ({"broker_version": "4.9"}, ["--broker", "--broker-version", "4.9"]),
        ({"broker_version": "5", "boundary": "upper"}, ["--broker", "--broker-version", "5", "--boundary", "upper"]),
    ],
)
def test_search_offset_is_what_the_command_prints(store, kwargs, args):
    with open_store(store) as st:
        times = sorted(m.store_timestamp for m in st.messages(topic="OrderTopic"))
        t = times[len(times) // 3]
        got = st.search_offset("OrderTopic", t, **kwargs)
    assert got and all(isinstance(r, OffsetAtTime) for r in got)
    assert [r.as_dict() for r in got] == jsonl(
        "search-offset", "--store", store, "-t", "OrderTopic", "--time", t, *args
    )


def test_search_offset_answers_the_first_message_at_or_after_the_time(store):
    with open_store(store) as st:
        stored = [(u.cq_offset, st.message_at(u.commitlog_offset)) for u in st.units("OrderTopic", 0)]
        times = [(off, m.store_timestamp) for off, m in stored if m is not None]
        t = times[len(times) // 2][1]
        (r,) = st.search_offset("OrderTopic", t, queue_id=0)
    assert r.offset == min(off for off, ts in times if ts >= t) and r.store_timestamp == t


def test_search_offset_refuses_an_unknown_topic_and_odd_requests(store):
    with open_store(store) as st:
        with pytest.raises(NotFound):
            st.search_offset("NoSuchTopic", 0)
        with pytest.raises(UsageError):
            st.search_offset("OrderTopic", 0, broker_version="4.9", boundary="upper")
        with pytest.raises(UsageError):
            st.search_offset("OrderTopic", 0, broker_version="5", scan=True)


def test_consumer_progress_is_what_the_command_prints(store):
    with open_store(store) as st:
        rows = st.consumer_progress()
        warnings = list(st.warnings)
        only = st.consumer_progress(group="cg-orders")
    assert rows and all(isinstance(r, ConsumerProgress) for r in rows)
    assert [r.as_dict() for r in rows] == jsonl("consumer-progress", "--store", store)
    assert {r.status for r in rows} >= {"ok", "beyond-max", "no-queue"}
    assert any("not-a-key" in w for w in warnings)
    assert [r.delay_level for r in rows if r.file == "delayOffset.json"] == [2]  # its keys are levels
    assert {r.group for r in only} == {"cg-orders"}


def test_consumer_progress_lag_and_bounds_are_the_queues(store):
    with open_store(store) as st:
        bounds = {(q.topic, q.queue_id): q for q in st.queues()}
        rows = [r for r in st.consumer_progress(topic="OrderTopic")]
    assert rows
    for r in rows:
        q = bounds["OrderTopic", r.queue_id]
        assert (r.min_offset, r.max_offset) == (q.min_offset, q.max_offset)
        assert r.lag == q.max_offset - r.consumer_offset


# ---------------------------------------------------------------------- stats
@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({}, []),
        ({"by": "queue", "topic": "OrderTopic"}, ["--by", "queue", "--topic", "OrderTopic"]),
        ({"by": "file"}, ["--by", "file"]),
        ({"exact": True, "top": 3}, ["--exact", "--top", "3"]),
    ],
)
def test_stats_is_what_the_command_prints(store, kwargs, args):
    with open_store(store) as st:
        rep = st.stats(**kwargs)
    assert isinstance(rep, StatsReport) and rep.rows
    got = rep.as_dict()
    want = json.loads(cli("stats", "--store", store, *args, "--format", "json").stdout)
    assert got == want


def test_stats_counts_are_the_messages_the_store_holds(store):
    """Counted from the commit log, each topic's messages and bytes are those of
    ``Store.messages``; from the consume queues, each queue's are its units'."""
    with open_store(store) as st:
        exact = st.stats(exact=True)
        per_queue = st.stats(by="queue")
        msgs = list(st.messages())
        units = {(q.topic, q.queue_id): list(st.units(q.topic, q.queue_id)) for q in st.queues() if q.kind == "cq"}
    want = Counter(m.topic for m in msgs)
    assert {r.topic: r.messages for r in exact.rows} == dict(want)
    size = Counter()
    for m in msgs:
        size[m.topic] += m.total_size
    assert {r.topic: r.bytes for r in exact.rows} == dict(size)
    assert exact.messages == len(msgs)
    for r in per_queue.rows:
        assert isinstance(r, StatsRow)
        assert r.messages == len(units[r.topic, r.queue_id])


def test_stats_refuses_an_unknown_topic(store):
    with open_store(store) as st, pytest.raises(NotFound):
        st.stats(topic="NoSuchTopic")


# ---------------------------------------------------------------------- the 5.x timer
TIMER_START = "2026-11-20T10:00:00Z"


@pytest.fixture(scope="module")
def timer_store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("jobs-timer") / "store",
        "--broker-version",
        "5",
        "--timer-ratio",
        "0.3",
        "--start",
        TIMER_START,
        messages=600,
    )


def test_timer_slots_units_next_and_summary_are_what_dump_timer_prints(timer_store):
    now = "2026-11-20T10:05:00Z"
    with open_store(timer_store) as st:
        slots = st.timer_slots()
        units = list(st.timer_units())
        nxt = st.timer_next(50, now=now)
        summary = st.timer_summary(now=now)
        one = st.timer_slots(slots[0].time_ms, slots[0].time_ms)
        of_topic = list(st.timer_units(topic=units[0].real_topic))
    assert slots and units and nxt
    assert all(isinstance(s, TimerSlot) for s in slots) and all(isinstance(u, TimerUnit) for u in units)
    assert [s.as_dict() for s in slots] == jsonl("dump-timer", "--store", timer_store)
    assert [u.as_dict() for u in units] == jsonl("dump-timer", "--store", timer_store, "--units")
    assert [n.as_dict() for n in nxt] == jsonl("dump-timer", "--store", timer_store, "--next", 50, "--now", now)
    want = json.loads(cli("dump-timer", "--store", timer_store, "--summary", "--now", now, "--format", "json").stdout)
    assert summary.as_dict() == want
    assert one == [slots[0]]
    assert of_topic and {u.real_topic for u in of_topic} == {units[0].real_topic}
    # every message the generator put on the timer has its unit
    with open_store(timer_store) as st:
        on_timer = {m.physical_offset for m in st.messages(topic="rmq_sys_wheel_timer")}
    assert {u.commitlog_offset for u in units} == on_timer
    assert summary.units == len(units)


def test_a_store_without_timer_files_says_so(store):
    with open_store(store) as st, pytest.raises(NotFound, match="no timer files"):
        st.timer_slots()


# ---------------------------------------------------------------------- columnar batches
@pytest.mark.parametrize("filters", [{}, {"topic": "OrderTopic", "tag": "TagA"}, {"from_offset": 65536, "key": None}])
def test_batches_hold_the_messages_of_messages(store, filters):
    pa = pytest.importorskip("pyarrow")
    with open_store(store) as st:
        want = [m.as_dict() for m in st.messages(**filters)]
        batches = list(st.batches(**filters, body=True))
        bodies = [m.body for m in st.messages(**filters)]
    table = pa.Table.from_batches(batches)
    assert table.num_rows == len(want) > 0
    assert table.schema.field("store_timestamp").type == pa.timestamp("ms", tz="UTC")
    table = table.set_column(
        table.schema.get_field_index("store_timestamp"), "store_timestamp", table["store_timestamp"].cast(pa.int64())
    )
    got = table.to_pylist()
    for g, w, b in zip(got, want, bodies, strict=True):
        for k in ("physical_offset", "topic", "queue_id", "queue_offset", "store_timestamp", "msg_id", "keys", "tags"):
            assert g[k] == w[k], k
        assert dict(g["properties"]) == w["properties"]
        assert g["body"] == b and g["store"] == str(store)


def test_batches_without_pyarrow_is_a_clear_error(store, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with open_store(store) as st, pytest.raises(UsageError, match="pyarrow"):
        next(st.batches())


def test_batches_of_records_decoded_one_by_one(store):
    """A key filter reads record by record (no block): those rows are the same columns."""
    pa = pytest.importorskip("pyarrow")
    with open_store(store) as st:
        key = next(k for m in st.messages(topic="OrderTopic") for k in m.keys)
        want = [m.physical_offset for m in st.messages(key=key)]
        table = pa.Table.from_batches(list(st.batches(key=key)))
    assert table.column("physical_offset").to_pylist() == want and want
    assert table.schema.names[:3] == ["physical_offset", "total_size", "magic"]


# ---------------------------------------------------------------------- expire
NOW = 2_000_000_000_000  # a fixed "now", so ages are exact
HOUR = 3_600_000
SIZES = {"commitlog_file_size": 65536, "cq_file_size": 2000, "index_slots": 64, "index_max": 400}


def aged_copy(src, dest):
    """A copy of ``src`` whose commit-log files were last modified 100, 90, … hours before NOW."""
    import os
    import shutil

    shutil.copytree(src, dest)
    for i, p in enumerate(sorted((dest / "commitlog").iterdir())):
        t = (NOW - (100 - 10 * i) * HOUR) / 1000
        os.utime(p, (t, t))
    return dest


def test_expire_dry_run_deletes_nothing_and_lists_what_the_command_would(store, tmp_path):
    st_dir = aged_copy(store, tmp_path / "store")
    before = tree_digest(st_dir)
    with open_store(st_dir, **SIZES) as st:
        rep = st.expire(72, now=NOW)
    assert isinstance(rep, ExpireReport) and rep.dry_run and rep.completed
    assert tree_digest(st_dir) == before
    r = cli("expire", "--store", st_dir, *SMALL, "--now", NOW, "--reserved-hours", 72, "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert rep.as_dict() == json.loads(r.stdout)
    assert [a.kind for a in rep.actions].count("commitlog") == 3  # 100, 90 and 80 hours old
    assert all(isinstance(a, ExpireAction) for a in rep.actions)


def test_expire_deletes_what_the_dry_run_listed_and_the_command_deletes(store, tmp_path):
    mine, theirs = aged_copy(store, tmp_path / "a" / "store"), aged_copy(store, tmp_path / "b" / "store")
    with open_store(mine, **SIZES) as st:
        planned = [a.file for a in st.expire(72, now=NOW).actions]
        rep = st.expire(72, now=NOW, dry_run=False)
        left = list(st.messages())
    assert [a.file for a in rep.actions] == planned and rep.completed and not rep.dry_run
    assert not any((mine / f).exists() for f in planned)
    r = cli("expire", "--store", theirs, *SMALL, "--now", NOW, "--reserved-hours", 72, "--format", "json")
    assert r.exit_code == 0, r.stderr
    want = json.loads(r.stdout)
    assert [a["file"] for a in want["actions"]] == planned
    assert rep.summary["min_offsets"] == want["min_offsets"] and rep.summary["deleted"] == want["deleted"]
    assert rep.summary["journal"] == str(mine / "rmqstore-expire.jsonl")
    # the store reads on from its new minimum: the library re-mapped it
    assert left and left[0].physical_offset == rep.summary["min_offsets"]["commitlog"]


def test_expire_refuses_what_is_no_share_of_the_disk(store):
    with open_store(store) as st, pytest.raises(UsageError, match="share of the disk"):
        st.expire(72, disk_ratio=85)


# ---------------------------------------------------------------------- rebuild-index
def digests(root, parts=("consumequeue", "index", "checkpoint")) -> dict[str, str]:
    """sha256 of every file below ``root``'s rebuilt parts (names and bytes; not mtimes)."""
    return {k: v[0] for k, v in tree_digest(root).items() if k.split("/")[0] in parts and "rmqstore-backup" not in k}


TIMING = ("seconds", "messages_per_second")


def test_rebuild_index_to_an_output_writes_the_commands_bytes(store, tmp_path):
    before = tree_digest(store)
    with open_store(store, tz="UTC", **SIZES) as st:
        rep = st.rebuild_index(tmp_path / "api")
        dry = st.rebuild_index(tmp_path / "dry", dry_run=True)
    assert isinstance(rep, RebuildReport) and rep.messages and rep.consume_queue_units and rep.index_keys
    assert tree_digest(store) == before, "an output rebuild only reads the store"
    r = cli("rebuild-index", "--store", store, "--output", tmp_path / "cli", "--tz", "UTC", *SMALL, "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert digests(tmp_path / "api") == digests(tmp_path / "cli") and digests(tmp_path / "api")
    want = json.loads(r.stdout)
    got = rep.as_dict()
    for k in (*TIMING, "output", "writes", "commitlog"):
        got.pop(k, None)
        want.pop(k, None)
    assert got == want
    assert dry.dry_run and not (tmp_path / "dry" / "consumequeue").exists()


def test_rebuild_index_on_two_processes_writes_and_reports_what_one_does(store, tmp_path):
    """``jobs=2``: the same tasks on two forked workers; files and report as ``jobs=1``."""
    with open_store(store, tz="UTC", **SIZES) as st:
        one = st.rebuild_index(tmp_path / "one").as_dict()
        two = st.rebuild_index(tmp_path / "two", jobs=2).as_dict()
    assert digests(tmp_path / "two") == digests(tmp_path / "one") and digests(tmp_path / "one")
    for k in (*TIMING, "output", "writes"):
        one.pop(k, None)
        two.pop(k, None)
    assert two == one and one["messages"] > 0


def test_rebuild_index_in_place_is_the_commands_and_reads_on(store, tmp_path):
    import shutil

    mine, theirs = tmp_path / "a" / "store", tmp_path / "b" / "store"
    shutil.copytree(store, mine)
    shutil.copytree(store, theirs)
    with open_store(mine, tz="UTC", **SIZES) as st:
        rep = st.rebuild_index(only="cq", topics=["OrderTopic"])
        queues = [q for q in st.queues() if q.topic == "OrderTopic"]
    r = cli("rebuild-index", "--store", theirs, "--in-place", "--only", "cq", "-t", "OrderTopic", "--tz", "UTC", *SMALL)
    assert r.exit_code == 0, r.stderr
    assert digests(mine) == digests(theirs)
    assert rep.index_keys is None and rep.consume_queue_units
    assert sum(q.max_offset - q.min_offset for q in queues) == rep.consume_queue_units


def test_rebuild_index_refuses_what_does_not_go_together(store, tmp_path):
    with open_store(store) as st:
        with pytest.raises(UsageError):
            st.rebuild_index(tmp_path / "x", only="index", topics=["OrderTopic"])
        with pytest.raises(UsageError):
            st.rebuild_index(tmp_path / "x", no_backup=True)
        with pytest.raises(UsageError):
            st.rebuild_index(only="everything")


# ---------------------------------------------------------------------- export
def test_export_writes_the_rows_of_messages_and_the_commands_dataset(store, tmp_path):
    ds = pytest.importorskip("pyarrow.dataset")
    before = tree_digest(store)
    with open_store(store) as st:
        rep = st.export(tmp_path / "api", body=True)
        want = [(m.physical_offset, m.msg_id, m.body) for m in st.messages()]
        with pytest.raises(UsageError, match="not empty"):
            st.export(tmp_path / "api")
    assert isinstance(rep, ExportReport) and tree_digest(store) == before
    assert rep.rows == len(want) and rep.engine == "local" and rep.stores == 1 and rep.unreadable_ranges == 0
    got = ds.dataset(tmp_path / "api", partitioning="hive").to_table().to_pylist()
    assert sorted((r["physical_offset"], r["msg_id"], r["body"]) for r in got) == sorted(want)
    r = cli("export", "--store", store, "--output", tmp_path / "cli", "--body", "--format", "json")
    assert r.exit_code == 0, r.stderr
    cmd = json.loads(r.stdout)
    assert {k: v for k, v in rep.as_dict().items() if k not in ("seconds", "output")} == {
        k: v for k, v in cmd.items() if k not in ("seconds", "output")
    }
    theirs = ds.dataset(tmp_path / "cli", partitioning="hive").to_table().to_pylist()
    assert without_store(got) == without_store(theirs)


@pytest.mark.parametrize(
    "filters",
    [
        {"topic": "OrderTopic", "tag": "TagA"},
        {"queue_id": 1, "begin": "2026-01-01T00:05:00Z", "end": "2026-01-01T00:20:00Z"},
        {"from_offset": 65536, "to_offset": 200000, "topic": "OrderTopic"},
        {"key": "order-42"},
    ],
)
def test_export_takes_the_filters_of_messages(store, tmp_path, filters):
    ds = pytest.importorskip("pyarrow.dataset")
    with open_store(store) as st:
        rep = st.export(tmp_path / "f", store_name="eu-1", **filters)
        want = [(m.physical_offset, m.store_timestamp, m.msg_id) for m in st.messages(**filters)]
    got = ds.dataset(tmp_path / "f", partitioning="hive").to_table().to_pylist()
    assert rep.rows == len(got) == len(want) > 0
    rows = sorted(got, key=lambda r: r["physical_offset"])
    assert [(r["physical_offset"], round(r["store_timestamp"].timestamp() * 1000), r["msg_id"]) for r in rows] == want
    assert {r["store"] for r in got} == {"eu-1"} and [p.name for p in (tmp_path / "f").iterdir()] == ["store=eu-1"]


def without_store(rows: list[dict]) -> list[dict]:
    """Dataset rows in log order without the ``store`` label (a path as it was given)."""
    return sorted(({k: v for k, v in r.items() if k != "store"} for r in rows), key=lambda r: r["physical_offset"])


# ---------------------------------------------------------------------- a live broker
def test_a_live_broker_refuses_the_writing_jobs_and_not_a_dry_run(store, tmp_path):
    import shutil
    import subprocess
    import sys

    st_dir = aged_copy(store, tmp_path / "store")
    (st_dir / "lock").touch()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,time\n"
            f"fd=os.open({str(st_dir / 'lock')!r},os.O_RDWR)\n"
            "fcntl.lockf(fd,fcntl.LOCK_EX,1,0)\nprint('locked',flush=True)\ntime.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = tree_digest(st_dir)
        with open_store(st_dir, **SIZES) as st:
            with pytest.raises(RefusedError, match="live broker"):
                st.expire(72, now=NOW, dry_run=False)
            with pytest.raises(RefusedError, match="live broker"):
                st.rebuild_index()
            assert st.expire(72, now=NOW).actions  # a dry run only reads
        assert tree_digest(st_dir) == before
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(st_dir)
