"""A consume-queue writer of a dispatcher makes a new queue's directories with plain ``mkdir``
below a root it checked once (``ConsumeQueueWriter(checked=...)``); a link planted where a
topic's directory belongs still leads nowhere outside the store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqstore_cli.errors import RefusedError
from rmqstore_cli.store.queues.consume_queue import ConsumeQueue, ConsumeQueueWriter

SIZE = 20 * 8


def _write(root: Path, topic: str, checked: dict) -> ConsumeQueueWriter:
    w = ConsumeQueueWriter(root / "consumequeue", topic, 0, SIZE, roots=[root], checked=checked)
    w.put_many([100, 200], [10, 20], [0, 0], [0, 1])
    w.flush()
    return w


def test_new_queues_are_made_below_the_checked_root(tmp_path):
    (tmp_path / "consumequeue").mkdir()
    checked: dict = {}
    made = [_write(tmp_path, f"T{i}", checked) for i in range(3)]
    assert checked == {tmp_path / "consumequeue": True}  # resolved once for every writer
    assert all(w.made_dir for w in made)
    cq = ConsumeQueue(tmp_path / "consumequeue", "T2", 0, SIZE)
    try:
        assert [(u.commitlog_offset, u.size) for u in cq.units(0, 2)] == [(100, 10), (200, 20)]
    finally:
        cq.close()


def test_a_topic_link_leading_out_is_refused(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    (store / "consumequeue").mkdir(parents=True)
    outside.mkdir()
    os.symlink(outside, store / "consumequeue" / "T")
    checked: dict = {}
    with pytest.raises(RefusedError):
        _write(store, "T", checked)
    assert list(outside.iterdir()) == []
    assert checked == {store / "consumequeue": True}
