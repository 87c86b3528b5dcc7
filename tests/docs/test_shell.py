"""Completion scripts loaded in their real shells (bash, zsh, fish): command names, options,
enum values, and topics / queue ids read from the store given by --store.

Each shell's test skips, saying so, when that shell is not installed; .ci/run installs them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, generate

pytestmark = pytest.mark.slow  # completions in real bash, zsh and fish

COMPLETIONS = ROOT / "completions"
SHELLS = ("bash", "zsh", "fish")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RMQSTORE_", "_RMQSTORE", "_TYPER"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the venv's rmqstore
    return env


def complete_bash(words: str) -> list[str]:
    """Source completions/rmqstore.bash in bash and call the function complete -F registered."""
    script = COMPLETIONS / "rmqstore.bash"
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    prog = (
        f"source {script}; fn=$(complete -p rmqstore | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p'); "
        f"COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; "
        f"$fn rmqstore; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    r = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", prog], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.splitlines() if x]


def complete_zsh(words: str, mode: str = "source") -> list[str]:
    """An interactive zsh on a pty (zpty): compinit and completions/_rmqstore (sourced, or
    autoloaded from $fpath as installed), type, TAB."""
    r = subprocess.run(
        ["zsh", "-f", str(ROOT / "tests" / "zsh_capture.zsh"), str(COMPLETIONS / "_rmqstore"), words, mode],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [x for x in r.stdout.splitlines() if x]


def complete_fish(words: str) -> list[str]:
    """fish's own `complete -C` with completions/rmqstore.fish sourced."""
    q = words.replace("\\", "\\\\").replace("'", "\\'")
    r = subprocess.run(
        ["fish", "--no-config", "-c", f"source {COMPLETIONS / 'rmqstore.fish'}; complete -C '{q}'"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [x.split("\t")[0] for x in r.stdout.splitlines() if x]


COMPLETE = {"bash": complete_bash, "zsh": complete_zsh, "fish": complete_fish}


def test_zsh_autoloaded_from_fpath():
    """Installed the zsh way (the file on $fpath, compinit finds '#compdef rmqstore')."""
    _need("zsh")
    assert set(complete_zsh("rmqstore dump-c", "fpath")) == {"dump-commitlog", "dump-cq"}
    assert sorted(complete_zsh("rmqstore verify --format j", "fpath")) == ["json", "jsonl"]


def _need(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (apt-get install -y {shell}; .ci/run does)")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("complete") / "store", messages=200)


@pytest.mark.parametrize("shell", SHELLS)
def test_command_names(shell):
    _need(shell)
    got = COMPLETE[shell]("rmqstore dump-c")
    assert set(got) == {"dump-commitlog", "dump-cq"}, got
    assert "index-lookup" in COMPLETE[shell]("rmqstore ")


@pytest.mark.parametrize("shell", SHELLS)
def test_options(shell):
    _need(shell)
    assert COMPLETE[shell]("rmqstore dump-commitlog --from-") == ["--from-offset"]
    got = COMPLETE[shell]("rmqstore verify --")
    assert {"--store", "--deep", "--list-checks", "--format"} <= set(got), got
    assert "--from-offset" not in got  # another command's option


@pytest.mark.parametrize("shell", SHELLS)
def test_repair_command_and_its_options(shell):
    _need(shell)
    assert set(COMPLETE[shell]("rmqstore re")) == {"rebuild-index", "repair"}
    assert COMPLETE[shell]("rmqstore repair --p") == ["--pad"]
    assert {"--dry-run", "--commitlog-file-size", "--cq-file-size"} <= set(COMPLETE[shell]("rmqstore repair --"))


@pytest.mark.parametrize("shell", SHELLS)
def test_enum_values(shell):
    _need(shell)
    assert sorted(COMPLETE[shell]("rmqstore dump-commitlog --format j")) == ["json", "jsonl"]
    assert sorted(COMPLETE[shell]("rmqstore dump-commitlog --body ")) == ["base64", "hex", "none", "text"]
    assert sorted(COMPLETE[shell]("rmqstore rebuild-index --only ")) == ["cq", "index"]


@pytest.mark.parametrize("shell", SHELLS)
def test_topics_and_queue_ids_from_the_store(shell, store):
    _need(shell)
    topics = sorted(p.name for p in (store / "consumequeue").iterdir())
    pay = [t for t in topics if t.startswith("Pay")]
    assert pay, topics
    assert COMPLETE[shell](f"rmqstore dump-cq --store {store} Pay") == pay
    got = COMPLETE[shell](f"rmqstore dump-cq --store {store} ")
    assert set(got) == set(topics), got
    qids = sorted((p.name for p in (store / "consumequeue" / pay[0]).iterdir()), key=int)
    assert COMPLETE[shell](f"rmqstore dump-cq --store {store} {pay[0]} ") == qids
    assert COMPLETE[shell](f"rmqstore dump-commitlog --store {store} --topic Pay") == pay
    assert COMPLETE[shell](f"rmqstore index-lookup k -s {store} -t Pay") == pay


def test_topic_completion_never_fails_and_offers_only_valid_names(tmp_path):
    """A damaged or hostile store: no traceback, no error, and no name a shell could misread."""
    from rmqstore_cli.commands.common import complete_queue_id, complete_topic

    class Ctx:
        def __init__(self, **params):
            self.params = params

    cq = tmp_path / "consumequeue"
    for name in ("Good_Topic", "evil$(touch x)", "a b", "tab\tname", "Good|%RETRY%g"):
        (cq / name / "0").mkdir(parents=True)
    (cq / "Good_Topic" / "12").mkdir()
    (cq / "Good_Topic" / "junk").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text("{not json")
    assert complete_topic(Ctx(store=tmp_path), "") == ["Good_Topic", "Good|%RETRY%g"]
    assert complete_queue_id(Ctx(store=tmp_path, topic="Good_Topic"), "") == ["0", "12"]
    assert complete_queue_id(Ctx(store=tmp_path, topic="Good_Topic"), "1") == ["12"]
    assert complete_queue_id(Ctx(store=tmp_path, topic="../Good_Topic"), "") == []
    assert complete_topic(Ctx(store=tmp_path / "missing"), "") == []
    assert isinstance(complete_topic(None, ""), list)  # default ~/store, present or not
    assert complete_queue_id(Ctx(store=tmp_path), "") == []  # no topic given yet


@pytest.mark.parametrize("shell", SHELLS)
def test_queue_id_options_offer_the_topics_queue_ids(shell, store):
    """With --store on the line, --topic offers the store's topics and --queue-id that topic's
    queue ids (search-offset, dump-commitlog)."""
    _need(shell)
    topics = sorted(p.name for p in (store / "consumequeue").iterdir())
    assert sorted(COMPLETE[shell](f"rmqstore search-offset --store {store} --topic ")) == topics
    for topic in (t for t in topics if t in ("OrderTopic", "SCHEDULE_TOPIC_XXXX")):
        qids = sorted((p.name for p in (store / "consumequeue" / topic).iterdir()), key=int)
        assert len(qids) >= 1
        line = f"rmqstore search-offset --store {store} -t {topic} --queue-id "
        assert COMPLETE[shell](line) == qids, line
        line = f"rmqstore dump-commitlog --store {store} --topic {topic} --queue-id "
        assert COMPLETE[shell](line) == qids, line
