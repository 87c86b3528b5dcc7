"""``QueueComparison``: the library's record of ``Store.compare_consume_queues`` is the engine's
comparison (store/checks/cq_compare.py) itself, so the twelve fields are declared once and cannot
drift; its JSON and the library page's list of its keys are held here."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import rmqstore_cli
from rmqstore_cli.api import records
from rmqstore_cli.store.checks import cq_compare

LIBRARY_PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def test_the_public_record_is_the_engines_comparison():
    assert rmqstore_cli.QueueComparison is records.QueueComparison is cq_compare.QueueComparison


def test_as_dict_spells_each_unit_out_and_ends_with_agrees():
    c = cq_compare.QueueComparison("T", 1, 0, 5, 0, 6, 1, 0, 1, 3, (100, 20, 7), None)
    assert c.as_dict() == {
        "topic": "T",
        "queue_id": 1,
        "file_first": 0,
        "file_end": 5,
        "rocksdb_first": 0,
        "rocksdb_end": 6,
        "differing": 1,
        "only_file": 0,
        "only_rocksdb": 1,
        "first_difference": 3,
        "file_unit": {"commitlog_offset": 100, "size": 20, "tags_code": 7},
        "rocksdb_unit": None,
        "agrees": False,
    }
    assert list(c.as_dict()) == [f.name for f in fields(c)] + ["agrees"]


def test_the_library_page_names_every_key():
    row = next(line for line in LIBRARY_PAGE.read_text().splitlines() if line.startswith("| `compare_consume_queues("))
    named = set(re.findall(r"`([a-z_]+)`", row))
    keys = {f.name for f in fields(cq_compare.QueueComparison)} | {"agrees"}
    assert keys - {"topic", "queue_id"} <= named
