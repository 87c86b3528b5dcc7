"""A quick look at a big store (store/answers/sampling.py): ``--sample N`` keeps every Nth record of
what the full walk prints, ``--max-bytes N`` the records ending within the first N bytes of
each commit-log file; dump-commitlog, stats and the library agree with the full dump."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.helpers import cli, generate

FILE = 65536  # the helpers' small commit-log files


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("sampling") / "store", messages=600)


@pytest.fixture(scope="module")
def full(store) -> list[dict]:
    r = cli("dump-commitlog", "-s", store, "--format", "jsonl")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert len({d["file"] for d in rows}) > 3  # several files: --max-bytes cuts each
    return rows


def _dump(store, *args: str) -> tuple[list[dict], str]:
    r = cli("dump-commitlog", "-s", store, "--format", "jsonl", *args)
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()], r.stderr


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_sample_is_every_nth_of_the_full_dump(store, full, n):
    got, err = _dump(store, "--sample", str(n))
    assert [d["physical_offset"] for d in got] == [d["physical_offset"] for d in full][::n]
    assert f"every {n}th record ({len(got)} of {len(full)} passed)" in err


def test_sample_applies_after_the_filters_and_before_the_limit(store, full):
    """A filter the columnar path takes (topic) and one the per-record path takes (key)."""
    topic = full[0]["topic"]
    mine = [d["physical_offset"] for d in full if d["topic"] == topic]
    got, _ = _dump(store, "-t", topic, "--sample", "3", "--limit", "5")
    assert [d["physical_offset"] for d in got] == mine[::3][:5]
    key = next(k for d in full for k in d["keys"] or [] if sum(k in (e["keys"] or []) for e in full) > 3)
    keyed = [d["physical_offset"] for d in full if key in (d["keys"] or [])]
    got, _ = _dump(store, "--key", key, "--sample", "2")
    assert [d["physical_offset"] for d in got] == keyed[::2]


@pytest.mark.parametrize("limit", [1, 3000, 20000, FILE])
def test_max_bytes_stops_each_file_at_a_record_boundary(store, full, limit):
    """The records ending within the first ``limit`` bytes of each file, from the full dump's
    offsets and sizes (the file's start is in its name)."""
    want = [d["physical_offset"] for d in full if d["physical_offset"] - int(d["file"]) + d["total_size"] <= limit]
    got, err = _dump(store, "--max-bytes", str(limit))
    assert [d["physical_offset"] for d in got] == want
    assert f"the first {limit} bytes of each of" in err


def test_sample_and_max_bytes_together(store, full):
    within = [d["physical_offset"] for d in full if d["physical_offset"] - int(d["file"]) + d["total_size"] <= 9000]
    got, _ = _dump(store, "--max-bytes", "9000", "--sample", "4")
    assert [d["physical_offset"] for d in got] == within[::4]


def test_summary_counts_the_sample_and_scales_it(store, full):
    r = cli("dump-commitlog", "-s", store, "--summary", "--sample", "5", "--format", "json")
    s = json.loads(r.stdout)
    kept = full[::5]
    assert s["messages"] == len(kept) and s["bytes"] == sum(d["total_size"] for d in kept)
    assert s["estimated_messages"] == len(kept) * 5 and s["sampling"]["records_passed"] == len(full)
    r = cli("dump-commitlog", "-s", store, "--summary", "--format", "json")
    whole = json.loads(r.stdout)
    assert whole["messages"] == len(full) and "sampling" not in whole and "estimated_messages" not in whole


def test_stats_sampled_counts_are_every_nth_record(store, full):
    """stats --sample 4: each topic's sampled_messages is its count among every 4th record of
    the full dump; messages is that scaled by 4, marked estimated."""
    r = cli("stats", "-s", store, "--sample", "4", "--format", "json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    want = Counter(d["topic"] for d in full[::4])
    assert {row["topic"]: row["sampled_messages"] for row in out["rows"]} == dict(want)
    assert all(row["estimated"] and row["messages"] == 4 * row["sampled_messages"] for row in out["rows"])
    assert out["summary"]["method"] == "commitlog-sampled" and out["summary"]["sampled_messages"] == len(full[::4])
    assert "counts scaled by 4 are estimates" in r.stderr


def test_stats_max_bytes_scales_by_the_bytes_read(store, full):
    r = cli("stats", "-s", store, "--max-bytes", "16384", "--format", "json")
    s = json.loads(r.stdout)["summary"]
    within = [d for d in full if d["physical_offset"] - int(d["file"]) + d["total_size"] <= 16384]
    assert s["sampled_messages"] == len(within)
    sm = s["sampling"]
    assert sm["bytes_in_range"] == full[-1]["physical_offset"] + full[-1]["total_size"] - int(full[0]["file"])
    assert s["messages"] == round(len(within) * sm["bytes_in_range"] / sm["bytes_read"])


def test_the_library_narrows_as_the_command(store, full):
    from rmqstore_cli import open_store

    with open_store(store) as s:
        assert [m.physical_offset for m in s.messages(sample=6)] == [d["physical_offset"] for d in full][::6]
        got = [m.physical_offset for m in s.messages(max_bytes=5000)]
        rep = s.stats(sample=3)
    assert got == [
        d["physical_offset"] for d in full if d["physical_offset"] - int(d["file"]) + d["total_size"] <= 5000
    ]
    assert rep.summary["sampled_messages"] == len(full[::3])


def test_a_sample_of_zero_is_refused(store):
    r = cli("dump-commitlog", "-s", store, "--sample", "0")
    assert r.exit_code == 2


def test_verify_sampled_checks_every_nth_record(store, full):
    r = cli("verify", "-s", store, "--sample", "9", "--format", "json")
    assert r.exit_code == 0, r.stderr
    s = json.loads(r.stdout)["summary"]
    assert s["messages"] == len(full[::9]) and s["estimated_messages"] == 9 * len(full[::9])
    assert s["sampling"]["records_passed"] == len(full) and s["findings"] == {}


def test_verify_sampled_finds_a_sampled_records_bad_unit(store, full, tmp_path):
    """A consume-queue unit pointed elsewhere: found when its record is sampled, not when it is
    not (the quick look checks only what it reads)."""
    import shutil
    import struct

    s = tmp_path / "s"
    shutil.copytree(store, s)
    rec = next(d for d in full[::5][1:] if not d["sys_flag"] & 0xC)  # a dispatched, sampled record
    cq = s / "consumequeue" / rec["topic"] / str(rec["queue_id"])
    per = 2000 // 20
    f = cq / f"{rec['queue_offset'] // per * per * 20:020d}"
    raw = bytearray(f.read_bytes())
    at = rec["queue_offset"] % per * 20
    raw[at : at + 8] = struct.pack(">q", rec["physical_offset"] + 1)
    f.write_bytes(bytes(raw))
    r = cli("verify", "-s", s, "--sample", "5", "--format", "jsonl")
    assert r.exit_code == 1
    found = [json.loads(x) for x in r.stdout.splitlines()[:-1]]
    assert [(f["check"], f["physical_offset"]) for f in found] == [("sample.cq-unit", rec["physical_offset"])]
    idx = [d["physical_offset"] for d in full].index(rec["physical_offset"])
    r = cli("verify", "-s", s, "--max-bytes", str(rec["physical_offset"] - int(rec["file"])), "--format", "json")
    assert r.exit_code == 0 and idx > 0  # the record lies past each file's first bytes: not read
