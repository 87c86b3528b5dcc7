"""The table cells of every diff row kind, pinned word for word (the table is a pure function of a row)."""

from __future__ import annotations

from rmqstore_cli.render_diff import diff_cells

REC = {"topic": "T", "queue_id": 1, "queue_offset": 7, "msg_id": "AB"}
UNIT = {"commitlog_offset": 100, "size": 64, "tags_code": 3}
Q = {"topic": "T", "queue_id": 2}

CASES = [
    (
        {"kind": "file", "path": "commitlog/0", "size_a": 1, "size_b": 2, "status": "changed", "first_difference": 9},
        {"kind": "file", "what": "commitlog/0", "a": 1, "b": 2, "detail": "changed, first difference at byte 9"},
    ),
    (
        {"kind": "file", "path": "x", "size_a": None, "size_b": 2, "status": "added", "first_difference": None},
        {"kind": "file", "what": "x", "a": None, "b": 2, "detail": "added"},
    ),
    (
        {"kind": "divergence", "offset": 5, "a": REC, "b": None, "past_a": 10, "past_b": 0},
        {
            "kind": "divergence",
            "what": "commit log at 5",
            "a": "T/1@7 AB",
            "b": "-",
            "detail": "A goes 10 bytes past it, B 0",
        },
    ),
    (
        {
            **Q,
            "kind": "queue",
            "min_offset_a": 0,
            "max_offset_a": 4,
            "min_offset_b": None,
            "max_offset_b": None,
            "messages_only_a": 4,
            "messages_only_b": 0,
            "units_changed": 2,
            "first_changed": 1,
        },
        {
            "kind": "queue",
            "what": "T/2",
            "a": "0..4",
            "b": "-",
            "detail": "only in A: 4; only in B: 0; 2 units differ from 1",
        },
    ),
    (
        {
            **Q,
            "kind": "queue",
            "min_offset_a": 0,
            "max_offset_a": 4,
            "min_offset_b": 1,
            "max_offset_b": 3,
            "messages_only_a": 1,
            "messages_only_b": 0,
            "units_changed": 0,
            "first_changed": None,
        },
        {"kind": "queue", "what": "T/2", "a": "0..4", "b": "1..3", "detail": "only in A: 1; only in B: 0"},
    ),
    (
        {**Q, "kind": "unit", "queue_offset": 3, "a": UNIT, "b": UNIT},
        {"kind": "unit", "what": "T/2@3", "a": "100+64 tags 3", "b": "100+64 tags 3", "detail": "differs in place"},
    ),
    (
        {**Q, "kind": "message", "queue_offset": 3, "side": "a", "msg_id": None, "body_crc": 11},
        {"kind": "message", "what": "T/2@3", "a": "-", "b": "", "detail": "only in A; body crc 11"},
    ),
    (
        {**Q, "kind": "message", "queue_offset": 3, "side": "b", "msg_id": "M", "body_crc": 11},
        {"kind": "message", "what": "T/2@3", "a": "", "b": "M", "detail": "only in B; body crc 11"},
    ),
    (
        {**Q, "kind": "offset", "group": "G", "a": 5, "b": None},
        {"kind": "offset", "what": "G T/2", "a": 5, "b": None, "detail": "gone in B"},
    ),
    (
        {**Q, "kind": "offset", "group": "G", "a": 5, "b": 3},
        {"kind": "offset", "what": "G T/2", "a": 5, "b": 3, "detail": "moved backwards"},
    ),
]


def test_cells_of_every_kind():
    for row, want in CASES:
        got = diff_cells(row)
        assert got == want, row["kind"]
        assert list(got) == list(want)  # column order is the dict's order
