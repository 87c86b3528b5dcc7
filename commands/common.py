"""Options and error handling shared by every command (DESIGN.md conventions)."""
from __future__ import annotations

import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from rmqstore_cli.errors import FileSizeError, RmqstoreError

STATE = {"debug": False}

StoreOpt = Annotated[Path, typer.Option(
    "--store", "-s", envvar="RMQSTORE_STORE", show_default="~/store",
    help="Store root directory (storePathRootDir).")]
BrokerConfOpt = Annotated[Optional[Path], typer.Option(
    "--broker-conf", envvar="RMQSTORE_BROKER_CONF",
    help="The broker's broker.conf: sizes, paths and rules are read from it as the broker would.")]
class Fmt(str, Enum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


FormatOpt = Annotated[Fmt, typer.Option("--format", "-f", help="Output: table for people, jsonl or json for scripts.")]
#: The size options are Java ints in the broker's MessageStoreConfig.
JAVA_INT_MAX = (1 << 31) - 1
TzOpt = Annotated[Optional[str], typer.Option(
    "--tz", help="Time zone for shown times and index file names (IANA name, UTC, +08:00); default local.")]
CommitlogSizeOpt = Annotated[Optional[int], typer.Option(
    "--commitlog-file-size", help="mappedFileSizeCommitLog, if not in --broker-conf.", min=4096, max=JAVA_INT_MAX)]
CqSizeOpt = Annotated[Optional[int], typer.Option(
    "--cq-file-size", help="mappedFileSizeConsumeQueue, if not in --broker-conf.", min=20, max=JAVA_INT_MAX)]
IndexSlotsOpt = Annotated[Optional[int], typer.Option(
    "--index-slots", help="maxHashSlotNum, if not in --broker-conf.", min=1, max=JAVA_INT_MAX)]
IndexMaxOpt = Annotated[Optional[int], typer.Option(
    "--index-max", help="maxIndexNum, if not in --broker-conf.", min=2, max=JAVA_INT_MAX)]
AllowOddSizeOpt = Annotated[bool, typer.Option(
    "--allow-odd-size", help="Read the store even if some commit-log or consume-queue files are not the "
    "configured (or inferred) size, as after a torn copy: each such file is read up to its real length, "
    "with a warning naming it. Without it such a store is refused, as the broker refuses to load it.")]
ODD_SIZE_HINT = "or pass --allow-odd-size to read it anyway"

# Several stores and the Spark engine (verify, rebuild-index, export)
StoresOpt = Annotated[list[str], typer.Option(
    "--store", "-s", envvar="RMQSTORE_STORE", show_default="~/store",
    help="Store root directory (storePathRootDir); repeat it, or give a glob, for several stores.")]


class BrokerVersion(str, Enum):
    """The broker versions whose rules differ where the bytes do not tell them apart."""

    v49 = "4.9"
    v5 = "5"


class VerifyBrokerVersion(str, Enum):
    """verify's versions: 5.0-5.3.1 and 5.3.2+ recover a cleanly stopped store differently
    (``CommitLog#recoverNormally@rocketmq-all-5.3.2``); "5" is 5.3.2 and later."""

    v49 = "4.9"
    v531 = "5.3.1"
    v5 = "5"


class Engine(str, Enum):
    local = "local"
    spark = "spark"


EngineOpt = Annotated[Engine, typer.Option(help="local (this process) or spark (PySpark).")]
SparkMasterOpt = Annotated[Optional[str], typer.Option(
    show_default="local[*]",
    help="Spark master: local[*], local[N], spark://…, yarn, k8s://…, or a running Spark Connect server "
         "sc://HOST:PORT (under spark-submit: its --master).")]
SparkConfOpt = Annotated[Optional[list[str]], typer.Option(help="Spark setting KEY=VALUE (repeatable).")]
SparkVerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Let Spark log (quiet by default).")]

DEFAULT_STORE = Path(os.path.expanduser("~")) / "store"


def fail(e: RmqstoreError) -> None:
    """One stderr line and the exit code; a negative answer (exit 1: nothing matched) is an
    answer, not an error, so its line has no ``error:``."""
    from rmqstore_cli.errors import NotFound

    print(f"rmqstore: {e}" if isinstance(e, NotFound) else f"rmqstore: error: {e}", file=sys.stderr)
    raise typer.Exit(e.exit_code)


def command(fn):
    """Turn engine errors into one stderr line and their exit code (``--debug``: traceback)."""

    code = fn.__code__
    odd_ok = "allow_odd_size" in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rmqstore_cli.store.safefs import reset_hole_budget

        reset_hole_budget()
        try:
            return shrink_wins(fn, args, kwargs)
        except RmqstoreError as e:
            if STATE["debug"]:
                raise
            if odd_ok and isinstance(e, FileSizeError):  # a read command: name its override
                e.hint = f"{e.hint}; {ODD_SIZE_HINT}" if e.hint else ODD_SIZE_HINT
            fail(e)
        except BrokenPipeError:
            from rmqstore_cli.render import silence_broken_pipe

            silence_broken_pipe()
            raise typer.Exit(0)
        except KeyboardInterrupt:
            print("rmqstore: interrupted", file=sys.stderr)
            raise typer.Exit(130)

    return wrapper


def shrink_wins(fn, args, kwargs):
    """``fn(*args, **kwargs)``; if a store file shrank while it ran (``store/mapguard.py``:
    the guard turned the SIGBUS into zeros), that is the error, whatever ``fn`` returned or
    raised: its findings, counts or errors followed from the zeros it read."""
    from rmqstore_cli.store import mapguard

    at = mapguard.mark()
    try:
        rv = fn(*args, **kwargs)
    except Exception:
        shrunk = mapguard.since(at)
        if shrunk is None:
            raise
        raise shrunk from None
    shrunk = mapguard.since(at)
    if shrunk is not None:
        raise shrunk
    return rv


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
    hint = ("did you mean " + " or ".join(map(safe_text, close)) + "?" if close else
            "its topics: " + ", ".join(map(safe_text, known[:10])) + (", …" if len(known) > 10 else "") if known
            else "the store has no topic")
    return NotFound(f"no topic '{safe_text(topic)}' in the store", hint=hint)


def load_config(store: Path | None, broker_conf: Path | None, commitlog_file_size: int | None = None,
                cq_file_size: int | None = None, index_slots: int | None = None, index_max: int | None = None):
    from rmqstore_cli.store.config import StoreConfig

    return StoreConfig.load(
        store, broker_conf,
        mapped_file_size_commit_log=commitlog_file_size,
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )


def open_store(store: Path | None, broker_conf: Path | None, tz: str | None = None, allow_odd_size: bool = False,
               **sizes):
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
        print(f"rmqstore: warning: {w}", file=sys.stderr)


def warn_odd_files(cfg, limit: int = 10) -> None:
    """One stderr line per file that --allow-odd-size let through (the first ``limit``)."""
    odd = cfg.odd_files
    for path, size, expected in odd[:limit]:
        print(f"rmqstore: warning: {path} has {size} bytes, expected {expected}; read up to its real length "
              "(--allow-odd-size)", file=sys.stderr)
    if len(odd) > limit:
        print(f"rmqstore: warning: {len(odd) - limit} more files of an odd size are read the same way",
              file=sys.stderr)


# --- shell completion of names from the store (completions/): fast, and never fails -------------

#: Topic names as the broker validates them (TopicValidator#isTopicOrGroupIllegal: %|a-zA-Z0-9_-),
#: plus '.', which older clients sent; anything else under consumequeue/ is not offered, so no
#: store-controlled text reaches a shell's eval.
_TOPIC_NAME = r"[%|.a-zA-Z0-9_-]{1,255}"


def _completion_store(ctx) -> Path:
    p = ctx.params.get("store") if ctx is not None else None
    if isinstance(p, (list, tuple)):  # export: --store is repeatable
        p = p[0] if p else None
    return Path(os.path.expanduser(str(p))) if p else DEFAULT_STORE


def complete_topic(ctx: typer.Context, incomplete: str) -> list[str]:
    """Topics of the store given by --store (consumequeue/ and config/topics.json)."""
    import re

    try:
        root = _completion_store(ctx)
        names = set()
        try:
            names.update(e.name for e in os.scandir(root / "consumequeue") if e.is_dir())
        except OSError:
            pass
        names.update(t for t, _ in _rocksdb_queues(root))
        try:  # read as the commands read it: a regular file, under the cap, nesting bounded
            from rmqstore_cli.errors import RmqstoreError
            from rmqstore_cli.store.safefs import TOPICS_JSON_LIMIT, load_json

            table = load_json(root / "config" / "topics.json", limit=TOPICS_JSON_LIMIT).get("topicConfigTable") or {}
            names.update(k for k in table if isinstance(k, str))
        except (RmqstoreError, AttributeError):
            pass
        ok = re.compile(_TOPIC_NAME)
        return sorted(n for n in names if n.startswith(incomplete) and ok.fullmatch(n))
    except Exception:  # noqa: BLE001 - completion must never fail
        return []


def _rocksdb_queues(root: Path) -> list[tuple[str, int]]:
    """(topic, queueId) of a RocksDB consume queue in ``root`` (store/rocksdb_cq.py, read-only);
    [] for file queues, or when it cannot be read (no binding, damaged)."""
    if not (root / "consumequeue" / "CURRENT").is_file():
        return []
    try:
        from rmqstore_cli.store.rocksdb_cq import RocksDBConsumeQueues

        db = RocksDBConsumeQueues(root / "consumequeue")
        try:
            return db.queue_ids()
        finally:
            db.close()
    except Exception:  # noqa: BLE001 - completion must never fail
        return []


def complete_queue_id(ctx: typer.Context, incomplete: str) -> list[str]:
    """Queue ids of the topic given before it (consumequeue/TOPIC/*)."""
    import re

    try:
        topic = ctx.params.get("topic") if ctx is not None else None
        if isinstance(topic, (list, tuple)):
            topic = topic[0] if topic else None
        if not topic or not re.fullmatch(_TOPIC_NAME, str(topic)):
            return []
        root = _completion_store(ctx)
        rocks = _rocksdb_queues(root)
        ids = [str(q) for t, q in rocks if t == topic] if rocks else \
            [e.name for e in os.scandir(root / "consumequeue" / str(topic)) if e.name.isdigit() and e.is_dir()]
        return [str(i) for i in sorted(map(int, ids)) if str(i).startswith(incomplete)]
    except Exception:  # noqa: BLE001 - completion must never fail
        return []
