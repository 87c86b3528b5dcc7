"""verify's check tables: one row a check, read back into the (severity, meaning) pairs."""

from __future__ import annotations

import pytest

from rmqstore_cli.store.checks.findings import CHECKS, check_table


def test_rows_continuations_and_comments() -> None:
    got = check_table(
        """
# a comment line
a.one   error    the first
                 and the rest of it
b.two   info     another #anchor
"""
    )
    assert got == {"a.one": ("error", "the first and the rest of it"), "b.two": ("info", "another #anchor")}


@pytest.mark.parametrize("rows", ["a.one  fatal  unknown severity", "a.one  error  once\na.one  info  twice"])
def test_a_bad_row_fails(rows: str) -> None:
    with pytest.raises(ValueError, match="a.one"):
        check_table(rows)


def test_the_catalog_reads_as_before() -> None:
    """Rows the tables wrap are joined back with single spaces: no meaning keeps a line break,
    a doubled space or an edge space, and the catalog keeps its first and its known rows."""
    assert all(" " not in m[:1] + m[-1:] and "  " not in m and "\n" not in m for _, m in CHECKS.values())
    assert next(iter(CHECKS)) == "store.live-broker"
    assert CHECKS["commitlog.body-crc"] == ("error", "BODYCRC differs from crc32(body) & 0x7FFFFFFF")
    assert CHECKS["cq.superseded"] == (
        "info",
        "messages whose queue offsets were used again after a restart lost their units "
        "(docs/format/commitlog.md#append)",
    )
