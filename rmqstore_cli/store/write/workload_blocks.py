"""generate's workload drawn a block of sends at a time (issue 23: the write path).

The bulk twin of :meth:`Workload.specs <rmqstore_cli.store.write.producer.Workload.specs>` for the
default mix (normal, delayed, transactional and retried sends, IPv6 hosts, compressed
bodies): every random choice of a block is one numpy draw, and each send's stored
PROPERTIES are a template filled in per record. A template is the broker's key order for
that key set (``SendMessageProcessor``: the client's ``HashMap``, CLUSTER added, WAIT left
out on 4.9.3+, re-serialised; :func:`~rmqstore_cli.store.write.send_path.broker_map`), so the
bytes are those of the per-send path; only the random stream differs (a seed still gives
one store). Options it does not draw (timer, LMQ, BatchCQ, compaction) stay on
``Workload.specs``.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
from rmqstore_cli.formats.commitlog import (
    COMPRESSED_FLAG,
    MULTI_TAGS_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqstore_cli.formats.message_id import UNIQ_KEY_TIME_COUNTER_SIZES

from rmqstore_cli.store.commitlog.blocks import BLOCK_BYTES, KIND_LINKS, SendBlock, row_bytes
from rmqstore_cli.store.records import message as const
from rmqstore_cli.store.records.message import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, month_start_ms
from rmqstore_cli.store.write.send_path import STORE_V4, STORE_V6, TAGS, broker_map, stored_properties

#: Sends drawn at once (fewer for large bodies, :data:`BLOCK_BYTES`): fixed by the
#: options, so the stream depends on them and the seed only, not on how the writer cuts it.
DRAW = 4096
_HEX_UPPER = np.frombuffer(b"0123456789ABCDEF", np.uint8)
_QUARTER_HOUR = 900_000  # every time zone's offset is a multiple: no month starts inside one


def can_draw(o) -> bool:
    """The options this module draws (the rest stay on ``Workload.specs``)."""
    return not (o.timer_ratio or o.lmq_ratio or o.bcq_topics or o.compaction_topics or o.transaction_outcomes)


class Templates:
    """Stored PROPERTIES per key set: a ``%`` format in the broker's order, with the
    names whose values vary per send, for one broker profile and cluster."""

    def __init__(self, profile, cluster: str):
        self.profile, self.cluster, self._cache = profile, cluster, {}

    def fill(self, client: tuple, extra: tuple, keep_wait: bool, values: dict) -> list[bytes]:
        """The stored bytes (UTF-8) of each send: ``client`` names (the producer's, in its order),
        CLUSTER, then ``extra`` (the broker's puts); ``values`` maps a name to a constant
        (str) or one value per send (a list of UTF-8 bytes)."""
        text, names = self._template(client, extra, keep_wait, values)
        if not names:
            n = len(next(iter(v for v in values.values() if not isinstance(v, str)), [])) or 1
            return [text % ()] * n
        return list(map(text.__mod__, zip(*(values[k] for k in names), strict=True)))

    def _template(self, client: tuple, extra: tuple, keep_wait: bool, values: dict) -> tuple[bytes, list]:
        """The ``%`` format of a key set (cached) and the names its ``%s`` stand for, in order."""
        key = (client, extra, keep_wait, tuple(k for k, v in values.items() if isinstance(v, str)))
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._make_template(client, extra, keep_wait, values)
        return got

    def _make_template(self, client: tuple, extra: tuple, keep_wait: bool, values: dict) -> tuple[bytes, list]:
        """The map's own order (the producer's names, CLUSTER, the broker's puts) with the
        constants in place, the rest ``%s``; WAIT is dropped unless it is kept or the profile
        stores it (``stored_properties``)."""
        m = broker_map([(k, k) for k in client], self.profile, self.cluster)
        for k in extra:
            m.put(k, k)
        order = [k for k, _ in m.items()]  # the map's own order, CLUSTER included
        consts = {const.PROPERTY_CLUSTER: self.cluster, **{k: v for k, v in values.items() if isinstance(v, str)}}
        text = stored_properties(_Items(_format_items(order, consts)), self.profile, keep_wait)
        return text.encode(), _varying(order, consts, keep_wait or self.profile.stores_wait)


def _varying(order: list, consts: dict, stored_wait: bool) -> list:
    """The names a template's ``%s`` stand for, in order: not constants, and WAIT only when stored."""
    return [k for k in order if k not in consts and (stored_wait or k != const.PROPERTY_WAIT)]


def _format_items(order: list, consts: dict) -> list[tuple[str, str]]:
    """The pairs of a template: a constant as it is (its ``%`` escaped), any other value ``%s``."""
    return [(k, consts[k].replace("%", "%%") if k in consts else "%s") for k in order]


class _Items:
    """A fixed list of pairs with a map's ``items()`` (what ``stored_properties`` reads)."""

    def __init__(self, items: list):
        self._items = items

    def items(self) -> list:
        return self._items


def month_starts(born: np.ndarray, tz) -> np.ndarray:
    """``month_start_ms`` of each time, computed once per quarter hour present."""
    q, inv = np.unique(born // _QUARTER_HOUR, return_inverse=True)
    return np.array([month_start_ms(int(x) * _QUARTER_HOUR, tz) for x in q.tolist()], np.int64)[inv.ravel()]


class Draw:
    """One block's random choices, drawn at once (``rng``: the workload's numpy generator).
    A body is a random stretch of ``pool`` (random hex digits drawn once per workload, at
    least twice the longest body), so bodies cost a slice each, not fresh random bytes."""

    def __init__(self, rng: np.random.Generator, o, m: int, n_tags: int, pool: bytes):
        r = rng.random((8, m))
        self.born_back = rng.integers(1, 50, m)
        self.topic = rng.integers(0, o.topics, m)
        self.qid = rng.integers(0, o.queues, m)
        self.has_tag, self.born_v6, self.store_v6, self.compress = (
            r[0] < 0.9,
            r[1] < o.ipv6_ratio,
            r[2] < o.ipv6_ratio,
            r[3] < o.compress_ratio,
        )
        self.kind, self.half, self.commit, self.flag = r[4], r[5] < 0.7, r[6] < 0.75, (r[7] < 0.1).astype(np.int64)
        self.tag = rng.integers(0, n_tags, m)
        self.born_producer, self.uniq_producer = rng.integers(0, 4, m), rng.integers(0, 4, m)
        self.born_last, self.born_port = rng.integers(1, 255, m), rng.integers(1024, 65536, m)
        self.body_len = rng.integers(o.body_min, o.body_max + 1, m)
        self.body_at = (rng.random(m) * (len(pool) - self.body_len + 1)).astype(np.int64)
        extra = max(0, o.keys_per_message - 1)
        self.key_r, self.key_shared = rng.random((extra, m)), rng.integers(0, 16, (extra, m))
        self.key_rand = rng.integers(0, 1 << 20, (extra, m))
        self.level, self.origin = rng.integers(1, 6, m), rng.integers(0, 1 << 40, m)
        self.reconsume = rng.integers(1, 17, m)


def keys_column(o, idx: np.ndarray, d: Draw) -> np.ndarray:
    """KEYS of each send (UTF-8): ``order-<i>``, then per extra key a shared one, a
    non-ASCII one or a random one (``Workload._keys``). One ``%`` a key and send: the sends
    of each case of a key formatted together, their column assembled by numpy."""
    if not d.key_r.shape[0]:
        return objects([b"order-%d" % i for i in idx.tolist()])
    out, p = idx, b"order-%d"  # the key so far: the send's number, then the keys made
    for r, s, x in zip(d.key_r, d.key_shared, d.key_rand, strict=True):
        col = np.empty(idx.size, object)
        for mask, fmt, args in _key_cases(o, r, p, (s,), (idx,), (idx, x)):
            rows = np.flatnonzero(mask)
            cols = [out[rows].tolist(), *(c[rows].tolist() for c in args)]
            col[rows] = objects(list(map(fmt.__mod__, zip(*cols, strict=True))))
        out, p = col, b"%s"
    return out


def _key_cases(o, r: np.ndarray, p: bytes, shared: tuple, wide: tuple, rand: tuple) -> tuple:
    """(sends, format, its arguments after the key so far) of an extra key's three cases:
    shared (``shared-<n>``), non-ASCII (``订单-<i>``), random (``k<i>-<hex>``)."""
    a, b = o.shared_key_ratio, o.shared_key_ratio + 0.05
    return (
        (r < a, p + b" shared-%d", shared),
        ((r >= a) & (r < b), p + " 订单-%d".encode(), wide),
        (r >= b, p + b" k%d-%x", rand),
    )


def objects(items: list) -> np.ndarray:
    """``items`` as a numpy object array (never a bytes dtype numpy would pick)."""
    a = np.empty(len(items), object)
    a[:] = items
    return a


def uniq_keys(prefixes: list[str], producer: np.ndarray, span: np.ndarray, counter: np.ndarray) -> list[bytes]:
    """``MessageClientIDSetter#createUniqID`` of each send in upper-case hex: the producer's
    fixed part, then time in month and counter (:data:`UNIQ_KEY_TIME_COUNTER_SIZES`)."""
    t_size, c_size = UNIQ_KEY_TIME_COUNTER_SIZES
    value = ((span & ((1 << 8 * t_size) - 1)) << 8 * c_size) | (counter & ((1 << 8 * c_size) - 1))
    shifts = np.arange(4 * (2 * (t_size + c_size) - 1), -1, -4)
    digits = _HEX_UPPER[(value[:, None] >> shifts) & 15]
    pfx = np.frombuffer("".join(prefixes).encode(), np.uint8).reshape(len(prefixes), -1)
    return row_bytes(np.concatenate([pfx[producer], digits], axis=1))


def draw_blocks(w) -> Iterator[SendBlock]:
    """The sends of workload ``w`` (a :class:`~rmqstore_cli.store.write.producer.Workload` whose
    options :func:`can_draw`), :data:`DRAW` at a time, as blocks in send order."""
    o = w.o
    rng = np.random.default_rng(o.seed)
    step = o.span_ms / max(1, o.messages)
    cat = Catalog(w, rng.bytes(max(1 << 19, o.body_max + 1)).hex().encode())
    draw = max(1, min(DRAW, BLOCK_BYTES // max(1, o.body_max)))  # bounded memory, fixed by the options
    for i0 in range(0, o.messages, draw):
        m = min(draw, o.messages - i0)
        d = Draw(rng, o, m, len(cat.tags), cat.pool)
        idx = np.arange(i0, i0 + m)
        store = o.start_ms + (idx * step).astype(np.int64)
        born = store - d.born_back
        counter = w.counter + 1 + np.arange(m)
        w.counter += m
        sends = {
            "uniq": objects(uniq_keys(cat.uniq_prefix, d.uniq_producer, born - month_starts(born, o.tz), counter)),
            "keys": keys_column(o, idx, d),
            "tags": cat.tag_bytes[d.tag],
        }
        yield build_block(cat, o, d, store, born, sends)


class Catalog:
    """What every block of a workload shares: the topic table (the workload's topics, then
    the system topics its kinds use), the host table, the producers' UNIQ_KEY prefixes
    (``MessageClientIDSetter``: address, pid, class-loader hash) and the templates."""

    def __init__(self, w, pool: bytes):

        self.pool = pool  # the bodies' random hex digits (:class:`Draw`)
        self.tags = list(TAGS)
        self.tag_bytes = objects([t.encode() for t in TAGS])
        self.topics = list(w.topic_names) + [SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, w.retry_topic]
        self.schedule, self.half, self.op, self.retry = range(len(w.topic_names), len(self.topics))
        self.retry_topic = w.retry_topic
        v6 = bytes.fromhex("20010db8000000000000000000")
        self.hosts = (
            [ip for ip, _, _ in w.producers]
            + [STORE_V4[0], STORE_V6[0]]
            + [v6 + bytes([0, 0, x]) for x in range(1, 255)]
        )
        self.store_port = STORE_V4[1]
        self.uniq_prefix = [
            (ip + (pid & 0xFFFF).to_bytes(2, "big") + cl.to_bytes(4, "big", signed=True)).hex().upper()
            for ip, pid, cl in w.producers
        ]
        self.tpl = Templates(w.profile, w.o.cluster)
        self.op_props = w.op_properties().encode()
        self.op_body = w.profile.op_body_suffix


def build_block(cat: Catalog, o, d: Draw, store: np.ndarray, born: np.ndarray, sends: dict) -> SendBlock:
    """The records of one draw: one per normal, delayed or retried send, three per 4.3+
    transaction (half, commit, op), two per legacy one (prepared, commit or rollback)."""
    m = store.size
    r = d.kind
    delay = r < o.delay_ratio
    tx = ~delay & (r < o.delay_ratio + o.transaction_ratio)
    retry = ~delay & ~tx & (r < o.delay_ratio + o.transaction_ratio + o.retry_ratio)
    half = tx & d.half
    counts = 1 + tx + half
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    send = np.repeat(np.arange(m), counts)
    sub = np.arange(send.size) - start[send]
    tag = d.has_tag
    tags_multi = np.array([" " in t for t in cat.tags])[d.tag]
    base_sys = np.where(d.compress, COMPRESSED_FLAG, 0) | np.where(tag & tags_multi, MULTI_TAGS_FLAG, 0)
    pool = cat.pool
    bodies = objects(list(map(pool.__getitem__, map(slice, d.body_at.tolist(), (d.body_at + d.body_len).tolist()))))
    for i in np.flatnonzero(d.compress).tolist():
        bodies[i] = zlib.compress(bodies[i], 5)
    tid = d.topic[send].copy()
    qid = d.qid[send].copy()
    sys_flag = base_sys[send].copy()
    reconsume = np.zeros(send.size, np.int64)
    kind = np.zeros(send.size, np.int8)  # an index into _KINDS: no str made a record
    links = np.zeros(send.size, np.int8)  # SendBlock.link_codes of kinds, as a column
    rows_of = {k: start[np.flatnonzero(v)] for k, v in (("delay", delay), ("retry", retry))}
    tid[rows_of["delay"]], qid[rows_of["delay"]] = cat.schedule, d.level[delay] - 1
    tid[rows_of["retry"]], qid[rows_of["retry"]] = cat.retry, 0
    reconsume[rows_of["retry"]] = d.reconsume[retry]
    hs, ps = start[np.flatnonzero(half)], start[np.flatnonzero(tx & ~half)]
    tid[hs], qid[hs], tid[hs + 2], qid[hs + 2] = cat.half, 0, cat.op, 0
    sys_flag[hs + 1] |= TRANSACTION_COMMIT_TYPE
    sys_flag[hs + 2] = 0
    sys_flag[ps] |= TRANSACTION_PREPARED_TYPE
    end = np.where(d.commit[tx & ~half], TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE)
    sys_flag[ps + 1] |= end
    for k, rows in (
        ("delay", rows_of["delay"]),
        ("retry", rows_of["retry"]),
        ("half", hs),
        ("commit", hs + 1),
        ("op", hs + 2),
        ("prepared", ps),
        ("commit", ps + 1),
    ):
        kind[rows], links[rows] = _KINDS.index(k), KIND_LINKS.get(k, 0)
    commit_or_rollback = np.where(end == TRANSACTION_COMMIT_TYPE, _KINDS.index("commit"), _KINDS.index("rollback"))
    kind[ps + 1] = commit_or_rollback  # one link code
    props = np.empty(send.size, object)
    _fill_props(cat, o, d, sends, props, start, (delay, retry, half, tx & ~half, ~delay & ~tx & ~retry))
    body_rows = bodies[send].tolist()
    for i in (hs + 2).tolist():
        body_rows[i] = cat.op_body
    born_host = np.where(d.born_v6, 6 + d.born_last - 1, d.born_producer)
    store_host = np.where(d.store_v6, 5, 4)
    z = np.zeros(send.size, np.int64)
    return SendBlock(
        cat.topics,
        cat.hosts,
        tid,
        qid,
        d.flag[send],
        sys_flag,
        born[send],
        store[send] + sub,
        born_host[send],
        d.born_port[send],
        store_host[send],
        z + cat.store_port,
        reconsume,
        z,
        z,
        z - 1,
        z - 1,
        bodies=body_rows,
        props=props.tolist(),
        kinds=_KIND_NAMES[kind].tolist(),
        floor_store_ts=True,
        raw_props=False,
        links=links,
    )


#: The kinds of record a draw makes (SendBlock.kinds), by the index build_block keeps a record.
_KINDS = ("normal", "delay", "retry", "half", "commit", "op", "prepared", "rollback")
_KIND_NAMES = objects(list(_KINDS))


def _fill_props(cat: Catalog, o, d: Draw, sends: dict, props: np.ndarray, start: np.ndarray, masks: tuple) -> None:
    """Each record's stored PROPERTIES (``Workload.specs``' maps), by kind and by whether
    the send has TAGS (one template each)."""
    delay, retry, half, prepared, normal = masks
    topic_names = [t.encode() for t in cat.topics]
    cases = [  # mask, extra client names, broker's puts, keep WAIT, row offsets
        (normal, (), (), False, (0,)),
        (delay, (const.PROPERTY_DELAY,), (const.PROPERTY_REAL_TOPIC, const.PROPERTY_REAL_QID), True, (0,)),
        (
            retry,
            (),
            (
                "RETRY_TOPIC",
                "ORIGIN_MESSAGE_ID",
                "MAX_RECONSUME_TIMES",
                const.PROPERTY_REAL_TOPIC,
                const.PROPERTY_REAL_QID,
            ),
            True,
            (0,),
        ),
        (
            half,
            (const.PROPERTY_TRAN_MSG, const.PROPERTY_PGROUP),
            (const.PROPERTY_REAL_TOPIC, const.PROPERTY_REAL_QID),
            True,
            (0, 1),
        ),
        (prepared, (const.PROPERTY_TRAN_MSG, const.PROPERTY_PGROUP), (), False, (0, 1)),
    ]
    for mask, client_extra, extra, keep, offs in cases:
        for has in (True, False):
            s = np.flatnonzero(mask & (d.has_tag == has))
            if not s.size:
                continue
            vals = _send_values(sends, s, has) | _kind_values(cat, d, s, topic_names, client_extra, extra)
            client = (
                ((const.PROPERTY_TAGS,) if has else ())
                + (const.PROPERTY_KEYS, const.PROPERTY_WAIT, const.PROPERTY_UNIQ_KEY)
                + client_extra
            )
            text = cat.tpl.fill(client, extra, keep, {k: v for k, v in vals.items() if k in client + extra})
            for off in offs:
                props[start[s] + off] = text
    props[start[np.flatnonzero(half)] + 2] = cat.op_props


def _send_values(sends: dict, s: np.ndarray, has_tag: bool) -> dict:
    """The values every kind of send has (KEYS, WAIT, UNIQ_KEY, TAGS when the send has one)
    and the transaction constants (used only by the kinds that name them)."""
    vals: dict = {
        const.PROPERTY_KEYS: sends["keys"][s].tolist(),
        const.PROPERTY_WAIT: "true",
        const.PROPERTY_UNIQ_KEY: sends["uniq"][s].tolist(),
        const.PROPERTY_TRAN_MSG: "true",
        const.PROPERTY_PGROUP: "tx-group",
    }
    if has_tag:
        vals[const.PROPERTY_TAGS] = sends["tags"][s].tolist()
    return vals


def _kind_values(
    cat: Catalog, d: Draw, s: np.ndarray, topic_names: list[bytes], client_extra: tuple, extra: tuple
) -> dict:
    """The values of a kind's own names: DELAY of a delayed send, the retry puts of a retry,
    REAL_TOPIC/REAL_QID of any other kind the broker moves (delay, half)."""
    vals: dict = {}
    if const.PROPERTY_DELAY in client_extra:
        vals[const.PROPERTY_DELAY] = [b"%d" % x for x in d.level[s].tolist()]
    if "RETRY_TOPIC" in extra:
        vals.update(_retry_values(cat, d, s, topic_names))
    elif extra:
        vals.update(_real_values(d, s, topic_names))
    return vals


def _retry_values(cat: Catalog, d: Draw, s: np.ndarray, topic_names: list[bytes]) -> dict:
    """A retry send's puts (``ConsumerSendMsgBackProcessor``: the original topic, message id
    and the retry topic as the real topic)."""
    return {
        "RETRY_TOPIC": [topic_names[t] for t in d.topic[s].tolist()],
        "ORIGIN_MESSAGE_ID": [b"0A00000500002A9F%016X" % x for x in d.origin[s].tolist()],
        "MAX_RECONSUME_TIMES": "16",
        const.PROPERTY_REAL_TOPIC: cat.retry_topic,
        const.PROPERTY_REAL_QID: "0",
    }


def _real_values(d: Draw, s: np.ndarray, topic_names: list[bytes]) -> dict:
    """REAL_TOPIC and REAL_QID of a send the broker moves to another topic (delay, half)."""
    return {
        const.PROPERTY_REAL_TOPIC: [topic_names[t] for t in d.topic[s].tolist()],
        const.PROPERTY_REAL_QID: [b"%d" % q for q in d.qid[s].tolist()],
    }
