"""The typer app: global options, and every command registered from ``commands/``."""
from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Optional

import typer

from rmqstore_cli import __version__
from rmqstore_cli.commands import common

app = typer.Typer(
    name="rmqstore",
    help="Read, write, verify and repair Apache RocketMQ broker store directories offline: "
         "commitlog, consume queues, index, checkpoint.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Examples:\n\n"
           "  rmqstore verify --store ~/store\n\n"
           "  rmqstore dump-commitlog --store ~/store --key order-42 --format jsonl | jq .msg_id\n\n"
           "  rmqstore decode-msgid 0A00000500002A9F0000000040001000\n\n"
           "Every command: rmqstore COMMAND --help. Exit codes: 0 done, 1 nothing found (or verify "
           "found errors), 2 usage, 3 unreadable store, 4 refused (a live broker holds the lock).",
)


def _version(value: bool) -> None:
    if value:
        print(f"rmqstore {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global(
    debug: Annotated[bool, typer.Option("--debug", help="Show a traceback for errors.")] = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    common.STATE["debug"] = debug


#: Command modules under ``commands/``, in the order ``--help`` lists them.
COMMANDS = (
    "generate",
    "dump_commitlog",
    "dump_cq",
    "search_offset",
    "consumer_progress",
    "stats",
    "index_lookup",
    "decode_msgid",
    "expire",
    "verify",
    "rebuild_index",
    "export",
)

for _name in COMMANDS:
    importlib.import_module(f"rmqstore_cli.commands.{_name}").register(app)


def _examples_unwrapped(epilog: str | None) -> str | None:
    """Keep each epilog's example command lines (indented paragraphs) as written: click marks
    a paragraph it must not re-wrap with a \\b line, so a copied example stays one command."""
    if not epilog:
        return epilog
    paras = epilog.split("\n\n")
    return "\n\n".join(
        "\b\n" + p if p.strip() and all(ln.startswith((" ", "\t")) for ln in p.strip("\n").splitlines()) else p
        for p in paras)


for _info in app.registered_commands:
    _info.epilog = _examples_unwrapped(_info.epilog)
app.info.epilog = _examples_unwrapped(app.info.epilog)


def main() -> None:
    if "_RMQSTORE_COMPLETE" in os.environ:  # shell completion (completions/): only then load it
        from typer._completion_classes import completion_init

        completion_init()
    try:
        rv = app(prog_name="rmqstore", standalone_mode=False)
    except BrokenPipeError:
        from rmqstore_cli.render import silence_broken_pipe

        silence_broken_pipe()
        sys.exit(0)
    except SystemExit as e:  # typer's own EPIPE exit (help or --version into `| head`) is 1: make it 0
        if e.code == 1 and type(sys.stdout).__name__ == "PacifyFlushWrapper":
            from rmqstore_cli.render import silence_broken_pipe

            silence_broken_pipe()
            sys.exit(0)
        raise
    except typer.Abort:
        print("rmqstore: aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - click's own usage errors (typer vendors click)
        if not (hasattr(e, "exit_code") and hasattr(e, "format_message")):
            raise
        sys.exit(usage_error(e))
    sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)


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
    hint = "" if ctx is None else f"; '{ctx.command_path} --help' lists the " + (
        "commands" if hasattr(ctx.command, "commands") else "options")
    print(f"rmqstore: error: {what}{hint}", file=sys.stderr)
    return e.exit_code
