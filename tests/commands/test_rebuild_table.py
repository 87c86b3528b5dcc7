"""rebuild-index's summary for people: a key/value table, one row per field (nested fields
and list items on rows of their own), that fits an 80-column terminal; snapshot at 80 and
120 columns, and the real command's lines no longer than the terminal."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import generate, run

#: A real summary (rebuild-index --format json of a small generated store), its paths and
#: timings fixed so that the table is the same on every machine.
SUMMARY = {
    "store": "/data/store",
    "dry_run": False,
    "output": "/data/rebuilt",
    "writes": ["/data/rebuilt/consumequeue", "/data/rebuilt/index", "/data/rebuilt/checkpoint"],
    "commitlog": "symlink to /data/store/commitlog",
    "sizes": {
        "mappedFileSizeCommitLog": {"value": 65536, "from": "--commitlog-file-size"},
        "mappedFileSizeConsumeQueue": {"value": 2000, "from": "the store's consume-queue files"},
        "maxHashSlotNum": {"value": 64, "from": "the store's index files"},
        "maxIndexNum": {"value": 400, "from": "the store's index files"},
    },
    "messages": 222,
    "commitlog_files": 2,
    "commitlog_bytes": 107685,
    "consume_queues": 23,
    "consume_queue_units": 220,
    "consume_queue_files": 23,
    "index_files": 1,
    "index_keys": 636,
    "seconds": 0.5,
    "messages_per_second": 444,
    "recovery": "normal",
    "recovery_first_file": "00000000000000000000",
    "dispatch_end": {"offset": 107685, "file": "00000000000000065536", "reason": "no message here (end of data)",
                     "clean": True},
    "skipped": [],
    "refused_topics": [{"topic": "a/b", "reason": "contains '/'"}],
    "index_names_fallback": [],
}  # fmt: skip

SNAPSHOT = """\
                                rebuild-index
┌──────────────────────────────────┬────────────────────────────────────────┐
│ store                            │ /data/store                            │
│ dry_run                          │ False                                  │
│ output                           │ /data/rebuilt                          │
│ writes                           │ /data/rebuilt/consumequeue             │
│                                  │ /data/rebuilt/index                    │
│                                  │ /data/rebuilt/checkpoint               │
│ commitlog                        │ symlink to /data/store/commitlog       │
│ sizes mappedFileSizeCommitLog    │ 65536 (--commitlog-file-size)          │
│ sizes mappedFileSizeConsumeQueue │ 2000 (the store's consume-queue files) │
│ sizes maxHashSlotNum             │ 64 (the store's index files)           │
│ sizes maxIndexNum                │ 400 (the store's index files)          │
│ messages                         │ 222                                    │
│ commitlog_files                  │ 2                                      │
│ commitlog_bytes                  │ 107685                                 │
│ consume_queues                   │ 23                                     │
│ consume_queue_units              │ 220                                    │
│ consume_queue_files              │ 23                                     │
│ index_files                      │ 1                                      │
│ index_keys                       │ 636                                    │
│ seconds                          │ 0.5                                    │
│ messages_per_second              │ 444                                    │
│ recovery                         │ normal                                 │
│ recovery_first_file              │ 00000000000000000000                   │
│ dispatch_end offset              │ 107685                                 │
│ dispatch_end file                │ 00000000000000065536                   │
│ dispatch_end reason              │ no message here (end of data)          │
│ dispatch_end clean               │ True                                   │
│ skipped                          │ none                                   │
│ refused_topics                   │ topic=a/b reason=contains '/'          │
│ index_names_fallback             │ none                                   │
└──────────────────────────────────┴────────────────────────────────────────┘
"""


def _table(columns: int) -> str:
    code = (
        "import json, sys\n"
        "from rmqstore_cli.job_reports import print_rebuild\n"
        "print_rebuild('table', [json.loads(sys.stdin.read())], 'rebuild-index', False)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(SUMMARY),
        capture_output=True,
        text=True,
        env={"COLUMNS": str(columns), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("columns", [80, 120])
def test_the_table_is_one_row_per_field_and_fits_80_columns(columns):
    out = _table(columns)
    assert "\n".join(line.rstrip() for line in out.splitlines()) + "\n" == SNAPSHOT  # the title is centred
    assert max(len(line) for line in out.splitlines()) <= 80


@pytest.mark.parametrize("columns", [80, 120])
def test_the_real_summary_fits_the_terminal(tmp_path, columns):
    store = generate(tmp_path / "store", messages=200)
    r = run("rebuild-index", "--store", str(store), "--output", str(tmp_path / "out"), env={"COLUMNS": str(columns)})
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "{" not in out  # no JSON object squeezed into a cell
    keys = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert "sizes maxIndexNum" in keys and "dispatch_end reason" in keys and "messages" in keys
