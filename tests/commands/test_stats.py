"""stats: messages and bytes per topic, queue and file, and the disk by component; counted
from the consume queues (default) or the commit log (--exact), checked against numbers
derived independently: the generator's own dump (dump-commitlog), and the real-broker
fixtures' expected.json (what the broker's store classes answered)."""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import SMALL, cli, fixture_dir, generate, generate_plain, run, tree_digest

TX_MASK, PREPARED, ROLLBACK = 0xC, 0x4, 0xC


def stats(store: Path, *args: str, code: int = 0) -> tuple[list[dict], dict]:
    """(rows, summary) of ``stats --format jsonl``."""
    r = cli("stats", "--store", store, *args, "--format", "jsonl")
    assert r.exit_code == code, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert "summary" in lines[-1]
    return lines[:-1], lines[-1]["summary"]


def dump(store: Path) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def expected_rows(records: list[dict], by_queue: bool = False) -> dict:
    """key -> (messages, bytes, first, last, not in a CQ) from dumped records."""
    out: dict = defaultdict(lambda: [0, 0, None, None, 0])
    for m in records:
        k = (m["topic"], m["queue_id"]) if by_queue else m["topic"]
        e = out[k]
        e[0] += 1
        e[1] += m["total_size"]
        ts = m["store_timestamp"]
        e[2] = ts if e[2] is None else min(e[2], ts)
        e[3] = ts if e[3] is None else max(e[3], ts)
        e[4] += m["sys_flag"] & TX_MASK in (PREPARED, ROLLBACK)
    return {k: tuple(v) for k, v in out.items()}


def got_rows(rows: list[dict], by_queue: bool = False, exact: bool = False) -> dict:
    return {
        ((r["topic"], r["queue_id"]) if by_queue else r["topic"]): (
            r["messages"],
            r["bytes"],
            r["first_store_timestamp"],
            r["last_store_timestamp"],
            r["not_in_cq"] if exact else 0,
        )
        for r in rows
    }


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """Every record in a consume queue: no transactions, no delays."""
    return generate_plain(
        tmp_path_factory.mktemp("plain") / "store", "--body-size", "10-900", topics=5, queues=3, messages=1500
    )


# ------------------------------------------------------------------ generated stores


def test_default_and_exact_agree_when_every_record_is_in_a_consume_queue(plain):
    want = expected_rows(dump(plain))
    rows, summary = stats(plain)
    assert summary["method"] == "consumequeue" and summary["not_in_cq"] is None
    assert got_rows(rows) == want
    xrows, xsummary = stats(plain, "--exact")
    assert xsummary["method"] == "commitlog" and xsummary["not_in_cq"] == {}
    assert got_rows(xrows, exact=True) == want
    assert [r["topic"] for r in rows] == [r["topic"] for r in xrows]
    assert summary["messages"] == xsummary["messages"] == 1500


def test_by_queue_matches_the_dump_and_rows_are_biggest_first(plain):
    want = expected_rows(dump(plain), by_queue=True)
    rows, summary = stats(plain, "--by", "queue")
    assert got_rows(rows, by_queue=True) == want
    assert summary["rows"] == summary["shown"] == 15
    sizes = [r["bytes"] for r in rows]
    assert sizes == sorted(sizes, reverse=True)
    commitlog = sum(p.stat().st_size for p in (plain / "commitlog").iterdir())
    assert summary["commitlog_bytes"] == commitlog
    for r in rows:
        assert r["share"] == round(r["bytes"] / summary["bytes"], 6)
        assert r["cq_bytes"] == sum(
            p.stat().st_size for p in (plain / "consumequeue" / r["topic"] / str(r["queue_id"])).iterdir()
        )


def _shares(rows: list[dict]) -> float:
    return sum(r["share"] for r in rows if r["share"] is not None)


@pytest.mark.parametrize("by", ["topic", "queue"])
def test_shares_of_a_small_store_on_big_sparse_files_add_up_to_the_whole(tmp_path, by):
    """The share is of the message bytes counted, not of the files' size: a few KiB in a
    1 GiB commit-log file are all of the messages, not 0.0 % of the file."""
    store = generate(tmp_path / "s", "--topics", "2", "--commitlog-file-size", str(1 << 30), messages=40, small=False)
    for exact in ([], ["--exact"]):
        rows, summary = stats(store, "--by", by, *exact)
        assert summary["commitlog_bytes"] == 1 << 30 and summary["bytes"] < 1 << 20
        assert all(r["share"] > 0.01 for r in rows if r["messages"] > 1), rows
        assert _shares(rows) == pytest.approx(1, abs=1e-5)
        assert all(r["share"] == round(r["bytes"] / summary["bytes"], 6) for r in rows)


@pytest.fixture(scope="module")
def lmq_store(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("lmq") / "store", "--lmq-ratio", "0.5", "--topics", "3", messages=400)


@pytest.mark.parametrize("by", ["topic", "queue"])
def test_lmq_units_are_not_counted_twice_in_the_shares(lmq_store, by):
    """A multi-dispatch queue's units point at records another topic's row counts: its share
    is null and the others add up to 100 %, as the summary's bytes count each record once."""
    rows, summary = stats(lmq_store, "--by", by)
    lmq = [r for r in rows if r.get("multi_dispatch")]
    assert lmq and all(r["share"] is None for r in lmq)
    assert _shares(rows) == pytest.approx(1, abs=1e-5)
    assert summary["bytes"] == sum(r["bytes"] for r in rows if not r.get("multi_dispatch"))
    assert sum(r["bytes"] for r in rows) > summary["bytes"]  # the LMQ rows' bytes are others' too
    table = cli("stats", "--store", lmq_store, "--by", by)
    shown = [line.split() for line in table.stdout.splitlines() if line.startswith("%LMQ%")]
    assert shown and all("lmq" in cells for cells in shown)


def test_top_and_topic(plain):
    rows, _ = stats(plain, "--by", "queue")
    top, summary = stats(plain, "--by", "queue", "--top", "4")
    assert top == rows[:4] and (summary["rows"], summary["shown"]) == (15, 4)
    topic = rows[-1]["topic"]
    only, summary = stats(plain, "--by", "queue", "--topic", topic)
    drop = {"share"}  # with --topic, the share is of that topic's bytes
    assert [{k: v for k, v in r.items() if k not in drop} for r in only] == [
        {k: v for k, v in r.items() if k not in drop} for r in rows if r["topic"] == topic
    ] and len(only) == 3
    assert _shares(only) == pytest.approx(1, abs=1e-5)
    assert summary["messages"] == sum(r["messages"] for r in only)
    one, _ = stats(plain, "--topic", topic, "--exact")
    assert [(r["topic"], r["messages"]) for r in one] == [(topic, sum(r["messages"] for r in only))]


def test_unknown_topic_is_a_negative_answer(plain):
    r = run("stats", "--store", plain, "--topic", "NoSuchTopic", "--format", "jsonl")
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.decode().startswith("rmqstore: no topic 'NoSuchTopic'")


def test_exact_counts_prepared_and_rollback_records_the_consume_queues_miss(small_store_master):
    records = dump(small_store_master)
    want = expected_rows(records)
    prepared = sum(1 for m in records if m["sys_flag"] & TX_MASK == PREPARED)
    rollback = sum(1 for m in records if m["sys_flag"] & TX_MASK == ROLLBACK)
    assert prepared and rollback
    xrows, xsummary = stats(small_store_master, "--exact")
    assert got_rows(xrows, exact=True) == want
    assert xsummary["not_in_cq"] == {"prepared": prepared, "rollback": rollback}
    assert xsummary["messages"] == len(records)
    rows, summary = stats(small_store_master)
    dispatched = [m for m in records if m["sys_flag"] & TX_MASK not in (PREPARED, ROLLBACK)]
    assert {k: v[:2] for k, v in got_rows(rows).items()} == {k: v[:2] for k, v in expected_rows(dispatched).items()}
    assert summary["messages"] == len(records) - prepared - rollback


def test_by_file(small_store_master):
    s = small_store_master
    records = dump(s)
    rows, summary = stats(s, "--by", "file", "--exact")
    by = defaultdict(list)
    for r in rows:
        by[r["component"]].append(r)
    assert sorted(r["file"] for r in by["commitlog"]) == sorted(
        f"commitlog/{p.name}" for p in (s / "commitlog").iterdir()
    )
    per_file = defaultdict(list)
    for m in records:
        per_file[m["file"]].append(m)
    for r in by["commitlog"]:
        ms = per_file[Path(r["file"]).name]
        assert r["entries"] == len(ms)
        if ms:
            assert r["first_store_timestamp"] == min(m["store_timestamp"] for m in ms)
            assert r["last_store_timestamp"] == max(m["store_timestamp"] for m in ms)
            end = max(m["physical_offset"] + m["total_size"] for m in ms)
            assert r["fill"] == round((end - int(Path(r["file"]).name)) / 65536, 6)
    cq_files = sorted(str(p.relative_to(s)) for p in (s / "consumequeue").rglob("0000*"))
    assert sorted(r["file"] for r in by["consumequeue"]) == cq_files
    units = sum(r["entries"] for r in by["consumequeue"])
    not_in = sum(summary["not_in_cq"].values())
    assert units == len(records) - not_in
    for r in by["consumequeue"]:
        assert r["topic"] == Path(r["file"]).parts[1] and r["queue_id"] == int(Path(r["file"]).parts[2])
        assert 0 <= r["fill"] <= 1
    gen = json.loads(cli("dump-cq", "--summary", "--store", s, "--format", "json").stdout)
    assert units == sum(q["max_offset"] - q["min_offset"] for q in gen)
    assert sorted(r["file"] for r in by["index"]) == sorted(f"index/{p.name}" for p in (s / "index").iterdir())
    assert all(r["entries"] > 0 and r["first_store_timestamp"] <= r["last_store_timestamp"] for r in by["index"])
    default, _ = stats(s, "--by", "file")
    assert {r["file"]: r for r in default if r["component"] != "commitlog"} == {
        r["file"]: r for r in rows if r["component"] != "commitlog"
    }
    assert sum(r["entries"] for r in default if r["component"] == "commitlog") == units


def test_by_file_with_a_topic(small_store_master):
    s = small_store_master
    records = [m for m in dump(s) if m["topic"] == "OrderTopic"]
    in_cq = [m for m in records if m["sys_flag"] & TX_MASK not in (PREPARED, ROLLBACK)]
    for args, want in ((), in_cq), (("--exact",), records):
        rows, summary = stats(s, "--by", "file", "--topic", "OrderTopic", *args)
        assert {r["component"] for r in rows} == {"commitlog", "consumequeue"}
        assert all(r["topic"] == "OrderTopic" for r in rows if r["component"] == "consumequeue")
        assert sum(r["entries"] for r in rows if r["component"] == "commitlog") == len(want) == summary["messages"]
        per_file = defaultdict(int)
        for m in want:
            per_file[f"commitlog/{m['file']}"] += 1
        assert {r["file"]: r["entries"] for r in rows if r["component"] == "commitlog" and r["entries"]} == per_file


def test_components_account_for_every_entry_and_name_unknown_ones(small_store):
    (small_store / "heapdump").mkdir()
    (small_store / "heapdump" / "java.hprof").write_bytes(b"x" * 5000)
    os.mkfifo(small_store / "a-fifo")
    rows, summary = stats(small_store)
    comps = {c["path"]: c for c in summary["components"]}
    assert set(comps) == {p.name for p in small_store.iterdir()}
    assert comps["heapdump"] == {
        "component": "other",
        "path": "heapdump",
        "files": 1,
        "bytes": 5000,
        "disk_bytes": comps["heapdump"]["disk_bytes"],
        "known": False,
    }
    assert comps["a-fifo"]["known"] is False and comps["lock"]["known"] and comps["checkpoint"]["known"]
    for name in ("commitlog", "consumequeue", "index", "config"):
        assert comps[name]["component"] == name
        files = [p for p in (small_store / name).rglob("*") if p.is_file()]
        assert comps[name]["files"] == len(files) and comps[name]["bytes"] == sum(p.stat().st_size for p in files)
    assert summary["total_bytes"] == sum(c["bytes"] for c in summary["components"])
    r = cli("stats", "--store", small_store)
    assert r.exit_code == 0 and "unknown: no broker writes it" in r.stdout and "heapdump" in r.stdout


def test_json_is_jsonl_rows_and_summary(plain):
    rows, summary = stats(plain, "--by", "queue", "--top", "3")
    r = cli("stats", "--store", plain, "--by", "queue", "--top", "3", "--format", "json")
    assert json.loads(r.stdout) == {"rows": rows, "summary": summary}


def test_table_says_which_way_it_counted(plain):
    r = cli("stats", "--store", plain, "--tz", "UTC")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert [x for x in lines if x.startswith("counted from")][0].split(None, 2)[2].startswith("the consume queues")
    assert "2026-01-01" in r.stdout and "component" in r.stdout
    r = cli("stats", "--store", plain, "--exact", "--by", "file", "--top", "2")
    assert r.exit_code == 0 and "counted from  the commit log (--exact)" in r.stdout.splitlines()


def test_reads_only(small_store):
    before = tree_digest(small_store)
    for args in ((), ("--exact", "--by", "file"), ("--by", "queue")):
        stats(small_store, *args)
    assert tree_digest(small_store) == before


# ------------------------------------------------------------------ real-broker fixtures


def _fixture_expected(expected: dict) -> tuple[dict, dict]:
    """Per queue (count, bytes, store times of the first and last unit's message) of the
    consume queues' live units, and every record by topic."""
    ts = {m["physical_offset"]: m["store_timestamp"] for m in expected["messages"]}
    cq = {}
    for q in expected["consume_queues"].values():
        if q["exists_on_disk"] and q["max_offset"] > q["min_offset"]:
            live = [u for u in q["units"] if q["min_offset"] <= u[0] < q["max_offset"]]
            cq[q["topic"], q["queue_id"]] = (len(live), sum(u[2] for u in live), ts[live[0][1]], ts[live[-1][1]])
    return cq, expected_rows(expected["messages"])


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_real_broker_stores(version):
    d = fixture_dir(version)
    store, conf = d / "store", d / "broker.conf"
    expected = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    want_cq, want_exact = _fixture_expected(expected)
    rows, summary = stats(store, "--broker-conf", conf, "--by", "queue")
    assert {
        (r["topic"], r["queue_id"]): (r["messages"], r["bytes"], r["first_store_timestamp"], r["last_store_timestamp"])
        for r in rows
    } == want_cq
    xrows, xsummary = stats(store, "--broker-conf", conf, "--exact")
    assert got_rows(xrows, exact=True) == want_exact
    r = cli("dump-commitlog", "--store", store, "--broker-conf", conf, "--format", "jsonl")
    assert expected_rows([json.loads(x) for x in r.stdout.splitlines()]) == want_exact
    prepared = sum(1 for m in expected["messages"] if m["sys_flag"] & TX_MASK == PREPARED)
    rollback = sum(1 for m in expected["messages"] if m["sys_flag"] & TX_MASK == ROLLBACK)
    assert xsummary["not_in_cq"] == {"prepared": prepared, "rollback": rollback}
    assert summary["messages"] == xsummary["messages"] - prepared - rollback
    frows, _ = stats(store, "--broker-conf", conf, "--by", "file", "--exact")
    idx = {r["file"]: r for r in frows if r["component"] == "index"}
    assert {
        f"index/{h['name']}": (h["indexCount"] - 1, h["beginTimestamp"], h["endTimestamp"])
        for h in expected["index_files"]
    } == {k: (r["entries"], r["first_store_timestamp"], r["last_store_timestamp"]) for k, r in idx.items()}
    cl = [r for r in frows if r["component"] == "commitlog"]
    assert sorted(r["file"] for r in cl) == [
        f"commitlog/{f['name'] if isinstance(f, dict) else f}" for f in expected["commitlog_files"]
    ]
    assert sum(r["entries"] for r in cl) == len(expected["messages"])


# ------------------------------------------------------------------ bad input


@pytest.mark.slow
def test_bad_input_is_one_line(small_store, tmp_path):
    from tests.helpers.hostile import one_line

    s = small_store
    cq = sorted((s / "consumequeue" / "OrderTopic" / "0").iterdir())[0]
    with open(cq, "r+b") as f:  # a torn copy: a CQ file cut mid-unit
        f.truncate(1990)
    one_line(run("stats", "--store", s, *SMALL[:4]), 3, "1990 bytes", "--allow-odd-size")
    r = run("stats", "--store", s, *SMALL[:4], "--allow-odd-size", "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    cq.unlink()
    os.mkfifo(cq)
    one_line(run("stats", "--store", s, *SMALL[:4]), 3, "a FIFO", cq.name)
    cq.unlink()
    (cq.parent / "not-a-cq-file").write_bytes(b"junk")
    r = run("stats", "--store", s, *SMALL[:4], "--format", "jsonl")
    assert r.returncode == 0 and b"not-a-cq-file: not a consume-queue file name" in r.stderr
    (s / "consumequeue" / "OrderTopic" / "queue-x").mkdir()
    (s / "consumequeue" / "OrderTopic" / "\u00b2").mkdir()  # isdigit() but not int(): was a traceback
    (s / "consumequeue" / "stray.txt").write_bytes(b"x")
    (s / "commitlog" / "commitlog.bak").write_bytes(b"x")
    for args in ((), ("--exact",)):
        r = run("stats", "--store", s, *SMALL[:4], "--format", "jsonl", *args)
        notes = json.loads(r.stdout.splitlines()[-1])["summary"]["notes"]
        assert r.returncode == 0 and len(notes) == 4 + (not args), notes
        for needle in (
            "queue-x: not a queue directory",
            "\u00b2: not a queue directory",
            "stray.txt: not a topic directory",
            "commitlog.bak: not a commit-log file name",
        ):
            assert any(needle in n for n in notes) and needle.encode() in r.stderr, needle
    shutil.rmtree(s / "commitlog")
    one_line(run("stats", "--store", s, *SMALL[:4]), 3, "no commit log")
    one_line(run("stats", "--store", tmp_path / "nothing"), 3, "no such store directory")
    r = run("stats", "--store", s, "--top", "0")
    assert r.returncode == 2 and r.stderr.decode().startswith("rmqstore: error:")


def test_a_fifo_commitlog_file_is_refused(small_store):
    from tests.helpers.hostile import one_line, plant

    last = sorted((small_store / "commitlog").iterdir())[-1]
    plant(last, "fifo")
    one_line(run("stats", "--store", small_store, *SMALL[:4]), 3, "a FIFO", last.name)


def test_units_pointing_where_no_commit_log_file_is(small_store):
    """A lost middle commit-log file: its units are neither counted nor put on a neighbour."""
    files = sorted((small_store / "commitlog").iterdir())
    gone = files[len(files) // 2]
    lost = [
        m for m in dump(small_store) if m["file"] == gone.name and m["sys_flag"] & TX_MASK not in (PREPARED, ROLLBACK)
    ]
    before, _ = stats(small_store, "--by", "file")
    gone.unlink()
    rows, summary = stats(small_store, "--by", "file")
    assert f"commitlog/{gone.name}" not in {r["file"] for r in rows}
    assert {r["file"]: r["entries"] for r in rows if r["component"] == "commitlog"} == {
        r["file"]: r["entries"]
        for r in before
        if r["component"] == "commitlog" and r["file"] != f"commitlog/{gone.name}"
    }
    assert any(n.startswith(f"{len(lost)} consume-queue units of ") for n in summary["notes"]), summary["notes"]


@pytest.mark.slow
def test_on_a_full_tmpfs_no_sigbus(full_tmpfs):
    """Consume-queue and index files with holes on a full tmpfs: mapping them would SIGBUS on
    the first read of a hole; stats says so in one line (the index header is read, not mapped)."""
    from tests.helpers.hostile import one_line

    for args in ((), ("--exact",), ("--by", "file")):
        r = run("stats", "--store", full_tmpfs, *args, "--format", "jsonl")
        assert r.returncode not in (-7, 135), args  # SIGBUS
        if r.returncode:
            one_line(r, 3, "holes on a tmpfs", str(full_tmpfs))


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("by", ["topic", "queue", "file"])
def test_the_table_fits_the_terminal(lmq_store, by, width):
    """No line is wider than COLUMNS: the summary is key/value lines, the time range goes
    under its row when the row would not fit, long names are cut, not the table."""
    r = run("stats", "--store", lmq_store, "--by", by, "--tz", "UTC", env={"COLUMNS": str(width)})
    text = r.stdout.decode()
    assert r.returncode == 0 and max(len(line) for line in text.splitlines()) <= width, text
    lines = text.splitlines()
    assert lines[0] == "stats" and lines[1].split() == ["store", str(lmq_store)]
    assert any(x.split()[:2] == ["counted", "from"] for x in lines[:8])
    head = next(x for x in lines if x.startswith("component" if by == "file" else "topic"))
    row = lines[lines.index(head) + 1]
    folded = lines[lines.index(head) + 2].startswith("    stored: 2026-01-01")
    assert folded == ("stored" not in head.split())
    barred = any(c in row for c in "█▏▎▍▌▋▊▉")  # the disk-use bar of a topic or queue row
    assert barred == (by != "file"), row
    assert folded == (width == 80 or by != "topic" or barred), head  # the bar takes the times' room
    assert "2026-01-01" in (lines[lines.index(head) + 2] if folded else row)
    assert "disk by component" in lines
