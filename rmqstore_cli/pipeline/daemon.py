"""PySpark's Python worker daemon, started without recompiling PySpark.

Spark starts its daemon with the ``pyspark.zip`` it ships first on ``PYTHONPATH``.
Python cannot cache bytecode for modules imported from a zip, so the daemon compiled
PySpark's sources (~0.6 s of CPU) before the first task of every command, and each
forked worker compiled ``pyspark.worker`` again (~0.3 s) before running its task. When
the zip sits inside the very PySpark package that this interpreter has installed (an
embedded master runs the driver's own interpreter), that package is imported instead,
from its cached bytecode, and ``pyspark.worker`` once, before the forks.

``spark.session`` names this module as ``spark.python.daemon.module`` for every master
(``spark.python.daemon.module`` in ``--spark-conf`` replaces it); on a cluster whose
executors run another Python or PySpark (a shipped environment), the path is left as it is
and only the ``pyspark.worker`` import before the forks remains.
"""

from __future__ import annotations

import importlib
import os
import sys
from importlib.machinery import PathFinder


def installed_pyspark_first(path: list[str]) -> list[str]:
    """``path`` with Spark's shipped zips moved last, if ``path`` (without them) finds the
    PySpark package the zips came from; otherwise ``path`` unchanged."""
    zips = _shipped_zips(path)
    rest = [p for p in path if p not in zips]
    if not zips or not _installed_is_their_source(zips, rest):
        return path
    return rest + zips


def _shipped_zips(path: list[str]) -> list[str]:
    """The pyspark and py4j zips Spark puts on a worker's path (its python/lib/)."""
    return [p for p in path if p.endswith(".zip") and os.path.basename(p).startswith(("pyspark", "py4j"))]


def _installed_is_their_source(zips: list[str], rest: list[str]) -> bool:
    """Whether ``rest`` finds the very PySpark the zips were shipped from (their python/lib/ is
    under its package) and a py4j: only then is putting it first the same code, loaded faster."""
    found = PathFinder.find_spec("pyspark", rest)
    if found is None or not found.submodule_search_locations:
        return False
    package = os.path.realpath(found.submodule_search_locations[0])
    shipped = {os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(z)))) for z in zips}
    return shipped == {package} and PathFinder.find_spec("py4j", rest) is not None


if __name__ == "__main__":
    sys.path[:] = installed_pyspark_first(sys.path)
    importlib.import_module("pyspark.worker")  # once here; forked workers inherit it
    from pyspark.daemon import manager

    manager()
