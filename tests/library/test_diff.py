"""``rmqstore_cli.diff_stores``, called as a script would: typed rows whose ``as_dict()`` is
the command's JSON line, the summary last, stores given as paths or opened Stores, and
both only read."""

from __future__ import annotations

import json
import shutil

import pytest

from rmqstore_cli import (
    DiffFile,
    DiffMessage,
    DiffQueue,
    DiffSummary,
    StoreError,
    diff_stores,
    open_store,
)
from tests.helpers import cli, generate, tree_digest


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("libdiff")
    a = generate(root / "a", messages=800)
    b = root / "b"
    shutil.copytree(a, b)
    shutil.rmtree(b / "consumequeue" / "AuditTopic" / "1")
    return a, b


def test_rows_are_typed_and_match_the_command(pair):
    a, b = pair
    before = tree_digest(a), tree_digest(b)
    rows = list(diff_stores(a, b, messages=True))
    assert (tree_digest(a), tree_digest(b)) == before
    summary = rows[-1]
    assert isinstance(summary, DiffSummary) and not summary.same
    assert all(not isinstance(r, DiffSummary) for r in rows[:-1])
    (q,) = [r for r in rows if isinstance(r, DiffQueue)]
    assert (q.topic, q.queue_id, q.max_offset_b) == ("AuditTopic", 1, None)
    msgs = [r for r in rows if isinstance(r, DiffMessage)]
    assert len(msgs) == q.messages_only_a == summary.messages_only_a > 0
    assert {r.status for r in rows if isinstance(r, DiffFile)} == {"removed"}
    out = cli("diff", a, b, "--messages", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(x) for x in out] == [r.as_dict() for r in rows]


def test_open_stores_stay_open_and_same_is_same(pair):
    a, _ = pair
    with open_store(a) as sa, open_store(a) as sb:
        rows = list(diff_stores(sa, sb))
        assert len(rows) == 1 and rows[0].same and rows[0].as_dict()["kind"] == "summary"
        assert sa.queues()  # still usable: diff_stores closes only the stores it opened


def test_not_a_store(pair, tmp_path):
    a, _ = pair
    with pytest.raises(StoreError):
        list(diff_stores(a, tmp_path / "nothing"))
