"""``verify`` over one store or several, as the command runs it: the :class:`Verifier`'s
findings and summary, and the broker-start verdict (``store/startup.py``) predicted from
them. One result dict per store: ``findings``, ``summary``, ``verdict``, ``ok``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rmqstore_cli.store.config import StoreConfig
from rmqstore_cli.store.startup import STARTUP_CHECKS, predict_start
from rmqstore_cli.store.verify.findings import VerifyOptions
from rmqstore_cli.store.verify.verifier import Verifier, open_for_verify


def load(spec: Any) -> StoreConfig:
    """The store's config, checked to be a store (a clean error before any work)."""
    return open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))


def commitlog_size(spec: Any) -> int:
    """The commit-log files' bytes: a progress bar's total."""
    cfg = load(spec)
    return sum(p.stat().st_size for d in cfg.commitlog_dirs if d.is_dir() for p in d.iterdir() if p.is_file())


def verify_one(
    spec: Any,
    opts: VerifyOptions,
    advance: Callable[[int], None] | None = None,
    stream: Callable[[dict], None] | None = None,
) -> dict:
    """One store on the local engine. ``stream``: each finding goes there as the scan finds
    it (and is not kept, but for those the start-up prediction reads); else all are kept."""
    cfg = load(spec)
    findings: list[dict] = []
    relevant: list[dict] = []  # what broker_start reads, kept even when the findings stream out
    v = Verifier(cfg, opts, advance)
    for f in v.run():
        d = f.as_dict()
        if stream is not None:
            stream(d)
        else:
            findings.append(d)
        if d["check"] in STARTUP_CHECKS:
            relevant.append(d)
    summary = v.summary  # built on each read: predict_start adds broker_start to this one
    verdict, no_start = predict_start(cfg, opts.broker_version, relevant, summary, v.known_ends)
    extra = [f.as_dict() for f in no_start]  # "would not start" is an error (exit 1)
    for d in extra if stream is not None else ():
        stream(d)
    return {
        "findings": findings + extra,
        "summary": summary,
        "verdict": verdict,
        "ok": v.ok and not no_start,
    }


def verify_many(specs: list, opts: VerifyOptions, spark: tuple | None, fleet: bool, jobs: int = 1) -> list[dict]:
    """Several stores, Spark (``spark`` is (master, conf, verbose)) or ``jobs`` processes: one
    task per commit-log file, then per queue and index file, the findings the local engine's; the same
    Verifier per store, each result with its ``broker_start`` verdict; with one store (not a
    ``fleet``), shaped as the local engine's (no ``store`` in the findings, the summary's
    ``store`` the path as the local engine prints it)."""
    from rmqstore_cli.pipeline.stores import verify_store

    for s in specs:  # a path that is not a store is a clean error before any work
        load(s)
    args = (opts.crc, opts.deep, opts.max_findings, opts.broker_version)
    if spark is not None:
        try:
            from rmqstore_cli.pipeline import spark as sp
        except ImportError:
            from rmqstore_cli.errors import UsageError

            raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
        results = sp.run_job(sp.verify, *spark, specs, *args)
    elif jobs != 1:  # the plan's tasks on this machine's cores (pipeline/local.py)
        from rmqstore_cli.pipeline.local import default_jobs
        from rmqstore_cli.pipeline.verify_tasks import Forked, verify_stores

        results = verify_stores(specs, *args[:3], Forked(jobs or default_jobs()), opts.broker_version)
    else:
        results = [verify_store(s, *args) for s in specs]
    for s, r in zip(specs, results, strict=True):
        if not fleet:
            r["findings"] = [{k: x for k, x in f.items() if k != "store"} for f in r["findings"]]
            r["summary"]["store"] = s.path
        relevant = [f for f in r["findings"] if f["check"] in STARTUP_CHECKS]
        r["verdict"], no_start = predict_start(load(s), opts.broker_version, relevant, r["summary"])
        extra = [f.as_dict() for f in no_start]
        r["findings"] += extra if not fleet else [dict(f, store=r["store"]) for f in extra]
        r["ok"] = r["ok"] and not no_start
    return results
