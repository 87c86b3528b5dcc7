"""rebuild-index's shuffle-free decomposition (pipeline/rebuild_tasks.py ``rebuild_staged``): file
tasks write straight queues in place and spill the rest; the result is the local engine's
byte for byte whichever path each queue takes, and a dry run writes nothing."""

from __future__ import annotations

import functools
import os
import shutil
from itertools import pairwise

import pytest

from tests.helpers import fast_first, generate
from tests.helpers.pipeline import build, smash


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    good = generate(root / "good", "--delay-ratio", "0.1", messages=1200, seed=11)
    damaged = root / "damaged"
    shutil.copytree(good, damaged)
    files = sorted((damaged / "commitlog").iterdir())
    smash(files[3], 15000)  # before the recovery region: the rest of the file is skipped
    expired = root / "expired"  # first files gone: queues start past cq offset 0 (pre-blank)
    shutil.copytree(good, expired)
    for f in files[:2]:
        (expired / "commitlog" / f.name).unlink()
    return {"good": good, "damaged": damaged, "expired": expired}


@pytest.fixture
def plans(monkeypatch):
    from rmqstore_cli.pipeline import rebuild_tasks as T

    seen = []
    orig = T.plan_queues

    def spy(included, summaries):
        p = orig(included, summaries)
        seen.append((p, sum(1 for i in included if summaries[i].direct)))
        return p

    monkeypatch.setattr(T, "plan_queues", spy)
    return seen


@pytest.mark.parametrize("name", ["good", "damaged", "expired"])
def test_each_queue_path_gives_the_local_engine_bytes(stores, plans, name, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from rmqstore_cli.pipeline.rebuild_spill import PARTS
    from tests.helpers.rebuild_reference import build_set

    want = build(build_set, stores[name], tmp_path / "a")
    got = build(rebuild_build, stores[name], tmp_path / "b")
    assert got[1] == want[1]
    assert got[0] == want[0]
    assert not (tmp_path / "b" / PARTS).exists()
    ((p, direct_files),) = plans
    assert direct_files > 0  # files before the recovery region wrote in place
    if name == "damaged":  # the skipped rest of a file breaks cq offsets: those queues are rebuilt
        assert p.rebuild and p.remove and set(p.remove) <= set(p.rebuild)
    else:  # the recovery region's files write theirs after the plan
        assert p.straight and p.late and not p.rebuild
    if name == "expired":
        assert any(first > 0 for first, _ in p.straight.values())


@pytest.mark.parametrize("name", fast_first(["damaged", "good", "expired"]))
def test_forked_workers_build_the_same_bytes(stores, name, tmp_path):
    """rebuild's tasks on two forked processes (pipeline/local.py fork_map): the files and
    report of the whole-store build, byte for byte."""
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    want = build(build_set, stores[name], tmp_path / "a")
    got = build(functools.partial(rebuild_build, jobs=2), stores[name], tmp_path / "b")
    assert got == want


def test_fork_map_keeps_order_runs_closures_and_raises():
    from rmqstore_cli.pipeline.workers import fork_map

    seen = {"k": 3}
    assert fork_map(lambda x: (x * seen["k"], os.getpid()), range(40), 2)[5][0] == 15
    pids = {pid for _, pid in fork_map(lambda x: (x, os.getpid()), range(40), 2)}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2  # worker processes, at most jobs of them
    assert fork_map(lambda x: x, [7], 4) == [7]  # one item: no worker
    with pytest.raises(ZeroDivisionError):
        fork_map(lambda x: 1 // x, [1, 0, 2], 2)


def test_fork_map_then_runs_the_second_items_made_after_the_fork_on_the_same_workers():
    from rmqstore_cli.pipeline.workers import fork_map_then

    made = []  # what more() makes after the fork: the workers never see it but as arguments
    first, then = fork_map_then(
        lambda x: os.getpid(),
        range(4),
        lambda a, b: (a * b, made, os.getpid()),
        lambda got: made.extend([got(3)]) or [(2, 3), (4, 5)],
        2,
    )
    assert [r[:2] for r in then] == [(6, []), (20, [])]  # in order; made was empty when forked
    assert made == [first[3]]  # more() had the fourth first result, from a worker
    assert os.getpid() not in {*first, *(r[2] for r in then)} and len({*first, *(r[2] for r in then)}) <= 2
    seen: list = []
    assert fork_map_then(lambda x: -x, [1], lambda a: a, lambda got: [(got(0),)], 1, seen.append) == ([-1], [-1])
    assert seen == [-1, -1]  # one job: this process, each result handed on in order


def test_dry_run_reports_the_local_engine_counts_and_writes_nothing(stores, tmp_path):
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    for name in ("good", "damaged"):
        want = build(build_set, stores[name], tmp_path / f"{name}-a", dry_run=True)
        got = build(rebuild_build, stores[name], tmp_path / f"{name}-b", dry_run=True)
        assert got[0] == want[0] and want[0]["cq_files"] > 0
        assert not (tmp_path / f"{name}-b").exists()


def test_write_units_disjoint_ranges_in_any_order_give_one_writes_bytes(tmp_path):
    from rmqstore_cli.store.queues.consume_queue import write_units

    def write_at(root, key, pos, data, size):
        write_units(root, key[0], key[1], pos, data, size)

    data = os.urandom(20 * 37)
    size = 200  # 10 units a file: the ranges cross file ends
    write_at(tmp_path / "one", ("T", 0), 60, data, size)
    cuts = [0, 140, 300, 520, len(data)]
    pieces = [(60 + a, data[a:b]) for a, b in pairwise(cuts)]
    for pos, piece in reversed(pieces):
        write_at(tmp_path / "many", ("T", 0), pos, piece, size)
    one = sorted(os.listdir(tmp_path / "one" / "T" / "0"))
    assert one == sorted(os.listdir(tmp_path / "many" / "T" / "0")) and len(one) == 4  # bytes 60..800
    for n in one:
        a = (tmp_path / "one" / "T" / "0" / n).read_bytes()
        assert len(a) == size and a == (tmp_path / "many" / "T" / "0" / n).read_bytes()
    first = (tmp_path / "one" / "T" / "0" / one[0]).read_bytes()
    assert first[:60] == bytes(60) and first[60:] == data[:140]


def test_write_units_refuses_a_topic_that_is_no_directory_name(tmp_path):
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.queues.consume_queue import write_units

    with pytest.raises(StoreError):
        write_units(tmp_path, "../x", 0, 0, bytes(20), 200)
    assert not (tmp_path.parent / "x").exists()


def test_verify_marks_runs_are_the_sorted_unique_runs():
    import numpy as np

    from rmqstore_cli.pipeline.verify_plan import Marks

    rng = np.random.default_rng(7)
    for ordered in (True, False):
        m = Marks()
        parts = [np.arange(a, a + n) for a, n in ((0, 5), (5, 3), (20, 4), (22, 6), (40, 1), (100, 2))]
        if not ordered:
            parts += [rng.integers(0, 120, 30)]
        for p in parts:
            m[p] = True
        u = np.unique(np.concatenate(parts))
        want = [
            (int(a), int(b) + 1)
            for a, b in zip(np.r_[u[:1], u[1:][np.diff(u) != 1]], np.r_[u[:-1][np.diff(u) != 1], u[-1:]], strict=True)
        ]
        assert [tuple(r) for r in m.runs().tolist()] == want


def test_key_offsets_going_back_across_files_are_counted_exactly(stores, tmp_path, monkeypatch):
    """A record whose PHYSICALOFFSET field points into an earlier file (dispatch takes the
    field, as CommitLog#checkMessageAndReturnSize reads it): its key lies below the index
    file's endPhyOffset, so the summaries cannot tell that file's kept keys and the planner
    asks for exact counts (from the spills, or by dispatching again in a dry run); its unit
    ends below the queue's maxPhysicOffset, which ConsumeQueue#putMessagePositionInfo
    skips, so its queue is not straight and is rebuilt through the writer. Same bytes and
    counts as the local engine either way."""
    import struct

    from rmqstore_cli.pipeline import rebuild_tasks as T
    from rmqstore_cli.pipeline.local import rebuild_build
    from tests.helpers.rebuild_reference import build_set

    store = tmp_path / "back"
    shutil.copytree(stores["good"], store)
    f = sorted((store / "commitlog").iterdir())[2]
    data = bytearray(f.read_bytes())
    at = 0
    while b"KEYS\x01" not in data[at : at + struct.unpack_from(">i", data, at)[0]]:  # a record with keys
        at += struct.unpack_from(">i", data, at)[0]
    struct.pack_into(">q", data, at + 28, 100)  # PHYSICALOFFSET: inside the first file
    f.write_bytes(bytes(data))
    asked = []
    exact = T.plan_keys

    def spy(included, summaries, exact_counts=None):
        def counting(need):
            asked.append(sorted(need))
            return exact_counts(need)

        return exact(included, summaries, counting)

    monkeypatch.setattr(T, "plan_keys", spy)
    for dry in (False, True):
        want = build(build_set, store, tmp_path / f"a{dry}", dry_run=dry)
        got = build(rebuild_build, store, tmp_path / f"b{dry}", dry_run=dry)
        assert got == want
        assert asked == [[2]]  # the patched file only
        asked.clear()
