"""What the library hands a script: plain dataclasses whose fields are the JSON Lines keys
the command line prints (DESIGN.md, "Record field names"), so a script can move between
``rmqstore … --format jsonl | jq`` and ``import rmqstore_cli`` without renaming anything.

Each has ``as_dict()``, the exact object the command line prints for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.store.answers.progress import ConsumerProgress as ConsumerProgress  # a record of the API too
from rmqstore_cli.store.checks.cq_compare import QueueComparison as QueueComparison  # a record of the API too
from rmqstore_cli.store.records.fields import fields_dict as fields_dict
from rmqstore_cli.store.records.message_view import message_dict

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Message:
    """One commit-log message (``MessageDecoder#decode``'s fields under the JSON names).

    ``magic`` is ``"v1"`` or ``"v2"`` (MESSAGE_MAGIC_CODE / _V2); ``msg_id`` is the offset
    message id (store host + physical offset, ``MessageDecoder#createMessageId``);
    ``uniq_key`` the client's id (``UNIQ_KEY``); ``keys`` the ``KEYS`` property split on
    spaces; ``file`` the commit-log file the record lies in; ``offset`` where it lies
    (differs from ``physical_offset``, the stored field, only in a damaged log)."""

    physical_offset: int
    total_size: int
    magic: str
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    topic: str
    properties: dict[str, str]
    tags: str | None
    keys: list[str]
    uniq_key: str | None
    msg_id: str
    body_size: int
    body: bytes = field(repr=False)
    file: str = ""
    offset: int = -1
    record: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, rec: Any, file: str = "") -> Message:
        """The public view of an engine record (``store.message.Message``)."""
        return cls(
            rec.physical_offset,
            rec.total_size,
            rec.version,
            rec.body_crc,
            rec.queue_id,
            rec.flag,
            rec.queue_offset,
            rec.sys_flag,
            rec.born_timestamp,
            rec.born_host,
            rec.store_timestamp,
            rec.store_host,
            rec.reconsume_times,
            rec.prepared_transaction_offset,
            rec.topic,
            rec.properties,
            rec.tags,
            rec.keys,
            rec.uniq_key,
            rec.msg_id,
            rec.body_size,
            rec.body,
            file,
            rec.offset,
            rec,
        )

    def as_dict(self, body: str = "none", properties: bool = True) -> JSON:
        """The object ``dump-commitlog --format jsonl`` prints for this message; ``body``:
        none, text, hex or base64."""
        return message_dict(self.record, body, properties, self.file)


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """One consume queue (``consumequeue/<topic>/<queueId>/``, a 5.x batch queue, or a queue
    of the RocksDB consume queue): its logical bounds as ``ConsumeQueue#getMinOffsetInQueue``
    and ``#getMaxOffsetInQueue`` give them."""

    topic: str
    queue_id: int
    kind: str
    min_offset: int
    max_offset: int

    def as_dict(self) -> JSON:
        return fields_dict(self)


@dataclass(frozen=True, slots=True)
class QueueUnit:
    """One 20-byte consume-queue unit (``ConsumeQueue#putMessagePositionInfo``)."""

    topic: str
    queue_id: int
    cq_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    file: str

    def as_dict(self) -> JSON:
        return fields_dict(self)


@dataclass(frozen=True, slots=True)
class IndexHit:
    """A message found by key through the index files, its real key checked.

    ``match`` is ``"keys"`` or ``"uniq_key"`` (which property holds the key)."""

    key: str
    topic: str
    physical_offset: int
    store_timestamp: int | None
    index_file: str
    match: str
    message: Message | None

    def as_dict(self, body: str = "none", properties: bool = True) -> JSON:
        return {
            "key": self.key,
            "topic": self.topic,
            "physical_offset": self.physical_offset,
            "store_timestamp": self.store_timestamp,
            "index_file": self.index_file,
            "match": self.match,
            "message": None if self.message is None else self.message.as_dict(body, properties),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """One verify finding: a stable check id, its severity (error, warning, info), the file
    relative to the store root, the byte offset in it (None for a whole file) and what is
    wrong; ``extra`` holds the check's own fields (as in ``verify --format jsonl``)."""

    check: str
    severity: str
    file: str
    offset: int | None
    detail: str
    extra: JSON = field(default_factory=dict)

    @classmethod
    def of(cls, d: JSON) -> Finding:
        rest = {k: v for k, v in d.items() if k not in ("check", "severity", "file", "offset", "detail")}
        return cls(d["check"], d["severity"], d["file"], d.get("offset"), d["detail"], rest)

    def as_dict(self) -> JSON:
        d = fields_dict(self)
        d.update(d.pop("extra"))
        return d


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``Store.verify`` found: every finding (up to ``max_findings`` per check), the
    summary ``verify --format jsonl`` ends with (counts, files, ``broker_start``), and
    ``ok``: no error finding."""

    findings: list[Finding]
    summary: JSON
    ok: bool

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def broker_starts(self) -> bool:
        """Whether the broker would start on the store (``summary["broker_start"]``)."""
        return bool(self.summary["broker_start"]["starts"])


@dataclass(frozen=True, slots=True)
class MessageId:
    """One message id read both ways and looked up in the store, as ``decode-msgid --store``
    prints it: an offset msgId (store host + physical offset,
    ``MessageDecoder#createMessageId``) and/or a client UNIQ_KEY (``MessageClientIDSetter``).

    ``kind`` is ``offset_msg_id``, ``uniq_key`` or ``ambiguous``; the offset reading's fields
    are None for a ``uniq_key``, the UNIQ_KEY reading's for an ``offset_msg_id``.
    ``messages``: the record at the offset and the records carrying it as UNIQ_KEY."""

    id: str
    kind: str
    basis: str
    store_host: str | None
    physical_offset: int | None
    client_ip: str | None
    pid: int | None
    class_loader_hash: str | None
    time_in_month_ms: int | None
    nearly_time: int | None
    counter: int | None
    found: bool
    host_matches_store: bool | None
    offset_problem: str | None
    messages: list[Message]

    def as_dict(self, body: str = "none", properties: bool = True) -> JSON:
        """The object ``decode-msgid --store … --format jsonl`` prints (of a plain commit log)."""
        d: JSON = {"id": self.id, "kind": self.kind, "basis": self.basis}
        if self.kind != "uniq_key":
            d["store_host"] = self.store_host
            d["physical_offset"] = self.physical_offset
        if self.kind != "offset_msg_id":
            d["client_ip"] = self.client_ip
            d["pid"] = self.pid
            d["class_loader_hash"] = self.class_loader_hash
            d["time_in_month_ms"] = self.time_in_month_ms
            d["nearly_time"] = self.nearly_time
            d["counter"] = self.counter
        d["found"] = self.found
        if self.kind != "uniq_key":
            d["host_matches_store"] = self.host_matches_store
            if self.offset_problem is not None:
                d["offset_problem"] = self.offset_problem
        d["messages"] = [m.as_dict(body, properties) for m in self.messages]
        return d


@dataclass(frozen=True, slots=True)
class OffsetAtTime:
    """One queue's answer to "where is time T" (``search-offset``): the consume-queue
    ``offset`` of the first message stored at or after ``time`` (or, with ``method``
    broker-…, what ``ConsumeQueue#getOffsetInQueueByTime`` returns), the store time of the
    unit there (None at the max offset) and the queue's bounds."""

    topic: str
    queue_id: int
    time: int
    method: str
    offset: int | None
    store_timestamp: int | None
    min_offset: int
    max_offset: int
    note: str | None = None

    def as_dict(self) -> JSON:
        return fields_dict(self, "note")


@dataclass(frozen=True, slots=True)
class StatsRow:
    """One topic's (or, ``queue_id`` given, one queue's) messages and bytes in the commit log
    (``stats``' rows): the store times of the first and last, ``share`` of the message
    bytes counted, each record once (the rows' shares add up to 1; None for a
    ``multi_dispatch`` row, whose records other rows count), ``cq_bytes`` its consume-queue
    files' size; ``not_in_cq`` (counted from the commit log only) the records no consume
    queue holds; ``multi_dispatch`` a queue of LMQ units, whose messages are other queues'
    too."""

    topic: str
    queue_id: int | None
    messages: int
    bytes: int
    first_store_timestamp: int | None
    last_store_timestamp: int | None
    share: float | None
    cq_bytes: int
    not_in_cq: int | None = None
    multi_dispatch: bool = False

    @classmethod
    def of(cls, d: JSON) -> StatsRow:
        return cls(
            d["topic"],
            d.get("queue_id"),
            d["messages"],
            d["bytes"],
            d["first_store_timestamp"],
            d["last_store_timestamp"],
            d["share"],
            d["cq_bytes"],
            d.get("not_in_cq"),
            d.get("multi_dispatch", False),
        )

    def as_dict(self) -> JSON:
        return fields_dict(self, "queue_id", "not_in_cq", "multi_dispatch")


@dataclass(frozen=True, slots=True)
class StatsFile:
    """One commit-log, consume-queue, BatchCQ or index file (``stats --by file``): its size,
    allocated bytes, ``entries`` (records, live units or index entries), their store times and
    ``fill`` (how full the file is)."""

    component: str
    file: str
    topic: str | None
    queue_id: int | None
    bytes: int
    disk_bytes: int
    entries: int
    first_store_timestamp: int | None
    last_store_timestamp: int | None
    fill: float | None

    def as_dict(self) -> JSON:
        return fields_dict(self)


@dataclass(frozen=True, slots=True)
class StatsInterval:
    """One interval of store time (``stats --by minute|hour``): the commit-log records whose
    store timestamp falls in ``[start_timestamp, end_timestamp)`` (epoch ms, minutes and
    hours aligned to UTC), of ``topic`` when one was asked for; zero for an empty interval
    between the first and the last."""

    start_timestamp: int
    end_timestamp: int
    topic: str | None
    messages: int
    bytes: int

    def as_dict(self) -> JSON:
        return fields_dict(self)


@dataclass(frozen=True, slots=True)
class StatsReport:
    """What ``Store.stats`` counted: the rows shown (biggest first) and the summary ``stats
    --format json`` prints (method, totals, the store root's components, notes)."""

    rows: list[StatsRow | StatsFile] | list[StatsInterval]
    summary: JSON

    @property
    def messages(self) -> int:
        """Messages counted (a multi-dispatch queue's units not twice)."""
        return int(self.summary["messages"])

    def as_dict(self) -> JSON:
        """The object ``stats --format json`` prints."""
        return {"rows": [r.as_dict() for r in self.rows], "summary": self.summary}
