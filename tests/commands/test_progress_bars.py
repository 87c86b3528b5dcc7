"""The progress bar of the long commands (verify, rebuild-index, export, generate, expire):
drawn on stderr when stderr is a terminal (a pseudo-terminal here), never into a pipe, never
with --quiet, and stdout the same bytes either way. RMQSTORE_PROGRESS_DELAY=0 draws it at
once, so no test needs a job slower than the 2 s a bar waits for; nothing here is timed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import SMALL

#: What a drawn bar leaves on the terminal: rich's bar line.
BAR = "━"
NOW = "2030-01-01T00:00:00Z"


def command(name: str, store: Path) -> tuple[list[str], str, bool]:
    """(arguments, the text its bar shows, whether it has --quiet) of one command."""
    return {
        "generate": (["generate", "--store", "g", "--messages", "3000", "--format", "json"], "%", True),
        "export": (["export", "--store", str(store), "--output", "pq", "--format", "json"], "%", True),
        "verify": (["verify", "--store", str(store), "--format", "json"], "%", False),
        "rebuild-index": (
            ["rebuild-index", "--store", str(store), "--output", "out", "--format", "json"],
            "MB/s",
            True,
        ),
        "expire": (
            ["expire", "--store", str(store), *SMALL, "--now", NOW, "--reserved-hours", "0", "--dry-run"]
            + ["--format", "json"],
            "%",
            True,
        ),
    }[name]


def env() -> dict:
    return dict(os.environ, RMQSTORE_PROGRESS_DELAY="0", TERM="xterm-256color", COLUMNS="100")


def on_tty(args: list[str], cwd: Path) -> tuple[int, bytes, str]:
    """Run with stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    main, sub = os.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "rmqstore_cli", *args],
        stdout=subprocess.PIPE,
        stderr=sub,
        stdin=subprocess.DEVNULL,
        env=env(),
        cwd=cwd,
    )
    os.close(sub)
    got: list[bytes] = []

    def read() -> None:
        while True:
            try:
                b = os.read(main, 65536)
            except OSError:  # EIO: the process is gone and the terminal closed
                return
            if not b:
                return
            got.append(b)

    t = threading.Thread(target=read)
    t.start()
    out, _ = p.communicate(timeout=300)
    t.join(timeout=60)
    os.close(main)
    return p.returncode, out, b"".join(got).decode("utf-8", "replace")


def on_pipe(args: list[str], cwd: Path) -> tuple[int, bytes, str]:
    p = subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *args], capture_output=True, env=env(), cwd=cwd, timeout=300
    )
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def masked(a: bytes, cwd: Path) -> bytes:
    """stdout with what differs from run to run masked: the run time (``"seconds"``, a rate
    ``"…_per_second"``) and the directory it ran in (each run writes its output into its own)."""
    return re.sub(rb'"(seconds|[a-z_]+_per_second)":\s*[0-9.]+', rb'"\1":0', a).replace(str(cwd).encode(), b"CWD")


@pytest.mark.parametrize("name", ["generate", "export", "verify", "rebuild-index", "expire"])
def test_bar_on_a_terminal_only(name, small_store_master, tmp_path):
    if name == "export":
        pytest.importorskip("pyarrow", reason="export needs pyarrow (the spark extra)")
    args, shows, has_quiet = command(name, small_store_master)
    runs = {k: tmp_path / k for k in ("tty", "pipe", "quiet")}
    for d in runs.values():
        d.mkdir()
    code, out_tty, tty = on_tty(args, runs["tty"])
    assert code == 0, tty
    assert BAR in tty and shows in tty, tty
    code, out_pipe, err = on_pipe(args, runs["pipe"])
    assert code == 0, err
    assert BAR not in err and shows not in err and "\x1b" not in err, err
    assert out_tty and masked(out_tty, runs["tty"]) == masked(out_pipe, runs["pipe"])
    if has_quiet:
        code, out_quiet, quiet = on_tty([*args, "--quiet"], runs["quiet"])
        assert code == 0, quiet
        assert BAR not in quiet and "\x1b" not in quiet, quiet
        assert masked(out_quiet, runs["quiet"]) == masked(out_pipe, runs["pipe"])


def test_the_delay_is_two_seconds_unless_set(monkeypatch):
    from rmqstore_cli.render_progress import PROGRESS_DELAY_ENV, progress_delay

    monkeypatch.delenv(PROGRESS_DELAY_ENV, raising=False)
    assert progress_delay() == 2.0
    for value, want in (("0", 0.0), ("0.5", 0.5), ("-3", 0.0), ("soon", 2.0)):
        monkeypatch.setenv(PROGRESS_DELAY_ENV, value)
        assert progress_delay() == want


def test_streamed_findings_stay_on_stdout(small_store_master, tmp_path):
    """verify --format jsonl prints each finding as the scan finds it, while the bar is up:
    the lines go to stdout, never to the bar's terminal."""
    store = tmp_path / "store"
    shutil.copytree(small_store_master, store)
    first = sorted((store / "commitlog").iterdir())[0]
    with open(first, "r+b") as f:  # a byte of the first record's body: a body CRC finding
        f.seek(300)
        b = f.read(1)
        f.seek(300)
        f.write(bytes([b[0] ^ 0xFF]))
    args = ["verify", "--store", str(store), "--format", "jsonl"]
    _, out_tty, tty = on_tty(args, tmp_path)
    _, out_pipe, _ = on_pipe(args, tmp_path)
    assert BAR in tty and '"check"' not in tty, tty
    assert b'"check"' in out_tty and masked(out_tty, tmp_path) == masked(out_pipe, tmp_path)
