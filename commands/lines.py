"""The lines a command writes on stderr: one ``rmqstore:`` prefix, a kind, and the store's
text escaped (render.safe_text), never a bare print (docs/conventions.md "Output")."""

from __future__ import annotations

import sys


def note(text: str) -> None:
    """One ``rmqstore: note:`` line on stderr, store text escaped (render.safe_text)."""
    say("note", text)


def warn(text: str) -> None:
    """One ``rmqstore: warning:`` line on stderr, store text escaped (render.safe_text)."""
    say("warning", text)


def say(kind: str | None, text: str) -> None:
    """The one place a command writes a line to stderr: the ``rmqstore:`` prefix, the kind
    (``note``, ``warning``; None for a plain report line) and escaped text."""
    from rmqstore_cli.render import safe_text

    head = f"rmqstore: {kind}: " if kind else "rmqstore: "
    print(head + safe_text(text), file=sys.stderr)
