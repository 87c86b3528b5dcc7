"""What many tests share: where the fixtures are, how to run the CLI, how to make a store.

Import from here (``from tests.helpers import SMALL, cli, generate``); pytest fixtures live in
``tests/conftest.py`` (and ``tests/pipeline/conftest.py``), which use these functions. The
modules beside this one hold helpers for one area: ``records`` (hand-built commit-log
records), ``contract`` (schemas), ``hostile`` (planted files), ``pipeline`` (Parquet rows,
rebuild digests), ``rocksdb_build`` (a RocksDB consume queue written independently),
``standalone`` (a Spark standalone cluster) and ``codeshape`` (the source-shape figures).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def fast_first(values, ids=None) -> list:
    """A parameter list whose first case runs in the fast tier and the rest in ``slow``: plain
    ``pytest`` still meets every test once, ``pytest -m slow`` meets the whole matrix."""
    ids = list(ids) if ids is not None else [None] * len(values)
    return [
        pytest.param(*(v if isinstance(v, tuple) else (v,)), id=i, marks=() if n == 0 else pytest.mark.slow)
        for n, (v, i) in enumerate(zip(values, ids, strict=True))
    ]


#: The real brokers' stores and the JDK's vectors (tests/fixtures/README.md).
FIXTURES = ROOT / "tests" / "fixtures"
VECTORS = FIXTURES / "vectors"
VERSIONS = ("4.9.7", "5.3.3")

# Small sizes, so a few thousand messages roll commit-log, CQ and index files and collide in slots.
SMALL = ["--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400"]

#: The real-broker samples shipped as sparse tarballs (tests/fixtures/README.md, "The six
#: tarballs"): name -> tarball stem.
TARBALLS = {
    "lmq": "rocketmq-4.9.7-lmq-sample",
    "dledger": "rocketmq-4.9.7-dledger-sample",
    "timer": "rocketmq-5.3.3-timer-sample",
    "bcq": "rocketmq-5.3.3-bcq-sample",
    "rocksdb": "rocketmq-5.3.3-rocksdb-cq-sample",
    "compaction": "rocketmq-5.3.3-compaction-sample",
}


def needs_c() -> None:
    """For a test of the C loops (store/files/kernels.py, _ckernels.c): skip where they cannot be
    built (no C compiler: setup.py's extension is optional), fail where they could be but
    are not (the README's ``pip install -e`` builds them)."""
    from rmqstore_cli.store.files import kernels

    if kernels.BUILT:
        return
    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler here: the C loops are not built, the reference loops run")
    pytest.fail("rmqstore_cli/store/_ckernels.c is not built: pip install -e . builds it")


def fixture_dir(version: str) -> Path:
    """``tests/fixtures/rocketmq-<version>-sample``: ``store/``, ``broker.conf``, ``expected.json``."""
    d = FIXTURES / f"rocketmq-{version}-sample"
    assert d.is_dir(), f"{d} is missing from the checkout (tests/fixtures/README.md)"
    return d


def extract_sample(name: str, dest: Path) -> Path:
    """Extract one sample tarball into ``dest`` (holes kept: tarfile writes sparse members by
    seeking) and return its directory (``store/``, ``broker.conf``, ``expected.json``)."""
    tarball = FIXTURES / f"{TARBALLS[name]}.tar.gz"
    with tarfile.open(tarball) as tf:
        tf.extractall(dest, filter="tar")
    found = [p.parent for p in dest.rglob("expected.json")]
    assert len(found) == 1, f"{tarball}: expected one sample directory, found {found}"
    return found[0]


def cli(*args: str, input: str | None = None):
    """Run the CLI in-process; stdout and stderr kept apart."""
    from typer.testing import CliRunner

    from rmqstore_cli.app import app

    return CliRunner().invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)


def run(*args: str, input: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m rmqstore_cli`` as a subprocess, for exit codes and stream separation."""
    e = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "rmqstore_cli", *map(str, args)], input=input, capture_output=True, env=e, timeout=300
    )


def generate(path: Path, *extra: str, messages: int = 2000, seed: int = 7, small: bool = True) -> Path:
    """``rmqstore generate`` into ``path`` (small file sizes unless ``small=False``)."""
    r = cli(
        "generate",
        "--store",
        path,
        "--messages",
        str(messages),
        "--seed",
        str(seed),
        *(SMALL if small else []),
        *extra,
        "--format",
        "json",
    )
    assert r.exit_code == 0, r.stderr
    return path


#: A BatchCQ unit's fields (``BatchUnit``'s names, a dump-cq row's but ``store_time_ms``), and the
#: names a sample's expected.json gives them (the broker's getters), in the same order.
BCQ_UNIT_FIELDS = (*"msg_base_offset commitlog_offset size tags_code store_time batch_size compacted_offset".split(),)
BCQ_EXPECTED_KEYS = tuple("msgBaseOffset commitLogOffset size tagsCode storeTime batchSize compactedOffset".split())


def expected_bcq_units(exp: dict) -> dict[int, tuple]:
    """A BatchCQ sample's expected.json units by their index, as tuples of :data:`BCQ_UNIT_FIELDS`."""
    return {e["unitIndex"]: tuple(e[k] for k in BCQ_EXPECTED_KEYS) for e in exp["units"]}


def bcq_unit_values(unit) -> tuple:
    """A ``BatchUnit``'s :data:`BCQ_UNIT_FIELDS`, to hold against :func:`expected_bcq_units`."""
    return tuple(getattr(unit, f) for f in BCQ_UNIT_FIELDS)


def generate_5x(store: Path, conf: Path, *extra: str) -> Path:
    """``generate`` of a 5.x store (``--broker-version 5``) under the broker.conf ``conf``: what
    its sizes and switches make of the workload ``extra`` asks for."""
    r = cli("generate", "--store", store, "--broker-conf", conf, "--broker-version", "5", *extra, "--format", "json")
    assert r.exit_code == 0, r.stderr
    return store


#: generate's options for plain messages only, no delayed or transactional ones: every record
#: gets one unit, in its own topic's queue.
PLAIN = ("--delay-ratio", "0", "--transaction-ratio", "0")


def generate_plain(path: Path, *extra: str, topics: int | None = None, queues: int | None = None, **kw) -> Path:
    """:func:`generate` of plain messages only (:data:`PLAIN`), in ``topics`` topics of ``queues``
    queues each where given (else generate's defaults)."""
    shape = [f"--{k}={v}" for k, v in (("topics", topics), ("queues", queues)) if v is not None]
    return generate(path, *shape, *PLAIN, *extra, **kw)


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    """sha256 and mtime_ns of every file below root: a read-only command must not change them."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
    return out


def dumped(src: Path, *args: str) -> list[dict]:
    """``src``'s records as ``dump-commitlog --format jsonl --body base64`` prints them (``args``
    narrow it), without ``physical_offset`` and ``queue_offset``: objects for
    ``generate --from-jsonl`` to place and number anew (:func:`written`)."""
    out = cli("dump-commitlog", "--store", src, "--format", "jsonl", "--body", "base64", *args).stdout
    dump = [json.loads(x) for x in out.splitlines()]
    for r in dump:
        r.pop("physical_offset"), r.pop("queue_offset")
    return dump


def written(dest: Path, records: list[dict]) -> Path:
    """``dest``: ``records`` written by ``generate --from-jsonl`` (small file sizes)."""
    lines = "\n".join(json.dumps(x) for x in records) + "\n"
    r = cli("generate", "--store", dest, "--from-jsonl", "-", *SMALL, "--format", "json", input=lines)
    assert r.exit_code == 0, r.stderr
    return dest


def retopic(src: Path, dest: Path, topics: list[tuple[slice, str]]) -> Path:
    """``dest``: ``src`` dumped and written again (small file sizes) with the records picked
    by each slice given that topic; the writer places records and numbers queues anew."""
    dump = dumped(src)
    for sl, topic in topics:
        for r in dump[sl]:
            r["topic"] = topic
    return written(dest, dump)


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A small tmpfs at ``path`` (root only); skipped where mounting is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def writable_copy(src: Path, dst: Path) -> Path:
    """A copy of a (read-only) fixture store that tests may change."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst


def without_loops(stdout: str) -> str:
    """verify's JSON output without its summary's ``c_extensions`` (which says which loops
    ran, so differs between the C and the reference loops); any other output unchanged."""
    try:
        doc = json.loads(stdout)
    except ValueError:  # not one JSON document (jsonl, a table)
        return stdout
    if isinstance(doc, dict) and isinstance(doc.get("summary"), dict):
        doc["summary"].pop("c_extensions", None)
    return json.dumps(doc)
