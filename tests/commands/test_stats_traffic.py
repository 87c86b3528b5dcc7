"""stats --by minute|hour: messages and bytes per interval of store time, checked against a
count made independently from dump-commitlog's JSON Lines (each record's store_timestamp),
on a generated store whose messages span several minutes with a stop of six minutes; the
bar chart (and the stats table's disk-use bars) fit 80 and 120 columns."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from rmqstore_cli.render import text_width
from tests.helpers import cli, generate

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
MINUTE, HOUR = 60_000, 3_600_000
BLOCKS = "█▏▎▍▌▋▊▉"


@pytest.fixture(scope="module")
def gapped(tmp_path_factory) -> Path:
    """300 messages over 00:00-00:03, nothing until 00:09:30, then 200 more over two minutes."""
    store = tmp_path_factory.mktemp("gapped") / "store"
    generate(store, "--start", "2026-01-01T00:00:00Z", "--span", "3m", messages=300)
    return generate(store, "--append", "--start", "2026-01-01T00:09:30Z", "--span", "2m", messages=200, seed=8)


def dumped(store: Path) -> list[dict]:
    r = cli("dump-commitlog", "--store", store, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def expected(records: list[dict], length: int, topic: str | None = None) -> list[tuple[int, int, int]]:
    """(start, messages, bytes) per interval from the first to the last, empty ones as zeros."""
    n: Counter = Counter()
    b: Counter = Counter()
    for m in records:
        if topic is None or m["topic"] == topic:
            k = m["store_timestamp"] // length
            n[k] += 1
            b[k] += m["total_size"]
    return [(k * length, n[k], b[k]) for k in range(min(n), max(n) + 1)]


def traffic(store: Path, *args: str) -> tuple[list[dict], dict]:
    r = cli("stats", "--store", store, *args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    return lines[:-1], lines[-1]["summary"]


def got(rows: list[dict]) -> list[tuple[int, int, int]]:
    return [(r["start_timestamp"], r["messages"], r["bytes"]) for r in rows]


def test_per_minute_equals_the_dump_count(gapped):
    records = dumped(gapped)
    rows, summary = traffic(gapped, "--by", "minute")
    want = expected(records, MINUTE)
    assert got(rows) == want
    assert [r["end_timestamp"] - r["start_timestamp"] for r in rows] == [MINUTE] * len(rows)
    assert summary["messages"] == len(records) and summary["bytes"] == sum(m["total_size"] for m in records)
    assert summary["empty_intervals"] == sum(1 for _, n, _ in want if n == 0) >= 5  # 00:03 .. 00:08 held nothing
    assert rows[0]["start_timestamp"] == START_MS and rows[3]["messages"] == 0
    assert summary["first_store_timestamp"] == min(m["store_timestamp"] for m in records)


def test_per_topic_and_per_hour(gapped):
    records = dumped(gapped)
    topic = Counter(m["topic"] for m in records).most_common(1)[0][0]
    rows, summary = traffic(gapped, "--by", "minute", "--topic", topic)
    assert got(rows) == expected(records, MINUTE, topic)
    assert {r["topic"] for r in rows} == {topic} and summary["topic"] == topic
    rows, _ = traffic(gapped, "--by", "hour")
    assert got(rows) == expected(records, HOUR) and len(rows) == 1


def test_limit_keeps_the_latest(gapped):
    every, _ = traffic(gapped, "--by", "minute")
    rows, summary = traffic(gapped, "--by", "minute", "--limit", "4")
    assert rows == every[-4:] and summary["shown"] == 4 and summary["rows"] == len(every)


def test_unknown_topic_is_exit_1(gapped):
    r = cli("stats", "--store", gapped, "--by", "minute", "--topic", "NoSuchTopic")
    assert r.exit_code == 1 and "NoSuchTopic" in r.stderr


@pytest.mark.parametrize("narrow", [("--sample", "3"), ("--max-bytes", "4096")])
def test_sampling_is_refused_not_ignored(gapped, narrow):
    """Traffic over time counts every record: a sampled walk is a usage error, one line."""
    r = cli("stats", "--store", gapped, "--by", "minute", *narrow)
    assert r.exit_code == 2 and narrow[0] in r.stderr and len(r.stderr.strip().splitlines()) == 1
    from rmqstore_cli import open_store
    from rmqstore_cli.errors import UsageError

    with open_store(gapped) as store, pytest.raises(UsageError):
        store.stats("hour", sample=2)


ROW = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d)  +(\d+)  +(\d+(?:\.\d)? \S+)(?:  ([" + BLOCKS + r"]+))?$")


@pytest.mark.parametrize("columns", [80, 120])
def test_bar_chart_fits_and_shows_the_gap(gapped, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli("stats", "--store", gapped, "--by", "minute", "--tz", "UTC")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(text_width(x) <= columns for x in lines), [x for x in lines if text_width(x) > columns]
    chart = [m.groups() for m in map(ROW.match, lines) if m]
    want = expected(dumped(gapped), MINUTE)
    assert [(t, int(n)) for t, n, _, _ in chart] == [
        (f"2026-01-01 00:{(s - START_MS) // MINUTE:02d}", n) for s, n, _ in want
    ]
    gap = [c for c in chart if c[1] == "0"]
    assert len(gap) >= 5 and all(c[2] == "0 B" and c[3] is None for c in gap)
    busiest = max(int(c[1]) for c in chart)
    full = [c[3] for c in chart if int(c[1]) == busiest][0]
    assert set(full) == {"█"} and len(full) > 20  # the busiest interval fills the bar's room
    for _, n, _, b in chart:  # the others in proportion (to an eighth of a cell, rounded)
        if int(n):
            eighths = 8 * (len(b) - 1) + (8 if b[-1] == "█" else BLOCKS.index(b[-1]))
            assert abs(eighths - round(8 * len(full) * int(n) / busiest)) <= 1


@pytest.mark.parametrize("columns", [80, 120])
def test_stats_table_disk_bars_fit(gapped, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli("stats", "--store", gapped)
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(text_width(x) <= columns for x in lines)
    rows, _ = traffic(gapped)  # the topic rows, biggest first: the first one's bar is the longest
    bars = [re.search(r"%  ([" + BLOCKS + r"]+)", x) for x in lines]
    lengths = [len(m.group(1)) for m in bars if m]
    assert len(lengths) == len(rows) and lengths == sorted(lengths, reverse=True)
    assert lengths[0] == 20 if columns == 120 else lengths[0] >= 4


def test_library_returns_typed_intervals(gapped):
    from rmqstore_cli import StatsInterval, open_store

    with open_store(gapped) as store:
        rep = store.stats("minute")
        assert all(isinstance(r, StatsInterval) for r in rep.rows)
        assert [r.as_dict() for r in rep.rows] == traffic(gapped, "--by", "minute")[0]
        assert rep.summary["by"] == "minute" and rep.messages == sum(r.messages for r in rep.rows)
        assert len(store.stats("hour", top=0).rows) == 0
