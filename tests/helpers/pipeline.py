"""What the pipeline tests share (tests/pipeline/): Parquet rows of an export, file digests of
a rebuild, damaged generated stores, and the CLI driven against a Spark cluster."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import SMALL, generate

#: The small file sizes of tests.helpers.SMALL, as StoreConfig.load's keyword arguments.
SIZES = dict(
    mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000, max_hash_slot_num=64, max_index_num=400
)
DRIVER_ONLY = "RMQSTORE_TEST_DRIVER_ONLY"  # set for the driver, never seen by an executor


def parquet_rows(path) -> list[dict]:
    """The rows of an export's Parquet dataset (hive partitions), sorted by store and offset,
    the time columns as the epoch milliseconds dump-commitlog prints (after checking they
    are ``timestamp[ms, tz=UTC]``). Needs pyarrow: the export extra."""
    import pyarrow as pa
    import pyarrow.dataset as pa_ds

    t = pa_ds.dataset(path, format="parquet", partitioning="hive").to_table()
    for name in ("born_timestamp", "store_timestamp"):
        at = t.schema.get_field_index(name)
        assert t.schema.field(at).type == pa.timestamp("ms", tz="UTC"), t.schema.field(at)
        t = t.set_column(at, name, t[name].cast(pa.int64()))
    rows = t.to_pylist()
    for r in rows:
        r["properties"] = dict(r["properties"]) if r["properties"] is not None else None
    return sorted(rows, key=lambda r: (r["store"], r["physical_offset"]))


def alive(pid: int) -> bool:
    """Process ``pid`` is there and not a zombie (Linux's ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def left_after_kill(argv: list[str], n: int = 2) -> list[int]:
    """Run ``argv``, a parent whose ``n`` workers each print their PID (in one write), SIGKILL
    it once they have, and return the workers still running 30 s later (then killed)."""
    import signal
    import time

    parent = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        workers = [int(parent.stdout.readline()) for _ in range(n)]
        assert all(alive(w) for w in workers)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30  # a bound on a hang, not a speed
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        return [w for w in workers if alive(w)]
    finally:
        parent.kill()
        for w in workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)


def ours_only(stderr: bytes) -> None:
    """A run without --verbose says nothing but our own lines: no JVM warnings, no log4j,
    no "Setting default log level", no native-hadoop notice."""
    lines = [ln for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    assert all(ln.startswith("rmqstore: ") for ln in lines), lines


def digest(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root``, by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def smash(path: Path, at: int, word: bytes = b"\x00\x00\x00\x07") -> None:
    """Break the first record starting after ``at`` (found by its V1 magic code) by writing
    ``word`` over its magic."""
    with open(path, "r+b") as fh:
        fh.seek(at)
        i = fh.read(8192).find(bytes.fromhex("DAA320A7"))
        fh.seek(at + i)
        fh.write(word)


def make_two_stores(root: Path) -> tuple[Path, Path]:
    """Two generated multi-file stores, the second with a damaged middle file."""
    a = generate(root / "a", messages=600, seed=11)
    b = generate(root / "b", messages=600, seed=12)
    smash(sorted((b / "commitlog").iterdir())[2], 30000, b"\x00\x00\x00\x00")
    return a, b


def make_cluster_stores(root: Path) -> Path:
    """Generated multi-file stores under ``root``: ``good``, ``other`` and ``damaged`` (two
    broken records)."""
    good = generate(root / "good", "--delay-ratio", "0.1", "--transaction-ratio", "0.1", messages=1500, seed=5)
    generate(root / "other", messages=900, seed=9)
    damaged = root / "damaged"
    shutil.copytree(good, damaged)
    files = sorted((damaged / "commitlog").iterdir())
    for f, at in ((files[2], 20000), (files[-2], 30000)):
        smash(f, at)
    return root


def rebuilt(engine_build, store: Path, conf, dest: Path) -> tuple[dict, dict]:
    """``engine_build(config, dest, options)`` of ``store`` (sizes from ``conf`` or its files):
    its report without the timing, and the digests of what it wrote."""
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions

    cfg = StoreConfig.load(store, conf)
    cfg.infer_sizes()
    d = vars(engine_build(cfg, dest, RebuildOptions(tz=dt.timezone.utc))).copy()
    d.pop("seconds")
    return d, digest(dest)


def build(engine_build, store: Path, dest: Path, **kw) -> tuple[dict, dict]:
    """As :func:`rebuilt`, with the small sizes and RebuildOptions ``kw``."""
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.write.rebuild import RebuildOptions

    rep = engine_build(StoreConfig.load(store, None, **SIZES), dest, RebuildOptions(tz=dt.timezone.utc, **kw))
    d = vars(rep).copy()
    d.pop("seconds")
    return d, digest(dest)


def driver(args, cwd: Path, extra_env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI as a user runs it against a cluster: from ``cwd`` (stores named relative to
    it), with a HOME and an env var of its own that no executor has."""
    home = cwd.parent / "driver-home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(home), **{DRIVER_ONLY: "1"}, **(extra_env or {}))
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def store_parts(store: Path) -> dict:
    """Digests of a store's consume queues and index, and of its checkpoint."""
    return {p: digest(store / p) for p in ("consumequeue", "index")} | {
        "checkpoint": hashlib.sha256((store / "checkpoint").read_bytes()).hexdigest()
    }


def rebuild_and_export_equal(on: list, stores: Path, tmp_path: Path, prefix: str) -> None:
    """rebuild-index --output and export of two stores through ``on`` (the engine's options)
    give the local engine's files and summaries; their outputs go to ``../<prefix>rebuilt``
    and ``../<prefix>exported`` beside the stores (paths every executor sees)."""
    two = ("--store", "damaged", "--store", "other", *SMALL, "--tz", "UTC", "-f", "json")
    a = driver(["rebuild-index", *two, "--output", tmp_path / "l"], stores)
    b = driver(["rebuild-index", *two, "--output", f"../{prefix}rebuilt", *on], stores)
    assert a.returncode == 0 and b.returncode == 0, b.stderr[-2000:]
    for n in ("damaged", "other"):
        for part in ("consumequeue", "index"):
            want = digest(tmp_path / "l" / n / part)
            assert want and digest(stores.parent / f"{prefix}rebuilt" / n / part) == want, (n, part)
    assert [s["messages"] for s in json.loads(a.stdout)["stores"]] == [
        s["messages"] for s in json.loads(b.stdout)["stores"]
    ]

    args = ["export", "--store", "damaged", "--store", "other", "--body", "-f", "json"]
    e = driver([*args, "--output", f"../{prefix}exported", *on], stores)
    x = driver([*args, "--output", tmp_path / "x"], stores)
    assert e.returncode == 0 and x.returncode == 0, e.stderr[-2000:]

    def drop(d: dict) -> dict:
        return {k: v for k, v in d.items() if k not in ("output", "seconds", "engine")}

    assert drop(json.loads(e.stdout)) == drop(json.loads(x.stdout)) and json.loads(x.stdout)["unreadable_ranges"] == 2
    want = parquet_rows(tmp_path / "x")
    assert parquet_rows(stores.parent / f"{prefix}exported") == want and len(want) > 1000


def copy_store(stores: Path, name: str, dest: Path) -> Path:
    """A private copy of the store ``stores/name`` at ``dest``."""
    shutil.copytree(stores / name, dest)
    return dest
