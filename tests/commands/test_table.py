"""Tables (issue 16, "Fast tables"): the streaming table's layout (widths fixed once, one
header, plain text off a terminal, store text escaped), the block renderer (tableblock.py)
against the per-record reference, and dump-commitlog's ``kind`` column against the
real-broker fixtures' expected.json."""

from __future__ import annotations

import datetime as dt
import json
import os
import re

import numpy as np
import pytest

from rmqstore_cli.render import Output, TableWriter, text_width
from rmqstore_cli.store.commitlog import AppendSpec, CommitLog
from rmqstore_cli.store.commitlog.columns import MessageBlock
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.tableblock import block_rows, commitlog_columns, message_row
from rmqstore_cli.times import parse_tz
from tests.helpers import cli, fixture_dir, run
from tests.helpers.records import PLAIN, TOPICS, TRICKY, spec

#: what a terminal acts on: C0 (but the newline), DEL, C1, line separators, bidi controls
_RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _kind_spec(topic: str, i: int, props: bytes, sys_flag: int = 0) -> AppendSpec:
    return AppendSpec(
        topic,
        i % 4,
        b"x" * (i % 5),
        props,
        1_767_225_600_000 + i * 997,
        1_767_225_600_000 + i,
        (b"\x0a\x00\x00\x07", 50000),
        (b"\x0a\x00\x00\x05", 10911),
        sys_flag=sys_flag,
        prepared_transaction_offset=i * 13,
        raw_properties=True,
    )


@pytest.fixture(scope="module")
def tricky_table_store(tmp_path_factory):
    """The JSON renderer's tricky records and topics, plus every kind with good and bad
    DELAY/REAL_TOPIC values, long keys and tags that must be cut, and enough plain records
    to fill several blocks."""
    root = tmp_path_factory.mktemp("tricky-table") / "store"
    cl = CommitLog(StoreConfig.load(root, None, mapped_file_size_commit_log=1 << 20), writable=True)
    cl.open_for_append()
    i = 0
    for props in TRICKY:
        for one in (spec("OrderTopic", i, PLAIN), spec("OrderTopic", i + 1, props)):
            cl.append(one)
        i += 2
    for j, topic in enumerate(TOPICS):
        cl.append(spec(topic, i + j, PLAIN, v6=j % 2 == 0))
    kinds = [
        ("SCHEDULE_TOPIC_XXXX", b"DELAY\x013\x02REAL_TOPIC\x01OrderTopic\x02KEYS\x01d1", 0),
        ("SCHEDULE_TOPIC_XXXX", b"DELAY\x0199\x02REAL_TOPIC\x01Esc\x1b[2JTopic", 0),  # capped at the last level
        ("SCHEDULE_TOPIC_XXXX", b"DELAY\x01x\x02REAL_TOPIC\x01OrderTopic", 0),  # not an int: no time
        ("SCHEDULE_TOPIC_XXXX", b"DELAY\x01-1", 0),
        ("RMQ_SYS_TRANS_HALF_TOPIC", b"REAL_TOPIC\x01OrderTopic\x02REAL_QID\x011\x02TRAN_MSG\x01true", 0),
        ("RMQ_SYS_TRANS_HALF_TOPIC", b"REAL_TOPIC\x01\xe4\xb8\xad\xff", 0),
        ("RMQ_SYS_TRANS_OP_HALF_TOPIC", b"TAGS\x01d", 0),
        ("OrderTopic", b"TRAN_MSG\x01true", 4),
        ("OrderTopic", b"TRAN_MSG\x01true", 8),
        ("OrderTopic", b"TRAN_MSG\x01true", 12),
        ("OrderTopic", b"", 5),
        ("%RETRY%cg", b"RETRY_TOPIC\x01OrderTopic", 0),
        ("%RETRY%cg", b"", 0),
        ("%DLQ%cg", b"RETRY_TOPIC\x01X  ", 0),
        ("%RETRY%cg", b"RETRY_TOPIC\x01OrderTopic", 8),  # a COMMIT on a retry topic: commit
        ("OrderTopic", "KEYS\x01bidi\u202e c1\u0085\x02TAGS\x01t\x1b[2J".encode(), 0),
        ("OrderTopic", b"KEYS\x01" + b"k" * 300 + b"\x02TAGS\x01" + b"t" * 100, 0),
        ("OrderTopic", "KEYS\x01宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽宽 x\x02TAGS\x01支付标签".encode(), 0),
    ]
    for j, (topic, props, sf) in enumerate(kinds):
        cl.append(_kind_spec(topic, i + j, props, sf))
        cl.append(_kind_spec("OrderTopic", i + j, PLAIN))
    for j in range(9000):  # several blocks of plain records
        cl.append(
            _kind_spec(
                ("OrderTopic", "PaymentTopic", "SCHEDULE_TOPIC_XXXX")[j % 3],
                j,
                b"DELAY\x01%d\x02REAL_TOPIC\x01OrderTopic\x02KEYS\x01order-%d k%d\x02TAGS\x01%s"
                % (j % 20, j, j * 7, (b"Pay", "支付标签".encode())[j % 5 == 0]),
            )
        )
    cl.close()
    return root


def _stores(tricky_table_store, small_store_master):
    d4, d5 = fixture_dir("4.9.7"), fixture_dir("5.3.3")
    return [
        (d4 / "store", d4 / "broker.conf"),
        (d5 / "store", d5 / "broker.conf"),
        (tricky_table_store, None),
        (small_store_master, None),
    ]


def _reference(t: TableWriter, msgs, zone, delays) -> bytes:
    return b"".join(
        t.line(t.cells(message_row(m, zone, delays))).encode("utf-8", "backslashreplace") + b"\n" for m in msgs
    )


@pytest.mark.slow
@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin", None])
def test_block_rows_equal_the_reference(tricky_table_store, small_store_master, tz):
    """Every record of every block, all of a block or a selection, wide and narrow columns:
    the numpy rows are the reference's rows byte for byte."""
    zone = parse_tz(tz)
    for root, conf in _stores(tricky_table_store, small_store_master):
        cfg = StoreConfig.load(root, conf)
        delays = cfg.delay_level_table
        cl = CommitLog(cfg)
        blocks = [x for x in cl.scan_blocks(every_file=True) if isinstance(x, MessageBlock)]
        assert blocks
        for widths in (None, "narrow"):
            out = Output("table", commitlog_columns(cl.files[-1].end_offset))
            t = out.table
            if widths == "narrow":  # every text column cut, every number wider than its column
                t.widths = [3, 23, 8, 6, 1, 2, 4, 5, 1, 32, 0]
                t.right = [c.right for c in t.columns]
            for blk in blocks:
                every = np.arange(blk.n)
                for take in (every, every[1::3]):
                    got = block_rows(blk, take, out, zone, delays)
                    assert got == _reference(t, blk.messages(take), zone, delays), (root, widths)


# ------------------------------------------------------------------ layout through the CLI

RIGHT = {"offset", "queue", "queue offset", "size", "cq offset", "commitlog offset", "tags code"}


def _columns(header: str) -> list[tuple[str, int, int]]:
    """Each header's name and the cells it spans (headers are ASCII)."""
    return [(m[0], m.start(), m.end()) for m in re.finditer(r"\S+(?: \S+)*", header)]


def _cells(line: str) -> list[str]:
    """A line as terminal cells (a wide character fills two)."""
    out = []
    for ch in line:
        out += [ch] + [""] * (text_width(ch) - 1)
    return out


def _assert_aligned(text: str) -> tuple[str, list[str]]:
    """A title, one header, then rows in which every left-aligned column starts, and every
    right-aligned (number) column ends, where its header does, two spaces from its neighbour.
    A cell that pushed the rest of its row would move every later column."""
    lines = text.splitlines()
    head, rows = lines[1], lines[2:]
    assert all(r != head for r in rows)  # never repeated
    cols = _columns(head)
    for r in rows:
        cells = _cells(r)
        for i, (name, start, end) in enumerate(cols):
            if name in RIGHT and i + 1 < len(cols):
                assert cells[end : end + 2] == [" ", " "] and cells[end - 1] != " ", (r, name)
            elif name not in RIGHT and i and start < len(cells):
                assert cells[start - 2 : start] == [" ", " "], (r, name)
    return head, rows


@pytest.mark.slow
def test_widths_stay_fixed_across_blocks_and_long_text(tricky_table_store, small_store_master):
    """Thousands of rows in many blocks (and files), topics of 200 characters, keys of 300,
    wide CJK tags: every column starts in the same cell on every row, and the header is printed
    once, with the title above it."""
    for store, extra in ((tricky_table_store, ()), (small_store_master, ("--tz", "UTC"))):
        r = run("dump-commitlog", "--store", store, *extra)
        assert r.returncode == 0, r.stderr
        text = r.stdout.decode()
        assert text.splitlines()[0] == str(store)
        head, rows = _assert_aligned(text)
        assert head.split()[:4] == ["offset", "store", "time", "kind"]
        assert len(rows) > 3000
    assert "…" in text or "…" in run("dump-commitlog", "--store", tricky_table_store).stdout.decode()


@pytest.mark.slow
def test_no_ansi_off_a_terminal_and_only_a_bold_header_on_one(small_store_master):
    from tests.helpers.contract import on_pty

    r = run(
        "dump-commitlog",
        "--store",
        small_store_master,
        "--limit",
        "300",
        env={"TERM": "xterm-256color", "FORCE_COLOR": "1"},
    )
    assert r.returncode == 0 and b"\x1b" not in r.stdout
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env.update(TERM="xterm-256color", COLUMNS="200")
    out = on_pty(["dump-commitlog", "--store", small_store_master, "--limit", "300"], env)
    assert out.count(b"\x1b[1m") == 1 and out.count(b"\x1b") == 2  # bold on, off: the header only
    assert b"\x1b" not in on_pty(
        ["dump-commitlog", "--store", small_store_master, "--limit", "3"], dict(env, NO_COLOR="1")
    )


@pytest.mark.slow
def test_hostile_text_is_escaped_in_the_table(tricky_table_store):
    """Escapes, C1 controls, bidi overrides and invalid UTF-8 in topics, keys, tags and
    REAL_TOPIC: shown escaped, never raw, in either path (blocks, or per record with --key)."""
    for extra in ((), ("--key", "k1")):
        r = run("dump-commitlog", "--store", tricky_table_store, *extra)
        assert r.returncode == 0
        text = r.stdout.decode("utf-8")
        assert not _RAW.search(text)
        if not extra:
            assert "Esc\\x1b[31mTopic" in text and "bidi\\u202e" in text and "t\\x1b" in text
            assert "bad\\xed\\xb3\\xbfutf8" in text  # each byte that is not UTF-8, as the other escapes
    assert "-> Esc\\x1b[2JTopic at" in run("dump-commitlog", "--store", tricky_table_store).stdout.decode()


# ------------------------------------------------------------------ kind, from expected.json


def _levels(spec: str) -> dict[int, int]:
    unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return {i + 1: int(w[:-1]) * unit[w[-1]] for i, w in enumerate(spec.split())}


def _utc(ms: int) -> str:
    t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def _expected_kind(m: dict, levels: dict[int, int]) -> tuple[str, str]:
    """What the broker makes of the record, derived here from expected.json on its own:
    TransactionalMessageUtil's half and op topics, ScheduleMessageService's schedule topic
    (delivery = store time + the level's delay, the level capped at the last), the sysflag's
    transaction type, MixAll's %RETRY% / %DLQ% prefixes."""
    topic, props, tx = m["topic"], m["properties"], m["sys_flag"] & 0xC
    if topic == "RMQ_SYS_TRANS_HALF_TOPIC":
        return "half", f"-> {props['REAL_TOPIC']}"
    if topic == "RMQ_SYS_TRANS_OP_HALF_TOPIC":
        return "op", ""
    if topic == "SCHEDULE_TOPIC_XXXX":
        level = min(int(props["DELAY"]), max(levels))
        return "delay", f"-> {props['REAL_TOPIC']} at {_utc(m['store_timestamp'] + levels[level])} (level {level})"
    if tx:
        name = {4: "prepared", 8: "commit", 12: "rollback"}[tx]
        return name, "" if tx == 4 else f"half at {m['prepared_transaction_offset']}"
    if topic.startswith("%RETRY%"):
        return "retry", f"of {props['RETRY_TOPIC']}" if "RETRY_TOPIC" in props else ""
    return "normal", ""


@pytest.mark.parametrize("version", ["4.9.7", "5.3.3"])
def test_kind_column_on_the_real_broker_fixtures(version):
    d = fixture_dir(version)
    exp = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    levels = _levels(exp["config"]["messageDelayLevel"])
    r = cli("dump-commitlog", "--store", d / "store", "--broker-conf", d / "broker.conf", "--tz", "UTC")
    assert r.exit_code == 0
    out = r.stdout
    head, rows = _assert_aligned(out)
    starts = [c[1] for c in _columns(head)]
    kind_at, topic_at, detail_at = starts[2], starts[3], starts[-1]
    got = []
    for row in rows:
        cells = _cells(row)
        got.append(("".join(cells[kind_at:topic_at]).strip(), "".join(cells[detail_at:]).strip()))
    want = [_expected_kind(m, levels) for m in exp["messages"]]
    assert got == want
    kinds = {"normal", "prepared", "commit", "rollback", "half", "op", "delay", "retry"}
    assert {k for k, _ in got} >= kinds - ({"op"} if version == "5.3.3" else set())  # 5.3.3's sample has no op


def test_kind_column_per_record_path_is_the_same(monkeypatch):
    """With the block path switched off (every record decoded: what --key/--tag use) the
    table is the same, byte for byte, once its widths come from the same first rows."""
    d = fixture_dir("4.9.7")
    args = ["dump-commitlog", "--store", d / "store", "--broker-conf", d / "broker.conf", "--tz", "UTC"]
    blocks = cli(*args).stdout
    import rmqstore_cli.store.commitlog as clmod

    real = clmod.CommitLog.scan_blocks
    monkeypatch.setattr(clmod.CommitLog, "scan_blocks", lambda self, *a, **kw: real(self, *a, **dict(kw, blocks=False)))
    import rmqstore_cli.tableblock as tb

    monkeypatch.setattr(tb, "block_rows", None)  # not called
    first = next(real(CommitLog(StoreConfig.load(d / "store", d / "broker.conf"))))
    monkeypatch.setattr(TableWriter, "SAMPLE", first.n)  # the rows the block path sizes columns by
    assert cli(*args).stdout == blocks


def test_blank_rows_with_show_blank():
    d = fixture_dir("4.9.7")
    exp = json.loads((d / "expected.json").read_text(encoding="utf-8"))
    r = cli("dump-commitlog", "--store", d / "store", "--broker-conf", d / "broker.conf", "--show-blank")
    blanks = [ln for ln in r.stdout.splitlines() if re.search(r"\bblank\b", ln)]
    assert len(blanks) == len(exp["blanks"]) > 0
    assert all("end of file 000000" in ln for ln in blanks)


# ------------------------------------------------------------------ same records as jsonl


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("--show-blank",),
        ("--topic", "PaymentTopic"),
        ("--key", "pay-13"),
        ("--limit", "77"),
        ("--from-offset", "0", "--to-offset", "40000"),
    ],
)
def test_table_rows_are_the_jsonl_records(extra):
    """The table shows the records jsonl gives, in the same order (offsets compared)."""
    d = fixture_dir("5.3.3")
    base = ["dump-commitlog", "--store", d / "store", "--broker-conf", d / "broker.conf", *extra]
    js = [json.loads(x)["physical_offset"] for x in cli(*base, "--format", "jsonl").stdout.splitlines()]
    lines = cli(*base).stdout.splitlines()
    assert [int(x.split()[0]) for x in lines[2:]] == js and js


def test_generated_store_rows_are_the_jsonl_records(small_store_master):
    base = ["dump-commitlog", "--store", small_store_master]
    js = [json.loads(x)["physical_offset"] for x in cli(*base, "--format", "jsonl").stdout.splitlines()]
    lines = cli(*base).stdout.splitlines()
    assert [int(x.split()[0]) for x in lines[2:]] == js and len(js) > 3000


# ------------------------------------------------------------------ the other tables


def test_dump_cq_table_streams_with_fixed_widths(small_store_master):
    r = run("dump-cq", "OrderTopic", "0", "--store", small_store_master, "--tz", "UTC")
    if r.returncode == 1:  # the generated topics' names
        topic = json.loads(
            cli("dump-cq", "--summary", "--store", small_store_master, "--format", "jsonl").stdout.splitlines()[0]
        )["topic"]
        r = run("dump-cq", topic, "0", "--store", small_store_master, "--tz", "UTC")
    assert r.returncode == 0 and b"\x1b" not in r.stdout
    head, rows = _assert_aligned(r.stdout.decode())
    assert head.split()[:2] == ["cq", "offset"] and len(rows) > 100


def test_record_kind_follows_the_broker_rules():
    """ScheduleMessageService#computeDeliverTimestamp with CommitLog#checkMessageAndReturnSize's
    cap at the last level; no time for a DELAY the broker cannot read; topic kinds before the
    transaction bits (parseHalfMessageInner resets them on the half topic anyway)."""
    from rmqstore_cli.store.layout.config import DEFAULT_DELAY_LEVELS
    from rmqstore_cli.store.records.kinds import Kind, kind_detail, record_kind

    levels = _levels(DEFAULT_DELAY_LEVELS)
    k = record_kind("SCHEDULE_TOPIC_XXXX", 0, {"DELAY": "99", "REAL_TOPIC": "T"}, 1000, 0, levels)
    assert k == Kind("delay", "T", 18, 1000 + 7_200_000)
    assert kind_detail(k, str) == "-> T at 7201000 (level 18)"
    for bad in ("x", "-1", "0", "2147483648", None):
        props = {"REAL_TOPIC": "T"} if bad is None else {"DELAY": bad, "REAL_TOPIC": "T"}
        assert record_kind("SCHEDULE_TOPIC_XXXX", 0, props, 1000, 0, levels) == Kind("delay", "T")
    assert record_kind("SCHEDULE_TOPIC_XXXX", 0, {"DELAY": "3"}, 0, 0, {1: 5, 2: 7}).deliver_at == 7  # capped at 2
    assert record_kind("SCHEDULE_TOPIC_XXXX", 0, {"DELAY": "3"}, 0, 0, {1: 5, 2: 7, 4: 9}).deliver_at == 1000
    assert record_kind("RMQ_SYS_TRANS_HALF_TOPIC", 8, {"REAL_TOPIC": "T"}, 0, 0, levels).kind == "half"
    assert record_kind("%RETRY%g", 12, {}, 0, 42, levels) == Kind("rollback", half_offset=42)
    assert record_kind("%DLQ%g", 0, {"RETRY_TOPIC": "T"}, 0, 0, levels) == Kind("dlq", origin="T")
    assert record_kind("T", 4, {}, 0, 42, levels) == Kind("prepared")


def test_the_progress_bar_is_only_ever_on_a_terminal(monkeypatch):
    """render.ProgressBar, the one progress bar: not a byte when stderr is no terminal."""
    import io
    import sys

    from rmqstore_cli.render import ProgressBar

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with ProgressBar("dispatching", total=1, detail=True) as bar:
        bar.dispatch(1, 10, 20, 5)
        bar.update(20, 20)
        bar.advance(3)
    assert not bar.enabled and err.getvalue() == ""


def test_the_progress_bar_on_a_terminal_shows_the_dispatch_figures(monkeypatch):
    import io
    import sys

    from rich.console import Console

    from rmqstore_cli import render_progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(render_progress, "err_console", lambda: Console(file=err, force_terminal=True, width=100))
    monkeypatch.setenv(render_progress.PROGRESS_DELAY_ENV, "0")  # drawn at once, not after 2 s
    with render_progress.ProgressBar("dispatching", total=1, detail=True) as bar:
        bar.dispatch(3, 10, 20, 12345)
        bar.bar.refresh()
    assert bar.enabled and "dispatching" in err.getvalue() and "files 3  messages 12,345" in err.getvalue()
