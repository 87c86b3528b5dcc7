"""A store file truncated while a command reads it (issue 31: a store copied while a broker or
expire still runs, an rsync in flight) is one error line and exit 3, never a SIGBUS (exit 135,
no message); rebuild-index leaves its output absent or the old set intact.

Each run is a subprocess (a failure is a dead child, not a dead pytest) whose ``map_file``
truncates one chosen file right after mapping it, so the read that follows meets the
shrunk file every time: before store/files/mapguard.py each of these died of SIGBUS.
``fuzz/shrinkfuzz.py`` does the same at random moments (fuzz/RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, fast_first, generate, tree_digest, without_loops

HINT = (
    "the file was truncated while rmqstore read it (a broker, expire or a copy still writing the store?); "
    "read a stable copy (stop the broker or let the copy finish) and run again"
)

#: Runs argv[3:] as the rmqstore command line; the first mapping of argv[1] (a real path) is
#: followed by truncating that file to argv[2] bytes. Patched where every module that maps a
#: store file took ``map_file`` from safefs, so the same script runs on the code before the guard.
SHRINK_AFTER_MAP = """
import importlib, os, sys
target, size = sys.argv[1], int(sys.argv[2])
del sys.argv[1:3]
from rmqstore_cli.store.files import safefs
original = safefs.map_file
done = []

def map_then_shrink(fd, length, path, *args, **kwargs):
    mm = original(fd, length, path, *args, **kwargs)
    if not done and os.path.realpath(path) == target:
        done.append(path)
        os.truncate(path, size)
    return mm

for name in ("files.safefs", "files.mapped_files", "queues.index", "timer.wheel"):
    module = importlib.import_module("rmqstore_cli.store." + name)
    if getattr(module, "map_file", None) is original:
        module.map_file = map_then_shrink
"""

CLI = (
    SHRINK_AFTER_MAP
    + """
from rmqstore_cli.app import main
sys.argv[0] = "rmqstore"
main()
"""
)


def shrink_run(path: Path, size: int, *args, script: str = CLI, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", script, os.path.realpath(path), str(size), *map(str, args)]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ, **(env or {}))
    )


def shrunk_line(r: subprocess.CompletedProcess) -> str:
    """The run's one error line (notes and warnings before it allowed), exit 3, no traceback."""
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr and "Fatal Python error" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("rmqstore: error:")]
    others = [ln for ln in r.stderr.splitlines() if not ln.startswith(("rmqstore: note:", "rmqstore: warning:"))]
    assert len(errors) == 1 and others == errors, r.stderr
    return errors[0]


def expect_shrunk(r: subprocess.CompletedProcess, path: Path, offset: int) -> None:
    p = os.path.realpath(path)
    assert shrunk_line(r) == f"rmqstore: error: {p} shrank while it was read ({p}:{offset}); {HINT}"


@pytest.fixture(scope="module")
def master(tmp_path_factory) -> Path:
    """25 commit-log files of 64 KiB, queues of several files, 24 index files."""
    return generate(tmp_path_factory.mktemp("shrink") / "store", messages=3000)


@pytest.fixture
def store(master, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "store"
    shutil.copytree(master, dst)
    return dst


def commitlog_file(store: Path, i: int) -> Path:
    return sorted((store / "commitlog").iterdir())[i]


def cq_file(store: Path) -> Path:
    return sorted((store / "consumequeue" / "AuditTopic" / "0").iterdir())[0]


def index_file(store: Path) -> Path:
    return sorted((store / "index").iterdir())[0]


READERS = {
    "dump-commitlog": ["dump-commitlog", "--format", "jsonl"],
    "dump-commitlog-table": ["dump-commitlog"],
    "verify": ["verify", "--format", "jsonl"],
    "verify-crc": ["verify", "--crc", "--format", "json"],
    "export": ["export", "--output", "{tmp}/parquet"],
}


@pytest.mark.parametrize(
    "command,size",
    fast_first(
        [(c, s) for s in (0, 20000) for c in sorted(READERS)], [f"{c}-{s}" for s in (0, 20000) for c in sorted(READERS)]
    ),
)
def test_commit_log_file_shrinks_under_a_reader(store, tmp_path, command, size):
    """The third commit-log file truncated (to nothing, or to 20000 bytes: mid-record) right
    after it is mapped: the one line names it and the first byte it lost."""
    victim = commitlog_file(store, 2)
    args = [a.format(tmp=tmp_path) for a in READERS[command]]
    r = shrink_run(victim, size, *args, "--store", store)
    expect_shrunk(r, victim, size)


@pytest.mark.parametrize(
    "command, victim, size",
    [
        (["dump-cq", "AuditTopic", "0", "--format", "jsonl"], cq_file, 0),
        (["verify", "--format", "jsonl"], cq_file, 1000),
        (["stats", "--format", "json"], cq_file, 0),
        (["verify", "--format", "jsonl"], index_file, 0),
        (["index-lookup", "--format", "jsonl", "--begin", "0", "--end", "now", "order-1"], index_file, 0),
        (["dump-cq", "AuditTopic", "0", "--format", "jsonl"], lambda s: commitlog_file(s, 0), 0),
        (["search-offset", "-t", "AuditTopic", "--time", "0"], cq_file, 0),
    ],
    ids=[
        "dump-cq-cq",
        "verify-cq",
        "stats-cq",
        "verify-index",
        "index-lookup-index",
        "dump-cq-commitlog",
        "search-offset-cq",
    ],
)
def test_queue_and_index_files_shrink_under_a_reader(store, command, victim, size):
    """A consume-queue or index file truncated under verify, dump-cq, stats, index-lookup,
    search-offset: the same one line, naming that file."""
    path = victim(store)
    r = shrink_run(path, size, *command, "--store", store)
    expect_shrunk(r, path, size)


def test_pure_mode_is_guarded_too(store):
    """RMQSTORE_PURE=1 (the reference loops, how CI runs the suite) keeps the guard: it is a
    safety mechanism, not a speed path."""
    victim = commitlog_file(store, 1)
    r = shrink_run(victim, 0, "verify", "--format", "jsonl", "--store", store, env={"RMQSTORE_PURE": "1"})
    expect_shrunk(r, victim, 0)


def test_rebuild_to_output_leaves_nothing(store, tmp_path):
    """rebuild-index --output: a commit-log file shrinking under the dispatch ends the run with
    the one line, and the output directory it made is gone again (no staging, no half set)."""
    out = tmp_path / "out"
    victim = commitlog_file(store, 5)
    r = shrink_run(victim, 0, "rebuild-index", "--store", store, "--output", out)
    expect_shrunk(r, victim, 0)
    assert not out.exists() or not any(out.iterdir()), sorted(out.rglob("*"))


def test_rebuild_in_place_rolls_back(store):
    """rebuild-index --in-place: the old consume queues, index and checkpoint stay byte for
    byte; no staging directory, journal or backup is left in the store."""
    victim = commitlog_file(store, 7)
    before = {k: v for k, v in tree_digest(store).items() if not k.startswith("commitlog/")}
    r = shrink_run(victim, 4096, "rebuild-index", "--store", store, "--in-place")
    expect_shrunk(r, victim, 4096)
    after = {k: v for k, v in tree_digest(store).items() if not k.startswith("commitlog/")}
    assert after == before
    assert not [p.name for p in store.iterdir() if p.name.startswith(".rebuild") or ".bak-" in p.name]


ENGINE_API = (
    SHRINK_AFTER_MAP
    + """
import json
from pathlib import Path
from rmqstore_cli.errors import ShrunkError, StoreError
from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.message_store import MessageStore
from rmqstore_cli.store.verify import Verifier, VerifyOptions

what = sys.argv[1]
cfg = StoreConfig.load(Path(sys.argv[2]), None)
try:
    if what == "scan":
        ms = MessageStore.open(cfg)
        n = sum(1 for _ in ms.commitlog.scan())
    else:
        n = len(list(Verifier(cfg, VerifyOptions()).run()))
except ShrunkError as e:
    assert not isinstance(e, StoreError)  # not taken for a finding about one file
    print(json.dumps({"path": str(e.path), "offset": e.offset, "text": str(e)}))
else:
    print("no error after", n)
"""
)


@pytest.mark.parametrize("what", ["scan", "verify"])
def test_engine_api_raises_shrunk_error(store, what):
    """Through the engine (a library user's scan of the log, a Verifier): a ShrunkError naming
    the file and the offset, not a shorter log or findings about the zeros."""
    victim = commitlog_file(store, 3)
    r = shrink_run(victim, 10000, what, store, script=ENGINE_API)
    assert r.returncode == 0 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    got = json.loads(r.stdout)
    assert got["path"] == os.path.realpath(victim) and got["offset"] == 10000
    assert "shrank while it was read" in got["text"]


#: The same, with the guard's extension refused (a machine without a C compiler at install):
#: the file is truncated between its size being taken and its bytes being read.
WITHOUT_GUARD = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name == "rmqstore_cli.store._mapguard":
            raise ImportError("refused by the test")
sys.meta_path.insert(0, Refuse())
from rmqstore_cli.store.files import mapguard
assert not mapguard.BUILT
"""


@pytest.mark.slow
def test_without_the_guard_files_are_read_not_mapped(store, master):
    """No _mapguard (no compiler at install): --version says so; read-only files are copied
    with pread (FileCopy, no SIGBUS possible), the same output as mapped; a file that is
    shorter than its size at open is the same one line."""
    from tests.helpers import run

    plain = WITHOUT_GUARD + "\nfrom rmqstore_cli.app import main\nsys.argv[0] = 'rmqstore'\nmain()\n"
    v = subprocess.run([sys.executable, "-c", plain, "--version"], capture_output=True, text=True, cwd=ROOT)
    assert v.returncode == 0 and "files read into memory: the SIGBUS guard failed to import: refused" in v.stdout, (
        v.stderr
    )
    for args in (["verify", "--format", "json"], ["dump-commitlog", "--format", "jsonl", "--body", "hex"]):
        copied = subprocess.run(
            [sys.executable, "-c", plain, *args, "--store", str(master)], capture_output=True, text=True, cwd=ROOT
        )
        mapped = run(*args, "--store", master)
        got, want = copied.stdout, mapped.stdout.decode()
        if args[0] == "verify":  # the summary says which mapping ran: the rest is the same
            states = [json.loads(out)["summary"]["c_extensions"]["_mapguard"] for out in (got, want)]
            assert states == ["failed to import: refused by the test", "in use"]
            got, want = without_loops(got), without_loops(want)
        assert copied.returncode == mapped.returncode and got == want and got
    shrink_before_read = (
        WITHOUT_GUARD
        + SHRINK_AFTER_MAP.replace(
            "    mm = original(fd, length, path, *args, **kwargs)\n    if not done", "    if not done"
        ).replace(
            "        os.truncate(path, size)\n    return mm",
            "        os.truncate(path, size)\n    return original(fd, length, path, *args, **kwargs)",
        )
        + CLI[len(SHRINK_AFTER_MAP) :]
    )
    victim = commitlog_file(store, 2)
    r = shrink_run(victim, 5000, "dump-commitlog", "--format", "jsonl", "--store", store, script=shrink_before_read)
    expect_shrunk(r, victim, 5000)


#: Spark's Python workers are other processes: a sitecustomize (on PYTHONPATH, which Spark
#: passes on to its workers) truncates the file right after a *worker* maps it.
SITECUSTOMIZE = """
import os, sys
target, size = os.environ.get("RMQSTORE_TEST_SHRINK", ":").rsplit(":", 1)
if target:
    from rmqstore_cli.store.files import mapguard

    original = mapguard.map_guarded

    def map_then_shrink(fd, length, path, write):
        mm = original(fd, length, path, write)
        if os.path.realpath(path) == target and "pyspark.worker" in sys.modules and os.path.getsize(path) > int(size):
            os.truncate(path, int(size))
        return mm

    mapguard.map_guarded = map_then_shrink
"""


@pytest.mark.slow
@pytest.mark.parametrize("command", ["verify", "rebuild-index"])
def test_spark_tasks_report_the_same_line(store, tmp_path, command):
    """--engine spark: the task that meets the shrunk file fails with the ShrunkError, and the
    driver reports the very line the local engine prints (not "the Spark job failed");
    rebuild-index --in-place rolls back (old sets byte for byte, nothing left in the store)."""
    pytest.importorskip("pyspark")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    victim = commitlog_file(store, 4)
    before = {k: v for k, v in tree_digest(store).items() if not k.startswith("commitlog/")}
    args = ["--format", "jsonl"] if command == "verify" else ["--in-place"]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        RMQSTORE_TEST_SHRINK=f"{os.path.realpath(victim)}:3000",
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "rmqstore_cli",
            command,
            "--store",
            str(store),
            "--engine",
            "spark",
            "--spark-master",
            "local[2]",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    expect_shrunk(r, victim, 3000)
    assert {k: v for k, v in tree_digest(store).items() if not k.startswith("commitlog/")} == before
    assert not [p.name for p in store.iterdir() if p.name.startswith(".rebuild") or ".bak-" in p.name]


@pytest.mark.fuzz
def test_shrink_fuzz_short_seeded_run(tmp_path):
    """fuzz/shrinkfuzz.py for a few runs (each command once): a file truncated at a random
    moment while dump-commitlog, verify, rebuild-index or export reads it. The long runs are
    in fuzz/RESULTS.md."""
    from fuzz import shrinkfuzz

    res = shrinkfuzz.run_iterations(5, seed=7, work=tmp_path, messages=20000)
    assert [r for r in res if r[4]] == []


GUARD_UNITS = """
import mmap, os, signal, sys, threading
from rmqstore_cli.errors import ShrunkError
from rmqstore_cli.store.files import mapguard, safefs

def mapped(path):
    fd = safefs.open_read_only(path)
    try:
        return safefs.map_file(fd, os.fstat(fd).st_size, path)
    finally:
        os.close(fd)

what, a, b = sys.argv[1:4]
if what == "threads-and-fork":
    mm = mapped(a)
    os.truncate(a, 5000)
    seen = []
    t = threading.Thread(target=lambda: seen.append(bytes(mm[8192:8200])))  # faults in this thread
    t.start()
    t.join()
    assert seen == [bytes(8)], seen
    try:
        mapguard.check()
    except ShrunkError as e:
        print(e.path == a, e.offset)
    pid = os.fork()
    if pid == 0:  # a forked child (pyspark's workers) is guarded as its parent is
        other = mapped(b)
        os.truncate(b, 0)
        assert other[100] == 0
        try:
            mapguard.check()
        except ShrunkError as e:
            os._exit(3 if (e.path, e.offset) == (b, 0) else 4)
        os._exit(5)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status))
elif what == "kill":  # a SIGBUS sent by kill(): still the default action
    mapped(a)
    os.kill(os.getpid(), signal.SIGBUS)
else:  # a fault in a mapping the guard does not know: still the default action
    mapped(a)
    fd = os.open(b, os.O_RDONLY)
    plain = mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_READ)
    os.truncate(b, 0)
    print(plain[10000])
print("alive")
"""


def test_guard_in_threads_forked_children_and_nowhere_else(store):
    """The guard's reach: a fault in another thread and in a forked child is caught (and
    named: the first lost byte, 5000, not the faulting page); a SIGBUS sent by kill() or a
    fault in a mapping not made by map_file keeps the default action (the process dies)."""
    for i, what in enumerate(("threads-and-fork", "kill", "unguarded")):
        a, b = (os.path.realpath(commitlog_file(store, 2 * i + k)) for k in (0, 1))
        r = subprocess.run(
            [sys.executable, "-c", GUARD_UNITS, what, a, b], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        if what == "threads-and-fork":
            assert r.returncode == 0 and r.stdout.split() == ["True", "5000", "3", "alive"], (r.stdout, r.stderr)
        else:
            assert r.returncode == -7 and "alive" not in r.stdout, (what, r.returncode, r.stderr)
