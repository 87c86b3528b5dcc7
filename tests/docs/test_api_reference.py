"""The API reference is generated from the docstrings (pdoc, README "Development"): it builds
without a warning, and every public name and Store method is in it with its docstring."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

import pytest

import rmqstore_cli

#: The command README "Development" gives: the package's face only (the engine is not API).
PDOC = ("-m", "pdoc", "rmqstore_cli", "!rmqstore_cli\\..*")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    pytest.importorskip("pdoc", reason="needs pdoc (the test extra): pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("api")
    r = subprocess.run([sys.executable, *PDOC, "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "warn" not in r.stderr.lower(), r.stderr
    return (out / "rmqstore_cli.html").read_text(encoding="utf-8")


def _first_line(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.split("\n", 1)[0].strip()


@pytest.mark.parametrize("name", [n for n in rmqstore_cli.__all__ if n != "__version__"])
def test_every_public_name_is_documented(reference, name):
    obj = getattr(rmqstore_cli, name)
    assert _first_line(obj), f"{name} has no docstring"
    assert f'id="{name}"' in reference


def test_every_store_method_is_documented(reference):
    store = rmqstore_cli.Store
    public = [n for n, v in vars(store).items() if not n.startswith("_") and callable(v)]
    undocumented = [n for n in public if not _first_line(getattr(store, n))]
    assert undocumented == []
    missing = [n for n in public if f'id="Store.{n}"' not in reference]
    assert missing == []


def test_a_docstring_reaches_the_page(reference):
    """The words themselves, not only the anchors: the first line of open_store's docstring."""
    words = re.sub(r"`+", "", _first_line(rmqstore_cli.open_store)).split()[:4]
    text = re.sub(r"<[^>]+>", "", reference)
    assert " ".join(words) in " ".join(text.split())
