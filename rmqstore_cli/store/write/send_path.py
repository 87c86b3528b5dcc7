"""The broker's side of a send: how ``SendMessageProcessor`` turns a producer's property
string into the stored one, and the hosts and tags the workload generator sends with.

Both the per-send generator (:mod:`~rmqstore_cli.store.write.producer`) and its bulk twin
(:mod:`~rmqstore_cli.store.write.workload_blocks`) build on these, so they live below both
(docs/format/properties.md#what-the-broker-adds-or-removes).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqstore_cli.formats.properties import serialize_properties

from rmqstore_cli.store.records.message import PROPERTY_CLUSTER, PROPERTY_WAIT, JavaHashMap


@dataclass(frozen=True)
class BrokerProfile:
    """The differences between a 4.9.x and a 5.x broker's send path."""

    version: str  # "4.9" or "5"

    @property
    def map_capacity(self) -> int:  # string2messageProperties: new HashMap<>() / new HashMap<>(128)
        return 128 if self.version == "5" else 16

    @property
    def trailing_separator(self) -> bool:  # 4.9.x deletes the last \x02
        return self.version == "5"

    @property
    def op_body_suffix(self) -> bytes:
        """What follows the half queue offset in an op record's body: 5.x's
        ``TransactionalMessageServiceImpl#deletePrepareMessage`` appends ``OFFSET_SEPARATOR``
        after each offset (``"12,"``); 4.9.x's ``addRemoveTagInTransactionOp`` writes the bare
        offset."""
        return b"," if self.version == "5" else b""

    @property
    def stores_wait(self) -> bool:
        return self.version == "5"


def broker_map(client_items: list[tuple[str, str]], profile: BrokerProfile, cluster: str) -> JavaHashMap:
    """The broker's map after parsing the client's string and adding CLUSTER."""
    m = JavaHashMap(profile.map_capacity)
    client = JavaHashMap(16)
    client.put_all(client_items)
    m.put_all(client.items())  # parsed in the client's serialised order
    m.put(PROPERTY_CLUSTER, cluster)
    return m


def stored_properties(m: JavaHashMap, profile: BrokerProfile, keep_wait: bool = False) -> str:
    """The stored string: 4.9.1+ leaves WAIT out of a plain send (keep_wait re-serialises it)."""
    items = m.items()
    if not profile.stores_wait and not keep_wait:
        items = [(k, v) for k, v in items if k != PROPERTY_WAIT]
    return serialize_properties(items, profile.trailing_separator)


TAGS = ["TagA", "TagB", "Pay", "Audit", "支付标签", "Tag With Blank", "t-x_2"]
STORE_V4 = (bytes([10, 0, 0, 5]), 10911)
STORE_V6 = (bytes.fromhex("20010db8000000000000000000000053"), 10911)
