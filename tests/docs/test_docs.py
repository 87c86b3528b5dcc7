"""--help, man pages and completions come from one source and stay current; start-up is light."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqstore_cli.manpages import completion_scripts, pages
from tests.helpers import ROOT, cli


def test_man_pages_are_current():
    """Regenerate with: python -m rmqstore_cli.manpages ."""
    for name, text in pages().items():
        p = ROOT / "man" / name
        assert p.exists(), f"{p} missing: run python -m rmqstore_cli.manpages ."
        assert p.read_text(encoding="utf-8") == text, f"{p} is stale: run python -m rmqstore_cli.manpages ."
    assert {p.name for p in (ROOT / "man").glob("*.1")} == set(pages())


def test_completion_scripts_are_current():
    for name, text in completion_scripts().items():
        assert (ROOT / "completions" / name).read_text(encoding="utf-8") == text, name


@pytest.mark.skipif(shutil.which("groff") is None and shutil.which("man") is None, reason="no groff or man here")
def test_man_pages_render_cleanly():
    for p in (ROOT / "man").glob("*.1"):
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(p)], capture_output=True, text=True)
        else:
            r = subprocess.run(
                ["man", "-l", str(p)],
                capture_output=True,
                text=True,
                env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"),
            )
        assert r.returncode == 0 and "warning" not in r.stderr.lower(), (p.name, r.stderr)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("man") is None, reason="no man here (apt-get install man-db)")
def test_man_l_renders_each_page_without_complaint():
    """What docs/install.md tells people to run: man -l man/rmqstore.1 (groff warnings on, -ww)."""
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", MANROFFOPT="-ww", LC_ALL="C.UTF-8")
    for p in sorted((ROOT / "man").glob("*.1")):
        r = subprocess.run(["man", "-l", str(p)], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0 and r.stderr == "", (p.name, r.stderr)
        assert "NAME" in r.stdout and "SYNOPSIS" in r.stdout, p.name


def _bash_complete(words: str) -> list[str]:
    script = ROOT / "completions" / "rmqstore.bash"
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    prog = (
        f"source {script}; COMP_WORDS=({words}); COMP_CWORD={cword}; "
        f"_rmqstore_completion rmqstore; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, env=env, timeout=60)
    return r.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_of_commands_options_and_enum_values():
    assert "dump-commitlog" in _bash_complete("rmqstore dump-c")
    assert "--from-offset" in _bash_complete("rmqstore dump-commitlog --from-")
    assert _bash_complete("rmqstore dump-commitlog --format j") == ["jsonl", "json"]


def test_every_command_has_help_with_examples():
    r = cli("--help")
    assert r.exit_code == 0
    for name in pages():
        if name == "rmqstore.1":
            continue
        sub = name[len("rmqstore-") : -2]
        h = cli(sub, "--help")
        assert h.exit_code == 0 and "Examples" in h.stdout, sub


def _example_lines(cmd) -> list[str]:
    return [ln.strip() for ln in (cmd.epilog or "").splitlines() if ln.startswith("  ") and "rmqstore " in ln]


def test_every_example_parses():
    """Each example command line in --help (and so in the man pages) is accepted by the CLI
    as it is today: option names, enum values, argument counts. Parsed, not run."""
    import shlex

    import typer

    from rmqstore_cli.app import app

    group = typer.main.get_command(app)
    root = group.make_context("rmqstore", ["--debug", "verify"])
    seen = 0
    for name in group.list_commands(root):
        cmd = group.get_command(root, name)
        lines = _example_lines(cmd)
        assert len(lines) >= 2, f"{name}: fewer than two examples"
        for line in lines:
            for seg in line.split(" | "):
                words = shlex.split(seg.split("  #")[0])
                if words[:1] != ["rmqstore"]:
                    continue
                assert words[1] == name or words[1] in group.list_commands(root), line
                sub = group.get_command(root, words[1])
                sub.make_context(words[1], words[2:], parent=root)  # raises on an unknown option or bad value
                seen += 1
    assert seen >= 2 * len(group.list_commands(root))


def test_top_level_help_summaries_are_the_commands_own():
    """``rmqstore --help`` prints app.COMMANDS' summaries without loading the command modules:
    each must shorten exactly as the loaded command's own help does, at every width."""
    import typer
    from typer._click.utils import make_default_short_help

    from rmqstore_cli.app import COMMANDS, app

    group = typer.main.get_command(app)
    root = group.make_context("rmqstore", ["verify"])
    for name, _, summary in COMMANDS:
        cmd = group.get_command(root, name)
        for limit in (30, 45, 60, 74, 100, 400):
            assert make_default_short_help(summary, limit) == cmd.get_short_help_str(limit), (name, limit)


def test_top_level_help_imports_no_command_module():
    """The instant --help: no module under rmqstore_cli.commands but how a command ends (exits),
    the option grammar it speaks and its stderr lines is imported."""
    code = (
        "import sys, contextlib, io\n"
        "from rmqstore_cli.app import main\n"
        "sys.argv = ['rmqstore', '--help']\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    main()\n"
        "print(sorted(m for m in sys.modules if m.startswith('rmqstore_cli.commands.')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    shared = ["exits", "grammar", "lines"]
    assert r.stdout.strip() == str([f"rmqstore_cli.commands.{m}" for m in shared])


def test_help_keeps_each_example_on_one_line():
    """A narrow terminal re-wraps prose, never an example command (copy-paste must work)."""
    import typer

    from rmqstore_cli.app import app

    group = typer.main.get_command(app)
    root = group.make_context("rmqstore", ["verify"])
    for name in group.list_commands(root):
        r = subprocess.run(
            [sys.executable, "-m", "rmqstore_cli", name, "--help"],
            capture_output=True,
            text=True,
            env=dict(os.environ, COLUMNS="60"),
            timeout=60,
        )
        shown = {ln.strip() for ln in r.stdout.splitlines()}
        for line in _example_lines(group.get_command(root, name)):
            assert line in shown, (name, line)


def test_version():
    r = cli("--version")
    assert r.exit_code == 0 and r.stdout.startswith("rmqstore ")


def _imported(argv: list[str], modules: tuple[str, ...]) -> list[str]:
    code = (
        f"import sys; sys.argv={['rmqstore', *argv]!r}\n"
        "from rmqstore_cli.app import main\n"
        "try:\n main()\nexcept SystemExit:\n pass\n"
        f"print('HEAVY', [m for m in {modules!r} if m in sys.modules], file=sys.stderr)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("HEAVY ")]
    assert line, r.stderr
    return eval(line[-1][len("HEAVY ") :])  # a list literal we printed ourselves


def test_help_does_not_import_heavy_modules():
    heavy = ("numpy", "numba", "pyspark", "pyarrow", "construct", "rich.table")
    assert _imported(["--help"], heavy) == []
    assert _imported(["decode-msgid", "--help"], heavy) == []


def test_small_dump_does_not_load_the_compiler(tiny_store):
    """A small dump (the C renderer, or the reference) imports numpy, never numba."""
    store, _ = tiny_store
    assert _imported(["dump-commitlog", "--store", str(store), "--format", "jsonl"], ("numpy", "numba")) == ["numpy"]


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory):
    import json

    from tests.helpers import generate

    store = generate(tmp_path_factory.mktemp("startup") / "store", messages=100)
    m = json.loads(cli("dump-commitlog", "--store", store, "--limit", "1", "--format", "jsonl").stdout)
    return store, [m["msg_id"], m["uniq_key"]]


@pytest.mark.parametrize("fmt", ["table", "jsonl"])
def test_decode_msgid_does_not_import_numpy_or_spark(fmt, tiny_store):
    """decode-msgid is pasted into shells all day: no numpy, Spark or Arrow, with or without --store
    (the store is read through MessageStore, which needs numpy only for consume queues)."""
    heavy = ("numpy", "pyspark", "pyarrow", "rich.progress")
    store, ids = tiny_store  # a message's offset msgId and UNIQ_KEY: both are found
    assert _imported(["decode-msgid", *ids, "--format", fmt], heavy + ("construct",)) == []
    assert _imported(["decode-msgid", *ids, "--store", str(store), "--format", fmt], heavy) == []


@pytest.mark.parametrize("preset, want", [(None, "1"), ("4", "4")])
def test_main_keeps_numpys_blas_to_one_thread_unless_told(monkeypatch, capsys, preset, want):
    """OpenBLAS starts a thread per core when numpy loads (~0.1 s of CPU a command): main()
    sets OPENBLAS_NUM_THREADS=1 before any command imports numpy, and leaves a user's value."""
    from rmqstore_cli import app

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    if preset is not None:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", preset)
    monkeypatch.setattr(sys, "argv", ["rmqstore", "--version"])
    with pytest.raises(SystemExit) as e:
        app.main()
    assert e.value.code in (0, None) and "rmqstore" in capsys.readouterr().out
    assert os.environ["OPENBLAS_NUM_THREADS"] == want
