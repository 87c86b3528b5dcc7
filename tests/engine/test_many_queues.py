"""A store of many small queues costs microseconds per queue, not a rebuild of every table
per topic: counted, never timed. (20 000 one-queue topics took ~60 s to verify, rebuild or
generate when registering a topic rebuilt the topic table's arrays: quadratic.)"""

from __future__ import annotations

from collections import Counter

import pytest

from rmqstore_cli.store.files import mapguard
from rmqstore_cli.store.records.topics import TopicIds, TopicTable
from tests.helpers import cli, generate

TOPICS = 300


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("many") / "s", "--topics", str(TOPICS), "--queues", "1", messages=600)


def _count_table_work(monkeypatch) -> Counter:
    """Counts of the topic tables' lookups (TopicIds', and verify's C-loop TopicTable's) and
    of TopicIds' key computations (one per lookup, plus one per bulk registration of the
    topics added since: never one per topic)."""
    seen: Counter = Counter()
    parts, lookup, c_lookup = TopicIds._key_parts, TopicIds.lookup, TopicTable.lookup

    def counted_c_lookup(self, *args):
        seen["lookup"] += 1
        return c_lookup(self, *args)

    monkeypatch.setattr(TopicTable, "lookup", counted_c_lookup)

    def counted_parts(*args):
        seen["key_parts"] += 1
        return parts(*args)

    def counted_lookup(self, *args):
        seen["lookup"] += 1
        return lookup(self, *args)

    monkeypatch.setattr(TopicIds, "_key_parts", staticmethod(counted_parts))
    monkeypatch.setattr(TopicIds, "lookup", counted_lookup)
    return seen


@pytest.mark.parametrize("command", ["verify", "rebuild-index"])
def test_topics_are_registered_in_bulk(many, tmp_path, monkeypatch, command):
    seen = _count_table_work(monkeypatch)
    # one process: the counters live in this one (--jobs N would fork workers)
    extra = ["--jobs", "1", *(["--output", str(tmp_path / "out")] if command == "rebuild-index" else [])]
    r = cli(command, "--store", many, *extra, "--format", "json")
    assert r.exit_code in (0, 1), r.stderr
    assert seen["lookup"] and seen["key_parts"] <= 2 * seen["lookup"] < TOPICS, seen


def test_generate_registers_topics_in_bulk(tmp_path, monkeypatch):
    seen = _count_table_work(monkeypatch)
    generate(tmp_path / "g", "--topics", str(TOPICS), "--queues", "1", messages=600)
    assert seen["key_parts"] <= 2 * seen["lookup"] < TOPICS, seen


def test_verify_maps_each_queue_file_a_bounded_number_of_times(many, monkeypatch):
    """Each consume-queue file is mapped at most twice (verify's own pass and the broker
    start-up prediction's), whatever the number of queues."""
    maps: Counter = Counter()
    original = mapguard.map_guarded

    def counted(fd, length, path, *args, **kwargs):
        maps[str(path)] += 1
        return original(fd, length, path, *args, **kwargs)

    monkeypatch.setattr(mapguard, "map_guarded", counted)
    r = cli("verify", "--store", many, "--format", "json")
    assert r.exit_code in (0, 1), r.stderr
    cq = {p: n for p, n in maps.items() if "/consumequeue/" in p}
    assert len(cq) >= TOPICS // 2 and max(cq.values()) <= 2, Counter(cq.values())


def test_topic_table_matches_after_bulk_registration():
    """Topics added one by one between lookups are all found at the next lookup, with the
    ids they were given (short and long names)."""
    import numpy as np

    names = [b"a", b"T" * 8, b"topic-%d" % 7, b"x" * 40, b"y" * 17, b"%RETRY%group-1"]
    tbl = TopicIds()
    for i, n in enumerate(names):
        tbl.add(n, i)
    buf = b"".join(names)
    lens = np.array([len(n) for n in names], np.int64)
    ta = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(np.int64)
    a = np.frombuffer(buf + bytes(8), np.uint8)
    got = tbl.lookup(a, ta, lens)
    assert got.tolist() == list(range(len(names)))
