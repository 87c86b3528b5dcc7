"""generate's workload drawn a block at a time (store/write/workload_blocks.py) stores, for every
record, the PROPERTIES string the per-send path builds from the same values
(Workload.specs: SendMessageProcessor's HashMap order via broker_map, CLUSTER, WAIT kept or
left out, re-serialised), and the same seed gives the same sends."""

from __future__ import annotations

import pytest
from rmqstore_cli.formats.properties import parse_properties

from rmqstore_cli.store.records.message import PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC
from rmqstore_cli.store.write.producer import Workload, WorkloadOptions
from rmqstore_cli.store.write.send_path import BrokerProfile, broker_map, stored_properties

CLIENT = ("TAGS", "KEYS", "WAIT", "UNIQ_KEY")
TX = (("TRAN_MSG", "true"), ("PGROUP", "tx-group"))
RETRY = ("RETRY_TOPIC", "ORIGIN_MESSAGE_ID", "MAX_RECONSUME_TIMES", PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID)


def _expected(kind: str, props: dict, profile: BrokerProfile, cluster: str, op: str) -> str:
    """What Workload.specs stores for a send of ``kind`` with these values."""
    if kind == "op":
        return op
    client = [(k, props[k] if k != "WAIT" else "true") for k in CLIENT if k in props or k == "WAIT"]
    extra: list = []
    keep = True
    if kind == "delay":
        client.append(("DELAY", props["DELAY"]))
        extra = [PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID]
    elif kind == "retry":
        extra = list(RETRY)
    elif "TRAN_MSG" in props:
        client += TX
        if PROPERTY_REAL_TOPIC in props:
            extra = [PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID]
        else:
            keep = False
    else:
        keep = False
    m = broker_map(client, profile, cluster)
    for k in extra:
        m.put(k, props[k])
    return stored_properties(m, profile, keep)


@pytest.mark.parametrize("version", ["4.9", "5"])
def test_drawn_properties_are_the_per_send_strings(version):
    o = WorkloadOptions(
        messages=6000,
        seed=3,
        delay_ratio=0.1,
        transaction_ratio=0.2,
        retry_ratio=0.1,
        ipv6_ratio=0.2,
        compress_ratio=0.1,
        broker_version=version,
        cluster="C%1",
    )
    w = Workload(o)
    kinds = set()
    rows = 0
    for block in w.blocks():
        for kind, spec in block.specs():
            text = spec.properties
            props = parse_properties(text)
            assert text == _expected(kind, props, w.profile, o.cluster, w.op_properties()), (kind, text)
            kinds.add(kind)
            rows += 1
    assert kinds == {"normal", "delay", "retry", "half", "commit", "op", "prepared", "rollback"}
    assert rows > o.messages


def test_same_seed_same_sends():
    o = WorkloadOptions(messages=5000, seed=9, transaction_ratio=0.1)

    def sends():
        return [
            (k, s.topic, s.queue_id, s.body, s.properties, s.born_host, s.store_timestamp)
            for b in Workload(o).blocks()
            for k, s in b.specs()
        ]

    assert sends() == sends()
