"""What a producer sends and how the broker turns it into a record's properties.

``SendMessageProcessor`` parses the client's property string into a HashMap, adds
CLUSTER, (4.9.1+) leaves WAIT out of the stored string, (5.x) keeps WAIT and generates a
UNIQ_KEY, and re-serialises the map; delayed and transactional sends are rewritten by
``CommitLog#asyncPutMessage`` and the transaction bridge (docs/format/commitlog.md#transactions,
docs/format/properties.md#what-the-broker-adds-or-removes).
The workload generator below drives that path for ``rmqstore generate``.
"""

from __future__ import annotations

import datetime as _dt
import random
from collections.abc import Iterator
from dataclasses import dataclass

from rmqstore_cli.formats.commitlog import (
    COMPRESSED_FLAG,
    MULTI_TAGS_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rmqstore_cli.formats.properties import serialize_properties

from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.records import message as const
from rmqstore_cli.store.records.message import (
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    JavaHashMap,
    encode_uniq_key,
    month_start_ms,
)
from rmqstore_cli.store.write.lmq import MULTI_DISPATCH
from rmqstore_cli.store.write.send_path import STORE_V4, STORE_V6, TAGS, BrokerProfile, broker_map, stored_properties


@dataclass
class WorkloadOptions:
    messages: int = 1000
    seed: int = 1
    topics: int = 4
    queues: int = 4
    body_min: int = 64
    body_max: int = 512
    start_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    span_ms: int = 3_600_000
    delay_ratio: float = 0.05
    retry_ratio: float = 0.0
    transaction_ratio: float = 0.05
    #: ``COMMIT:ROLLBACK:PENDING`` weights of the 4.3+ (half) transactions' outcomes; None:
    #: every one committed (and the store's bytes as before the option existed)
    transaction_outcomes: str | None = None
    ipv6_ratio: float = 0.05
    shared_key_ratio: float = 0.2
    keys_per_message: int = 2
    compress_ratio: float = 0.0
    broker_version: str = "4.9"
    #: share of sends listing LMQ queues in INNER_MULTI_DISPATCH, and how many names
    lmq_ratio: float = 0.0
    lmq_queues: int = 4
    cluster: str = "DefaultCluster"
    tz: _dt.tzinfo | None = None
    timer_ratio: float = 0.0  # 5.x timer messages (rmq_sys_wheel_timer)
    timer_precision_ms: int = 1000
    #: share of timer messages due inside the run (1-30 s after their store time): with it the
    #: timer store is left stalled before them (store/timer/writer.py), so they are overdue
    overdue_timer_ratio: float = 0.0
    #: how many of the topics are BatchCQ topics (5.x), each send an inner batch
    bcq_topics: int = 0
    #: how many topics after the BatchCQ ones are cleanup.policy=COMPACTION (5.x)
    compaction_topics: int = 0


class Workload:
    """Deterministic, realistic sends: same options and seed, same records, same bytes."""

    def __init__(self, opts: WorkloadOptions):
        self.o = opts
        if opts.transaction_outcomes is not None:
            parse_outcomes(opts.transaction_outcomes)  # refused before anything is drawn
        self.rng = random.Random(opts.seed)
        self.profile = BrokerProfile(opts.broker_version)
        names = ["OrderTopic", "PaymentTopic", "AuditTopic", "Refund.Topic-2", "TradeTopic", "LogTopic"]
        self.topic_names = [names[i] if i < len(names) else f"Topic{i}" for i in range(opts.topics)]
        self.producers = [self._producer(i) for i in range(4)]
        self.counter = 0
        self.batch_topics = set(self.topic_names[: opts.bcq_topics])
        self.compaction_topics = set(self.topic_names[opts.bcq_topics : opts.bcq_topics + opts.compaction_topics])

    def _producer(self, i: int) -> tuple[bytes, int, int]:
        ip = bytes([172, 16, self.rng.randrange(256), self.rng.randrange(1, 255)])
        return ip, self.rng.randrange(1, 65536), self.rng.getrandbits(31)

    def _uniq_key(self, born_ms: int) -> str:
        ip, pid, cl = self.rng.choice(self.producers)
        self.counter += 1
        span = born_ms - month_start_ms(born_ms, self.o.tz)
        return encode_uniq_key(ip, pid, cl, span, self.counter)

    def _keys(self, i: int) -> str:
        keys = [f"order-{i}"]
        for _ in range(max(0, self.o.keys_per_message - 1)):
            r = self.rng.random()
            if r < self.o.shared_key_ratio:
                keys.append(f"shared-{self.rng.randrange(16)}")
            elif r < self.o.shared_key_ratio + 0.05:
                keys.append(f"订单-{i}")
            else:
                keys.append(f"k{i}-{self.rng.randrange(1 << 20):x}")
        return " ".join(keys)

    def _body(self) -> bytes:
        n = self.rng.randint(self.o.body_min, self.o.body_max)
        return self.rng.randbytes(n // 2).hex().encode()[:n].ljust(n, b"0")

    def specs(self) -> Iterator[tuple[str, AppendSpec]]:
        """(kind, spec) in send order; kinds: normal, delay, half, commit, op, prepared, rollback.

        A ``commit`` or ``rollback`` spec's ``prepared_transaction_offset`` is filled in by
        the writer from the record it answers (see :meth:`StoreWriter.append_linked`).
        """
        o = self.o
        step = o.span_ms / max(1, o.messages)
        for i in range(o.messages):
            store_ms = o.start_ms + int(i * step)
            born_ms = store_ms - self.rng.randrange(1, 50)
            topic = self.rng.choice(self.topic_names)
            qid = self.rng.randrange(o.queues)
            if topic in self.batch_topics:
                yield "batch", self._inner_batch(topic, qid, store_ms, born_ms)
                continue
            if topic in self.compaction_topics:
                yield "normal", self._keyed(topic, store_ms, born_ms)
                continue
            yield from self._send(i, topic, qid, store_ms, born_ms)

    def _send(self, i: int, topic: str, qid: int, store_ms: int, born_ms: int) -> Iterator[tuple[str, AppendSpec]]:
        """One send of a normal topic: its kind drawn (timer, delay, transaction, retry or
        normal, in that order of the ratios), after the fields every kind has."""
        o = self.o
        tags = self.rng.choice(TAGS) if self.rng.random() < 0.9 else None
        born = self._born_host()
        store = STORE_V6 if self.rng.random() < o.ipv6_ratio else STORE_V4
        body, sys_flag = self._payload(tags)
        client = self._client_props(tags, i, born_ms)
        flag = self.rng.choice((0, 0, 0, 0, 0, 0, 0, 0, 0, 1))
        r = self.rng.random()
        common = dict(born_timestamp=born_ms, born_host=born, store_host=store, flag=flag)
        if o.timer_ratio and self.rng.random() < o.timer_ratio:
            yield "timer", self._timer(topic, qid, client, body, store_ms, sys_flag, common)
        elif r < o.delay_ratio:
            yield "delay", self._delay(topic, qid, client, body, store_ms, sys_flag, common)
        elif r < o.delay_ratio + o.transaction_ratio:
            yield from self._transaction(topic, qid, client, body, store_ms, sys_flag, common)
        elif r < o.delay_ratio + o.transaction_ratio + o.retry_ratio:
            yield "retry", self._retry(topic, client, body, store_ms, sys_flag, common)
        else:
            self._lmq(client)
            m = broker_map(client, self.profile, o.cluster)
            yield (
                "normal",
                AppendSpec(topic, qid, body, stored_properties(m, self.profile), store_ms, sys_flag=sys_flag, **common),
            )

    def _payload(self, tags: str | None) -> tuple[bytes, int]:
        """A body (compressed at ``compress_ratio``) and its sysFlag (COMPRESSED, and
        MULTI_TAGS for TAGS with a space: ``MessageSysFlag``)."""
        body = self._body()
        sys_flag = 0
        if self.rng.random() < self.o.compress_ratio:
            import zlib

            body = zlib.compress(body, 5)
            sys_flag |= COMPRESSED_FLAG
        if tags and " " in tags:
            sys_flag |= MULTI_TAGS_FLAG
        return body, sys_flag

    def _client_props(self, tags: str | None, i: int, born_ms: int) -> list[tuple[str, str]]:
        """The producer's properties in the order it puts them: TAGS, KEYS, WAIT, UNIQ_KEY."""
        client = []
        if tags:
            client.append((const.PROPERTY_TAGS, tags))
        client.append((const.PROPERTY_KEYS, self._keys(i)))
        client.append((const.PROPERTY_WAIT, "true"))
        client.append((const.PROPERTY_UNIQ_KEY, self._uniq_key(born_ms)))
        return client

    def _delay(self, topic, qid, client, body, store_ms, sys_flag, common) -> AppendSpec:
        """A message of a delay level, put on ``SCHEDULE_TOPIC`` queue level - 1 with its real
        topic and queue (``HookUtils#handleScheduleMessage``)."""
        level = self.rng.randint(1, 5)
        client.append((const.PROPERTY_DELAY, str(level)))
        m = broker_map(client, self.profile, self.o.cluster)
        m.put(const.PROPERTY_REAL_TOPIC, topic)
        m.put(const.PROPERTY_REAL_QID, str(qid))
        return AppendSpec(
            SCHEDULE_TOPIC,
            level - 1,
            body,
            stored_properties(m, self.profile, True),
            store_ms,
            sys_flag=sys_flag,
            **common,
        )

    @property
    def retry_topic(self) -> str:
        """``%RETRY%<group>``; on 5.x the group name is long enough (141 chars in all) for a
        V2 record, as 5.x allows retry topics of 128–255 chars (docs/format/commitlog.md#v1-and-v2)."""
        group = "cg-sample" if self.profile.version == "4.9" else "cg-sample-long." + "retry" * 25 + "-x"
        return "%RETRY%" + group

    def _retry(self, topic, client, body, store_ms, sys_flag, common) -> AppendSpec:
        """A message sent back by a consumer (``SendMessageProcessor#consumerSendMsgBack``)."""
        rt = self.retry_topic
        m = broker_map(client, self.profile, self.o.cluster)
        m.put("RETRY_TOPIC", topic)
        m.put("ORIGIN_MESSAGE_ID", f"0A00000500002A9F{self.rng.getrandbits(40):016X}")
        m.put("MAX_RECONSUME_TIMES", "16")
        m.put(const.PROPERTY_REAL_TOPIC, rt)
        m.put(const.PROPERTY_REAL_QID, "0")
        return AppendSpec(
            rt,
            0,
            body,
            stored_properties(m, self.profile, True),
            store_ms,
            sys_flag=sys_flag,
            reconsume_times=self.rng.randint(1, 16),
            **common,
        )

    def _timer(self, topic, qid, client, body, store_ms, sys_flag, common) -> AppendSpec:
        """``HookUtils#transformTimerMessage`` (5.3.3): the client's TIMER_DELIVER_MS, the
        broker's TIMER_OUT_MS (the delivery time floored to the precision, one step less when
        it is exact), REAL_TOPIC and REAL_QID, stored under rmq_sys_wheel_timer queue 0. Every
        delivery time lies after the workload's last store time (a stopped broker with all
        its timer messages pending; see ``store/timer/writer.py``), but for the share
        ``overdue_timer_ratio`` due 1 to 30 s after their store time."""
        from rmqstore_cli.formats.timer import PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS, TIMER_TOPIC

        o = self.o
        if o.overdue_timer_ratio and self.rng.random() < o.overdue_timer_ratio:
            deliver = store_ms + self.rng.randrange(1000, 30_000)
        else:
            deliver = o.start_ms + o.span_ms + self.rng.randrange(1000, 2 * 3_600_000)
        client = [*client, (PROPERTY_TIMER_DELIVER_MS, str(deliver))]
        p = o.timer_precision_ms
        out = deliver - p if deliver % p == 0 else deliver // p * p
        m = broker_map(client, self.profile, o.cluster)
        m.put(PROPERTY_TIMER_OUT_MS, str(out))
        m.put(const.PROPERTY_REAL_TOPIC, topic)
        m.put(const.PROPERTY_REAL_QID, str(qid))
        return AppendSpec(
            TIMER_TOPIC, 0, body, stored_properties(m, self.profile), store_ms, sys_flag=sys_flag, **common
        )

    def _inner_batch(self, topic: str, qid: int, store_ms: int, born_ms: int) -> AppendSpec:
        """A 5.x client's batch to a BatchCQ topic, stored as one record (sysflag
        INNER_BATCH | NEED_UNWRAP, body the batch as ``MessageDecoder#encodeMessages`` wrote
        it, INNER_NUM the count; the writer adds INNER_BASE, ``BatchConsumeQueue#assignQueueOffset``)."""
        from rmqstore_cli.formats.batch_queue import PROPERTY_INNER_NUM
        from rmqstore_cli.formats.commitlog import INNER_BATCH_FLAG, NEED_UNWRAP_FLAG

        from rmqstore_cli.store.queues.batch_queue import encode_inner_message

        n = self.rng.randint(1, 8)
        body = b""
        for j in range(n):
            inner = JavaHashMap(16)
            inner.put(const.PROPERTY_KEYS, f"batch-{self.counter}-{j}")
            inner.put(const.PROPERTY_UNIQ_KEY, self._uniq_key(born_ms))
            inner.put(const.PROPERTY_WAIT, "true")
            inner.put(const.PROPERTY_TAGS, self.rng.choice(TAGS))
            body += encode_inner_message(self._body(), serialize_properties(inner.items(), True).encode())
        m = broker_map(
            [
                (const.PROPERTY_WAIT, "true"),
                (const.PROPERTY_UNIQ_KEY, self._uniq_key(born_ms)),
                (PROPERTY_INNER_NUM, str(n)),
            ],
            self.profile,
            self.o.cluster,
        )
        return AppendSpec(
            topic,
            qid,
            body,
            stored_properties(m, self.profile, True),
            store_ms,
            born_timestamp=born_ms,
            born_host=self._born_host(),
            store_host=STORE_V4,
            sys_flag=INNER_BATCH_FLAG | NEED_UNWRAP_FLAG,
        )

    def _keyed(self, topic: str, store_ms: int, born_ms: int) -> AppendSpec:
        """A send to a compaction topic: one key of 16 (``k000``..``k015``, so compaction has
        work), the queue chosen by the key (``abs(key.hashCode()) % queues``, as the 5.3.3
        sample's producer does, so one key's versions share a queue), the body ``key=vN:...``."""
        from rmqstore_cli.store.javahash import java_hash

        key = f"k{self.rng.randrange(16):03d}"
        qid = abs(java_hash(key)) % self.o.queues
        body = f"{key}=v{self.counter}:".encode() + self._body()
        client = [
            (const.PROPERTY_TAGS, "state"),
            (const.PROPERTY_KEYS, key),
            (const.PROPERTY_WAIT, "true"),
            (const.PROPERTY_UNIQ_KEY, self._uniq_key(born_ms)),
        ]
        m = broker_map(client, self.profile, self.o.cluster)
        return AppendSpec(
            topic,
            qid,
            body,
            stored_properties(m, self.profile),
            store_ms,
            born_timestamp=born_ms,
            born_host=self._born_host(),
            store_host=STORE_V4,
        )

    def _lmq(self, client: list[tuple[str, str]]) -> None:
        """The producer's ``INNER_MULTI_DISPATCH`` (LMQ, RIP-28): one to three of the
        ``%LMQ%`` names, in random order; the store assigns the offsets (store/write/lmq.py).
        Draws nothing when ``lmq_ratio`` is 0, so other stores keep their bytes."""
        o = self.o
        if not o.lmq_ratio or self.rng.random() >= o.lmq_ratio:
            return
        k = self.rng.randint(1, min(3, o.lmq_queues))
        names = self.rng.sample([f"%LMQ%q{i}" for i in range(o.lmq_queues)], k)
        client.append((MULTI_DISPATCH, ",".join(names)))

    def _born_host(self) -> tuple[bytes, int]:
        port = self.rng.randrange(1024, 65536)
        if self.rng.random() < self.o.ipv6_ratio:
            return bytes.fromhex("20010db8000000000000000000") + bytes([0, 0, self.rng.randrange(1, 255)]), port
        return self.rng.choice(self.producers)[0], port

    def op_properties(self) -> str:
        """The op record's stored PROPERTIES (``TransactionalMessageBridge#addRemoveTagInTransactionOp``:
        TAGS ``d``, WAIT, CLUSTER), the same for every op record of the workload."""
        op = JavaHashMap(self.profile.map_capacity)
        op.put(const.PROPERTY_TAGS, "d")
        op.put(const.PROPERTY_WAIT, "true")
        op.put(const.PROPERTY_CLUSTER, self.o.cluster)
        return stored_properties(op, self.profile, True)

    def _outcome(self) -> tuple[str, int]:
        """A half transaction's end (commit, rollback or pending) and how often the broker's
        check re-put its half first (pending ones only: ``TransactionalMessageServiceImpl#check``
        puts an unanswered half back with TRANSACTION_CHECK_TIMES + 1; 15 is the default
        ``transactionCheckMax``, after which it is discarded). Draws nothing without
        ``transaction_outcomes``."""
        if self.o.transaction_outcomes is None:
            return "commit", 0
        w = parse_outcomes(self.o.transaction_outcomes)
        x = self.rng.random()
        if x < w.commit:
            return "commit", 0
        if x < w.commit + w.rollback:
            return "rollback", 0
        return "pending", self.rng.choice((0, 0, 1, 2, 3, 15))

    def blocks(self) -> Iterator:
        """The sends as blocks (:class:`~rmqstore_cli.store.commitlog.blocks.SendBlock`) in send
        order: drawn a block at a time (:mod:`~rmqstore_cli.store.write.workload_blocks`) for the
        mixes it draws, else :meth:`specs` cut into blocks."""
        from rmqstore_cli.store.commitlog.blocks import send_blocks
        from rmqstore_cli.store.write.workload_blocks import DRAW, can_draw, draw_blocks

        if can_draw(self.o):
            return draw_blocks(self)
        return send_blocks(self.specs(), DRAW, True)

    def _transaction(self, topic, qid, client, body, store_ms, sys_flag, common):
        """Either the 4.3+ half/commit/op path or a legacy PREPARED record resolved later."""
        client = client + [(const.PROPERTY_TRAN_MSG, "true"), (const.PROPERTY_PGROUP, "tx-group")]
        if self.rng.random() < 0.7:
            outcome, checks = self._outcome()
            for n in range(checks + 1):
                m = broker_map(client, self.profile, self.o.cluster)
                m.put(const.PROPERTY_REAL_TOPIC, topic)
                m.put(const.PROPERTY_REAL_QID, str(qid))
                if n:  # TransactionalMessageServiceImpl#needDiscard, then #putBackHalfMsgQueue
                    m.put(const.PROPERTY_CHECK_TIMES, str(n))
                props = stored_properties(m, self.profile, True)
                yield "half", AppendSpec(TRANS_HALF_TOPIC, 0, body, props, store_ms + n, sys_flag=sys_flag, **common)
            store_ms += checks
            if outcome == "commit":
                commit = broker_map(client, self.profile, self.o.cluster)
                commit.put(const.PROPERTY_REAL_TOPIC, topic)
                commit.put(const.PROPERTY_REAL_QID, str(qid))
                yield (
                    "commit",
                    AppendSpec(
                        topic,
                        qid,
                        body,
                        stored_properties(commit, self.profile, True),
                        store_ms + 1,
                        sys_flag=sys_flag | TRANSACTION_COMMIT_TYPE,
                        **common,
                    ),
                )
            if outcome != "pending":
                op_body = self.profile.op_body_suffix  # the writer puts the half's queue offset before it
                yield "op", AppendSpec(TRANS_OP_HALF_TOPIC, 0, op_body, self.op_properties(), store_ms + 2, **common)
        else:
            self._lmq(client)
            m = broker_map(client, self.profile, self.o.cluster)
            yield (
                "prepared",
                AppendSpec(
                    topic,
                    qid,
                    body,
                    stored_properties(m, self.profile),
                    store_ms,
                    sys_flag=sys_flag | TRANSACTION_PREPARED_TYPE,
                    **common,
                ),
            )
            end = TRANSACTION_COMMIT_TYPE if self.rng.random() < 0.75 else TRANSACTION_ROLLBACK_TYPE
            yield (
                ("commit" if end == TRANSACTION_COMMIT_TYPE else "rollback"),
                AppendSpec(
                    topic,
                    qid,
                    body,
                    stored_properties(m, self.profile),
                    store_ms + 1,
                    sys_flag=sys_flag | end,
                    **common,
                ),
            )


@dataclass(frozen=True)
class Outcomes:
    """The shares of 4.3+ transactions committed, rolled back and left pending (sum 1)."""

    commit: float
    rollback: float
    pending: float


def parse_outcomes(text: str) -> Outcomes:
    """``COMMIT:ROLLBACK:PENDING`` weights (``8:1:1``) as shares."""
    from rmqstore_cli.errors import UsageError

    try:
        w = [float(p) for p in text.split(":")]
    except ValueError:
        w = []
    if len(w) != 3 or not all(0 <= x < float("inf") for x in w) or sum(w) <= 0:
        raise UsageError(f"⟦transaction_outcomes⟧ {text!r}: not COMMIT:ROLLBACK:PENDING weights", hint="8:1:1")
    t = sum(w)
    return Outcomes(w[0] / t, w[1] / t, w[2] / t)
