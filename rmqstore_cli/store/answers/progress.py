"""Consumer progress: every committed offset the broker would load, against its queue's
bounds (``mqadmin consumerProgress``, offline), for ``consumer-progress`` and
``Store.consumer_progress``.

The offsets come from where the broker loads them (``ConsumerOffsetManager``,
``LmqConsumerOffsetManager``, the delay service's ``delayOffset.json`` and, on 5.x, the
RocksDB managers); ``store/layout/offsets.py`` reads each source and compares one table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmqstore_cli.errors import NotFound
from rmqstore_cli.store.layout import offsets


def load_sources(config_dir: Path) -> list[offsets.OffsetTable]:
    """Every offset table the broker would load, in the order the rows are listed: RocksDB's
    (``config/consumerOffsets/``, ``config/rdb/``) when present, else ``consumerOffset.json``
    (optional beside RocksDB: the broker loads RocksDB first), then ``lmqConsumerOffset.json``
    and ``delayOffset.json``. Each carries its own warnings."""
    from rmqstore_cli.store.layout.rocksdb_config import consumer_offsets

    rocks = consumer_offsets(config_dir)
    return [
        offsets.load_consumer_offsets(config_dir, optional=bool(rocks)),
        *rocks,
        offsets.load_consumer_offsets(
            config_dir, offsets.LMQ_CONSUMER_OFFSET_FILE, offsets.decode_lmq_offset_table, optional=True
        ),
        offsets.load_consumer_offsets(config_dir, offsets.DELAY_OFFSET_FILE, offsets.decode_delay_table, optional=True),
    ]


def require_offsets(config_dir: Path, sources: list[offsets.OffsetTable]) -> None:
    """A store whose broker committed no offset (or whose offset files are absent) is a
    negative answer."""
    if not any(loaded.table for loaded in sources):
        raise NotFound(
            "no consumer offsets",
            path=config_dir / offsets.CONSUMER_OFFSET_FILE,
            hint="the broker has no committed offset (or the files are absent)",
        )


def source_name(path: Path | None) -> str | None:
    """Where a row's offset came from: the file's name, or a RocksDB config's directory with
    a slash (``consumerOffsets/``, ``rdb/``)."""
    if path is None:
        return None
    return path.name + "/" if path.is_dir() else path.name


def progress_rows(
    ms: Any, sources: list[offsets.OffsetTable], group: str | None = None, topic: str | None = None
) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
    """(row, None) per group, topic and queue of every source (filtered), the row under the
    JSON names with its ``file`` (and ``delay_level`` for ``delayOffset.json``'s,
    ``ScheduleMessageService#queueId2DelayLevel``); (None, key) for a key that is not
    ``topic@group`` (the broker skips it)."""
    for loaded in sources:
        source = source_name(loaded.path)
        delay = source is not None and source.startswith(offsets.DELAY_OFFSET_FILE)
        for row, bad_key in offsets.consumer_progress(ms, loaded.table, group, topic):
            if row is None:
                yield None, bad_key
                continue
            d = row.to_dict()
            d["file"] = source
            if delay:
                d["delay_level"] = row.queue_id + 1
            yield d, None


def group_totals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per consumer group (in the rows' order): its topics and queues, and its total lag, as
    ``ConsumeStats#computeTotalDiff`` sums the queues' lags once the broker has corrected
    an offset beyond its queue's max to the max (at the next pull: that queue counts 0, not a
    negative lag); a queue the store no longer has (``no-queue``: no lag) is counted apart
    in ``no_queue``, not in ``lag``."""
    out: dict[str, dict[str, Any]] = {}
    topics: dict[str, set[str]] = {}
    for r in rows:
        g = out.setdefault(r["group"], {"group": r["group"], "topics": 0, "queues": 0, "lag": 0, "no_queue": 0})
        topics.setdefault(r["group"], set()).add(r["topic"])
        g["queues"] += 1
        if r["lag"] is None:
            g["no_queue"] += 1
        else:
            g["lag"] += max(r["lag"], 0)
    for name, g in out.items():
        g["topics"] = len(topics[name])
    return list(out.values())
