"""``verify --sample N`` / ``--max-bytes N``: a quick look at a terabyte store. Only the records
the narrowed walk keeps (store/answers/sampling.py) are checked, each on its own: that it frames and
(with ``crc``) its body CRC holds, as the walk reads it (a record that does not ends its file's
part: ``sample.stop``), and that its consume-queue unit points back at it (``sample.cq-unit``,
``ConsumeQueue#putMessagePositionInfo``: offset and size at its queue offset). Whole-store
checks (queue ends, the index, recovery, config files, the epoch file) are not run: they need
every record."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from rmqstore_cli.formats.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE

from rmqstore_cli.store.checks.findings import CHECKS, ERROR, INFO, check_table

CHECKS.update(
    check_table(
        """
sample.stop      error    a sampled walk found an unreadable record: the rest of that file's part was not read
sample.cq-unit   error    a sampled record whose consume-queue unit does not point back at it
sample.no-queue  info     sampled records of a queue with no consume queue on disk (not checked)
"""
    )
)


def quick_verify(ms: Any, narrowing: Any, crc: bool, cap: int | None) -> dict:
    """Check the records ``narrowing`` keeps; the result as verify's local engine shapes it
    (``findings``, ``summary``, ``ok``)."""
    from rmqstore_cli.store.answers.log_range import Range, walk
    from rmqstore_cli.store.answers.sampling import narrowed
    from rmqstore_cli.store.commitlog import Blank
    from rmqstore_cli.store.records.filters import MessageFilter

    cl = ms.commitlog
    stops: list = []

    def walk_one(r: Range):
        yield from walk(cl, r, MessageFilter(), None, crc, False, True)
        stops.extend(cl.stops)

    keyed: dict[tuple[str, int], list[np.ndarray]] = defaultdict(list)
    n = size = 0
    for rec, take in narrowed(cl, Range(None, None), walk_one, narrowing, None):
        if isinstance(rec, Blank):
            continue
        if take is None:
            cols = [(rec.topic, rec.queue_id, rec.queue_offset, rec.physical_offset, rec.total_size, rec.sys_flag)]
            size += rec.total_size
        else:
            names, tid = rec.topics
            rb = rec.rb
            qo, offs, tot, sf = rb.queue_offset[take], rec.offsets[take], rb.total[take], rb.sys_flag[take]
            cols = zip([names[t].decode("utf-8", "replace") for t in tid[take]], rb.queue_id[take].tolist(),
                       qo.tolist(), offs.tolist(), tot.tolist(), sf.tolist(), strict=True)  # fmt: skip
            size += int(tot.sum())
        for t, q, qo1, off, tot1, sf1 in cols:
            n += 1
            if sf1 & TRANSACTION_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
                continue  # never dispatched to a queue (CommitLog#isTransactionMessage...)
            keyed[(t, q)].append(np.array([qo1, off, tot1], np.int64))
    findings = [_stop(s) for s in stops if not s.clean]
    findings += _units(ms, keyed)
    return _result(ms, findings, narrowing, n, size, cap)


def _stop(s: Any) -> dict:
    return {
        "check": "sample.stop",
        "severity": ERROR,
        "file": f"commitlog/{s.file}",
        "offset": s.offset,
        "detail": f"{s.reason}: the rest of this file's sampled part was not read",
    }


def _units(ms: Any, keyed: dict) -> list[dict]:
    out = []
    for (t, q), rows in sorted(keyed.items()):
        a = np.stack(rows)
        cq = ms.consume_queue(t, q)
        try:
            if not cq.file_names():  # a RocksDB queue names its database
                out.append(_no_queue(t, q, len(a)))
                continue
            found, off, size, _ = cq.units_at(a[:, 0])
        finally:
            cq.close()
        bad = ~found | (off != a[:, 1]) | (size != a[:, 2])
        for i in np.flatnonzero(bad).tolist():
            qo, phy, tot = a[i].tolist()
            what = "no unit" if not found[i] else f"the unit points at {int(off[i])} ({int(size[i])} bytes)"
            out.append(
                {
                    "check": "sample.cq-unit",
                    "severity": ERROR,
                    "file": f"consumequeue/{t}/{q}",
                    "offset": qo,
                    "detail": f"record at {phy} ({tot} bytes), queue offset {qo}: {what}",
                    "physical_offset": phy,
                }
            )
    return out


def _no_queue(t: str, q: int, k: int) -> dict:
    return {
        "check": "sample.no-queue",
        "severity": INFO,
        "file": f"consumequeue/{t}/{q}",
        "offset": None,
        "detail": f"{k} sampled record(s) of {t}/{q}, which has no consume-queue file: not checked",
    }


def _result(ms: Any, findings: list[dict], narrowing: Any, n: int, size: int, cap: int | None) -> dict:
    counts: dict[str, int] = defaultdict(int)
    sev: dict[str, int] = defaultdict(int)
    shown, per = [], defaultdict(int)
    for f in findings:
        counts[f["check"]] += 1
        sev[f["severity"]] += 1
        per[f["check"]] += 1
        if cap is None or per[f["check"]] <= cap:
            shown.append(f)
    summary = {
        "store": str(ms.config.root),
        "method": "sampled",
        "messages": n,
        "bytes": size,
        "estimated_messages": narrowing.estimate(n),
        "estimated_bytes": narrowing.estimate(size),
        "sampling": narrowing.as_dict(),
        "errors": sev.get(ERROR, 0),
        "warnings": sev.get("warning", 0),
        "infos": sev.get(INFO, 0),
        "findings": dict(sorted(counts.items())),
        "notes": [narrowing.describe(), "whole-store checks (queue ends, index, recovery, config) not run"],
    }
    return {"store": str(ms.config.root), "findings": shown, "summary": summary, "ok": not sev.get(ERROR)}
