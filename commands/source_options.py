"""The store a read command reads, as one option group declared once: ``--store``,
``--broker-conf``, the size options and ``--allow-odd-size`` (dump-cq, search-offset, pop, transactions,
consumer-progress, stats), and what those commands do alike with it: open the store, say
its warnings, and say that nothing matched their filters.

A command names the group by one parameter, ``source: StoreSource``; :func:`store_options`
puts the group's options in its place in the signature typer reads (same names, help and
order as if each were written out), and hands the command their values as one
:class:`StoreSource`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rmqstore_cli.commands.lines import warn
from rmqstore_cli.commands.opening import load_config, open_store, warn_odd_files
from rmqstore_cli.commands.options import AllowOddSizeOpt, BrokerConfOpt, CommitlogSizeOpt, CqSizeOpt, StoreOpt
from rmqstore_cli.commands.which_store import conf_path

#: The group's options in --help order: (parameter, annotation, default).
OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("store", StoreOpt, None),
    ("broker_conf", BrokerConfOpt, None),
    ("commitlog_file_size", CommitlogSizeOpt, None),
    ("cq_file_size", CqSizeOpt, None),
    ("allow_odd_size", AllowOddSizeOpt, False),
)


@dataclass(frozen=True)
class StoreSource:
    """The values of the group's options (``cq_file_size`` None where the command has no
    ``--cq-file-size``)."""

    store: Path | None = None
    broker_conf: Path | None = None
    commitlog_file_size: int | None = None
    cq_file_size: int | None = None
    allow_odd_size: bool = False

    def engine(self, tz: str | None) -> Any:
        """The read-only engine (``store.message_store.MessageStore``), sizes checked."""
        sizes = {"commitlog_file_size": self.commitlog_file_size, "cq_file_size": self.cq_file_size}
        return open_store(self.store, self.broker_conf, tz, self.allow_odd_size, **sizes)

    def api(self, tz: str | None) -> Any:
        """The public API's store (``api.store.Store``, a context manager), the store's
        config read first as every command reads it (stderr says which store)."""
        from rmqstore_cli.api.store import open_store as open_api_store

        cfg = load_config(self.store, self.broker_conf, commitlog_file_size=self.commitlog_file_size)
        sizes = {"commitlog_file_size": self.commitlog_file_size}
        return open_api_store(cfg.root, conf_path(self.broker_conf), tz=tz, allow_odd_size=self.allow_odd_size, **sizes)


#: A command's ``source`` default: :func:`store_options` replaces it by the options' values.
FROM_OPTIONS = StoreSource()


def store_options(*, cq_file_size: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator: ``fn``'s ``source`` parameter becomes the group's options (with
    ``--cq-file-size`` when ``cq_file_size``), their values handed to ``fn`` as one
    :class:`StoreSource`. Put it under ``@command``."""
    names = [name for name, _, _ in OPTIONS if cq_file_size or name != "cq_file_size"]
    group = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)
        for name, annotation, default in OPTIONS
        if name in names
    ]

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            params += group if p.name == "source" else [p]

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            source = StoreSource(**{name: kwargs.pop(name) for name in names})
            return fn(source=source, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def tell_warnings(st: Any) -> None:
    """The stderr lines of an opened store: the odd-size files let through, then what it skipped."""
    warn_odd_files(st.config)
    for w in st.warnings:
        warn(w)


def states_wanted(
    state: list[Any] | None, table: bool, table_default: list[str]
) -> tuple[str | None, list[str] | None]:
    """``--state`` (repeatable enum values) as text for messages (``a/b``, None when not
    given) and as the report's filter: the given states, else ``table_default`` for the
    table (the states worth listing) and every state for JSON (None)."""
    if state:
        return "/".join(s.value for s in state), [s.value for s in state]
    return None, (table_default if table else None)


def nothing_matched(noun: str, root: Path, none_at_all: str | None, **filters: str | None) -> Exception:
    """The ``NotFound`` of a command whose report is empty: ``no <noun> of group 'g' and
    topic 't'`` for the filters given (hinting to drop them), else ``no <noun>`` with
    ``none_at_all`` as the hint."""
    from rmqstore_cli.errors import NotFound
    from rmqstore_cli.render import safe_text

    what = [f"{k} '{safe_text(v)}'" for k, v in filters.items() if v]
    flags = "/".join(f"--{k}" for k in filters)
    hint = f"run without {flags} to list them all" if what else none_at_all
    return NotFound(f"no {noun}" + " of " * bool(what) + " and ".join(what), path=root, hint=hint)
