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
- each trace message in the trace topic (``msgTraceTopicName``, default
  ``RMQ_SYS_TRACE_TOPIC``) queue 0, KEYS the traced msgIds and keys (formats/trace.py
  ``trace_keys``), its own UNIQ_KEY as the trace producer sets one.

Draws from its own random stream, so the workload's records are the same bytes with or
without it.
"""

from __future__ import annotations

import random
from typing import Any

from rmqstore_cli.formats.trace import encode_context, trace_keys

from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    encode_uniq_key,
    format_host,
    month_start_ms,
)
from rmqstore_cli.store.send_path import STORE_V4, BrokerProfile, broker_map, stored_properties

PRODUCER_GROUP = "trace-producer-group"
CONSUMER_GROUP = "trace-consumer-group"
#: TraceContext#regionId when the name server gives none (MixAll.DEFAULT_TRACE_REGION_ID)
REGION_ID = "DefaultRegion"
CLIENT = (bytes([172, 16, 9, 10]), 50001)
#: ConsumeReturnType ordinals: SUCCESS, FAILED
SUCCESS, FAILED = 0, 4


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

    def send(self, topic: str, qid: int, ts: int) -> dict[str, object]:
        """One traced send; the Pub context's values."""
        uniq = self.uniq(ts)
        keys = f"trace-{self.counter} order-{self.rng.randrange(1000)}"
        tag = self.rng.choice(("TagA", "TagB"))
        body = f"traced body {self.counter:06d}".encode()
        client = [(PROPERTY_TAGS, tag), (PROPERTY_KEYS, keys), (PROPERTY_WAIT, "true"), (PROPERTY_UNIQ_KEY, uniq)]
        res = self.append(topic, qid, body, client, ts)
        cost = self.rng.randrange(1, 30)
        return dict(
            timestamp=ts - cost, region_id=REGION_ID, group=PRODUCER_GROUP, topic=topic, msg_id=uniq, tags=tag,
            keys=keys, store_host=format_host(*STORE_V4), body_length=len(body), cost_time=cost, msg_type=0,
            offset_msg_id=res.msg_id, success=True,
        )  # fmt: skip

    def trace_message(self, kind: str, contexts: list[dict[str, object]], ts: int) -> None:
        """One trace message of ``contexts`` of ``kind``, as the dispatcher sends it."""
        body = "".join(encode_context(kind, c) for c in contexts).encode("utf-8")
        keys = trace_keys([(str(c["msg_id"]), str(c["keys"])) for c in contexts])
        client = [(PROPERTY_KEYS, keys), (PROPERTY_WAIT, "true"), (PROPERTY_UNIQ_KEY, self.uniq(ts))]
        self.append(self.trace_topic, 0, body, client, ts)

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
    writer: Any, messages: int, seed: int, topics: list[str], queues: int, start_ms: int, tz: Any, version: str
) -> int:
    """The traced traffic appended through ``writer`` (a broker of ``version``); how many
    records it wrote."""
    t = TraceTraffic(writer, seed, BrokerProfile(version), tz, writer.config.msg_trace_topic_name)
    rng, ts, left, written = t.rng, start_ms, messages, 0
    while left > 0:
        size = min(left, rng.randint(1, 3))
        left -= size
        topic, qid = rng.choice(topics), rng.randrange(queues)
        pubs = [t.send(topic, qid, ts + j) for j in range(size)]
        ts += size + rng.randrange(5, 20)
        t.trace_message("Pub", pubs, ts)
        written += size + 1
        fate = rng.choices(("ok", "retry", "never"), (7, 2, 1))[0]
        if fate == "never":
            continue
        ts = t.consume(pubs, ts + rng.randrange(10, 200), 0, fate == "ok")
        written += 2
        if fate == "retry":  # RECONSUME_LATER: redelivered by the retry topic after its first delay level
            ts = t.consume(pubs, ts + 10_000, 1, True)
            written += 2
    return written
