"""What makes the embedded Spark JVM start fast.

An embedded master (``local``, ``local[N]``, ``local[*]``) starts a JVM for every command,
and that start used to cost ~5.5 s of wall and ~10 s of CPU on two cores — most of a small
job, and CPU the tasks then lack. Two HotSpot options halve it:

- ``-XX:TieredStopAtLevel=1``: the JIT stops at C1. The driver JVM of an embedded master
  only schedules tasks and moves small results (the work runs in the Python workers), so
  C2's optimising compiles were pure start-up cost.
- an application class-data-sharing archive of Spark's classes (JDK 13+ dynamic CDS),
  opt-in: only when ``RMQSTORE_SPARK_CACHE`` names a directory (a command writes nothing
  outside what the user named, and ~70-120 MB under ``~/.cache`` is not nothing). The
  first run dumps the classes it loaded (``-XX:ArchiveClassesAtExit``) to a private name
  there, :func:`finish` renames it into place once that JVM has exited, and later runs map
  it (``-XX:SharedArchiveFile``) instead of parsing and verifying ~10 000 classes. The JVM
  checks the archive against its own build and class path and ignores a stale one
  (``-Xshare:auto``), and the cache key includes both, so an upgrade makes a new one.

The same holds for the client-mode driver JVM this process starts for a cluster master
(``spark://``, ``yarn``, …: measured on a warm standalone cluster, ~4 s less CPU per
command): it also only schedules. Under ``spark-submit`` its JVM is already up and nothing
here applies. Executors get C1 only (:data:`EXECUTOR_OPTIONS`): their JVM moves task
results and Python's pipes, and C2 compiled for ~2 s of CPU per executor of a small job;
an archive would have to exist on every node, so they get none.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

CACHE_ENV = "RMQSTORE_SPARK_CACHE"  # a directory for the class-data archive; unset: none (C1 stays)
# The JVM's own log writes warnings to stdout, where our JSON goes: send them to stderr
# (which a quiet run drains), without CDS's notes on classes it cannot archive.
QUIET_JVM_LOG = ["-Xlog:disable", "-Xlog:all=warning,cds*=off:stderr"]


@dataclass
class Start:
    options: list[str]
    dump: Path | None = None  # being written by this run's JVM at exit
    archive: Path | None = None  # where the dump goes once complete


#: An executor JVM of a cluster (see the module's docstring); ``--spark-conf
#: spark.executor.extraJavaOptions=…`` replaces it, e.g. for Spark's own Parquet writer.
EXECUTOR_OPTIONS = ["-XX:TieredStopAtLevel=1"]


def embedded(master: str | None) -> bool:
    return master is not None and (master == "local" or master.startswith("local["))


def options(master: str | None) -> Start:
    """The options of the driver JVM this process starts for ``master`` (none without a
    master: the JVM is ``spark-submit``'s)."""
    if master is None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return Start([])
    opts = ["-XX:TieredStopAtLevel=1", *QUIET_JVM_LOG]
    archive = _archive_path()
    if archive is None:
        return Start(opts)
    if archive.is_file():
        return Start(opts + [f"-XX:SharedArchiveFile={archive}"])
    _forget_old_dumps(archive.parent)
    dump = archive.with_name(f"{archive.stem}.{os.getpid()}.part")
    return Start(opts + [f"-XX:ArchiveClassesAtExit={dump}"], dump, archive)


def _forget_old_dumps(cache: Path, age: float = 86400.0) -> None:
    """Dumps of runs that were killed before :func:`finish` (~100 MB each)."""
    import time

    for p in cache.glob("spark-cds-*.part"):
        try:
            if time.time() - p.stat().st_mtime > age:
                p.unlink()
        except OSError:
            pass


def finish(start: Start, jvm) -> None:
    """After the session stopped: let a dumping JVM exit (EOF on its stdin is PySpark's
    signal), then publish its archive under the shared name, atomically."""
    if start.dump is None or jvm is None:
        return
    try:
        if jvm.stdin is not None:
            jvm.stdin.close()
        jvm.wait(timeout=120)
        if start.dump.is_file() and start.dump.stat().st_size > 0:
            os.replace(start.dump, start.archive)
    except Exception:  # a cache: never the command's failure
        pass
    finally:
        start.dump.unlink(missing_ok=True)


def _archive_path() -> Path | None:
    """The archive in the directory ``RMQSTORE_SPARK_CACHE`` names (made if missing), or None:
    no directory named, or one that cannot be written."""
    named = os.environ.get(CACHE_ENV)
    if not named:
        return None
    key = _key()
    if key is None:
        return None
    base = Path(os.path.abspath(os.path.expanduser(named)))
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return base / f"spark-cds-{key}.jsa" if os.access(base, os.W_OK) else None


def _key() -> str | None:
    """The JVM build and Spark's jars: an archive is only valid for both."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home, "bin", "java")) if home else shutil.which("java")
    if not found:
        return None
    try:
        import pyspark

        java = Path(found).resolve()
        libjvm = next(java.parent.parent.glob("lib/server/libjvm.so"), java)
        jars = Path(pyspark.__file__).parent / "jars"
        parts = [
            str(java),
            str(libjvm.stat().st_mtime_ns),
            str(libjvm.stat().st_size),
            str(jars),
            str(jars.stat().st_mtime_ns),
            pyspark.__version__,
        ]
    except Exception:  # no java found, odd layout: start without an archive
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
