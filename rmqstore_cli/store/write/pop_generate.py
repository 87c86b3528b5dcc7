"""``generate --pop-messages N``: POP consumption written as a 5.x broker writes it.

After the workload, N more messages are sent to the workload's topics and popped by the
group ``pop-group`` in batches of one to four (one queue each), each batch recorded the
broker's way (formats/pop.py):

- a checkpoint (``PopMessageProcessor#buildCkMsg``, TAGS ``ck``) in revive queue
  ``reviveQid`` (the batch number modulo ``REVIVE_QUEUE_NUM``), some with bits already set
  (``PopBufferMergeService`` merged early acks into its bitmap);
- then, per message, an ack (``AckMessageProcessor#appendAck``, TAGS ``ack``), a share in one
  batch ack (TAGS ``bAck``), or nothing (the consumer never acked);
- the revive service's work up to the store's end (``PopReviveService#mergeAndRevive``): per
  revive queue, checkpoints in queue order whose revive time passed are revived (each unacked
  message put in ``%RETRY%pop-group_<topic>`` queue 0, ``#reviveRetry``) until the first one
  not due; the last revived checkpoint's revive queue offset is committed for
  ``CID_RMQ_SYS_REVIVE_GROUP`` in ``config/consumerOffset.json``, with the pop group's own
  offsets (``PopBufferMergeService#commitOffset``).

The revive records are written in the revive topic as if the timer had delivered them all
(TIMER_DELIVER_MS kept). Draws from its own random stream, so the workload's records are
the same bytes with or without it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.formats.pop import (
    ACK_TAG,
    ACK_TIME_INTERVAL_MS,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    REVIVE_GROUP,
    REVIVE_QUEUE_NUM,
    REVIVE_TOPIC_PREFIX,
    Ack,
    CheckPoint,
    ack_body,
    ack_uniq_key,
    checkpoint_body,
    ck_uniq_key,
    retry_topics,
)
from rmqstore_cli.formats.properties import serialize_properties
from rmqstore_cli.formats.timer import PROPERTY_TIMER_DELIVER_MS

from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.records.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    PROPERTY_WAIT,
    JavaHashMap,
    encode_uniq_key,
    month_start_ms,
)
from rmqstore_cli.store.write.send_path import STORE_V4, BrokerProfile, broker_map, stored_properties

POP_GROUP = "pop-group"
#: the consumers' invisibleTime choices (ms)
INVISIBLE_TIMES_MS = (30_000, 60_000, 60_000, 120_000)
BROKER_NAME = "broker-a"
#: how long after the last pop the broker ran on: some checkpoints are due, some not
RUN_ON_MS = 60_000


@dataclass
class Sent:
    """A popped message as it was sent: enough to revive it (``#reviveRetry`` copies these)."""

    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    client: list[tuple[str, str]]
    born_timestamp: int


@dataclass
class PopBatch:
    ck: CheckPoint
    revive_queue: int
    revive_queue_offset: int
    sent: list[Sent]
    acked: set[int] = field(default_factory=set)


def append_pop(
    writer: Any, messages: int, seed: int, topics: list[str], queues: int, start_ms: int, tz: Any = None
) -> None:
    """The POP traffic appended through ``writer`` (a :class:`~rmqstore_cli.store.write.writer.StoreWriter`),
    then the offsets written to ``config/consumerOffset.json``."""
    rng = random.Random(seed * 7919 + 17)
    profile = BrokerProfile("5")
    cluster = writer.config.broker_cluster_name
    revive_topic = REVIVE_TOPIC_PREFIX + cluster
    t = start_ms
    batches: list[PopBatch] = []
    left, n = messages, 0
    while left > 0:
        size = min(left, rng.randint(1, 4))
        left -= size
        topic, qid = rng.choice(topics), rng.randrange(queues)
        sent = [send(writer, rng, profile, cluster, topic, qid, t + j, tz) for j in range(size)]
        t += size + rng.randrange(200, 2000)
        batches.append(pop(writer, rng, sent, t, n % REVIVE_QUEUE_NUM, revive_topic))
        t += 50
        n += 1
    end = t + RUN_ON_MS
    offsets = revive_all(writer, batches, revive_topic, end)
    write_offsets(writer, offsets)


def send(writer: Any, rng: random.Random, profile: BrokerProfile, cluster: str, topic: str, qid: int, ts: int, tz):
    """One ordinary message to ``topic``/``qid``, as a 5.x client sends it."""
    counter = rng.getrandbits(24)
    uniq = encode_uniq_key(bytes([172, 16, 9, 9]), 4242, 77, ts - month_start_ms(ts, tz), counter)
    client = [(PROPERTY_TAGS, "PopTag"), (PROPERTY_KEYS, f"pop-{counter}"), (PROPERTY_WAIT, "true")]
    client.append((PROPERTY_UNIQ_KEY, uniq))
    body = f"pop body {counter:06x}".encode()
    props = stored_properties(broker_map(client, profile, cluster), profile)
    res = writer.append(AppendSpec(topic, qid, body, props, ts, ts - 3, (bytes([172, 16, 9, 9]), 50000), STORE_V4))
    return Sent(topic, qid, res.queue_offset, body, client, ts - 3)


def revive_record(tag: str, body: bytes, uniq: str, deliver: int, rq: int, revive_topic: str, ts: int) -> AppendSpec:
    """A revive-topic record (``PopMessageProcessor#buildCkMsg`` and the acks' like it)."""
    m = JavaHashMap(16)
    m.put(PROPERTY_TAGS, tag)
    m.put(PROPERTY_TIMER_DELIVER_MS, str(deliver))
    m.put(PROPERTY_UNIQ_KEY, uniq)
    props = serialize_properties(m.items(), True)
    return AppendSpec(revive_topic, rq, body, props, ts, ts, STORE_V4, STORE_V4)


def pop(writer: Any, rng: random.Random, sent: list[Sent], pop_time: int, rq: int, revive_topic: str) -> PopBatch:
    """The checkpoint of one pop, then its acks (some missing)."""
    fates = [rng.choices(("ack", "batch", "merged", "none"), (5, 3, 1, 3))[0] for _ in sent]
    ck = _checkpoint(rng, sent, fates, pop_time)
    spec = revive_record(
        CK_TAG, checkpoint_body(ck), ck_uniq_key(ck), ck.revive_time - ACK_TIME_INTERVAL_MS, rq, revive_topic, pop_time
    )
    res = writer.append(spec)
    batch = PopBatch(ck, rq, res.queue_offset, sent, {i for i, f in enumerate(fates) if f == "merged"})
    _write_acks(writer, batch, fates, revive_topic)
    return batch


def _checkpoint(rng: random.Random, sent: list[Sent], fates: list[str], pop_time: int) -> CheckPoint:
    """The pop's checkpoint (``PopMessageProcessor#buildCkMsg``): the "merged" fates' bits set,
    as if their acks had been merged into it before it was written."""
    first = sent[0].queue_offset
    return CheckPoint(
        start_offset=first,
        pop_time=pop_time,
        invisible_time=rng.choice(INVISIBLE_TIMES_MS),
        bitmap=sum(1 << i for i, f in enumerate(fates) if f == "merged"),
        num=len(sent),
        queue_id=sent[0].queue_id,
        topic=sent[0].topic,
        group=POP_GROUP,
        revive_offset=0,
        offset_diffs=tuple(s.queue_offset - first for s in sent),
        broker_name=BROKER_NAME,
    )


def _write_acks(writer: Any, batch: PopBatch, fates: list[str], revive_topic: str) -> None:
    """An ack record per "ack" fate, then one batch ack listing the "batch" fates; their
    messages are marked acked in ``batch``."""
    ck, sent, rq = batch.ck, batch.sent, batch.revive_queue
    first = sent[0].queue_offset
    ts = ck.pop_time + 5
    for i, f in enumerate(fates):
        if f == "ack":
            a = Ack(False, (sent[i].queue_offset,), first, POP_GROUP, ck.topic, ck.queue_id, ck.pop_time, BROKER_NAME)
            writer.append(revive_record(ACK_TAG, ack_body(a), ack_uniq_key(a), ck.revive_time, rq, revive_topic, ts))
            batch.acked.add(i)
            ts += 1
    listed = tuple(sent[i].queue_offset for i, f in enumerate(fates) if f == "batch")
    if listed:
        a = Ack(True, listed, first, POP_GROUP, ck.topic, ck.queue_id, ck.pop_time, BROKER_NAME)
        writer.append(revive_record(BATCH_ACK_TAG, ack_body(a), ack_uniq_key(a), ck.revive_time, rq, revive_topic, ts))
        batch.acked |= {i for i, f in enumerate(fates) if f == "batch"}


def revive_all(writer: Any, batches: list[PopBatch], revive_topic: str, end: int) -> dict[str, dict[int, int]]:
    """``PopReviveService#mergeAndRevive`` per revive queue up to ``end``: checkpoints in
    revive-queue order, stopping at the first not yet due (revive time + 2 s after ``end``);
    each due one's unacked messages put in the retry topic; the offsets to commit."""
    profile = BrokerProfile("5")
    retries, revive = _due(batches, end)
    popped = _popped_offsets(batches)
    for b, s in sorted(retries, key=lambda x: (x[0].ck.revive_time, x[1].queue_offset)):
        _write_retry(writer, profile, b, s)
    return {f"{revive_topic}@{REVIVE_GROUP}": revive, **popped} if revive else popped


def _due(batches: list[PopBatch], end: int) -> tuple[list[tuple[PopBatch, Sent]], dict[int, int]]:
    """The unacked messages of the checkpoints due by ``end`` (each revive queue read in order up
    to the first not yet due), and each revive queue's offset to commit."""
    revive: dict[int, int] = {}
    retries = []
    for rq in sorted({b.revive_queue for b in batches}):
        for b in sorted((b for b in batches if b.revive_queue == rq), key=lambda b: b.revive_queue_offset):
            if end - b.ck.revive_time <= 2000:  # ackTimeInterval + SECOND
                break
            retries += [(b, s) for i, s in enumerate(b.sent) if i not in b.acked]
            revive[rq] = b.revive_queue_offset
    return retries, revive


def _popped_offsets(batches: list[PopBatch]) -> dict[str, dict[int, int]]:
    """The pop group's consumer offsets: past the last message popped of each queue."""
    popped: dict[str, dict[int, int]] = {}
    for b in batches:
        for s in b.sent:
            key = f"{s.topic}@{POP_GROUP}"
            popped.setdefault(key, {})[s.queue_id] = max(popped.get(key, {}).get(s.queue_id, 0), s.queue_offset + 1)
    return popped


def _write_retry(writer: Any, profile: BrokerProfile, b: PopBatch, s: Sent) -> None:
    """The revived message in the group's retry topic (``PopReviveService#reviveRetry``)."""
    assert b.ck.topic is not None and b.ck.group is not None
    m = broker_map(s.client, profile, writer.config.broker_cluster_name)
    m.put(PROPERTY_FIRST_POP_TIME, str(b.ck.pop_time))
    ts = b.ck.revive_time + 1500
    spec = AppendSpec(
        retry_topics(b.ck.group, b.ck.topic)[0],
        0,
        s.body,
        stored_properties(m, profile),
        ts,
        s.born_timestamp,
        STORE_V4,
        STORE_V4,
        reconsume_times=1,
    )
    writer.append(spec)


def write_offsets(writer: Any, offsets: dict[str, dict[int, int]]) -> None:
    """``ConsumerOffsetManager#encode`` (pretty): the new offsets merged into the file's table,
    written beside and renamed inside the writer's roots (never through a link)."""
    from rmqstore_cli.store.files.safefs import make_dirs, replace_file
    from rmqstore_cli.store.layout.offsets import CONSUMER_OFFSET_FILE, decode_offset_table

    path = writer.config.root / "config" / CONSUMER_OFFSET_FILE
    table = decode_offset_table(path.read_bytes()) if path.is_file() and not path.is_symlink() else {}
    for k, queues in offsets.items():
        table.setdefault(k, {}).update(queues)
    entries = {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(table.items())}
    make_dirs(path.parent, writer.roots)
    replace_file(path, (json.dumps({"offsetTable": entries}, indent="\t") + "\n").encode(), writer.roots)
