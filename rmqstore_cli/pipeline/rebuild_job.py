"""``rebuild-index`` over one store or several, on this machine or on Spark: the options'
checks, one output directory per store, every store planned (sizes and where they come
from) before any work, then each rebuilt (``store/write/rebuild_plan.py``) by the one
engine, the plan, tasks and join of ``rebuild_tasks.py`` (``local.rebuild_build``: this
process or forked workers; ``spark.rebuild_build``: Spark's executors), or an interrupted
``--in-place`` run finished (``store/rebuild_journal.recover_journal``). Nothing is said
here: the command is told through callbacks and prints the results."""

from __future__ import annotations

import datetime as _dt
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import UsageError, setting
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write import rebuild_plan


@dataclass
class StorePlan:
    """One store's rebuild: where it goes (None: in place), its config, options and the
    sources of its file sizes."""

    store: Path
    output: Path | None
    config: StoreConfig
    opts: Any
    sizes: dict[str, Any]


def check_options(
    stores: list[Path],
    output: Path | None,
    in_place: bool,
    only: str | None,
    topic: list[str] | None,
    copy_commitlog: bool,
    no_backup: bool,
) -> None:
    """Refuse option combinations that do not go together, before anything is read; with
    --in-place, a live broker (exit 4) before anything else is said."""
    from rmqstore_cli.store.files.lock import refuse_if_live

    _check_destination(output, in_place, copy_commitlog, no_backup)
    _check_topics(only, topic)
    for st in stores if in_place else ():
        refuse_if_live(st)  # before anything else is read or said


def _check_destination(output: Path | None, in_place: bool, copy_commitlog: bool, no_backup: bool) -> None:
    """Exactly one of an output directory (local, not a URI) and in place, and the options
    that go only with one of them."""
    from rmqstore_cli.pipeline.stores import hadoop_uri

    if (output is None) == (not in_place):
        raise UsageError(f"pass exactly one of {setting('output')} DIR and {setting('in_place')}")
    if output is not None and hadoop_uri(str(output)):  # a Path has folded its // already
        raise UsageError(
            f"{setting('output')} {output} is a URI; rebuild-index writes a store's files to a directory",
            hint="pass a local (or, on a cluster, mounted) directory",
        )
    if no_backup and not in_place:
        raise UsageError(f"{setting('no_backup')} only applies to {setting('in_place')}")
    if copy_commitlog and in_place:
        raise UsageError(f"{setting('copy_commitlog')} only applies to {setting('output')}")


def _check_topics(only: str | None, topic: list[str] | None) -> None:
    """Topics select consume queues (not with the index alone) and must be safe directory names."""
    from rmqstore_cli.store.queues.consume_queue import unsafe_topic

    if topic and only == "index":
        raise UsageError(
            f"{setting('topic')} selects consume queues; it cannot be combined with {setting('only')} index"
        )
    for t in topic or ():
        if unsafe_topic(t):
            raise UsageError(f"{setting('topic')} {t!r} cannot be a consume-queue directory: {unsafe_topic(t)}")


def outputs(stores: list[Path], output: Path | None) -> list[Path | None]:
    """One output directory per store: ``output`` itself for one store; for several, the
    store's path relative to the stores' common parent, below ``output``; None in place."""
    if output is None:
        return [None] * len(stores)
    if len(stores) == 1:
        return [output]
    absolute = [Path(os.path.abspath(p)) for p in stores]
    common = Path(os.path.commonpath(absolute))
    rels = [p.relative_to(common) for p in absolute]
    if any(r == Path(".") for r in rels):
        raise UsageError("one store lies inside another", hint="rebuild them one at a time")
    return [output / r for r in rels]


def plan(
    stores: list[Path],
    output: Path | None,
    outs: list[Path | None],
    cfgs: list[StoreConfig],
    only: str | None,
    topic: list[str] | None,
    zone: _dt.tzinfo | None,
    dry_run: bool,
    sizes: dict[str, int | None],
    broker_conf: Path | None,
    tell: Callable[[str], None],
) -> list[StorePlan]:
    """Every store opened and checked (outputs, sizes and where they come from) before any
    work; ``tell`` hears each store's notes on what it inferred. ``sizes``: the size options
    given (attribute -> value or None); ``outs``: :func:`outputs`."""
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.write.rebuild_output import check_output

    several = len(stores) > 1
    if output is not None:  # before anything is read or said: the stores are only read
        read = [d for c in cfgs for d in (c.root, *c.commitlog_dirs, c.consumequeue_dir, c.index_dir)]
        for out in dict.fromkeys([output, *outs]):
            check_output(out, read)
    plans = []
    for st, out, cfg in zip(stores, outs, cfgs, strict=True):
        ms = MessageStore.open(cfg, zone, rocksdb=out is not None)  # a RocksDB CQ: only beside it
        for note in ms.notes:
            tell(f"{st}: {note}" if several else note)
        _refuse_no_index(cfg, only, st if several else None)
        opts = rebuild_plan.options(cfg, only, topic, zone, dry_run)
        sources = rebuild_plan.check_sizes(cfg, opts, sizes, broker_conf)
        plans.append(StorePlan(st, out, cfg, opts, sources))
    refuse_batch_queues(plans)
    return plans


def _refuse_no_index(cfg: StoreConfig, only: str | None, st: Path | None) -> None:
    """An index-only rebuild of a store whose broker builds no index (``messageIndexEnable``);
    ``st``: the store named in the error when there are several."""
    if not cfg.message_index_enable and only == "index":
        raise UsageError(
            "messageIndexEnable=false in the broker config: the broker builds no index"
            + (f" ({st})" if st is not None else "")
        )


def refuse_batch_queues(plans: list[StorePlan]) -> None:
    """BatchCQ topics are rebuilt only with all the queues (on either engine): with --topic
    the dispatcher has no ``BatchDispatch`` and would put a BatchCQ topic's units in
    consumequeue/. Refused rather than written wrong."""
    for p in plans:
        picked = rebuild_plan.batch_topics_picked(p.config, p.opts)
        if picked:
            raise UsageError(
                f"{', '.join(picked)}: BatchCQ topics (batchconsumequeue/) are rebuilt only with all the queues",
                hint=f"leave out {setting('topic')} for them",
            )


def rebuild(
    plans: list[StorePlan],
    in_place: bool,
    no_backup: bool,
    copy_commitlog: bool,
    progress: Callable[[bool], Any],
    spark: tuple[str | None, list[str] | None, bool] | None = None,
    jobs: int = 1,
) -> list[tuple[StorePlan, Any, dict[str, Any]]]:
    """Each store rebuilt (in place or to its output) by the one engine, the plan, tasks and
    join of ``rebuild_tasks.py``: on ``jobs`` processes of this machine (0: every core it may
    use; 1: this process), or with ``spark`` (master, conf, verbose) on Spark's executors, one
    session for them all. Each result: (plan, dispatch report, what was written).
    ``progress(enabled)`` gives the context whose ``dispatch`` hears the local engine's
    progress, a commit-log file at a time."""
    from rmqstore_cli.pipeline.local import rebuild_build

    def job(session=None):
        build = functools.partial(rebuild_build, jobs=jobs)
        if session is not None:
            from rmqstore_cli.pipeline import spark as sp

            build = functools.partial(sp.rebuild_build, session)
        done = []
        for p in plans:
            with progress(session is None) as bar:
                out = None if in_place else p.output
                rep, written = rebuild_plan.rebuild(
                    p.config, out, p.opts, no_backup, copy_commitlog, bar.dispatch, build=build
                )
            done.append((p, rep, dict(written, sizes=p.sizes)))
        return done

    if spark is None:
        return job()
    try:
        from rmqstore_cli.pipeline import spark as sp
    except ImportError:
        raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
    return sp.run_job(job, *spark)


def recover(stores: list[Path]) -> list[dict[str, Any]]:
    """--recover: each store's interrupted --in-place run finished (or rolled back), a live
    broker refused first; one outcome per store."""
    from rmqstore_cli.store.files.lock import refuse_if_live
    from rmqstore_cli.store.write.rebuild_journal import recover_journal

    for st in stores:
        refuse_if_live(st)
    outcomes = []
    for st in stores:
        j = recover_journal(st)
        outcomes.append(
            {
                "store": str(st),
                "recovered": j["id"] if j else None,
                "outcome": j["outcome"] if j else "nothing to recover",
            }
        )
    return outcomes
