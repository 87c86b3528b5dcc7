"""What an append takes and gives: :class:`AppendSpec` (a message the writer places) and
:class:`AppendResult` (``AppendMessageResult``). Below both the per-record writer
(:class:`~rmqstore_cli.store.commitlog.CommitLog`) and the block writer
(:mod:`~rmqstore_cli.store.commitlog.blocks`), which build and consume them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class AppendSpec:
    """A message to append; the writer assigns queue offset and physical offset."""

    topic: str
    queue_id: int
    body: bytes
    properties: str | bytes
    store_timestamp: int
    born_timestamp: int
    born_host: tuple[bytes, int]
    store_host: tuple[bytes, int]
    flag: int = 0
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    magic: int | None = None  # None: V2 only for long topics when the config asks for it
    #: Replaying a dump: keep these as they were instead of assigning them.
    queue_offset: int | None = None
    physical_offset: int | None = None
    #: Properties are the stored bytes already (a CRC trailer included): copy verbatim.
    raw_properties: bool = False


@dataclass(slots=True)
class AppendResult:
    """``AppendMessageResult``: wroteOffset, wroteBytes, logicsOffset, msgId, store time."""

    physical_offset: int
    size: int
    queue_offset: int
    msg_id: str
    store_timestamp: int
    record: bytes
