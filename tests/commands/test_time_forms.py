"""``times.parse_time``'s ISO 8601 forms and its two refusals (epoch-looking digits, and
anything else), as every time option reads them."""

from __future__ import annotations

import datetime as dt

import pytest

from rmqstore_cli.errors import UsageError
from rmqstore_cli.times import parse_time

UTC8 = dt.timezone(dt.timedelta(hours=8))


def test_iso_with_z_with_an_offset_and_in_the_given_zone():
    assert parse_time("2026-11-22T03:10:00Z", "--begin") == 1795317000000
    assert parse_time("2026-11-22T11:10:00+08:00", "--begin") == 1795317000000
    assert parse_time("2026-11-22T11:10", "--begin", tz=UTC8) == 1795317000000


def test_relative_and_now():
    assert parse_time("now", "--end", now=5_000) == 5_000
    assert parse_time("-2s", "--end", now=5_000) == 3_000


@pytest.mark.parametrize(
    ("value", "said"),
    [("12345", "is neither epoch seconds nor epoch milliseconds"), ("yesterday", "cannot read time 'yesterday'")],
)
def test_what_is_no_time_is_refused_with_the_forms(value, said):
    with pytest.raises(UsageError, match=said):
        parse_time(value, "--begin")
