"""dump-commitlog widens a pipe on its stdout (stdio.widen_pipe): the pipe a reader holds
ends up as large as the system allows (up to 1 MiB), the lines through it unchanged, and a
pipe is never shrunk nor anything but a pipe touched."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rmqstore_cli import stdio
from tests.helpers import generate


def _max_size() -> int:
    with open("/proc/sys/fs/pipe-max-size", "rb") as f:
        return int(f.read())


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("pipe") / "store", messages=300)


def _dump(store: Path, *extra: str, stdout=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rmqstore_cli", "dump-commitlog", "--store", str(store), "--format", "jsonl", *extra],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd="/",
    )


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_dump_widens_the_pipe_it_writes_into(store, jobs):
    p = _dump(store, "--jobs", jobs)
    out = p.stdout.read()
    size = fcntl.fcntl(p.stdout.fileno(), stdio.F_GETPIPE_SZ)  # the reader's end: the same pipe
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0, err
    p.stdout.close()
    p.stderr.close()
    assert out.count(b"\n") >= 300
    assert size >= min(stdio.PIPE_BYTES, _max_size()), size


def test_a_pipe_is_never_shrunk_and_a_file_is_left_alone(tmp_path):
    r, w = os.pipe()
    try:
        stdio.widen_pipe(w, 1 << 16)
        before = fcntl.fcntl(w, stdio.F_GETPIPE_SZ)
        stdio.widen_pipe(w, 4096)
        assert fcntl.fcntl(w, stdio.F_GETPIPE_SZ) == before >= 1 << 16
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb") as f:
        stdio.widen_pipe(f.fileno())  # F_GETPIPE_SZ refused (EBADF): nothing raised, nothing changed
        f.write(b"x")
    assert (tmp_path / "f").read_bytes() == b"x"
