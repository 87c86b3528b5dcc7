"""Issue 22, the read side: hostile stores and configs meet every read command with one
line, the right exit code, no hang and bounded memory.

Every command runs in a subprocess with a ``timeout=``, so a regression to a hang fails
the test instead of hanging the suite. Planted things: FIFOs, ``/dev/zero`` links and
directories where store files belong, absurd file names and sizes, hostile broker.conf
escapes, huge and deeply nested topics.json, crafted index headers, topics that cannot be
directory names (export).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import SMALL, dumped, tmpfs, written
from tests.helpers.hostile import one_line, plant

pytestmark = pytest.mark.slow  # every read command on planted files, in subprocesses

HANG = 60  # seconds: every command here finishes in a few


def run(*args, timeout: int = HANG, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m rmqstore_cli ARGS`` with a timeout: a hang is a TimeoutExpired failure."""
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)],
        capture_output=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
        stdin=subprocess.DEVNULL,
    )


def findings(r: subprocess.CompletedProcess) -> list[dict]:
    assert "Traceback" not in r.stderr.decode(errors="replace"), r.stderr.decode(errors="replace")
    rows = [json.loads(x) for x in r.stdout.decode().splitlines() if x.startswith("{")]
    return [f for f in rows if "check" in f]  # the last line is the summary


# ------------------------------------------------------------------ what to plant, where
def _cq_file(store: Path) -> Path:
    return sorted((store / "consumequeue" / "OrderTopic" / "0").iterdir())[0]


def _index_file(store: Path) -> Path:
    return sorted((store / "index").iterdir())[0]


def _last_commitlog(store: Path) -> Path:
    return sorted((store / "commitlog").iterdir())[-1]


WHERE = {
    "checkpoint": lambda s: s / "checkpoint",
    "cq": _cq_file,
    "index": _index_file,
    "commitlog": _last_commitlog,
}


KIND_TEXT = {"fifo": "a FIFO", "devzero": "a character device", "dir": "a directory"}
# The read command that must refuse each planted file (the checkpoint is read by verify only).
READER = {
    "cq": lambda s: ["dump-cq", "OrderTopic", "0", "--store", s],
    "index": lambda s: ["index-lookup", "order-0", "--store", s],
    "commitlog": lambda s: ["dump-commitlog", "--store", s],
}


@pytest.mark.parametrize("kind", ["fifo", "devzero", "dir"])
@pytest.mark.parametrize("what", ["checkpoint", "cq", "index", "commitlog"])
def test_not_a_regular_file_where_a_store_file_belongs(small_store, what, kind):
    """A FIFO, ``/dev/zero`` or a directory in place of a data file: the read command that
    needs it exits 3 with one line naming the file and what it is (before: a FIFO index file
    or a directory was skipped into "no message with key" exit 1, a FIFO commit-log file
    read as "file has 0 bytes"); verify reports a ``store.not-regular`` error naming it and
    goes on (before: exit 3, or nothing at all for a FIFO checkpoint or index file)."""
    target = WHERE[what](small_store)
    rel = str(target.relative_to(small_store))
    plant(target, kind)
    if what in READER:
        one_line(run(*READER[what](small_store), "--format", "jsonl"), 3, KIND_TEXT[kind], rel)
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 1
    hit = [f for f in findings(r) if f.get("check") == "store.not-regular"]
    assert [(f["file"], f["severity"]) for f in hit] == [(rel, "error")]
    assert KIND_TEXT[kind] in hit[0]["detail"]


def test_verify_with_a_fifo_lock_does_not_hang(small_store):
    """A FIFO planted as ``lock`` blocked verify's lock check (an O_RDONLY open) forever."""
    plant(small_store / "lock", "fifo")
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 1
    assert [f["file"] for f in findings(r) if f.get("check") == "store.not-regular"] == ["lock"]


@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_optional_topics_json_unreadable_is_a_warning(small_store, kind):
    """topics.json is optional (the queues on disk name topics too): a FIFO or /dev/zero
    there is skipped with one warning naming it, and the look-up still answers."""
    plant(small_store / "config" / "topics.json", kind)
    r = run("index-lookup", "order-0", "--store", small_store, "--format", "jsonl")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "Traceback" not in err
    assert "rmqstore: warning:" in err and "topics.json" in err and KIND_TEXT[kind] in err
    assert r.stdout.strip()


def test_topics_json_nested_deep_or_too_big_is_skipped(small_store):
    """200 000 levels of nesting (RecursionError in a recursive parser) and a file over the
    32 MB cap (read whole before): both skipped with one warning, no traceback."""
    tj = small_store / "config" / "topics.json"
    tj.write_bytes(b'{"topicConfigTable":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    r = run("index-lookup", "order-0", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 0 and b"Traceback" not in r.stderr and b"topics.json skipped" in r.stderr
    with open(tj, "wb") as fh:
        fh.truncate(200 << 20)  # sparse: never read, its size alone refuses it
    r = run("index-lookup", "order-0", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 0 and b"more than the" in r.stderr and b"topics.json skipped" in r.stderr


def test_many_topics_search_only_queues_on_disk(small_store):
    """3 M topics in topics.json made index-lookup without --topic query the index per
    topic for > 60 s: past 10 000 topics only those with consume queues are searched, said
    on stderr, and the answer is the same."""
    before = run("index-lookup", "order-0", "--store", small_store, "--format", "jsonl")
    tj = small_store / "config" / "topics.json"
    table = json.loads(tj.read_text())["topicConfigTable"]
    table.update({f"Noise{i:06d}": {"topicName": f"Noise{i:06d}"} for i in range(20_000)})
    tj.write_text(json.dumps({"topicConfigTable": table}))
    r = run("index-lookup", "order-0", "--store", small_store, "--format", "jsonl", timeout=30)
    assert r.returncode == 0, r.stderr
    assert b"searching only the" in r.stderr and b"pass --topic" in r.stderr
    assert r.stdout == before.stdout


def test_verify_non_utf8_topic_directory(small_store):
    """A topic directory whose name is not UTF-8 crashed verify (UnicodeEncodeError in the
    unit check, then in the JSON output): its findings name it with \\x escapes."""
    src = _cq_file(small_store)
    bad = os.fsencode(small_store / "consumequeue") + b"/T\xff\xfe/0"
    os.makedirs(bad)
    shutil.copy(src, bad + b"/" + os.fsencode(src.name))
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 1
    assert any(f["file"].startswith("consumequeue/T\\xff\\xfe/0/") for f in findings(r))
    r = run("dump-cq", "--summary", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 0 and b"Traceback" not in r.stderr


def test_commitlog_name_past_long_max(small_store):
    """A commit-log file named 99999999999999999999 (> Long.MAX_VALUE: ``DefaultMappedFile``'s
    ``Long.parseLong`` fails, the broker cannot load it) was an OverflowError in verify: it
    is a stray (commitlog.file-name), and the dump reads the rest."""
    last = _last_commitlog(small_store)
    last.rename(last.with_name("99999999999999999999"))
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 1
    assert "commitlog/99999999999999999999" in {f["file"] for f in findings(r) if f["check"] == "commitlog.file-name"}
    r = run("dump-commitlog", "--store", small_store, "--format", "jsonl", "--limit", "1")
    assert r.returncode == 0 and b"Traceback" not in r.stderr


def test_all_commitlog_files_empty(small_store):
    """Every commit-log file 0 bytes inferred mappedFileSizeCommitLog=0 (ZeroDivisionError in
    verify): an empty file tells no size; the read commands say so and name the option."""
    for p in (small_store / "commitlog").iterdir():
        p.write_bytes(b"")
    one_line(run("dump-commitlog", "--store", small_store), 3, "every file is empty", "--commitlog-file-size")
    r = run("verify", "--store", small_store, "--format", "jsonl")
    assert r.returncode == 1
    assert {f["check"] for f in findings(r)} >= {"commitlog.file-size"}


# ------------------------------------------------------------------ broker.conf
@pytest.mark.parametrize(
    "line",
    [
        "mappedFileSizeCommitLog=0",
        "mappedFileSizeCommitLog=-65536",
        "mappedFileSizeConsumeQueue=0",
        "maxHashSlotNum=0",
        "maxIndexNum=-1",
    ],
)
def test_broker_conf_size_not_positive(small_store, tmp_path, line):
    """A size <= 0 in broker.conf divided by zero (verify) or read nonsense: exit 2, one line
    naming the property and the file."""
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    for cmd in (["verify"], ["dump-commitlog"], ["index-lookup", "order-0"]):
        one_line(
            run(*cmd, "--store", small_store, "--broker-conf", conf),
            2,
            line.split("=")[0],
            str(conf),
            "must be positive",
        )


def test_broker_conf_size_beyond_java_int_is_ignored(small_store, tmp_path):
    """``MixAll#properties2Object``: ``Integer.parseInt("4294967296")`` throws and the
    property keeps its default, so the size is inferred from the files as without it."""
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=4294967296\n")
    r = run("dump-commitlog", "--store", small_store, "--broker-conf", conf, "--limit", "1", "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    from rmqstore_cli.store.layout.config import StoreConfig

    assert "mapped_file_size_commit_log" not in StoreConfig.load(small_store, conf).explicit


@pytest.mark.parametrize(
    "text,line", [("a=1\nmappedFileSizeCommitLog=\\uZZZZ\n", 2), ("# c\n\nkey\\u12", 3), ("k=v\\\n  cont\\u00G1\n", 1)]
)
def test_broker_conf_malformed_unicode_escape(small_store, tmp_path, text, line):
    """``Properties#loadConvert`` throws IllegalArgumentException "Malformed \\uxxxx
    encoding" (the broker does not start); rmqstore raised a ValueError traceback or read
    on: one line naming the file and the line."""
    conf = tmp_path / "broker.conf"
    conf.write_text(text)
    one_line(
        run("dump-commitlog", "--store", small_store, "--broker-conf", conf),
        2,
        "malformed \\uxxxx",
        f"line {line}",
        str(conf),
    )


def test_broker_conf_fifo_does_not_hang(small_store, tmp_path):
    conf = tmp_path / "broker.conf"
    os.mkfifo(conf)
    one_line(run("dump-commitlog", "--store", small_store, "--broker-conf", conf), 2, "a FIFO", str(conf))


# ------------------------------------------------------------------ crafted index headers
def _craft_header(p: Path, values) -> None:
    with open(p, "r+b") as fh:
        fh.write(struct.pack(">qqqqii", *values))


@pytest.mark.parametrize(
    "values",
    [
        (0, 0, 0, 0, -5, -5),
        (1, 2, 0, 1000, 2**31 - 1, 2**31 - 1),
        (2**63 - 1, 2**63 - 1, 2**63 - 1, 2**63 - 1, 5, 50),
        (-(2**63), 2**63 - 1, -1, 2**63 - 1, -5, 400),
    ],
)
def test_crafted_index_header_every_read_command(small_store, values):
    """Negative or huge indexCount/hashSlotCount and timestamps at the ends of a long, with
    the geometry given and inferred: one line or an answer from every read command."""
    for p in (small_store / "index").iterdir():
        _craft_header(p, values)
    no_cq = ["--commitlog-file-size", "65536", "--index-slots", "64", "--index-max", "400"]
    for given in (False, True):
        for cmd in (
            ["index-lookup", "order-0", "--limit", "1000000"],
            ["verify", "--format", "jsonl"],
            ["decode-msgid", "AC101813D2404497C8159FA523E50001"],
        ):
            extra = (SMALL if cmd[0] == "verify" else no_cq) if given else []
            r = run(*cmd, "--store", small_store, *extra)
            assert r.returncode in (0, 1, 3), r.stderr
            assert b"Traceback" not in r.stderr


def test_crafted_slots_point_past_the_file(small_store):
    """Slots of 2^31-1 and entries whose prevIndex loops: the walk is bounded by the file."""
    p = sorted((small_store / "index").iterdir())[-1]
    with open(p, "r+b") as fh:
        fh.seek(40)
        fh.write(struct.pack(">i", 2**31 - 1) * 64)
        fh.write(struct.pack(">iqii", 5, 2**63 - 1, -1, 2**31 - 1) * 400)
    for cmd in (["index-lookup", "order-0"], ["decode-msgid", "AC101813D2404497C8159FA523E50001"]):
        r = run(*cmd, "--store", small_store, "--index-slots", "64", "--index-max", "400")
        assert r.returncode in (0, 1, 3) and b"Traceback" not in r.stderr


def test_index_geometry_inference_reads_pages_not_files(tmp_path):
    """The inference read every index file whole (up to 420 MB each) into memory: it now
    reads only the pages it needs (pread), and refuses a size it will not search before
    reading anything."""
    import tracemalloc

    from rmqstore_cli.errors import StoreError
    from rmqstore_cli.store.layout.index_geometry import infer_index_geometry

    slots, entries = 50_000, 100_000
    size = 40 + slots * 4 + entries * 20
    files = []
    for i in range(3):
        p = tmp_path / f"2026010100000000{i}"
        with open(p, "wb") as fh:
            fh.truncate(size)  # sparse; count 0: no sample, so inference fails, but bounded
            fh.write(struct.pack(">qqqqii", 1, 2, 0, 0, 0, 0))
        files.append(p)
    tracemalloc.start()
    with pytest.raises(StoreError):
        infer_index_geometry(files, size)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 << 20, peak  # before: 3 x 2.2 MB read whole
    big = tmp_path / "big"
    big.mkdir()
    p = big / "20260101000000000"
    with open(p, "wb") as fh:
        fh.truncate(420_000_040 + 20)
    tracemalloc.start()
    with pytest.raises(StoreError, match="not the default size"):
        infer_index_geometry([p], 420_000_060)
    assert tracemalloc.get_traced_memory()[1] < 1 << 20
    tracemalloc.stop()


# ------------------------------------------------------------------ export
def _store_with_topics(src: Path, dest: Path, topics: list[str]) -> list[dict]:
    """A store whose records carry ``topics`` (V2 records: long topics need them)."""
    dump = dumped(src, "--limit", str(3 * len(topics)))
    for i, r in enumerate(dump):
        r["topic"], r["magic"] = topics[i % len(topics)], "v2"
    written(dest, dump)
    return dump


def test_export_topics_that_cannot_be_directory_names(small_store, tmp_path):
    """A 255+ byte topic failed with ENAMETOOLONG and a NUL cut the partition name (rows of
    'a\\0b' landed under topic=a): partitions are now topic_dir (the topic, or ~hash), and
    the topic column keeps every exact value; rows round-trip."""
    pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
    import pyarrow.dataset as ds

    topics = ["Normal", "A" * 300, "nul\x00topic", "sl/ash", "pct%41", "日本" * 60]
    dump = _store_with_topics(small_store, tmp_path / "s", topics)
    out = tmp_path / "out"
    r = run("export", "--store", tmp_path / "s", "--output", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert t.num_rows == len(dump)
    assert sorted(t.column("topic").to_pylist()) == sorted(x["topic"] for x in dump)
    assert all(len(os.fsencode(p.name)) <= 255 for p in out.rglob("*"))
    (part,) = out.glob("store=*")
    dirs = {p.name for p in part.iterdir()}
    assert "topic_dir=Normal" in dirs and "topic_dir=sl%2Fash" in dirs
    assert sum(d.startswith("topic_dir=~") for d in dirs) == 3


def test_export_without_pyarrow_names_the_extra(small_store, tmp_path):
    """After the README's plain ``pip install .`` there is no pyarrow: a traceback before;
    one line naming ``rmqstore[export]`` and exit 2 now."""
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.argv = ['rmqstore'] + sys.argv[1:]; "
        "from rmqstore_cli.app import main; main()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "export", "--store", str(small_store), "--output", str(tmp_path / "out")],
        capture_output=True,
        timeout=HANG,
    )
    one_line(r, 2, "pyarrow", "pip install 'rmqstore[export]'")
    assert not (tmp_path / "out").exists()


def test_export_output_is_a_file(small_store, tmp_path):
    pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
    f = tmp_path / "afile"
    f.write_text("keep")
    one_line(run("export", "--store", small_store, "--output", f), 2, "--output is a file", str(f))
    one_line(run("export", "--store", small_store, "--output", f / "sub"), 2, "parent", str(f))
    assert f.read_text() == "keep"


# ------------------------------------------------------------------ full tmpfs
def test_read_commands_on_a_full_tmpfs_do_not_sigbus(full_tmpfs):
    """verify on a full tmpfs died of SIGBUS (exit 135, no message): reading a hole of a
    mapped sparse file allocates a page there. Mapping such a file is now one line."""
    for cmd in (
        ["verify", "--format", "jsonl"],
        ["dump-commitlog", "--format", "jsonl"],
        ["index-lookup", "order-0"],
        ["dump-cq", "OrderTopic", "0"],
    ):
        r = run(*cmd, "--store", full_tmpfs)
        assert r.returncode not in (-7, 135), cmd  # SIGBUS
        if r.returncode:  # a file with holes (the commit log's are allocated by its writer, so it reads)
            one_line(r, 3, "holes on a tmpfs", str(full_tmpfs))
    assert run("verify", "--store", full_tmpfs).returncode == 3  # its CQ and index files have holes


def test_generate_append_on_a_full_tmpfs_is_one_line(full_tmpfs):
    """generate --append wrote commit-log records through the mapping of a sparse file on a
    full tmpfs and died of SIGBUS (plantfuzz fs:full); MappedFile.write reserves first."""
    r = run(
        "generate",
        "--store",
        full_tmpfs,
        "--append",
        "--messages",
        "2000",
        "--commitlog-file-size",
        "4194304",
        "--cq-file-size",
        "60000",
        "--index-slots",
        "5000",
        "--index-max",
        "40000",
    )
    assert r.returncode not in (-7, 135)  # SIGBUS
    one_line(r, 3, str(full_tmpfs))


def test_dump_cq_file_fifo_does_not_hang(tmp_path):
    """``dump-cq --file`` opened its file with a blocking O_RDONLY: a FIFO hung it."""
    f = tmp_path / "00000000000000000000"
    os.mkfifo(f)
    one_line(run("dump-cq", "--file", f), 3, "a FIFO", str(f))


def test_spark_verify_reports_a_fifo_index_file(small_store):
    """The Spark engine's findings match the local engine's for a FIFO index file (it was
    skipped without a word)."""
    pytest.importorskip("pyspark", reason="needs the spark extra: pip install -e '.[spark]'")
    plant(_index_file(small_store), "fifo")
    r = run(
        "verify",
        "--store",
        small_store,
        "--engine",
        "spark",
        "--spark-master",
        "local[1]",
        "--format",
        "jsonl",
        timeout=600,
    )
    assert r.returncode == 1, r.stderr
    assert [f["file"] for f in findings(r) if f["check"] == "store.not-regular"] == [
        str(_index_file(small_store).relative_to(small_store))
    ]


@pytest.mark.parametrize("option", ["--commitlog-file-size", "--index-slots", "--index-max"])
def test_cli_size_beyond_java_int_is_a_usage_error(small_store, option):
    """The sizes are Java ints in MessageStoreConfig: 2^32 from the command line was taken
    and compared with the files; now exit 2 naming the range."""
    r = run("index-lookup", "order-0", "--store", small_store, option, str(1 << 32))
    assert r.returncode == 2 and b"2147483647" in r.stderr and b"Traceback" not in r.stderr


def test_completion_with_hostile_topic_names(small_store):
    """Completion of --topic on a store with a non-UTF-8 topic directory and a FIFO as
    topics.json: no hang, no failure, only names the broker could have written."""
    from types import SimpleNamespace

    from rmqstore_cli.commands.common import complete_topic

    os.makedirs(os.fsencode(small_store / "consumequeue") + b"/T\xff\xfe/0")
    plant(small_store / "config" / "topics.json", "fifo")
    names = complete_topic(SimpleNamespace(params={"store": str(small_store)}), "")
    assert "OrderTopic" in names and not any("\udcff" in n for n in names)


def test_a_mapping_the_process_cannot_have_is_one_line(small_store, tmp_path):
    """A 4 GiB sparse CQ file under a 2 GiB address-space limit: verify died with
    ``OSError: [Errno 12] Cannot allocate memory`` from mmap (plantfuzz sparse:cq);
    safefs.map_file makes it one line naming the file."""
    cq = sorted((small_store / "consumequeue").glob("*/*/0*"))[0]
    os.truncate(cq, 4 << 30)
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30));"
        "from rmqstore_cli.app import main; sys.argv[0] = 'rmqstore'; main()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "dump-cq", "--file", str(cq), "--no-resolve"], capture_output=True, timeout=HANG
    )
    assert b"Traceback" not in r.stderr
    one_line(r, 3, "address space", str(cq))


def test_export_on_a_read_only_file_system_is_one_line(small_store, tmp_path):
    """export to a read-only file system: pyarrow's failed write left its threads holding the
    batch generator and the interpreter aborted at exit (SIGABRT, 'Fatal Python error';
    plantfuzz fs:ro). Now one line, for a new and an existing output directory, and exit 5:
    the output could not be written (issue 31; it was 3, the store's code, until then)."""
    pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
    with tmpfs(tmp_path / "ro", "4m") as ro:
        (ro / "out").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        for out, needle in ((ro / "out", "cannot write the dataset"), (ro / "new", "read-only file system")):
            r = run("export", "--store", small_store, "--output", out)
            assert r.returncode == 5, r.stderr
            one_line(r, 5, needle)


def test_export_on_a_full_tmpfs_is_one_line(full_tmpfs):
    """export of a store with holes on a full tmpfs: the refusal to map a file came from
    inside the batches pyarrow's threads pull, and the interpreter then aborted at exit
    (SIGABRT; plantfuzz fs:full). Now its one line and exit 3."""
    pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
    r = run("export", "--store", full_tmpfs, "--output", full_tmpfs.parent / "out")
    assert r.returncode not in (-6, 134), r.stderr  # SIGABRT
    one_line(r, 3, str(full_tmpfs.parent))
