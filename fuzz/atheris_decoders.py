#!/usr/bin/env python
"""Coverage-guided fuzzing (atheris, libFuzzer) of every decoder (issue #8).

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python fuzz/atheris_decoders.py -max_total_time=300 -rss_limit_mb=2048 fuzz/corpus/atheris

The first input byte picks a decoder; the rest is its input:

0  CommitLog check_message (the fast and the careful path), then every Message accessor
1  the construct declaration MessageRecord.parse (the tolerant forensic decoder)
2  properties parse (MessageDecoder#string2messageProperties)
3  offset msgId and UNIQ_KEY decoders, nearly time
4  an index file (header, slots, chain walk) from bytes
5  a consume-queue file (units, min/max offset) from bytes
6  the checkpoint reader

Allowed outcomes: a value, or the documented errors (StoreError, ValueError from the
msgId decoders, construct's ConstructError). Anything else, or a hang or runaway memory
(libFuzzer's -timeout/-rss_limit_mb), is a crash that libFuzzer saves as crash-<sha1>;
copy it into fuzz/corpus/atheris/ (seed inputs) and add a regression test.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path

try:
    import atheris
except ImportError:  # the suite replays the corpus through one_input without atheris
    atheris = None

with atheris.instrument_imports() if atheris else contextlib.nullcontext():
    import construct
    from rmqstore_cli.formats.commitlog import MessageRecord
    from rmqstore_cli.formats.properties import parse_properties

    from rmqstore_cli.errors import RmqstoreError
    from rmqstore_cli.store.commitlog import check_message
    from rmqstore_cli.store.layout.checkpoint import StoreCheckpoint
    from rmqstore_cli.store.queues.consume_queue import ConsumeQueue
    from rmqstore_cli.store.queues.index import IndexFile
    from rmqstore_cli.store.records.message import decode_offset_msg_id, decode_uniq_key

TMP = Path(tempfile.mkdtemp(prefix="rmqatheris-"))


def _message(m) -> None:
    for name in (
        "properties",
        "keys",
        "tags",
        "uniq_key",
        "topic",
        "born_host",
        "store_host",
        "msg_id",
        "body_size",
        "version",
        "transaction_type",
    ):
        getattr(m, name)


def one_input(data: bytes) -> None:
    if not data:
        return
    which, rest = data[0] % 7, data[1:]
    if which == 0:
        for crc in (False, True):
            c = check_message(rest, 0, len(rest), 0, check_crc=crc, force_prop_crc=crc and len(rest) % 2 == 0)
            assert c.size <= len(rest)
            if c.message is not None:
                _message(c.message)
    elif which == 1:
        try:
            MessageRecord.parse(rest)
        except construct.ConstructError:
            pass
    elif which == 2:
        parse_properties(rest.decode("utf-8", "replace"))
    elif which == 3:
        text = rest.decode("latin-1")
        for fn in (decode_offset_msg_id, decode_uniq_key):
            try:
                v = fn(text)
            except ValueError:
                continue
            if fn is decode_uniq_key:
                _ = v.ip_str
                v.nearly_time(1_767_225_600_000)
            else:
                _ = v.store_host
    elif which == 4:
        p = TMP / "20260101000000000"
        p.write_bytes(rest)
        try:
            f = IndexFile(p, 4, 8)
            for key in ("T#k", "T#" + rest[:8].decode("latin-1")):
                f.select_phy_offset(key, 64, 0, 1 << 62)
            f.close()
        except RmqstoreError:
            pass
    elif which == 5:
        d = TMP / "cq" / "T" / "0"
        d.mkdir(parents=True, exist_ok=True)
        for old in d.iterdir():
            old.unlink()
        (d / "00000000000000000000").write_bytes(rest)
        try:
            cq = ConsumeQueue(TMP / "cq", "T", 0, 200)
            _ = cq.max_offset
            cq.min_offset(0)
            for _ in cq.units():
                pass
        except RmqstoreError:
            pass
    else:
        p = TMP / "checkpoint"
        p.write_bytes(rest)
        try:
            StoreCheckpoint.read(p)
        except RmqstoreError:
            pass


def main() -> None:
    os.environ.setdefault("NO_COLOR", "1")
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
