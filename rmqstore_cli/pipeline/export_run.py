"""``export`` on the local engine, for the command and ``Store.export``: the output directory
checked and made, the Parquet dataset written (``pipeline/local.py``), and the summary.
Neutral words: the callers name their own options in hints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import OutputError, UsageError, setting
from rmqstore_cli.pipeline.stores import FileTask


def require_parquet() -> None:
    """pyarrow is optional (the ``spark`` extra): say which extra brings it, before any work."""
    import importlib

    try:
        importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise UsageError(
            "export needs pyarrow, which the plain install does not include", hint="pip install 'rmqstore[spark]'"
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
        from rmqstore_cli.store.safefs import os_error

        raise OutputError(os_error(e, output, "create the output directory").message, path=output) from None


def write_local(
    tasks: list[FileTask], output: Path, compression: str, progress: Callable[[FileTask], None] | None = None
) -> dict[str, Any]:
    """The dataset written by the local engine: {"rows": …, "unreadable": […]}; ``progress``
    hears of each commit-log file done. pyarrow's write errors (OSErrors) are the output's
    fault: :class:`OutputError`."""
    from rmqstore_cli.pipeline import local

    try:
        return local.export(tasks, output, progress, compression=compression)
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
        raise UsageError("export needs pyarrow", hint="pip install 'rmqstore[spark]'") from None
    make_output_dir(output)
