"""Loading the optional C extensions, and remembering why one is not here.

The three extensions (``_ckernels``, ``_cjson``, ``_mapguard``: setup.py) are optional, so a
machine without a C compiler runs the reference loops at pure-Python speed. That must never
be silent: each loader keeps the reason it has none (not built, or the import failed and
with what error), and ``rmqstore --version``, verify's summary (``c_extensions``) and
bench/bench_all.py's header say it (:meth:`~rmqstore_cli.store.files.fastpaths.FastPaths.extensions`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

#: What to do when an extension is missing: the line every report of it ends with.
BUILD_HINT = (
    "install a C compiler and Python's headers (e.g. apt-get install gcc python3-dev) and "
    "reinstall (pip install -e . or pip install .)"
)


#: The problems, besides "failed to import: " and the error.
NOT_BUILT, OTHER_LAYOUT = "not built", "built for another layout"


@dataclass(frozen=True)
class Loaded:
    """One extension's import: the module, or None and why (``problem``)."""

    name: str
    module: ModuleType | None
    problem: str = ""


def load(name: str) -> Loaded:
    """Import the extension ``name``: a :class:`Loaded` with the module, or with the reason
    it is not here — "not built" when no such module exists, else "failed to import: " and
    the error (a half-built or mismatched binary, an unresolved symbol)."""
    try:
        return Loaded(name, importlib.import_module(name))
    except ModuleNotFoundError as e:
        if e.name == name:
            return Loaded(name, None, NOT_BUILT)
        return Loaded(name, None, f"failed to import: {e}")
    except ImportError as e:
        return Loaded(name, None, f"failed to import: {e}")


def phrase(problem: str) -> str:
    """A :attr:`Loaded.problem` after "the extension": "is not built", "failed to import: ..."."""
    return {NOT_BUILT: "is not built", OTHER_LAYOUT: "was built for another layout"}.get(problem, problem)
