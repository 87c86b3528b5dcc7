"""Every command's table at 80 and 120 columns (COLUMNS into a pipe, as a terminal's width):
no line wider than the terminal, a long topic, key, tag or body folded under its row or cut
with an ellipsis, never the table; and a snapshot of each, in tests/commands/snapshots/.

The store: generated messages (5.x: delayed, transactional, timer and retry sends) over
small files, then one record of long values (a 90-character topic, a 100-character key, a
40-character tag, a long property and body, replayed with ``generate --from-jsonl``). Commands run
in the store's parent directory with relative paths, so a snapshot names no temporary
directory. A changed table: ``RMQSTORE_UPDATE_SNAPSHOTS=1 pytest tests/commands/test_table_widths.py``
rewrites the snapshots; review them with ``git diff`` before committing.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SMALL

SNAPSHOTS = Path(__file__).parent / "snapshots"
LONG_TOPIC = "Orders.Region-EU.Warehouse-Fulfilment." + "Stage" * 10 + "-Final"
LONG_KEY = "customer-" + "7" * 91
LONG_TAG = "Tag-" + "x" * 36
LONG_RECORD = {
    "topic": LONG_TOPIC,
    "queue_id": 0,
    "store_timestamp": 1767232800000,
    "born_timestamp": 1767232799990,
    "born_host": "10.0.0.7:50000",
    "store_host": "10.0.0.5:10911",
    "properties": {
        "KEYS": f"{LONG_KEY} short-key",
        "TAGS": LONG_TAG,
        "UNIQ_KEY": "0A0000070000C35000000000000000AA",
        "trace": "span-" + "ab" * 60,
    },
    "body_base64": base64.b64encode(b"a long body: " + b"lorem ipsum " * 30).decode(),
}
NOW = "2026-01-02T00:00:00Z"


def _cli(cwd: Path, *args: str, columns: int = 200) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns), TZ="UTC", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """``s``: the store; ``s2``: it with three more messages (diff); ``e``: its commit-log
    files aged for expire; ``r``: its first commit-log file cut short (repair); ``p``: a
    store of POP consumption (pop)."""
    d = tmp_path_factory.mktemp("widths")
    (d / "long.jsonl").write_text(json.dumps(LONG_RECORD) + "\n", encoding="utf-8")
    gen = ["generate", "--broker-version", "5", *SMALL, "--quiet", "--format", "json"]
    for args in (
        ["--store", "s", "--messages", "300", "--seed", "3", "--topics", "2", "--queues", "2"]
        + ["--retry-ratio", "0.05", "--transaction-ratio", "0.1", "--transaction-outcomes", "8:1:1"]
        + ["--timer-ratio", "0.05", "--delay-ratio", "0.05"],
        ["--store", "s", "--append", "--from-jsonl", "long.jsonl"],
    ):
        r = _cli(d, *gen, *args)
        assert r.returncode == 0, r.stderr
    shutil.copytree(d / "s", d / "s2")
    r = _cli(d, *gen, "--store", "s2", "--append", "--messages", "3", "--seed", "4")
    assert r.returncode == 0, r.stderr
    shutil.copytree(d / "s", d / "e")
    files = sorted((d / "e" / "commitlog").iterdir())
    assert len(files) >= 3
    for f in files:
        os.utime(f, (1767225600, 1767225600))  # 2026-01-01: 72 h old at --now
    shutil.copytree(d / "s", d / "r")
    r = _cli(d, *gen, "--store", "p", "--messages", "120", "--seed", "6", "--topics", "2", "--pop-messages", "40")
    assert r.returncode == 0, r.stderr
    first = files[0].name
    with open(d / "r" / "commitlog" / first, "r+b") as f:
        f.truncate(30000)
    return d


def _msg_id(d: Path) -> str:
    r = _cli(d, "dump-commitlog", "--store", "s", "--format", "jsonl", "-t", LONG_TOPIC)
    return json.loads(r.stdout)["msg_id"]


#: name -> the command's arguments (run in the stores' directory)
CASES = {
    "dump-commitlog": ["dump-commitlog", "--store", "s", "-t", LONG_TOPIC, "--body", "text", "--properties"],
    "dump-commitlog-plain": ["dump-commitlog", "--store", "s", "--limit", "6"],
    "dump-cq": ["dump-cq", "--store", "s", LONG_TOPIC, "0", "--messages"],
    "dump-cq-summary": ["dump-cq", "--store", "s", "--summary"],
    "index-lookup": ["index-lookup", "--store", "s", LONG_KEY, "--body", "text"],
    "search-offset": ["search-offset", "--store", "s", "-t", LONG_TOPIC, "--time", "2026-01-01T00:00:00Z"],
    "decode-msgid": ["decode-msgid", "--store", "s", "MSGID", "0A0000070000C35000000000000000AA"],
    "dump-timer": ["dump-timer", "--store", "s"],
    "dump-timer-overdue": ["dump-timer", "--store", "s", "--overdue", "--summary", "--now", NOW],
    "pop": ["pop", "--store", "p", "--now", NOW],
    "transactions": ["transactions", "--store", "s", "--now", NOW],
    "diff": ["diff", "s", "s2"],
    "generate": ["generate", "--store", "g-COLUMNS", "--messages", "20", "--seed", "5", "--broker-version", "5"],
    "expire": ["expire", "--store", "e", "--now", "2026-01-04T00:00:00Z", "--reserved-hours", "1", "--dry-run"],
    "export": ["export", "--store", "s", "--output", "x-COLUMNS"],
    "repair": ["repair", "--store", "r", "--pad", "r/commitlog/00000000000000000000", "--dry-run"],
}
#: the commands whose tables at 80 and 120 columns are checked in their own tests
ELSEWHERE = {
    "stats": "tests/commands/test_stats.py, test_stats_traffic.py",
    "verify": "tests/engine/test_verify.py",
    "consumer-progress": "tests/commands/test_consumer_progress.py",
    "rebuild-index": "tests/commands/test_rebuild_table.py",
}
#: summary rows whose values change from run to run (times taken)
VOLATILE = re.compile(r"seconds|per_second|elapsed")


def _normal(text: str) -> str:
    """The output with the rows that change between runs dropped, and (in rich's boxed
    summaries only) the box's padding collapsed, so that a time taken moves nothing."""
    out = []
    for line in text.splitlines():
        if VOLATILE.search(line):
            continue
        if any(c in line for c in "│┌└├"):
            line = re.sub(" {2,}", " ", re.sub("─+", "─", line))
            if line.startswith("┌") and out:
                out[-1] = out[-1].strip()  # the box's title, centred over it
        out.append(line.rstrip())
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_table_fits_the_terminal(stores, case, columns):
    from rich.cells import cell_len

    args = [a.replace("MSGID", _msg_id(stores)).replace("COLUMNS", str(columns)) for a in CASES[case]]
    r = _cli(stores, *args, columns=columns)
    assert r.returncode in (0, 1), r.stderr
    lines = r.stdout.splitlines()
    assert lines, r.stderr
    wide = [x for x in lines if cell_len(x) > columns]
    assert not wide, "\n".join(wide)
    text = _normal(r.stdout)
    snap = SNAPSHOTS / f"{case}-{columns}.txt"
    if os.environ.get("RMQSTORE_UPDATE_SNAPSHOTS"):
        snap.parent.mkdir(exist_ok=True)
        snap.write_text(text, encoding="utf-8")
    assert snap.exists(), f"no snapshot {snap.name}: RMQSTORE_UPDATE_SNAPSHOTS=1 writes it"
    assert text == snap.read_text(encoding="utf-8")


@pytest.mark.parametrize("columns", [80, 120])
def test_long_values_are_folded_not_the_table(stores, columns):
    """The long record's topic, key, tag, property and body: each shown (whole under its row,
    or cut with an ellipsis), and every row line of the table as wide as the terminal at most."""
    r = _cli(stores, *CASES["dump-commitlog"], columns=columns)
    lines = r.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.split()[:1] == ["offset"])
    row = lines[head + 1]
    under = lines[head + 2 :]
    topic_shown = [x for x in [row, *under] if LONG_TOPIC[:10] in x]
    assert topic_shown and (LONG_TOPIC in "".join(topic_shown) or "\u2026" in topic_shown[0])
    keys = [x for x in under if x.lstrip().startswith("keys: ")]
    assert keys or "\u2026" in row  # under the row, or cut in it
    body = next(i for i, x in enumerate(under) if x.lstrip().startswith("body: "))
    assert under[body + 1].startswith("      ")  # folded onto a second line, indented
    plain = _cli(stores, *CASES["dump-commitlog-plain"], columns=200).stdout.splitlines()
    assert max(len(x) for x in plain) > columns  # the same rows are wider than the terminal unfitted


def test_every_command_has_a_table_width_check():
    """A new command gets a case here (or names where its widths are checked)."""
    from rmqstore_cli.app import COMMANDS

    cased = {a[0] for a in CASES.values()}
    assert {name for name, _, _ in COMMANDS} - cased - set(ELSEWHERE) == set()
