"""Issue 31, output channel faults: stdout full, closed or a pipe whose reader went away,
stderr closed or full — every command, every format, one line and a documented exit code
(README "Exit codes": 5 the output is lost and nothing changed, 6 a writing command's work
is done and its report lost), never a traceback; reads change nothing, writes do all their
work or none of it.

The matrix is ``fuzz/outfaults.py``'s (its long run, with fresh interpreters and on Spark,
is in ``fuzz/RESULTS.md``): each (command, format) runs cleanly, then under each fault,
as real processes with real descriptors forked from a server that imported rmqstore once
(``outfaults.ForkServer``; a sample is checked to agree with fresh interpreters). The
cases that failed on main are also run here as fresh ``python -m rmqstore_cli`` processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fuzz import outfaults
from tests.helpers import SMALL, generate

#: The faults every (command, format) meets here ("| head -1" is timing-dependent: fuzz only).
FAULTS = ["stdout-full", "stdout-closed", "stdout-pipe", "stderr-closed", "stderr-full"]
HAS_PYARROW = subprocess.run([sys.executable, "-c", "import pyarrow"], capture_output=True).returncode == 0
_NAMES = outfaults.commands(outfaults.Stores(Path("."), Path("."), Path("."), Path("."), Path(".")), HAS_PYARROW)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    stores = outfaults.make_stores(tmp_path_factory.mktemp("outfaults"))
    server = outfaults.ForkServer()
    m = outfaults.Matrix(stores, server.run)
    yield m, {c.name: c for c in outfaults.commands(stores, HAS_PYARROW)}
    server.close()


#: The fast tier's share of the matrix: a stream, a verdict, an error, a deletion and both
#: rebuilds, each in its first format; ``pytest -m slow`` runs every (command, format).
FAST = {"dump-commitlog", "verify-damaged", "no-store", "expire", "rebuild-output", "rebuild-in-place"}


@pytest.mark.parametrize(
    "name,fmt",
    [
        pytest.param(
            c.name,
            f,
            id=f"{c.name}-{f or 'noformat'}",
            marks=() if c.name in FAST and f == c.formats[0] else pytest.mark.slow,
        )
        for c in _NAMES
        for f in c.formats
    ],
)
def test_output_faults(matrix, name, fmt):
    """One (command, format) under every fault: the exit code README documents for it, one
    `rmqstore: error:` line (the last on stderr) for 5 and 6, nothing said for a pipe's
    reader gone, stdout untouched by a stderr fault, the stores unchanged by a read, and a
    write's work complete (6, 0) or absent (5)."""
    m, cmds = matrix
    outcomes = m.case(cmds[name], fmt, FAULTS)
    bad = [f"{o.fault}: exit {o.exit}: {'; '.join(o.problems)} | {o.stderr[-300:]}" for o in outcomes if o.problems]
    assert not bad, "\n".join(bad)
    assert [o.fault for o in outcomes] == ["clean", *FAULTS]


@pytest.mark.slow
def test_the_fork_server_agrees_with_fresh_interpreters(matrix):
    """The forked runs are what a fresh `python -m rmqstore_cli` does (exit code, stdout,
    stderr), for a stream, verify's answer and a writing command under each fault."""
    m, cmds = matrix
    fresh = outfaults.Matrix(m.s, outfaults.run_exec)
    for name, fmt, faults in (
        ("dump-commitlog-none", "json", ["stdout-closed", "stderr-closed"]),
        ("expire", "jsonl", ["stdout-full", "stdout-pipe"]),
    ):
        forked = [(o.fault, o.exit, o.problems) for o in m.case(cmds[name], fmt, faults)]
        assert forked == [(o.fault, o.exit, o.problems) for o in fresh.case(cmds[name], fmt, faults)], name


# ------------------------------------------------------------------ the cases issue 31 found


def _sh(script: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``script`` in bash, with ``rmq`` a fresh ``python -m rmqstore_cli``."""
    return subprocess.run(
        ["bash", "-c", f'rmq() {{ "{sys.executable}" -m rmqstore_cli "$@"; }}\n{script}'],
        capture_output=True,
        timeout=timeout,
        cwd="/",
    )


def _one_error_line(err: bytes, *needles: str) -> str:
    text = err.decode("utf-8", "replace")
    assert "Traceback" not in text and "Exception ignored" not in text, text
    lines = [ln for ln in text.splitlines() if ln.startswith("rmqstore: error:")]
    assert len(lines) == 1 and text.splitlines()[-1] == lines[0], text
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("of") / "store", messages=1500)


def test_verify_into_a_full_disk_is_exit_5(store):
    """`verify --format jsonl > /dev/full` ended in a rich traceback (OSError ENOSPC)."""
    r = _sh(f"rmq verify --store {store} --format jsonl > /dev/full")
    assert r.returncode == 5
    _one_error_line(r.stderr, "no space left on device", "(stdout)")


def test_dump_with_stdout_closed_is_exit_5(store):
    """`dump-commitlog --format jsonl >&-` ended in `AttributeError: 'NoneType' object has no
    attribute 'write'` from render.py."""
    r = _sh(f"rmq dump-commitlog --store {store} --format jsonl >&-")
    assert r.returncode == 5
    _one_error_line(r.stderr, "closed when rmqstore started", "(stdout)")


def test_an_error_with_stderr_closed_never_reaches_stdout(tmp_path):
    """With fd 2 closed, `print(..., file=sys.stderr)` (sys.stderr None) wrote the error line
    to stdout, into the JSON a script reads; with stderr full the exit code was 1, not 3."""
    missing = tmp_path / "no-store"
    r = _sh(f"rmq dump-commitlog --store {missing} --format json 2>&-")
    assert (r.returncode, r.stdout) == (3, b"")
    r = _sh(f"rmq dump-commitlog --store {missing} --format json 2>/dev/full")
    assert (r.returncode, r.stdout) == (3, b"")


def test_closed_descriptors_are_held_by_dev_null():
    """A closed fd 1 or 2 is taken by /dev/null at start-up, so no file opened later (a store
    file) becomes the process's stdout or stderr for C code or the JVM to write into."""
    code = (
        "import os, sys; from rmqstore_cli import stdio; stdio.install(); f = open(sys.executable, 'rb'); "
        "os.write(3, (os.readlink('/proc/self/fd/1') + ' ' + os.readlink('/proc/self/fd/2')"
        " + ' ' + str(f.fileno())).encode())"
    )
    r = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -c "{code}" 3>&1 1>&- 2>&-'], capture_output=True, timeout=60
    )
    one, two, opened = r.stdout.decode().split()
    assert (one, two) == ("/dev/null", "/dev/null") and int(opened) > 2, r


def test_verify_into_a_closed_pipe_keeps_its_answer(store, tmp_path):
    """`verify | head -1` under `set -o pipefail`: the reader went away, the check still runs
    and its exit status is the answer (1: errors), with nothing said about the pipe."""
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(store, damaged)
    shutil.rmtree(damaged / "index")
    for fmt in ("table", "jsonl"):
        r = _sh(f"set -o pipefail; rmq verify --store {damaged} --format {fmt} | head -c 1 >/dev/null")
        assert r.returncode == 1, (fmt, r.stderr)
        assert b"error" not in r.stderr and b"Traceback" not in r.stderr, r.stderr


def _aged(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    old = 1_000_000_000
    for f in (dst / "commitlog").iterdir():
        os.utime(f, (old, old))
    return dst


def test_expire_whose_report_is_lost_has_done_and_recorded_its_work(store, tmp_path):
    """expire crashed printing after it had deleted files, so its report was lost. Now the
    deletions are complete, exit 6 says so, and the journal in the store root holds every
    deleted file and the summary (what `--format jsonl` would have printed)."""
    s = _aged(store, tmp_path / "store")
    before = sorted(p.name for p in (s / "commitlog").iterdir())
    r = _sh(f"rmq expire --store {s} {' '.join(SMALL[:4])} --reserved-hours 1 --format jsonl > /dev/full")
    assert r.returncode == 6, r.stderr
    journal = s / "rmqstore-expire.jsonl"
    _one_error_line(r.stderr, "expire finished", str(journal))
    after = sorted(p.name for p in (s / "commitlog").iterdir())
    assert after == before[-1:]  # all but the newest went
    lines = [json.loads(x) for x in journal.read_text().splitlines()]
    assert len({x["run"] for x in lines}) == 1
    assert {x["file"] for x in lines if x.get("kind") == "commitlog"} == {f"commitlog/{n}" for n in before[:-1]}
    summary = lines[-1]
    assert summary["kind"] == "summary" and summary["files"] == len(lines) - 1 and summary["journal"] == str(journal)
    v = _sh(f"rmq verify --store {s} --format json")  # the journal is a known root entry
    assert v.returncode == 0 and "store.unknown-entry" not in v.stdout.decode(), v.stdout[-500:]


def test_expire_that_stopped_on_a_file_keeps_exit_3_when_its_report_is_lost(store, tmp_path):
    """A run that deleted some files and then stopped on one it could not prove a store file
    says so (exit 3, its error line) even when its report cannot be written: exit 6 would
    mean "finished". The journal has what it deleted."""
    import shutil

    s = _aged(store, tmp_path / "store")
    files = sorted((s / "commitlog").iterdir())
    outside = tmp_path / "elsewhere"
    shutil.copy2(files[1], outside)
    files[1].unlink()
    files[1].symlink_to(outside)
    os.utime(files[1], (1_000_000_000, 1_000_000_000), follow_symlinks=False)  # as old as the rest
    for fmt in ("table", "json"):  # a table is written (and fails) as it is printed, JSON at the end
        r = _sh(f"rmq expire --store {s} {' '.join(SMALL[:4])} --reserved-hours 1 --format {fmt} > /dev/full")
        assert r.returncode == 3, (fmt, r.stderr)
        _one_error_line(r.stderr, "symlink")
    lines = [json.loads(x) for x in (s / "rmqstore-expire.jsonl").read_text().splitlines()]
    assert lines[0]["file"] == f"commitlog/{files[0].name}" and not lines[-1]["completed"]


def test_expire_with_stdout_closed_refuses_before_deleting(store, tmp_path):
    """A writing command that would print into a stdout closed from the start refuses before
    any work (exit 5); with --quiet it prints only when something went, so it runs, and a
    report then lost is exit 6."""
    s = _aged(store, tmp_path / "store")
    before = sorted(p.name for p in (s / "commitlog").iterdir())
    r = _sh(f"rmq expire --store {s} {' '.join(SMALL[:4])} --reserved-hours 1 >&-")
    assert r.returncode == 5
    _one_error_line(r.stderr, "nothing was changed")
    assert sorted(p.name for p in (s / "commitlog").iterdir()) == before
    assert not (s / "rmqstore-expire.jsonl").exists()
    r = _sh(f"rmq expire --store {s} {' '.join(SMALL[:4])} --reserved-hours 1 --quiet >&-")
    assert r.returncode == 6
    assert len(list((s / "commitlog").iterdir())) == 1


@pytest.mark.slow
def test_spark_verify_into_a_full_disk_is_exit_5(store):
    """--engine spark prints through the same streams (the JVM inherits them): a full
    stdout is exit 5 and one line (fuzz/RESULTS.md has every fault on Spark)."""
    pytest.importorskip("pyspark")
    r = _sh(
        f"rmq verify --store {store} --engine spark --spark-master 'local[1]' --format jsonl {' '.join(SMALL)} "
        "> /dev/full",
        timeout=600,
    )
    assert r.returncode == 5, r.stderr[-2000:]
    _one_error_line(r.stderr, "no space left on device")
