"""Messages as the broker sees them: the decoded record, its ids and the Java arithmetic.

Java compatibility lives here: the masked CRC32 (``UtilAll#crc32``), the offset message id
(``MessageDecoder#createMessageId``) and the client UNIQ_KEY (``MessageClientIDSetter``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import ipaddress
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from rmqstore_cli.formats.message_id import (
    ID_HEX_LENGTHS,
    OFFSET_MSG_ID_TAIL_FORMAT,
    OFFSET_MSG_ID_TAIL_SIZE,
    UNIQ_KEY_TAIL_FORMAT,
    UNIQ_KEY_TAIL_SIZE,
)
from rmqstore_cli.formats.properties import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    parse_properties,
)
from rmqstore_cli.formats.sysflag import (
    BORNHOST_V6_FLAG,
    MAGIC_V2,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_MASK,
)

from rmqstore_cli.store.files.crc import crc32
from rmqstore_cli.store.javahash import java_hash

# MessageConst property names the engine acts on (KEYS, TAGS, UNIQ_KEY: formats/properties.py).
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_WAIT = "WAIT"
PROPERTY_TRAN_MSG = "TRAN_MSG"
PROPERTY_PGROUP = "PGROUP"
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"  # the transaction checks a half went through

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def split_keys(raw: str | None) -> list[str]:
    """``KEYS.split(" ")`` as ``IndexService#buildIndex`` uses it: empty elements dropped,
    duplicates and order kept."""
    return [k for k in raw.split(KEY_SEPARATOR) if k] if raw else []


def body_crc(body: bytes) -> int:
    """``UtilAll#crc32``: CRC-32 masked to 31 bits; 0 for an empty body."""
    return crc32(body) & 0x7FFFFFFF if body else 0


def tags_code(tags: str | None) -> int:
    """``MessageExtBrokerInner#tagsString2tagsCode``: the tag's hashCode, or 0."""
    return java_hash(tags) if tags else 0


# ---------------------------------------------------------------- hosts


def host_bytes(host: str) -> tuple[bytes, int]:
    """Parse ``ip:port`` / ``[v6]:port`` into (address bytes, port).

    An IPv4-mapped IPv6 address is an ``Inet4Address`` in Java and is stored as IPv4.
    """
    addr_s, port = split_host(host)
    return address_bytes(addr_s), port


def split_host(host: str) -> tuple[str, int]:
    """``ip:port`` / ``[v6]:port`` as the address's text and the port (:func:`host_bytes`'
    first step: a replayed dump's reader parses each address text once)."""
    if host.startswith("["):
        addr_s, _, port_s = host[1:].partition("]:")
    else:
        addr_s, _, port_s = host.rpartition(":")
    return addr_s, int(port_s)


@functools.lru_cache(maxsize=4096)
def address_bytes(addr_s: str) -> bytes:
    """An address's bytes (``InetAddress#getAddress``; IPv4-mapped IPv6 as IPv4): a replayed
    dump names a few addresses over and over, so each is parsed once (issue 23)."""
    addr = ipaddress.ip_address(addr_s)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.packed


def format_host(address: bytes, port: int) -> str:
    """``ip:port`` for IPv4, ``[compressed-v6]:port`` for IPv6 (DESIGN.md field names); IPv4
    dotted as ``socket.inet_ntoa`` writes it, without ``socket``'s import at start-up."""
    if len(address) == 4:
        return f"{address[0]}.{address[1]}.{address[2]}.{address[3]}:{port}"
    return f"[{ipaddress.IPv6Address(address).compressed}]:{port}"


@functools.lru_cache(maxsize=1 << 16)
def address_text(address: bytes) -> str:
    """The host part of :func:`format_host` (``ip`` or ``[v6]``), remembered: a store has few
    hosts and the IPv6 form is slow to make."""
    return format_host(address, 0).rpartition(":")[0]


# ---------------------------------------------------------------- message ids


def offset_msg_id(store_address: bytes, store_port: int, physical_offset: int) -> str:
    """``MessageDecoder#createMessageId``: store address + int32 port + int64 offset, hex."""
    return (store_address + struct.pack(OFFSET_MSG_ID_TAIL_FORMAT, store_port, physical_offset)).hex().upper()


@dataclass(frozen=True)
class OffsetMsgId:
    address: bytes
    port: int
    physical_offset: int

    @property
    def store_host(self) -> str:
        return format_host(self.address, self.port)


def decode_offset_msg_id(msg_id: str) -> OffsetMsgId:
    """``MessageDecoder#decodeMessageId``: 32 hex chars (IPv4) or 56 (IPv6)."""
    raw = bytes.fromhex(msg_id)
    if 2 * len(raw) not in ID_HEX_LENGTHS:
        raise ValueError(f"an offset msgId has 32 or 56 hex digits, not {len(msg_id)}")
    n = len(raw) - OFFSET_MSG_ID_TAIL_SIZE
    port, offset = struct.unpack_from(OFFSET_MSG_ID_TAIL_FORMAT, raw, n)
    return OffsetMsgId(raw[:n], port, offset)


@dataclass(frozen=True)
class UniqKey:
    """``MessageClientIDSetter`` layout: ip, pid, class-loader hash, month time, counter."""

    ip: bytes
    pid: int
    class_loader_hash: int
    time_in_month_ms: int
    counter: int

    @property
    def ip_str(self) -> str:
        """``MessageClientIDSetter#getIPStrFromID``: dotted IPv4, or 8 uncompressed v6 groups."""
        if len(self.ip) == 4:
            return ".".join(str(b) for b in self.ip)
        return ":".join(self.ip[i : i + 2].hex() for i in range(0, 16, 2))

    def nearly_time(self, now_ms: int, tz: _dt.tzinfo | None = None) -> int:
        """``MessageClientIDSetter#getNearlyTimeFromID``: month start of *now* + span.

        Uses the previous month when the result would not lie before ``now``.
        """
        now = _dt.datetime.fromtimestamp(now_ms / 1000, tz) if tz else _dt.datetime.fromtimestamp(now_ms / 1000)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        start_ms = int(start.timestamp() * 1000)
        if start_ms + self.time_in_month_ms >= now_ms:
            prev = (start - _dt.timedelta(days=1)).replace(day=1)
            start_ms = int(prev.timestamp() * 1000)
        return start_ms + self.time_in_month_ms


def decode_uniq_key(uniq_key: str) -> UniqKey:
    raw = bytes.fromhex(uniq_key)
    if 2 * len(raw) not in ID_HEX_LENGTHS:
        raise ValueError(f"a UNIQ_KEY has 32 or 56 hex digits, not {len(uniq_key)}")
    n = len(raw) - UNIQ_KEY_TAIL_SIZE
    pid, cl_hash, span, counter = struct.unpack_from(UNIQ_KEY_TAIL_FORMAT, raw, n)
    return UniqKey(raw[:n], pid, cl_hash, span, counter)


def encode_uniq_key(ip: bytes, pid: int, class_loader_hash: int, time_in_month_ms: int, counter: int) -> str:
    """``MessageClientIDSetter#createUniqID``: FIX_STRING + time + counter, upper-case hex."""
    return (
        (
            ip
            + struct.pack(
                UNIQ_KEY_TAIL_FORMAT, pid & 0xFFFF, class_loader_hash, time_in_month_ms & 0xFFFFFFFF, counter & 0xFFFF
            )
        )
        .hex()
        .upper()
    )


def month_start_ms(ts_ms: int, tz: _dt.tzinfo | None) -> int:
    """Start of the month containing ``ts_ms`` in ``tz`` (local if None), epoch ms."""
    t = _dt.datetime.fromtimestamp(ts_ms / 1000, tz) if tz else _dt.datetime.fromtimestamp(ts_ms / 1000)
    return int(t.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000)


# ---------------------------------------------------------------- the decoded record


@dataclass(slots=True)
class Message:
    """One decoded commit-log record (``MessageDecoder#decode`` fields, DESIGN.md names)."""

    physical_offset: int
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    sys_flag: int
    born_timestamp: int
    born_address: bytes
    born_port: int
    store_timestamp: int
    store_address: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic_bytes: bytes
    properties_bytes: bytes
    #: Where the record lies (fileFromOffset + position). ``physical_offset`` is the stored
    #: PHYSICALOFFSET field, which the broker's decode and dispatch use; they differ only
    #: in a damaged or hand-made log.
    offset: int = -1
    _props: dict[str, str] | None = field(default=None, repr=False)

    @property
    def topic(self) -> str:
        return self.topic_bytes.decode("utf-8", "replace")

    @property
    def properties_text(self) -> str:
        return self.properties_bytes.decode("utf-8", "replace")

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = parse_properties(self.properties_text) if self.properties_bytes else {}
        return self._props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys_raw(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def keys(self) -> list[str]:
        """``KEYS.split(" ")`` with empty elements dropped, duplicates and order kept."""
        return split_keys(self.keys_raw)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def version(self) -> str:
        return "v2" if self.magic == MAGIC_V2 else "v1"

    @property
    def transaction_type(self) -> int:
        return self.sys_flag & TRANSACTION_MASK

    @property
    def born_host(self) -> str:
        return format_host(self.born_address, self.born_port)

    @property
    def store_host(self) -> str:
        return format_host(self.store_address, self.store_port)

    @property
    def msg_id(self) -> str:
        return offset_msg_id(self.store_address, self.store_port, self.physical_offset)

    @property
    def body_size(self) -> int:
        return len(self.body)

    @property
    def born_v6(self) -> bool:
        return bool(self.sys_flag & BORNHOST_V6_FLAG)

    @property
    def store_v6(self) -> bool:
        return bool(self.sys_flag & STOREHOSTADDRESS_V6_FLAG)


# ---------------------------------------------------------------- java.util.HashMap order


class JavaHashMap:
    """Iteration order of a ``java.util.HashMap<String, String>`` (docs/format/properties.md#property-order).

    A bucket keeps its keys in insertion order (a re-put keeps its place, a removed key
    re-put goes last) and a resize splits buckets keeping relative order, so iterating
    by (bucket at the current capacity, insertion sequence) is the Java order. Treeified
    bins (8+ keys in one bucket) do not occur with real property names.
    """

    def __init__(self, capacity: int = 16):
        cap = 1
        while cap < capacity:
            cap <<= 1
        self.capacity = cap
        self._items: dict[str, str] = {}

    def put(self, key: str, value: str) -> None:
        self._items[key] = value
        while len(self._items) > self.capacity * 3 // 4:
            self.capacity <<= 1

    def put_all(self, items: Iterable[tuple[str, str]]) -> None:
        """``put`` of each pair in order, the table grown once at the end (its capacity
        depends only on the final count: it never shrinks)."""
        self._items.update(items)
        while len(self._items) > self.capacity * 3 // 4:
            self.capacity <<= 1

    def remove(self, key: str) -> None:
        self._items.pop(key, None)

    def get(self, key: str) -> str | None:
        return self._items.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def items(self) -> list[tuple[str, str]]:
        pairs = list(self._items.items())
        return [pairs[i] for i in _iteration_order(tuple(self._items), self.capacity)]


@functools.lru_cache(maxsize=256)
def _iteration_order(keys: tuple[str, ...], capacity: int) -> tuple[int, ...]:
    """Positions of ``keys`` (insertion order) in ``HashMap`` iteration order at ``capacity``:
    the same few key sets repeat message after message, so each is sorted once."""
    mask = capacity - 1
    return tuple(sorted(range(len(keys)), key=lambda i: (_spread(keys[i]) & mask, i)))


@functools.lru_cache(maxsize=4096)
def _spread(key: str) -> int:
    """``HashMap#hash``: ``h ^ (h >>> 16)``; property names repeat, so it is cached."""
    h = java_hash(key) & 0xFFFFFFFF
    return h ^ (h >> 16)
