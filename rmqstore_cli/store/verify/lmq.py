"""Multi-dispatch (LMQ) units against the commit log, both ways (docs/format/lmq.md).

Each batch's multi-dispatched messages (``INNER_MULTI_DISPATCH`` with
``INNER_MULTI_QUEUE_OFFSET``, the units :func:`~rmqstore_cli.store.write.lmq.fan_out` says
``ConsumeQueue#multiDispatchLmqQueue`` writes) are looked up in their listed queues as the
batch passes: the unit must be there, point at the message, and carry its size and
tagsCode. The units so found are marked accounted for, so a unit of an LMQ queue that no
message lists at its offset is left to the queue finish (``cq.unit-target``, with the
reason :meth:`LmqChecks.lmq_unit_reason` gives). At the finish each LMQ queue's end is
compared with the next offset the log assigns it: ``DefaultMessageStore#recoverTopicQueueTable``
restarts the broker's counter there.

Multi-dispatch is checked when the broker config enables it (``enableMultiDispatch``) or,
when no config says, when the log holds ``INNER_MULTI_QUEUE_OFFSET`` (only such a store
assigns it); ``enableLmq`` is then assumed too (an ``lmq.assumed`` note).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from rmqstore_cli.store.queues.consume_queue import unsafe_topic
from rmqstore_cli.store.write.lmq import (
    MULTI_DISPATCH,
    MULTI_QUEUE_OFFSET,
    broker5_store,
    fan_out,
    is_lmq,
    java_split,
    lmq_queue_id,
    multi_ranges,
)


class LmqChecks:
    """The multi-dispatch part of :class:`~rmqstore_cli.store.verify.Verifier`."""

    #: (enable_lmq, broker5) once multi-dispatch is found checked (:meth:`_lmq_mode`).
    lmq_mode: tuple[bool, bool] | None = None

    def _lmq_mode(self, found: bool) -> tuple[bool, bool] | None:
        """(enable_lmq, broker5) when multi-dispatch is checked, else None."""
        cfg = self.config
        mode = self.lmq_mode
        if mode is None:
            if cfg.enable_multi_dispatch:
                mode = (cfg.enable_lmq, broker5_store(cfg.root))
            elif found and "enable_multi_dispatch" not in cfg.explicit:
                lmq = cfg.enable_lmq or "enable_lmq" not in cfg.explicit
                self._add(
                    "lmq.assumed",
                    "commitlog",
                    None,
                    "messages carry INNER_MULTI_QUEUE_OFFSET but no broker "
                    "config enables multi-dispatch: checked as if enableMultiDispatch=true and "
                    f"enableLmq={str(lmq).lower()} (pass --broker-conf)",
                )
                mode = (lmq, broker5_store(cfg.root))
            else:
                return None
            self.lmq_mode = mode
        return mode

    def check_lmq_batch(
        self,
        pr,
        tid: np.ndarray,
        qid: np.ndarray,
        dispatch: np.ndarray,
        absP: np.ndarray,
        cols: tuple,
        rel: str,
        base: int,
    ) -> None:
        """Every listed queue of the batch's dispatched messages holds the message's unit at
        its listed offset (``ConsumeQueue#multiDispatchLmqQueue``); ``cols``: the records'
        sizes, tagsCodes and store times."""
        found = multi_ranges(pr)
        if found is None or self._lmq_mode(True) is None:
            return
        by_queue = self._listed_units(found, tid, qid, dispatch, absP, rel, base)
        ends = self.__dict__.setdefault("lmq_ends", {})
        for key, rows in by_queue.items():
            L = np.array([r[0] for r in rows], np.int64)
            rec = np.array([r[1] for r in rows], np.int64)
            ends[key] = max(ends.get(key, 0), int(L.max()) + 1)
            self._lmq_units(key, L, absP[rec], *(c[rec] for c in cols), rel, base)

    def _listed_units(self, found: tuple, tid, qid, dispatch, absP, rel: str, base: int) -> dict:
        """(queue name, queue id) -> [(listed offset, record)] of the dispatched records'
        multi-dispatch targets (``fan_out``: ``CommitLog#multiDispatch`` rules); a malformed
        listing is an ``lmq.malformed`` finding and a refused name lists nothing."""
        enable_lmq, broker5 = self._lmq_mode(True)
        owner, names, offsets = found
        by_queue: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        for i, nm, of in zip(owner.tolist(), names, offsets, strict=True):
            if not dispatch[i]:
                continue
            topic = self.topic_names[int(tid[i])].decode("utf-8", "replace")
            fo = fan_out(topic, int(qid[i]), nm, of, enable_lmq=enable_lmq, broker5=broker5)
            if fo is None:
                continue
            if fo.problem:
                self._add(
                    "lmq.malformed",
                    rel,
                    int(absP[i]) - base,
                    f"{MULTI_DISPATCH}={nm!r} {MULTI_QUEUE_OFFSET}={of!r}: {fo.detail} ({_CONSEQUENCE[fo.problem]})",
                    physical_offset=int(absP[i]),
                    topic=topic,
                )
            for t in fo.targets:
                if unsafe_topic(t.name) is None:  # refused names: lmq.malformed above
                    by_queue[(t.name, t.queue_id)].append((t.offset, i))
        return by_queue

    def _lmq_units(self, key: tuple[str, int], L, phy, size, tags, ts, rel: str, base: int) -> None:
        """The units a queue's listing records point at: present, and their record's."""
        name, q = key
        mq = self.queues.get((name.encode("utf-8", "surrogateescape"), q))
        cp = self.checkpoint
        late = ts > (
            cp.logics_msg_timestamp if cp is not None else 0
        )  # not dispatched yet (docs/format/recovery.md#dispatch)
        if mq is None:
            self._lmq_no_queue(key, L, phy, late, rel, base)
            return
        inside = (L >= mq.base) & (L < mq.end)
        has, off, usize, utags = mq.units_at(np.where(inside, L, mq.base))
        has &= inside
        mq.matched[L[has] - mq.base] = True
        for j in np.flatnonzero(~has & (L >= mq.base)).tolist():
            self._add(
                "lmq.not-dispatched" if late[j] else "lmq.missing-unit",
                rel,
                int(phy[j]) - base,
                f"{name}/{q}: no unit at offset {int(L[j])} (queue ends at {mq.end}) for the message that lists it",
                physical_offset=int(phy[j]),
                topic=name,
                queue_id=q,
            )
        for j in np.flatnonzero(has).tolist():
            what = _unit_differences(int(off[j]), int(usize[j]), int(utags[j]), int(phy[j]), int(size[j]), int(tags[j]))
            if what:
                f, o = mq.file_of(int(L[j]))
                self._add(
                    "lmq.unit-mismatch",
                    f,
                    o,
                    f"{name}/{q} unit {int(L[j])}, listed by the message at {int(phy[j])}: " + "; ".join(what),
                    topic=name,
                    queue_id=q,
                    physical_offset=int(phy[j]),
                )

    def _lmq_no_queue(self, key: tuple[str, int], L, phy, late, rel: str, base: int) -> None:
        """A listed queue that does not exist: one finding for the records dispatched already
        (``lmq.missing-unit``) and one for those after the checkpoint (``lmq.not-dispatched``)."""
        name, q = key
        for check, sel in (("lmq.missing-unit", ~late), ("lmq.not-dispatched", late)):
            at = np.flatnonzero(sel)
            if not at.size:
                continue
            j = int(at[0])
            self._add(
                check,
                rel,
                int(phy[j]) - base,
                f"{name}/{q}: the queue does not exist, but {at.size} "
                f"messages from here list it (first at offset {int(L[j])})",
                physical_offset=int(phy[j]),
                topic=name,
                queue_id=q,
                count=int(at.size),
            )

    def lmq_unit_reason(self, m, mq, logical: int) -> str | None:
        """Why a unit of ``mq`` that the scan did not account for is not the message ``m``'s
        multi-dispatch unit, when ``m`` lists the queue; None when it does not."""
        names = m.properties.get(MULTI_DISPATCH)
        if not names:
            return None
        queues = java_split(names)
        if mq.topic not in queues:
            return None
        offsets = java_split(m.properties.get(MULTI_QUEUE_OFFSET) or "")
        mode = self.lmq_mode
        if mode is None:
            return f"the message there ({m.topic}) lists {mq.topic}, but multi-dispatch is not enabled"
        k = queues.index(mq.topic)
        want = lmq_queue_id(mq.topic, m.queue_id, mode[0])
        at = offsets[k] if k < len(offsets) else "none"
        return (
            f"the message there ({m.topic}/{m.queue_id}) lists {mq.topic} at offset {at} of queue {want}, not {logical}"
        )

    def finish_lmq(self) -> None:
        """Each LMQ queue ends at the next offset its messages were assigned: the broker's
        counter after a restart is the queue's end (``recoverTopicQueueTable``)."""
        for (name, q), want in sorted(self.__dict__.get("lmq_ends", {}).items()):
            mq = self.queues.get((name.encode("utf-8", "surrogateescape"), q))
            if mq is None or not is_lmq(name) or mq.end == want:
                continue
            f, o = mq.file_of(max(mq.end - 1, mq.base))
            self._add(
                "lmq.queue-end",
                f,
                o,
                f"{name}/{q} ends at {mq.end}, but the log assigns it offsets up to "
                f"{want - 1}: after a restart the broker's counter would restart at {mq.end}",
                topic=name,
                queue_id=q,
            )


_CONSEQUENCE = {
    "count": "the broker writes none of its multi-dispatch units",
    "offset": "the broker writes the units before it, then its dispatch throws and stalls at this message",
    "range": "no consume-queue file can hold that unit; rmqstore writes none",
    "name": "a 4.9 broker joins the name into a path, 5.x skips names with '/'; rmqstore writes no such queue",
}


def _unit_differences(off: int, usize: int, utags: int, phy: int, size: int, tags: int) -> list[str]:
    """How a multi-dispatch unit differs from its record (``ConsumeQueue#multiDispatchLmqQueue``
    writes the record's offset, size and tagsCode)."""
    what = []
    if off != phy:
        what.append(f"points at {off}")
    if usize != size:
        what.append(f"size {usize} but the message has {size} bytes")
    if utags != tags:
        what.append(f"tagsCode {utags} but the message's is {tags}")
    return what
