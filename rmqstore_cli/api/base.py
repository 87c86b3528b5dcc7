"""What :class:`~rmqstore_cli.api.store.Store` and the classes holding its methods share.

Store's answers are grouped by subject in mixin classes of their own modules
(api/incidents.py, api/timers.py, api/jobs.py), which Store inherits. Each mixin is a
:class:`StoreView`: the part of a Store its methods use, so each module is type-checked
without importing Store (no import circle).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rmqstore_cli.errors import UsageError
from rmqstore_cli.times import now_ms, parse_time

if TYPE_CHECKING:
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.records.filters import MessageFilter

#: What a time argument may be: epoch milliseconds, an aware (or local) datetime, or a string
#: in the command line's forms (ISO 8601, epoch seconds/milliseconds by digits, now, -2h).
TimeLike = int | _dt.datetime | str


def to_ms(value: TimeLike | None, name: str, tz: _dt.tzinfo | None = None) -> int | None:
    """Epoch milliseconds of a time argument (None stays None). A naive datetime is in
    ``tz`` (or the local zone), as a time without a zone is on the command line."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise UsageError(f"{name}: {value!r} is not a time")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=tz) if tz else value.astimezone()
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        return parse_time(value, name, tz=tz)
    raise UsageError(f"{name}: {value!r} is not a time", hint="give epoch milliseconds, a datetime or a string")


def at_ms(now: TimeLike | None, tz: _dt.tzinfo | None = None) -> int:
    """A ``now`` argument in epoch milliseconds: the clock's now when not given."""
    at = to_ms(now, "now", tz)
    return now_ms() if at is None else at


def check_range(start: int | None, stop: int | None) -> None:
    """Refuse a physical-offset range ``[start, stop)`` that runs backwards."""
    if start is not None and stop is not None and start > stop:
        raise UsageError(f"from_offset {start} lies after to_offset {stop}", hint="the range is [from, to)")


def positive_counts(**counts: int | None) -> None:
    """Refuse a count given as zero or less (``sample``, ``max_bytes``): None is "not given"."""
    for name, v in counts.items():
        if v is not None and v < 1:
            raise UsageError(f"{name} {v}: not a positive count")


def chosen_states(state: str | list[str] | None, known: tuple[str, ...], limit: int | None) -> tuple[str, ...] | None:
    """The ``state`` argument of an incident answer as a tuple (None: every state), each one
    of ``known``; and ``limit``, when given, a count."""
    states = (state,) if isinstance(state, str) else None if state is None else tuple(state)
    for s in states or ():
        if s not in known:
            raise UsageError(f"state {s!r}: not {', '.join(known)}")
    if limit is not None and limit < 0:
        raise UsageError(f"limit {limit}: not a count")
    return states


class Opener(Protocol):
    """How a store was named (``api.store.StoreOpener``): a fresh configuration on demand."""

    @property
    def broker_conf(self) -> Path | None: ...

    @property
    def sizes(self) -> dict[str, int | None]: ...

    def config(self) -> StoreConfig: ...


class StoreView(Protocol):
    """The part of a Store the mixins' methods use (Store is the one implementation)."""

    opener: Opener
    tz: _dt.tzinfo | None

    @property
    def engine(self) -> MessageStore: ...

    @property
    def path(self) -> Path: ...

    @property
    def config(self) -> StoreConfig: ...

    #: Store.filter: the engine's filter for a topic, a time window and keys.
    filter: Callable[..., MessageFilter]

    def _walk(
        self, flt: MessageFilter, start: int | None, stop: int | None, check_crc: bool
    ) -> Iterator[tuple[Any, Any]]: ...

    def _reopen(self) -> None: ...
