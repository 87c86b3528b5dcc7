"""fork_map's workers end with the process that forked them, even when it is SIGKILLed
(pipeline/workers.py ``die_with_parent``): a killed cron run leaves no worker behind."""

from __future__ import annotations

import os
import sys

import pytest

from rmqstore_cli.pipeline.workers import die_with_parent
from tests.helpers.pipeline import left_after_kill

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


def test_workers_end_when_their_parent_is_killed():
    assert left_after_kill([sys.executable, "-c", PARENT]) == []


def test_a_worker_whose_parent_is_already_gone_ends_at_once():
    pid = os.fork()
    if pid == 0:  # the child checks against a parent that is not its own
        try:
            die_with_parent(os.getppid() + 1_000_000)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1
