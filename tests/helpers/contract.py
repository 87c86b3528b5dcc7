"""The scripting contract's tools (docs/conventions.md, "Scripting"): validate a record against its schema
in schemas/, and run the CLI on a pseudo-terminal (tests/docs/test_contract.py and the
command tests that check their own records)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jsonschema  # the test extra
from referencing import Registry, Resource  # jsonschema's own dependency

from tests.helpers import ROOT

SCHEMAS = ROOT / "schemas"
#: The schema names validated against so far in this session (test_contract's last test).
USED: set[str] = set()


def _registry() -> Registry:
    return Registry().with_resources(
        (p.name, Resource.from_contents(json.loads(p.read_text(encoding="utf-8")))) for p in SCHEMAS.glob("*.json")
    )


REGISTRY = _registry()


def validate(record, kind: str) -> None:
    """``record`` is valid against ``schemas/<kind>.json`` (formats checked too)."""
    schema = json.loads((SCHEMAS / f"{kind}.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema, registry=REGISTRY, format_checker=jsonschema.FormatChecker()).validate(
        record
    )
    USED.add(kind)


def on_pty(args, env) -> bytes:
    """``python -m rmqstore_cli ARGS`` with a pseudo-terminal as stdin, stdout and stderr:
    everything it wrote."""
    import pty

    m, s = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)], stdin=s, stdout=s, stderr=s, env=env, close_fds=True
    )
    os.close(s)
    out = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            d = os.read(m, 65536)
        except OSError:
            break
        if not d:
            break
        out += d
    p.wait(timeout=60)
    os.close(m)
    return out
