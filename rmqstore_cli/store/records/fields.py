"""A record's JSON object from its dataclass fields, for the records whose fields are their keys."""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def fields_dict(rec: Any, *optional: str) -> dict[str, Any]:
    """``rec``'s fields in their declared order, which is the order of the JSON keys the command
    line prints; an ``optional`` field is left out while it is None or False (a key the
    command line prints only when it has something to say)."""
    d = {f.name: getattr(rec, f.name) for f in fields(rec)}
    for name in optional:
        if d[name] is None or d[name] is False:
            del d[name]
    return d


def keys_dict(rec: Any, keys: str) -> dict[str, Any]:
    """The attributes ``keys`` (names separated by spaces, in the JSON's order) of ``rec``, for a
    record whose JSON object orders its fields otherwise or adds a property."""
    return {k: getattr(rec, k) for k in keys.split()}
