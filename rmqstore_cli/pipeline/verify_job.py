"""``verify`` over one store or several, as the command and ``Store.verify`` run it: one
engine, the plan, tasks and join of :mod:`~rmqstore_cli.pipeline.verify_tasks`, on this
machine's processes (:class:`~rmqstore_cli.pipeline.verify_tasks.Forked`; one job: the tasks
one after another in this process) or on Spark executors; then the broker-start verdict
(``store/checks/startup.py``) predicted from the findings. One result dict per store: ``findings``,
``summary``, ``verdict``, ``ok``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmqstore_cli.store.checks.findings import VerifyOptions
from rmqstore_cli.store.checks.startup import STARTUP_CHECKS, predict_start
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.verify.verifier import Verifier, open_for_verify


def load(spec: Any) -> StoreConfig:
    """The store's config, checked to be a store (a clean error before any work)."""
    return open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))


def _commitlog_stats(spec: Any) -> list:
    """``stat`` of each commit-log file."""
    cfg = load(spec)
    return [p.stat() for d in cfg.commitlog_dirs if d.is_dir() for p in d.iterdir() if p.is_file()]


def commitlog_size(spec: Any) -> int:
    """The commit-log files' bytes: a progress bar's total."""
    return sum(st.st_size for st in _commitlog_stats(spec))


def verify_one(spec: Any, opts: VerifyOptions, advance: Callable[[int], None] | None = None, jobs: int = 1) -> dict:
    """One store on ``jobs`` processes of this machine (0: every core it may use; 1: this
    process): the findings in the order one pass over the store meets them, all at the end
    (the join orders them). ``advance`` gets each commit-log file's bytes as its scan ends."""
    return verify_many([spec], opts, None, False, jobs, advance)[0]


def verify_many(
    specs: list,
    opts: VerifyOptions,
    spark: tuple | None,
    fleet: bool,
    jobs: int = 1,
    advance: Callable[[int], None] | None = None,
) -> list[dict]:
    """Several stores, on Spark (``spark`` is (master, conf, verbose)) or ``jobs`` processes:
    one task per commit-log file, then per queue and index file; each result with its
    ``broker_start`` verdict. With one store (not a ``fleet``), no ``store`` in the findings
    and the summary's ``store`` the path as given."""
    from rmqstore_cli.pipeline.verify_tasks import Forked, verify_stores

    for s in specs:  # a path that is not a store is a clean error before any work
        load(s)
    args = (opts.crc, opts.deep, opts.max_findings, opts.broker_version)
    if spark is not None:
        results = _spark_engine().run_job(_spark_engine().verify, *spark, specs, *args)
    else:
        engine = Forked(jobs or default_jobs_for(specs), advance)
        results = verify_stores(specs, *args[:3], engine, opts.broker_version)
    return [_conclude(s, r, opts, fleet) for s, r in zip(specs, results, strict=True)]


def default_jobs_for(specs: list) -> int:
    """The default ``--jobs``: one process when the stores' commit logs hold fewer than
    ``workers.ONE_PROCESS_BELOW`` bytes on disk, else every core this process may use
    (:func:`~rmqstore_cli.pipeline.workers.jobs_for`)."""
    from rmqstore_cli.pipeline.workers import jobs_for, stored_bytes

    return jobs_for(stored_bytes(st for s in specs for st in _commitlog_stats(s)))


def _sized(spec: Any) -> StoreConfig:
    """The config the tasks ran on: the sizes the files show when none were given
    (:meth:`Verifier.infer_sizes`, as the plan inferred them), so that the start-up prediction
    reads the consume queues' ends with the broker's file size. Only for an engine whose
    result does not bring the plan's config (Spark's): every queue file is ``stat``ed again."""
    cfg = load(spec)
    Verifier(cfg).infer_sizes()
    return cfg


def _config_of(spec: Any, r: dict) -> StoreConfig:
    """The plan's sized config, which the result brings (its files are not listed again), or
    :func:`_sized`: also when the plan named the store otherwise (Spark's plans take absolute
    paths), since the verdict's repair command names the store as the user did."""
    cfg = r.pop("config", None)
    return cfg if cfg is not None and Path(cfg.root) == Path(spec.path) else _sized(spec)


def _spark_engine():
    try:
        from rmqstore_cli.pipeline import spark
    except ImportError:
        from rmqstore_cli.errors import UsageError

        raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
    return spark


def _conclude(spec: Any, r: dict, opts: VerifyOptions, fleet: bool) -> dict:
    """One store's result with the broker-start verdict and the findings it adds ("would not
    start" is an error: exit 1); one store's findings without ``store``."""
    if not fleet:
        r["findings"] = [{k: x for k, x in f.items() if k != "store"} for f in r["findings"]]
        r["summary"]["store"] = spec.path
    known = r.pop("queue_ends", None)  # the ends the plan read: the queues are not opened again
    relevant = [f for f in r["findings"] if f["check"] in STARTUP_CHECKS]
    r["verdict"], no_start = predict_start(_config_of(spec, r), opts.broker_version, relevant, r["summary"], known)
    tag = {"store": r["store"]} if fleet else {}
    r["findings"] += [dict(f.as_dict(), **tag) for f in no_start]
    r["ok"] = r["ok"] and not no_start
    return r
