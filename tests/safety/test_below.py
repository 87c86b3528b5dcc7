"""store/files/below.py: files written below a directory checked once and held open, reached
one component at a time through no link (what rebuild's tasks write consume queues with)."""

from __future__ import annotations

import os

import pytest


def test_writes_the_bytes_at_their_place_and_extends_never_cuts(tmp_path):
    from rmqstore_cli.store.files.below import Below

    with Below(tmp_path / "cq", [tmp_path]) as b:
        b.write_at(("T", "0"), "00000000000000000000", 100, 10, b"abc")
        b.write_at(("T", "0"), "00000000000000000000", 50, 90, b"xyz")  # a smaller size: not cut
    data = (tmp_path / "cq" / "T" / "0" / "00000000000000000000").read_bytes()
    assert len(data) == 100
    assert data[10:13] == b"abc" and data[90:93] == b"xyz" and data[:10] == bytes(10)


@pytest.mark.parametrize("where", ["topic", "queue", "file"])
def test_a_planted_link_is_refused_and_nothing_is_written_through_it(tmp_path, where):
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.files.below import Below

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_bytes(b"keep")
    root = tmp_path / "cq"
    (root / "T" / "0").mkdir(parents=True)
    if where == "topic":
        os.rename(root / "T", tmp_path / "moved")
        (root / "T").symlink_to(outside)
    elif where == "queue":
        (root / "T" / "0").rmdir()
        (root / "T" / "0").symlink_to(outside)
    else:
        (root / "T" / "0" / "f").symlink_to(outside / "f")
    with Below(root, [tmp_path]) as b, pytest.raises(StoreError):
        b.write_at(("T", "0"), "f", 100, 0, b"evil")
    assert sorted(p.name for p in outside.iterdir()) == ["f"]
    assert (outside / "f").read_bytes() == b"keep"


def test_a_fifo_where_the_file_belongs_is_refused(tmp_path):
    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.files.below import Below

    (tmp_path / "cq" / "T" / "0").mkdir(parents=True)
    os.mkfifo(tmp_path / "cq" / "T" / "0" / "f")
    with (
        Below(tmp_path / "cq", [tmp_path]) as b,
        pytest.raises(StoreError, match="FIFO|fifo|pipe|not a regular|where a store file"),
    ):
        b.write_at(("T", "0"), "f", 100, 0, b"x")


def test_a_root_outside_the_roots_is_refused(tmp_path):
    from rmqstore_cli.errors import RmqstoreError
    from rmqstore_cli.store.files.below import Below

    (tmp_path / "out").mkdir()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cq").symlink_to(tmp_path / "out")
    with pytest.raises(RmqstoreError):
        Below(tmp_path / "in" / "cq", [tmp_path / "in"])
