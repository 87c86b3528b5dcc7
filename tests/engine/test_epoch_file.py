"""The 5.x controller-mode epoch file (docs/format/ha.md#epoch-file): read as
``CheckpointFile#read`` reads it, written as ``CheckpointFile#write`` writes it, and held against
the commit log by verify (both engines) and dump-commitlog --summary."""

from __future__ import annotations

import json
import shutil
import zlib

import pytest

from tests.helpers import cli, generate


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("epochs") / "store", messages=300)


@pytest.fixture
def store(master, tmp_path):
    dst = tmp_path / "store"
    shutil.copytree(master, dst)
    return dst


def _offsets(store) -> list[int]:
    r = cli("dump-commitlog", "-s", store, "--format", "jsonl")
    return [json.loads(x)["physical_offset"] for x in r.stdout.splitlines()]


def _verify(store) -> tuple[list[dict], dict]:
    r = cli("verify", "-s", store, "--format", "jsonl")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    return rows[:-1], rows[-1]["summary"]


def test_the_doc_example_and_the_brokers_crc():
    """The bytes of docs/format/ha.md's example; the CRC is zlib's CRC-32 with its top bit
    cleared (UtilAll#crc32), over the entry lines with their separators."""
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file, parse_epoch_file

    data = encode_epoch_file([(1, 0), (2, 10485760)])
    assert data == b"2\n1815100642\n1-0\n2-10485760\n"
    assert zlib.crc32(b"1-0\n2-10485760\n") & 0x7FFFFFFF == 1815100642
    r = parse_epoch_file(None, data.decode().split("\n")[:-1])
    assert r.accepted and [(e.epoch, e.start_offset) for e in r.entries] == [(1, 0), (2, 10485760)]


@pytest.mark.parametrize(
    ("lines", "problem", "fatal"),
    [
        (["2", "1", "1-0", "2-10485760"], "CRC 1 stored, 1815100642 computed", False),
        (["3", "1815100642", "1-0", "2-10485760"], "3 entries declared, 2 found", False),
        (["2", "0", "1-0", "2-10485760"], None, False),  # NOT_CHECK_CRC_MAGIC_CODE
        (["x", "0", "1-0"], "the entry count line is not a Java int", True),
        (["1", "0", "a-0"], "line 3 'a-0' is no number", True),
        (["1", "0", "1-5-"], None, False),  # String#split drops the trailing empty part
    ],
)
def test_header_handling_is_the_brokers(lines, problem, fatal):
    from rmqstore_cli.store.layout.epoch_file import parse_epoch_file

    r = parse_epoch_file(None, lines)
    assert (r.problem, r.fatal) == (problem, fatal)


def test_a_skipped_line_counts_in_the_crc_but_not_as_an_entry():
    from rmqstore_cli.store.layout.epoch_file import parse_epoch_file

    crc = zlib.crc32(b"1-0\njunk\n") & 0x7FFFFFFF
    r = parse_epoch_file(None, ["1", str(crc), "1-0", "junk"])
    assert r.accepted and r.skipped_lines == (4,) and len(r.entries) == 1


def test_a_rejected_file_falls_back_to_the_bak(store):
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file, read_epoch_file

    (store / "epochFileCheckpoint").write_bytes(encode_epoch_file([(1, 0), (2, 50)], crc=12345))
    (store / "epochFileCheckpoint.bak").write_bytes(encode_epoch_file([(1, 0)]))
    ef = read_epoch_file(store)
    assert ef.used == "bak" and [e.epoch for e in ef.entries] == [1]
    found, summary = _verify(store)
    assert [(f["check"], f["file"]) for f in found] == [("epoch.rejected", "epochFileCheckpoint")]
    assert summary["epochs"]["file"] == "epochFileCheckpoint.bak"


def test_a_sound_epoch_file_has_no_finding_and_its_spans_match_the_dump(store):
    """generate --epoch-file 1-0,2-@100,3-end: no finding; the summary's spans are the dump's
    offsets, computed here from the full dump, not from the checker."""
    offs = _offsets(store)
    r = cli("generate", "-s", store, "--append", "--messages", "0", "--epoch-file", "1-0,2-@100,3-end", "-q")
    assert r.exit_code == 0, r.stderr
    found, summary = _verify(store)
    assert found == []
    end = summary["commitlog_end_offset"]
    assert (store / "epochFileCheckpoint").read_text().splitlines()[2:] == ["1-0", f"2-{offs[100]}", f"3-{end}"]
    spans = summary["epochs"]["epochs"]
    assert [(s["epoch"], s["start"], s["end"]) for s in spans] == [
        (1, 0, offs[100]),
        (2, offs[100], end),
        (3, end, end),
    ]
    assert summary["epochs"]["last_epoch_end"] == end and summary["epochs"]["truncate_bytes"] == 0


def test_an_epoch_beyond_the_end_is_an_error(store):
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file

    offs = _offsets(store)
    _, before = _verify(store)
    end = before["commitlog_end_offset"]
    (store / "epochFileCheckpoint").write_bytes(encode_epoch_file([(1, 0), (2, offs[10]), (3, end + 4096)]))
    found, summary = _verify(store)
    assert [(f["check"], f["offset"], f.get("epoch")) for f in found] == [("epoch.beyond-end", 5, 3)]
    assert "4096 bytes past" in found[0]["detail"] and summary["errors"] == 1
    r = cli("verify", "-s", store, "--format", "json")
    assert r.exit_code == 1


def test_epochs_out_of_order(store):
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file

    offs = _offsets(store)
    (store / "epochFileCheckpoint").write_bytes(
        encode_epoch_file([(1, 0), (3, offs[50]), (2, offs[20]), (4, offs[10])])
    )
    found, _ = _verify(store)
    assert [(f["check"], f["offset"]) for f in found] == [("epoch.order", 5), ("epoch.start-order", 6)]


def test_the_truncation_the_next_start_makes(store):
    """The log cut short at a record (a torn tail): recovery cuts there, and the epochs starting at
    or after the cut are the ones EpochFileCache#truncateSuffixByOffset drops."""
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file

    offs = _offsets(store)
    (store / "epochFileCheckpoint").write_bytes(encode_epoch_file([(1, 0), (2, offs[200]), (3, offs[250])]))
    cut = offs[199]
    last = max((f for f in (store / "commitlog").iterdir() if int(f.name) <= cut), key=lambda f: int(f.name))
    base = int(last.name)
    raw = bytearray(last.read_bytes())
    raw[cut - base : cut - base + 4] = b"\0\0\0\x07"  # a TOTALSIZE no record has: recovery stops here
    last.write_bytes(bytes(raw))
    found, summary = _verify(store)
    trunc = [f for f in found if f["check"] == "epoch.truncated"]
    assert len(trunc) == 1 and trunc[0]["epochs"] == [2, 3] and trunc[0]["physical_offset"] == cut
    assert summary["epochs"]["truncate_at"] == cut and summary["epochs"]["epochs_dropped"] == [2, 3]


@pytest.mark.slow
def test_the_pipeline_engine_reports_the_same(store):
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.pipeline.verify_tasks import verify_stores
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file
    from tests.helpers.verify_reference import verify_store

    offs = _offsets(store)
    (store / "epochFileCheckpoint").write_bytes(encode_epoch_file([(2, 0), (1, offs[20])]))
    specs = store_specs([str(store)], None, {})
    want = verify_store(specs[0], False, False, None)
    got = verify_stores(specs, False, False, None)[0]
    assert got["summary"]["epochs"] == want["summary"]["epochs"]
    assert [f["check"] for f in got["findings"]] == [f["check"] for f in want["findings"]] == ["epoch.order"]


def test_dump_commitlog_summary_counts_each_epochs_records(store):
    """Each epoch's messages in dump-commitlog --summary: the full dump's records whose offset
    lies in [start, next start) (the last up to the end), counted here from the offsets."""
    from rmqstore_cli.store.layout.epoch_file import encode_epoch_file

    offs = _offsets(store)
    (store / "epochFileCheckpoint").write_bytes(encode_epoch_file([(4, 0), (5, offs[77]), (9, offs[201])]))
    r = cli("dump-commitlog", "-s", store, "--summary", "--format", "json")
    s = json.loads(r.stdout)
    got = [(e["epoch"], e["messages"]) for e in s["epochs"]["epochs"]]
    assert got == [(4, 77), (5, 201 - 77), (9, len(offs) - 201)]
    assert sum(n for _, n in got) == s["messages"] == len(offs)
