"""Bytes from the store that are not UTF-8 (in a key, a tag, a property value, a body): a
table shows each such byte as ``\\xNN``, the escape it gives control characters (render.safe_text),
never the raw byte and never U+FFFD; the JSON formats are unchanged: U+FFFD in the text
fields, the exact bytes in ``properties_base64``, a text body's byte as ``\\xNN`` text."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SMALL

PROPERTIES = b"KEYS\x01good-key bad\xffkey\x02TAGS\x01tag\xfe\x02trace\x01span\xc3(\x02"
PROPERTIES += b"UNIQ_KEY\x010A0000070000C35000000000000000BB\x02"
BODY = b"body \x80\x81 end"


def _cli(cwd: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *args],
        cwd=cwd,
        capture_output=True,
        env={**e, **(env or {})},
        timeout=300,
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store of generated messages and, last, one record whose PROPERTIES and body are not
    UTF-8, written by ``generate --from-jsonl`` (``properties_base64``, ``body_base64``)."""
    d = tmp_path_factory.mktemp("notutf8")
    rec = {
        "topic": "OddTopic",
        "queue_id": 0,
        "store_timestamp": 1767232800000,
        "born_timestamp": 1767232799990,
        "born_host": "10.0.0.7:50000",
        "store_host": "10.0.0.5:10911",
        "properties_base64": base64.b64encode(PROPERTIES).decode(),
        "body_base64": base64.b64encode(BODY).decode(),
    }
    (d / "odd.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    for args in (["--messages", "20", "--seed", "2"], ["--append", "--from-jsonl", "odd.jsonl"]):
        r = _cli(d, "generate", "--store", "s", *SMALL, "--quiet", *args)
        assert r.returncode == 0, r.stderr
    return d / "s"


def _visible(out: bytes) -> str:
    text = out.decode("utf-8")  # strict: no raw byte that is not UTF-8 reached stdout
    assert "\ufffd" not in text
    return text


@pytest.mark.parametrize("columns", [None, "200", "80"], ids=["pipe", "wide", "narrow"])
def test_dump_commitlog_table_shows_each_byte_as_an_escape(store, columns):
    """Whole blocks (a pipe without COLUMNS) and record by record (a fitted table) agree."""
    env = {"COLUMNS": columns} if columns else {}
    r = _cli(store.parent, "dump-commitlog", "--store", "s", "--limit", "100", env=env)
    assert r.returncode == 0, r.stderr
    text = _visible(r.stdout)
    assert "tag\\xfe" in text and "bad\\xffkey" in text
    r = _cli(
        store.parent, "dump-commitlog", "--store", "s", "-t", "OddTopic", "--body", "text", "--properties", env=env
    )
    text = _visible(r.stdout)
    flat = "".join(x.strip() for x in text.splitlines())  # folded lines joined
    assert "trace=span\\xc3(" in flat and "TAGS=tag\\xfe" in flat
    assert "body \\x80\\x81 end" in flat


def test_index_lookup_table_shows_each_byte_as_an_escape(store):
    r = _cli(store.parent, "index-lookup", "--store", "s", "good-key", "--properties", "--body", "text")
    assert r.returncode == 0, r.stderr
    flat = "".join(x.strip() for x in _visible(r.stdout).splitlines())
    assert "good-key bad\\xffkey" in flat
    assert "trace=span\\xc3(" in flat and "body \\x80\\x81 end" in flat


def test_json_is_unchanged(store):
    """JSON: tags, keys and properties with U+FFFD for what is not UTF-8, the exact bytes in
    properties_base64; a text body with each such byte as \\xNN text; base64 exact."""
    r = _cli(store.parent, "dump-commitlog", "--store", "s", "-t", "OddTopic", "--format", "jsonl", "--body", "text")
    d = json.loads(r.stdout)
    assert d["tags"] == "tag\ufffd" and d["keys"] == ["good-key", "bad\ufffdkey"]
    assert d["properties"]["trace"] == "span\ufffd("
    assert base64.b64decode(d["properties_base64"]) == PROPERTIES and "properties_string" not in d
    assert d["body"] == "body \\x80\\x81 end"
    r = _cli(store.parent, "dump-commitlog", "--store", "s", "-t", "OddTopic", "--format", "jsonl", "--body", "base64")
    assert base64.b64decode(json.loads(r.stdout)["body"]) == BODY


def test_dump_cq_messages_table_shows_each_byte_as_an_escape(store):
    r = _cli(store.parent, "dump-cq", "--store", "s", "OddTopic", "0", "--messages", env={"COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "good-key bad\\xffkey" in _visible(r.stdout)
