"""Every row of issue 23's table in one run, against the naive reader (issue 23, "Speed").

Usage (from the project root):

    .venv/bin/python bench/bench_all.py [--messages 1000000] [--dir /tmp/rmq-bench-all] [--keep]
                                        [--only verify,dump] [--json bench/results/all.json]

A store of ``--messages`` sends of 256-byte bodies (the generator's default mix, so a few
per cent more records than sends) is written by the ``generate`` row itself; every other
row reads it. Each command is a whole child process (interpreter start-up included) with
its stdout drained through a pipe; its CPU time (user + system, from ``os.times``) is
what counts, since this machine is shared, with wall time and the load average beside it.

The yardstick, run the same way in the same run: :func:`naive`, a 20-line pure-Python
``struct.unpack_from`` loop that decodes every record's fixed fields (IPv4 and IPv6
hosts), body, topic and properties bytes. Each row prints records/s and its CPU time as a
multiple of the yardstick's (the issue's floors: 1x for the readers, 2x for export, 3x
for generate).

Rows:

* ``generate`` and ``generate --from-jsonl`` (the input, a ``dump-commitlog --format jsonl
  --body base64`` of the store, is written before, untimed);
* ``verify``, ``rebuild-index --output``, ``dump-commitlog --format jsonl`` and ``export``
  (local engine, no body) over the store; dump and export with ``--jobs 1`` (the issue's
  marks are one core's);
* ``rebuild-index --jobs 1``: the rebuild in one process (the issue's mark, one core's; the
  ``rebuild-index`` row is the default's, every core);
* ``dump-commitlog jsonl --jobs 2 (wall)``: the dump on two processes, for its wall time;
* ``export --jobs 2``: the same on two processes; after the table, its wall time over
  ``export``'s;
* ``verify --jobs 1`` and ``verify --jobs 2``: the same on one process and on two (the
  commit-log files split into parts, pipeline/verify_tasks.py); after the table, their wall
  times as a ratio (issue 35: "verify wall time on 2 cores / on 1 core");
* ``verify 16 KiB bodies``: ``verify --jobs 1`` of a store of ``--messages``/8 sends of
  16 KiB bodies (2 GB at the default; written untimed): after the table, its records' bytes
  over its CPU less the fixed cost (a 1 000-send store's ``verify --jobs 1``; each the least
  of three runs, the others run then), in GB/s, beside CRC-32's GB/s over the
  same bytes in this process (zlib-ng's, ``pip install zlib-ng``, else zlib's: the line says
  which), the floor a CRC-checking read cannot beat;
* ``fixed cost``: ``verify`` of a 1 000-send store with the compiled kernels forced on
  (:data:`~rmqstore_cli.store.files.fastpaths.FAST_PATHS` thresholds at 0: what an older install
  needs; since the engine's loops are C, built at install, they run whenever built and
  only dump's JSON renderer has a threshold), beside ``--help``; and ``dump-commitlog
  --format jsonl`` of it the same way;
* ``incident``: ``transactions`` and ``pop`` (``--now`` after every store time) over a
  second store of ``--messages`` sends written untimed by ``generate --broker-version 5
  --transaction-ratio 0.05 --pop-messages N/20`` (:func:`incident_store`), and ``diff`` of
  the main store against a copy of itself (every file compared to its last byte) and
  against a copy with N/50 more sends appended (:func:`longer_copy`; ``--messages``: every
  queue's extra messages listed): CPU and wall only, no records/s (the naive reader reads
  the main store, one store);
* ``many queues``: ``generate``, ``verify`` and ``rebuild-index --output`` of a store of
  20 000 one-queue topics holding 40 000 sends (:data:`MANY_QUEUES`): CPU per queue, not
  per record (no records/s);
* ``first run``: those two forced rows once more with an empty numba cache
  (``NUMBA_CACHE_DIR`` a new directory): for an install whose loops numba compiles (a
  ``--before`` of a commit before the C extensions) the extra CPU over the warm run is the
  compile a first command after install pays. This install's loops are C, compiled by
  ``pip install`` (setup.py, ~0.2 s of gcc, once), so its first run is its warm run.

``--before PYTHON`` (the interpreter of another install, e.g. a venv whose editable
install points at a ``git archive`` of the old commit) runs every read row with it too,
right after the row, so that both see the same load; ``--only`` picks rows.

Every row also has its peak RSS (``os.wait4``: the command and the workers it forked). Last,
issue 35's marks (:data:`MARKS`) are printed from the run's rows, each beside its floor and
aim and whether the floor is met.
Not a test: prints a table and writes ``--json``; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "rmqstore_cli"]
#: forces every fast path on, then runs the CLI (the fixed-cost row); ``walk_after`` and
#: ``for_bytes`` are the thresholds of installs before the C loops (``--before``)
FORCED = [
    sys.executable,
    "-c",
    "import sys; from rmqstore_cli.store.files.fastpaths import FAST_PATHS as F; "
    "F.walk_after = F.json_min = F.for_bytes = 0; sys.argv[0] = 'rmqstore'; "
    "from rmqstore_cli.app import main; main()",
]


def naive(store: str) -> int:
    """The yardstick: every record of every commit-log file, its fields decoded one by one."""
    n, files = 0, sorted(os.listdir(os.path.join(store, "commitlog")))
    for name in files:
        with open(os.path.join(store, "commitlog", name), "rb") as f:
            buf, pos = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), 0
        while pos + 8 <= len(buf):
            total, magic = struct.unpack_from(">iI", buf, pos)
            if magic not in (0xDAA320A7, 0xDAA320AB) or total <= 0:
                break
            crc, qid, flag, qoff, phy, sysflag, born = struct.unpack_from(">iiiqqiq", buf, pos + 8)
            p = pos + 48
            hl = 16 if sysflag & 0x10 else 4
            born_host, born_port = buf[p : p + hl], struct.unpack_from(">i", buf, p + hl)[0]
            p += hl + 4
            store_ts = struct.unpack_from(">q", buf, p)[0]
            hl = 16 if sysflag & 0x20 else 4
            store_host, store_port = buf[p + 8 : p + 8 + hl], struct.unpack_from(">i", buf, p + 8 + hl)[0]
            p += 12 + hl
            reconsume, prepared, blen = struct.unpack_from(">iqi", buf, p)
            body = buf[p + 16 : p + 16 + blen]
            p += 16 + blen
            tl, p = (struct.unpack_from(">H", buf, p)[0], p + 2) if magic == 0xDAA320AB else (buf[p], p + 1)
            topic = buf[p : p + tl]
            plen = struct.unpack_from(">h", buf, p + tl)[0]
            props = buf[p + tl + 2 : p + tl + 2 + plen]
            # the decoded fields are dropped: the yardstick is the decoding
            _ = (born_host, born_port, store_ts, store_host, store_port, body, topic, props)
            n += 1
            pos += total
    return n


class Measured(NamedTuple):
    """One child process's CPU and wall seconds, its stdout's first MiB, its peak RSS and the
    system part of its CPU (the kernel's: file creation, page faults, pipe writes)."""

    cpu: float
    wall: float
    head: bytes
    rss_mb: float
    sys: float = 0.0


def measure(argv: list[str], env: dict | None = None, stdout=None) -> Measured:
    """Runs one child process: its CPU (user + system) and peak RSS from ``os.wait4``'s
    resource usage (which covers the workers it forked and reaped), its wall time, and its
    stdout's first MiB, the rest drained (or all of it sent to ``stdout``). Exit 1 is an
    answer (``diff``: the stores differ), not a failure."""
    t = time.perf_counter()
    p = subprocess.Popen(
        argv, stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, **(env or {})), cwd="/"
    )  # not the tree: -m/-c would import from it
    head = b""
    if stdout is None:
        head = p.stdout.read(1 << 20)
        while p.stdout.read(1 << 20):
            pass
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode not in (0, 1) or (p.returncode == 1 and argv[len(CLI)] != "diff"):
        raise SystemExit(f"failed ({p.returncode}): {' '.join(argv)}\n{err.decode(errors='replace')[-2000:]}")
    cpu, wall = usage.ru_utime + usage.ru_stime, time.perf_counter() - t
    return Measured(cpu, wall, head, usage.ru_maxrss / 1024, usage.ru_stime)


def run(argv: list[str], env: dict | None = None, stdout=None) -> tuple[float, float, bytes]:
    """(CPU, wall) seconds of one child process and its stdout's first MiB (:func:`measure`)."""
    m = measure(argv, env, stdout)
    return m.cpu, m.wall, m.head


#: The incident rows' "now": after every generated store time (generate's clock starts in 2024).
NOW = "2030-01-01T00:00:00Z"


def incident_store(messages: int) -> list[str]:
    """generate's arguments for the incident rows' store (untimed): ``messages`` sends, a 5.x
    broker's with 5 % transactional sends and a POP group that popped a twentieth of them."""
    return [
        "--messages",
        str(messages),
        "--body-size",
        "256",
        "--broker-version",
        "5",
        "--transaction-ratio",
        "0.05",
        "--pop-messages",
        str(max(100, messages // 20)),
        "--seed",
        "1",
    ]


#: The many-queue rows' store: 20 000 one-queue topics of 2 sends each, where the cost per
#: queue (files opened and mapped, tables per topic), not per record, is what is measured.
MANY_QUEUES = ["--topics", "20000", "--queues", "1", "--messages", "40000", "--seed", "1"]


def rows(a, d: Path) -> list[tuple[str, list[str], dict, str]]:
    """(row, argv, env, what it stands for) in the order they run; with ``--only``, the
    generate and naive rows (the store, the yardstick) and the rows named."""
    every = _rows(a, d)
    if not a.only:
        return every
    return [r for r in every if r[0] in ("generate", "naive reader") or r[0].startswith(tuple(a.only.split(",")))]


def _rows(a, d: Path) -> list[tuple[str, list[str], dict, str]]:
    s, small, many, inc = str(d / "store"), str(d / "small"), str(d / "many"), str(d / "incident")

    def cold() -> dict[str, str]:
        return {"NUMBA_CACHE_DIR": tempfile.mkdtemp(prefix="numba-", dir=d)}

    return [
        (
            "generate",
            CLI + ["generate", "--store", s, "--messages", str(a.messages), "--body-size", "256", "--format", "json"],
            {},
            "records",
        ),
        ("naive reader", [sys.executable, __file__, "--naive", s], {}, "yardstick"),
        (
            "generate --from-jsonl",
            CLI + ["generate", "--store", str(d / "replay"), "--from-jsonl", str(d / "dump.jsonl"), "--format", "json"],
            {},
            "records",
        ),
        ("verify", CLI + ["verify", "--store", s, "--format", "json"], {}, "records"),
        ("verify --jobs 1", CLI + ["verify", "--store", s, "--format", "json", "--jobs", "1"], {}, "records"),
        ("verify --jobs 2", CLI + ["verify", "--store", s, "--format", "json", "--jobs", "2"], {}, "records"),
        (
            "verify 16 KiB bodies",
            CLI + ["verify", "--store", str(d / "big-bodies"), "--format", "json", "--jobs", "1"],
            {},
            "bytes",
        ),
        (
            "rebuild-index",
            CLI + ["rebuild-index", "--store", s, "--output", str(d / "rebuilt"), "--format", "json", "--no-progress"],
            {},
            "records",
        ),
        (
            "rebuild-index --jobs 1",
            CLI
            + ["rebuild-index", "--store", s, "--output", str(d / "rebuilt-1"), "--format", "json", "--no-progress"]
            + ["--jobs", "1"],
            {},
            "records",
        ),
        (
            "dump-commitlog --format jsonl",
            CLI + ["dump-commitlog", "--store", s, "--format", "jsonl", "--tz", "UTC", "--jobs", "1"],
            {},
            "records",
        ),
        (
            "dump-commitlog jsonl --jobs 2 (wall)",
            CLI + ["dump-commitlog", "--store", s, "--format", "jsonl", "--tz", "UTC", "--jobs", "2"],
            {},
            "records",
        ),
        (
            "export (local, no body)",
            CLI + ["export", "--store", s, "--output", str(d / "export"), "--format", "json", "--jobs", "1"],
            {},
            "records",
        ),
        (
            "export --jobs 2",
            CLI + ["export", "--store", s, "--output", str(d / "export-2"), "--format", "json", "--jobs", "2"],
            {},
            "records",
        ),
        ("--help", CLI + ["--help"], {}, "fixed"),
        (
            "fixed cost: verify 1k, kernels forced",
            FORCED + ["verify", "--store", small, "--format", "json"],
            {},
            "fixed",
        ),
        ("fixed cost: verify 1k, default paths", CLI + ["verify", "--store", small, "--format", "json"], {}, "fixed"),
        (
            "fixed cost: dump jsonl 1k, kernels forced",
            FORCED + ["dump-commitlog", "--store", small, "--format", "jsonl"],
            {},
            "fixed",
        ),
        (
            "many queues: generate",
            CLI + ["generate", "--store", many, *MANY_QUEUES, "--format", "json"],
            {},
            "queues",
        ),
        ("many queues: verify", CLI + ["verify", "--store", many, "--format", "json"], {}, "queues"),
        (
            "many queues: rebuild-index",
            CLI + ["rebuild-index", "--store", many, "--output", str(d / "many-rebuilt"), "--format", "json"],
            {},
            "queues",
        ),
        (
            "incident: transactions",
            CLI + ["transactions", "--store", inc, "--now", NOW, "--format", "json"],
            {},
            "incident",
        ),
        ("incident: pop", CLI + ["pop", "--store", inc, "--now", NOW, "--format", "json"], {}, "incident"),
        ("incident: diff (same)", CLI + ["diff", s, str(d / "store-copy"), "--format", "json"], {}, "incident"),
        (
            "incident: diff (a tail more)",
            CLI + ["diff", s, str(d / "store-longer"), "--messages", "--format", "jsonl"],
            {},
            "incident",
        ),
        (
            "first run: verify 1k, forced, empty cache",
            FORCED + ["verify", "--store", small, "--format", "json"],
            cold(),
            "cold",
        ),
        (
            "first run: dump 1k, forced, empty cache",
            FORCED + ["dump-commitlog", "--store", small, "--format", "jsonl"],
            cold(),
            "cold",
        ),
    ]


def _prepare(name: str, d: Path) -> None:
    """Clear what a row writes; write the untimed inputs it reads."""
    for sub in {
        "generate": ["store"],
        "generate --from-jsonl": ["replay"],
        "rebuild-index": ["rebuilt"],
        "rebuild-index --jobs 1": ["rebuilt-1"],
        "many queues: generate": ["many"],
        "many queues: rebuild-index": ["many-rebuilt"],
        "export (local, no body)": ["export"],
        "export --jobs 2": ["export-2"],
    }.get(name, []):
        set_aside(d / sub, d)
    if name == "verify 16 KiB bodies" and not (d / "big-bodies").exists():
        sends = max(1000, incident_messages(d) // 8)
        run(CLI + ["generate", "--store", str(d / "big-bodies"), "--messages", str(sends), "--body-size", "16384"])
    if name.startswith("incident: ") and not (d / "incident").exists():
        run(CLI + ["generate", "--store", str(d / "incident"), *incident_store(incident_messages(d))])
    if name == "incident: diff (same)" and not (d / "store-copy").exists():
        shutil.copytree(d / "store", d / "store-copy")  # the same snapshot twice: every byte compared
    if name == "incident: diff (a tail more)" and not (d / "store-longer").exists():
        longer_copy(d)
    if name == "generate --from-jsonl" and not (d / "dump.jsonl").exists():
        with open(d / "dump.jsonl", "wb") as f:
            run(
                CLI + ["dump-commitlog", "--store", str(d / "store"), "--format", "jsonl", "--body", "base64"], stdout=f
            )


#: Where a row's old output goes (:func:`set_aside`) until the run ends.
TRASH = ".set-aside"


def set_aside(path: Path, d: Path) -> None:
    """Moves a row's old output out of its way, deleted only when the run ends: ext4 holds
    freed inodes back from reuse for one to six minutes (``recently_deleted`` in
    ``find_inode_bit``), and every file or directory created meanwhile pays a scan of them in
    the kernel (200-300 us of system CPU each, measured) - a 20 000-queue store's 34 000
    directories were 5-10 s of a row's CPU right after the same tree was removed."""
    if path.exists():
        (d / TRASH).mkdir(exist_ok=True)
        path.rename(d / TRASH / f"{path.name}-{time.monotonic_ns()}")


def mkdir_cost(d: Path, n: int = 400) -> float:
    """Microseconds of CPU one ``mkdir`` takes on ``d``'s file system now (see
    :func:`set_aside`): the context of the many-queue rows, printed with the header."""
    probe = Path(tempfile.mkdtemp(prefix="mkdir-probe-", dir=d))
    t = time.process_time()
    for i in range(n):
        (probe / str(i)).mkdir()
    cost = (time.process_time() - t) / n * 1e6
    shutil.rmtree(probe)
    return cost


def longer_copy(d: Path) -> None:
    """A copy of the main store with a fiftieth more sends appended (the master's tail a
    failed-over slave never got): diff then walks every queue and lists every extra message."""
    shutil.copytree(d / "store", d / "store-longer")
    more = max(100, incident_messages(d) // 50)
    run(CLI + ["generate", "--store", str(d / "store-longer"), "--append", "--messages", str(more), "--seed", "2"])


def incident_messages(d: Path) -> int:
    """The main store's send count (``main`` records it in ``d``), for the incident store."""
    f = d / "messages"
    return int(f.read_text()) if f.exists() else 1_000_000


#: Byte-compiles the packages an interpreter imports (their ``__pycache__``), as an installed
#: package has them: with ``PYTHONDONTWRITEBYTECODE`` set (this machine sets it) an editable
#: checkout without them is compiled from source by every command, 0.1-0.15 s of each one's
#: CPU that no installed copy pays (``py_compile`` writes whatever that variable says).
COMPILE = (
    "import compileall, importlib, os; "
    "[compileall.compile_dir(os.path.dirname(importlib.import_module(m).__file__), quiet=1) "
    "for m in ('rmqstore_cli', 'commands', 'formats')]"
)


def warm_up(d: Path, pythons: list[str]) -> None:
    """The packages byte-compiled (:data:`COMPILE`), a 1 000-send store for the fixed-cost
    rows, and every command's compiled kernels in numba's cache (forced on over that store),
    so that no timed row but the first-run ones compiles."""
    for py in pythons:
        subprocess.run([py, "-c", COMPILE], check=True)
    small = str(d / "small")
    if not (d / "small").exists():
        run(CLI + ["generate", "--store", small, "--messages", "1000", "--body-size", "256"])
    for py in pythons:
        for args in (
            ["verify"],
            ["dump-commitlog", "--format", "jsonl"],
            ["rebuild-index", "--dry-run", "--output", str(d / "warm-rebuilt")],
            ["export", "--output", str(d / "warm-export"), "--overwrite"],
        ):
            run([py] + FORCED[1:] + args[:1] + ["--store", small] + args[1:])


def before_run(a, name: str, argv: list[str], env: dict) -> float | None:
    """``--before``: the same row's CPU seconds with the other interpreter (its install), right
    after this one's, so that both see the same load; None for the rows it skips."""
    if not a.before or name in ("generate", "generate --from-jsonl", "naive reader"):
        return None
    _prepare(name, a.dir)
    if env.get("NUMBA_CACHE_DIR"):
        env = dict(env, NUMBA_CACHE_DIR=tempfile.mkdtemp(prefix="numba-", dir=a.dir))
    return run([a.before] + argv[1:], env)[0]


def crc_speed(total: int = 1 << 30) -> tuple[str, float]:
    """CRC-32's GB/s over ``total`` bytes (a 64 MiB buffer again and again) in this process:
    zlib-ng's (the ``zlib-ng`` package) when installed, else zlib's; and which it was."""
    try:
        from zlib_ng import zlib_ng as z

        name = "zlib-ng"
    except ImportError:
        import zlib as z

        name = "zlib"
    buf = os.urandom(64 << 20)
    crc, t = 0, time.process_time()
    for _ in range(total // len(buf)):
        crc = z.crc32(buf, crc)
    return name, total / (time.process_time() - t) / 1e9


def wall_ratio(what: str, one: dict, two: dict) -> str:
    """The line of ``what``'s wall time on 2 processes over 1 (kept in ``two``'s row)."""
    r = two["wall_s"] / one["wall_s"]
    two["wall_ratio_2_over_1"] = round(r, 3)
    return f"{what} wall on 2 cores / 1 core: {two['wall_s']:.2f} / {one['wall_s']:.2f} s = {r:.2f}"


def derived(out: list[dict], d: Path) -> list[str]:
    """The issue's ratios from rows of this run: verify's and export's wall time on 2 processes over 1,
    and the 16 KiB-body verify's GB/s (records' bytes over CPU less the fixed cost) beside
    CRC-32's."""
    by = {r["row"]: r for r in out}
    lines = []
    for what, one, two in (
        ("verify", "verify --jobs 1", "verify --jobs 2"),
        ("export", "export (local, no body)", "export --jobs 2"),
    ):
        if by.get(one) and by.get(two):
            lines.append(wall_ratio(what, by[one], by[two]))
    big = by.get("verify 16 KiB bodies")
    if big and big.get("bytes"):
        fixed = min(
            run(CLI + ["verify", "--store", str(d / "small"), "--format", "json", "--jobs", "1"])[0] for _ in "123"
        )
        argv = CLI + ["verify", "--store", str(d / "big-bodies"), "--format", "json", "--jobs", "1"]
        cpu = min(big["cpu_s"], *(run(argv)[0] for _ in "12"))
        name, crc = crc_speed()
        if cpu < 1.5 * fixed:  # mostly fixed cost: no rate to tell (a small --messages)
            lines.append(f"verify, 16 KiB bodies: {cpu:.2f} s CPU, fixed cost {fixed:.2f} s: store too small")
            return lines
        gbs = big["bytes"] / (cpu - fixed) / 1e9
        big.update(gb_per_s_less_fixed=round(gbs, 3), crc=name, crc_gb_per_s=round(crc, 3))
        lines.append(
            f"verify, 16 KiB bodies: {gbs:.2f} GB/s less fixed cost ({fixed:.2f} s) / {name} CRC-32 "
            f"{crc:.2f} GB/s = {gbs / crc:.2f}"
        )
    return lines


#: Issue 35's marks: (mark, the row that measures it, what is compared, floor, aim). "x" is
#: CPU over the naive reader's ("one core": the ``--jobs 1`` row where there is one), "cpu"
#: CPU seconds, "rss" peak MB, "wall" the 2-over-1 wall ratio, "crc" the 16 KiB line's ratio.
MARKS = [
    ("verify (CRC on), one core", "verify --jobs 1", "x", 0.5, 0.13),
    ("verify, every core (CPU of all processes)", "verify", "x", 0.5, 0.13),
    ("rebuild-index --output, one core", "rebuild-index --jobs 1", "x", 0.5, 0.6),
    ("rebuild-index --output, every core (CPU of all processes)", "rebuild-index", "x", 0.5, 0.6),
    ("dump-commitlog jsonl", "dump-commitlog --format jsonl", "x", 0.35, 0.22),
    ("export (Parquet, local)", "export (local, no body)", "x", 1.0, 0.5),
    ("generate", "generate", "x", 1.0, 1.2),
    ("generate --from-jsonl", "generate --from-jsonl", "x", 3.0, 1.5),
    ("verify 16 KiB bodies / zlib-ng CRC-32", "verify 16 KiB bodies", "crc", 0.25, 0.4),
    ("many queues: verify, CPU s", "many queues: verify", "cpu", 4.0, 1.0),
    ("many queues: rebuild-index, CPU s", "many queues: rebuild-index", "cpu", 4.0, 1.0),
    ("many queues: generate, CPU s", "many queues: generate", "cpu", 4.0, 1.0),
    ("many queues: verify, peak RSS MB", "many queues: verify", "rss", 200, None),
    ("many queues: rebuild-index, peak RSS MB", "many queues: rebuild-index", "rss", 200, None),
    ("many queues: generate, peak RSS MB", "many queues: generate", "rss", 200, None),
    ("verify wall on 2 cores / on 1 core", "verify --jobs 2", "wall", 0.6, 0.52),
]


def marks(out: list[dict]) -> list[str]:
    """Issue 35's table from this run's rows (:data:`MARKS`): each value beside its floor and
    aim, and whether the floor is met (lower is better but for the CRC ratio); a mark whose
    row did not run (``--only``) is left out."""
    by = {r["row"]: r for r in out}
    field = {"x": "x_naive", "cpu": "cpu_s", "rss": "rss_mb", "wall": "wall_ratio_2_over_1", "crc": None}
    lines = [f"{'issue 35 mark':44} {'value':>7} {'floor':>7} {'aim':>6}  met"]
    for mark, row, kind, floor, aim in MARKS:
        r = by.get(row)
        if r is None:
            continue
        if kind == "crc":
            v = r.get("gb_per_s_less_fixed") and r["gb_per_s_less_fixed"] / r["crc_gb_per_s"]
        else:
            v = r.get(field[kind])
        if v is None:
            continue
        met = v >= floor if kind == "crc" else v <= floor
        lines.append(f"{mark:44} {v:7.2f} {floor:7.2f} {aim if aim is not None else '':>6}  {'yes' if met else 'NO'}")
    return lines


def extensions() -> dict[str, str]:
    """Each C extension's state in the CLI the rows run (``rmqstore --version``'s lines): a
    run at pure-Python speed says so in its header, not only in its numbers."""
    r = subprocess.run(CLI + ["--version"], capture_output=True, text=True, check=True)
    prefix = "  C extension "
    return dict(line[len(prefix) :].split(": ", 1) for line in r.stdout.splitlines() if line.startswith(prefix))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/rmq-bench-all"))
    ap.add_argument("--keep", action="store_true", help="keep --dir (a later run reuses its store)")
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "all.json")
    ap.add_argument("--only", help="comma-separated row names (prefixes) to run, besides generate and the naive reader")
    ap.add_argument(
        "--before",
        help="another install's python: every read row runs with it too, right after, "
        "for a before/after comparison under the same load",
    )
    ap.add_argument("--naive", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.naive:
        print(naive(a.naive))
        return
    a.dir.mkdir(parents=True, exist_ok=True)
    (a.dir / "messages").write_text(str(a.messages))
    warm_up(a.dir, [sys.executable] + ([a.before] if a.before else []))
    out, records, warm = [], 0, {}
    loops = extensions()
    print("C extensions: " + ", ".join(f"{k} {v}" for k, v in loops.items()), flush=True)
    mkdir_us = mkdir_cost(a.dir)
    print(f"file system: one mkdir costs {mkdir_us:.0f} us of CPU now (a few us when no files were just deleted)")
    print(
        f"{'row':42} {'CPU s':>7} {'sys s':>6} {'wall s':>7} {'RSS MB':>7} {'records/s':>10} {'x naive':>8}  load   "
        f"({platform.node()}, {os.cpu_count()} cores, Python {platform.python_version()})",
        flush=True,
    )
    for name, argv, env, kind in rows(a, a.dir):
        _prepare(name, a.dir)
        cpu, wall, head, rss, sys_s = measure(argv, env)
        if name == "naive reader":
            records = int(head)
        row = {
            "row": name,
            "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3),
            "rss_mb": round(rss),
            "sys_s": round(sys_s, 3),
            "load": os.getloadavg()[0],
        }
        if kind == "fixed" and "forced" in name:
            warm["verify" if "verify" in name else "dump"] = cpu
        if kind in ("records", "yardstick"):
            row["records_per_s"] = round(records / cpu) if records else None
            warm[name] = cpu
        base = warm.get("verify" if "verify" in name else "dump")
        if kind == "cold" and base is not None:
            row["compile_cpu_s"] = round(cpu - base, 3)
        if kind == "bytes":  # the records' bytes verify counted (its summary)
            row["bytes"] = json.loads(head)["summary"]["bytes"]
        naive_cpu = warm.get("naive reader")
        if naive_cpu and kind == "records":
            row["x_naive"] = round(cpu / naive_cpu, 2)
        before = before_run(a, name, argv, env)
        if before is not None:
            row["before_cpu_s"] = round(before, 3)
        out.append(row)
        print(
            f"{name:42} {cpu:7.2f} {sys_s:6.2f} {wall:7.2f} {rss:7.0f} {row.get('records_per_s') or '':>10} "
            f"{row.get('x_naive', ''):>8}  "
            f"{row['load']:.2f}"
            + (f"   compile +{row['compile_cpu_s']:.2f} s CPU" if "compile_cpu_s" in row else "")
            + (f"   before: {before:.2f} s CPU" if before is not None else ""),
            flush=True,
        )
    gen = next(r for r in out if r["row"] == "generate")
    gen["records_per_s"] = round(records / gen["cpu_s"])
    gen["x_naive"] = round(gen["cpu_s"] / warm["naive reader"], 2)
    print(f"(generate: {gen['records_per_s']} records/s, {gen['x_naive']}x naive; {records} records)")
    for line in derived(out, a.dir):
        print(line)
    print()
    for line in marks(out):
        print(line)
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(
        json.dumps(
            {
                "messages": a.messages,
                "records": records,
                "uptime": os.getloadavg(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "c_extensions": loops,
                "mkdir_us": round(mkdir_us, 1),
                "rows": out,
            },
            indent=1,
        )
        + "\n"
    )
    shutil.rmtree(a.dir / TRASH, ignore_errors=True)
    if not a.keep:
        shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
