"""The README's two set-up commands are what CI and a new user run."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text.split("## Tour")[0], flags=re.S)


def test_readme_starts_with_exactly_two_setup_commands():
    cmds = _setup_commands()
    assert len(cmds) == 2
    assert "generate" in cmds[0] and "pytest" in cmds[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _setup_commands()[1] in ci


def test_quick_start_writes_into_a_fresh_temporary_directory():
    """A fixed shared path (/tmp/rmqstore-sample) may hold someone's store: the quick start
    makes a new directory and passes it explicitly to every command."""
    import shlex

    cmd = _setup_commands()[0]
    assert "S=$(mktemp -d)" in cmd and "/tmp/rmqstore-sample" not in cmd
    steps = [shlex.split(s) for s in cmd.split(" && ") if "rmqstore " in s]
    assert steps and all(w[w.index("--store") + 1] == "$S" for w in steps)
