"""The optional C extensions are never missing silently: ``rmqstore --version`` says, one line
each, whether they are in use and if not why (RMQSTORE_PURE, not built, the import's error),
verify's summary holds the same (``c_extensions``), and setup.py warns loudly on stderr when
it cannot build them."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys

import pytest

from rmqstore_cli.store.files import extload
from tests.helpers import ROOT

EXTENSIONS = ("_ckernels", "_cjson", "_mapguard")


def _cli(args: list[str], code: str | None = None, pure: str = "0") -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "rmqstore_cli", *args]
    env = dict(os.environ, RMQSTORE_PURE=pure)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def _states(stdout: str) -> dict[str, str]:
    prefix = "  C extension "
    return dict(line[len(prefix) :].split(": ", 1) for line in stdout.splitlines() if line.startswith(prefix))


def test_version_says_every_extension_is_in_use():
    """The test run has them built: each is in use, and no advice to build them."""
    r = _cli(["--version"])
    assert r.returncode == 0, r.stderr
    assert _states(r.stdout) == dict.fromkeys(EXTENSIONS, "in use"), r.stdout
    assert "C loops" in r.stdout.splitlines()[0] and extload.BUILD_HINT not in r.stdout


def test_version_under_rmqstore_pure_says_why_the_speed_paths_are_off():
    r = _cli(["--version"], pure="1")
    assert r.returncode == 0, r.stderr
    assert _states(r.stdout) == {
        "_ckernels": "RMQSTORE_PURE is set",
        "_cjson": "RMQSTORE_PURE is set",
        "_mapguard": "in use",  # the SIGBUS guard is not a speed path
    }, r.stdout
    assert "reference loops: RMQSTORE_PURE is set" in r.stdout.splitlines()[0]


#: _ckernels' import fails with an error of its own (a binary for another Python, a missing symbol)
BROKEN = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "rmqstore_cli.store._ckernels":
            raise ImportError("undefined symbol: PyFake_Thing")
sys.meta_path.insert(0, Refuse())
from rmqstore_cli.app import main
sys.argv[0] = "rmqstore"
main()
"""


def test_version_names_the_import_error_of_a_broken_extension():
    r = _cli(["--version"], BROKEN)
    assert r.returncode == 0, r.stderr
    states = _states(r.stdout)
    assert states["_ckernels"] == "failed to import: undefined symbol: PyFake_Thing", r.stdout
    assert states["_cjson"] == states["_mapguard"] == "in use"
    first = r.stdout.splitlines()[0]
    assert "reference loops: the C extension failed to import: undefined symbol: PyFake_Thing" in first
    assert extload.BUILD_HINT in r.stdout


def test_load_tells_not_built_from_a_failed_import(monkeypatch):
    """In process: a module that is not there is "not built"; one whose import raises is
    "failed to import: " with the error; one that imports is returned."""

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name == "rmqstore_cli.store._broken_for_the_test":
                raise ImportError("wrong ELF class: ELFCLASS32")
            return None

    monkeypatch.setattr(sys, "meta_path", [Refuse(), *sys.meta_path])
    broken = extload.load("rmqstore_cli.store._broken_for_the_test")
    assert broken.module is None and broken.problem == "failed to import: wrong ELF class: ELFCLASS32"
    absent = extload.load("rmqstore_cli.store._never_built_for_the_test")
    assert absent.module is None and absent.problem == extload.NOT_BUILT
    here = extload.load("json")
    assert here.module is not None and here.problem == ""
    assert extload.phrase(extload.NOT_BUILT) == "is not built"


def test_fast_paths_report_a_failed_kernels_import(monkeypatch):
    """FastPaths.extensions passes on the kernels' recorded problem (what --version and
    verify's summary print), and RMQSTORE_PURE wins over it for the speed paths."""
    from rmqstore_cli.store.files import kernels
    from rmqstore_cli.store.files.fastpaths import FastPaths

    monkeypatch.setattr(kernels, "BUILT", False)
    monkeypatch.setattr(kernels, "PROBLEM", "failed to import: undefined symbol: X")
    assert FastPaths(pure=False).extensions()["_ckernels"] == "failed to import: undefined symbol: X"
    assert FastPaths(pure=False).describe() == "reference loops: the C extension failed to import: undefined symbol: X"
    assert FastPaths(pure=True).extensions()["_ckernels"] == "RMQSTORE_PURE is set"


@pytest.mark.parametrize("pure", ["0", "1"])
def test_verify_summary_says_which_loops_ran(small_store_master, pure):
    r = _cli(["verify", "--store", str(small_store_master), "--format", "json"], pure=pure)
    summary = json.loads(r.stdout)["summary"]
    want = "in use" if pure == "0" else "RMQSTORE_PURE is set"
    assert summary["c_extensions"] == {"_ckernels": want, "_cjson": want, "_mapguard": "in use"}, summary


def test_setup_warns_loudly_when_it_cannot_build(tmp_path, monkeypatch, capfd):
    """setup.py's build_ext with a compiler that fails (CC=false): the build goes on (the
    extensions are optional) and stderr has the warning naming the extension and what to
    install."""
    import setuptools
    from setuptools import Distribution, Extension

    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    build_ext = runpy.run_path(str(ROOT / "setup.py"))["BuildExt"]
    (tmp_path / "a.c").write_text("int a;\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CC", "false")
    ext = Extension("t._a", ["a.c"], optional=True)
    dist = Distribution({"name": "t", "ext_modules": [ext], "cmdclass": {"build_ext": build_ext}})
    cmd = dist.get_command_obj("build_ext")
    cmd.build_lib, cmd.build_temp = str(tmp_path / "lib"), str(tmp_path / "tmp")
    dist.run_command("build_ext")
    err = capfd.readouterr().err
    assert "WARNING" in err and "NOT built" in err and "t._a" in err, err
    assert "C compiler" in err and "python3-dev" in err
    assert not list((tmp_path / "lib").rglob("*.so"))
