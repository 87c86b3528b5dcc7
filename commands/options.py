"""The options several commands declare alike (docs/conventions.md): the store, broker.conf,
the output format, the file sizes, several stores and the Spark engine."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

STORE_HELP = (
    "Store root directory (storePathRootDir), taken as a path (never a pattern). Without it: "
    "--broker-conf's storePathRootDir, else $RMQSTORE_STORE, else $RMQSTORE_BROKER_CONF's "
    "storePathRootDir, else ~/store; stderr names the one used."
)
StoreOpt = Annotated[Path | None, typer.Option("--store", "-s", show_default=False, help=STORE_HELP)]
BrokerConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--broker-conf",
        show_default=False,
        help="The broker's broker.conf (default $RMQSTORE_BROKER_CONF): sizes, paths and rules are read from it as "
        "the broker would; its storePathRootDir is the store when --store is not given.",
    ),
]


class Fmt(str, Enum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


FormatOpt = Annotated[Fmt, typer.Option("--format", "-f", help="Output: table for people, jsonl or json for scripts.")]
#: ``--jobs 0`` of the commands that follow verify's rule (``pipeline.workers.jobs_for``).
JOBS_BY_SIZE = "0: every core it may use, or one when the commit logs hold less than 64 MiB on disk"


def jobs_option(text: str) -> typer.models.OptionInfo:
    """``--jobs``/``-j``, a count of processes (0 the default's own meaning), with ``text``."""
    return typer.Option("--jobs", "-j", min=0, help=text)


JobsOpt = Annotated[
    int,
    jobs_option(
        f"Run on this many processes of this machine ({JOBS_BY_SIZE}): one task per commit-log "
        "file (per part of a file larger than its share), then per queue and index file; the same answer."
    ),
]
VerifyJobsOpt = Annotated[
    int,
    jobs_option(
        f"Run on this many processes of this machine ({JOBS_BY_SIZE}): one task per commit-log file (per part "
        "of a file larger than its share), then per queue and index file; the same answer."
    ),
]
ExportJobsOpt = Annotated[
    int,
    jobs_option(
        f"Local engine: write on this many processes of this machine ({JOBS_BY_SIZE}), one task per commit-log "
        "file (per part of a file larger than its share), each writing its own files: the same rows, schema and "
        "partitions as --jobs 1, in more, smaller files."
    ),
]
#: The size options are Java ints in the broker's MessageStoreConfig.
JAVA_INT_MAX = (1 << 31) - 1
TzOpt = Annotated[
    str | None,
    typer.Option(
        "--tz", help="Time zone for shown times and index file names (IANA name, UTC, +08:00); default local."
    ),
]
CommitlogSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--commitlog-file-size", help="mappedFileSizeCommitLog, if not in --broker-conf.", min=4096, max=JAVA_INT_MAX
    ),
]
CqSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--cq-file-size", help="mappedFileSizeConsumeQueue, if not in --broker-conf.", min=20, max=JAVA_INT_MAX
    ),
]
IndexSlotsOpt = Annotated[
    int | None,
    typer.Option("--index-slots", help="maxHashSlotNum, if not in --broker-conf.", min=1, max=JAVA_INT_MAX),
]
IndexMaxOpt = Annotated[
    int | None, typer.Option("--index-max", help="maxIndexNum, if not in --broker-conf.", min=2, max=JAVA_INT_MAX)
]
AllowOddSizeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-odd-size",
        help="Read the store even if some commit-log or consume-queue files are not the "
        "configured (or inferred) size, as after a torn copy: each such file is read up to its real length, "
        "with a warning naming it. Without it such a store is refused, as the broker refuses to load it.",
    ),
]

QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Nothing on stderr but errors.")]

# Several stores and the Spark engine (verify, rebuild-index, export)
StoresOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--store", "-s", metavar="<path>", show_default=False, help=STORE_HELP[:-1] + "; repeat it for several stores."
    ),
]
StoreGlobOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--store-glob",
        metavar="<pattern>",
        show_default=False,
        help="Every directory matching this shell pattern (*, ?, [...]; a leading ~ is your home) is a store, in "
        "sorted order, after the --store ones; repeatable. A pattern matching no directory is a usage error.",
    ),
]

StoreNameOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--store-name",
        metavar="NAME",
        show_default=False,
        help="The store's name in the dataset (store=NAME), repeated once per store in their order; default: "
        "broker.conf's brokerName (one store), else the store directory's name (its parent's for one named store).",
    ),
]


class BrokerVersion(str, Enum):
    """The broker versions whose rules differ where the bytes do not tell them apart."""

    v49 = "4.9"
    v5 = "5"


class VerifyBrokerVersion(str, Enum):
    """verify's versions: 5.0-5.3.1 and 5.3.2+ recover a cleanly stopped store differently
    (``CommitLog#recoverNormally@rocketmq-all-5.3.2``); "5" is 5.3.2 and later."""

    v49 = "4.9"
    v531 = "5.3.1"
    v5 = "5"


class Engine(str, Enum):
    local = "local"
    spark = "spark"


EngineOpt = Annotated[Engine, typer.Option(help="local (this process) or spark (PySpark).")]
SparkMasterOpt = Annotated[
    str | None,
    typer.Option(
        show_default="local[*]",
        help="Spark master: local[*], local[N], spark://…, yarn, k8s://…, or a running Spark Connect server "
        "sc://HOST:PORT (under spark-submit: its --master).",
    ),
]
SparkConfOpt = Annotated[list[str] | None, typer.Option(help="Spark setting KEY=VALUE (repeatable).")]
SparkVerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Let Spark log (quiet by default).")]
