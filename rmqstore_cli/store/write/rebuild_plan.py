"""``rebuild-index``'s work around ``store/write/rebuild.py``, for the command and
``Store.rebuild_index``: each store's options and size sources checked before any work, the
rebuild itself (to an output directory, or in place), and the summary of one store.
Neutral words: the callers name their own options in hints."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import UsageError
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.write.rebuild import (
    Build,
    DispatchReport,
    Progress,
    RebuildOptions,
    refuse_unsourced_sizes,
    size_sources,
)

#: The sets ``only`` may pick: consume queues or index files.
ONLY = ("cq", "index")


def options(
    cfg: StoreConfig, only: str | None, topics: list[str] | None, zone: _dt.tzinfo | None, dry_run: bool
) -> RebuildOptions:
    """What to build: consume queues (only ``topics``' when given) and index files (not with
    ``topics``, and not where ``messageIndexEnable=false``: the broker builds none)."""
    return RebuildOptions(
        build_cq=only != "index",
        build_index=(only != "cq" and not topics) and cfg.message_index_enable,
        topics=list(topics) if topics else None,
        tz=zone,
        dry_run=dry_run,
    )


def check_sizes(
    cfg: StoreConfig, opts: RebuildOptions, given: dict[str, int | None], broker_conf: str | os.PathLike[str] | None
) -> dict[str, dict[str, Any]]:
    """The sizes the rebuild writes with and where each comes from (``given``: attribute ->
    the size asked for, or None); a set whose sizes nothing tells is refused."""
    cfg.check_writable_sizes()
    sources = size_sources(cfg, opts, given, broker_conf)
    refuse_unsourced_sizes(sources, cfg)
    return sources


def batch_topics_picked(cfg: StoreConfig, opts: RebuildOptions) -> list[str]:
    """The BatchCQ topics (``batchconsumequeue/``) among the topics picked: they are rebuilt
    only with all the queues (the dispatch has no ``BatchDispatch`` for some topics alone and
    would write their units to ``consumequeue/``)."""
    from rmqstore_cli.store.queues.batch_queue import batch_topics

    if not opts.build_cq or opts.topics is None:
        return []
    return sorted(batch_topics(cfg.root) & set(opts.topics))


def rebuild(
    cfg: StoreConfig,
    out: Path | None,
    opts: RebuildOptions,
    no_backup: bool = False,
    copy_commitlog: bool = False,
    progress: Progress | None = None,
    *,
    build: Build,
) -> tuple[DispatchReport | None, dict[str, Any]]:
    """One store rebuilt by the engine ``build`` (``pipeline/local.rebuild_build`` or Spark's)
    to ``out`` (the store only read) or, ``out`` None, in place (the broker's lock held for
    the swap; a live broker refused): (the dispatch report, the plan)."""
    from rmqstore_cli.store.write.rebuild_output import rebuild_in_place, rebuild_to

    if out is None:
        return rebuild_in_place(cfg, opts, no_backup, progress, build=build)
    return rebuild_to(cfg, out, opts, copy_commitlog, progress, build=build)


def summary(
    store: Path | str, rep: DispatchReport | None, plan: dict[str, Any], opts: RebuildOptions
) -> dict[str, Any]:
    """One store's summary: the plan (what was or would be written, the sizes' sources), then
    the dispatch report (None: a dry run that dispatched nothing). Fields of what was not
    built are null."""
    s: dict[str, Any] = {"store": str(store), "dry_run": opts.dry_run}
    s.update(plan)
    if rep is None:
        return s
    s.update(
        {
            "messages": rep.messages,
            "commitlog_files": rep.files,
            "commitlog_bytes": rep.bytes,
            **_built(rep, opts),
            "seconds": round(rep.seconds, 3),
            "messages_per_second": round(rep.messages / rep.seconds) if rep.seconds > 0 else None,
            "recovery": rep.recovery,
            "recovery_first_file": rep.recovery_first_file,
            "dispatch_end": _dispatch_end(rep),
            "skipped": [{"offset": k.offset, "size": k.size, "file": k.file, "reason": k.reason} for k in rep.skipped],
            "refused_topics": [{"topic": t, "reason": why} for t, why in sorted(rep.refused_topics.items())],
            "index_names_fallback": [{"file": n, "store_timestamp": t} for n, t in rep.fallback_index_names],
        }
    )
    return s


def _built(rep: DispatchReport, opts: RebuildOptions) -> dict[str, Any]:
    """The counts of what was built: null for the kind (queues, index) not built."""
    cq, index = opts.build_cq, opts.build_index
    return {
        "consume_queues": rep.queues if cq else None,
        "consume_queue_units": rep.units if cq else None,
        "consume_queue_files": rep.cq_files if cq else None,
        "index_files": rep.index_files if index else None,
        "index_keys": rep.index_keys if index else None,
    }


def _dispatch_end(rep: DispatchReport) -> dict[str, Any] | None:
    """Where dispatch stopped and why (None: it did not run)."""
    if not rep.stop:
        return None
    return {"offset": rep.stop.offset, "file": rep.stop.file, "reason": rep.stop.reason, "clean": rep.stop.clean}


def refuse_index_disabled(cfg: StoreConfig, only: str | None) -> None:
    """Only the index asked for where the broker builds none."""
    if not cfg.message_index_enable and only == "index":
        raise UsageError("messageIndexEnable=false in the broker config: the broker builds no index")
