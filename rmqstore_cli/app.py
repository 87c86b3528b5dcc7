"""The typer app: global options, and every command registered from ``commands/``."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Annotated

import typer
import typer.main
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup

from rmqstore_cli import __version__
from rmqstore_cli.commands import exits

#: Each command: its name, its module under ``commands/`` and the first paragraph of its help,
#: in the order ``--help`` lists them. ``rmqstore --help`` prints these summaries without
#: importing the command modules (tests/docs/test_docs.py checks each summary against the
#: loaded command's help); a command's module is imported only when it runs or its own help
#: is asked for.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "generate",
        "generate",
        "Write a realistic store: commitlog, consume queues, index, checkpoint, config/topics.json.",
    ),
    ("dump-commitlog", "dump_commitlog", "Decode commit-log messages in physical order, filter them, print them."),
    ("dump-cq", "dump_cq", "Print consume-queue units by logical offset, each resolved against the commit log."),
    (
        "dump-timer",
        "dump_timer",
        "Print the timer store: the wheel's slots, the timer log's units, and what comes next.",
    ),
    (
        "search-offset",
        "search_offset",
        "Per queue of TOPIC: the consume-queue offset of the first message stored at or after TIME.",
    ),
    (
        "consumer-progress",
        "consumer_progress",
        "Per consumer group, topic and queue: the committed offset against the queue's min and max.",
    ),
    (
        "transactions",
        "transactions",
        "Per producer group and topic: transactional messages committed, rolled back, pending or to be discarded.",
    ),
    (
        "pop",
        "pop",
        "Per POP consumer group and topic: popped messages acked, revived, invisible or overdue; revive progress.",
    ),
    (
        "stats",
        "stats",
        "What is eating the disk: messages and bytes per topic, queue or file, biggest first, "
        "and the size of every part of the store root.",
    ),
    (
        "diff",
        "diff",
        "What changed between two snapshots of a store: files, the commit logs, queues, consumer offsets.",
    ),
    ("index-lookup", "index_lookup", "Find messages by key through the index files, and check each one's real key."),
    ("decode-msgid", "decode_msgid", "Tell offset msgIds from client UNIQ_KEYs and decode them."),
    (
        "expire",
        "expire",
        "Delete expired commit-log files, then the consume-queue and index files "
        "that only point below the commit log's new minimum — the broker's "
        "cleaning, run once.",
    ),
    ("verify", "verify", "Check a store's commit log, consume queues, index, checkpoint and abort marker."),
    (
        "rebuild-index",
        "rebuild_index",
        "Regenerate consume queues and index files from the commit log, as the broker's dispatch builds them.",
    ),
    ("repair", "repair", "Mend a commit-log file the broker would not load, keeping every good message."),
    ("export", "export", "Export commit-log messages as a Parquet dataset for Spark SQL forensics across a fleet."),
)

_CONTEXT = {"help_option_names": ["-h", "--help"]}


def load_command(name: str):
    """The click command of one entry of :data:`COMMANDS`, built from its module on first use
    (a one-command typer app, which typer turns into a plain command)."""
    module = next(m for n, m, _ in COMMANDS if n == name)
    sub = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=_CONTEXT)
    importlib.import_module(f"rmqstore_cli.commands.{module}").register(sub)
    for info in sub.registered_commands:
        info.epilog = _examples_unwrapped(info.epilog)
    return typer.main.get_command(sub)


class LazyGroup(TyperGroup):
    """The top-level group: lists the commands of :data:`COMMANDS` and loads one only when it
    is resolved, so ``rmqstore --help`` imports no command module (it stays instant)."""

    def list_commands(self, ctx) -> list[str]:
        return [name for name, _, _ in COMMANDS]

    def get_command(self, ctx, cmd_name: str):
        if cmd_name not in self.commands and any(n == cmd_name for n, _, _ in COMMANDS):
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx, formatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name, _, _ in COMMANDS)
        with formatter.section("Commands"):
            formatter.write_dl([(name, make_default_short_help(summary, limit)) for name, _, summary in COMMANDS])


app = typer.Typer(
    name="rmqstore",
    cls=LazyGroup,
    help="Read, write, verify and repair Apache RocketMQ broker store directories offline: "
    "commitlog, consume queues, index, checkpoint.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings=_CONTEXT,
    epilog="Examples:\n\n"
    "  rmqstore verify --store ~/store\n\n"
    "  rmqstore dump-commitlog --store ~/store --key order-42 --format jsonl | jq .msg_id\n\n"
    "  rmqstore decode-msgid 0A00000500002A9F0000000040001000\n\n"
    "Every command: rmqstore COMMAND --help. Exit codes: 0 done, 1 nothing found (or verify "
    "found errors), 2 usage, 3 unreadable store, 4 refused (a live broker holds the lock), 5 the "
    "output could not be written (stdout full or closed) and nothing changed, 6 a writing "
    "command's work is done but its report could not be written. Output into a pipe whose "
    "reader went away (| head) stops quietly with 0; verify still exits with its answer.",
)


def _version(value: bool) -> None:
    """The version, which loops the engine runs (the C extension built at install, or
    the reference loops: README's "Speed") and whether mapped reads are guarded against a
    file shrinking under them (README's "Safety"); then one line per C extension, in use or
    why not (not built, its import's error, RMQSTORE_PURE), never a silent slow run."""
    if value:
        from rmqstore_cli.store.files import mapguard
        from rmqstore_cli.store.files.extload import BUILD_HINT
        from rmqstore_cli.store.files.fastpaths import FAST_PATHS

        print(f"rmqstore {__version__} ({FAST_PATHS.describe()}; {mapguard.describe()})")
        states = FAST_PATHS.extensions()
        for name, state in states.items():
            print(f"  C extension {name}: {state}")
        if any(s not in ("in use", "RMQSTORE_PURE is set") for s in states.values()):
            print(f"  (the missing ones run at pure-Python speed or unguarded; to build them: {BUILD_HINT})")
        raise typer.Exit(0)


@app.callback()
def _global(
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback for errors.")] = False,
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    exits.STATE["debug"] = debug


def _examples_unwrapped(epilog: str | None) -> str | None:
    """Keep each epilog's example command lines (indented paragraphs) as written: click marks
    a paragraph it must not re-wrap with a \\b line, so a copied example stays one command."""
    if not epilog:
        return epilog
    paras = epilog.split("\n\n")
    return "\n\n".join(
        "\b\n" + p if p.strip() and all(ln.startswith((" ", "\t")) for ln in p.strip("\n").splitlines()) else p
        for p in paras
    )


app.info.epilog = _examples_unwrapped(app.info.epilog)


#: numpy's OpenBLAS starts a thread per core at import, ~0.1 s of CPU, for matrix work
#: rmqstore never does; one thread unless the user says otherwise (set before numpy loads).
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1"}


def main() -> None:
    for k, v in BLAS_THREADS.items():
        os.environ.setdefault(k, v)
    from rmqstore_cli import stdio

    stdio.install()  # closed fds 0-2 held by /dev/null; stdout faults one exception, stderr never fails
    try:
        code = _run()
    finally:
        stdio.finish()  # nothing left to fail at the interpreter's last flush
    # the interpreter's last full collection walks every object alive (the modules, numpy's):
    # ~30 ms of a 0.2 s command; frozen, it skips them (they are freed as ever, by count)
    gc.freeze()
    sys.exit(code)


def _run() -> int:
    """Run the command line; its exit code. Output faults outside a command (help,
    --version, a usage error's help) end as a command's do (commands.exits.output_fault)."""
    from rmqstore_cli import stdio

    if "_RMQSTORE_COMPLETE" in os.environ:  # shell completion (completions/): only then load it
        from typer._completion_classes import completion_init

        completion_init()
    try:
        try:
            rv = app(prog_name="rmqstore", standalone_mode=False)
        except typer.Abort:
            print("rmqstore: aborted", file=sys.stderr)
            return 1
        except Exception as e:  # click's own usage errors (typer vendors click)
            if not (hasattr(e, "exit_code") and hasattr(e, "format_message")):
                raise
            return usage_error(e)
        code = rv if isinstance(rv, int) and not isinstance(rv, bool) else 0
        if code == 0:  # an error already said keeps its code: stdio.finish flushes what is left quietly
            stdio.flush()
    except stdio.OutputFault as e:
        return exits.output_fault(e)
    return code


def usage_error(e) -> int:
    """click's usage errors (unknown option or command, bad choice or range, missing argument)
    as the one documented line, ``rmqstore: error: <what>; <hint>``, instead of click's
    usage block; ``rmqstore`` alone still prints the help (no_args_is_help). Returns the
    exit code (2)."""
    if type(e).__name__ == "NoArgsIsHelpError":
        e.show()
        return e.exit_code
    from rmqstore_cli.render import safe_text

    what = safe_text(" ".join(e.format_message().split()).rstrip("."))  # it quotes what was typed
    if what[:1].isupper() and what[1:2].islower():
        what = what[0].lower() + what[1:]
    ctx = getattr(e, "ctx", None)
    hint = (
        ""
        if ctx is None
        else f"; '{ctx.command_path} --help' lists the "
        + ("commands" if hasattr(ctx.command, "commands") else "options")
    )
    print(f"rmqstore: error: {what}{hint}", file=sys.stderr)
    return e.exit_code
