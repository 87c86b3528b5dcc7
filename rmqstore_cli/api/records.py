"""What the library hands a script: plain dataclasses whose fields are the JSON Lines keys
the command line prints (DESIGN.md, "Record field names"), so a script can move between
``rmqstore … --format jsonl | jq`` and ``import rmqstore_cli`` without renaming anything.

Each has ``as_dict()``, the exact object the command line prints for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqstore_cli.store.message_view import message_dict

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
        return {
            "topic": self.topic,
            "queue_id": self.queue_id,
            "kind": self.kind,
            "min_offset": self.min_offset,
            "max_offset": self.max_offset,
        }


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
        return {
            "topic": self.topic,
            "queue_id": self.queue_id,
            "cq_offset": self.cq_offset,
            "commitlog_offset": self.commitlog_offset,
            "size": self.size,
            "tags_code": self.tags_code,
            "file": self.file,
        }


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
        return {
            "check": self.check,
            "severity": self.severity,
            "file": self.file,
            "offset": self.offset,
            "detail": self.detail,
            **self.extra,
        }


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
