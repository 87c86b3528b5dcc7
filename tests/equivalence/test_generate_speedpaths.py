"""generate's fast paths give the bytes of the per-record path (the reference,
``CommitLog#putMessage`` + the reput per record), every file of the store, for the option
sets generate's tests cover:

* index keys put a block at a time (store/write/keyblock.py IndexKeyBlock, FAST_PATHS.key_block)
  against IndexService#putKey per key (key_block=0), with blocks that end mid-record and
  index files that fill (--index-max 400) inside a block;
* sends encoded, written and dispatched a block at a time (store/commitlog/blocks.py,
  CommitLog#append_block, FastDispatcher; FAST_PATHS.gen_block) against
  DefaultAppendMessageCallback#doAppend and the reput per send (gen_block=0), with blocks
  that cross commit-log files (64 KiB files: a BLANK and a roll inside a block) and
  transactions whose answer falls in the next block; and ``--from-jsonl`` of a dump.
"""

from __future__ import annotations

import filecmp

import pytest

from rmqstore_cli.store.files.fastpaths import FAST_PATHS
from tests.helpers import cli, generate

pytestmark = pytest.mark.slow  # every generate profile written twice

OPTION_SETS = {
    "default-4.9": [],
    "ratios-5": [
        "--broker-version",
        "5",
        "--delay-ratio",
        "0.2",
        "--transaction-ratio",
        "0.2",
        "--retry-ratio",
        "0.1",
        "--ipv6-ratio",
        "0.3",
        "--compress-ratio",
        "0.2",
    ],
    "lmq-5": ["--broker-version", "5", "--lmq-ratio", "0.5"],
    "timer-5": ["--broker-version", "5", "--timer-ratio", "0.3"],
    "bcq-5": ["--broker-version", "5", "--bcq-topics", "1"],
}

#: (key_block, gen_block) against the reference (0, 0)
PATHS = [(7, 0), (1 << 16, 0), (0, 5), (1 << 16, 7), (1 << 16, 1 << 13)]

#: --timer-ratio writes a new store only
NO_APPEND = {"timer-5"}


def _files(root):
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file() and p.name != "lock")


def _store(path, name, paths, monkeypatch):
    monkeypatch.setattr(FAST_PATHS, "key_block", paths[0])
    monkeypatch.setattr(FAST_PATHS, "gen_block", paths[1])
    extra = OPTION_SETS[name]
    generate(path, *extra, messages=700, seed=5)
    if name not in NO_APPEND:  # a resumed index: blocks after the old keys
        generate(path, "--append", *extra, messages=300, seed=6)
    return path


def _same(ref, got, why):
    assert _files(got) == _files(ref)
    assert any(p.parts[0] == "index" for p in _files(ref))
    for rel in _files(ref):
        assert filecmp.cmp(ref / rel, got / rel, shallow=False), (why, rel)


@pytest.mark.parametrize("name", sorted(OPTION_SETS))
def test_fast_paths_write_the_per_record_bytes(tmp_path, monkeypatch, name):
    ref = _store(tmp_path / "ref", name, (0, 0), monkeypatch)
    for paths in PATHS:
        _same(ref, _store(tmp_path / f"p{paths[0]}-{paths[1]}", name, paths, monkeypatch), paths)


@pytest.mark.parametrize("name", ["default-4.9", "ratios-5"])
def test_from_jsonl_blocks_write_the_per_record_bytes(tmp_path, monkeypatch, name):
    """A dump replayed send by send (gen_block=0) and a block at a time: the same store."""
    src = generate(tmp_path / "src", *OPTION_SETS[name], messages=700, seed=5)
    dump = tmp_path / "dump.jsonl"
    r = cli("dump-commitlog", "--store", src, "--format", "jsonl", "--body", "base64")
    assert r.exit_code == 0, r.stderr
    dump.write_text(r.stdout)
    stores = {}
    for gen_block in (0, 5, 1 << 13):
        monkeypatch.setattr(FAST_PATHS, "gen_block", gen_block)
        stores[gen_block] = generate(tmp_path / f"g{gen_block}", "--from-jsonl", dump, messages=0)
    for gen_block in (5, 1 << 13):
        _same(stores[0], stores[gen_block], gen_block)
    with (
        open(src / "commitlog" / "00000000000000000000", "rb") as a,
        open(stores[1 << 13] / "commitlog" / "00000000000000000000", "rb") as b,
    ):
        assert a.read() == b.read()


@pytest.mark.parametrize("bad", ['{"topic": "T"}', "not json", '{"topic": 5, "queue_id": 0}', "[1, 2]"])
def test_from_jsonl_block_errors_name_the_line(tmp_path, monkeypatch, bad):
    """A block holding a bad line is read line by line: the error names that line, as the
    per-record path's does, and exits 2 (usage) on both paths."""
    src = generate(tmp_path / "src", messages=20, seed=5)
    r = cli("dump-commitlog", "--store", src, "--format", "jsonl", "--body", "base64")
    lines = r.stdout.splitlines()
    lines.insert(6, bad)
    dump = tmp_path / "dump.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    out = {}
    for gen_block in (0, 1 << 13):
        monkeypatch.setattr(FAST_PATHS, "gen_block", gen_block)
        got = cli("generate", "--store", tmp_path / f"g{gen_block}", "--from-jsonl", dump)
        out[gen_block] = (got.exit_code, got.stderr)
    assert out[0] == out[1 << 13]
    assert out[0][0] == 2 and f"{dump}:7: not a dump-commitlog record" in out[0][1], out[0]


def test_from_jsonl_invalid_utf8_is_one_line(tmp_path):
    """A dump line that is not UTF-8 (read as bytes by orjson, then json) is named, exit 2."""
    src = generate(tmp_path / "src", messages=5, seed=5)
    r = cli("dump-commitlog", "--store", src, "--format", "jsonl", "--body", "base64")
    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(r.stdout.encode() + b'{"topic": "\xff\xfe"}\n')
    got = cli("generate", "--store", tmp_path / "g", "--from-jsonl", dump)
    n = len(r.stdout.splitlines()) + 1
    assert got.exit_code == 2 and f"{dump}:{n}: not a dump-commitlog record" in got.stderr, got.stderr
