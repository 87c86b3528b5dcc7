"""store/files/safefs.py: the one place store files are opened, written and deleted (docs/safety.md)."""

from __future__ import annotations

import os

import pytest

from rmqstore_cli.errors import RefusedError, StoreError
from rmqstore_cli.store.files import safefs


def test_read_refuses_fifo_without_hanging(tmp_path):
    fifo = tmp_path / "checkpoint"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="a FIFO"):
        safefs.open_read_only(fifo)


def test_read_refuses_device_and_directory(tmp_path):
    with pytest.raises(StoreError, match="character device"):
        safefs.open_read_only("/dev/zero")
    with pytest.raises(StoreError, match="directory"):
        safefs.read_bounded(tmp_path, 10)


def test_read_follows_link_to_regular_file(tmp_path):
    (tmp_path / "a").write_bytes(b"abc")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert safefs.read_bounded(tmp_path / "b", 3) == b"abc"


def test_read_bounded_cap(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(StoreError, match="more than the 10"):
        safefs.read_bounded(tmp_path / "big", 10)


def test_load_json_deep_nesting_and_garbage(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(StoreError, match="not valid JSON"):
        safefs.load_json(tmp_path / "deep.json")
    (tmp_path / "bad.json").write_bytes(b"{\xff}")
    with pytest.raises(StoreError, match="not valid JSON"):
        safefs.load_json(tmp_path / "bad.json")
    (tmp_path / "ok.json").write_text('{"a": [1, 2]}')
    assert safefs.load_json(tmp_path / "ok.json") == {"a": [1, 2]}


def test_replace_file_replaces_planted_link_not_its_target(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir()
    outside.write_bytes(b"precious")
    (store / "checkpoint").symlink_to(outside)
    safefs.replace_file(store / "checkpoint", b"new", [store])
    assert outside.read_bytes() == b"precious"
    assert not (store / "checkpoint").is_symlink() and (store / "checkpoint").read_bytes() == b"new"
    assert [p.name for p in store.iterdir()] == ["checkpoint"]  # no temp file left


def test_write_through_linked_directory_refused(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir()
    outside.mkdir()
    (store / "config").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RefusedError, match="outside the store"):
        safefs.replace_file(store / "config" / "topics.json", b"{}", [store])
    with pytest.raises(RefusedError):
        safefs.make_dirs(store / "config" / "sub", [store])
    assert list(outside.iterdir()) == []


def test_open_for_write_does_not_follow_last_component(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "target").write_bytes(b"t")
    (store / "lock").symlink_to(tmp_path / "target")
    with pytest.raises(StoreError, match="symbolic link"):
        safefs.open_for_write(store / "lock", [store], create=True)
    (store / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(StoreError):
        safefs.open_for_write(store / "dangling", [store], create=True)
    assert not (tmp_path / "nowhere").exists()


def test_unlink_inside_keeps_links_and_outside(tmp_path):
    store, outside = tmp_path / "store", tmp_path / "outside"
    store.mkdir()
    outside.mkdir()
    (outside / "f").write_bytes(b"x")
    (store / "cq").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RefusedError):
        safefs.unlink_inside(store / "cq" / "f", [store])
    assert (outside / "f").exists()
    (store / "link").symlink_to(outside / "f")
    with pytest.raises(StoreError, match="symbolic link"):
        safefs.unlink_inside(store / "link", [store])
    assert (store / "link").is_symlink()
    with pytest.raises(RefusedError):
        safefs.rmtree_inside(store / "cq", [store])
    assert (outside / "f").exists()


def test_reserve_reports_enospc(tmp_path, monkeypatch):
    import errno

    def full(fd, off, n):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    p = tmp_path / "f"
    p.write_bytes(b"")
    fd = os.open(p, os.O_RDWR)
    try:
        with pytest.raises(StoreError, match="no space left on device"):
            safefs.reserve(fd, 0, 4096, p)
    finally:
        os.close(fd)


def test_create_sized_leaves_nothing_when_it_cannot_reserve(tmp_path, monkeypatch):
    import errno

    def full(fd, off, n):
        raise OSError(errno.ENOSPC, "No space left on device")

    store = tmp_path / "store"
    safefs.create_sized(store / "cq" / "f0", 4096, [store], "test file", reserve_first=1024)
    assert (store / "cq" / "f0").stat().st_size == 4096
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(StoreError, match="no space left on device"):
        safefs.create_sized(store / "cq" / "f1", 4096, [store], "test file", reserve_first=1024)
    assert not (store / "cq" / "f1").exists()
    with pytest.raises(StoreError, match="already exists"):
        safefs.create_sized(store / "cq" / "f0", 4096, [store], "test file")
