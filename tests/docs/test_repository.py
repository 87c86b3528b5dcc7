"""The repository carries itself: the tests read nothing outside it, plain ``pytest`` runs the
fast tier and the markers the rest, CI runs every tier and lets no test skip, and the README
says which command does what."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
import tomllib

from tests.helpers import FIXTURES, ROOT, TARBALLS

TIERS = ("slow", "cluster", "fuzz")
#: The static checks, each as CI runs it (the configuration is pyproject.toml's).
STATIC_CHECKS = [".venv/bin/ruff check .", ".venv/bin/ruff format --check .", ".venv/bin/mypy"]
#: Path spellings that leave the repository: the sibling directory the fixtures were once read
#: from, a root's parent, an absolute path of this machine.
OUTSIDE = re.compile(r"""\.\./shared|["'/]shared["'/]|ROOT\.parent\b|/work/""")


def _pytest_ini() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]


def test_no_file_reads_or_names_anything_outside_the_repository():
    """Every text file git tracks (code, docs, results, CI; not the fixtures' binary stores)."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    sources = [
        ROOT / n
        for n in listed.splitlines()
        if not n.startswith("tests/fixtures/")
        and n != "tests/docs/test_repository.py"
        and (
            (ROOT / n).suffix in (".py", ".sh", ".zsh", ".md", ".toml", ".json", ".c", ".cfg", ".yaml")
            or n == ".ci/run"
        )
    ]
    assert len(sources) > 100
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in sources
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == [], found


def test_every_fixture_the_tests_name_is_in_the_repository():
    for version in ("4.9.7", "5.3.3"):
        d = FIXTURES / f"rocketmq-{version}-sample"
        assert (
            (d / "store" / "commitlog").is_dir() and (d / "broker.conf").is_file() and (d / "expected.json").is_file()
        )
    assert all((FIXTURES / f"{stem}.tar.gz").is_file() for stem in TARBALLS.values())
    assert (FIXTURES / "vectors" / "java-hash-crc.json").is_file()
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert all(f"{stem}.tar.gz" in readme for stem in TARBALLS.values())


def test_plain_pytest_deselects_the_slow_tiers_and_each_is_registered():
    ini = _pytest_ini()
    args = shlex.split(ini["addopts"])
    assert args[args.index("-m") + 1] == " and ".join(f"not {t}" for t in TIERS)
    # the fast tier on every core, one file's tests in one worker (test_contract reads its own)
    assert args[args.index("-n") + 1] == "auto" and args[args.index("--dist") + 1] == "loadfile"
    registered = {m.split(":")[0] for m in ini["markers"]}
    assert set(TIERS) <= registered


def test_ci_runs_the_readme_command_then_every_other_tier_and_allows_no_skip():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "export RMQSTORE_TEST_NO_SKIP=1" in ci
    assert "'.[test,spark]' && .venv/bin/pytest\n" in ci
    for tier in TIERS:
        assert f".venv/bin/pytest -m {tier} -n 0\n" in ci, tier
    # the reference loops, which every C kernel twins, run the fast tier too
    assert ci.endswith("\nRMQSTORE_PURE=1 .venv/bin/pytest\n")


def test_ci_runs_the_static_checks_after_the_fast_tier_and_pre_commit_the_same():
    """.ci/run makes the static checks right after the fast tier (before the slow tiers), the
    pre-commit hooks are exactly those commands run from the venv, and the test extra brings
    the tools."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    fast = next(i for i, ln in enumerate(lines) if ln.endswith("'.[test,spark]' && .venv/bin/pytest"))
    slow = lines.index(".venv/bin/pytest -m slow -n 0")
    assert [ln for ln in lines[fast + 1 : slow] if not ln.startswith("#")] == STATIC_CHECKS
    hooks = (ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    assert re.findall(r"^\s*-?\s*repo:\s*(\S+)\s*$", hooks, re.M) == ["local"]
    assert re.findall(r"^\s*entry:\s*(.+?)\s*$", hooks, re.M) == STATIC_CHECKS
    assert re.findall(r"^\s*language:\s*(\S+)\s*$", hooks, re.M) == ["system"] * len(STATIC_CHECKS)
    assert re.findall(r"^\s*pass_filenames:\s*(\S+)\s*$", hooks, re.M) == ["false"] * len(STATIC_CHECKS)
    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]["test"]
    assert {"ruff", "mypy"} <= {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0] for d in test_extra}


def test_readme_development_section_says_what_each_command_runs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    dev = text.split("\n## Development\n", 1)[1].split("\n## ", 1)[0]
    for tier in TIERS:
        assert f"pytest -m {tier}" in dev, tier
    assert ".ci/run" in dev and "from tests.helpers import" in dev
    assert re.search(r"fast tier[^\n]*\d+ s", dev, flags=re.I), "the fast tier's measured time"


@pytest.mark.slow
def test_a_skip_fails_where_ci_allows_none(tmp_path):
    """With RMQSTORE_TEST_NO_SKIP=1 (.ci/run) tests/conftest.py turns a skip into a failure
    that says why the test skipped; without it a skip stays a skip."""
    (tmp_path / "test_skip.py").write_text(
        "import pytest\n\ndef test_x():\n    pytest.skip('needs the spark extra')\n", encoding="utf-8"
    )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.conftest",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--rootdir",
        str(tmp_path),
        "--basetemp",  # its own: not the cleanup of the suite's old numbered temp dirs (GBs, minutes under load)
        str(tmp_path / "basetemp"),
        str(tmp_path / "test_skip.py"),
    ]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    skipped = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout + skipped.stderr
    failed = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=dict(env, RMQSTORE_TEST_NO_SKIP="1")
    )
    assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout + failed.stderr
    assert "allows no skip: Skipped: needs the spark extra" in failed.stdout


@pytest.mark.slow
def test_a_named_test_runs_whatever_its_tier():
    """``pytest tests/x.py::test_y`` selects what it names, a slow test too; plain ``pytest``
    leaves it out (tests/conftest.py, pytest_configure)."""
    node = "tests/safety/test_hostile_reads.py::test_commitlog_name_past_long_max"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q"]
    named = subprocess.run([*cmd, node], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert named.returncode == 0 and "tests/safety/test_hostile_reads.py: 1" in named.stdout, named.stdout
    tiered = subprocess.run([*cmd, "-m", "not slow", node], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "test_hostile_reads.py: 1" not in tiered.stdout, tiered.stdout
