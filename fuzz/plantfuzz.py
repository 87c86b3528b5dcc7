#!/usr/bin/env python
"""Planted hostile files × every command, with "nothing outside the store changed" (issue 22).

    .venv/bin/python fuzz/plantfuzz.py --cases 300 --seed 1 [--per-case 3] [--time-box 900]

``storefuzz`` damages the *bytes* of store files; this harness plants hostile *things*
where a store file belongs, one per case, chosen by a seeded RNG from :data:`PLANTS`:
symlinks (to a sentinel file outside the store, to another store file, dangling, to a
directory; data directories replaced by links to copies outside; links at the temp and
journal names the mutating commands write), FIFOs, links to ``/dev/zero``, huge sparse
files, huge and deeply nested JSON, crafted file names, crafted record times, and a
read-only or full file system under the store.

Each case runs a seeded selection of :data:`COMMANDS` (``--per-case 0``: all of them),
each as a subprocess on a fresh copy of the planted store, under a time limit (a hang),
``RLIMIT_AS`` (unbounded memory is a ``MemoryError`` traceback) and ``RLIMIT_FSIZE``
(an unbounded write dies of ``SIGXFSZ`` instead of filling the disk). A run *fails* when

- stderr holds a traceback, or the exit code is not one of 0–6, or the process died of
  a signal (SIGBUS, SIGSEGV, SIGXFSZ, SIGKILL), or it did not end in time;
- it failed (exit 2–4) without exactly one ``rmqstore: error:`` line;
- anything outside the store changed: every entry of the case directory but the store
  and the command's own output directory (the sentinel files and directories the plants
  link to, and "no new file anywhere") is compared by type, size, mtime, link target and
  content hash before and after;
- a read command changed the store.

The harness hides nothing: ``tests/safety/test_plantfuzz.py`` runs one case per plant kind and
marks the ones known to fail there, not here. Results: ``fuzz/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"  # the real brokers' samples (tests/fixtures/README.md)
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5, 6}  # 5, 6: output not written (export's dataset on a full disk)
TRACEBACK = "Traceback (most recent call last)"
GEN_SIZES = {
    "mappedFileSizeCommitLog": 16384,
    "mappedFileSizeConsumeQueue": 400,
    "maxHashSlotNum": 16,
    "maxIndexNum": 100,
}
JOURNAL = ".rebuild-index.journal"
#: Files of more than this are hashed by size and their first and last MiB only (sparse plants).
HASH_WHOLE = 64 << 20


# ------------------------------------------------------------------ snapshots


def _digest(p: Path, size: int) -> str:
    h = hashlib.sha256()
    with open(p, "rb", buffering=0) as fh:
        if size <= HASH_WHOLE:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        else:
            h.update(fh.read(1 << 20))
            fh.seek(size - (1 << 20))
            h.update(fh.read(1 << 20))
    return h.hexdigest()


def snapshot(top: Path, skip: set[Path] = frozenset()) -> dict[str, tuple]:
    """Every entry under ``top`` (never following a link, never opening a FIFO or device):
    type, size, mtime, link target or content hash. ``skip`` directories are left out."""
    out: dict[str, tuple] = {}
    if not top.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        d = Path(dirpath)
        keep = []
        for n in dirnames:
            p = d / n
            if p in skip:
                continue
            st = os.lstat(p)
            if os.path.islink(p):
                out[str(p.relative_to(top))] = ("link", os.readlink(p))
            else:
                out[str(p.relative_to(top))] = ("dir", st.st_mode & 0o7777)
                keep.append(n)
        dirnames[:] = keep
        for n in filenames:
            p = d / n
            rel = str(p.relative_to(top))
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                out[rel] = ("file", st.st_size, st.st_mtime_ns, _digest(p, st.st_size))
            else:
                out[rel] = ("other", st.st_mode)
    return out


def diff(before: dict, after: dict) -> list[str]:
    """What changed between two snapshots: '+new', '-gone', '~changed' entries."""
    out = []
    for k in sorted(set(before) | set(after)):
        if k not in before:
            out.append("+" + k)
        elif k not in after:
            out.append("-" + k)
        elif before[k] != after[k]:
            out.append("~" + k)
    return out


# ------------------------------------------------------------------ base stores


@dataclass
class Base:
    """A pristine store to plant into: its directory, broker.conf and a probe."""

    name: str
    store: Path
    conf: Path
    key: str = "k"
    msg_id: str | None = None
    topic: str = "T"
    queue_id: int = 0


def _rmq_args() -> list[str]:
    return [sys.executable, "-m", "rmqstore_cli"]


def generated_base(work: Path, messages: int = 300) -> Base:
    """A small generated store (16 KiB commit-log files, so a dozen files of each kind)."""
    d = work / "base-gen"
    store, conf = d / "store", d / "broker.conf"
    if not store.exists():
        d.mkdir(parents=True, exist_ok=True)
        conf.write_text("".join(f"{k}={v}\n" for k, v in GEN_SIZES.items()))
        subprocess.run(
            [
                *_rmq_args(),
                "generate",
                "--store",
                str(store),
                "--broker-conf",
                str(conf),
                "--messages",
                str(messages),
                "--seed",
                "3",
                "--span",
                "2h",
                "--format",
                "json",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return probe(Base("generated", store, conf))


def fixture_bases(work: Path) -> list[Base]:
    """The real-broker samples, copied writable (the fixtures are read-only)."""
    out = []
    for v in ("4.9.7", "5.3.3"):
        src = FIXTURES / f"rocketmq-{v}-sample"
        if not (src / "store").is_dir():
            continue
        d = work / f"base-{v}"
        if not d.exists():
            subprocess.run(["cp", "-a", str(src), str(d)], check=True)
            subprocess.run(["chmod", "-R", "u+w", str(d)], check=True)
        out.append(probe(Base(v, d / "store", d / "broker.conf")))
    return out


def probe(b: Base) -> Base:
    """A key, a msgId, a topic and queue of a message of the pristine store."""
    r = subprocess.run(
        [
            *_rmq_args(),
            "dump-commitlog",
            "--store",
            str(b.store),
            "--broker-conf",
            str(b.conf),
            "--format",
            "jsonl",
            "--limit",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if d.get("keys"):
            b.key, b.msg_id, b.topic, b.queue_id = d["keys"][0], d["msg_id"], d["topic"], d["queue_id"]
            break
    return b


# ------------------------------------------------------------------ plants


@dataclass
class Ctx:
    """One case: ``case/store`` (planted), ``case/outside`` (sentinels), the RNG."""

    case: Path
    store: Path
    outside: Path
    rng: random.Random
    base: Base
    fs: str | None = None  # "ro" or "full": the store lives on a tmpfs mounted at case/fs

    @property
    def run_store(self) -> Path:
        """Where the commands will see the store (absolute paths planted in files use it)."""
        return self.case / "store"

    def files(self, kind: str) -> list[Path]:
        s = self.store
        pat = {"commitlog": "commitlog/*", "cq": "consumequeue/*/*/*", "index": "index/*"}[kind]
        return sorted(p for p in s.glob(pat) if p.is_file() and not p.is_symlink())

    def target(self, name: str) -> Path:
        """The store file a plant replaces, by role (created if the store has none)."""
        s = self.store
        if name == "commitlog-last":
            return self.files("commitlog")[-1]
        if name == "commitlog-first":
            return self.files("commitlog")[0]
        if name in ("cq", "index"):
            return self.rng.choice(self.files(name))
        if name == "topics.json":
            p = s / "config" / "topics.json"
            if not p.exists():
                p.parent.mkdir(exist_ok=True)
                topics = sorted(x.name for x in (s / "consumequeue").iterdir())
                p.write_text(
                    json.dumps(
                        {
                            "topicConfigTable": {
                                t: {"topicName": t, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for t in topics
                            }
                        }
                    )
                )
            return p
        if name == "journal":
            return s / JOURNAL
        return s / name  # checkpoint, lock, checkpoint.tmp, ...

    def sentinel(self, name: str, data: bytes | None = None) -> Path:
        """A file outside the store with known bytes."""
        p = self.outside / f"sentinel-{name.replace('/', '_')}"
        p.write_bytes(data if data is not None else b"SENTINEL " + name.encode() + b"\n" * 64)
        return p


def _replace_with_link(p: Path, to: str | Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()
    p.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(to, p)


FILE_ROLES = ["commitlog-last", "commitlog-first", "cq", "index", "checkpoint", "lock", "topics.json"]
DIR_ROLES = ["commitlog", "consumequeue", "consumequeue/T", "index", "config"]
TEMP_NAMES = ["checkpoint.tmp", "config/topics.json.tmp", JOURNAL, JOURNAL + ".tmp", "lock"]
SPECIAL_ROLES = ["lock", "checkpoint", "topics.json", "cq", "commitlog-last", "journal"]


def link_out(c: Ctx, role: str) -> str:
    """A data file replaced by a link to a file outside the store holding its bytes."""
    p = c.target(role)
    s = c.sentinel(role, p.read_bytes() if p.exists() else None)
    _replace_with_link(p, s)
    return f"{p.relative_to(c.store)} -> outside file"


def link_in(c: Ctx, role: str) -> str:
    """A data file replaced by a (relative) link to another file inside the store."""
    p = c.target(role)
    kind = role.split("-")[0] if role.startswith(("commitlog", "cq", "index")) else "commitlog"
    others = [q for q in c.files(kind) if q != p] or c.files("commitlog")
    q = c.rng.choice(others)
    _replace_with_link(p, os.path.relpath(q, p.parent))
    return f"{p.relative_to(c.store)} -> {q.relative_to(c.store)}"


def link_dangling(c: Ctx, role: str) -> str:
    """A data file replaced by a link to a missing file outside the store."""
    p = c.target(role)
    _replace_with_link(p, c.outside / f"missing-{role}")
    return f"{p.relative_to(c.store)} -> missing outside"


def link_dir(c: Ctx, role: str) -> str:
    """A data file replaced by a link to a directory outside the store (holding a file)."""
    p = c.target(role)
    d = c.outside / f"dir-{role}"
    d.mkdir()
    (d / "inside").write_bytes(b"sentinel in a directory\n")
    _replace_with_link(p, d)
    return f"{p.relative_to(c.store)} -> outside directory"


def dir_link(c: Ctx, role: str) -> str:
    """A data directory replaced by a link to a copy of it outside the store."""
    if role == "consumequeue/T":
        role = "consumequeue/" + c.rng.choice(sorted(x.name for x in (c.store / "consumequeue").iterdir()))
    if role == "config":
        c.target("topics.json")
    p = c.store / role
    d = c.outside / ("dircopy-" + role.replace("/", "_"))
    shutil.move(str(p), str(d))
    os.symlink(d, p)
    return f"{role}/ -> outside copy"


def temp_link(c: Ctx, name: str) -> str:
    """A link planted at a temp or journal name a mutating command writes."""
    p = c.store / name
    if c.rng.random() < 0.5 or name == "lock":
        _replace_with_link(p, c.outside / f"missing-{name.replace('/', '_')}")
        return f"{name} -> missing outside (dangling)"
    _replace_with_link(p, c.sentinel(name))
    return f"{name} -> outside file"


def journal_through_link(c: Ctx, state: str) -> str:
    """A journal whose paths go through a symlinked directory inside the store: its
    ``abspath`` lies inside, its real path outside (``--recover`` must not delete there)."""
    victim = c.outside / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "keep").write_bytes(b"must survive\n")
    (victim / "keep").write_bytes(b"must survive\n")
    os.symlink(victim, c.store / "lnk")
    s = str(c.run_store)
    j = {
        "id": "x",
        "state": state,
        "staging": f"{s}/.rebuild-index-x",
        "parts": [[f"{s}/index", f"{s}/.rebuild-index-x/index", f"{s}/lnk/sub", "replace"]],
        "checkpoint": None,
        "no_backup": True,
        "marker": ".rebuild-x",
        "options": {},
        "backup_dirs": [f"{s}/lnk/sub"],
    }
    if state == "building":  # the staging directory itself is a link outside
        os.symlink(victim, c.store / ".rebuild-index-x")
    (c.store / JOURNAL).write_text(json.dumps(j))
    return f"{JOURNAL} state={state} through store/lnk -> outside"


def fifo(c: Ctx, role: str) -> str:
    p = c.target(role)
    if p.exists() or p.is_symlink():
        p.unlink()
    os.mkfifo(p)
    return f"{p.relative_to(c.store)} is a FIFO"


def dev_zero(c: Ctx, role: str) -> str:
    p = c.target(role)
    _replace_with_link(p, "/dev/zero")
    return f"{p.relative_to(c.store)} -> /dev/zero"


SPARSE = {
    "checkpoint": 8 << 30,
    "cq": 4 << 30,
    "commitlog-last": 4 << 30,
    "index": 4 << 30,
    "topics.json": 1 << 30,
    "journal": 1 << 30,
}


def sparse(c: Ctx, role: str) -> str:
    """A huge sparse file (no disk used): the head keeps its bytes, the rest is a hole."""
    p = c.target(role)
    if not p.exists():
        p.write_bytes(b"{")
    os.truncate(p, SPARSE[role])
    return f"{p.relative_to(c.store)} sparse {SPARSE[role] >> 30} GiB"


_HUGE_CACHE: dict[int, Path] = {}


def huge_topics(n: int) -> bytes:
    """A broker-shaped topics.json of ``n`` topics, built in one join (~1 s for 2.5 M)."""
    return b"".join(
        [
            b'{"topicConfigTable":{',
            b",".join(
                b'"T%d":{"topicName":"T%d","readQueueNums":4,"writeQueueNums":4,"perm":6}' % (i, i) for i in range(n)
            ),
            b'},"dataVersion":{"counter":1}}',
        ]
    )


def huge_json(c: Ctx, role: str) -> str:
    """topics.json (or the journal) of ~200 MB: 2.5 M topics, written once per run and copied."""
    n = 2_500_000
    cache = c.case.parent / f"huge-topics-{n}.json"
    if not cache.exists():
        cache.write_bytes(huge_topics(n))
    p = c.target(role)
    shutil.copyfile(cache, p)
    return f"{p.relative_to(c.store)} {cache.stat().st_size >> 20} MB, {n} topics"


def nested_json(c: Ctx, role: str) -> str:
    depth = 200_000
    p = c.target(role)
    opener = c.rng.choice([b"[", b'{"a":'])
    closer = b"]" if opener == b"[" else b"}"
    p.write_bytes(b'{"topicConfigTable":' + opener * depth + b"1" + closer * depth + b"}")
    return f"{p.relative_to(c.store)} nested {depth} deep ({opener.decode()})"


def crafted_name(c: Ctx, what: str) -> str:
    s = c.store
    cl = c.files("commitlog")
    cq = c.files("cq")
    if what == "commitlog-int64":
        q = s / "commitlog" / "99999999999999999999"
        shutil.copyfile(cl[-1], q)
    elif what == "commitlog-9223372036854775807":
        q = s / "commitlog" / "09223372036854775807"
        shutil.copyfile(cl[-1], q)
    elif what == "index-int64":
        q = s / "index" / "99999999999999999999"
        shutil.copyfile(c.files("index")[-1], q)
    elif what == "cq-int64":
        q = cq[0].parent / "99999999999999999999"
        shutil.copyfile(cq[0], q)
    elif what == "queue-int64":
        q = cq[0].parent.parent / "99999999999999999999" / "00000000000000000000"
        q.parent.mkdir()
        shutil.copyfile(cq[0], q)
    elif what == "topic-non-utf8":
        d = Path(os.fsdecode(os.fsencode(str(s / "consumequeue")) + b"/bad\xff\xfeT"))
        (d / "0").mkdir(parents=True)
        shutil.copyfile(cq[0], d / "0" / "00000000000000000000")
        q = d
    elif what == "topic-255":
        q = s / "consumequeue" / ("T" * 255) / "0" / "00000000000000000000"
        q.parent.mkdir(parents=True)
        shutil.copyfile(cq[0], q)
    elif what == "topic-newline":
        q = s / "consumequeue" / "T\nX" / "0" / "00000000000000000000"
        q.parent.mkdir(parents=True)
        shutil.copyfile(cq[0], q)
    elif what == "commitlog-newline":
        q = s / "commitlog" / "0000000000\n000000000"
        shutil.copyfile(cl[0], q)
    elif what == "index-newline":
        q = s / "index" / "2026\n1122032049141"
        shutil.copyfile(c.files("index")[0], q)
    else:
        raise ValueError(what)
    return f"{what}: {os.fsencode(str(q.relative_to(s)))!r}"


TIMES = [(1 << 63) - 1, -1, 0, -(1 << 63)]


def _records(data: bytes, limit: int = 200) -> list[int]:
    """Start offsets of the message records of one commit-log file (magic V1/V2 only)."""
    out, pos = [], 0
    while pos + 8 <= len(data) and len(out) < limit:
        size, magic = struct.unpack_from(">iI", data, pos)
        if size <= 0 or magic not in (0xDAA320A7, 0xDAA320A8) or pos + size > len(data):
            break
        out.append(pos)
        pos += size
    return out


def crafted_time(c: Ctx, field_: str) -> str:
    """storeTimestamp or bornTimestamp of a few records set to 2^63-1, -1, 0 or -2^63.
    Only the body CRC is stored per record and it does not cover times; a 5.x
    ``__CRC32#`` property (whole-record CRC) is left stale."""
    cl = c.files("commitlog")
    f = c.rng.choice(cl[:-1] or cl)
    data = bytearray(f.read_bytes())
    starts = _records(bytes(data))
    if not starts:
        return f"no records in {f.name}"
    value = c.rng.choice(TIMES)
    picked = c.rng.sample(starts, min(len(starts), c.rng.randint(1, 3)))
    for r in picked:
        sys_flag = struct.unpack_from(">i", data, r + 36)[0]
        born_len = 20 if sys_flag & 0x10 else 8
        off = r + 40 if field_ == "born" else r + 48 + born_len
        struct.pack_into(">q", data, off, value)
    f.write_bytes(bytes(data))
    return f"{field_}Timestamp={value} in {len(picked)} records of commitlog/{f.name}"


def fs_plant(c: Ctx, kind: str) -> str:
    """Marks the case: the store is copied onto a tmpfs, read-only or filled (see run_case)."""
    c.fs = kind
    if kind == "full":  # a hole at the end of the last commit-log file: reading it allocates
        f = c.files("commitlog")[-1]
        n = f.stat().st_size
        subprocess.run(["fallocate", "-p", "-o", str(n // 2), "-l", str(n - n // 2), str(f)], check=False)
    return f"store on a {'read-only' if kind == 'ro' else 'full'} tmpfs"


Plant = tuple[str, Callable[[Ctx, str], str], str]
PLANTS: list[Plant] = (
    [(f"link-out:{r}", link_out, r) for r in FILE_ROLES]
    + [(f"link-in:{r}", link_in, r) for r in FILE_ROLES]
    + [(f"link-dangling:{r}", link_dangling, r) for r in FILE_ROLES]
    + [(f"link-dir:{r}", link_dir, r) for r in FILE_ROLES]
    + [(f"dir-link:{r}", dir_link, r) for r in DIR_ROLES]
    + [(f"temp-link:{n}", temp_link, n) for n in TEMP_NAMES]
    + [(f"journal-link:{s}", journal_through_link, s) for s in ("cleanup", "building")]
    + [(f"fifo:{r}", fifo, r) for r in SPECIAL_ROLES]
    + [(f"dev-zero:{r}", dev_zero, r) for r in SPECIAL_ROLES]
    + [(f"sparse:{r}", sparse, r) for r in SPARSE]
    + [(f"huge-json:{r}", huge_json, r) for r in ("topics.json", "journal")]
    + [(f"nested-json:{r}", nested_json, r) for r in ("topics.json", "journal")]
    + [
        (f"name:{w}", crafted_name, w)
        for w in (
            "commitlog-int64",
            "commitlog-9223372036854775807",
            "index-int64",
            "cq-int64",
            "queue-int64",
            "topic-non-utf8",
            "topic-255",
            "topic-newline",
            "commitlog-newline",
            "index-newline",
        )
    ]
    + [(f"time:{w}", crafted_time, w) for w in ("store", "born")]
    + [(f"fs:{k}", fs_plant, k) for k in ("ro", "full")]
)
PLANT_BY_NAME = {p[0]: p for p in PLANTS}


def plant_kind(name: str) -> str:
    return name.split(":")[0]


# ------------------------------------------------------------------ commands

READ, MUTATE = "read", "mutate"


def _generate_args() -> list[str]:
    """generate into an existing store: ``--append`` if the CLI has it, else plain generate."""
    global _GEN
    if _GEN is None:
        h = subprocess.run([*_rmq_args(), "generate", "--help"], capture_output=True, text=True).stdout
        _GEN = ["--append"] if re.search(r"--append(?![-\w])", h) else []
    return _GEN


_GEN: list[str] | None = None
HAS_PYARROW = subprocess.run([sys.executable, "-c", "import pyarrow"], capture_output=True).returncode == 0


def commands(b: Base, store: Path, out: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (read|mutate, argv after ``rmqstore``). ``out`` is the run's own output dir."""
    s = ["--store", str(store), "--broker-conf", str(b.conf)]
    now = ["--now", "2100-01-01T00:00:00Z", "--reserved-hours", "1"]
    c = {
        "dump-commitlog": (READ, ["dump-commitlog", *s, "--format", "jsonl", "--body", "base64", "--check-crc"]),
        "dump-cq": (READ, ["dump-cq", *s, b.topic, str(b.queue_id), "--format", "jsonl", "--resolve"]),
        "dump-cq-summary": (READ, ["dump-cq", *s, "--summary", "--format", "json"]),
        "index-lookup": (READ, ["index-lookup", *s, b.key, "--format", "jsonl"]),
        "decode-msgid": (
            READ,
            ["decode-msgid", *s, b.msg_id or "0A00000500002A9F0000000000000000", "--format", "jsonl"],
        ),
        "verify": (READ, ["verify", *s, "--format", "json", "--crc"]),
        "rebuild-output": (MUTATE, ["rebuild-index", *s, "--output", str(out), "--format", "json", "--no-progress"]),
        "rebuild-dry-run": (
            MUTATE,
            ["rebuild-index", *s, "--in-place", "--dry-run", "--format", "json", "--no-progress"],
        ),
        "rebuild-in-place": (MUTATE, ["rebuild-index", *s, "--in-place", "--format", "json", "--no-progress"]),
        "rebuild-recover": (
            MUTATE,
            ["rebuild-index", *s, "--in-place", "--recover", "--format", "json", "--no-progress"],
        ),
        "expire-dry-run": (MUTATE, ["expire", *s, *now, "--dry-run", "--format", "json"]),
        "expire": (MUTATE, ["expire", *s, *now, "--format", "json"]),
        "generate": (
            MUTATE,
            ["generate", *s, *_generate_args(), "--messages", "40", "--seed", "9", "--format", "json"],
        ),
    }
    if HAS_PYARROW:
        c["export"] = (READ, ["export", *s, "--output", str(out), "--format", "json"])
    return c


COMMAND_NAMES = [
    "dump-commitlog",
    "dump-cq",
    "dump-cq-summary",
    "index-lookup",
    "decode-msgid",
    "verify",
    "export",
    "rebuild-output",
    "rebuild-dry-run",
    "rebuild-in-place",
    "rebuild-recover",
    "expire-dry-run",
    "expire",
    "generate",
]


# ------------------------------------------------------------------ running


@dataclass
class Run:
    seed: int
    plant: str
    detail: str
    command: str
    argv: list[str]
    exit: int | None
    seconds: float
    stderr: str
    problems: list[str] = field(default_factory=list)


def _limits(mem: int, fsize: int) -> Callable[[], None]:
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return pre


def execute(argv: list[str], cwd: Path, timeout: float, mem: int, fsize: int) -> tuple[int | None, str, float]:
    """Run ``rmqstore argv``; (exit code or None on a hang, stderr, seconds). A negative
    exit is a signal. The whole process group is killed on a hang."""
    t0 = time.monotonic()
    env = dict(os.environ, NO_COLOR="1", PYTHONFAULTHANDLER="")
    p = subprocess.Popen(
        [*_rmq_args(), *argv],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_limits(mem, fsize),
        start_new_session=True,
        env=env,
    )
    try:
        _, err = p.communicate(timeout=timeout)
        code: int | None = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
        code = None
    return code, err.decode("utf-8", "replace"), time.monotonic() - t0


_EXC = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.*)$", re.M)


def exception_line(stderr: str) -> str:
    """The last ``SomeError: message`` line of a (plain or rich) traceback."""
    m = _EXC.findall(stderr)
    return m[-1].strip() if m else stderr.strip().splitlines()[-1]


def judge(code: int | None, stderr: str, timeout: float) -> list[str]:
    """The problems of one run's exit and stderr (not its file-system effects)."""
    out = []
    if code is None:
        out.append(f"hang: no answer within {timeout:.0f}s")
    elif code < 0:
        out.append(f"killed by {signal.Signals(-code).name}")
    elif code not in DOCUMENTED_EXITS:
        out.append(f"undocumented exit {code}")
    if TRACEBACK in stderr:
        out.append("traceback: " + exception_line(stderr)[:200])
    elif code is not None and code >= 2 and code in DOCUMENTED_EXITS:
        errs = [ln for ln in stderr.splitlines() if ln.startswith("rmqstore: error:")]
        if len(errs) != 1:
            out.append(f"exit {code} with {len(errs)} 'rmqstore: error:' lines")
    return out


class Mount:
    """A small tmpfs at ``path`` (we are root; without permission the fs plants are skipped)."""

    def __init__(self, path: Path, size: int):
        self.path, self.size = path, size

    def __enter__(self) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size},mode=755", "tmpfs", str(self.path)],
            check=True,
            capture_output=True,
        )
        return self.path

    def __exit__(self, *exc) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False, capture_output=True)


def can_mount(work: Path) -> str | None:
    """None if tmpfs mounts work here, else why not."""
    try:
        with Mount(work / "mount-probe", 1 << 20) as m:
            subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True, capture_output=True)
        return None
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        return f"cannot mount a tmpfs ({e}); the read-only and full file-system plants are skipped"


def _copy_tree(src: Path, dst: Path) -> None:
    """cp -a: links stay links, FIFOs stay FIFOs (never opened), sparse files stay sparse."""
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)


def _tree_bytes(p: Path) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, fs in os.walk(p) for f in fs)


def run_case(
    work: Path,
    bases: list[Base],
    seed: int,
    plant: str | None = None,
    names: list[str] | None = None,
    per_case: int = 3,
    timeout: float = 60,
    mem: int = 2 << 30,
    fsize: int = 1 << 30,
    no_mount: str | None = None,
) -> list[Run]:
    """Plant one hostile thing (``plant`` or a seeded choice) in a copy of a base store and
    run the commands ``names`` (or a seeded sample of ``per_case``; 0 = all) on fresh copies."""
    rng = random.Random(seed)
    base = rng.choice(bases)
    pl = PLANT_BY_NAME[plant] if plant else rng.choice(PLANTS)
    case = work / f"case-{seed}"
    if case.exists():
        _cleanup_case(case)
    tpl = case / "tpl"  # the planted store and its sentinels, copied for every command
    (tpl / "outside").mkdir(parents=True)
    shutil.copytree(base.store, tpl / "store", symlinks=True)
    # sentinels live at case/outside (absolute link targets); a pristine copy of them is
    # kept beside the case and restored before every command
    outside = case / "outside"
    outside.mkdir()
    ctx = Ctx(case, tpl / "store", outside, rng, base)
    try:
        detail = pl[1](ctx, pl[2])
    except Exception as e:  # a plant that does not fit this store
        _cleanup_case(case)
        return [Run(seed, pl[0], f"not plantable: {type(e).__name__}: {e}", "-", [], 0, 0.0, "")]
    if ctx.fs and no_mount:
        _cleanup_case(case)
        return [Run(seed, pl[0], f"skipped: {no_mount}", "-", [], 0, 0.0, "")]
    pristine_out = work / f"case-{seed}-outside.pristine"  # outside the case: not part of the snapshot
    if pristine_out.exists():
        shutil.rmtree(pristine_out)
    _copy_tree(outside, pristine_out)
    all_names = [n for n in COMMAND_NAMES if n != "export" or HAS_PYARROW]
    if names is None:
        names = (
            all_names
            if per_case <= 0
            else sorted(rng.sample(all_names, min(per_case, len(all_names))), key=all_names.index)
        )
    runs = []
    for name in names:
        runs.append(_run_one(seed, case, tpl, pristine_out, ctx, base, pl[0], detail, name, timeout, mem, fsize))
    _cleanup_case(case)
    shutil.rmtree(pristine_out, ignore_errors=True)
    return runs


def _run_one(
    seed: int,
    case: Path,
    tpl: Path,
    pristine_out: Path,
    ctx: Ctx,
    base: Base,
    plant: str,
    detail: str,
    name: str,
    timeout: float,
    mem: int,
    fsize: int,
) -> Run:
    """Fresh sentinels and a fresh copy of the planted store (on a tmpfs for the fs plants),
    then one command: a command that broke something never spoils the next one's check."""
    outside = case / "outside"
    shutil.rmtree(outside, ignore_errors=True)
    _copy_tree(pristine_out, outside)
    out = case / "out"  # the command's own output directory (rebuild --output, export)
    shutil.rmtree(out, ignore_errors=True)
    mount = None
    if ctx.fs:
        fsdir = case / "fs"
        need = _tree_bytes(tpl / "store")
        mount = Mount(fsdir, need + (256 << 10) if ctx.fs == "full" else need + (4 << 20))
        mount.__enter__()
        store = fsdir / "store"
        _copy_tree(tpl / "store", store)
        if ctx.fs == "full":
            out = fsdir / "out"
            fd = os.open(fsdir / "filler", os.O_WRONLY | os.O_CREAT, 0o644)  # fill the tmpfs to the last page
            try:
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError:
                pass
            finally:
                os.close(fd)
        else:
            out = fsdir / "out"
            subprocess.run(["mount", "-o", "remount,ro", str(fsdir)], check=True, capture_output=True)
    else:
        store = case / "store"
        shutil.rmtree(store, ignore_errors=True) if not store.is_symlink() else store.unlink()
        _copy_tree(tpl / "store", store)
    try:
        return _measure(seed, case, store, out, base, plant, detail, name, timeout, mem, fsize)
    finally:
        if mount:
            mount.__exit__()


def _measure(
    seed: int,
    case: Path,
    store: Path,
    out: Path,
    base: Base,
    plant: str,
    detail: str,
    name: str,
    timeout: float,
    mem: int,
    fsize: int,
) -> Run:
    """Run one command on the prepared copy; judge its exit, stderr and file-system effects."""
    kind, argv = commands(base, store, out)[name]
    skip = {case / "tpl", store, out, case / "fs" / "store", case / "fs" / "out"}
    before_out = snapshot(case, skip)
    before_store = snapshot(store) if kind == READ else None
    code, err, secs = execute(argv, case, timeout, mem, fsize)
    problems = judge(code, err, timeout)
    changed = diff(before_out, snapshot(case, skip))
    if changed:
        problems.append(
            "changed outside the store: "
            + " ".join(changed[:6])
            + (" …" if len(changed) > 6 else "")
            + f" ({len(changed)})"
        )
    if before_store is not None:
        ch = diff(before_store, snapshot(store))
        if ch:
            problems.append("read command changed the store: " + " ".join(ch[:6]))
    return Run(seed, plant, detail, name, argv, code, secs, err, problems)


def _cleanup_case(case: Path) -> None:
    fs = case / "fs"
    if fs.exists():
        subprocess.run(["umount", "-l", str(fs)], check=False, capture_output=True)
    shutil.rmtree(case, ignore_errors=True)


# ------------------------------------------------------------------ the long run


def symptom(problem: str) -> str:
    """A problem without its run-specific parts (paths, numbers), to group runs by."""
    if problem.startswith(("changed outside", "read command changed", "hang")):
        return problem.split(":")[0]
    return re.sub(r"/\S+", "<path>", re.sub(r"\d{3,}", "N", problem))[:160]


def first_lines(stderr: str, n: int = 3) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if TRACEBACK in stderr:  # the exception line is the telling one
        return exception_line(stderr)[:300]
    return " | ".join(lines[:n])[:300]


def summarize(paths: list[Path]) -> int:
    """Distinct (plant, command, symptom) of ``--json`` files, with the seeds that show them."""
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    runs = 0
    for p in paths:
        for line in p.read_text().splitlines():
            r = json.loads(line)
            runs += r["command"] != "-"
            for prob in r["problems"]:
                groups[(r["plant"], r["command"], symptom(prob))].append(r["seed"])
    print(f"{runs} command runs, {len(groups)} distinct failures (plant, command, symptom, seeds):")
    for (pl, c, s), seeds in sorted(groups.items()):
        print(f"  {pl:38s} {c:17s} {s}  [seed {', '.join(map(str, sorted(set(seeds))[:4]))}]")
    return 1 if groups else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-case", type=int, default=3, help="commands per case, seeded (0 = every command)")
    ap.add_argument("--plant", action="append", help="only these plants (repeatable; a kind such as fifo, or a name)")
    ap.add_argument("--command", action="append", help="only these commands (repeatable)")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--mem-gb", type=float, default=2.0)
    ap.add_argument("--time-box", type=float, default=0, help="stop starting cases after this many seconds")
    ap.add_argument("--work", type=Path, help="work directory (default: a new temp dir, removed)")
    ap.add_argument("--json", type=Path, help="write every run as JSON lines here")
    ap.add_argument("--no-fixtures", action="store_true", help="only the generated store")
    ap.add_argument("--summarize", type=Path, nargs="+", help="only print the distinct failures of --json files")
    a = ap.parse_args(argv)
    if a.summarize:
        return summarize(a.summarize)
    work = a.work or Path(tempfile.mkdtemp(prefix="plantfuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    bases = ([] if a.no_fixtures else fixture_bases(work)) + [generated_base(work)]
    no_mount = can_mount(work)
    if no_mount:
        print(no_mount, file=sys.stderr)
    plants = PLANTS
    if a.plant:
        plants = [p for p in PLANTS if p[0] in a.plant or plant_kind(p[0]) in a.plant]
    t0 = time.monotonic()
    runs: list[Run] = []
    jf = a.json.open("w") if a.json else None
    done = 0
    for i in range(a.cases):
        if a.time_box and time.monotonic() - t0 > a.time_box:
            break
        seed = a.seed + i
        pick = random.Random(seed * 7919 + 1).choice(plants)[0]
        for r in run_case(
            work,
            bases,
            seed,
            plant=pick,
            names=a.command,
            per_case=a.per_case,
            timeout=a.timeout,
            mem=int(a.mem_gb * (1 << 30)),
            no_mount=no_mount,
        ):
            runs.append(r)
            if jf:
                jf.write(
                    json.dumps(
                        {
                            "seed": seed,
                            "plant": r.plant,
                            "detail": r.detail,
                            "command": r.command,
                            "exit": r.exit,
                            "seconds": round(r.seconds, 2),
                            "problems": r.problems,
                            "stderr": r.stderr[-2000:],
                        }
                    )
                    + "\n"
                )
                jf.flush()
            if r.problems:
                print(
                    f"FAIL seed={seed} plant={r.plant} [{r.detail}] {r.command} exit={r.exit}: "
                    f"{'; '.join(r.problems)} :: {first_lines(r.stderr)}",
                    flush=True,
                )
        done += 1
    dt = time.monotonic() - t0
    failed = [r for r in runs if r.problems]
    print(
        f"\n{done} cases, {sum(1 for r in runs if r.command != '-')} command runs in {dt:.0f}s; "
        f"{len(failed)} failing runs"
    )
    skipped = Counter(r.detail for r in runs if r.command == "-")
    for why, n in skipped.items():
        print(f"  not run ({n}): {why}")
    groups: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in failed:
        for p in r.problems:
            sym = symptom(p)
            groups[(plant_kind(r.plant), r.command, sym)].append(r)
    if groups:
        print("\nfailures by (plant kind, command, symptom):")
        for (k, c, s), rs in sorted(groups.items()):
            r = rs[0]
            print(
                f"  {len(rs):3d}× {k:13s} {c:17s} {s}\n        e.g. --seed {r.seed} --cases 1 "
                f"--plant {r.plant} --command {r.command}: exit={r.exit} :: {first_lines(r.stderr)}"
            )
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
