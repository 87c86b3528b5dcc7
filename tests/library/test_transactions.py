"""``Store.transactions`` called as a script calls it: typed records whose ``as_dict()`` is
the command's JSON, the broker config's transactionCheckMax, filters checked, and the op
body parsed as the broker's ``getLong`` parses it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rmqstore_cli import Transaction, TransactionGroup, TransactionReport, UsageError, open_store
from rmqstore_cli.store.answers.transactions import op_offsets
from tests.helpers import cli, generate

START = 1_767_225_600_000  # generate's default --start


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("libtx") / "store",
        "--transaction-ratio",
        "0.4",
        "--transaction-outcomes",
        "5:2:3",
        messages=800,
        seed=5,
    )


def test_records_are_what_the_command_prints(store):
    with open_store(store) as st:
        rep = st.transactions(now=START)
    assert isinstance(rep, TransactionReport)
    assert all(isinstance(t, Transaction) for t in rep.transactions)
    assert all(isinstance(g, TransactionGroup) for g in rep.groups)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rep.transactions[0].state = "committed"  # type: ignore[misc]
    r = cli("transactions", "--store", store, "--format", "json", "--now", str(START))
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout) == json.loads(json.dumps(rep.as_dict()))


def test_transaction_check_max_comes_from_the_broker_config(store, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={store}\ntransactionCheckMax=1\n", encoding="utf-8")
    with open_store(store) as st:
        default = st.transactions(now=START, state="discard")
    with open_store(store, conf) as st:
        strict = st.transactions(now=START, state="discard")
    assert strict.summary["transaction_check_max"] == 1 and default.summary["transaction_check_max"] == 15
    assert len(strict.transactions) > len(default.transactions)
    assert all(t.check_times is not None and t.check_times >= 1 for t in strict.transactions)


def test_filters_are_checked(store):
    with open_store(store) as st:
        with pytest.raises(UsageError):
            st.transactions(state="done")
        with pytest.raises(UsageError):
            st.transactions(limit=-1)
        two = st.transactions(state=["pending", "discard"], limit=2, now=START)
    assert len(two.transactions) == 2 and two.summary["matched"] >= 2


@pytest.mark.parametrize(
    "body, good, bad",
    [
        (b"7", [7], []),
        (b"1,2,3,", [1, 2, 3], []),  # 5.x: every offset followed by the separator
        (b"", [], []),
        (b"4,,5", [4, 5], [""]),
        (b" 6,x,1_0,+8", [8], [" 6", "x", "1_0"]),
        (b"99999999999999999999", [], ["99999999999999999999"]),  # beyond a long
        ("٣".encode(), [3], []),  # Character#digit takes any script's digits
    ],
)
def test_op_offsets_parse_as_long_parselong(body, good, bad):
    assert op_offsets(body) == (good, bad)
