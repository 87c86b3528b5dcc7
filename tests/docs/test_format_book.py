"""The format book (docs/format/) is the repository's own reference: every citation of it
resolves to a page and a heading, and nothing in the repository points outside itself."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "docs" / "format"

#: Directories never part of the repository's text (tool caches, virtualenvs, builds).
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    "build",
    "dist",
    "node_modules",
}
#: Files that are data, not text a person reads (checked by name before opening).
BINARY_SUFFIXES = {".gz", ".tgz", ".tar", ".so", ".o", ".pyc", ".parquet", ".npy", ".zip", ".png", ".jpg"}

#: A citation of the book from anywhere: docs/format/<page>.md, optionally #<anchor>.
CITATION = re.compile(r"docs/format/([A-Za-z0-9_.-]+\.md)(?:#([\w-]+))?")
#: A relative Markdown link inside the book: (page.md#anchor), (page.md) or (#anchor).
BOOK_LINK = re.compile(r"\]\((?!https?:)([A-Za-z0-9_.-]+\.md)?(?:#([\w-]+))?\)")
#: What must appear nowhere (built from parts so that this file does not match itself): the
#: outside format document the book replaces, and the directory beside the project that
#: fixtures and vectors used to be read from.
OLD_FORMAT_DOC = re.compile(re.escape("STORE" + "-FORMAT") + "|" + "\u00a7" + r"\s?\d")


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: inline markup dropped, lower case,
    everything but letters, digits, '_', '-' and spaces removed, spaces turned into '-'."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """Every heading anchor of a Markdown page (headings inside fenced code excluded; a
    repeated heading gets GitHub's -1, -2 suffixes)."""
    out: list[str] = []
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m and not fenced:
            base = slug(m[1])
            n = sum(1 for a in out if a == base or re.fullmatch(re.escape(base) + r"-\d+", a))
            out.append(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def repo_files() -> list[Path]:
    """The repository's files: what git tracks, or, outside a git checkout, every file
    under the root but the tool and build directories."""
    try:
        r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60)
        names = [n for n in r.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
        if names:
            return [ROOT / n for n in names if (ROOT / n).is_file()]
    except (OSError, subprocess.SubprocessError):
        pass
    out = []
    for p in ROOT.rglob("*"):
        rel = p.relative_to(ROOT).parts
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel):
            continue
        if p.is_file():
            out.append(p)
    return out


def text_files() -> dict[Path, str]:
    out = {}
    for p in repo_files():
        if p.suffix in BINARY_SUFFIXES:
            continue
        data = p.read_bytes()
        if b"\0" in data[:8192]:
            continue
        out[p] = data.decode("utf-8", "replace")
    return out


@pytest.fixture(scope="module")
def texts() -> dict[Path, str]:
    return text_files()


def test_slug_follows_githubs_rules():
    assert slug("Time diff") == "time-diff"
    assert slug("A 4.9.7 record") == "a-497-record"
    assert slug("The broker's query and the client's filter") == "the-brokers-query-and-the-clients-filter"
    assert slug("`checkpoint`, abort and lock") == "checkpoint-abort-and-lock"
    assert slug("broker.conf") == "brokerconf"


def test_book_has_an_index_listing_every_page():
    index = (BOOK / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in BOOK.glob("*.md") if p.name != "README.md")
    assert len(pages) >= 15
    missing = [p for p in pages if f"]({p})" not in index]
    assert not missing, f"docs/format/README.md does not list {missing}"


def test_every_citation_of_the_book_resolves(texts):
    """Every docs/format/<page>.md[#anchor] written anywhere in the repository names a page
    that exists and, with an anchor, a heading of that page."""
    seen, broken = 0, []
    for path, text in texts.items():
        for n, line in enumerate(text.splitlines(), 1):
            for page, anchor in CITATION.findall(line):
                seen += 1
                target = BOOK / page
                if not target.is_file():
                    broken.append(f"{path.relative_to(ROOT)}:{n}: no page docs/format/{page}")
                elif anchor and anchor not in anchors(target):
                    broken.append(f"{path.relative_to(ROOT)}:{n}: no heading #{anchor} in docs/format/{page}")
    assert not broken, "\n".join(broken)
    assert seen >= 80, f"only {seen} citations of docs/format found: the pattern no longer matches them"


def test_links_inside_the_book_resolve():
    broken = []
    for page in sorted(BOOK.glob("*.md")):
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for target_name, anchor in BOOK_LINK.findall(line):
                target = BOOK / target_name if target_name else page
                if not target.is_file():
                    broken.append(f"{page.name}:{n}: no page {target_name}")
                elif anchor and anchor not in anchors(target):
                    broken.append(f"{page.name}:{n}: no heading #{anchor} in {target.name}")
    assert not broken, "\n".join(broken)


def _lines_matching(texts: dict[Path, str], pattern: re.Pattern) -> list[str]:
    return [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for p, text in texts.items()
        for n, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]


def test_no_file_cites_the_old_format_document(texts):
    """Every docstring, comment, test and document cites docs/format/, never the outside
    document it replaces (nor its section numbers)."""
    hits = _lines_matching(texts, OLD_FORMAT_DOC)
    assert not hits, "\n".join(hits)
