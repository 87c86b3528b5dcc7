"""``Store.pop`` called as a script calls it: typed records whose ``as_dict()`` is the
command's JSON, states and limit checked, the revive offsets read from consumerOffset.json."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rmqstore_cli import PopGroup, PopMessage, PopReport, ReviveQueue, UsageError, open_store
from tests.helpers import cli, generate

POP_START = 1_767_225_600_000 + 3_600_000  # generate's pops follow the workload's hour


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("libpop") / "store", "--broker-version", "5", "--pop-messages", "80", messages=300
    )


def test_records_are_what_the_command_prints(store):
    now = POP_START + 90_000
    with open_store(store) as st:
        rep = st.pop(now=now)
    assert isinstance(rep, PopReport)
    assert all(isinstance(m, PopMessage) for m in rep.messages) and len(rep.messages) == 80
    assert all(isinstance(g, PopGroup) for g in rep.groups)
    assert all(isinstance(q, ReviveQueue) for q in rep.revive_queues) and rep.revive_queues
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.messages[0].state = "acked"  # type: ignore[misc]
    r = cli("pop", "--store", store, "--format", "json", "--now", str(now))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(rep.as_dict()))


def test_states_and_limit_are_checked(store):
    with open_store(store) as st:
        with pytest.raises(UsageError):
            st.pop(state="gone")
        with pytest.raises(UsageError):
            st.pop(limit=-1)
        two = st.pop(state=["acked", "revived"], limit=2)
    assert len(two.messages) == 2 and two.summary["matched"] == two.summary["acked"] + two.summary["revived"]


def test_without_the_revive_offsets_nothing_is_committed(store, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    (copy / "config" / "consumerOffset.json").unlink()
    with open_store(copy) as st:
        rep = st.pop()
    assert rep.revive_queues and all(q.committed_offset is None for q in rep.revive_queues)
    assert all(m.revive_processed is None for m in rep.messages)
