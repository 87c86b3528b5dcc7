#!/usr/bin/env python
"""Output channel faults × every command × every format (issue 31).

    .venv/bin/python fuzz/outfaults.py [--only NAME,…] [--faults FAULT,…] [--fork] [--spark]

A cron job or a ``nohup`` shell meets output that cannot be written: stdout on a full disk
(``> /dev/full``), stdout or stderr closed (``>&-``, ``2>&-``), stderr full, a pipe whose
reader went away before the first write or after the first line (``| head -1``). Each
case runs a command of :func:`commands` in one format on a small generated store, first
cleanly (its reference exit code, stdout and effect), then under each fault of
:data:`FAULTS`, and :func:`judge` holds it to README's "Exit codes":

- no traceback, no "Exception ignored", no signal, no hang, no undocumented exit code;
- a fault of stdout: exit 5 for a command that had output to write (the output is lost,
  nothing was changed), 6 for a writing command (expire, rebuild-index, generate, export)
  that did its work first, and one ``rmqstore: error:`` line, the last on stderr; a
  writing command whose stdout was closed from the start refuses before any work (5),
  unless ``--quiet`` keeps it from printing. A pipe's reader gone: stream commands stop
  with 0 and say nothing; verify keeps its answer (the clean run's code); a writing command
  that did its work says 6;
- a fault of stderr: the clean run's exit code, and stdout exactly the clean run's (no
  stderr text landed in it);
- a read command leaves the store as it was (bytes and mtimes); a writing command leaves
  the clean run's result (contents; expire's journal compared without run ids) or, when
  it refused, the store as it was.

Every run is a real process with real descriptors. By default each is a fresh ``python
-m rmqstore_cli``; ``--fork`` forks it from a server that imported rmqstore once and sets
up the process as the interpreter would (``sys.stdout`` None for a closed fd 1; the
last flush of the standard streams at exit), five times cheaper: ``tests/safety/
test_output_faults.py`` runs the whole matrix that way and a sample both ways. ``--spark``
adds verify, rebuild-index and export on ``--engine spark --spark-master local[1]``
(always fresh processes). Results: ``fuzz/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = ["--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400"]
FORMATS = ("table", "jsonl", "json")
#: The faults, as what a shell would write after the command.
FAULTS = {
    "stdout-full": "> /dev/full",
    "stdout-closed": ">&-",
    "stdout-pipe": "| (reader gone before the first write)",
    "stdout-pipe-late": "| head -1",
    "stderr-closed": "2>&-",
    "stderr-full": "2>/dev/full",
}
DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 5, 6}
TRACEBACK = "Traceback (most recent call last)"
STREAM, ANSWER, WRITE = "stream", "answer", "write"
TORN_FILE = "00000000000000000000"  # the torn store's short commit-log file (of several)
TIMEOUT = 120


# ------------------------------------------------------------------ the stores and commands


@dataclass
class Stores:
    """The stores the cases read: ``good`` (with consumer offsets), ``damaged`` (no index:
    verify exits 1), ``torn`` (its first commit-log file cut short, for repair --pad),
    ``timer`` (a 5.x store with timer messages, some overdue, POP consumption and traced
    sends: the system topics' commands read it, dump-timer, pop, dump-commitlog --trace,
    stats --by minute; its wheel and log are large, so only those read it), and a probe of
    ``good``."""

    work: Path
    good: Path
    damaged: Path
    timer: Path
    torn: Path
    topic: str = ""
    key: str = ""
    msg_id: str = ""
    time_ms: int = 0


def _generate(store: Path, messages: int, *extra: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "generate",
            "--store",
            str(store),
            "--messages",
            str(messages),
            "--seed",
            "31",
            *SIZES,
            *extra,
            "--format",
            "json",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


def make_stores(work: Path, messages: int = 400) -> Stores:
    s = Stores(work, work / "good", work / "damaged", work / "timer", work / "torn")
    if not s.good.exists():
        _generate(s.good, messages)
        (s.good / "config" / "consumerOffset.json").write_text(
            json.dumps({"offsetTable": {"Refund.Topic-2@billing": {"0": 5, "1": 7}}})
        )
        shutil.copytree(s.good, s.damaged, symlinks=True)
        shutil.rmtree(s.damaged / "index")
        shutil.copytree(s.good, s.torn, symlinks=True)
        os.truncate(s.torn / "commitlog" / TORN_FILE, 40000)  # a torn copy: the file cut inside a record
        system = ("--overdue-timer-ratio", "0.3", "--pop-messages", "40", "--trace-messages", "20")
        _generate(s.timer, 100, "--broker-version", "5", "--timer-ratio", "0.2", *system)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            "dump-commitlog",
            "--store",
            str(s.good),
            "--format",
            "jsonl",
            "--limit",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for line in r.stdout.splitlines():
        d = json.loads(line)
        if d.get("keys") and d["topic"] == "Refund.Topic-2":
            s.topic, s.key, s.msg_id, s.time_ms = d["topic"], d["keys"][0], d["msg_id"], d["store_timestamp"]
            break
    return s


@dataclass(frozen=True)
class Command:
    """One command line of the matrix: ``argv`` with {S} (the store: the shared one for a
    read, a fresh copy for a write), {D} (the damaged store), {T} (the timer store), {OUT}
    (a new output directory) and {NEW} (a new store directory) to fill in."""

    name: str
    kind: str
    argv: tuple[str, ...]
    formats: tuple[str, ...] = FORMATS
    quiet: bool = False
    spark: bool = False
    #: The store a writing command gets a copy of: good, or damaged (no index: an in-place
    #: rebuild then changes it).
    source: str = "good"

    @property
    def copies_store(self) -> bool:
        return self.kind == WRITE and "{S}" in self.argv


def commands(s: Stores, pyarrow: bool = True, spark: bool = False) -> list[Command]:
    now = ("--reserved-hours", "0", "--now", "2100-01-01T00:00:00Z")
    c = [
        Command("dump-commitlog", STREAM, ("dump-commitlog", "--store", "{S}")),
        Command("dump-commitlog-none", STREAM, ("dump-commitlog", "--store", "{S}", "--key", "no-such-key")),
        Command("dump-cq", STREAM, ("dump-cq", s.topic, "0", "--store", "{S}")),
        Command("dump-cq-summary", STREAM, ("dump-cq", "--summary", "--store", "{S}")),
        Command("dump-timer", STREAM, ("dump-timer", "--store", "{T}")),
        Command("dump-timer-overdue", STREAM, ("dump-timer", "--store", "{T}", "--overdue", *now[2:])),
        Command("pop", STREAM, ("pop", "--store", "{T}", *now[2:])),
        Command("dump-commitlog-trace", STREAM, ("dump-commitlog", "--store", "{T}", "--trace")),
        Command("stats-by-minute", STREAM, ("stats", "--store", "{T}", "--by", "minute")),
        Command(
            "search-offset", STREAM, ("search-offset", "--topic", s.topic, "--time", str(s.time_ms), "--store", "{S}")
        ),
        Command("consumer-progress", STREAM, ("consumer-progress", "--store", "{S}")),
        Command("stats", STREAM, ("stats", "--store", "{S}")),
        Command("index-lookup", STREAM, ("index-lookup", s.key, "--store", "{S}")),
        Command("decode-msgid", STREAM, ("decode-msgid", s.msg_id, "--store", "{S}")),
        Command("no-store", STREAM, ("dump-commitlog", "--store", "{S}/no-such-dir"), ("jsonl",)),
        Command(
            "transactions",
            STREAM,
            ("transactions", "--store", "{S}", "--state", "committed", "--now", "2100-01-01T00:00:00Z"),
        ),
        Command("diff", STREAM, ("diff", "{S}", "{D}")),
        Command("verify", ANSWER, ("verify", "--store", "{S}")),
        Command("verify-damaged", ANSWER, ("verify", "--store", "{D}")),
        Command("verify-list-checks", ANSWER, ("verify", "--list-checks")),
        Command("help", STREAM, ("--help",), ("",)),
        Command("version", STREAM, ("--version",), ("",)),
        Command("expire", WRITE, ("expire", "--store", "{S}", *now)),
        Command("expire-quiet", WRITE, ("expire", "--store", "{S}", *now, "--quiet"), quiet=True),
        Command("expire-dry-run", WRITE, ("expire", "--store", "{S}", *now, "--dry-run")),
        Command("rebuild-output", WRITE, ("rebuild-index", "--store", "{S}", "--output", "{OUT}", *SIZES)),
        Command(
            "rebuild-in-place",
            WRITE,
            ("rebuild-index", "--store", "{S}", "--in-place", "--no-backup", *SIZES),
            source="damaged",
        ),
        Command("rebuild-dry-run", WRITE, ("rebuild-index", "--store", "{S}", "--in-place", "--dry-run", *SIZES)),
        Command(
            "repair",
            WRITE,
            ("repair", "--store", "{S}", "--pad", f"{{S}}/commitlog/{TORN_FILE}", *SIZES[:2]),
            source="torn",
        ),
        Command(
            "repair-dry-run",
            WRITE,
            ("repair", "--store", "{S}", "--pad", f"{{S}}/commitlog/{TORN_FILE}", "--dry-run", *SIZES[:2]),
            source="torn",
        ),
        Command(
            "generate",
            WRITE,
            ("generate", "--store", "{NEW}", "--messages", "60", "--start", "2026-01-01T00:00:00Z", *SIZES),
        ),
    ]
    if pyarrow:
        c.append(Command("export", WRITE, ("export", "--store", "{S}", "--output", "{OUT}")))
    if spark:
        sp = ("--engine", "spark", "--spark-master", "local[1]")
        c += [
            Command("verify-spark", ANSWER, ("verify", "--store", "{D}", *sp), spark=True),
            Command("rebuild-spark", WRITE, ("rebuild-index", "--store", "{S}", "--output", "{OUT}", *sp), spark=True),
        ]
        if pyarrow:
            c.append(Command("export-spark", WRITE, ("export", "--store", "{S}", "--output", "{OUT}", *sp), spark=True))
    return c


# ------------------------------------------------------------------ running one process


@dataclass
class Result:
    exit: int | None  # None: no answer within the time limit; negative: a signal
    stdout: bytes
    stderr: bytes


def _fault_fds(fault: str | None, out_path: str, err_path: str) -> None:
    """In the child: fds 0-2 as the fault wants them (0 is /dev/null; the rest to files)."""

    def put(path: str, fd: int, flags: int = os.O_WRONLY) -> None:
        f = os.open(path, flags)
        os.dup2(f, fd)
        os.close(f)

    put(os.devnull, 0, os.O_RDONLY)
    put(out_path, 1)
    put(err_path, 2)
    if fault == "stdout-full":
        put("/dev/full", 1)
    elif fault == "stdout-closed":
        os.close(1)
    elif fault == "stdout-pipe":
        r, w = os.pipe()
        os.close(r)
        os.dup2(w, 1)
        os.close(w)
    elif fault == "stdout-pipe-late":
        r, w = os.pipe()
        if os.fork() == 0:  # the reader: one line, then gone
            os.close(w)
            got = b""
            while b"\n" not in got:
                b = os.read(r, 1)
                if not b:
                    break
                got += b
            os._exit(0)
        os.close(r)
        os.dup2(w, 1)
        os.close(w)
    elif fault == "stderr-closed":
        os.close(2)
    elif fault == "stderr-full":
        put("/dev/full", 2)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def run_exec(argv: list[str], fault: str | None, tmp: Path, timeout: float = TIMEOUT) -> Result:
    """``python -m rmqstore_cli argv`` as a fresh process under ``fault``."""
    out, err = tmp / "stdout", tmp / "stderr"
    out.write_bytes(b"")
    err.write_bytes(b"")
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    p = subprocess.Popen(
        [sys.executable, "-m", "rmqstore_cli", *argv],
        env=env,
        start_new_session=True,
        cwd=tmp,
        preexec_fn=lambda: _fault_fds(fault, str(out), str(err)),
    )  # cwd: -m imports from it
    try:
        code: int | None = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        code = None
    return Result(code, _read(out), _read(err))


def _fresh_stdio() -> None:
    """The standard streams as a starting interpreter makes them (``create_stdio``): None for
    a closed descriptor, else a buffered text stream, stderr line-buffered."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            setattr(sys, name, None)
            setattr(sys, f"__{name}__", None)
            continue
        raw = io.FileIO(fd, "rb" if fd == 0 else "wb", closefd=False)
        tty = raw.isatty()
        buf = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        s = io.TextIOWrapper(
            buf, encoding="utf-8", errors="backslashreplace" if fd == 2 else "strict", line_buffering=tty or fd == 2
        )
        setattr(sys, name, s)
        setattr(sys, f"__{name}__", s)


def _child(argv: list[str], fault: str | None, out: str, err: str) -> None:
    """In a forked child of the server: the fault's descriptors, fresh streams, ``main()``,
    then the interpreter's last flush (a failure there is "Exception ignored", exit 120)."""
    code = 70
    try:
        os.setsid()
        _fault_fds(fault, out, err)
        _fresh_stdio()
        sys.argv = ["rmqstore", *argv]
        from rmqstore_cli.app import main

        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # as the interpreter does: sys.excepthook (typer's rich one), exit 1
            try:
                if sys.stderr is not None:  # else "lost sys.stderr", to a closed fd 2
                    sys.excepthook(*sys.exc_info())
            except BaseException:  # a hook that cannot write is silent
                pass
            code = 1
        for s in (sys.stdout, sys.stderr):
            try:
                if s is not None:
                    s.flush()
            except Exception as e:  # as Py_FinalizeEx reports it
                try:
                    os.write(2, f"Exception ignored in: {s!r}\n{type(e).__name__}: {e}\n".encode())
                except OSError:
                    pass
                code = 120
    finally:
        os._exit(code)


def serve() -> None:
    """The fork server (``--serve``): one JSON request a line on stdin ({argv, fault, out,
    err, timeout}), one answer a line on stdout ({exit}); every child forked from this
    process, which imported rmqstore and every command module once."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.update(NO_COLOR="1", COLUMNS="200")
    _preload()

    for line in sys.stdin:
        q = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(q["argv"], q["fault"], q["out"], q["err"])
        deadline = time.monotonic() + q["timeout"]
        code = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                break
            time.sleep(0.005)
        if code is None:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        sys.stdout.write(json.dumps({"exit": code}) + "\n")
        sys.stdout.flush()


def _preload() -> None:
    """Import what the commands import (every rmqstore module but the Spark driver's, and
    numpy), so a forked run pays only for its own work. Not pyarrow: it starts a thread,
    and a fork should copy a single-threaded process."""
    import importlib
    import pkgutil

    import rmqstore_cli
    from rmqstore_cli import app

    for name, _, _ in app.COMMANDS:
        app.load_command(name)
    for mod in pkgutil.walk_packages(rmqstore_cli.__path__, "rmqstore_cli."):
        if ".spark" in mod.name or mod.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(mod.name)
        except ImportError:  # an optional extra (rocksdb, pyarrow) not installed
            pass


class ForkServer:
    """A :func:`serve` process and the way to ask it for a run."""

    def __init__(self):
        self.p = subprocess.Popen(
            [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT, text=True
        )

    def run(self, argv: list[str], fault: str | None, tmp: Path, timeout: float = TIMEOUT) -> Result:
        out, err = tmp / "stdout", tmp / "stderr"
        out.write_bytes(b"")
        err.write_bytes(b"")
        self.p.stdin.write(
            json.dumps({"argv": argv, "fault": fault, "out": str(out), "err": str(err), "timeout": timeout}) + "\n"
        )
        self.p.stdin.flush()
        ready, _, _ = select.select([self.p.stdout], [], [], timeout + 30)
        if not ready:
            raise RuntimeError("the fork server did not answer")
        return Result(json.loads(self.p.stdout.readline())["exit"], _read(out), _read(err))

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=30)


# ------------------------------------------------------------------ one case, judged


def digest(top: Path, mtimes: bool) -> dict[str, tuple]:
    """Every file under ``top``: content hash (and mtime); expire's journal without its run
    ids, a rebuild's ``.bak-<id>`` names without the id."""
    out: dict[str, tuple] = {}
    if not top.exists():
        return out
    for p in sorted(top.rglob("*")):
        if p.is_symlink() or not p.is_file():
            continue
        data = p.read_bytes()
        rel = re.sub(r"\.bak-[0-9a-f-]+|(?<=rmqstore-backup/)[0-9-]+", "ID", str(p.relative_to(top)))
        if p.name == "rmqstore-expire.jsonl":
            data = re.sub(rb'"run":"[^"]*",', b"", data)
        out[rel] = (hashlib.sha256(data).hexdigest(),) + ((p.stat().st_mtime_ns,) if mtimes else ())
    return out


#: Timings, and the ids a rebuild names its backups and staging directory by.
_VOLATILE = re.compile(
    rb"\d+\.\d+|(?<=messages_per_second)\D*\d+|(?<=\.bak-)[0-9-]+|(?<=\.rebuild-index-)[0-9-]+"
    rb"|(?<=rmqstore-backup/)[0-9-]+"
)
_LAYOUT = re.compile(rb"(?:\s|\xe2\x94[\x80-\xbf])+")  # spaces and box drawing: a table's widths


def same_output(a: bytes, b: bytes, kind: str) -> bool:
    """Two runs' stdout alike (a writing command's timings, decimal numbers, and the table
    widths they move, set aside)."""
    if kind == WRITE:
        a, b = (_LAYOUT.sub(b" ", _VOLATILE.sub(b"N", x)) for x in (a, b))
    return a == b


@dataclass
class Outcome:
    command: str
    fmt: str
    fault: str
    exit: int | None
    expected: set[int]
    problems: list[str] = field(default_factory=list)
    stderr: str = ""


def expected_exits(cmd: Command, fault: str, clean: Result, changed: bool) -> set[int]:
    """README's "Exit codes" for ``cmd`` under ``fault``, given its clean run."""
    c, printed = clean.exit, bool(clean.stdout)
    if fault.startswith("stderr"):
        return {c}
    if fault == "stdout-closed" and cmd.kind == WRITE and not cmd.quiet:
        return {5}  # refused before any work
    if not printed:
        return {c}  # nothing to write: nothing lost
    if fault in ("stdout-full", "stdout-closed"):
        return {6} if cmd.kind == WRITE and changed else {5}
    if cmd.kind == ANSWER:
        return {c}
    if cmd.kind == WRITE and changed:
        return {6} if fault == "stdout-pipe" else {6, c}
    return {0} if fault == "stdout-pipe" else {0, c}


class Matrix:
    """Runs and judges cases in ``work`` with ``runner`` (:func:`run_exec` or a
    :class:`ForkServer`'s ``run``). Every run of a case gets the same paths (the case
    directory is emptied between runs), so a writing command's files compare byte for byte."""

    def __init__(self, stores: Stores, runner, spark_runner=run_exec):
        self.s = stores
        self.runner = runner
        self.spark_runner = spark_runner
        self.case_dir = stores.work / "case"
        self.io_dir = stores.work / "io"

    def _prepare(self, cmd: Command, fmt: str) -> list[str]:
        """The emptied case directory (a fresh store copy in it for a writing command) and
        the argv."""
        for d in (self.case_dir, self.io_dir):
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
        store = self.s.good
        if cmd.copies_store:
            store = self.case_dir / "store"
            shutil.copytree(getattr(self.s, cmd.source), store, symlinks=True)
        subst = {
            "{S}": str(store),
            "{D}": str(self.s.damaged),
            "{T}": str(self.s.timer),
            "{OUT}": str(self.case_dir / "out"),
            "{NEW}": str(self.case_dir / "new"),
        }
        argv = []
        for a in cmd.argv:
            for k, v in subst.items():
                a = a.replace(k, v)
            argv.append(a)
        return argv + (["--format", fmt] if fmt else [])

    def run(self, cmd: Command, fmt: str, fault: str | None) -> tuple[Result, dict, dict]:
        """One run: its result, and for a writing command the digests of its case directory
        before and after (contents)."""
        argv = self._prepare(cmd, fmt)
        write = cmd.kind == WRITE
        before = digest(self.case_dir, False) if write else {}
        r = (self.spark_runner if cmd.spark else self.runner)(argv, fault, self.io_dir)
        return r, before, digest(self.case_dir, False) if write else {}

    def case(self, cmd: Command, fmt: str, faults) -> list[Outcome]:
        """The clean run, then each fault, judged against it; a read command's stores
        (bytes and mtimes) the same after all of them."""
        stores = [
            d
            for key, d in (("{S}", self.s.good), ("{D}", self.s.damaged), ("{T}", self.s.timer))
            if any(key in a for a in cmd.argv)
        ]
        read_before = [] if cmd.kind == WRITE else [digest(d, True) for d in stores]
        clean, c_before, c_after = self.run(cmd, fmt, None)
        base = Outcome(cmd.name, fmt, "clean", clean.exit, {3} if cmd.name == "no-store" else {0, 1})
        base.problems = judge_common(clean)
        if clean.exit not in base.expected:
            base.problems.append(f"clean run exit {clean.exit}: {clean.stderr.decode(errors='replace')[-300:]}")
        out = [base]
        for fault in faults:
            r, before, after = self.run(cmd, fmt, fault)
            o = Outcome(
                cmd.name,
                fmt,
                fault,
                r.exit,
                expected_exits(cmd, fault, clean, c_before != c_after),
                stderr=r.stderr.decode("utf-8", "replace"),
            )
            o.problems = judge_common(r) + judge_fault(cmd, fault, r, o.expected, clean)
            if cmd.kind == WRITE:
                o.problems += judge_effect(r, before, after, c_after)
            out.append(o)
        if read_before and read_before != [digest(d, True) for d in stores]:
            out[-1].problems.append("a read command changed a store")
        return out


def judge_common(r: Result) -> list[str]:
    """What no run may do: hang, die of a signal, exit undocumented, print a traceback."""
    p = []
    if r.exit is None:
        p.append("hang")
    elif r.exit < 0:
        p.append(f"killed by {signal.Signals(-r.exit).name}")
    elif r.exit not in DOCUMENTED_EXITS:
        p.append(f"undocumented exit {r.exit}")
    err = r.stderr.decode("utf-8", "replace")
    if TRACEBACK in err or "Exception ignored" in err:
        p.append("traceback: " + err.strip().splitlines()[-1][:200])
    return p


def judge_fault(cmd: Command, fault: str, r: Result, expected: set[int], clean: Result) -> list[str]:
    """The exit code, the one error line on a writable stderr, and for a stderr fault a
    stdout exactly the clean run's."""
    p = []
    if r.exit not in expected:
        p.append(f"exit {r.exit}, expected {sorted(expected)}")
    lines = r.stderr.decode("utf-8", "replace").splitlines()
    errs = [ln for ln in lines if ln.startswith("rmqstore: error:")]
    if fault.startswith("stdout") and r.exit in (5, 6) and (len(errs) != 1 or lines[-1] != errs[0]):
        p.append(f"exit {r.exit} with {len(errs)} error lines (the last of stderr: {lines[-1:]})")
    if fault.startswith("stdout-pipe") and r.exit in (0, 1) and errs:
        p.append(f"a pipe's reader gone, and it said: {errs[0][:120]}")
    if fault.startswith("stderr") and not same_output(r.stdout, clean.stdout, cmd.kind):
        p.append(f"stdout differs from the clean run's: {r.stdout[:120]!r} vs {clean.stdout[:120]!r}")
    return p


def judge_effect(r: Result, before: dict, after: dict, clean_after: dict) -> list[str]:
    """A writing command does the clean run's work, or none when it refused (exit 5)."""
    if r.exit == 5 and after != before:
        return ["exit 5 (nothing changed) but files changed"]
    if r.exit in (0, 1, 6) and after != clean_after:
        return [
            "its work differs from the clean run's: "
            + ", ".join(sorted(k for k in set(after) | set(clean_after) if after.get(k) != clean_after.get(k))[:4])
        ]
    return []


# ------------------------------------------------------------------ the run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="command names, comma-separated (default: all)")
    ap.add_argument("--faults", default=",".join(FAULTS))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--fork", action="store_true", help="fork each run from a server (faster)")
    ap.add_argument("--spark", action="store_true", help="add the --engine spark cases")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve:
        serve()
        return 0
    work = Path(tempfile.mkdtemp(prefix="rmqoutfaults-"))
    try:
        stores = make_stores(work)
        has_pyarrow = subprocess.run([sys.executable, "-c", "import pyarrow"], capture_output=True).returncode == 0
        cmds = [c for c in commands(stores, has_pyarrow, a.spark) if not a.only or c.name in a.only.split(",")]
        server = ForkServer() if a.fork else None
        m = Matrix(stores, server.run if server else run_exec)
        faults, formats = a.faults.split(","), a.formats.split(",")
        t0 = time.time()
        runs, failed, codes = 0, [], Counter()
        for cmd in cmds:
            for fmt in cmd.formats:
                if fmt and fmt not in formats:
                    continue
                for o in m.case(cmd, fmt, faults):
                    runs += 1
                    codes[(o.fault, o.exit)] += 1
                    if o.problems:
                        failed.append(o)
                        print(
                            f"FAIL {o.command} --format {o.fmt or '-'} {FAULTS.get(o.fault, o.fault)}: "
                            f"{'; '.join(o.problems)}",
                            flush=True,
                        )
        if server:
            server.close()
        print(
            f"{runs} runs ({len(cmds)} commands, faults {', '.join(faults)}), {len(failed)} failing, "
            f"{time.time() - t0:.0f} s"
        )
        for fault in ["clean", *faults]:
            seen = sorted((e, n) for (f, e), n in codes.items() if f == fault)
            print(f"  {fault}: " + ", ".join(f"exit {e} ×{n}" for e, n in seen))
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
