"""The version has one source, ``rmqstore_cli/__init__.py``'s ``__version__``: pyproject.toml
reads it from there (setuptools' dynamic metadata), so the installed package's metadata and
``rmqstore --version`` cannot disagree."""

from __future__ import annotations

import importlib.metadata

import tomllib

import rmqstore_cli
from tests.helpers import ROOT, run


def test_pyproject_takes_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"], "a second copy of the version in pyproject.toml"
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "rmqstore_cli.__version__"}


def test_installed_metadata_and_the_cli_say_the_package_version():
    assert importlib.metadata.version("rmqstore") == rmqstore_cli.__version__
    r = run("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith(f"rmqstore {rmqstore_cli.__version__} ("), r.stdout
