"""Errors that become one line on stderr and a documented exit code (DESIGN.md).

The engine names what its caller can set as a setting token (:func:`setting`, written
``⟦broker_conf⟧`` in a string): ``str(error)`` spells it as the library's keyword, the
command line as its option (``commands/grammar.option_of``), so neither vocabulary lives in
the engine (tests/docs/test_codeshape.py holds it)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

# exit 0: the command did what was asked (no constant: nothing raises it)
EXIT_NEGATIVE = 1  # verify found problems; a look-up or filter found nothing
EXIT_USAGE = 2
EXIT_STORE = 3  # the store could not be read or is not a RocketMQ store
EXIT_REFUSED = 4  # a live broker holds the lock, or --force/--yes is needed
EXIT_OUTPUT = 5  # the output (stdout, an output file) could not be written; nothing was changed
EXIT_REPORT_LOST = 6  # a writing command finished its work, but its report could not be written


#: How engine text names something its caller can set (:func:`setting`): the engine speaks
#: neither the library's keywords nor the command line's options, so each layer spells it.
_SETTING = re.compile("\u27e6([a-z_]+)\u27e7")


def setting(name: str) -> str:
    """A setting named in an error's text by its library keyword (``setting("broker_conf")``):
    ``str(error)`` shows ``broker_conf``, the command line ``--broker-conf``."""
    return f"\u27e6{name}\u27e7"


def spell(text: str, name_of: Callable[[str], str] | None = None) -> str:
    """``text`` with each :func:`setting` spelled by ``name_of`` (default: the keyword)."""
    return _SETTING.sub(lambda m: name_of(m.group(1)) if name_of else m.group(1), text)


class RmqstoreError(Exception):
    """An error for the user, not a bug: printed as ``rmqstore: error: …``."""

    exit_code = EXIT_STORE

    def __init__(
        self,
        message: str,
        path: str | os.PathLike[str] | None = None,
        offset: int | None = None,
        hint: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.path = path
        self.offset = offset
        self.hint = hint

    def __str__(self) -> str:
        return self.describe()

    def describe(self, name_of: Callable[[str], str] | None = None) -> str:
        """The one-line text, settings spelled by ``name_of`` (:func:`spell`)."""
        where = ""
        if self.path is not None:
            where = f" ({self.path}" + (f":{self.offset}" if self.offset is not None else "") + ")"
        text = f"{self.message}{where}" + (f"; {self.hint}" if self.hint else "")
        return spell(text, name_of)


class StoreError(RmqstoreError):
    exit_code = EXIT_STORE


class FileSizeError(StoreError):
    """A commit-log or consume-queue file whose length is not the configured (or inferred)
    size: ``MappedFileQueue#load`` refuses such a store, and so do rmqstore's commands.
    The read commands name their ``--allow-odd-size`` override in the hint."""


class ShrunkError(RmqstoreError):
    """A store file shrank while it was read (truncated under a mapping: a store copied
    while a broker or expire still runs), or a mapped page could not be read at all; the
    read is void (``store/files/mapguard.py``). Exit 3, like a StoreError, but deliberately not
    one: the engine takes a StoreError as a finding about one file and goes on with the
    next, while this must end the whole command (and roll back what it was writing)."""

    exit_code = EXIT_STORE


class UsageError(RmqstoreError):
    exit_code = EXIT_USAGE


class RefusedError(RmqstoreError):
    exit_code = EXIT_REFUSED


class NotFound(RmqstoreError):
    """A negative answer (nothing matched); exit 1."""

    exit_code = EXIT_NEGATIVE


class OutputError(RmqstoreError):
    """An output file (export's dataset) could not be written: full, read-only, I/O error.
    The store is untouched; exit 5, as for a stdout that cannot take the output."""

    exit_code = EXIT_OUTPUT
