"""Options and error handling shared by every command (DESIGN.md conventions)."""

from __future__ import annotations

import errno
import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rmqstore_cli.commands.grammar import option_of, warn

from rmqstore_cli.errors import FileSizeError, RmqstoreError

#: ``debug``: --debug given; ``done``: what a writing command has finished, as words for the
#: error line when its report is then lost (:func:`work_done`), None before that.
STATE: dict = {"debug": False, "done": None}

#: Where a command's store comes from when --store is not given (README "Which store").
STORE_ENV = "RMQSTORE_STORE"
CONF_ENV = "RMQSTORE_BROKER_CONF"
STORE_HELP = (
    "Store root directory (storePathRootDir), taken as a path (never a pattern). Without it: "
    "--broker-conf's storePathRootDir, else $RMQSTORE_STORE, else $RMQSTORE_BROKER_CONF's "
    "storePathRootDir, else ~/store; stderr names the one used."
)
StoreOpt = Annotated[Path | None, typer.Option("--store", "-s", show_default=False, help=STORE_HELP)]
BrokerConfOpt = Annotated[
    Path | None,
    typer.Option(
        "--broker-conf",
        show_default=False,
        help="The broker's broker.conf (default $RMQSTORE_BROKER_CONF): sizes, paths and rules are read from it as "
        "the broker would; its storePathRootDir is the store when --store is not given.",
    ),
]


class Fmt(str, Enum):
    table = "table"
    jsonl = "jsonl"
    json = "json"


FormatOpt = Annotated[Fmt, typer.Option("--format", "-f", help="Output: table for people, jsonl or json for scripts.")]
#: The size options are Java ints in the broker's MessageStoreConfig.
JAVA_INT_MAX = (1 << 31) - 1
TzOpt = Annotated[
    str | None,
    typer.Option(
        "--tz", help="Time zone for shown times and index file names (IANA name, UTC, +08:00); default local."
    ),
]
CommitlogSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--commitlog-file-size", help="mappedFileSizeCommitLog, if not in --broker-conf.", min=4096, max=JAVA_INT_MAX
    ),
]
CqSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--cq-file-size", help="mappedFileSizeConsumeQueue, if not in --broker-conf.", min=20, max=JAVA_INT_MAX
    ),
]
IndexSlotsOpt = Annotated[
    int | None,
    typer.Option("--index-slots", help="maxHashSlotNum, if not in --broker-conf.", min=1, max=JAVA_INT_MAX),
]
IndexMaxOpt = Annotated[
    int | None, typer.Option("--index-max", help="maxIndexNum, if not in --broker-conf.", min=2, max=JAVA_INT_MAX)
]
AllowOddSizeOpt = Annotated[
    bool,
    typer.Option(
        "--allow-odd-size",
        help="Read the store even if some commit-log or consume-queue files are not the "
        "configured (or inferred) size, as after a torn copy: each such file is read up to its real length, "
        "with a warning naming it. Without it such a store is refused, as the broker refuses to load it.",
    ),
]
ODD_SIZE_HINT = "or pass --allow-odd-size to read it anyway"

# Several stores and the Spark engine (verify, rebuild-index, export)
StoresOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--store", "-s", metavar="<path>", show_default=False, help=STORE_HELP[:-1] + "; repeat it for several stores."
    ),
]
StoreGlobOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--store-glob",
        metavar="<pattern>",
        show_default=False,
        help="Every directory matching this shell pattern (*, ?, [...]; a leading ~ is your home) is a store, in "
        "sorted order, after the --store ones; repeatable. A pattern matching no directory is a usage error.",
    ),
]


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
SparkMasterOpt = Annotated[
    str | None,
    typer.Option(
        show_default="local[*]",
        help="Spark master: local[*], local[N], spark://…, yarn, k8s://…, or a running Spark Connect server "
        "sc://HOST:PORT (under spark-submit: its --master).",
    ),
]
SparkConfOpt = Annotated[list[str] | None, typer.Option(help="Spark setting KEY=VALUE (repeatable).")]
SparkVerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Let Spark log (quiet by default).")]

DEFAULT_STORE = Path(os.path.expanduser("~")) / "store"


def fail(e: RmqstoreError) -> None:
    """One stderr line and the exit code; a negative answer (exit 1: nothing matched) is an
    answer, not an error, so its line has no ``error:``."""
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import safe_text

    line = safe_text(e.describe(option_of))  # paths, topics and keys in an error are store text
    print(f"rmqstore: {line}" if isinstance(e, NotFound) else f"rmqstore: error: {line}", file=sys.stderr)
    raise typer.Exit(e.exit_code)


def command(fn=None, *, mutating: bool = False, answer: bool = False):
    """Turn engine errors into one stderr line and their exit code (``--debug``: traceback),
    and output faults (rmqstore_cli/stdio.py) into theirs, for every command in one place:

    * the output cannot be written (stdout full, I/O error, closed): exit 5, one line;
    * a pipe's reader went away (``| head -1``): stop quietly, exit 0, as git and coreutils
      do; with ``answer`` (verify: the exit status is the answer) only the printing stops
      and the command runs on to its usual exit code;
    * ``mutating`` (its work is writing: expire, generate, rebuild-index, export): a report
      lost after the work was done (:func:`work_done`) is exit 6 with a line saying where the
      work is recorded; with stdout closed from the start it refuses before any work (exit
      5), unless ``--quiet`` keeps it from printing.

    Used bare (``@command``) or with options (``@command(mutating=True)``)."""
    if fn is None:
        return functools.partial(command, mutating=mutating, answer=answer)
    code = fn.__code__
    odd_ok = "allow_odd_size" in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from rmqstore_cli import stdio
        from rmqstore_cli.store.safefs import reset_hole_budget

        reset_hole_budget()
        STATE["done"] = None
        stdio.keep_going_on_epipe(answer)
        try:
            if mutating and not kwargs.get("quiet") and stdio.stdout_closed_at_start():
                raise stdio.OutputFault(errno.EBADF, closed_at_start=True)
            try:
                rv = shrink_wins(fn, args, kwargs)
            except typer.Exit:
                stdio.flush()
                raise
            stdio.flush()
            return rv
        except stdio.OutputFault as e:
            raise typer.Exit(output_fault(e, fn.__name__.replace("_", "-"))) from None
        except RmqstoreError as e:
            if STATE["debug"]:
                raise
            if odd_ok and isinstance(e, FileSizeError):  # a read command: name its override
                e.hint = f"{e.hint}; {ODD_SIZE_HINT}" if e.hint else ODD_SIZE_HINT
            fail(e)
        except KeyboardInterrupt:
            print("rmqstore: interrupted", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper


def work_done(record: str) -> None:
    """A writing command's work is complete (files deleted, written, renamed in); ``record``
    says where it is recorded, for the error line if the report is then lost (exit 6)."""
    STATE["done"] = record


def output_fault(e, name: str = "rmqstore") -> int:
    """The exit code of an output fault (README "Exit codes"), and its one stderr line: 0 and
    nothing for a pipe whose reader went away before any work was done; 6 when the work
    was done (:func:`work_done`); else 5."""
    from rmqstore_cli.errors import EXIT_OUTPUT, EXIT_REPORT_LOST

    done = STATE["done"]
    if done is None and e.pipe_closed:
        return 0
    if done is not None:
        print(
            f"rmqstore: error: cannot write {name}'s report: {e.reason()} (stdout); {name} finished: {done}",
            file=sys.stderr,
        )
        return EXIT_REPORT_LOST
    hint = (
        "run it with stdout open (> FILE, or > /dev/null to drop the output)"
        if e.closed_at_start
        else "free space there, or send the output elsewhere"
        if e.err in (errno.ENOSPC, errno.EDQUOT)
        else "send the output elsewhere"
    )
    print(
        f"rmqstore: error: cannot write the output: {e.reason()} (stdout); nothing was changed; {hint}", file=sys.stderr
    )
    return EXIT_OUTPUT


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
    hint = (
        "did you mean " + " or ".join(map(safe_text, close)) + "?"
        if close
        else "its topics: " + ", ".join(map(safe_text, known[:10])) + (", …" if len(known) > 10 else "")
        if known
        else "the store has no topic"
    )
    return NotFound(f"no topic '{safe_text(topic)}' in the store", hint=hint)


# --- which store (README "Which store"): options, then environment variables, then ~/store -----


def conf_path(broker_conf: Path | None) -> Path | None:
    """The broker.conf a command reads: --broker-conf, else $RMQSTORE_BROKER_CONF (empty: none)."""
    if broker_conf is not None:
        return broker_conf
    env = os.environ.get(CONF_ENV)
    return Path(env) if env else None


def pick_store(store: Path | None, broker_conf: Path | None, required: bool = True) -> tuple[Path | None, str | None]:
    """The store root a command reads and where it came from (None: --store named it).

    Explicit options before environment variables before the broker's default: --store;
    --broker-conf's ``storePathRootDir``; $RMQSTORE_STORE; $RMQSTORE_BROKER_CONF's
    ``storePathRootDir``; ``~/store`` (``MessageStoreConfig#storePathRootDir``'s default,
    ``${user.home}/store``). ``broker_conf`` is the option as given (not the environment's).
    ``required=False`` (decode-msgid, dump-cq --file, where a store is optional): None
    instead of the default."""
    from rmqstore_cli.store.config import conf_root

    if store is not None:
        return store, None
    if broker_conf is not None:
        root = conf_root(broker_conf)
        if root is not None:
            return Path(root), f"storePathRootDir in {broker_conf}"
    env = os.environ.get(STORE_ENV)
    if env:
        return Path(env), STORE_ENV
    conf = os.environ.get(CONF_ENV)
    if broker_conf is None and conf:
        root = conf_root(Path(conf))
        if root is not None:
            return Path(root), f"storePathRootDir in {conf}, from {CONF_ENV}"
    if not required:
        return None, None
    return DEFAULT_STORE, "the broker's default: no --store, RMQSTORE_STORE or storePathRootDir"


def tell_store(cfg, origin: str | None, conf: Path | None, quiet: bool = False) -> None:
    """One stderr line saying where the store came from when --store did not name it, and
    where the commit log is when broker.conf's ``storePathCommitLog`` puts it outside the
    store root (nothing with ``quiet``, or when both are plain)."""
    from rmqstore_cli.render import safe_text
    from rmqstore_cli.store.config import commit_log_paths

    parts = [] if origin is None else [f"store {cfg.root} ({origin})"]
    if cfg.store_path_commit_log:
        root = os.path.abspath(cfg.root)
        away = [
            d
            for d in commit_log_paths(cfg.store_path_commit_log)
            if os.path.commonpath([root, os.path.abspath(d)]) != root
        ]
        if away:
            parts.append(f"commit log {', '.join(away)} (storePathCommitLog in {conf})")
    if parts and not quiet:
        print("rmqstore: " + safe_text("; ".join(parts)), file=sys.stderr)


def pick_stores(
    stores: list[str] | None,
    globs: list[str] | None,
    broker_conf: Path | None,
    sizes: dict[str, int | None],
    quiet: bool = False,
) -> list:
    """verify, rebuild-index and export: the stores named by --store (paths) and --store-glob
    (patterns), or the one store :func:`pick_store` finds; as ``StoreSpec``s."""
    from rmqstore_cli.pipeline.stores import store_specs
    from rmqstore_cli.store.config import StoreConfig

    conf = conf_path(broker_conf)
    origin = None
    if not stores and not globs:
        root, origin = pick_store(None, broker_conf)
        stores = [str(root)]
    specs = store_specs(list(stores or []), None if conf is None else str(conf), sizes, list(globs or []))
    for s in specs:
        tell_store(StoreConfig.load(s.path, s.broker_conf), origin, conf, quiet)
    return specs


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
    from rmqstore_cli.store.config import StoreConfig

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


# --- shell completion of names from the store (completions/): fast, and never fails -------------

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
    except Exception:  # completion must never fail
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
    except Exception:  # completion must never fail
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
        ids = (
            [str(q) for t, q in rocks if t == topic]
            if rocks
            else [e.name for e in os.scandir(root / "consumequeue" / str(topic)) if e.name.isdigit() and e.is_dir()]
        )
        return [str(i) for i in sorted(map(int, ids)) if str(i).startswith(incomplete)]
    except Exception:  # completion must never fail
        return []
