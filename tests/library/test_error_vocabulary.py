"""The engine names what its caller can set in neither vocabulary: an error raised from the
store reads ``pass commitlog_file_size or broker_conf`` through the library and
``pass --commitlog-file-size or --broker-conf`` on the command line (errors.setting)."""

from __future__ import annotations

import pytest

from rmqstore_cli import StoreError, open_store
from rmqstore_cli.errors import RmqstoreError, setting, spell
from tests.helpers import cli, generate


@pytest.fixture(scope="module")
def torn(tmp_path_factory):
    """Two commit-log files of different sizes: the size cannot be told from the files."""
    store = generate(tmp_path_factory.mktemp("vocab") / "store", messages=400)
    files = sorted((store / "commitlog").iterdir())
    with open(files[0], "r+b") as f:
        f.truncate(f.seek(0, 2) // 2)
    return store


def test_the_library_names_keywords(torn):
    with pytest.raises(StoreError) as e, open_store(torn) as st:
        list(st.messages())
    text = str(e.value)
    assert "broker_conf" in text and "commitlog_file_size" in text
    assert "--" not in text and "\u27e6" not in text


def test_the_command_line_names_options(torn):
    r = cli("dump-commitlog", "--store", torn, "--format", "jsonl")
    assert r.exit_code == 3
    assert "--broker-conf" in r.stderr and "--commitlog-file-size" in r.stderr and "\u27e6" not in r.stderr


def test_spell_changes_only_settings():
    e = RmqstoreError("bad {x} at ⟦", hint=f"pass {setting('index_slots')} or {setting('path')}")
    assert str(e) == "bad {x} at ⟦; pass index_slots or path"
    assert e.describe(lambda k: "--" + k.replace("_", "-")) == "bad {x} at ⟦; pass --index-slots or --path"
    assert spell("⟦Not A Setting⟧") == "⟦Not A Setting⟧"
