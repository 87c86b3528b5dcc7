"""The engine's shape (issue #17) held where the restructuring left it: one owner per
on-disk object, no private name used across modules, every layout from ``formats/``, no
long function, no dead code, and every package installed. Figures: tests/helpers/codeshape.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tomllib

from tests.helpers import codeshape

SHAPE = codeshape.measure()
#: The largest module after the restructuring was 939 lines (store/write/rebuild.py); verify.py was 2 229.
LARGEST_MODULE = 1000


def test_no_function_runs_over_80_lines():
    assert SHAPE.long_functions == []


def test_no_private_name_crosses_a_module():
    assert SHAPE.private_imports == []
    assert SHAPE.private_reads == []


def test_every_struct_format_and_dtype_comes_from_formats():
    assert SHAPE.format_strings == []


def test_no_module_grows_into_a_grab_bag():
    over = {name: n for name, n in SHAPE.modules.items() if n > LARGEST_MODULE}
    assert over == {}


#: A command parses options, calls the library or the engine and hands the results to the
#: output layer (sqlite-utils' shape): it fits on a few screens.
COMMAND_MODULE = 150


def test_every_command_module_is_short():
    commands = sorted(p for p in (codeshape.ROOT / "commands").glob("*.py") if "\ndef register(" in p.read_text())
    assert len(commands) >= 16
    assert {p.name: n for p in commands if (n := p.read_text().count("\n")) > COMMAND_MODULE} == {}


def test_no_import_circle():
    """No two modules need each other, lazily or not: each can be read, tested and moved
    knowing only what is below it."""
    assert codeshape.circles(SHAPE) == []


def test_no_import_points_up_a_layer():
    """formats < errors/times/stdio < store < pipeline/render < api < commands < app
    (tests/helpers/codeshape.py LAYERS): the engine never reaches for the CLI's pieces."""
    assert codeshape.up_arrows(SHAPE) == []


def test_no_engine_error_names_a_command_line_option():
    """The engine is a library first: its errors name settings (errors.setting), which the
    library spells as keywords and the command line as options."""
    assert codeshape.options_in_engine_errors() == []


def test_the_shape_check_sees_what_it_forbids(tmp_path, monkeypatch):
    """The measure is not vacuous: planted violations are found."""
    pkg = tmp_path / "rmqstore_cli"
    pkg.mkdir()
    (pkg / "bad.py").write_text(
        "import struct\nfrom rmqstore_cli.store.queues.index import _HEADER\n"
        "def f(w):\n    return struct.unpack_from('>iq', w._buf)\n" + "def g():\n" + "    x = 1\n" * 81
    )
    monkeypatch.setattr(codeshape, "ROOT", tmp_path)
    monkeypatch.setattr(codeshape, "PACKAGES", ("rmqstore_cli",))
    s = codeshape.measure()
    assert len(s.private_imports) == 1 and len(s.private_reads) == 1
    assert len(s.format_strings) == 1 and len(s.long_functions) == 1


def test_the_graph_check_sees_circles_and_up_arrows(tmp_path, monkeypatch):
    """A lazy import closing a loop is a circle; a store module importing a command is an arrow up."""
    store = tmp_path / "rmqstore_cli" / "store"
    store.mkdir(parents=True)
    (store / "a.py").write_text("from rmqstore_cli.store.b import x\n")
    (store / "b.py").write_text("def f():\n    from rmqstore_cli.store import a\n")
    (store / "c.py").write_text("from rmqstore_cli.commands.common import fail\n")
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "common.py").write_text("def fail():\n    pass\n")
    monkeypatch.setattr(codeshape, "ROOT", tmp_path)
    monkeypatch.setattr(codeshape, "PACKAGES", ("rmqstore_cli", "commands"))
    s = codeshape.measure()
    assert codeshape.circles(s) == [["rmqstore_cli.store.a", "rmqstore_cli.store.b"]]
    assert codeshape.up_arrows(s) == ["rmqstore_cli.store.c -> rmqstore_cli.commands.common"]
    for sub in ("files", "answers"):  # store/'s sub-packages are layers too: files/ is below answers/
        (store / sub).mkdir()
    (store / "files" / "x.py").write_text("def f():\n    from rmqstore_cli.store.answers.y import z\n")
    (store / "answers" / "y.py").write_text("from rmqstore_cli.store.files.x import f\nz = f\n")
    arrows = codeshape.up_arrows(codeshape.measure())
    assert "rmqstore_cli.store.files.x -> rmqstore_cli.store.answers.y" in arrows
    assert "rmqstore_cli.store.answers.y -> rmqstore_cli.store.files.x" not in arrows
    (store / "d.py").write_text("def f():\n    raise ValueError('x', hint='pass --broker-conf')\n")
    assert len(codeshape.options_in_engine_errors(tmp_path)) == 1


def test_no_dead_code():
    """vulture finds nothing that tests/vulture_whitelist.py does not explain."""
    pytest.importorskip("vulture", reason="needs vulture (the test extra): pip install -e '.[test]'")
    root = codeshape.ROOT
    r = subprocess.run(
        [sys.executable, "-m", "vulture", *codeshape.PACKAGES, "tests/vulture_whitelist.py", "--min-confidence", "60"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert r.stdout == "", r.stdout


def test_every_package_directory_is_installed():
    """A package missing from pyproject's list works in the editable install the tests use
    and is absent from a wheel."""
    root = codeshape.ROOT
    meta = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {v: k for k, v in meta["package-dir"].items()}
    found = set()
    for init in (p for pkg in codeshape.PACKAGES for p in (root / pkg).rglob("__init__.py")):
        rel = init.parent.relative_to(root).as_posix()
        top, _, rest = rel.partition("/")
        name = dirs.get(top, top) + ("." + rest.replace("/", ".") if rest else "")
        found.add(name)
    assert found <= set(meta["packages"]), found - set(meta["packages"])
