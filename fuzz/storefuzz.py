"""Mutated-store fuzzing of every read command (issue #8).

A store is copied, damaged by a seeded mutation (flipped bytes, boundary integers at
record-length positions, truncation, zeroed ranges, a deleted or swapped file, garbage
appended), then each read command runs in-process against it. A run *fails* when a
command raises (a traceback), runs past its time limit (a hang), exits with a code
that is not documented, prints an error that is not one ``rmqstore: error:`` line, or
changes a byte or an mtime of the store (read commands are read-only).

Used by ``fuzz/fuzz_stores.py`` (the long run, results in ``fuzz/RESULTS.md``) and by
``tests/safety/test_hardening.py`` (a short seeded run). Cases that failed once live in
``fuzz/corpus/stores.jsonl`` as (store, seed) pairs and are replayed by the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import struct
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"  # the real brokers' samples (tests/fixtures/README.md)
DOCUMENTED_EXITS = {0, 1, 2, 3}
BOUNDARY_INTS = [
    0,
    -1,
    1,
    8,
    0x7FFFFFFF,
    -0x80000000,
    0x7FFFFFF8,
    0xDAA320A7 - (1 << 32),
    0xCBD43194 - (1 << 32),
    65536,
    65535,
    20,
    2000,
]


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


@dataclass
class Outcome:
    command: str
    exit_code: int | None
    problem: str | None = None
    stderr: str = ""


@dataclass
class CaseResult:
    store: str
    seed: int
    mutation: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.problem]


def _files(store: Path) -> list[Path]:
    return sorted(p for p in store.rglob("*") if p.is_file() and p.name != "lock")


def mutate(store: Path, rng: random.Random, starts: list[int] = ()) -> str:
    """Damage ``store`` in place with one to three seeded mutations; describe them."""
    done = []
    files = _files(store)
    for _ in range(rng.randint(1, 3)):
        if not files:
            break
        f = rng.choice(files)
        rel = f.relative_to(store)
        data = bytearray(f.read_bytes())
        kind = rng.choice(
            ["flip", "int", "int", "int", "truncate", "zero", "garbage", "delete", "append", "empty", "rename"]
        )
        if kind == "int" and starts and "commitlog" in str(rel) and rng.random() < 0.6:
            # a length field of a real record: total size, body length, topic or properties length
            base = int(f.name) if f.name.isdigit() else 0
            here = [x - base for x in starts if 0 <= x - base < len(data)]
            if here:
                r0 = rng.choice(here)
                j = r0 + rng.choice([0, 4, 36, 72, 84, 100, 116])
                data[j : j + 4] = struct.pack(">i", rng.choice(BOUNDARY_INTS))
                f.write_bytes(bytes(data))
                done.append(f"field@{j} {rel}")
                continue
        if kind == "flip" and data:
            for _ in range(rng.randint(1, 16)):
                i = rng.randrange(len(data))
                data[i] ^= 1 << rng.randrange(8)
        elif kind == "int" and len(data) >= 4:
            # an aligned position near a record start is where lengths live
            i = rng.randrange(0, len(data) - 3)
            if rng.random() < 0.5:
                i -= i % 4
            v = rng.choice(BOUNDARY_INTS)
            if rng.random() < 0.3:
                data[i : i + 2] = struct.pack(">h", rng.choice([-1, 0, 0x7FFF, -0x8000, 1]))
            else:
                data[i : i + 4] = struct.pack(">i", v if v < (1 << 31) else v - (1 << 32))
            kind += f"@{i}={v}"
        elif kind == "truncate":
            n = rng.randrange(len(data) + 1)
            data = data[:n]
            kind += f"@{n}"
        elif kind == "zero" and data:
            i = rng.randrange(len(data))
            n = rng.randint(1, 4096)
            data[i : i + n] = bytes(len(data[i : i + n]))
        elif kind == "garbage" and data:
            i = rng.randrange(len(data))
            n = rng.randint(1, 512)
            data[i : i + n] = rng.randbytes(len(data[i : i + n]))
        elif kind == "append":
            data += rng.randbytes(rng.randint(1, 300))
        elif kind == "empty":
            data = bytearray()
        elif kind == "delete":
            f.unlink()
            files.remove(f)
            done.append(f"delete {rel}")
            continue
        elif kind == "rename":
            # a file under a wrong name: not 20 digits, or a different offset
            new = f.with_name(rng.choice(["00000000000000000001", "junk", f.name + ".tmp", "-0000000000000000001"]))
            if not new.exists():
                f.rename(new)
                files.remove(f)
                done.append(f"rename {rel} -> {new.name}")
            continue
        f.write_bytes(bytes(data))
        done.append(f"{kind} {rel}")
    return "; ".join(done)


def commands(store: Path, conf: Path | None, probe: dict) -> list[tuple[str, list[str]]]:
    s = ["--store", str(store)] + (["--broker-conf", str(conf)] if conf else [])
    key, mid, uk = probe.get("key", "k"), probe.get("msg_id"), probe.get("uniq_key")
    out = [
        (
            "dump-commitlog",
            ["dump-commitlog", *s, "--format", "jsonl", "--body", "text", "--show-blank", "--decompress"],
        ),
        ("dump-commitlog-crc", ["dump-commitlog", *s, "--format", "table", "--check-crc"]),
        # the columnar path (MessageBlock + jsonblock), and odd-sized files read anyway
        (
            "dump-commitlog-blocks",
            ["dump-commitlog", *s, "--format", "jsonl", "--body", "base64", "--check-crc", "--allow-odd-size"],
        ),
        (
            "dump-cq",
            ["dump-cq", *s, probe.get("topic", "T"), str(probe.get("queue_id", 0)), "--format", "jsonl", "--resolve"],
        ),
        ("dump-cq-summary", ["dump-cq", *s, "--summary", "--format", "json"]),
        ("index-lookup", ["index-lookup", *s, key, "--format", "jsonl", "--show-collisions"]),
        ("verify", ["verify", *s, "--format", "json", "--crc"]),
    ]
    ids = [x for x in (mid, uk) if x]
    if ids:
        out.append(("decode-msgid", ["decode-msgid", *s, *ids, "--format", "jsonl"]))
    return out


def probe(store: Path, conf: Path | None) -> dict:
    """A key, an offset msgId and a UNIQ_KEY of a message in the pristine store."""
    from typer.testing import CliRunner

    from rmqstore_cli.app import app

    args = ["dump-commitlog", "--store", str(store), "--format", "jsonl", "--limit", "400"]
    if conf:
        args += ["--broker-conf", str(conf)]
    r = CliRunner().invoke(app, args)
    out = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if d.get("keys") and "key" not in out:
            out["key"] = d["keys"][0]
        if d.get("uniq_key") and "uniq_key" not in out:
            out["uniq_key"] = d["uniq_key"]
        out.setdefault("msg_id", d.get("msg_id"))
        out.setdefault("topic", d.get("topic"))
        out.setdefault("queue_id", d.get("queue_id"))
        out.setdefault("starts", []).append(d["physical_offset"])
    return out


def run_one(args: list[str], timeout: int = 30) -> tuple[int | None, str, str | None]:
    """(exit code, stderr, problem) of one in-process CLI run."""
    from typer.testing import CliRunner

    from rmqstore_cli.app import app

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        r = CliRunner().invoke(app, args)
    except Hang:
        return None, "", f"hang: no answer within {timeout}s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    stderr = r.stderr
    exc = r.exception
    if isinstance(exc, Hang):
        return None, stderr, f"hang: no answer within {timeout}s"
    if exc is not None and not isinstance(exc, SystemExit):
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
        return r.exit_code, stderr, f"traceback: {type(exc).__name__}: {exc}\n{tb}"
    if r.exit_code not in DOCUMENTED_EXITS:
        return r.exit_code, stderr, f"undocumented exit code {r.exit_code}"
    if "Traceback" in stderr:
        return r.exit_code, stderr, "traceback on stderr"
    if r.exit_code in (2, 3):
        errs = [ln for ln in stderr.splitlines() if ln.startswith("rmqstore: error:")]
        if len(errs) != 1:
            return r.exit_code, stderr, f"exit {r.exit_code} without exactly one 'rmqstore: error:' line"
    return r.exit_code, stderr, None


def run_case(src: Path, conf: Path | None, work: Path, seed: int, probe_: dict, timeout: int = 30) -> CaseResult:
    store = work / "store"
    if store.exists():
        shutil.rmtree(store)
    shutil.copytree(src, store, symlinks=True)
    rng = random.Random(seed)
    res = CaseResult(str(src), seed, mutate(store, rng, probe_.get("starts", [])))
    before = tree_digest(store)
    for name, args in commands(store, conf, probe_):
        code, err, problem = run_one(args, timeout)
        if problem is None:
            after = tree_digest(store)
            if after != before:
                problem = "read command changed the store: " + ", ".join(
                    k for k in set(before) | set(after) if before.get(k) != after.get(k)
                )
                before = after
        res.outcomes.append(Outcome(name, code, problem, err[-400:]))
    return res


def stores(tmp: Path) -> list[tuple[Path, Path | None]]:
    """The real-broker fixtures (if present) and a small generated store."""
    out = []
    for v in ("4.9.7", "5.3.3"):
        d = FIXTURES / f"rocketmq-{v}-sample"
        if d.is_dir():
            out.append((d / "store", d / "broker.conf"))
    return out


def generated_store(path: Path, messages: int = 600, seed: int = 3) -> Path:
    from typer.testing import CliRunner

    from rmqstore_cli.app import app

    if not path.exists():
        r = CliRunner().invoke(
            app,
            [
                "generate",
                "--store",
                str(path),
                "--messages",
                str(messages),
                "--seed",
                str(seed),
                "--commitlog-file-size",
                "16384",
                "--cq-file-size",
                "400",
                "--index-slots",
                "16",
                "--index-max",
                "100",
                "--delay-ratio",
                "0.1",
                "--transaction-ratio",
                "0.1",
                "--ipv6-ratio",
                "0.2",
                "--compress-ratio",
                "0.2",
                "--format",
                "json",
            ],
        )
        assert r.exit_code == 0, r.stderr
    return path


def generated_conf(path: Path) -> Path:
    path.write_text(
        "mappedFileSizeCommitLog=16384\nmappedFileSizeConsumeQueue=400\nmaxHashSlotNum=16\nmaxIndexNum=100\n"
    )
    return path


def load_corpus(path: Path = ROOT / "fuzz" / "corpus" / "stores.jsonl") -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


os.environ.setdefault("NO_COLOR", "1")
