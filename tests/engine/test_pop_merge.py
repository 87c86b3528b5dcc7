"""store/answers/pop.py's merge, record by record: a checkpoint still in the timer then delivered,
acks merged by PopReviveService#consumeReviveMessage's key, an ack naming no checkpoint or
an offset outside it, a re-put checkpoint, one naming no group."""

from __future__ import annotations

from dataclasses import dataclass

from rmqstore_cli.formats.pop import Ack, CheckPoint, ack_body, checkpoint_body

from rmqstore_cli.store.answers import pop

REVIVE = "rmq_sys_REVIVE_LOG_c"


@dataclass
class Rec:
    body: bytes
    physical_offset: int
    store_timestamp: int = 0


def ck(start=10, diffs=(0, 1, 3), pop_time=1000, bitmap=0, reput=None, topic="T", group="g") -> CheckPoint:
    return CheckPoint(start, pop_time, 5000, bitmap, len(diffs), 2, topic, group, 0, diffs, "b", reput)


def ack(*offsets, start=10, pop_time=1000) -> Ack:
    return Ack(len(offsets) > 1, offsets, start, "g", "T", 2, pop_time, "b")


def rows(s: pop.Scan, now: int, committed=None) -> list[dict]:
    rules = pop.Rules(now, {REVIVE: committed or {}})
    return list(pop.rows(s, rules, lambda t, q, o: f"u{o}"))


def test_a_checkpoint_in_the_timer_then_delivered_is_one():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck()), 100), "ck", REVIVE, 1, None)
    assert s.counts["in_timer"] == 1 and [r["revive_queue_offset"] for r in rows(s, 0)] == [None] * 3
    pop.revive(s, Rec(checkpoint_body(ck()), 900), "ck", REVIVE, 1, 7)
    pop.revive(s, Rec(checkpoint_body(ck()), 100), "ck", REVIVE, 1, None)  # the timer copy again: no change
    assert s.counts["in_timer"] == 0 and len(s.cks) == 1
    got = rows(s, 0, {1: 7})
    assert [(r["queue_offset"], r["revive_queue_offset"], r["revive_processed"]) for r in got] == [
        (10, 7, True),
        (11, 7, True),
        (13, 7, True),
    ]


def test_acks_merge_by_their_checkpoints_key_and_queue():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck(bitmap=0b100)), 100), "ck", REVIVE, 1, 0)
    pop.revive(s, Rec(ack_body(ack(10)), 200), "ack", REVIVE, 1, 1)
    pop.revive(s, Rec(ack_body(ack(12)), 300), "ack", REVIVE, 1, 2)  # offset 12 is not in the checkpoint
    pop.revive(s, Rec(ack_body(ack(11, pop_time=999)), 400), "ack", REVIVE, 1, 3)  # another pop: no checkpoint
    pop.revive(s, Rec(ack_body(ack(11)), 500), "ack", REVIVE, 2, 0)  # another revive queue: no checkpoint
    assert pop.merge_acks(s) == 2
    assert any("offset 12 is not in its checkpoint" in w for w in s.warnings)
    got = {r["queue_offset"]: (r["state"], r["ack"]) for r in rows(s, 2000)}
    assert got == {10: ("acked", "ack"), 11: ("invisible", None), 13: ("acked", "ck")}
    assert {r["queue_offset"]: r["state"] for r in rows(s, 6001)}[11] == "overdue"


def test_a_batch_ack_sets_every_bit_it_lists():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck()), 100), "ck", REVIVE, 1, 0)
    pop.revive(s, Rec(ack_body(ack(11, 13)), 200), "bAck", REVIVE, 1, 1)
    assert pop.merge_acks(s) == 0
    assert {r["queue_offset"]: r["ack"] for r in rows(s, 0)} == {10: None, 11: "batch-ack", 13: "batch-ack"}


def test_a_reput_checkpoint_names_a_message_once():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck()), 100), "ck", REVIVE, 1, 0)
    pop.revive(s, Rec(checkpoint_body(ck(start=11, diffs=(0,), reput="1")), 200), "ck", REVIVE, 1, 5)
    got = rows(s, 0)
    assert [r["queue_offset"] for r in got] == [10, 11, 13]
    assert [r["reput_times"] for r in got if r["queue_offset"] == 11] == ["1"]


def test_a_checkpoint_without_group_is_skipped_as_the_broker_skips_it():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck(group=None)), 100), "ck", REVIVE, 1, 0)
    pop.revive(s, Rec(b"{", 200), "ck", REVIVE, 1, 1)
    pop.revive(s, Rec(b"{", 300), "other", REVIVE, 1, 2)  # not a revive tag: not read
    assert not s.cks and s.counts["bad_bodies"] == 1 and len(s.warnings) == 2


def test_revive_progress_counts_what_lies_past_the_committed_offset():
    s = pop.Scan()
    pop.revive(s, Rec(checkpoint_body(ck()), 100), "ck", REVIVE, 1, 3)
    pop.revive(s, Rec(checkpoint_body(ck(start=20)), 200), "ck", REVIVE, 1, 8)
    rules = pop.Rules(0, {REVIVE: {1: 3}})
    (q,) = pop.revive_queues(s, rules, lambda t, qid: 10)
    assert (q["committed_offset"], q["behind"], q["checkpoints"], q["unprocessed_checkpoints"]) == (3, 6, 2, 1)
    assert q["oldest_unprocessed_revive_time"] == 6000
