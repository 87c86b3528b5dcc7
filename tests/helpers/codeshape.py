"""The code-shape figures issue #17 asks for, measured on the source tree.

``python tests/helpers/codeshape.py`` prints them; ``tests/docs/test_codeshape.py`` holds the tree to
them. Measured by reading the source (ast), never by importing it:

- the largest module (lines);
- functions whose body runs over :data:`LONG_FUNCTION` lines;
- imports of a ``_private`` name from another module (``from m import _x``), and
  ``module._x`` attribute reads of an imported module;
- hand-written ``struct``/numpy format strings (``">iq"``, ``">i4"``) outside ``formats/``,
  where every layout is declared once;
- the import graph (imports inside functions too: a lazy import is still a dependency): its
  circles, and its arrows that point up a layer (:data:`LAYERS`).
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("rmqstore_cli", "commands", "formats")
LONG_FUNCTION = 80
#: The layers, lowest first: a module may import from its own layer and those below it. A
#: module is placed by the longest prefix of its dotted name listed here.
#: The output layer's modules: tables, JSON, the commands' reports.
OUTPUT = tuple(
    f"rmqstore_cli.{m}"
    for m in (
        "render",
        "job_reports",
        "render_commitlog",
        "render_cq",
        "render_lookup",
        "render_msgid",
        "render_search",
        "render_timer",
        "render_bars",
        "render_traffic",
        "render_console",
        "render_progress",
        "render_progress",
        "reports",
        "textfit",
        "tableblock",
        "jsonblock",
    )
)
#: store/'s sub-packages, lowest first (ARCHITECTURE.md, Layers): how bytes are reached, Java's
#: hashes, a record, the configuration, the logs and queues, the store opened, what writes,
#: the checks, the operator's answers, verify.
STORE_LAYERS = tuple(
    (f"rmqstore_cli.store.{p}",)
    for p in "files javahash records layout commitlog queues timer message_store write checks answers verify".split()
)
LAYERS = (
    ("rmqstore_cli.formats",),
    ("rmqstore_cli.errors", "rmqstore_cli.times", "rmqstore_cli.stdio"),
    ("rmqstore_cli.store",),  # its C extensions (loaded by name from store/files/)
    *STORE_LAYERS,
    ("rmqstore_cli.pipeline", *OUTPUT),
    ("rmqstore_cli.api",),
    ("rmqstore_cli.commands", "rmqstore_cli"),
    ("rmqstore_cli.app", "rmqstore_cli.manpages", "rmqstore_cli.__main__"),
)
#: A struct format or a numpy dtype string: a byte-order mark then codes, e.g. ">iq", ">i4", "<u8".
FORMAT_STRING = re.compile(r"^[<>!=@]([0-9]*[xcbB?hHiIlLqQnNefdsp])+$|^[<>|][iuf][1248]$")


@dataclass
class Shape:
    modules: dict[str, int] = field(default_factory=dict)
    long_functions: list[tuple[str, int]] = field(default_factory=list)
    private_imports: list[str] = field(default_factory=list)
    private_reads: list[str] = field(default_factory=list)  # obj._x on another object
    format_strings: list[str] = field(default_factory=list)
    imports: dict[str, set[str]] = field(default_factory=dict)  # module -> our modules it imports

    @property
    def largest(self) -> tuple[str, int]:
        return max(self.modules.items(), key=lambda kv: kv[1])


def source_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def measure() -> Shape:
    shape = Shape()
    for path in source_files():
        rel = str(path.relative_to(ROOT))
        text = path.read_text()
        shape.modules[rel] = text.count("\n")
        tree = ast.parse(text, rel)
        _functions(tree, rel, shape)
        _privates(tree, rel, shape)
        if not rel.startswith("formats/"):
            _formats(tree, rel, shape)
        shape.imports[module_name(rel)] = _imports(tree)
    known = set(shape.imports)
    for name, targets in shape.imports.items():
        shape.imports[name] = {_resolve(t, known) for t in targets} & known - {name}
    return shape


def module_name(rel: str) -> str:
    """The dotted name a file is installed under (``commands/`` and ``formats/`` are
    installed as ``rmqstore_cli.commands`` and ``rmqstore_cli.formats``, pyproject.toml)."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts[0] != "rmqstore_cli":
        parts.insert(0, "rmqstore_cli")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tree: ast.AST) -> set[str]:
    """Every ``rmqstore_cli`` module named by an import anywhere in the file; for ``from m
    import x``, ``m.x`` too (x may be a module: :func:`_resolve` decides)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rmqstore_cli"):
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("rmqstore_cli"))
    return out


def _resolve(name: str, known: set[str]) -> str:
    """The longest known module that ``name`` is, or is inside of."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


#: The engine's packages, whose errors name settings with errors.setting, never an option.
ENGINE = ("rmqstore_cli/store", "rmqstore_cli/api", "rmqstore_cli/pipeline")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]+")
#: Text that names another command's options on purpose: a command line to run.
COMMAND_LINE = re.compile(r"rmqstore |dump-commitlog |dump-cq |rebuild-index |generate --|repair --|setup.py |pip ")


def options_in_engine_errors(root: Path | None = None) -> list[str]:
    """``--option`` words in the text of an error the engine raises (its message or hint)."""
    root = root or ROOT
    found: set[str] = set()
    for path in sorted(p for e in ENGINE for p in (root / e).rglob("*.py")):
        rel = str(path.relative_to(root))
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            for part in _error_texts(node):
                if OPTION.search(part.value) and not COMMAND_LINE.search(part.value):
                    found.add(f"{rel}:{part.lineno} {part.value!r}")
    return sorted(found)


def _error_texts(node: ast.AST) -> list[ast.Constant]:
    if isinstance(node, ast.Raise) and node.exc is not None:
        tree: ast.AST | None = node.exc
    elif isinstance(node, ast.keyword) and node.arg == "hint":
        tree = node.value
    else:
        return []
    return [c for c in ast.walk(tree) if isinstance(c, ast.Constant) and isinstance(c.value, str)]


def layer(module: str) -> int:
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    return rank


def up_arrows(shape: Shape) -> list[str]:
    """Imports from a lower layer into a higher one."""
    return sorted(f"{a} -> {b}" for a, bs in shape.imports.items() for b in bs if layer(b) > layer(a))


def circles(shape: Shape) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan),
    leaving out arrows into a package's ``__init__`` face that only re-exports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(shape.imports.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(shape.imports):
        if v not in index:
            visit(v)
    return found


def _functions(tree: ast.AST, rel: str, shape: Shape) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
                first = node.body[1]  # the docstring is not body
            length = node.end_lineno - first.lineno + 1
            if length > LONG_FUNCTION:
                shape.long_functions.append((f"{rel}:{node.lineno} {node.name}", length))


def _privates(tree: ast.AST, rel: str, shape: Shape) -> None:
    ours: set[str] = set()  # names bound to our own modules and classes
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
            for alias in node.names:
                if _private(alias.name):
                    shape.private_imports.append(
                        f"{rel}:{node.lineno} from {'.' * node.level}{node.module or ''} import {alias.name}"
                    )
                ours.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            ours.update(a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
            if node.value.id in ours:
                shape.private_imports.append(f"{rel}:{node.lineno} {node.value.id}.{node.attr}")
            elif node.value.id not in ("self", "cls", *THIRD_PARTY) and node.attr not in NAMEDTUPLE_API:
                shape.private_reads.append(f"{rel}:{node.lineno} {node.value.id}.{node.attr}")


#: PySpark keeps what a driver needs to stop its JVM and gateway behind private names.
THIRD_PARTY = ("SparkContext", "sc")
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_exit", "_getframe"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _formats(tree: ast.AST, rel: str, shape: Shape) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FORMAT_STRING.match(node.value):
            shape.format_strings.append(f"{rel}:{node.lineno} {node.value!r}")


def main() -> None:
    shape = measure()
    name, lines = shape.largest
    print(f"modules: {len(shape.modules)}, lines: {sum(shape.modules.values())}")
    print(f"largest module: {name} ({lines} lines)")
    verbose = "-v" in sys.argv
    for title, items in (
        (f"functions over {LONG_FUNCTION} lines", [f"{n} ({k})" for n, k in shape.long_functions]),
        ("private cross-module names", shape.private_imports),
        ("private attributes read on other objects", shape.private_reads),
        ("format strings outside formats/", shape.format_strings),
        ("import circles", [" <-> ".join(c) for c in circles(shape)]),
        ("imports up a layer", up_arrows(shape)),
    ):
        print(f"{title}: {len(items)}")
        if verbose:
            for item in items:
                print("   ", item)


if __name__ == "__main__":
    main()
