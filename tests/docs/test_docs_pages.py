"""The README and docs/ say only what is true: every command and option they show exists,
every link resolves, nothing is said twice, no internal history, the README stays a front
page, the changelog's release is the package's version, and the examples run.

The format book (docs/format/) is checked by test_format_book.py and is left out here: it
quotes the broker's code, not rmqstore's command line."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if "format" not in p.relative_to(DOCS).parts)]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", flags=re.S | re.M)
NOT_RUN = re.compile(r"<!-- not-run: (.+?) -->\n$")
#: Options of other programs shown beside rmqstore's (spark-submit, pip, pytest, install, jq).
FOREIGN_OPTIONS = {"--master", "--deploy-mode", "--archives", "--conf", "-m", "-q", "-e", "-o", "-p", "-c", "-r"}


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def blocks(text: str) -> list[tuple[str, str, str | None]]:
    """(language, body, not-run reason or None) of each fenced block, in order."""
    out = []
    for m in FENCE.finditer(text):
        marker = NOT_RUN.search(text[: m.start()][-400:])
        out.append((m.group(1), m.group(2), marker.group(1) if marker else None))
    return out


def prose(text: str) -> str:
    """The text outside fenced blocks and HTML comments."""
    return re.sub(r"<!--.*?-->", "", FENCE.sub("", text), flags=re.S)


# ----------------------------------------------------------------------------- the command line
@cache
def options() -> dict[str, set[str]]:
    """Each command's option names (long and short), and "" for the global options."""
    import typer.main

    from rmqstore_cli.app import COMMANDS, app, load_command

    def names(cmd) -> set[str]:
        return {o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")} | {"-h", "--help"}

    out = {name: names(load_command(name)) for name, _module, _summary in COMMANDS}
    out[""] = names(typer.main.get_command(app))
    return out


def shown_commands() -> list[tuple[str, str]]:
    """(page, command text) for each rmqstore command line the pages show: in code blocks and
    inline code, ``rmqstore CMD …``, and inline code that starts with a command name."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        code = [b.replace("\\\n", " ") for _lang, b, _r in blocks(text)]
        lines = [ln for b in code for ln in b.splitlines()]
        spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", prose(text))]
        for line in lines + spans:
            line = re.sub(r"(^|\s)#.*$", "", line)
            for m in re.finditer(r"(?:^\s*|[;&|(]\s*|/)rmqstore(\s.*)", line):
                out.append((rel(page), "rmqstore" + m.group(1)))
        cmds = options().keys() - {""}
        for s in spans:
            if s.split(" ", 1)[0] in cmds:
                out.append((rel(page), "rmqstore " + s))
    return out


def words(cmd: str) -> list[str]:
    """The words of one command, up to the end of the command (a pipe, ``&&``, ``;``, ``)``)."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars="|&;()<>")
        lex.whitespace_split = True
        toks = list(lex)
    except ValueError:  # an inline span cut inside a quoted argument
        toks = cmd.split()
    end = next((i for i, t in enumerate(toks) if t and set(t) <= set("|&;()<>")), len(toks))
    return toks[:end]


def problems(cmd: str) -> list[str]:
    opts = options()
    w = words(cmd)[1:]
    if not w:
        return []
    name = w[0]
    if name.startswith("-"):
        return [o for o in w if o.startswith("--") and o.split("=")[0] not in opts[""]]
    if not re.fullmatch(r"[a-z][a-z-]+", name):  # a placeholder (COMMAND), a version, a path
        return []
    if name not in opts:
        return [f"no command {name!r}"]
    bad = []
    for tok in w[1:]:
        opt = tok.split("=", 1)[0]
        if re.fullmatch(r"--?[A-Za-z][\w-]*", opt) and opt not in opts[name] | opts[""]:
            bad.append(f"{name} has no option {opt}")
    return bad


def test_pages_show_rmqstore_commands():
    shown = shown_commands()
    assert len(shown) > 100 and {c.split()[1] for _p, c in shown} >= options().keys() - {""}


def test_every_command_and_option_shown_exists():
    bad = [f"{page}: {cmd!r}: {why}" for page, cmd in shown_commands() for why in problems(cmd)]
    assert not bad, "\n".join(bad)


def test_every_option_named_on_a_command_page_exists():
    """A command's page names options bare (`--topic`): each is an option of some command."""
    known = set().union(*options().values()) | FOREIGN_OPTIONS
    bad = []
    for page in sorted((DOCS / "commands").glob("*.md")):
        spans = re.findall(r"`([^`]+)`", prose(page.read_text(encoding="utf-8")))
        for s in spans:
            for opt in re.findall(r"(?:^|[\s/])(--[a-z][\w-]*)", s):
                if opt not in known:
                    bad.append(f"{rel(page)}: {opt} in `{s}`")
    assert not bad, "\n".join(bad)


def test_each_command_has_its_page_and_a_row_in_the_readme():
    readme = README.read_text(encoding="utf-8")
    table = readme.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    for name in options().keys() - {""}:
        assert (DOCS / "commands" / f"{name}.md").is_file(), name
        assert f"[`{name}`](docs/commands/{name}.md)" in table, name


# ----------------------------------------------------------------------------- links
def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = defaultdict(int)
    out = set()
    for h in re.findall(r"^#+ (.+)$", prose(page.read_text(encoding="utf-8")), flags=re.M):
        s = slug(h)
        out.add(s if not seen[s] else f"{s}-{seen[s]}")
        seen[s] += 1
    return out


def test_every_relative_link_and_anchor_resolves():
    bad = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append(f"{rel(page)}: {target}: no such file")
            elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
                bad.append(f"{rel(page)}: {target}: no heading #{anchor} in {dest.name}")
    assert not bad, "\n".join(bad)


def test_every_docs_page_is_linked_from_the_index():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in re.findall(r"\]\(([^)#\s]+)", index)}
    missing = [rel(p) for p in PAGES[1:] if p != DOCS / "README.md" and p.resolve() not in linked]
    assert not missing, missing


# ----------------------------------------------------------------------------- said once, said now
def paragraphs(page: Path) -> list[str]:
    chunks = re.split(r"\n\s*\n", prose(page.read_text(encoding="utf-8")))
    out = []
    for c in chunks:
        norm = " ".join(c.split())
        if len(norm.split()) >= 8 and not norm.startswith(("|", "#")):
            out.append(norm)
    return out


def test_no_paragraph_appears_twice():
    where: dict[str, list[str]] = defaultdict(list)
    for page in PAGES:
        for para in paragraphs(page):
            where[para].append(rel(page))
    twice = {p[:100]: pages for p, pages in where.items() if len(pages) > 1}
    assert not twice, twice


def test_no_line_of_prose_appears_twice():
    """A sentence copied between pages is a statement that can drift into a contradiction."""
    where: dict[str, list[str]] = defaultdict(list)
    for page in PAGES:
        for para in paragraphs(page):
            for sentence in re.split(r"(?<=[.:;])\s+(?=[A-Z`])", para):
                if len(sentence.split()) >= 12:
                    where[sentence].append(rel(page))
    twice = {s[:100]: pages for s, pages in where.items() if len(pages) > 1}
    assert not twice, twice


def test_no_internal_history():
    pattern = re.compile(r"\b(issue\s*#?\s*\d+|session\s+\d+|#\d+\b(?<!rocketmq#\d))", flags=re.I)
    bad = []
    for page in [*PAGES, ROOT / "CHANGELOG.md", *sorted((DOCS / "format").glob("*.md"))]:
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            line = re.sub(r"apache/rocketmq#\d+", "", line)
            if pattern.search(line):
                bad.append(f"{rel(page)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
    heads = [ln[3:] for ln in lines if ln.startswith("## ")]
    assert heads == [
        "Tour",
        "Commands",
        "Library",
        "Exit codes",
        "Safety",
        "Documentation",
        "Development",
        "License",
    ], heads


def test_exit_codes_table_lists_zero_to_six():
    readme = README.read_text(encoding="utf-8")
    table = readme.split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| (\d) \|", table, flags=re.M) == [str(i) for i in range(7)]


def test_changelog_release_is_the_package_version():
    from rmqstore_cli import __version__

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", text, flags=re.M)
    assert releases[0] == ("Unreleased", "")
    assert releases[1][0] == __version__ and releases[1][1], releases


# ----------------------------------------------------------------------------- the examples run
def bindir() -> Path:
    d = Path(sys.executable).parent
    if not (d / "rmqstore").is_file():
        pytest.fail(f"no rmqstore console script beside {sys.executable}: install the package (pip install -e .)")
    return d


def sandbox(tmp_path: Path) -> dict[str, str]:
    """A clean environment: the installed rmqstore first on PATH, HOME and TMPDIR inside
    ``tmp_path``, no RMQSTORE_* variables."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQSTORE_")}
    env.update(PATH=f"{bindir()}:/usr/bin:/bin", HOME=str(home), TMPDIR=str(tmp_path), NO_COLOR="1")
    return env


def run_sh(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def test_readme_tour_runs(tmp_path):
    """The tour's blocks, in order, in one shell, as a reader pastes them."""
    tour = README.read_text(encoding="utf-8").split("\n## Tour\n", 1)[1].split("\n## ", 1)[0]
    script = "\n".join(body for lang, body, _r in blocks(tour) if lang == "sh")
    assert "rmqstore generate" in script and "| jq" in script
    r = run_sh(script, tmp_path, sandbox(tmp_path))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "order-42" in r.stdout and '"severity"' not in r.stdout
    top = [json.loads(ln) for ln in r.stdout.splitlines() if ln.startswith('{"topic"')]
    assert len(top) == 5 and all(t["messages"] > 0 for t in top)


def test_readme_library_example_runs(tmp_path):
    """The README's library example, on a generated store at ``~/store`` and on the same store
    with its first record's header smashed: it prints the window's messages and "sound", then
    "damaged" and the findings that say where."""
    (lang, body, _r), *_ = blocks(README.read_text(encoding="utf-8").split("\n## Library\n", 1)[1])
    assert lang == "python" and "open_store" in body and ".verify()" in body
    env = sandbox(tmp_path)
    store = Path(env["HOME"]) / "store"
    gen = run_sh(f"rmqstore generate --store {shlex.quote(str(store))} --messages 2000", tmp_path, env)
    assert gen.returncode == 0, gen.stderr

    def example() -> list[str]:
        r = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.splitlines()

    def dumped(*filters: str) -> int:  # the same question asked of the command line
        r = run_sh(
            f"rmqstore dump-commitlog --store {shlex.quote(str(store))} --format jsonl {' '.join(filters)}",
            tmp_path,
            env,
        )
        assert r.returncode == 0, r.stderr
        return len(r.stdout.splitlines())

    sound = example()
    rows = [ln for ln in sound if "order-" in ln]
    window = "--topic OrderTopic --begin 2026-01-01T00:10 --end 2026-01-01T00:11"
    assert rows and len(rows) == dumped(window), sound
    assert sound[len(rows) :] == [f"sound {dumped()} messages"], sound
    first = min((store / "commitlog").iterdir())
    with open(first, "r+b") as f:
        f.write(b"\xff" * 8)  # TOTALSIZE and MAGICCODE of the store's first record
    damaged = example()
    verdict = next(ln for ln in damaged if ln.startswith(("sound", "damaged")))
    findings = damaged[damaged.index(verdict) + 1 :]
    assert verdict.startswith("damaged") and findings, damaged
    assert any(ln.startswith("error ") and f"commitlog/{first.name} 0 " in ln for ln in findings), findings


def test_every_not_run_marker_gives_a_reason():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in re.finditer(r"<!-- not-run(.*?)-->", text):
            assert re.fullmatch(r": \S.{9,} ", m.group(1)), f"{rel(page)}: {m.group(0)}"
            assert text[m.end() : m.end() + 4] == "\n```", f"{rel(page)}: a not-run marker must precede a block"


def example_pages() -> list[Path]:
    return [
        p
        for p in PAGES[1:]
        if any(lang in ("sh", "python") and r is None for lang, _b, r in blocks(p.read_text(encoding="utf-8")))
    ]


@pytest.mark.slow
@pytest.mark.parametrize("page", example_pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_docs_examples_run(page, tmp_path):
    """Each page's sh and python blocks, in order, each in its own shell (a block names what it
    uses), in a fresh directory whose HOME holds a
    generated store (``~/store``, 2 000 sends, with committed consumer offsets): every
    block exits 0. A block that cannot run offline carries a not-run marker with a reason."""
    env = sandbox(tmp_path)
    store = Path(env["HOME"]) / "store"
    gen = run_sh(f"rmqstore generate --store {shlex.quote(str(store))} --messages 2000", tmp_path, env)
    assert gen.returncode == 0, gen.stderr
    (store / "config" / "consumerOffset.json").write_text(
        '{"offsetTable":{"OrderTopic@order-consumers":{0:100,1:20,2:108,3:125}}}', encoding="utf-8"
    )
    work = tmp_path / "work"
    work.mkdir()
    ran = 0
    for lang, body, reason in blocks(page.read_text(encoding="utf-8")):
        if reason is not None or lang not in ("sh", "python"):
            continue
        ran += 1
        if lang == "sh":
            r = run_sh(body, work, env)
        else:
            r = subprocess.run(
                [sys.executable, "-c", body], cwd=work, env=env, capture_output=True, text=True, timeout=600
            )
        assert r.returncode == 0, f"{body}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
    assert ran
