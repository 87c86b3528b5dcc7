"""No option is silently ignored in one output format: --body and --properties show in the
tables of dump-commitlog and index-lookup (lines under each row, as the jsonl decodes
them), and a combination that would change nothing is refused with exit 2 and one line."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli

BODY = "    body: "
PROPS = "    properties: "


def _lines(r, prefix: str) -> list[str]:
    assert r.exit_code == 0, r.stderr
    return [x[len(prefix) :] for x in r.stdout.splitlines() if x.startswith(prefix)]


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


def _same_start(shown: str, whole: str) -> None:
    """A table's line holds the jsonl's text, whole or cut with an ellipsis (plain ASCII here)."""
    assert shown == whole or (shown.endswith("\u2026") and whole.startswith(shown[:-1])), (shown[:80], whole[:80])


@pytest.mark.parametrize("mode", ["text", "hex", "base64"])
def test_dump_commitlog_table_shows_the_body(small_store_master, mode):
    args = ("dump-commitlog", "--store", small_store_master, "--limit", "20", "--body", mode)
    bodies = _lines(cli(*args), BODY)
    recs = _jsonl(*args)
    assert len(bodies) == len(recs) == 20
    for shown, rec in zip(bodies, recs, strict=True):
        _same_start(shown, rec["body"])


def test_dump_commitlog_table_shows_the_properties_when_asked(small_store_master):
    args = ("dump-commitlog", "--store", small_store_master, "--limit", "10")
    plain = cli(*args)
    assert _lines(plain, PROPS) == [] and _lines(plain, BODY) == []  # the table's default: one line a record
    props = _lines(cli(*args, "--properties"), PROPS)
    recs = _jsonl(*args)  # the JSON formats: properties by default
    assert len(props) == len(recs) == 10
    for shown, rec in zip(props, recs, strict=True):
        _same_start(shown, " ".join(f"{k}={v}" for k, v in rec["properties"].items()))
    assert all("properties" not in r for r in _jsonl(*args, "--no-properties"))


def test_dump_commitlog_help_example_shows_a_body(small_store_master):
    """The --help example: ``--from-offset N --body text --limit 1`` prints that record's body."""
    r = cli("dump-commitlog", "--store", small_store_master, "--from-offset", "0", "--body", "text", "--limit", "1")
    assert len(_lines(r, BODY)) == 1


@pytest.mark.parametrize(
    "extra, needle",
    [
        (("--decompress",), "--decompress changes only the body"),
        (("--max-decompressed", "100"), "--max-decompressed caps what --decompress inflates"),
        (("--max-decompressed", "100", "--body", "text"), "--max-decompressed caps"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_dump_commitlog_refuses_options_that_change_nothing(small_store_master, extra, needle, fmt):
    r = cli("dump-commitlog", "--store", small_store_master, "--limit", "1", "--format", fmt, *extra)
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert line.startswith("rmqstore: error: ") and needle in line


def test_index_lookup_table_shows_body_and_properties(small_store_master):
    (first,) = _jsonl("dump-commitlog", "--store", small_store_master, "--limit", "1")
    key = first["keys"][0]
    args = ("index-lookup", key, "--store", small_store_master, "--body", "hex", "--properties")
    r = cli(*args)
    hits = _jsonl(*args)
    bodies, props = _lines(r, BODY), _lines(r, PROPS)
    assert len(bodies) == len(props) == len(hits) >= 1
    for shown, h in zip(bodies, hits, strict=True):
        _same_start(shown, h["message"]["body"])
    plain = cli("index-lookup", key, "--store", small_store_master)
    assert _lines(plain, BODY) == [] and _lines(plain, PROPS) == []


def test_decode_msgid_refuses_a_body_it_would_not_show(small_store_master):
    (first,) = _jsonl("dump-commitlog", "--store", small_store_master, "--limit", "1", "--body", "hex")
    for args, needle in (
        (("--store", small_store_master, "--body", "text"), "--body shows in --format json or jsonl only"),
        (("--body", "text", "--format", "jsonl"), "--body reads the messages from a store"),
    ):
        r = cli("decode-msgid", first["msg_id"], *args)
        assert r.exit_code == 2 and r.stdout == "", args
        (line,) = r.stderr.splitlines()
        assert line.startswith("rmqstore: error: ") and needle in line
    (d,) = _jsonl("decode-msgid", first["msg_id"], "--store", small_store_master, "--body", "hex")
    assert d["messages"][0]["body"] == first["body"]  # the JSON formats still carry it
