"""rebuild-index's own options and the examples and notes its --help ends with."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.common import complete_topic

EPILOG = """Examples:

  rmqstore rebuild-index --store ~/store --output /tmp/rebuilt

  rmqstore rebuild-index --store ~/store --in-place --dry-run

  rmqstore rebuild-index --store ~/store --in-place --only cq --topic OrderTopic --topic '%RETRY%cg'

  rmqstore rebuild-index --store snap/ --broker-conf broker.conf --output out/ --tz Asia/Shanghai --format json

  rmqstore rebuild-index --store /mnt/store --output /mnt/rebuilt --engine spark --spark-master 'local[4]'

  rmqstore rebuild-index --store-glob '/snapshots/broker-*/store' --output /tmp/rebuilt --engine spark

With --engine spark each commit-log file is dispatched by one Spark task, which writes its
consume-queue units in place; a second task per file writes its index entries, and one
small task per index file links them; one task per BatchCQ queue writes its
batchconsumequeue/ files from the units the file tasks saved: byte for byte what the
local engine writes. Only summaries go through Spark (the tasks exchange units and keys
as files beside the output). A BatchCQ topic is rebuilt only with all the queues: --topic
naming one is refused on either engine.
On a cluster, --output (or the store, with --in-place) must be on a file system every
executor mounts at the same path.

Several stores (--store repeated, or --store-glob) are rebuilt one after the other, in one Spark
session with --engine spark: with --output DIR each store is written to DIR/<its path
relative to the stores' common parent> (broker-a/store, broker-b/store, ...), with
--in-place each store in place. The summary then has one entry per store.

Index file names are the store time of each file's first entry in --tz (the broker names
them by its wall clock at creation, which the store does not record); a first entry whose
store time is no date (negative, after 9999) names its file one millisecond after the
previous one (the first file: 1970-01-01 UTC), with a warning. An interrupted --in-place
run is finished (or rolled back) by the next run, or by --recover; a full or read-only
disk is one error line, and the run leaves nothing half-written.

File sizes come from --broker-conf, the size options, or the store's own files of that
kind (the summary's "sizes" says which). A consumequeue/ or index/ rebuilt with none of
these (lost, and no broker.conf) is refused, naming the options, instead of being written
with the broker's defaults (420 MB index files where the store may have used 8 KB ones).
"""


class Only(str, Enum):
    cq = "cq"
    index = "index"


OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the rebuilt consumequeue/, index/ and checkpoint here (with several stores: "
        "one directory per store below it); the stores are only read, so an --output inside, equal to or "
        "containing a store (real paths compared) is refused.",
    ),
]

InPlaceOpt = Annotated[
    bool,
    typer.Option("--in-place", help="Replace the store's own consumequeue/ and index/ (refused while a broker runs)."),
]

OnlyOpt = Annotated[Only | None, typer.Option("--only", help="Rebuild only consume queues (cq) or only the index.")]

TopicOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--topic",
        "-t",
        help="Rebuild only this topic's queues (repeatable; implies --only cq).",
        autocompletion=complete_topic,
    ),
]

CopyCommitlogOpt = Annotated[
    bool, typer.Option(help="With --output: copy the commit-log files (sparse, mtimes kept) instead of a symlink.")
]

NoBackupOpt = Annotated[
    bool,
    typer.Option(
        "--no-backup",
        help="With --in-place: delete the old sets instead of keeping them in the store's "
        "rmqstore-backup/<id>/ (stderr names it; verify knows it).",
    ),
]

RecoverOpt = Annotated[
    bool, typer.Option("--recover", help="Only finish (or roll back) an interrupted --in-place run, then stop.")
]

DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", "-n", help="Scan and report what would be written; write nothing.")
]

ProgressOpt = Annotated[bool, typer.Option(help="Progress bar on stderr (only ever on a terminal).")]
