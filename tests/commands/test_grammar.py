"""The one option grammar (commands/grammar.py, docs/conventions.md "One grammar"), held over
every command at once by reading the options click builds, so a new command or option that
speaks another dialect fails here."""

from __future__ import annotations

import json

import pytest
import typer.main

from rmqstore_cli.app import app
from tests.helpers import cli, generate

#: Words that once named a cap on output; the grammar's word is --limit.
OLD_CAPS = ("--max", "--top", "--max-findings")
#: What is still spoken in the old dialect, to be moved to the grammar (and out of this list);
#: a new entry here is a step back.
NOT_YET_SHORT = {"-q": {"--queue-id", "--quiet"}}
NOT_YET_CAPS = {("verify", "--max-findings"), ("index-lookup", "--max")}


def _commands():
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


def _visible_options(cmd):
    return [p for p in cmd.params if getattr(p, "opts", None) and not getattr(p, "hidden", False)]


def test_no_visible_short_flag_means_two_things():
    """-q is --quiet wherever it is shown, -n --dry-run, -t --topic: one meaning per letter."""
    meaning: dict[str, set[str]] = {}
    for cmd in _commands().values():
        for p in _visible_options(cmd):
            longs = [o for o in p.opts + p.secondary_opts if o.startswith("--")]
            for short in (o for o in p.opts if len(o) == 2):
                meaning.setdefault(short, set()).add(longs[0] if longs else p.name)
    assert {k: v for k, v in meaning.items() if len(v) > 1} == NOT_YET_SHORT


def test_no_command_shows_an_old_word_for_a_cap():
    shown = {
        (name, o) for name, cmd in _commands().items() for p in _visible_options(cmd) for o in p.opts if o in OLD_CAPS
    }
    assert shown == NOT_YET_CAPS


#: (command, options) whose old spelling is hidden: the option spelled both ways, same answer.
OLD_AND_NEW = [("stats", "--top", "--limit", "2"), ("generate", "-n", "--messages", "7")]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("grammar") / "store", "--topics", "4", messages=60)


def _where(command: str, store, tmp_path, tag: str) -> list:
    """Where a command runs: generate writes a new store of its own, the others read one."""
    return ["--store", tmp_path / tag, "--topics", "1"] if command == "generate" else ["--store", store]


def _count(command: str, stdout: str) -> int:
    """What the option counted: generate's messages written, else the rows printed."""
    return json.loads(stdout)["messages"] if command == "generate" else len(_rows(stdout))


@pytest.mark.parametrize(("command", "old", "new", "value"), OLD_AND_NEW)
def test_an_old_spelling_still_works_and_says_what_to_type(store, tmp_path, command, old, new, value):
    fresh = cli(command, *_where(command, store, tmp_path, "fresh"), new, value, "--format", "jsonl")
    aged = cli(command, *_where(command, store, tmp_path, "aged"), old, value, "--format", "jsonl")
    assert fresh.exit_code == aged.exit_code == 0, aged.stderr
    assert _count(command, aged.stdout) == _count(command, fresh.stdout) == int(value)
    if command != "generate":  # generate's summary names its own store and time
        assert aged.stdout == fresh.stdout
    assert f"{old} is deprecated; use {new}" in aged.stderr and "deprecated" not in fresh.stderr


@pytest.mark.parametrize(("command", "old", "new", "value"), OLD_AND_NEW)
def test_both_spellings_at_once_is_a_usage_error(store, tmp_path, command, old, new, value):
    r = cli(command, *_where(command, store, tmp_path, "both"), new, value, old, value)
    assert r.exit_code == 2 and f"give only {new}" in r.stderr
    assert not (tmp_path / "both").exists()  # refused before anything is written


@pytest.mark.parametrize("command", ["stats"])
def test_limit_zero_prints_no_row(store, command):
    r = cli(command, "--store", store, "--limit", "0", "--format", "jsonl")
    assert r.exit_code in (0, 1) and _rows(r.stdout) == []


def _rows(jsonl: str) -> list[str]:
    """The record lines of a JSON Lines answer (its closing summary line left out)."""
    return [line for line in jsonl.splitlines() if not line.startswith('{"summary"')]
