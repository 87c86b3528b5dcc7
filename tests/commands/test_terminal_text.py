"""Text from a store cannot drive or hide from a terminal: in every table, summary and stderr
line each control, bidi, zero-width, separator and tag character is shown escaped (as git
and ls show names), rich markup is printed as written, and the JSON formats keep the exact
text (rmqstore_cli/render.py ``safe_text``)."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import cli

#: One sample of each hostile class, and how a table must show it.
HOSTILE = {
    "c0": ("\x1b[2J", "\\x1b[2J"),
    "c1": ("\x9b31m", "\\x9b31m"),
    "del": ("\x7f", "\\x7f"),
    "alm": ("\u061c", "\\u061c"),
    "lrm": ("\u200e", "\\u200e"),
    "rlm": ("\u200f", "\\u200f"),
    "lre": ("\u202a", "\\u202a"),
    "rlo": ("\u202e", "\\u202e"),
    "lri": ("\u2066", "\\u2066"),
    "pdi": ("\u2069", "\\u2069"),
    "zwsp": ("\u200b", "\\u200b"),
    "zwj": ("\u200d", "\\u200d"),
    "bom": ("\ufeff", "\\ufeff"),
    "lsep": ("\u2028", "\\u2028"),
    "psep": ("\u2029", "\\u2029"),
    "tag": ("\U000e0041", "\\U000e0041"),
    "tab": ("\t", "\\x09"),
}
MARKUP = "[bold red]x[/]"
#: the same without a '/', which no consume-queue directory name can hold
MARKUP_CQ = "[reverse]y[bold]"
#: What must never reach a terminal raw (a newline only ends a line).
RAW = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
T0 = 1_767_225_600_000


def topic_of(name: str) -> str:
    return f"T-{name}-{HOSTILE[name][0]}-end"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One record per hostile class, the class in its topic, KEYS, TAGS, a property and its
    body; one whose topic is rich markup; one with invalid UTF-8 everywhere; and consumer
    offsets under hostile group names."""
    from rmqstore_cli.store.commitlog import AppendSpec
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.writer import StoreWriter

    root = tmp_path_factory.mktemp("terminal") / "store"
    cfg = StoreConfig.load(root, mapped_file_size_commit_log=1 << 20, max_hash_slot_num=64, max_index_num=400)
    w = StoreWriter(cfg)
    host = (bytes([10, 0, 0, 1]), 10911)
    specs = [
        (topic_of(n), f"KEYS\x01k-{n}-{c}\x02TAGS\x01g-{n}-{c}\x02P\x01{c}", f"b-{n}-{c}".encode())
        for n, (c, _) in HOSTILE.items()
    ]
    specs.append((MARKUP, f"KEYS\x01{MARKUP}\x02TAGS\x01{MARKUP}", MARKUP.encode()))
    specs.append((MARKUP_CQ, f"KEYS\x01{MARKUP_CQ}", b""))
    specs.append(("T-bad-\udcff", b"KEYS\x01k-bad-\xff\x02TAGS\x01g-bad-\xfe\x02P\x01\xff", b"\xff\x1b"))
    for i, (topic, props, body) in enumerate(specs):
        w.append(
            AppendSpec(
                topic=topic,
                queue_id=0,
                body=body,
                properties=props,
                store_timestamp=T0 + i * 1000,
                born_timestamp=T0 + i * 1000,
                born_host=host,
                store_host=host,
                raw_properties=isinstance(props, bytes),
            )
        )
    w.close()
    offsets = {f"{topic_of(n)}@G-{n}-{c}": {"0": 1} for n, (c, _) in HOSTILE.items()}
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": offsets}))
    return root


def _terminal(r, code: int = 0) -> str:
    """The run's stdout and stderr: valid UTF-8 (no stray byte), no raw hostile character."""
    out, err = r.stdout_bytes.decode("utf-8"), r.stderr_bytes.decode("utf-8")
    assert r.exit_code == code, (r.exit_code, err)
    assert RAW.search(out) is None, repr(RAW.search(out))
    assert RAW.search(err) is None, repr(RAW.search(err))
    return out + err


def _jsonl(*args) -> list[dict]:
    r = cli(*args, "--format", "jsonl")
    assert r.exit_code == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines() if x.strip()]


#: Every command with a table that shows store text from the whole store.
WHOLE_STORE = [
    ("dump-commitlog",),
    ("dump-commitlog", "--body", "text", "--properties"),
    ("dump-commitlog", "--body", "hex"),
    ("dump-cq", "--summary"),
    ("stats",),
    ("stats", "--by", "queue"),
    ("consumer-progress",),
]


@pytest.mark.parametrize("args", WHOLE_STORE, ids=" ".join)
def test_tables_show_every_class_escaped(store, args):
    text = _terminal(cli(*args, "--store", store, "--format", "table"))
    for name, (_, shown) in HOSTILE.items():
        assert f"T-{name}-{shown}" in text, name
    if args[0] != "consumer-progress":
        assert MARKUP_CQ in text  # printed as written, not applied
    if args[0] == "dump-commitlog":
        assert MARKUP in text


def test_dump_commitlog_table_escapes_keys_tags_properties_and_bodies(store):
    text = _terminal(cli("dump-commitlog", "--body", "text", "--properties", "--store", store))
    for name, (_, shown) in HOSTILE.items():
        for part in (f"k-{name}-{shown}", f"g-{name}-{shown}", f"P={shown}", f"b-{name}-{shown}"):
            assert part in text, (name, part)
    assert "\\xff\\x1b" in text  # the invalid body, byte by byte


@pytest.mark.parametrize("name", list(HOSTILE))
def test_per_topic_and_per_key_tables(store, name):
    topic, key = topic_of(name), f"k-{name}-{HOSTILE[name][0]}"
    shown = HOSTILE[name][1]
    for args in (
        ("dump-cq", topic, "0"),
        ("search-offset", "--topic", topic, "--time", str(T0)),
        ("index-lookup", key),
        ("dump-commitlog", "--topic", topic),
        ("dump-commitlog", "--key", key),
    ):
        text = _terminal(cli(*args, "--store", store, "--format", "table"))
        assert f"-{name}-{shown}" in text, args
    # a topic that is not there: the one error line shows it escaped
    text = _terminal(cli("dump-commitlog", "--topic", topic + "x", "--store", store), code=1)
    assert f"T-{name}-{shown}-endx" in text


def test_markup_in_a_topic_prints_as_written(store):
    for args, shown in (
        (("dump-cq", MARKUP_CQ, "0"), MARKUP_CQ),
        (("index-lookup", MARKUP_CQ), MARKUP_CQ),
        (("dump-commitlog", "--topic", MARKUP), MARKUP),
        (("dump-commitlog", "--topic", MARKUP + "x"), MARKUP + "x"),  # the error line
    ):
        r = cli(*args, "--store", store, "--format", "table")
        assert shown in _terminal(r, code=1 if shown.endswith("x") else 0), args


def test_jsonl_keeps_the_exact_text(store):
    recs = {r["topic"]: r for r in _jsonl("dump-commitlog", "--store", store, "--body", "text")}
    for name, (c, _) in HOSTILE.items():
        r = recs[topic_of(name)]
        assert r["keys"] == [f"k-{name}-{c}"] and r["tags"] == f"g-{name}-{c}", name
        assert r["properties"]["P"] == c and r["body"] == f"b-{name}-{c}", name
    assert recs[MARKUP]["tags"] == MARKUP
    cq = {r["topic"] for r in _jsonl("dump-cq", "--summary", "--store", store)}
    assert {topic_of(n) for n in HOSTILE} <= cq
    groups = {r["group"] for r in _jsonl("consumer-progress", "--store", store)}
    assert {f"G-{n}-{c}" for n, (c, _) in HOSTILE.items()} <= groups


def test_safe_text_keeps_ordinary_unicode():
    from rmqstore_cli.render import safe_text

    assert safe_text("订单 🚀 café") == "订单 🚀 café"
    assert safe_text("a\udcffb") == "a\\xffb"  # a byte that was not UTF-8, as git shows it
    assert safe_text("\u202eevil\U000e0041") == "\\u202eevil\\U000e0041"
