"""The code-shape figures issue #17 asks for, measured on the source tree.

``python tests/helpers/codeshape.py`` prints them; ``tests/docs/test_codeshape.py`` holds the tree to
them. Measured by reading the source (ast), never by importing it:

- the largest module (lines);
- functions whose body runs over :data:`LONG_FUNCTION` lines;
- imports of a ``_private`` name from another module (``from m import _x``), and
  ``module._x`` attribute reads of an imported module;
- hand-written ``struct``/numpy format strings (``">iq"``, ``">i4"``) outside ``formats/``,
  where every layout is declared once.
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
#: A struct format or a numpy dtype string: a byte-order mark then codes, e.g. ">iq", ">i4", "<u8".
FORMAT_STRING = re.compile(r"^[<>!=@]([0-9]*[xcbB?hHiIlLqQnNefdsp])+$|^[<>|][iuf][1248]$")


@dataclass
class Shape:
    modules: dict[str, int] = field(default_factory=dict)
    long_functions: list[tuple[str, int]] = field(default_factory=list)
    private_imports: list[str] = field(default_factory=list)
    private_reads: list[str] = field(default_factory=list)  # obj._x on another object
    format_strings: list[str] = field(default_factory=list)

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
    return shape


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
    ):
        print(f"{title}: {len(items)}")
        if verbose:
            for item in items:
                print("   ", item)


if __name__ == "__main__":
    main()
