"""Replay a ``dump-commitlog --format jsonl --body base64`` stream as append specs.

Offsets, times, hosts, flags, magic and the raw PROPERTIES bytes are kept, so a whole
dump replays into a byte-identical commit log.
"""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import TextIO

from rmqstore_cli.errors import UsageError
from rmqstore_cli.formats.commitlog import MAGIC_V1, MAGIC_V2
from rmqstore_cli.formats.properties import serialize_properties
from rmqstore_cli.store.commitlog import AppendSpec
from rmqstore_cli.store.message import host_bytes

_REQUIRED = ("topic", "queue_id", "store_timestamp", "born_timestamp", "born_host", "store_host")


def read_dump(src: TextIO, name: str) -> Iterator[AppendSpec]:
    for lineno, line in enumerate(src, 1):
        if not line.strip():
            continue
        try:
            yield spec_from_record(json.loads(line))
        except (ValueError, KeyError, TypeError, binascii.Error) as e:
            raise UsageError(f"{name}:{lineno}: not a dump-commitlog record: {e}",
                             hint="produce it with dump-commitlog --format jsonl --body base64") from None


def spec_from_record(r: dict) -> AppendSpec:
    missing = [k for k in _REQUIRED if k not in r]
    if missing:
        raise KeyError(f"missing {', '.join(missing)}")
    if "properties_base64" in r:
        props: str | bytes = base64.b64decode(r["properties_base64"])
    elif "properties_string" in r:
        props = r["properties_string"]
    else:
        props = serialize_properties((r.get("properties") or {}).items(), trailing_separator=True)
    return AppendSpec(
        topic=r["topic"],
        queue_id=int(r["queue_id"]),
        body=_body(r),
        properties=props,
        store_timestamp=int(r["store_timestamp"]),
        born_timestamp=int(r["born_timestamp"]),
        born_host=host_bytes(r["born_host"]),
        store_host=host_bytes(r["store_host"]),
        flag=int(r.get("flag", 0)),
        sys_flag=int(r.get("sys_flag", 0)),
        reconsume_times=int(r.get("reconsume_times", 0)),
        prepared_transaction_offset=int(r.get("prepared_transaction_offset", 0)),
        magic=MAGIC_V2 if r.get("magic") == "v2" else MAGIC_V1,
        queue_offset=r.get("queue_offset"),
        physical_offset=r.get("physical_offset"),
        raw_properties=True,
    )


def _body(r: dict) -> bytes:
    if "body_base64" in r:
        return base64.b64decode(r["body_base64"], validate=True)
    if "body" not in r:
        if r.get("body_size", 0):
            raise ValueError("the record has no body (dump with --body base64)")
        return b""
    enc = r.get("body_encoding", "base64")
    if enc == "base64":
        return base64.b64decode(r["body"], validate=True)
    if enc == "hex":
        return bytes.fromhex(r["body"])
    raise ValueError(f"a {enc} body cannot be replayed exactly (dump with --body base64)")
