"""The argument checks and small rules Store's methods share (api/base.py, api/store.py,
api/jobs.py): what each refuses and says, and the lower-case UNIQ_KEY look-up."""

from __future__ import annotations

import pytest

from rmqstore_cli import UsageError, open_store
from rmqstore_cli.api.base import at_ms, chosen_states, positive_counts
from rmqstore_cli.api.jobs import check_expire_args, check_rebuild_args
from rmqstore_cli.api.store import lower_uniq_key
from tests.helpers import generate


def test_positive_counts_names_the_first_bad_one():
    positive_counts(sample=None, max_bytes=1)
    with pytest.raises(UsageError, match="max_bytes 0: not a positive count"):
        positive_counts(sample=3, max_bytes=0)


def test_chosen_states_takes_one_or_many_and_checks_limit():
    known = ("committed", "pending")
    assert chosen_states(None, known, None) is None
    assert chosen_states("pending", known, 3) == ("pending",)
    assert chosen_states(["committed", "pending"], known, 0) == ("committed", "pending")
    with pytest.raises(UsageError, match="state 'x': not committed, pending"):
        chosen_states(["pending", "x"], known, None)
    with pytest.raises(UsageError, match="limit -1: not a count"):
        chosen_states(None, known, -1)


def test_at_ms_is_the_given_time_or_the_clock():
    assert at_ms(1_700_000_000_000) == 1_700_000_000_000
    assert at_ms(None) > 1_700_000_000_000


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((None, 1.5, None), "disk_ratio 1.5 is not a share"),
        ((-1.0, None, None), "reserved_hours -1 is negative"),
        ((None, None, 0), "max_files 0: at least one"),
    ],
)
def test_expire_arguments_refused(args, said):
    with pytest.raises(UsageError, match=said):
        check_expire_args(*args)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((None, "all", None, False, False), "only='all': not cq or index"),
        ((None, "index", ["T"], False, False), "do not go with only='index'"),
        (("out", None, None, False, True), "no_backup goes with an in-place rebuild"),
        ((None, None, None, True, False), "copy_commitlog goes with an output directory"),
        ((None, "cq", ["a/b"], False, False), "cannot be a consume-queue directory"),
    ],
)
def test_rebuild_arguments_refused(args, said):
    with pytest.raises(UsageError, match=said):
        check_rebuild_args(*args)


def test_lower_uniq_key_is_hex_of_a_uniq_keys_length():
    assert lower_uniq_key("7f000001" + "0" * 24)
    assert not lower_uniq_key("7F000001" + "0" * 24)  # already upper-case
    assert not lower_uniq_key("order-12")
    assert not lower_uniq_key("g" * 32)


def test_a_lower_case_uniq_key_is_looked_up_upper_case(tmp_path):
    store = generate(tmp_path / "store", messages=50)
    with open_store(store) as st:
        uniq = next(m.uniq_key for m in st.messages() if m.uniq_key != m.uniq_key.lower())
        upper = [h.as_dict() for h in st.lookup(uniq)]
        lower = [h.as_dict() for h in st.lookup(uniq.lower())]
    assert upper and lower == upper
