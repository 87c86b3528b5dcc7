"""dump-commitlog's and the library's property filters (key, unique key, tag) decode only the
records whose PROPERTIES bytes hold the value (``log_range.sieved``, ``MessageFilter.candidates``):
the records passed must be exactly those the per-record verdict passes over every record
decoded one by one (``MessageFilter.matches`` over ``CommitLog.scan``), in the same order,
with the same limit; values whose bytes cannot be told (U+FFFD, a lone surrogate, empty) fall
back to judging every record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rmqstore_cli.store.answers import log_range
from rmqstore_cli.store.commitlog import CommitLog, columns
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.message_store import MessageStore
from rmqstore_cli.store.records.filters import MessageFilter
from rmqstore_cli.store.records.message import Message
from tests.helpers import generate
from tests.helpers.records import PLAIN, spec, write_tricky_store

#: PROPERTIES the sieve could get wrong: a value only in the body, a key that is a prefix or a
#: part of another, invalid UTF-8 inside a key, a value spanning two pairs, non-ASCII.
ODD = [
    b"KEYS\x01order-40 order-4x\x02TAGS\x01TagA\x02",
    b"KEYS\x01a\xffb\x02TAGS\x01t\xffu\x02",
    b"KEYS\x01k1\x02TAGS\x01k1 k2\x02",
    "KEYS\x01ключ café\x02TAGS\x01中\x02".encode(),
    b"KEYS\x01x\x02UNIQ_KEY\x01ac100a0748ff5ffd2b276cdd6c4d0000\x02",
    b"TAGS\x01\x02KEYS\x01\x02",
]


def _odd_store(root: Path) -> Path:
    cl = CommitLog(StoreConfig.load(root, None, mapped_file_size_commit_log=1 << 16), writable=True)
    cl.open_for_append()
    for n in range(40):  # several files, the odd records between plain ones
        cl.append(spec("OrderTopic", 3 * n, PLAIN))
        cl.append(spec("OrderTopic", 3 * n + 1, ODD[n % len(ODD)]))
        cl.append(replace(spec("OrderTopic", 3 * n + 2, PLAIN), body=b"order-4 TagA k9 in the body only"))
    cl.close()
    return root


@pytest.fixture(scope="module", params=["generated", "tricky", "odd"])
def store(request, tmp_path_factory) -> MessageStore:
    root = tmp_path_factory.mktemp("sieve") / "store"
    if request.param == "generated":
        generate(root, messages=800)
    elif request.param == "tricky":
        write_tricky_store(root)
    else:
        _odd_store(root)
    return MessageStore.open(StoreConfig.load(root, None))


def _reference(ms: MessageStore, flt: MessageFilter, limit: int | None) -> list[int]:
    got = [r.offset for r in ms.commitlog.scan(every_file=True) if isinstance(r, Message) and flt.matches(r)]
    return got[:limit]


def _walked(ms: MessageStore, flt: MessageFilter, limit: int | None) -> list[int]:
    rng = log_range.walk_range(ms.commitlog, None, None, None)
    return [r.offset for r, _ in log_range.walk(ms.commitlog, rng, flt, limit, False, False, False)]


def _values(ms: MessageStore) -> list[MessageFilter]:
    """Filters on every key, tag and unique key the store holds, their parts, and values the
    bytes cannot tell."""
    keys, tags, uniqs = set(), set(), set()
    for r in ms.commitlog.scan(every_file=True):
        if isinstance(r, Message):
            keys.update(r.keys)
            tags.add(r.tags)
            uniqs.add(r.uniq_key)
    odd = {"", "a\ufffdb", "\ud800", "order-4", "TagA", "k9", "body", "k1 k2"}
    flts = [MessageFilter(key=k) for k in sorted(keys | {k[:-1] for k in keys} | odd)]
    flts += [MessageFilter(tag=t) for t in sorted(t for t in tags | odd | {"t\ufffdu"} if t is not None)]
    flts += [MessageFilter(uniq_key=u) for u in sorted(u for u in uniqs if u is not None)]
    flts += [MessageFilter(topic="OrderTopic", key="k1", tag="T"), MessageFilter(queue_id=1, key="k2")]
    return flts


@pytest.mark.parametrize("limit", [None, 1, 5])
def test_the_sieve_passes_what_the_per_record_verdict_passes(store, limit):
    flts = _values(store)
    assert len(flts) > 10
    for flt in flts:
        assert _walked(store, flt, limit) == _reference(store, flt, limit), flt


def test_the_sieve_decodes_only_the_candidates(store, monkeypatch):
    """A key in few records: far fewer records decoded than the store holds (the point of it)."""
    decoded = []
    real = columns.MessageBlock.messages

    def counting(self, idx=None):
        out = real(self, idx)
        decoded.append(len(out))
        return out

    monkeypatch.setattr(columns.MessageBlock, "messages", counting)
    total = sum(isinstance(r, Message) for r in store.commitlog.scan(every_file=True))
    got = _walked(store, MessageFilter(key="no-such-key-anywhere"), None)
    assert got == [] and sum(decoded) == 0 and decoded  # blocks were walked, none decoded
    decoded.clear()
    _walked(store, MessageFilter(key="a\ufffdb"), None)  # bytes cannot tell: every record decoded
    assert sum(decoded) > total // 2
