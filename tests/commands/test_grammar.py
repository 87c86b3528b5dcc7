"""The one option grammar (commands/grammar.py, docs/conventions.md "One grammar"), held over
every command at once by reading the options click builds, so a new command or option that
speaks another dialect fails here."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import typer.main

from rmqstore_cli.app import app
from tests.helpers import cli, generate

#: Words that once named a cap on output; the grammar's word is --limit.
OLD_CAPS = ("--max", "--top", "--max-findings")
#: What is still spoken in the old dialect, to be moved to the grammar (and out of this list);
#: a new entry here is a step back.
NOT_YET_SHORT: dict[str, set[str]] = {}
NOT_YET_CAPS: set[tuple[str, str]] = set()


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


#: (command, old spelling, new spelling, value) of options whose old spelling is hidden: the
#: same output either way (a cap: that many rows).
OLD_AND_NEW = [
    ("stats", "--top", "--limit", "2"),
    ("index-lookup", "--max", "--limit", "2"),
    ("dump-cq", "--from", "--from-offset", "3"),
    ("search-offset", "-q", "--queue-id", "0"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("grammar") / "store", "--topics", "4", messages=60)


@pytest.fixture(scope="module")
def words(store):
    """The words each command needs besides the option tried: a key many messages carry, a queue."""
    msgs = [json.loads(x) for x in cli("dump-commitlog", "--store", store, "--format", "jsonl").stdout.splitlines()]
    keys = Counter(k for m in msgs for k in m["keys"])
    m = msgs[0]
    return {
        "stats": [],
        "index-lookup": [keys.most_common(1)[0][0]],
        "dump-cq": [m["topic"], str(m["queue_id"])],
        "search-offset": ["-t", m["topic"], "--time", "0"],
        "verify": [],
    }


@pytest.mark.parametrize(("command", "old", "new", "value"), OLD_AND_NEW)
def test_an_old_spelling_still_works_and_says_what_to_type(store, words, command, old, new, value):
    fresh = cli(command, *words[command], "--store", store, new, value, "--format", "jsonl")
    aged = cli(command, *words[command], "--store", store, old, value, "--format", "jsonl")
    assert fresh.exit_code == aged.exit_code == 0, aged.stderr
    assert aged.stdout == fresh.stdout and _rows(fresh.stdout)
    assert new != "--limit" or len(_rows(fresh.stdout)) == int(value)
    assert f"{old} is deprecated; use {new}" in aged.stderr and "deprecated" not in fresh.stderr


def test_generate_n_is_the_old_messages(tmp_path):
    """-n is --dry-run wherever it is shown; generate's old -n (its --messages) still writes
    that many, with the note, and both spellings at once write nothing."""
    fresh = cli("generate", "--store", tmp_path / "fresh", "--topics", "1", "-m", "7", "--format", "json")
    aged = cli("generate", "--store", tmp_path / "aged", "--topics", "1", "-n", "7", "--format", "json")
    assert fresh.exit_code == aged.exit_code == 0, aged.stderr
    assert json.loads(aged.stdout)["messages"] == json.loads(fresh.stdout)["messages"] == 7
    assert "-n is deprecated; use --messages" in aged.stderr and "deprecated" not in fresh.stderr
    both = cli("generate", "--store", tmp_path / "both", "-m", "7", "-n", "7")
    assert both.exit_code == 2 and not (tmp_path / "both").exists()


def test_verify_max_findings_is_the_old_limit(store):
    """verify's per-check cap (the store is sound: the same empty answer, and the note)."""
    fresh = cli("verify", "--store", store, "--limit", "1", "--format", "jsonl")
    aged = cli("verify", "--store", store, "--max-findings", "1", "--format", "jsonl")
    assert fresh.exit_code == aged.exit_code == 0 and aged.stdout == fresh.stdout
    assert "--max-findings is deprecated; use --limit" in aged.stderr


@pytest.mark.parametrize(("command", "old", "new", "value"), OLD_AND_NEW)
def test_both_spellings_at_once_is_a_usage_error(store, words, command, old, new, value):
    r = cli(command, *words[command], "--store", store, new, value, old, value)
    assert r.exit_code == 2 and f"give only {new}" in r.stderr


@pytest.mark.parametrize("command", ["stats", "index-lookup", "dump-cq", "verify"])
def test_limit_zero_prints_no_row(store, words, command):
    r = cli(command, *words[command], "--store", store, "--limit", "0", "--format", "jsonl")
    assert r.exit_code in (0, 1) and _rows(r.stdout) == []


def _rows(jsonl: str) -> list[str]:
    """The record lines of a JSON Lines answer (its closing summary line left out)."""
    return [line for line in jsonl.splitlines() if not line.startswith('{"summary"')]


#: The options that take a time, read against --now when relative (-2h) or 'now'.
TIME_OPTIONS = {"--begin", "--end", "--time"}


def test_every_command_that_takes_a_time_takes_now():
    """A relative time is read against the clock unless --now says otherwise: forensics on a
    snapshot needs --now wherever a time can be given."""
    for name, cmd in _commands().items():
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if opts & TIME_OPTIONS:
            assert "--now" in opts, name


@pytest.fixture(scope="module")
def last_stored(store):
    """The store time of the store's last message (epoch ms)."""
    out = cli("dump-commitlog", "--store", store, "--format", "jsonl").stdout.splitlines()
    return max(json.loads(x)["store_timestamp"] for x in out)


@pytest.mark.parametrize(
    ("command", "when"),
    [
        ("dump-commitlog", ["--begin", "-1h"]),
        ("index-lookup", ["--begin", "-1h"]),
        ("search-offset", ["--time", "-1h"]),
    ],
)
def test_now_is_what_a_relative_time_is_read_against(store, words, last_stored, command, when):
    """-1h before a --now just after the last message takes messages in; before a --now a
    year later, none: the answer follows --now, not the clock."""
    base = {"dump-commitlog": [], "index-lookup": words["index-lookup"], "search-offset": words["search-offset"][:2]}
    argv = [command, *base[command], "--store", store, *when]
    soon = cli(*argv, "--now", str(last_stored + 60_000), "--format", "jsonl")
    late = cli(*argv, "--now", str(last_stored + 365 * 86_400_000), "--format", "jsonl")
    assert soon.exit_code == 0, soon.stderr
    assert soon.stdout != late.stdout
    if command != "search-offset":  # search-offset answers max offset when nothing is that recent
        assert _rows(soon.stdout) and late.exit_code == 1 and _rows(late.stdout) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["expire", "--dry-run"],
        ["dump-commitlog", "--begin", "-1h"],
        ["dump-timer"],
    ],
)
def test_an_empty_now_is_refused_alike_everywhere(store, argv):
    """``--now ""`` is not the clock: every command reads --now the one way (grammar.clock),
    a usage error (exit 2) in one line, before anything is read or deleted."""
    r = cli(*argv, "--store", store, "--now", "")
    assert r.exit_code == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "--now" in r.stderr
