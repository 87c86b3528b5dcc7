"""The option group of the store a read command reads (commands/source_options.py): the
four commands that declare it show its options where they stood, and the group's values
reach the engine (sizes checked, --allow-odd-size's hint and effect)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import typer.main

from rmqstore_cli.app import app
from tests.helpers import cli, generate

GROUP = ["store", "broker_conf", "commitlog_file_size", "cq_file_size", "allow_odd_size"]


def params(name: str) -> list[str]:
    group = typer.main.get_command(app)
    cmd = group.get_command(typer.Context(group), name)  # type: ignore[attr-defined]
    return [p.name for p in cmd.params]


@pytest.mark.parametrize(
    "name,cq,after",
    [
        ("pop", False, "fmt"),
        ("transactions", False, "fmt"),
        ("consumer-progress", True, "fmt"),
        ("stats", True, "sample"),
    ],
)
def test_the_group_stands_in_place_of_source(name: str, cq: bool, after: str) -> None:
    names = params(name)
    want = [n for n in GROUP if cq or n != "cq_file_size"]
    at = names.index("store")
    assert "source" not in names and names[at : at + len(want) + 1] == [*want, after]


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store whose first commit-log file was cut short (a torn copy)."""
    s = generate(tmp_path_factory.mktemp("odd") / "s", "--broker-version", "5", "--pop-messages", "20", messages=300)
    first = sorted((s / "commitlog").iterdir())[0]
    copy = s.parent / "torn"
    shutil.copytree(s, copy)
    os.truncate(copy / "commitlog" / first.name, first.stat().st_size - 1000)
    return copy


@pytest.mark.parametrize("name", ["pop", "transactions", "stats"])
def test_odd_size_refused_with_the_hint_then_read_with_the_flag(odd: Path, name: str) -> None:
    r = cli(name, "--store", str(odd), "--commitlog-file-size", "65536")
    assert r.exit_code == 3 and "--allow-odd-size" in r.stderr, r.stderr
    r = cli(name, "--store", str(odd), "--commitlog-file-size", "65536", "--allow-odd-size", "--format", "jsonl")
    assert r.exit_code in (0, 1) and "read up to its real length (--allow-odd-size)" in r.stderr, r.stderr
