"""Compare the speed of every command between two revisions of this repository.

The check issue #17's "Done when" asks for: "bench/ shows no command slower than before
(±5 %, same machine, same run)". Both revisions run in the same run, interleaved, on one
store, so load from other jobs falls on both alike:

    nice -n 5 python3 bench/compare_revisions.py BASE [NEW] [--rounds 5] [--messages 400000]

- BASE and NEW are git revisions (NEW defaults to HEAD). Each gets a detached worktree
  (``git worktree add --detach``) and its own venv (``pip install -e 'CHECKOUT[spark]'``)
  under ``--scratch`` (default /tmp/rmqstore-compare); both are reused by later runs
  when they are there (the venv once its install finished).
- ONE store is written by BASE's ``rmqstore generate`` (several commit-log, consume-queue
  and index files) and reused by later runs with the same generator and options.
- Every case (a whole command line, see :func:`cases`) runs once per revision as a
  warm-up (numba's kernel cache, page cache; not counted), then ``--rounds`` times per
  revision, alternately: A B, B A, A B, ... (the order flips each round so a drift in the
  machine's load falls on both sides alike). Per run the child's user+sys CPU time, wall
  time and peak RSS come from ``os.wait4`` in a small launcher process (:class:`Spawner`).
- A case whose warm-up fails in one revision (a command or option that exists only in
  the other, a crash, a timeout) is skipped with a note; failing in both, too.
- stdout (the summaries' ``seconds`` blanked) and the files a case writes are hashed per
  run, warm-up included: ``same`` when A and B wrote the same bytes, ``varies`` when one
  revision's own runs differ (Parquet files do), ``DIFFERS`` when each is stable and they
  differ: a restructuring must show no DIFFERS.
- Prints a table (median CPU A, median CPU B, B/A, verdict) and writes
  ``bench/results/compare-<A>-<B>-<time>.json`` and ``.md`` (every run's numbers).

Verdict per case on the median CPU time: ``SLOWER`` when B/A > 1 + threshold and every B
run is slower than every A run; ``slower?`` when B/A > 1 + threshold but the runs overlap
(noise: re-run that case with ``--only NAME --rounds 9``); ``faster``/``faster?`` the
same way down; ``same`` within ±threshold. Nothing here is a test: timings are printed,
never asserted. ``--cleanup`` removes the worktrees, venvs and store afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
THRESHOLD = 0.05
DEFAULT_GEN = (
    "--body-size 256 --seed 1 --commitlog-file-size 33554432 --cq-file-size 120000 "
    "--index-slots 50000 --index-max 200000 --broker-version 5 --timer-ratio 0.02"
)


class BenchError(Exception):
    """A set-up step failed: the message says which and why."""


# ---------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One whole command line, with ``{store}``, ``{out}``, ``{key}``, ... filled per run."""

    name: str
    argv: tuple[str, ...]
    ok_codes: tuple[int, ...] = (0,)
    needs_pyarrow: bool = False
    #: options a revision gets when it has them (its warm-up with them does not end in "no such
    #: option"): ``--jobs 1`` compares the work of one process where one side (B) has learnt
    #: to spread it over every core by default and the other (A) has only one process
    if_accepted: tuple[str, ...] = ()


def cases(gen_messages: int) -> list[Case]:
    """Every command of the CLI, each on the shared store (``{out}``: a fresh directory), with
    the options that take its main paths (a case a revision lacks is skipped with a note)."""
    return [
        Case("help", ("--help",)),
        *dump_cases(),
        *question_cases(),
        *check_cases(),
        *write_cases(gen_messages),
    ]


S = ("--store", "{store}")
ONE_PROCESS = ("--jobs", "1")
JSONL = ("--format", "jsonl")


def dump_cases() -> list[Case]:
    """dump-commitlog, dump-cq, dump-timer: the walks that print every record."""
    return [
        Case("dump-commitlog jsonl", ("dump-commitlog", *S, *JSONL)),
        Case("dump-commitlog table", ("dump-commitlog", *S)),
        Case("dump-commitlog --body base64 jsonl", ("dump-commitlog", *S, "--body", "base64", *JSONL)),
        Case("dump-commitlog --topic jsonl", ("dump-commitlog", *S, "--topic", "{topic}", *JSONL)),
        Case("dump-commitlog --key", ("dump-commitlog", *S, "--key", "{key}", *JSONL)),
        Case("dump-commitlog --begin (seek)", ("dump-commitlog", *S, "--begin", "{time}", "--limit", "1000", *JSONL)),
        Case("dump-commitlog --check-crc", ("dump-commitlog", *S, "--check-crc", *JSONL)),
        Case("dump-cq TOPIC Q jsonl", ("dump-cq", "{topic}", "{queue}", *S, *JSONL)),
        Case("dump-cq TOPIC Q --messages", ("dump-cq", "{topic}", "{queue}", *S, "--messages", *JSONL)),
        Case("dump-cq --summary", ("dump-cq", *S, "--summary", *JSONL)),
        Case("dump-timer (slots)", ("dump-timer", *S, *JSONL), (0, 1)),
        Case("dump-timer --units", ("dump-timer", *S, "--units", *JSONL), (0, 1)),
        Case("dump-timer --summary", ("dump-timer", *S, "--summary", "--now", "{time}", *JSONL), (0, 1)),
        Case("dump-timer --next 500", ("dump-timer", *S, "--next", "500", "--now", "{time}", *JSONL), (0, 1)),
        Case("dump-timer --overdue", ("dump-timer", *S, "--overdue", "--now", "2030-01-01T00:00:00Z", *JSONL), (0, 1)),
    ]


def question_cases() -> list[Case]:
    """The operator's questions: lookups, offsets, progress, transactions, POP, disk use, diff."""
    now = ("--now", "{time}")
    return [
        Case("index-lookup KEY", ("index-lookup", "{key}", *S, *JSONL)),
        Case("decode-msgid MSGID UNIQ", ("decode-msgid", "{msgid}", "{uniq}", *S, *JSONL), (0, 1)),
        Case("search-offset", ("search-offset", *S, "--topic", "{topic}", "--time", "{time}", *JSONL)),
        Case("search-offset --scan", ("search-offset", *S, "--topic", "{topic}", "--time", "{time}", "--scan", *JSONL)),
        Case(
            "search-offset --broker",
            ("search-offset", *S, "--topic", "{topic}", "--time", "{time}", "--broker", *JSONL),
        ),
        Case("consumer-progress", ("consumer-progress", *S, *JSONL), (0, 1)),
        Case("consumer-progress table", ("consumer-progress", *S), (0, 1)),
        Case("transactions", ("transactions", *S, *now, *JSONL), (0, 1)),
        Case("transactions --state committed", ("transactions", *S, *now, "--state", "committed", *JSONL), (0, 1)),
        Case("pop", ("pop", *S, *now, *JSONL), (0, 1)),
        Case("stats", ("stats", *S, *JSONL)),
        Case("stats --by queue", ("stats", *S, "--by", "queue", *JSONL)),
        Case("stats --by file", ("stats", *S, "--by", "file", *JSONL)),
        Case("stats --exact", ("stats", *S, "--exact", *JSONL)),
        Case("stats --by minute", ("stats", *S, "--by", "minute", *JSONL)),
        Case("diff STORE STORE --messages", ("diff", "{store}", "{store}", "--messages", *JSONL), (0, 1)),
    ]


def check_cases() -> list[Case]:
    """verify in its modes, and the dry runs of the commands that delete or rewrite files."""
    pad = "{store}/commitlog/00000000000000000000"
    return [
        Case("verify", ("verify", *S, *JSONL), (0, 1)),
        Case("verify table", ("verify", *S), (0, 1)),
        Case("verify --no-crc", ("verify", *S, "--no-crc", *JSONL), (0, 1)),
        Case("verify --deep", ("verify", *S, "--deep", *JSONL), (0, 1)),
        Case("verify, one process", ("verify", *S, *JSONL), (0, 1), if_accepted=ONE_PROCESS),
        Case("expire --dry-run", ("expire", *S, "--dry-run", "--now", "2030-01-01T00:00:00Z", *JSONL)),
        Case("repair --pad --dry-run", ("repair", *S, "--pad", pad, "--dry-run", *JSONL)),
    ]


def write_cases(gen_messages: int) -> list[Case]:
    """The commands that write a new store or dataset (into ``{out}``, hashed, then removed)."""
    return [
        Case("rebuild-index --output", ("rebuild-index", *S, "--output", "{out}/rebuilt", "--no-progress", *JSONL)),
        Case(
            "rebuild-index --output, one process",
            ("rebuild-index", *S, "--output", "{out}/rebuilt", "--no-progress", *JSONL),
            if_accepted=ONE_PROCESS,
        ),
        # one process: the files (hashed) of --jobs N > 1 hold the same rows in other files
        Case(
            "export (local)",
            ("export", *S, "--output", "{out}/parquet", *JSONL),
            needs_pyarrow=True,
            if_accepted=ONE_PROCESS,
        ),
        Case(
            f"generate {gen_messages}",
            ("generate", "--store", "{out}/gen", "--messages", str(gen_messages), "--seed", "3", *JSONL),
        ),
    ]


# ---------------------------------------------------------------------------- verdict


@dataclass
class Row:
    """One case's result: the medians, B/A and the verdict (or why it was skipped)."""

    name: str
    cpu_a: list[float] = field(default_factory=list)
    cpu_b: list[float] = field(default_factory=list)
    wall_a: list[float] = field(default_factory=list)
    wall_b: list[float] = field(default_factory=list)
    rss_a: list[int] = field(default_factory=list)  # KiB
    rss_b: list[int] = field(default_factory=list)
    user_a: list[float] = field(default_factory=list)  # the user part of cpu_a
    user_b: list[float] = field(default_factory=list)
    output: str = ""
    note: str = ""
    load: list[float] = field(default_factory=list)  # 1-min load average before and after

    @property
    def skipped(self) -> bool:
        return not (self.cpu_a and self.cpu_b)

    def ratio(self) -> float:
        return ratio(self.cpu_a, self.cpu_b)

    def verdict(self, threshold: float = THRESHOLD) -> str:
        return "skipped" if self.skipped else verdict(self.cpu_a, self.cpu_b, threshold)


def ratio(a: list[float], b: list[float]) -> float:
    """median(b) / median(a); inf when A took no measurable time and B did."""
    ma, mb = statistics.median(a), statistics.median(b)
    if ma <= 0:
        return 1.0 if mb <= 0 else float("inf")
    return mb / ma


def spread(xs: list[float]) -> float:
    """(max - min) / median: how far one side's own runs scatter."""
    m = statistics.median(xs)
    return (max(xs) - min(xs)) / m if m > 0 else 0.0


def verdict(a: list[float], b: list[float], threshold: float = THRESHOLD) -> str:
    """SLOWER/faster when the medians differ by more than threshold and the runs do not
    overlap; slower?/faster? when they differ but overlap (noise); same within it."""
    r = ratio(a, b)
    if r > 1 + threshold:
        return "SLOWER" if min(b) > max(a) else "slower?"
    if r < 1 - threshold:
        return "faster" if max(b) < min(a) else "faster?"
    return "same"


def output_verdict(digests_a: list[str], digests_b: list[str]) -> str:
    """same: every run of both wrote these bytes; varies: a revision's own runs differ;
    DIFFERS: each revision is stable and they differ."""
    if not digests_a or not digests_b:
        return ""
    if len(set(digests_a)) > 1 or len(set(digests_b)) > 1:
        return "varies"
    return "same" if digests_a[0] == digests_b[0] else "DIFFERS"


def table(rows: list[Row], threshold: float = THRESHOLD) -> str:
    """The markdown table the run prints and writes: CPU medians, B/A, verdict, spreads."""
    head = (
        "| command | CPU A s | CPU B s | B/A | verdict | spread A | spread B | wall A s | wall B s "
        "| RSS A MiB | RSS B MiB | output | note |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if r.skipped:
            lines.append(f"| {r.name} | | | | skipped | | | | | | | | {r.note} |")
            continue
        med = statistics.median
        lines.append(
            f"| {r.name} | {med(r.cpu_a):.3f} | {med(r.cpu_b):.3f} | {r.ratio():.3f} | {r.verdict(threshold)} "
            f"| {spread(r.cpu_a):.1%} | {spread(r.cpu_b):.1%} | {med(r.wall_a):.3f} | {med(r.wall_b):.3f} "
            f"| {med(r.rss_a) / 1024:.0f} | {med(r.rss_b) / 1024:.0f} | {r.output} | {r.note} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- one run


@dataclass
class Run:
    """One child process: exit code, wall and CPU seconds, peak RSS, digests of what it wrote."""

    rc: int
    wall: float
    cpu: float
    user: float
    rss_kib: int
    timed_out: bool
    stderr: str
    stdout_digest: str
    files_digest: str


def tree_digest(root: Path) -> str:
    """sha256 over the names, link targets and bytes of every file below root ('' if none)."""
    if not root.exists() or not any(root.iterdir()):
        return ""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        if path.is_symlink():
            h.update(b"->" + os.readlink(path).encode())
        elif path.is_file():
            h.update(file_digest(path).encode())
    return h.hexdigest()


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: The launcher process (see :class:`Spawner`): one request per stdin line (argv, env, cwd,
#: stderr, timeout), one result per stdout line. The child's stdout is a pipe the launcher
#: drains and hashes (what ``| less`` sees; a file there would add the page cache's
#: writeback to the child's sys time, the noisiest part of a big dump's CPU time). Only what it needs is imported,
#: so that its own peak RSS (the floor below which no child's figure can go) stays small.
SPAWNER = r"""
import hashlib, json, os, re, signal, sys, time
pid, timed_out = 0, False
# Timings in the commands' JSON summaries, blanked before the digest (only in outputs up to
# SMALL bytes: big dumps have none and are hashed as they come).
VOLATILE = re.compile(rb'"(seconds|messages_per_second)":\s*[-0-9.eE+]+')
SMALL = 256 << 10
def kill(signum, frame):
    global timed_out
    timed_out = True
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
def drain(fd):
    h, head, n = hashlib.sha256(), [], 0
    while chunk := os.read(fd, 1 << 16):
        h.update(chunk)
        n += len(chunk)
        if n <= SMALL:
            head.append(chunk)
    os.close(fd)
    if n <= SMALL:
        return hashlib.sha256(VOLATILE.sub(rb'"\1":_', b"".join(head))).hexdigest(), n
    return h.hexdigest(), n
signal.signal(signal.SIGALRM, kill)
for line in sys.stdin:
    req = json.loads(line)
    timed_out = False
    os.chdir(req["cwd"])
    r, w = os.pipe()
    files = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, w, 1),
             (os.POSIX_SPAWN_OPEN, 2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    t0 = time.perf_counter()
    try:
        pid = os.posix_spawn(req["argv"][0], req["argv"], req["env"], file_actions=files, setsid=True)
    except OSError as e:
        os.close(r), os.close(w)
        print(json.dumps({"error": f"{req['argv'][0]}: {e}"}), flush=True)
        continue
    os.close(w)
    signal.setitimer(signal.ITIMER_REAL, req["timeout"])
    digest, size = drain(r)
    _, status, ru = os.wait4(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    wall = time.perf_counter() - t0
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall": wall,
                      "cpu": ru.ru_utime + ru.ru_stime, "user": ru.ru_utime, "sys": ru.ru_stime,
                      "rss_kib": ru.ru_maxrss, "timed_out": timed_out, "stdout_digest": digest,
                      "stdout_bytes": size}), flush=True)
"""


class Spawner:
    """Runs the measured commands from a separate small process (:data:`SPAWNER`): each
    child's user+sys CPU time and peak RSS come from its os.wait4 (the child's reaped
    descendants included), its wall time from around the spawn.

    Why a separate process: Linux starts a child's peak RSS (ru_maxrss) at the high-water
    mark of the process that spawned it (kept across exec), so children spawned by this
    script after it parsed a dump would all report at least its own peak. What is left of
    that floor is measured once (:attr:`floor_kib`: what /bin/true reports)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", SPAWNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        true = shutil.which("true") or "/bin/true"
        self.floor_kib = self.run({"argv": [true], "env": {}, "cwd": "/", "stderr": os.devnull, "timeout": 60})[
            "rss_kib"
        ]

    def run(self, req: dict) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise BenchError(f"the launcher process ended (exit {self.proc.wait()})")
        res = json.loads(line)
        if "error" in res:
            raise BenchError(f"cannot start {res['error']}")
        return res

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def run_once(spawner: Spawner, argv: list[str], env: dict[str, str], timeout: float, work: Path) -> Run:
    """Run argv with stderr to a file in work and {out} = work/out made fresh; digest what it
    printed (in the launcher) and wrote, then remove it."""
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    res = spawner.run({"argv": argv, "env": env, "cwd": str(work), "stderr": str(work / "stderr"), "timeout": timeout})
    stderr = (work / "stderr").read_bytes()[-2000:].decode("utf-8", "replace")
    run = Run(
        res["rc"],
        res["wall"],
        res["cpu"],
        res["user"],
        res["rss_kib"],
        res["timed_out"],
        stderr,
        res["stdout_digest"],
        tree_digest(out),
    )
    shutil.rmtree(out, ignore_errors=True)
    return run


def failure(run: Run, ok_codes: tuple[int, ...], timeout: float) -> str:
    """Why a run does not count ('' when it does): timeout, or an exit code and stderr's last line."""
    if run.timed_out:
        return f"timed out after {timeout:.0f} s"
    if run.rc in ok_codes:
        return ""
    last = [ln for ln in run.stderr.splitlines() if ln.strip()]
    return f"exit {run.rc}: {last[-1].strip() if last else '(no stderr)'}"


# ---------------------------------------------------------------------------- set-up


@dataclass
class Side:
    """One revision: its label (A or B), commit, worktree and venv."""

    label: str
    rev: str
    sha: str
    src: Path
    bin: Path
    has_pyarrow: bool = False
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def rmqstore(self) -> str:
        return str(self.bin / "rmqstore")


def git(repo: Path, *args: str) -> str:
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if p.returncode:
        raise BenchError(f"git {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout.strip()


def ensure_checkout(repo: Path, root: Path, sha: str) -> Path:
    """A detached worktree of sha at root/src; an existing one is reused if it is at sha."""
    src = root / "src"
    if src.exists():
        head = git(src, "rev-parse", "HEAD")
        if head != sha:
            raise BenchError(f"{src} is at {head[:12]}, not {sha[:12]}: remove it (or --cleanup-only)")
        return src
    root.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "--detach", str(src), sha)
    return src


def ensure_venv(root: Path, src: Path, extras: str, python: str) -> Path:
    """root/venv with the checkout installed editable (numba's cache lands beside its code);
    reused once an install with the same extras finished."""
    venv, marker = root / "venv", root / "venv" / ".bench-installed"
    if marker.exists() and marker.read_text() == extras:
        byte_compile(venv / "bin")
        return venv / "bin"
    print(f"installing {src} into {venv} (pip, a minute or two)", file=sys.stderr)
    subprocess.run([python, "-m", "venv", "--clear", str(venv)], check=True)
    target = f"{src}[{extras}]" if extras else str(src)
    with open(root / "pip.log", "w") as log:
        p = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "-e", target], stdout=log, stderr=subprocess.STDOUT
        )
    if p.returncode:
        tail = (root / "pip.log").read_text()[-1500:]
        raise BenchError(f"pip install -e {target} failed (log: {root / 'pip.log'}):\n{tail}")
    marker.write_text(extras)
    byte_compile(venv / "bin")
    return venv / "bin"


def byte_compile(bin_dir: Path) -> None:
    """The checkout's packages byte-compiled, as an installed package has them: with
    ``PYTHONDONTWRITEBYTECODE`` set (this machine sets it) an editable checkout is otherwise
    compiled from source by every command (0.1-0.15 s of CPU each, more for the revision
    with more modules)."""
    code = (
        "import compileall, importlib, os; "
        "[compileall.compile_dir(os.path.dirname(importlib.import_module(m).__file__), quiet=1) "
        "for m in ('rmqstore_cli', 'commands', 'formats')]"
    )
    subprocess.run([str(bin_dir / "python"), "-c", code], check=True)


def versions(bin_dir: Path) -> dict[str, str]:
    """The installed versions that could explain a difference between the two venvs."""
    p = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True
    )
    wanted = {
        "numpy",
        "numba",
        "llvmlite",
        "orjson",
        "pyarrow",
        "typer",
        "click",
        "rich",
        "zlib-ng",
        "construct",
        "crcmod",
        "pyspark",
    }
    got = json.loads(p.stdout or "[]")
    return {d["name"].lower(): d["version"] for d in got if d["name"].lower() in wanted}


def make_side(repo: Path, scratch: Path, label: str, rev: str, extras: str, python: str) -> Side:
    sha = git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    root = scratch / f"{label.lower()}-{sha[:12]}"
    src = ensure_checkout(repo, root, sha)
    bin_dir = ensure_venv(root, src, extras, python)
    side = Side(label, rev, sha, src, bin_dir)
    side.versions = versions(bin_dir)
    side.has_pyarrow = "pyarrow" in side.versions
    return side


def child_env() -> dict[str, str]:
    """The caller's environment without RMQSTORE_* (no command may pick up another store), in UTC."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQSTORE_") and k != "VIRTUAL_ENV"}
    env["TZ"] = "UTC"
    return env


# ---------------------------------------------------------------------------- the store

SYSTEM_TOPICS = ("RMQ_SYS_", "SCHEDULE_TOPIC_XXXX", "%RETRY%", "%DLQ%")


def jsonl(side: Side, args: list[str], timeout: float) -> list[dict]:
    p = subprocess.run(
        [side.rmqstore, *args, "--format", "jsonl"], capture_output=True, text=True, env=child_env(), timeout=timeout
    )
    if p.returncode:
        raise BenchError(
            f"rmqstore {' '.join(args)} (revision {side.rev}): exit {p.returncode}: {p.stderr.strip()[-800:]}"
        )
    return [json.loads(ln) for ln in p.stdout.splitlines() if ln.strip()]


def store_facts(side: Side, store: Path, timeout: float) -> dict[str, str]:
    """A message to look up: the last ordinary one with keys among the first 20 000 records
    (its key, msgId, UNIQ_KEY, topic, queue, store time)."""
    recs = jsonl(side, ["dump-commitlog", "--store", str(store), "--limit", "20000"], timeout)
    pick = [
        r
        for r in recs
        if r.get("keys") and r.get("uniq_key") and r.get("sys_flag") == 0 and not r["topic"].startswith(SYSTEM_TOPICS)
    ]
    if not pick:
        raise BenchError(f"no ordinary message with keys in the first records of {store}")
    r = pick[-1]
    return {
        "key": r["keys"][0],
        "msgid": r["msg_id"],
        "uniq": r["uniq_key"],
        "topic": r["topic"],
        "queue": str(r["queue_id"]),
        "time": str(r["store_timestamp"]),
    }


def write_consumer_offsets(side: Side, store: Path, timeout: float) -> None:
    """config/consumerOffset.json (fastjson's form) with one group half-way through every
    ordinary queue, so consumer-progress has rows to compute."""
    table: dict[str, dict[int, int]] = {}
    for q in jsonl(side, ["dump-cq", "--store", str(store), "--summary"], timeout):
        if not q["topic"].startswith(SYSTEM_TOPICS):
            table.setdefault(f"{q['topic']}@bench-g", {})[q["queue_id"]] = (q["min_offset"] + q["max_offset"]) // 2
    body = ",".join(
        json.dumps(k) + ":{" + ",".join(f"{qid}:{off}" for qid, off in sorted(v.items())) + "}"
        for k, v in sorted(table.items())
    )
    (store / "config" / "consumerOffset.json").write_text('{"offsetTable":{' + body + "}}")


def ensure_store(scratch: Path, side: Side, messages: int, gen_args: str, timeout: float) -> tuple[Path, dict]:
    """ONE store written by side's generate, reused while generator and options are the same."""
    key = hashlib.sha256(f"{side.sha}|{messages}|{gen_args}".encode()).hexdigest()[:12]
    store, meta = scratch / f"store-{key}", scratch / f"store-{key}.json"
    if store.is_dir() and meta.exists():
        return store, json.loads(meta.read_text())
    shutil.rmtree(store, ignore_errors=True)
    print(f"generating {messages} messages into {store} with {side.rev}", file=sys.stderr)
    argv = [
        side.rmqstore,
        "generate",
        "--store",
        str(store),
        "--messages",
        str(messages),
        *shlex.split(gen_args),
        "--format",
        "jsonl",
    ]
    p = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=timeout)
    if p.returncode:
        raise BenchError(f"{shlex.join(argv)}: exit {p.returncode}: {p.stderr.strip()[-800:]}")
    info = {
        "generated_by": side.sha,
        "messages": messages,
        "gen_args": gen_args,
        "summary": json.loads(p.stdout.splitlines()[-1]) if p.stdout.strip() else {},
        "facts": store_facts(side, store, timeout),
    }
    write_consumer_offsets(side, store, timeout)
    meta.write_text(json.dumps(info, indent=1))
    return store, info


# ---------------------------------------------------------------------------- the bench


def fill(argv: tuple[str, ...], values: dict[str, str]) -> list[str]:
    return [a.format(**values) for a in argv]


def bench_case(
    case: Case, sides: list[Side], values: dict[str, str], opts: argparse.Namespace, spawner: Spawner, work: Path
) -> Row:
    """Warm-up once per side, then opts.rounds runs per side, alternately (A B, B A, ...).
    The warm-up's output is digested too (one more sample for same/varies/DIFFERS)."""
    row = Row(case.name, load=[os.getloadavg()[0]])
    lacking = [s.label for s in sides if case.needs_pyarrow and not s.has_pyarrow]
    if lacking:
        row.note = f"pyarrow not installed in {'/'.join(lacking)}"
        return row
    env = child_env()
    argv = {s.label: [s.rmqstore, *fill(case.argv, values)] for s in sides}
    digests: dict[str, list[tuple[str, str]]] = {s.label: [] for s in sides}
    why = {}
    for s in sides:
        run = warm_up(case, argv, s.label, spawner, env, opts.timeout, work)
        why[s.label] = failure(run, case.ok_codes, opts.timeout)
        digests[s.label].append((run.stdout_digest, run.files_digest))
    if any(why.values()):
        row.note = "; ".join(f"{k}: {v}" for k, v in why.items() if v)
        runs_it = [k for k, v in why.items() if not v]
        row.note += f" (only {runs_it[0]} runs it)" if runs_it else " (fails in both)"
        return row
    for i in range(opts.rounds):
        for s in sides if i % 2 == 0 else sides[::-1]:
            run = run_once(spawner, argv[s.label], env, opts.timeout, work)
            bad = failure(run, case.ok_codes, opts.timeout)
            if bad:
                row.note = f"{s.label} round {i + 1}: {bad}"
                row.cpu_a, row.cpu_b = [], []
                return row
            a = s.label == "A"
            (row.cpu_a if a else row.cpu_b).append(run.cpu)
            (row.wall_a if a else row.wall_b).append(run.wall)
            (row.rss_a if a else row.rss_b).append(run.rss_kib)
            (row.user_a if a else row.user_b).append(run.user)
            digests[s.label].append((run.stdout_digest, run.files_digest))
    row.output = describe_output(digests["A"], digests["B"])
    row.load.append(os.getloadavg()[0])
    return row


def warm_up(
    case: Case, argv: dict[str, list[str]], label: str, spawner: Spawner, env: dict, timeout: float, work: Path
) -> Run:
    """The side's first run; with ``case.if_accepted`` first tried with those options, which
    the side keeps (in ``argv``) when its command has them."""
    if case.if_accepted:
        run = run_once(spawner, [*argv[label], *case.if_accepted], env, timeout, work)
        if not (run.rc == 2 and "no such option" in run.stderr.lower()):
            argv[label] = [*argv[label], *case.if_accepted]
            return run
    return run_once(spawner, argv[label], env, timeout, work)


def describe_output(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> str:
    """stdout's verdict, and the written files' when the case writes any."""
    text = "stdout " + output_verdict([d[0] for d in a], [d[0] for d in b])
    if any(d[1] for d in a + b):
        text += ", files " + output_verdict([d[1] for d in a], [d[1] for d in b])
    return text


# ---------------------------------------------------------------------------- results


def machine() -> dict:
    return {
        "nproc": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg": list(os.getloadavg()),
    }


def report(rows: list[Row], sides: list[Side], store: Path, info: dict, opts: argparse.Namespace, started: str) -> dict:
    """Everything a reader needs to judge the figures: every run's numbers, both revisions'
    package versions, the store, the machine's load."""
    return {
        "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "rounds": opts.rounds,
        "threshold": opts.threshold,
        "sides": {
            s.label: {
                "rev": s.rev,
                "sha": s.sha,
                "subject": subject(s.src),
                "versions": s.versions,
            }
            for s in sides
        },
        "store": {"path": str(store), **info},
        "rows": [
            {**dataclasses.asdict(r), "ratio": None if r.skipped else r.ratio(), "verdict": r.verdict(opts.threshold)}
            for r in rows
        ],
    }


#: An absolute path of two or more parts in a commit subject (a tool the author ran, say).
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/[\w.+-]+(?:/[\w.+-]+)+")


def subject(src: Path) -> str:
    """The commit's subject with any absolute path in it as ``<path>``: the results are
    committed, and a path of the machine that ran them means nothing in the repository."""
    return ABSOLUTE_PATH.sub("<path>", git(src, "log", "-1", "--format=%s"))


def markdown(data: dict, rows: list[Row], threshold: float) -> str:
    a, b = data["sides"]["A"], data["sides"]["B"]
    m, st = data["machine"], data["store"]
    lines = [
        f"# compare_revisions: A {a['rev']} ({a['sha'][:12]}) vs B {b['rev']} ({b['sha'][:12]})",
        "",
        f"- A: {a['subject']}",
        f"- B: {b['subject']}",
        f"- {data['started']} .. {data['finished']}; {data['rounds']} rounds per side after one warm-up; "
        f"threshold ±{threshold:.0%} on median user+sys CPU",
        f"- machine: {m['nproc']} CPUs, {m['platform']}, Python {m['python']}, load at the end "
        f"{[round(x, 1) for x in m['loadavg']]}; RSS floor (what /bin/true reports) "
        f"{m.get('rss_floor_kib', 0) / 1024:.0f} MiB",
        f"- store: {st['messages']} messages, generate {st['gen_args']} (by A)",
    ]
    if a["versions"] != b["versions"]:
        lines.append(f"- package versions differ: A {a['versions']} B {b['versions']}")
    return "\n".join([*lines, "", table(rows, threshold), ""])


def write_results(data: dict, md: str, results: Path) -> Path:
    results.mkdir(parents=True, exist_ok=True)
    a, b = data["sides"]["A"]["sha"][:7], data["sides"]["B"]["sha"][:7]
    stem = results / f"compare-{a}-{b}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    stem.with_suffix(".md").write_text(md)
    return stem


# ---------------------------------------------------------------------------- scratch

MARKER = ".rmqstore-compare"


def claim_scratch(scratch: Path) -> None:
    """Use scratch only if it is new, empty or ours (marked), so --cleanup never removes a
    directory this script did not make."""
    if scratch.exists() and not (scratch / MARKER).exists() and any(scratch.iterdir()):
        raise BenchError(f"--scratch {scratch} exists, is not empty and was not made by this script")
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / MARKER).touch()


def cleanup(repo: Path, scratch: Path) -> None:
    """Remove the worktrees (git worktree remove), venvs, stores and run directory."""
    if not scratch.exists():
        return
    if not (scratch / MARKER).exists():
        raise BenchError(f"{scratch} was not made by this script: not removing it")
    for src in sorted(scratch.glob("*/src")):
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(src)], check=False)
    shutil.rmtree(scratch)
    subprocess.run(["git", "-C", str(repo), "worktree", "prune"], check=False)
    print(f"removed {scratch}", file=sys.stderr)


# ---------------------------------------------------------------------------- main


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("base", nargs="?", help="revision A (the old one), e.g. 492e9ca or main~20")
    ap.add_argument("new", nargs="?", default="HEAD", help="revision B [HEAD]")
    ap.add_argument("--rounds", type=int, default=5, help="counted runs per case per revision [5]")
    ap.add_argument("--messages", type=int, default=400_000, help="messages in the shared store [400000]")
    ap.add_argument("--gen-args", default=DEFAULT_GEN, help=f"generate's other options [{DEFAULT_GEN}]")
    ap.add_argument("--gen-messages", type=int, default=20_000, help="messages of the 'generate' case [20000]")
    ap.add_argument("--only", action="append", default=[], help="run only this case (repeatable; --list)")
    ap.add_argument("--skip", action="append", default=[], help="leave this case out (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help="relative CPU difference flagged [0.05]")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one run may take [900]")
    ap.add_argument(
        "--scratch",
        type=Path,
        default=Path("/tmp/rmqstore-compare"),
        help="worktrees, venvs, store [/tmp/rmqstore-compare]",
    )
    ap.add_argument("--results", type=Path, default=HERE / "results", help="where the .json/.md go [bench/results]")
    ap.add_argument("--extras", default="spark", help="pip extras per venv; spark brings pyarrow for export [spark]")
    ap.add_argument("--python", default=sys.executable, help="interpreter the venvs are made from")
    ap.add_argument("--repo", type=Path, default=REPO, help="the git repository [this one]")
    ap.add_argument("--cleanup", action="store_true", help="remove worktrees, venvs and store at the end")
    ap.add_argument("--cleanup-only", action="store_true", help="only remove them")
    opts = ap.parse_args(argv)
    if not (opts.list or opts.cleanup_only or opts.base):
        ap.error("give the base revision (A), e.g. 492e9ca")
    return opts


def selected(opts: argparse.Namespace) -> list[Case]:
    chosen = cases(opts.gen_messages)
    names = {c.name for c in chosen}
    unknown = [n for n in opts.only + opts.skip if n not in names]
    if unknown:
        raise BenchError(f"no case named {unknown}; the cases: {sorted(names)}")
    return [c for c in chosen if (not opts.only or c.name in opts.only) and c.name not in opts.skip]


def run(opts: argparse.Namespace) -> int:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    todo = selected(opts)
    claim_scratch(opts.scratch)
    spawner = Spawner()  # first, while this process is small (see spawner_main)
    try:
        return measure_all(opts, todo, spawner, started)
    finally:
        spawner.close()


def measure_all(opts: argparse.Namespace, todo: list[Case], spawner: Spawner, started: str) -> int:
    sides = [
        make_side(opts.repo, opts.scratch, "A", opts.base, opts.extras, opts.python),
        make_side(opts.repo, opts.scratch, "B", opts.new, opts.extras, opts.python),
    ]
    store, info = ensure_store(opts.scratch, sides[0], opts.messages, opts.gen_args, opts.timeout)
    work = opts.scratch / "run"
    work.mkdir(exist_ok=True)
    values = {**info["facts"], "store": str(store), "out": str(work / "out")}
    rows = []
    for case in todo:
        row = bench_case(case, sides, values, opts, spawner, work)
        rows.append(row)
        print(
            f"{case.name}: "
            + (
                f"skipped, {row.note}"
                if row.skipped
                else f"A {statistics.median(row.cpu_a):.3f} s, B {statistics.median(row.cpu_b):.3f} s CPU, "
                f"B/A {row.ratio():.3f} {row.verdict(opts.threshold)}"
            ),
            file=sys.stderr,
            flush=True,
        )
    data = report(rows, sides, store, info, opts, started)
    data["machine"]["rss_floor_kib"] = spawner.floor_kib
    md = markdown(data, rows, opts.threshold)
    print(md)
    print(f"written: {write_results(data, md, opts.results)}.{{json,md}}", file=sys.stderr)
    return 1 if any(r.verdict(opts.threshold) == "SLOWER" for r in rows) else 0


def main(argv: list[str] | None = None) -> int:
    """Exit 0: no case SLOWER; 1: some case SLOWER; 2: a set-up step failed."""
    opts = parse(argv)
    try:
        if opts.list:
            print("\n".join(f"{c.name}\t{shlex.join(('rmqstore', *c.argv))}" for c in cases(opts.gen_messages)))
            return 0
        if opts.cleanup_only:
            cleanup(opts.repo, opts.scratch)
            return 0
        code = run(opts)
        if opts.cleanup:
            cleanup(opts.repo, opts.scratch)
        return code
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        print(f"compare_revisions: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
