"""One changed field of one DLedger entry header, on the real 4.9.7 DLedger sample: verify ends
(a watchdog turns a hang into a failure), and names the data file and the entry's offset the
way ``DLedgerMmapFileStore#recover`` (openmessaging/dledger 0.3.1.2) judges the entry.

``recover`` checks, per entry: magic (1), pos == its position, bodySize + 48 == size, size > 44,
index == the previous + 1, term >= the previous; then the ``index/`` unit (magic, pos, size,
index, term; a difference rewrites the index from there). It breaks its loop at the first entry
that fails and truncates the log there (``recovery.truncate``). channel, chainCrc and bodyCrc
are read and ignored (``DLedgerEntryCoder#encode`` writes the 0 no caller changes).

Issue 31: a changed size field made verify's resync find the record inside the same entry
again and loop forever.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
from rmqstore_cli.formats.derive import field_offset
from rmqstore_cli.formats.dledger import EntryHeader

FIELDS = [sc.name for sc in EntryHeader.subcons]
DELTAS = (-48, -8, -4, -1, 1, 4, 8, 48, 100, 4000)
#: the entries changed: the first, the fourth (as issue 31 found) and the last of the 300
ENTRIES = (0, 3, 299)
#: fields recover checks on the entry itself: the finding is at the entry
AT_ENTRY = {"magic", "size", "pos", "body_size"}
#: fields recover ignores
IGNORED = {"channel", "chain_crc", "body_crc"}
DATA = "dledger-n9/data/00000000000000000000"
INDEX = "dledger-n9/index/00000000000000000000"


@pytest.fixture(scope="module")
def sample_copy(sample_tarball, tmp_path_factory):
    """A writable copy of the sample (holes kept: its DLedger index file is 160 MiB of hole),
    and the start of every entry in its one data file."""
    d = sample_tarball("dledger")
    dest = tmp_path_factory.mktemp("dledger-damage") / "store"
    subprocess.run(["cp", "-r", "--sparse=always", str(d / "store"), str(dest)], check=True)
    data = (dest / DATA).read_bytes()
    size_at = field_offset(EntryHeader, "size")
    starts, pos = [], 0
    while len(starts) < 300:
        starts.append(pos)
        pos += int.from_bytes(data[pos + size_at : pos + size_at + 4], "big", signed=True)
    return dest, d / "broker.conf", starts


@contextmanager
def watchdog(seconds: int, what: str):
    """Raise in this thread when the body runs longer than ``seconds`` (a Python-level loop
    is interrupted between bytecodes): a regression fails instead of hanging the suite."""

    def boom(*_):
        raise TimeoutError(f"{what} did not end within {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def changed(path: Path, at: int, field: str, delta: int):
    """The file with ``field`` of the entry at ``at`` moved by ``delta`` (wrapping like Java's
    int/long), restored afterwards."""
    sub = next(sc.subcon for sc in EntryHeader.subcons if sc.name == field)
    width = sub.sizeof()
    off = at + field_offset(EntryHeader, field)
    original = path.read_bytes()
    value = int.from_bytes(original[off : off + width], "big", signed=True) + delta
    half = 1 << (8 * width - 1)
    new = ((value + half) % (2 * half) - half).to_bytes(width, "big", signed=True)
    path.write_bytes(original[:off] + new + original[off + width :])
    try:
        yield
    finally:
        path.write_bytes(original)


def _verify(store: Path, conf: Path) -> tuple[list[dict], int]:
    """The findings and where the log's data ends (``commitlog_end_offset``)."""
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.verify import Verifier, open_for_verify

    v = Verifier(open_for_verify(StoreConfig.load(store, conf)))
    found = [f.as_dict() for f in v.run()]
    return found, v.summary["commitlog_end_offset"]


def _recovery_cut(found: list[dict], end: int) -> int:
    """Where the broker's recovery ends the log: a ``recovery.truncate``, or the data's end when
    the damage is in the last entry (nothing after it to lose)."""
    cut = [f["physical_offset"] for f in found if f["check"] == "recovery.truncate"]
    return cut[0] if cut else end


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "reference"])
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("field", FIELDS)
def test_one_changed_header_field_is_found_at_its_entry(sample_copy, monkeypatch, field, entry, pure):
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS

    monkeypatch.setattr(FAST_PATHS, "pure", pure)
    store, conf, starts = sample_copy
    at = starts[entry]
    nxt = starts[entry + 1] if entry + 1 < len(starts) else None
    for delta in DELTAS:
        case = f"{field} {delta:+d} on entry {entry}"
        with changed(store / DATA, at, field, delta), watchdog(20, f"verify ({case})"):
            found, end = _verify(store, conf)
        for f in found:  # every finding names a file of the store and an offset in it, or none
            assert f["file"] and (f["offset"] is None or f["offset"] >= 0), (case, f)
        errors = [f for f in found if f["severity"] == "error"]
        here = {(f["check"], f["file"], f["offset"]) for f in found}
        if field in IGNORED:
            assert not errors, (case, errors)
            assert ("dledger.unused-field", DATA, at) in here, (case, found)
        elif field in AT_ENTRY:
            assert ("dledger.entry", DATA, at) in here, (case, found)
            assert _recovery_cut(found, end) == at, case  # recover breaks at this entry
        elif field == "term" and delta > 0 and nxt is None:  # the last entry's term rises: recover takes it
            assert ("dledger.index", INDEX, entry * 32) in here, (case, found)  # and rewrites its unit
        else:  # index or term: the order breaks at this entry or the next
            order = {f["offset"] for f in found if f["check"] == "dledger.order" and f["file"] == DATA}
            assert order & {at, nxt}, (case, found)
            assert _recovery_cut(found, end) in (at, nxt), case


@pytest.mark.parametrize("entry, delta", [(0, -8), (0, 8), (3, 4000)])
def test_verify_cli_ends_on_a_changed_size_field(sample_copy, tmp_path, entry, delta):
    """Issue 31 as found: the command itself, in its own process, under a timeout."""
    store, conf, starts = sample_copy
    with changed(store / DATA, starts[entry], "size", delta):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmqstore_cli",
                "verify",
                "--store",
                str(store),
                "--broker-conf",
                str(conf),
                "--format",
                "jsonl",
            ],
            capture_output=True,
            timeout=120,
        )
    assert r.returncode == 1, r.stderr.decode()
    lines = [json.loads(x) for x in r.stdout.decode().splitlines()]
    first = lines[0]
    assert (first["check"], first["file"], first["offset"]) == ("dledger.entry", DATA, starts[entry])
    assert f"size {starts[entry + 1] - starts[entry] + delta}" in first["detail"]
    assert lines[-1]["summary"]["broker_start"]["starts"] is True  # it truncates, and starts
