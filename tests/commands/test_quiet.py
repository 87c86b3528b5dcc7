"""--quiet (-q) on every command that writes: nothing on stderr but errors (docs/conventions.md
"One grammar"). Each case is a run whose stderr says something without it: the store taken
from RMQSTORE_STORE (one line naming it), or generate --append's count."""

from __future__ import annotations

import pytest

from tests.helpers import generate, run


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("quiet") / "store", messages=200)


def _cases(store, tmp_path) -> dict[str, list[str]]:
    first = sorted((store / "commitlog").iterdir())[0]
    return {
        "rebuild-index": ["rebuild-index", "--output", str(tmp_path / "rebuilt")],
        "export": ["export", "--output", str(tmp_path / "parquet")],
        "repair": ["repair", "--pad", str(first), "--dry-run"],
        "expire": ["expire", "--dry-run", "--reserved-hours", "0"],
    }


@pytest.mark.parametrize("command", ["rebuild-index", "export", "repair", "expire"])
def test_quiet_leaves_stderr_empty(store, tmp_path, command):
    args = _cases(store, tmp_path)[command]
    loud = run(*args, env={"RMQSTORE_STORE": str(store)})
    assert loud.returncode == 0, loud.stderr
    assert b"RMQSTORE_STORE" in loud.stderr  # without --quiet: where the store came from
    for flag, where in (("--quiet", "q1"), ("-q", "q2")):
        hushed = run(*[a.replace(str(tmp_path), str(tmp_path / where)) for a in args], flag,
                     env={"RMQSTORE_STORE": str(store)})  # fmt: skip
        assert hushed.returncode == 0, hushed.stderr
        assert hushed.stderr == b""


def test_generate_quiet_says_no_count(tmp_path):
    store = generate(tmp_path / "store", messages=50)
    loud = run("generate", "--store", str(store), "--append", "--messages", "10")
    assert loud.returncode == 0 and b"appended 10 to a store of" in loud.stderr
    hushed = run("generate", "--store", str(store), "--append", "-m", "10", "-q")
    assert hushed.returncode == 0 and hushed.stderr == b""
