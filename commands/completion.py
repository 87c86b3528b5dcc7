"""Shell completion of names from the store (completions/): fast, and never fails."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rmqstore_cli.commands.which_store import pick_store

#: Topic names as the broker validates them (TopicValidator#isTopicOrGroupIllegal: %|a-zA-Z0-9_-),
#: plus '.', which older clients sent; anything else under consumequeue/ is not offered, so no
#: store-controlled text reaches a shell's eval.
_TOPIC_NAME = r"[%|.a-zA-Z0-9_-]{1,255}"


def _completion_store(ctx) -> Path:
    """The store completion reads: --store (the first one), else as the command would pick it."""
    p = ctx.params.get("store") if ctx is not None else None
    if isinstance(p, (list, tuple)):  # verify, rebuild-index, export: --store is repeatable
        p = p[0] if p else None
    if p:
        return Path(os.path.expanduser(str(p)))
    conf = ctx.params.get("broker_conf") if ctx is not None else None
    return pick_store(None, Path(conf) if conf else None)[0]


def complete_topic(ctx: typer.Context, incomplete: str) -> list[str]:
    """Topics of the store given by --store (consumequeue/ and config/topics.json)."""
    import re

    try:
        root = _completion_store(ctx)
        names = _queue_dir_topics(root) | _configured_topics(root)
        names.update(t for t, _ in _rocksdb_queues(root))
        ok = re.compile(_TOPIC_NAME)
        return sorted(n for n in names if n.startswith(incomplete) and ok.fullmatch(n))
    except Exception:  # completion must never fail
        return []


def _queue_dir_topics(root: Path) -> set[str]:
    """The topic directories under consumequeue/; none where it cannot be listed."""
    try:
        return {e.name for e in os.scandir(root / "consumequeue") if e.is_dir()}
    except OSError:
        return set()


def _configured_topics(root: Path) -> set[str]:
    """The topics of config/topics.json, read as the commands read it: a regular file, under the cap,
    nesting bounded; none where it cannot be read."""
    from rmqstore_cli.errors import RmqstoreError
    from rmqstore_cli.store.files.safefs import TOPICS_JSON_LIMIT, load_json

    try:
        table = load_json(root / "config" / "topics.json", limit=TOPICS_JSON_LIMIT).get("topicConfigTable") or {}
        return {k for k in table if isinstance(k, str)}
    except (RmqstoreError, AttributeError):
        return set()


def _rocksdb_queues(root: Path) -> list[tuple[str, int]]:
    """(topic, queueId) of a RocksDB consume queue in ``root`` (store/queues/rocksdb_cq.py, read-only);
    [] for file queues, or when it cannot be read (no binding, damaged)."""
    if not (root / "consumequeue" / "CURRENT").is_file():
        return []
    try:
        from rmqstore_cli.store.queues.rocksdb_cq import RocksDBConsumeQueues

        db = RocksDBConsumeQueues(root / "consumequeue")
        try:
            return db.queue_ids()
        finally:
            db.close()
    except Exception:  # completion must never fail
        return []


def complete_queue_id(ctx: typer.Context, incomplete: str) -> list[str]:
    """Queue ids of the topic given before it (consumequeue/TOPIC/*)."""
    try:
        topic = _given_topic(ctx)
        if topic is None:
            return []
        ids = _queue_ids(_completion_store(ctx), topic)
        return [str(i) for i in sorted(map(int, ids)) if str(i).startswith(incomplete)]
    except Exception:  # completion must never fail
        return []


def _given_topic(ctx: typer.Context | None) -> str | None:
    """The topic typed before the queue id (the first of a repeated --topic); None unless a valid name."""
    import re

    topic = ctx.params.get("topic") if ctx is not None else None
    if isinstance(topic, (list, tuple)):
        topic = topic[0] if topic else None
    if not topic or not re.fullmatch(_TOPIC_NAME, str(topic)):
        return None
    return str(topic)


def _queue_ids(root: Path, topic: str) -> list[str]:
    """A topic's queue ids: the RocksDB consume queue's when the store has one, else its directories' names."""
    rocks = _rocksdb_queues(root)
    if rocks:
        return [str(q) for t, q in rocks if t == topic]
    return [e.name for e in os.scandir(root / "consumequeue" / topic) if e.name.isdigit() and e.is_dir()]
