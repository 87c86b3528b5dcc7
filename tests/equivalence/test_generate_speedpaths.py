"""generate's index keys put a block at a time (store/keyblock.py IndexKeyBlock,
FAST_PATHS.key_block) give the bytes of IndexService#putKey per key (key_block=0, the
reference): every file of the store, for the option sets generate's tests cover, with
blocks that end mid-record and index files that fill (--index-max 400) inside a block."""
from __future__ import annotations

import filecmp

import pytest

from conftest import generate
from rmqstore_cli.store.fastpaths import FAST_PATHS

OPTION_SETS = {
    "default-4.9": [],
    "ratios-5": ["--broker-version", "5", "--delay-ratio", "0.2", "--transaction-ratio", "0.2",
                 "--retry-ratio", "0.1", "--ipv6-ratio", "0.3", "--compress-ratio", "0.2"],
    "lmq-5": ["--broker-version", "5", "--lmq-ratio", "0.5"],
    "timer-5": ["--broker-version", "5", "--timer-ratio", "0.3"],
    "bcq-5": ["--broker-version", "5", "--bcq-topics", "1"],
}


#: --timer-ratio writes a new store only
NO_APPEND = {"timer-5"}


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.name != "lock")


def _store(path, name, key_block, monkeypatch):
    monkeypatch.setattr(FAST_PATHS, "key_block", key_block)
    extra = OPTION_SETS[name]
    generate(path, *extra, messages=700, seed=5)
    if name not in NO_APPEND:  # a resumed index: blocks after the old keys
        generate(path, "--append", *extra, messages=300, seed=6)
    return path


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_key_blocks_write_the_per_key_bytes(tmp_path, monkeypatch, name):
    ref = _store(tmp_path / "ref", name, 0, monkeypatch)
    for block in (7, 1 << 16):
        got = _store(tmp_path / f"b{block}", name, block, monkeypatch)
        assert _files(got) == _files(ref)
        assert any(p.parts[0] == "index" for p in _files(ref))
        for rel in _files(ref):
            assert filecmp.cmp(ref / rel, got / rel, shallow=False), (block, rel)
