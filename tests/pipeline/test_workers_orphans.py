"""fork_map's workers end with the process that forked them, even when it is SIGKILLed
(pipeline/workers.py ``die_with_parent``): a killed cron run leaves no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rmqstore_cli.pipeline.workers import die_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

#: A parent that forks two workers blocked in a task, prints their PIDs and waits.
PARENT = """
import os, sys, time
from rmqstore_cli.pipeline.workers import fork_map

def task(x):
    os.write(1, b"%d\\n" % os.getpid())  # one write: two workers' lines never interleave
    time.sleep(600)

fork_map(task, [1, 2], 2)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_workers_end_when_their_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(parent.stdout.readline()) for _ in range(2)]
        assert all(_alive(w) for w in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30  # a bound on a hang, not a speed
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers)
    finally:
        parent.kill()
        for w in workers if "workers" in locals() else []:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


def test_a_worker_whose_parent_is_already_gone_ends_at_once():
    pid = os.fork()
    if pid == 0:  # the child checks against a parent that is not its own
        try:
            die_with_parent(os.getppid() + 1_000_000)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
