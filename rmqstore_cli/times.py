"""Time options: ISO 8601 (local zone if none), epoch ms, ``now``, relative ``-90m``."""
from __future__ import annotations

import datetime as _dt
import re
import time

from rmqstore_cli.errors import UsageError

_REL = re.compile(r"^([+-])(\d+)(ms|s|m|h|d|w)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")


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
        raise UsageError(f"unknown time zone {name!r}", hint="use an IANA name such as Asia/Shanghai, or +08:00")


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
    if re.fullmatch(r"-?\d{10,}", v):
        return int(v)
    try:
        t = _dt.datetime.fromisoformat(v.replace("Z", "+00:00") if v.endswith("Z") else v)
    except ValueError:
        raise UsageError(f"{option}: cannot read time {value!r}",
                         hint="use ISO 8601 (2026-11-22T03:10), epoch ms, now, or -90m/-2h/-7d") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=tz) if tz else t.astimezone()
    return int(t.timestamp() * 1000)


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
