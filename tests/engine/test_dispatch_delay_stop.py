"""A schedule-topic record whose DELAY is not an int: the broker's dispatch check throws
(``CommitLog#checkMessageAndReturnSize``), so the reput stops there. rebuild-index's block
dispatch (store/write/fastdispatch.py, C loops and reference loops) must stop at the same record
and write what the per-record dispatch of generate --from-jsonl wrote before it."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli, run

BAD = 12  # the record whose DELAY is "x"


# DELAY texts Integer#parseInt reads, alike and not (a block's distinct values are parsed
# once: fastdispatch._delay_values), above the highest level, below 1, and longer than the
# bytes told apart at once
DELAYS = ["3", "03", "+2", "-1", "0", "18", "19", "2147483647", "-2147483648", "0000000000000000004", "1", "+0"]


def _records(n: int, delays: list[str] | None = None) -> list[dict]:
    out = []
    for i in range(n):
        schedule = i % 2 == 0
        level = 1 + i % 4
        props = f"UNIQ_KEY\x01U{i:04d}\x02KEYS\x01k{i}\x02"
        if schedule:
            delay = delays[i % len(delays)] if delays else "x" if i == BAD else str(level)
            props += f"DELAY\x01{delay}\x02REAL_TOPIC\x01OrderTopic\x02REAL_QID\x010\x02"
        else:
            props += "TAGS\x01t\x02"
        out.append(
            {
                "topic": "SCHEDULE_TOPIC_XXXX" if schedule else "OrderTopic",
                "queue_id": level - 1 if schedule else 0,
                "store_timestamp": 1795317650000 + i * 10,
                "born_timestamp": 1795317640000 + i,
                "born_host": "10.0.0.1:5000",
                "store_host": "10.1.2.3:10911",
                "properties_string": props,
                "body_base64": "aGVsbG8=",
            }
        )
    return out


def _tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("pure", ["0", "1"])
def test_rebuild_stops_at_a_non_int_delay_where_the_per_record_dispatch_did(tmp_path, pure):
    src = tmp_path / "dump.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _records(30)), encoding="utf-8")
    store = tmp_path / "store"
    r = run("generate", "--store", store, "--from-jsonl", src, "--format", "json")
    assert r.returncode != 0 and "DELAY is not an int" in r.stderr.decode()
    out = tmp_path / "out"
    r = run("rebuild-index", "--store", store, "--output", out, "--format", "json", env={"RMQSTORE_PURE": pure})
    summary = json.loads(r.stdout)
    assert summary["messages"] == BAD
    assert summary["dispatch_end"]["reason"] == "DELAY property is not an int (the broker's check throws)"
    want_cq, got_cq = _tree(store / "consumequeue"), _tree(out / "consumequeue")
    assert got_cq == want_cq and len(want_cq) == 3  # OrderTopic/0 and two delay levels' queues
    assert _tree(out / "index") == _tree(store / "index")


@pytest.mark.parametrize("pure", ["0", "1"])
def test_rebuild_gives_each_delay_text_the_tags_code_the_per_record_dispatch_did(tmp_path, monkeypatch, pure):
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    src = tmp_path / "dump.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _records(400, DELAYS)), encoding="utf-8")
    store = tmp_path / "store"
    monkeypatch.setattr(FAST_PATHS, "gen_block", 0)  # the reference: the reput send by send
    r = cli("generate", "--store", store, "--from-jsonl", src, "--format", "json")
    assert r.exit_code == 0, r.stderr
    out = tmp_path / "out"
    r = run("rebuild-index", "--store", store, "--output", out, "--format", "json", env={"RMQSTORE_PURE": pure})
    assert json.loads(r.stdout)["messages"] == 400
    want_cq, got_cq = _tree(store / "consumequeue"), _tree(out / "consumequeue")
    assert got_cq == want_cq and len(want_cq) == 3  # OrderTopic/0 and two queues of the schedule topic
