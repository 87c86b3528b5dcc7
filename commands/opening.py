"""Opening the store a command reads: its config with the size options, the read-only
engine, and the stderr lines about what was inferred, skipped or let through; the
``NotFound`` for a topic the store does not have."""

from __future__ import annotations

from pathlib import Path

from rmqstore_cli.commands.grammar import option_of
from rmqstore_cli.commands.lines import warn
from rmqstore_cli.commands.which_store import conf_path, pick_store, tell_store

from rmqstore_cli.errors import RmqstoreError


def load_config(
    store: Path | None,
    broker_conf: Path | None,
    commitlog_file_size: int | None = None,
    cq_file_size: int | None = None,
    index_slots: int | None = None,
    index_max: int | None = None,
    quiet: bool = False,
):
    """The store's config: the store :func:`pick_store` finds, read with :func:`conf_path`'s
    broker.conf and the size options; stderr says where the store came from."""
    from rmqstore_cli.store.layout.config import StoreConfig

    root, origin = pick_store(store, broker_conf)
    conf = conf_path(broker_conf)
    cfg = StoreConfig.load(
        root,
        conf,
        mapped_file_size_commit_log=commitlog_file_size,
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )
    tell_store(cfg, origin, conf, quiet)
    return cfg


def open_store(
    store: Path | None, broker_conf: Path | None, tz: str | None = None, allow_odd_size: bool = False, **sizes
):
    """Open a store read-only with its sizes checked; notes about inference go to stderr."""
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.times import parse_tz

    cfg = load_config(store, broker_conf, **sizes)
    cfg.allow_odd_size = allow_odd_size
    ms = MessageStore.open(cfg, parse_tz(tz), defer_index=True)  # dump-* read no index: a torn one is no matter
    warn_odd_files(cfg)
    return ms


def warn_store(st) -> None:
    """One stderr line per optional store file a command skipped (``MessageStore.warnings``)."""
    for w in st.warnings:
        warn(w.describe(option_of) if isinstance(w, RmqstoreError) else str(w))


def warn_odd_files(cfg, limit: int = 10) -> None:
    """One stderr line per file that --allow-odd-size let through (the first ``limit``)."""
    odd = cfg.odd_files
    for path, size, expected in odd[:limit]:
        warn(f"{path} has {size} bytes, expected {expected}; read up to its real length (--allow-odd-size)")
    if len(odd) > limit:
        warn(f"{len(odd) - limit} more files of an odd size are read the same way")


def no_such_topic(st, topic: str):
    """A ``NotFound`` saying the store has no topic ``topic`` (not in consumequeue/, topics.json
    or any commit-log record), with the closest names; None when the store has it."""
    import difflib

    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import safe_text

    known = st.topics()
    if topic in known:
        return None
    known = sorted(set(known) | set(st.topics_from_commitlog()))
    if topic in known:
        return None
    close = difflib.get_close_matches(topic, known, n=3, cutoff=0.6)
    hint = (
        "did you mean " + " or ".join(map(safe_text, close)) + "?"
        if close
        else "its topics: " + ", ".join(map(safe_text, known[:10])) + (", …" if len(known) > 10 else "")
        if known
        else "the store has no topic"
    )
    return NotFound(f"no topic '{safe_text(topic)}' in the store", hint=hint)
