"""``generate --trace-messages N``: traced sends and consumes, with their trace messages.

After the workload (and any POP traffic), N more messages are sent to the workload's topics
by a producer with message trace on, in batches of one to three to one topic, and consumed
by a push consumer with trace on. What lands in the store is what the two clients' trace
dispatchers send (``AsyncTraceDispatcher#sendTraceDataByMQ``) besides the messages:

- after each batch's sends, one trace message whose body holds a Pub context per message
  (``TraceDataEncoder#encoderFromContextBean``: the msgId is the client's UNIQ_KEY, the
  offset msgId the broker's, the store host the broker address);
- for each consumed batch, one trace message of SubBefore contexts and one of SubAfter
  contexts (the consume's request id, cost, success, ``ConsumeReturnType`` ordinal); a
  batch whose first consume failed (RECONSUME_LATER: success false, context code FAILED)
  is consumed again with retry times 1 (the retry-topic copies are not written); some
  batches are never consumed (their Pub only);
- with ``transaction_ratio`` > 0, that share of the sends are transactional, one message
  each (``DefaultMQProducerImpl#sendMessageInTransaction``): the half message in
  ``RMQ_SYS_TRANS_HALF_TOPIC``, its Pub of msgType ``Trans_Msg_Half``, and the
  ``EndTransactionTraceHookImpl`` record of the local transaction's answer (msgType
  ``Trans_msg_Commit`` whatever the answer, transactionId the UNIQ_KEY): COMMIT_MESSAGE
  (the commit record and the op record follow, ``EndTransactionProcessor``),
  ROLLBACK_MESSAGE (the op record only) or UNKNOW, after which the broker's check puts
  the half back (TRANSACTION_CHECK_TIMES 1, ``TransactionalMessageServiceImpl#check``) and
  the producer's answer, COMMIT_MESSAGE, is traced again with fromTransactionCheck true.
  ``AsyncTraceDispatcher#sendTraceData`` groups the contexts it flushes by traced topic
  and trace topic, so a send's Pub and its EndTransaction share one trace message; the
  check's answer, seconds later, has its own;
- no Recall records: a 5.3.2+ client writes them (``DefaultRecallMessageTraceHook``) only
  with ``-Dcom.rocketmq.recall.default.trace.enable=true``, off by default;
- each trace message in the trace topic (``msgTraceTopicName``, default
  ``RMQ_SYS_TRACE_TOPIC``) queue 0, KEYS the traced msgIds and keys (formats/trace.py
  ``trace_keys``), its own UNIQ_KEY as the trace producer sets one.

Draws from its own random streams (one for whether a send is transactional), so the
workload's records are the same bytes with or without it.
"""

from __future__ import annotations

import random
from typing import Any

from rmqstore_cli.formats.commitlog import TRANSACTION_COMMIT_TYPE
from rmqstore_cli.formats.trace import encode_context, trace_keys

from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.records import message as const
from rmqstore_cli.store.records.message import (
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    JavaHashMap,
    encode_uniq_key,
    format_host,
    month_start_ms,
)
from rmqstore_cli.store.write.send_path import STORE_V4, BrokerProfile, broker_map, stored_properties

PRODUCER_GROUP = "trace-producer-group"
CONSUMER_GROUP = "trace-consumer-group"
#: TraceContext#regionId when the name server gives none (MixAll.DEFAULT_TRACE_REGION_ID)
REGION_ID = "DefaultRegion"
CLIENT = (bytes([172, 16, 9, 10]), 50001)
#: ConsumeReturnType ordinals: SUCCESS, FAILED
SUCCESS, FAILED = 0, 4
#: MessageType ordinals: Trans_Msg_Half (a transactional send's Pub), Trans_msg_Commit
#: (every EndTransaction: EndTransactionTraceHookImpl#endTransaction)
TRANS_MSG_HALF, TRANS_MSG_COMMIT = 1, 2
#: LocalTransactionState names, as EndTransaction records them
COMMIT, ROLLBACK, UNKNOWN = "COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"
#: TransactionalMessageCheckService's first check of an unanswered half (transactionTimeOut)
CHECK_AFTER_MS = 6_000


class TraceTraffic:
    """The clients' sends and their trace messages, appended through a StoreWriter."""

    def __init__(self, writer: Any, seed: int, profile: BrokerProfile, tz: Any, trace_topic: str):
        self.writer, self.profile, self.tz, self.trace_topic = writer, profile, tz, trace_topic
        self.rng = random.Random(seed * 7927 + 29)
        self.cluster = writer.config.broker_cluster_name
        self.counter = 0

    def uniq(self, ts: int) -> str:
        """A client msgId (``MessageClientIDSetter#createUniqID``) for a send at ``ts``."""
        self.counter += 1
        return encode_uniq_key(CLIENT[0], 4343, 78, ts - month_start_ms(ts, self.tz), self.counter)

    def append(self, topic: str, qid: int, body: bytes, client: list[tuple[str, str]], ts: int) -> Any:
        props = stored_properties(broker_map(client, self.profile, self.cluster), self.profile)
        return self.writer.append(AppendSpec(topic, qid, body, props, ts, ts - 2, CLIENT, STORE_V4))

    def client_items(self, ts: int, transactional: bool) -> list[tuple[str, str]]:
        """A send's client properties (a transactional one adds TRAN_MSG and PGROUP:
        ``DefaultMQProducerImpl#sendMessageInTransaction``)."""
        uniq = self.uniq(ts)
        keys = f"trace-{self.counter} order-{self.rng.randrange(1000)}"
        tag = self.rng.choice(("TagA", "TagB"))
        client = [
            (const.PROPERTY_TAGS, tag),
            (const.PROPERTY_KEYS, keys),
            (const.PROPERTY_WAIT, "true"),
            (const.PROPERTY_UNIQ_KEY, uniq),
        ]
        if transactional:
            client += [(const.PROPERTY_TRAN_MSG, "true"), (const.PROPERTY_PGROUP, PRODUCER_GROUP)]
        return client

    def send(self, topic: str, qid: int, ts: int) -> dict[str, object]:
        """One traced send; the Pub context's values."""
        client = self.client_items(ts, False)
        body = f"traced body {self.counter:06d}".encode()
        res = self.append(topic, qid, body, client, ts)
        return self.pub(topic, dict(client), body, res.msg_id, ts, 0)

    def pub(
        self, topic: str, client: dict[str, str], body: bytes, offset_msg_id: str, ts: int, msg_type: int
    ) -> dict[str, object]:
        """The Pub context of a send stored at ``ts`` (``SendMessageTraceHookImpl``)."""
        cost = self.rng.randrange(1, 30)
        return dict(
            timestamp=ts - cost, region_id=REGION_ID, group=PRODUCER_GROUP, topic=topic,
            msg_id=client[const.PROPERTY_UNIQ_KEY], tags=client[const.PROPERTY_TAGS], keys=client[const.PROPERTY_KEYS],
            store_host=format_host(*STORE_V4), body_length=len(body), cost_time=cost, msg_type=msg_type,
            offset_msg_id=offset_msg_id, success=True,
        )  # fmt: skip

    def trace_message(self, kind: str, contexts: list[dict[str, object]], ts: int) -> None:
        """One trace message of ``contexts`` of ``kind``, as the dispatcher sends it."""
        self.trace_mixed([(kind, c) for c in contexts], ts)

    def trace_mixed(self, contexts: list[tuple[str, dict[str, object]]], ts: int) -> None:
        """One trace message of ``contexts`` (type, values) flushed together for one topic."""
        body = "".join(encode_context(kind, c) for kind, c in contexts).encode("utf-8")
        keys = trace_keys([(str(c["msg_id"]), str(c["keys"])) for _, c in contexts])
        client = [(const.PROPERTY_KEYS, keys), (const.PROPERTY_WAIT, "true"), (const.PROPERTY_UNIQ_KEY, self.uniq(ts))]
        self.append(self.trace_topic, 0, body, client, ts)

    def transaction(self, topic: str, qid: int, ts: int) -> tuple[dict[str, object] | None, int, int]:
        """One traced transactional send and its end (see the module's docstring): the Pub
        of the committed message (None: rolled back), the records written, the time after."""
        client = self.client_items(ts, True)
        body = f"traced body {self.counter:06d}".encode()
        half = self.put_half(topic, qid, body, client, ts, 0)
        pub = self.pub(topic, dict(client), body, half.msg_id, ts, TRANS_MSG_HALF)
        state = self.rng.choices((COMMIT, ROLLBACK, UNKNOWN), (7, 2, 1))[0]
        end = self.end_transaction(pub, ts + 2, state, False)
        written = 1 + self.resolve(topic, qid, body, client, ts + 3, state)
        self.trace_mixed([("Pub", pub), ("EndTransaction", end)], ts + 10)
        ts, written = ts + 11, written + 1
        if state == UNKNOWN:  # the broker's check: the half put back, the producer commits
            self.put_half(topic, qid, body, client, ts + CHECK_AFTER_MS, 1)
            ts += CHECK_AFTER_MS
            end = self.end_transaction(pub, ts + 2, COMMIT, True)
            written += 1 + self.resolve(topic, qid, body, client, ts + 3, COMMIT)
            self.trace_mixed([("EndTransaction", end)], ts + 10)
            ts, written, state = ts + 11, written + 1, COMMIT
        return (pub if state == COMMIT else None), written, ts

    def put_half(self, topic: str, qid: int, body: bytes, client: list[tuple[str, str]], ts: int, checks: int):
        """The half message (``TransactionalMessageBridge#parseHalfMessageInner``; a checked
        one put back with TRANSACTION_CHECK_TIMES)."""
        m = broker_map(client, self.profile, self.cluster)
        m.put(const.PROPERTY_REAL_TOPIC, topic)
        m.put(const.PROPERTY_REAL_QID, str(qid))
        if checks:
            m.put(const.PROPERTY_CHECK_TIMES, str(checks))
        props = stored_properties(m, self.profile, True)
        spec = AppendSpec(TRANS_HALF_TOPIC, 0, body, props, ts, ts - 2, CLIENT, STORE_V4)
        return self.writer.append_linked("half", spec, False)

    def resolve(self, topic: str, qid: int, body: bytes, client: list[tuple[str, str]], ts: int, state: str) -> int:
        """``EndTransactionProcessor``: a commit's record in the real topic and the op record
        (a rollback: the op record only; UNKNOW: nothing); the records written."""
        if state == UNKNOWN:
            return 0
        if state == COMMIT:
            m = broker_map(client, self.profile, self.cluster)
            m.put(const.PROPERTY_REAL_TOPIC, topic)
            m.put(const.PROPERTY_REAL_QID, str(qid))
            props = stored_properties(m, self.profile, True)
            spec = AppendSpec(topic, qid, body, props, ts, ts - 5, CLIENT, STORE_V4, sys_flag=TRANSACTION_COMMIT_TYPE)
            self.writer.append_linked("commit", spec, False)
        op = AppendSpec(TRANS_OP_HALF_TOPIC, 0, self.profile.op_body_suffix, self.op_properties(), ts + 1, ts - 5,
                        CLIENT, STORE_V4)  # fmt: skip
        self.writer.append_linked("op", op, False)
        return 2 if state == COMMIT else 1

    def op_properties(self) -> str:
        """An op record's PROPERTIES (``TransactionalMessageBridge#addRemoveTagInTransactionOp``:
        TAGS ``d``, WAIT, CLUSTER)."""
        op = JavaHashMap(self.profile.map_capacity)
        op.put(const.PROPERTY_TAGS, "d")
        op.put(const.PROPERTY_WAIT, "true")
        op.put(const.PROPERTY_CLUSTER, self.cluster)
        return stored_properties(op, self.profile, True)

    def end_transaction(self, pub: dict[str, object], ts: int, state: str, checked: bool) -> dict[str, object]:
        """``EndTransactionTraceHookImpl#endTransaction``'s context for ``pub``'s message."""
        return dict(
            timestamp=ts, region_id=REGION_ID, group=PRODUCER_GROUP, topic=pub["topic"], msg_id=pub["msg_id"],
            tags=pub["tags"], keys=pub["keys"], store_host=pub["store_host"], msg_type=TRANS_MSG_COMMIT,
            transaction_id=pub["msg_id"], transaction_state=state, from_transaction_check=checked,
        )  # fmt: skip

    def consume(self, pubs: list[dict[str, object]], ts: int, retry: int, ok: bool) -> int:
        """A consume of ``pubs`` (retry times ``retry``; ``ok``: CONSUME_SUCCESS, else
        RECONSUME_LATER for the whole batch): its SubBefore and SubAfter trace messages; the
        time after."""
        request_id = self.uniq(ts)
        before = [
            dict(timestamp=ts, region_id=REGION_ID, group=CONSUMER_GROUP, request_id=request_id,
                 msg_id=p["msg_id"], retry_times=retry, keys=p["keys"])
            for p in pubs
        ]  # fmt: skip
        self.trace_message("SubBefore", before, ts + 1)
        cost = self.rng.randrange(1, 50)
        after = [
            dict(request_id=request_id, msg_id=p["msg_id"], cost_time=cost, success=ok, keys=p["keys"],
                 context_code=SUCCESS if ok else FAILED, timestamp=ts + cost, group=CONSUMER_GROUP)
            for p in pubs
        ]  # fmt: skip
        self.trace_message("SubAfter", after, ts + cost + 1)
        return ts + cost + 2


def append_traces(
    writer: Any,
    messages: int,
    seed: int,
    topics: list[str],
    queues: int,
    start_ms: int,
    tz: Any,
    version: str,
    transaction_ratio: float = 0.0,
) -> int:
    """The traced traffic appended through ``writer`` (a broker of ``version``), the share
    ``transaction_ratio`` of the sends transactional; how many records it wrote."""
    t = TraceTraffic(writer, seed, BrokerProfile(version), tz, writer.config.msg_trace_topic_name)
    tx_rng = random.Random(seed * 7927 + 31)
    rng, ts, left, written = t.rng, start_ms, messages, 0
    while left > 0:
        size = min(left, rng.randint(1, 3))
        topic, qid = rng.choice(topics), rng.randrange(queues)
        if transaction_ratio and tx_rng.random() < transaction_ratio:  # one message per transaction
            pub, n, ts = t.transaction(topic, qid, ts)
            left, written = left - 1, written + n
            pubs = [pub] if pub is not None else []
        else:
            pubs = [t.send(topic, qid, ts + j) for j in range(size)]
            ts += size + rng.randrange(5, 20)
            t.trace_message("Pub", pubs, ts)
            left, written = left - size, written + size + 1
        ts, n = consume_some(t, pubs, ts)
        written += n
    return written


def consume_some(t: TraceTraffic, pubs: list[dict[str, object]], ts: int) -> tuple[int, int]:
    """The push consumer's consumes of ``pubs`` (ok, failed then retried, or never); the
    time after and the records written."""
    if not pubs:
        return ts, 0
    fate = t.rng.choices(("ok", "retry", "never"), (7, 2, 1))[0]
    if fate == "never":
        return ts, 0
    ts = t.consume(pubs, ts + t.rng.randrange(10, 200), 0, fate == "ok")
    if fate == "retry":  # RECONSUME_LATER: redelivered by the retry topic after its first delay level
        return t.consume(pubs, ts + 10_000, 1, True), 4
    return ts, 2
