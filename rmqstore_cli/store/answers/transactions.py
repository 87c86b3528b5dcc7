"""What happened to each transactional message, from the commit log alone (``transactions``).

The broker's rules (docs/format/commitlog.md#transactions):

- ``TransactionalMessageBridge#parseHalfMessageInner`` stores a PREPARED send in
  ``RMQ_SYS_TRANS_HALF_TOPIC`` with REAL_TOPIC/REAL_QID and the producer group (PGROUP);
- ``EndTransactionProcessor#processRequest`` commits (a new record in the real topic, type
  COMMIT, PREPAREDTRANSACTIONOFFSET = the half's commit-log offset) or rolls back (no record),
  then ``TransactionalMessageBridge#addRemoveTagInTransactionOp`` (4.x) or
  ``TransactionalMessageServiceImpl#deletePrepareMessage`` (5.x, batched) writes an op record
  in ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, TAGS ``d``, whose body lists the half queue offsets it
  ends, comma-separated (op queue id = half queue id);
- ``TransactionalMessageServiceImpl#check`` re-puts a half it could not resolve with
  TRANSACTION_CHECK_TIMES incremented (``#needDiscard``), so one transaction may have
  several half records (same UNIQ_KEY), and gives up on one whose count reached
  ``transactionCheckMax`` (``#needDiscard``) or born more than ``fileReservedTime`` hours
  ago (``#needSkip``);
- before 4.3 (and still readable) a PREPARED record sat in the real topic itself and a
  COMMIT or ROLLBACK record named it (kind ``prepared``).

The walk keeps only transactions still open (bounded by what is in flight, not by the
log): an op record ends its transaction, which is handed out then; what is open at the
end is committed-without-op, pending or due for discard. The commit-log walk is needed
anyway: a COMMIT record lies in its real topic's queue among the other messages, found
only by its sysflag. Blocks of records are filtered by their columns (topic and sysflag);
only transactional records are decoded one by one.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from rmqstore_cli.formats.sysflag import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)

from rmqstore_cli.store.answers.keyed_rows import Answer as Answer, Wanted, Warned, keep
from rmqstore_cli.store.records.message import (
    PROPERTY_CHECK_TIMES,
    PROPERTY_PGROUP,
    PROPERTY_REAL_QID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)

#: TransactionalMessageUtil.REMOVE_TAG: the op record's TAGS
REMOVE_TAG = "d"
#: TransactionalMessageUtil.OFFSET_SEPARATOR
OFFSET_SEPARATOR = ","
#: BrokerConfig#transactionCheckMax's default
TRANSACTION_CHECK_MAX = 15
#: what ``Long#parseLong`` takes: a sign, then decimal digits of any script
#: (``Character#digit``), no spaces or underscores, unlike Python's int
JAVA_LONG = re.compile(r"[+-]?\d{1,64}")
STATES = ("committed", "rolled-back", "pending", "discard")
_HALF_TOPIC, _OP_TOPIC = TRANS_HALF_TOPIC.encode(), TRANS_OP_HALF_TOPIC.encode()


@dataclass(slots=True)
class OpenTx:
    """A transaction seen begun (a half or legacy PREPARED record) and not yet ended."""

    key: str
    kind: str  # "half" or "prepared" (the pre-4.3 way)
    producer_group: str
    topic: str
    queue_id: int | None
    uniq_key: str | None
    half_offset: int
    half_queue_offset: int
    born_timestamp: int
    store_timestamp: int
    check_times: int = 0
    half_records: int = 1
    end: str | None = None  # "commit" or "rollback": the record that names it
    end_offset: int | None = None
    offsets: list[int] = field(default_factory=list)
    queue_offsets: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class Rules:
    """What decides pending against discard: the time taken as now, ``transactionCheckMax``,
    ``fileReservedTime`` (hours)."""

    now_ms: int
    check_max: int = TRANSACTION_CHECK_MAX
    reserved_hours: int = 72


@dataclass
class Tally(Warned):
    """What the walk met besides transactions: op entries and end records that name nothing
    open, unreadable op bodies, and the warnings about them (the first few)."""

    ops_without_half: int = 0
    ends_without_prepare: int = 0
    bad_op_entries: int = 0
    committed_without_op: int = 0


def op_offsets(body: bytes) -> tuple[list[int], list[str]]:
    """The half queue offsets an op body lists, and the entries the broker skips
    (``TransactionalMessageServiceImpl#getLong``: not a long, read as -1). Java's
    ``String#split`` drops trailing empty entries (5.x writes ``"1,2,"``)."""
    parts = body.decode("utf-8", "replace").split(OFFSET_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    good, bad = [], []
    for p in parts:
        if JAVA_LONG.fullmatch(p) and -(1 << 63) <= int(p) < (1 << 63):  # else NumberFormatException
            good.append(int(p))
        else:
            bad.append(p)
    return good, bad


def java_int(text: str | None) -> int | None:
    """``Integer#parseInt`` of a property, None where it would throw."""
    if text is None or not JAVA_LONG.fullmatch(text):
        return None
    v = int(text)
    return v if -(1 << 31) <= v < (1 << 31) else None


class TransactionScan:
    """One walk of the commit log: :meth:`rows` yields each transaction as it ends, then the
    ones still open; :attr:`tally` holds the rest once it is exhausted."""

    def __init__(self, commitlog: Any, rules: Rules):
        self.commitlog = commitlog
        self.rules = rules
        self.tally = Tally()
        self.open: dict[str, OpenTx] = {}
        self.by_offset: dict[int, str] = {}
        self.by_queue_offset: dict[tuple[int, int], str] = {}

    def rows(self) -> Iterator[dict[str, Any]]:
        for rec in self.records():
            yield from self.feed(rec)
        for tx in list(self.open.values()):
            yield self.close(tx, None)

    def records(self) -> Iterator[Any]:
        """The transactional records in log order: half, op, and any with transaction bits;
        blocks filtered by their topic and sysflag columns."""
        cl = self.commitlog
        for item in cl.scan_blocks(None, None, every_file=True, blocks=not cl.is_dledger):
            if hasattr(item, "rb"):  # a MessageBlock
                names, tid = item.topics
                sys_topic = np.array([n in (_HALF_TOPIC, _OP_TOPIC) for n in names], bool)
                take = np.flatnonzero(sys_topic[tid] | ((item.rb.sys_flag & TRANSACTION_MASK) != 0))
                if take.size:
                    yield from item.messages(take)
            elif item.topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC) or item.transaction_type:
                yield item

    def feed(self, rec: Any) -> Iterator[dict[str, Any]]:
        topic = rec.topic
        if topic == TRANS_HALF_TOPIC:
            self.half(rec)
        elif topic == TRANS_OP_HALF_TOPIC:
            yield from self.op(rec)
        elif rec.transaction_type == TRANSACTION_PREPARED_TYPE:
            self.prepared(rec)
        elif rec.transaction_type in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            yield from self.end(rec)

    def half(self, rec: Any) -> None:
        """A half record: a new transaction, or a re-put of an open one (same UNIQ_KEY)."""
        props = rec.properties
        uniq = rec.uniq_key
        checks = java_int(props.get(PROPERTY_CHECK_TIMES)) or 0
        key = f"half:{uniq}" if uniq else f"half@{rec.physical_offset}"
        tx = self.open.get(key)
        if tx is None:
            tx = self.open[key] = OpenTx(
                key,
                "half",
                sys.intern(props.get(PROPERTY_PGROUP, "")),  # a few names, not one copy per transaction
                sys.intern(props.get(PROPERTY_REAL_TOPIC, "")),
                java_int(props.get(PROPERTY_REAL_QID)),
                uniq,
                rec.physical_offset,
                rec.queue_offset,
                rec.born_timestamp,
                rec.store_timestamp,
                checks,
            )
        else:
            tx.half_records += 1
            tx.half_offset, tx.half_queue_offset = rec.physical_offset, rec.queue_offset
            tx.check_times = max(tx.check_times, checks)
        tx.offsets.append(rec.physical_offset)
        tx.queue_offsets.append((rec.queue_id, rec.queue_offset))
        self.by_offset[rec.physical_offset] = key
        self.by_queue_offset[(rec.queue_id, rec.queue_offset)] = key

    def prepared(self, rec: Any) -> None:
        """A legacy PREPARED record in its real topic: ended by the record naming its offset."""
        key = f"prepared@{rec.physical_offset}"
        props = rec.properties
        self.open[key] = OpenTx(
            key,
            "prepared",
            props.get(PROPERTY_PGROUP, ""),
            rec.topic,
            rec.queue_id,
            rec.uniq_key,
            rec.physical_offset,
            rec.queue_offset,
            rec.born_timestamp,
            rec.store_timestamp,
            offsets=[rec.physical_offset],
        )
        self.by_offset[rec.physical_offset] = key

    def end(self, rec: Any) -> Iterator[dict[str, Any]]:
        """A COMMIT or ROLLBACK record (``EndTransactionProcessor``): it names the prepared
        record by PREPAREDTRANSACTIONOFFSET. A legacy transaction ends here; a half one at its op."""
        key = self.by_offset.get(rec.prepared_transaction_offset)
        if key is None:
            self.tally.ends_without_prepare += 1
            return
        tx = self.open[key]
        tx.end = "commit" if rec.transaction_type == TRANSACTION_COMMIT_TYPE else "rollback"
        tx.end_offset = rec.physical_offset
        if tx.kind == "prepared":
            yield self.close(tx, None)

    def op(self, rec: Any) -> Iterator[dict[str, Any]]:
        """An op record: each half queue offset its body lists ends that half's transaction
        (``TransactionalMessageServiceImpl#fillOpRemoveMap``: TAGS other than ``d`` ignored)."""
        if rec.properties.get(PROPERTY_TAGS) != REMOVE_TAG:
            self.tally.warn(f"op record at {rec.physical_offset} has TAGS {rec.tags!r}, not 'd': the broker ignores it")
            return
        good, bad = op_offsets(rec.body)
        if bad:
            self.tally.bad_op_entries += len(bad)
            shown = ", ".join(repr(b[:40]) for b in bad[:3])
            self.tally.warn(
                f"op record at {rec.physical_offset}: {shown} not a half queue offset; "
                "the broker skips it (TransactionalMessageServiceImpl#getLong)"
            )
        for q in good:
            key = self.by_queue_offset.get((rec.queue_id, q))
            if key is None:
                self.tally.ops_without_half += 1
                continue
            yield self.close(self.open[key], rec.physical_offset)

    def close(self, tx: OpenTx, op_offset: int | None) -> dict[str, Any]:
        """The transaction's row, and forget it."""
        del self.open[tx.key]
        for off in tx.offsets:
            self.by_offset.pop(off, None)
        for qo in tx.queue_offsets:
            if self.by_queue_offset.get(qo) == tx.key:
                del self.by_queue_offset[qo]
        return self.row(tx, op_offset)

    def row(self, tx: OpenTx, op_offset: int | None) -> dict[str, Any]:
        r = self.rules
        state, reason = self._state(tx, op_offset)
        return {
            "producer_group": tx.producer_group,
            "topic": tx.topic,
            "queue_id": tx.queue_id,
            "uniq_key": tx.uniq_key,
            "state": state,
            "kind": tx.kind,
            "half_offset": tx.half_offset,
            "half_queue_offset": tx.half_queue_offset if tx.kind == "half" else None,
            "half_records": tx.half_records,
            "check_times": tx.check_times if tx.kind == "half" else None,
            "born_timestamp": tx.born_timestamp,
            "store_timestamp": tx.store_timestamp,
            "age_ms": r.now_ms - tx.born_timestamp if state in ("pending", "discard") else None,
            "end_offset": tx.end_offset,
            "op_offset": op_offset,
            "discard_reason": reason,
        }

    def _state(self, tx: OpenTx, op_offset: int | None) -> tuple[str, str | None]:
        """The transaction's state and (discarded) why: committed (a half committed with no op
        record is counted), rolled back (an op record removes it too), else pending, or
        discarded when the check service would give up on a half."""
        if tx.end == "commit":
            if tx.kind == "half" and op_offset is None:
                self.tally.committed_without_op += 1
            return "committed", None
        if tx.end == "rollback" or op_offset is not None:
            return "rolled-back", None
        reason = _discard_reason(tx, self.rules) if tx.kind == "half" else None
        return ("discard" if reason else "pending"), reason


def _discard_reason(tx: OpenTx, r: Rules) -> str | None:
    """Why ``TransactionalMessageServiceImpl#check`` would discard a pending half: checked
    ``transactionCheckMax`` times already, or older than ``fileReservedTime``; None: it checks on."""
    if tx.check_times >= r.check_max:
        return "check-max"
    if r.now_ms - tx.born_timestamp > r.reserved_hours * 3_600_000:
        return "file-reserved-time"
    return None


def answer(commitlog: Any, rules: Rules, want: Wanted) -> Answer:
    """One walk: the transactions of ``want``'s topic and producer group counted per group and
    real topic; those in its states kept (the first ``limit``)."""
    scan = TransactionScan(commitlog, rules)
    k = keep(scan.rows(), want, "producer_group", STATES, count_row)
    t = scan.tally
    summary = _summary(t, rules, k.totals, k.matched, len(k.rows))
    warnings = t.all_warnings("op records the broker skips in part or whole")
    return Answer(k.rows, k.groups, summary, warnings)


def _summary(t: Tally, rules: Rules, totals: dict[str, int], matched: int, shown: int) -> dict[str, Any]:
    return {
        "transactions": sum(totals.values()),
        **{k.replace("-", "_"): v for k, v in totals.items()},
        "matched": matched,
        "shown": shown,
        "committed_without_op": t.committed_without_op,
        "ops_without_half": t.ops_without_half,
        "ends_without_prepare": t.ends_without_prepare,
        "bad_op_entries": t.bad_op_entries,
        "now": rules.now_ms,
        "transaction_check_max": rules.check_max,
        "file_reserved_time": rules.reserved_hours,
    }


def count_row(counts: dict[tuple[str, str], dict[str, Any]], row: dict[str, Any]) -> None:
    k = (row["producer_group"], row["topic"])
    g = counts.get(k)
    if g is None:
        g = counts[k] = {
            "producer_group": k[0],
            "topic": k[1],
            "committed": 0,
            "rolled_back": 0,
            "pending": 0,
            "discard": 0,
            "oldest_pending_born_timestamp": None,
            "max_check_times": 0,
        }
    g[row["state"].replace("-", "_")] += 1
    if row["state"] in ("pending", "discard"):
        old = g["oldest_pending_born_timestamp"]
        g["oldest_pending_born_timestamp"] = row["born_timestamp"] if old is None else min(old, row["born_timestamp"])
    g["max_check_times"] = max(g["max_check_times"], row["check_times"] or 0)
