"""``export`` on the local engine, for the command and ``Store.export``: the output directory
checked and made, the Parquet dataset written (``pipeline/local.py``), and the summary.
Neutral words: the callers name their own options in hints."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import OutputError, UsageError, setting
from rmqstore_cli.pipeline.stores import FileTask, StoreSpec


def require_parquet() -> None:
    """pyarrow is optional (the ``export`` extra): say which extra brings it, before any work."""
    import importlib

    try:
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise UsageError(
            "export needs pyarrow, which the plain install does not include", hint="pip install 'rmqstore[export]'"
        ) from None


def output_blocker(output: Path) -> Path | None:
    """The file in the way of the dataset's directory (``output`` itself, or the first
    existing path above it when that is not a directory), or None."""
    p = output
    while not p.exists() and p.parent != p:
        p = p.parent
    return None if p.is_dir() else p


def make_output_dir(output: Path) -> None:
    """Create the dataset's directory; a read-only or full file system, or no permission,
    is an :class:`OutputError` (before pyarrow starts)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from rmqstore_cli.store.files.safefs import os_error

        raise OutputError(os_error(e, output, "create the output directory").message, path=output) from None


def write_local(
    tasks: list[FileTask],
    output: Path,
    compression: str,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> dict[str, Any]:
    """The dataset written by the local engine on ``jobs`` processes (0: ``--jobs``'s
    default): {"rows": …, "unreadable": […]}; ``progress`` hears the commit-log bytes of
    each task done. pyarrow's write errors (OSErrors, a worker's too) are the output's
    fault: :class:`OutputError`."""
    from rmqstore_cli.pipeline import local

    try:
        return local.export(tasks, output, progress, compression=compression, jobs=jobs)
    except OSError as e:
        raise OutputError(f"cannot write the dataset: {str(e).splitlines()[0][:300]}", path=output) from None


def summary(
    output: str | Path, engine: str, stores: int, tasks: list[FileTask], result: dict[str, Any], seconds: float
) -> dict[str, Any]:
    """export's summary (what ``--format json`` prints)."""
    return {
        "output": str(output),
        "engine": engine,
        "stores": stores,
        "commitlog_files": len(tasks),
        "rows": result["rows"],
        "unreadable_ranges": len(result["unreadable"]),
        "seconds": round(seconds, 3),
    }


def check_output(output: str, spark: bool, overwrite: bool) -> str | Path:
    """``--output`` checked before any work: a Hadoop file system URI only on Spark; a
    directory that is, or can be made, one (a file there or in place of a parent is a usage
    error, not a traceback from the writer), empty unless ``overwrite``. Returns the output
    (a local one as a path)."""
    from rmqstore_cli.pipeline.stores import hadoop_uri, local_path

    if hadoop_uri(output):
        if not spark:
            raise UsageError(
                f"{setting('output')} {output} is a Hadoop file system URI, which only "
                f"{setting('engine')} spark writes to",
                hint=f"pass {setting('engine')} spark, or a local (or mounted) directory",
            )
        return output
    path = local_path(output)
    p = output_blocker(path)
    if p is not None:
        what = "--output" if p == path else f"--output's parent {p}"
        raise UsageError(
            f"{what} is a file, where the dataset's directory belongs",
            path=p,
            hint="pass a directory (it is created if missing)",
        )
    if path.exists() and any(path.iterdir()) and not overwrite:
        raise UsageError(f"output directory {path} is not empty", hint=f"pass {setting('overwrite')} to replace it")
    return path


def run_spark(tasks: list[FileTask], output: Any, compression: str, overwrite: bool, spark: tuple) -> dict[str, Any]:
    """The export on Spark (``spark``: master, conf, verbose): one task per commit-log file."""
    try:
        from rmqstore_cli.pipeline import spark as sp
    except ImportError:
        raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
    return sp.run_job(sp.export, *spark, tasks, output, compression, overwrite)


def start_local(output: Path) -> None:
    """Before the local export: pyarrow's writer there, and the output directory made."""
    import importlib

    try:
        importlib.import_module("rmqstore_cli.pipeline.local")
    except ImportError:
        raise UsageError(
            "export needs pyarrow, which the plain install does not include", hint="pip install 'rmqstore[export]'"
        ) from None
    make_output_dir(output)


def store_name(spec: StoreSpec) -> str:
    """What a store is called in the dataset (its ``store=`` partition) when no name is
    given: the ``brokerName`` of its broker.conf, else its directory's name, or the name of
    the directory above when that is literally ``store`` (the broker's default
    ``storePathRootDir``, as in ``/snapshots/broker-a/store``) and not the home directory."""
    if spec.broker_conf is not None:
        from rmqstore_cli.store.layout.config import read_java_properties

        name = read_java_properties(Path(spec.broker_conf)).get("brokerName", "").strip()
        if name:
            return name
    p = Path(os.path.realpath(spec.path))
    if p.name == "store" and p.parent.name and p.parent != Path.home():
        return p.parent.name
    return p.name or str(p)


def store_names(specs: list[StoreSpec], given: list[str] | None) -> list[StoreSpec]:
    """``specs`` each with its dataset name: the ``given`` names in order (one per store),
    else :func:`store_name` (the broker.conf's brokerName only for a lone store: several
    stores read with one broker.conf would share it). Two stores of one name would mix their
    rows in one partition: a usage error."""
    from dataclasses import replace

    if given:
        if len(given) != len(specs):
            raise UsageError(
                f"{len(given)} {setting('store_name')} for {len(specs)} stores",
                hint=f"give one {setting('store_name')} per store, in the order of the stores",
            )
        if any(not n.strip() for n in given):
            raise UsageError(f"an empty {setting('store_name')}", hint="name the store, e.g. broker-a")
        names = list(given)
    else:
        names = [store_name(s if len(specs) == 1 else replace(s, broker_conf=None)) for s in specs]
    seen: dict[str, str] = {}
    for s, n in zip(specs, names, strict=True):
        if n in seen:
            raise UsageError(
                f"two stores would be named {n!r} in the dataset: {seen[n]} and {s.label}",
                hint=f"name each with {setting('store_name')} (one per store, in order)",
            )
        seen[n] = s.label
    return [replace(s, name=n) for s, n in zip(specs, names, strict=True)]
