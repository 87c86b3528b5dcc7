"""Options and error handling shared by every command (DESIGN.md conventions)."""
from __future__ import annotations

import functools
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from rmqstore_cli.errors import RmqstoreError

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
TzOpt = Annotated[Optional[str], typer.Option(
    "--tz", help="Time zone for shown times and index file names (IANA name, UTC, +08:00); default local.")]
CommitlogSizeOpt = Annotated[Optional[int], typer.Option(
    "--commitlog-file-size", help="mappedFileSizeCommitLog, if not in --broker-conf.", min=4096)]
CqSizeOpt = Annotated[Optional[int], typer.Option(
    "--cq-file-size", help="mappedFileSizeConsumeQueue, if not in --broker-conf.", min=20)]
IndexSlotsOpt = Annotated[Optional[int], typer.Option(
    "--index-slots", help="maxHashSlotNum, if not in --broker-conf.", min=1)]
IndexMaxOpt = Annotated[Optional[int], typer.Option(
    "--index-max", help="maxIndexNum, if not in --broker-conf.", min=2)]

DEFAULT_STORE = Path(os.path.expanduser("~")) / "store"


def fail(e: RmqstoreError) -> None:
    print(f"rmqstore: error: {e}", file=sys.stderr)
    raise typer.Exit(e.exit_code)


def command(fn):
    """Turn engine errors into one stderr line and their exit code (``--debug``: traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RmqstoreError as e:
            if STATE["debug"]:
                raise
            fail(e)
        except BrokenPipeError:
            _silence_broken_pipe()
            raise typer.Exit(0)
        except KeyboardInterrupt:
            print("rmqstore: interrupted", file=sys.stderr)
            raise typer.Exit(130)

    return wrapper


def _silence_broken_pipe() -> None:
    """`rmqstore dump-commitlog | head`: stop quietly, without a traceback at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


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


def open_store(store: Path | None, broker_conf: Path | None, tz: str | None = None, **sizes):
    """Open a store read-only with its sizes checked; notes about inference go to stderr."""
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.times import parse_tz

    cfg = load_config(store, broker_conf, **sizes)
    ms = MessageStore.open(cfg, parse_tz(tz))
    return ms
