"""Man pages and shell completion scripts, generated from the same click objects as ``--help``.

``python -m rmqstore_cli.manpages [DIR]`` rewrites ``DIR/man/*.1`` and ``DIR/completions/*``
(default: the current directory); ``tests/docs/test_docs.py`` checks the committed files are
current, so the pages cannot drift from the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import typer

from rmqstore_cli import __version__

SHELLS = {"bash": "rmqstore.bash", "zsh": "_rmqstore", "fish": "rmqstore.fish"}
_DATE = "2026-11-22"  # fixed, so regenerating changes nothing unless the CLI changed


def _roff(text: str) -> str:
    out = text.replace("\\", "\\e").replace("-", "\\-")
    out = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in out)  # groff needs ASCII input
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln for ln in out.splitlines())


def _options(cmd, ctx) -> list[str]:
    lines = []
    for p in cmd.get_params(ctx):
        rec = p.get_help_record(ctx)
        if rec is None:
            continue
        names, help_text = rec
        lines += [".TP", f".B {_roff(names)}", _roff(help_text or "")]
    return lines


def _examples(cmd) -> list[str]:
    """The epilog: its indented lines are example command lines (EXAMPLES, kept as typed);
    its unindented paragraphs are prose (NOTES, filled)."""
    epilog = (cmd.epilog or "").strip("\n")
    if not epilog:
        return []
    examples, notes = _epilog_parts(epilog)
    lines = [".SH EXAMPLES"] if examples else []
    for ln in examples:
        lines += [".PP", ".nf", _roff(ln), ".fi"]
    if notes:
        lines.append(".SH NOTES")
        for n in notes:
            lines += [".PP", _roff(n)]
    return lines


def _epilog_parts(epilog: str) -> tuple[list[str], list[str]]:
    """(example command lines, prose paragraphs each joined into one line) of an epilog
    below its "Examples:" heading."""
    examples: list[str] = []
    notes: list[str] = []
    para: list[str] = []
    for ln in epilog.splitlines()[1:]:  # the first line is the "Examples:" heading
        if ln == "\b":  # click's "do not re-wrap" mark (app.py)
            continue
        if ln.startswith((" ", "\t")) and ln.strip():
            examples.append(ln.strip())
        elif ln.strip():
            para.append(ln.strip())
        elif para:
            notes.append(" ".join(para))
            para = []
    if para:
        notes.append(" ".join(para))
    return examples, notes


def page(cmd, name: str, parent) -> str:
    """One roff page for a click command (typer builds them; click is vendored inside typer)."""
    ctx = cmd.context_class(cmd, info_name=name, parent=parent)
    title = name.replace(" ", "-")
    short = cmd.get_short_help_str(200) if parent else "Apache RocketMQ store forensics and operations"
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    lines = [
        f'.TH {title.upper()} 1 "{_DATE}" "rmqstore {__version__}" "User Commands"',
        ".SH NAME",
        f"{_roff(title)} \\- {_roff(short)}",
        ".SH SYNOPSIS",
        f".B {_roff(name)}",
        _roff(usage),
        ".SH DESCRIPTION",
        _roff(cmd.help or ""),
        ".SH OPTIONS",
        *_options(cmd, ctx),
    ]
    if hasattr(cmd, "list_commands"):
        lines += _group_sections(cmd, ctx)
    else:
        lines += _examples(cmd)
        lines += [".SH SEE ALSO", "\\fBrmqstore\\fR(1)"]
    return "\n".join(lines) + "\n"


def _group_sections(cmd, ctx) -> list[str]:
    """The top page's own sections: what holds for every command (the output contract,
    the exit codes, the environment, the completion files) is said once, on ``rmqstore(1)``."""
    lines = [".SH COMMANDS"]
    for sub in cmd.list_commands(ctx):
        c = cmd.get_command(ctx, sub)
        lines += [".TP", f".B {sub}", _roff(c.get_short_help_str(200)) + f"\nSee \\fB\\%rmqstore\\-{sub}\\fR(1)."]
    lines += _scripts_section() + _exit_status_section() + _environment_section() + _files_section()
    lines += _examples(cmd)
    lines += [".SH SEE ALSO", ", ".join(f"\\fB\\%rmqstore\\-{sub}\\fR(1)" for sub in cmd.list_commands(ctx))]
    return lines


def _scripts_section() -> list[str]:
    """OUTPUT FOR SCRIPTS: the stdout/stderr contract a script may rely on."""
    return [
        ".SH OUTPUT FOR SCRIPTS",
        _roff(
            "--format jsonl prints one JSON object a line, --format json the same records as one array "
            "(or one object for a summary). Field names and types are fixed by the JSON Schemas in the "
            "source tree's schemas/ directory, one per record kind; new fields may be added, existing "
            "ones keep their name and meaning. Standard output carries only data; warnings, notes and "
            'errors go to standard error as lines starting with "rmqstore: "; a closed or full standard '
            "error loses them but changes nothing else. Tables and progress "
            "bars are for terminals: no escape sequences when output is not a terminal, and no colour "
            "when NO_COLOR is set. The same store and options give the same bytes."
        ),
    ]


def _exit_status_section() -> list[str]:
    """EXIT STATUS: the codes every command shares, one paragraph each."""
    lines = [".SH EXIT STATUS"]
    for code, text in (
        (
            0,
            "Done (a look-up found something). Output into a pipe whose reader went away "
            "(| head -1) stops quietly with 0, except that verify finishes its check and "
            "exits with its answer.",
        ),
        (1, "A negative answer: a look-up or filter found nothing, an id was not found, or verify found errors."),
        (2, "Usage error: a bad option or value."),
        (3, "The store could not be read or is not a RocketMQ store."),
        (4, "Refused for safety: a live broker holds the store's lock, or a destructive step needs \\-\\-force."),
        (
            5,
            "The output could not be written (standard output full, closed or failing; an "
            "output file such as export's dataset) and nothing was changed. A writing command "
            "whose standard output is closed from the start refuses before any work.",
        ),
        (
            6,
            "A writing command (expire, rebuild-index, generate, export) finished its work but "
            "its report could not be written; the error line says where the work is recorded "
            "(expire: rmqstore-expire.jsonl in the store root).",
        ),
    ):
        lines += [".TP", f".B {code}", _roff(text) if "\\" not in text else text]
    return lines


def _environment_section() -> list[str]:
    """ENVIRONMENT: the variables any command reads."""
    return [
        ".SH ENVIRONMENT",
        ".TP",
        ".B RMQSTORE_STORE",
        _roff(
            "The store when --store is not given and --broker-conf sets no storePathRootDir. "
            "Which store a command reads: --store; else --broker-conf's storePathRootDir; else "
            "RMQSTORE_STORE; else RMQSTORE_BROKER_CONF's storePathRootDir; else ~/store (the "
            "broker's default). Unless --store named it, one stderr line says which and why."
        ),
        ".TP",
        ".B RMQSTORE_BROKER_CONF",
        "Default for \\-\\-broker\\-conf.",
        ".TP",
        ".B NO_COLOR",
        "When set, no colour on a terminal (tables, progress bars).",
        ".TP",
        ".B RMQSTORE_PROGRESS_DELAY",
        _roff(
            "Seconds a long job (verify, rebuild-index, export, generate, expire) runs before its "
            "progress bar shows on a terminal's stderr; default 2, 0 at once."
        ),
        ".TP",
        ".B RMQSTORE_SPARK_CACHE",
        _roff(
            "A directory for the class-data archive of Spark's classes (~70-120 MB) that an "
            "embedded Spark (--engine spark with a local master) writes on its first run and maps "
            "on later ones, to start ~7 s faster. Unset: nothing is cached; no command writes "
            "under HOME."
        ),
    ]


def _files_section() -> list[str]:
    """FILES: the completion scripts shipped beside the pages."""
    return [
        ".SH FILES",
        ".TP",
        ".B completions/rmqstore.bash, completions/_rmqstore, completions/rmqstore.fish",
        _roff(
            "Shell completion for bash, zsh and fish (commands, options, values, and the topics and "
            "queue ids of the store given by --store)."
        ),
    ]


def pages() -> dict[str, str]:
    from rmqstore_cli.app import app

    group = typer.main.get_command(app)
    root = group.context_class(group, info_name="rmqstore")
    out = {"rmqstore.1": page(group, "rmqstore", None)}
    for sub in group.list_commands(root):
        out[f"rmqstore-{sub}.1"] = page(group.get_command(root, sub), f"rmqstore {sub}", root)
    return out


#: Where each script goes so the shell finds it on its own (README "Shell completion").
_INSTALL = {
    "bash": "~/.local/share/bash-completion/completions/rmqstore (or source it from ~/.bashrc)",
    "zsh": "a directory on $fpath, before compinit runs (or source it after compinit)",
    "fish": "~/.config/fish/completions/rmqstore.fish",
}


def completion_scripts() -> dict[str, str]:
    """The scripts click/typer print for ``_RMQSTORE_COMPLETE=source_<shell>``, with a header;
    zsh's also works autoloaded from $fpath (``#compdef`` first, the function called when the
    file is the autoloaded body of ``_rmqstore``), not only sourced."""
    out = {}
    env = dict(os.environ)
    for shell, fname in SHELLS.items():
        env["_RMQSTORE_COMPLETE"] = f"source_{shell}"
        r = subprocess.run([sys.executable, "-m", "rmqstore_cli"], env=env, capture_output=True, text=True, check=True)
        body = r.stdout.strip("\n") + "\n"
        head = (
            f"# {shell} completion for rmqstore: commands, options, values, and topics and queue ids\n"
            f"# of the store given by --store. Generated by python -m rmqstore_cli.manpages; do not edit.\n"
            f"# Install: {_INSTALL[shell]}.\n"
        )
        if shell == "zsh":
            first, _, rest = body.partition("\n")
            assert first == "#compdef rmqstore", first
            rest = rest.replace(
                "\ncompdef _rmqstore_completion rmqstore\n",
                "\nif [[ $funcstack[1] == _rmqstore ]]; then  # autoloaded by compinit\n"
                '  _rmqstore_completion "$@"\nelse  # sourced\n'
                "  compdef _rmqstore_completion rmqstore\nfi\n",
            )
            assert "$funcstack" in rest, "typer's zsh script changed: adapt completion_scripts()"
            body = f"{first}\n{head}{rest}"
        else:
            body = head + "\n" + body
        out[fname] = body
    return out


def write(root: Path) -> list[Path]:
    written = []
    for sub, files in (("man", pages()), ("completions", completion_scripts())):
        (root / sub).mkdir(exist_ok=True)
        for name, text in files.items():
            p = root / sub / name
            p.write_text(text, encoding="utf-8")
            written.append(p)
    return written


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else ".")):
        print(p)
