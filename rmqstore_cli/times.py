"""Time options: ISO 8601 (local zone if none), epoch seconds or milliseconds, ``now``,
relative ``-90m``.

A plain number is read by its number of digits, never guessed from its value: 10 digits are
epoch seconds (what ``date +%s`` prints, 2001-09-09 to 2286-11-20), 13 or more digits epoch
milliseconds (what the store and Java's ``currentTimeMillis`` hold), and ``0`` is the epoch.
Any other plain number (``20261122`` is ISO 8601's basic date form) must read as ISO 8601,
or it is refused with that rule as the hint.
"""

from __future__ import annotations

import datetime as _dt
import re
import time

from rmqstore_cli.errors import UsageError

_REL = re.compile(r"^([+-])(\d+)(ms|s|m|h|d|w)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_PLAIN = re.compile(r"-?[0-9]+")
LONG_MAX = (1 << 63) - 1
#: The rule, for every time option's --help (the README's Conventions say the same).
EPOCH_RULE = "a plain number is epoch seconds if it has 10 digits (date +%s), epoch milliseconds if 13 or more"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_tz(name: str | None) -> _dt.tzinfo | None:
    """``--tz``: an IANA name, ``UTC`` or ``+HH:MM``; None means the local zone."""
    if not name:
        return None
    if name.upper() in ("UTC", "Z"):
        return _dt.timezone.utc
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", name)
    if m:
        delta = _dt.timedelta(hours=int(m[2]), minutes=int(m[3]))
        return _dt.timezone(delta if m[1] == "+" else -delta)
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:
        raise UsageError(
            f"unknown time zone {name!r}", hint="use an IANA name such as Asia/Shanghai, or +08:00"
        ) from None


def parse_time(value: str, option: str, now: int | None = None, tz: _dt.tzinfo | None = None) -> int:
    """Epoch milliseconds for a time option value."""
    v = value.strip()
    now = now_ms() if now is None else now
    if v == "now":
        return now
    m = _REL.match(v)
    if m:
        delta = int(m[2]) * _UNIT_MS[m[3]]
        return now + delta if m[1] == "+" else now - delta
    if _PLAIN.fullmatch(v):
        ms = _epoch(v, option, value)
        if ms is not None:
            return ms
    return _iso_ms(v, option, value, tz)


def _iso_ms(v: str, option: str, value: str, tz: _dt.tzinfo | None) -> int:
    """Epoch milliseconds of an ISO 8601 time (``Z`` for UTC; without a zone in ``tz``, else
    the local zone); what is no time is a UsageError saying the forms a time may take."""
    try:
        t = _dt.datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
    except ValueError:
        if _PLAIN.fullmatch(v):
            raise UsageError(
                f"{option}: {value!r} is neither epoch seconds nor epoch milliseconds",
                hint=f"{EPOCH_RULE}; or use ISO 8601 (2026-11-22T03:10)",
            ) from None
        raise UsageError(
            f"{option}: cannot read time {value!r}",
            hint="use ISO 8601 (2026-11-22T03:10), epoch seconds (10 digits) or milliseconds "
            "(13 digits), now, or -90m/-2h/-7d",
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=tz) if tz else t.astimezone()
    return int(t.timestamp() * 1000)


def _epoch(v: str, option: str, value: str) -> int | None:
    """Milliseconds for a plain number by its digits (module docstring), None if the digit
    count says neither seconds nor milliseconds."""
    n = int(v)
    digits = len(v.lstrip("-"))
    if n == 0:
        return 0
    if digits == 10:
        return n * 1000
    if digits >= 13:
        if abs(n) > LONG_MAX:
            raise UsageError(f"{option}: {value!r} lies beyond Long.MAX_VALUE milliseconds", hint=f"at most {LONG_MAX}")
        return n
    return None


def check_window(begin: int | None, end: int | None, tz: _dt.tzinfo | None = None) -> None:
    """A reversed ``--begin``/``--end`` window is a usage error in every command (never an
    empty answer that looks like "nothing matched")."""
    if begin is not None and end is not None and begin > end:
        raise UsageError(
            f"--begin ({format_ms(begin, tz)}) lies after --end ({format_ms(end, tz)})",
            hint="the window is [--begin, --end]: swap them",
        )


def parse_duration(value: str, option: str) -> int:
    """Milliseconds for ``90m``, ``2h``, ``7d`` …"""
    m = _DURATION.match(value.strip())
    if not m:
        raise UsageError(f"{option}: cannot read duration {value!r}", hint="use e.g. 30s, 90m, 2h, 7d")
    return int(m[1]) * _UNIT_MS[m[2]]


def format_ms(ms: int, tz: _dt.tzinfo | None = None) -> str:
    """Milliseconds as ``YYYY-MM-DD HH:MM:SS.mmm`` in ``tz`` (local if None)."""
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz) if tz else _dt.datetime.fromtimestamp(ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"


def format_age(ms: int) -> str:
    """A duration for people, to the two largest units: 45s, 12m, 3h20m, 4d2h."""
    sec = max(0, ms) // 1000
    d, h, m = sec // 86400, sec // 3600 % 24, sec // 60 % 60
    return f"{d}d{h}h" if d else f"{h}h{m}m" if h else f"{m}m" if m else f"{sec}s"
