"""export with pyarrow and without PySpark (the ``export`` extra): the local engine's Parquet
equals dump-commitlog's JSON Lines under the same filters.

Runs in two venvs. .ci/run's second venv has ``pip install '.[export]'`` only and sets
:data:`EXPORT_VENV`: there PySpark (and pandas) must not be importable at all. In the main
venv, which has the spark extra, every rmqstore command of this module runs under an import
hook that makes ``import pyspark`` and ``import pandas`` fail and records each attempt to
import PySpark: none may be made. Nothing here imports rmqstore_cli in-process (the commands run as
``python -m rmqstore_cli`` from a directory of their own, so the export venv's installed
package is the one run), and the dataset is read with pyarrow alone.
"""

from __future__ import annotations

import base64
import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="needs the export extra: pip install -e '.[export]'")
pq = pytest.importorskip("pyarrow.parquet", reason="needs the export extra: pip install -e '.[export]'")

#: Set by .ci/run in the venv that has the export extra alone.
EXPORT_VENV = "RMQSTORE_TEST_EXPORT_VENV"
#: What the export venv lacks and the main venv's hook refuses: the local engine needs neither.
BLOCKED = ("pyspark", "pandas")
#: The import hook of the main venv: ``import pyspark`` and ``import pandas`` fail, as where
#: they are not installed; each attempt to import PySpark is appended to the file named by
#: $RMQSTORE_TEST_TRIED. pandas is only refused, not recorded: pyarrow itself probes for it
#: (``pa.array`` looks whether its input is a pandas object) and goes on without it.
HOOK = f"""
import os, runpy, sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in {BLOCKED!r}:
            return None
        if name.startswith("pyspark"):
            with open(os.environ["RMQSTORE_TEST_TRIED"], "a") as fh:
                fh.write(name + "\\n")
        raise ImportError("blocked by the test: " + name)
sys.meta_path.insert(0, Blocked())
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""
SMALL = ["--commitlog-file-size", "65536", "--cq-file-size", "2000", "--index-slots", "64", "--index-max", "400"]


def _export_venv() -> bool:
    return os.environ.get(EXPORT_VENV) == "1"


def _python(module: str, *args, cwd: Path, tried: Path) -> subprocess.CompletedProcess:
    """``python -m module args`` from ``cwd``, under the blocking hook in the main venv."""
    head = [sys.executable, "-m", module] if _export_venv() else [sys.executable, "-c", HOOK, module]
    env = dict(os.environ, RMQSTORE_TEST_TRIED=str(tried))
    env.pop("PYTHONPATH", None)
    return subprocess.run([*head, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _rmqstore(*args, cwd: Path, tried: Path) -> subprocess.CompletedProcess:
    return _python("rmqstore_cli", *args, cwd=cwd, tried=tried)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A generated multi-file store at ``snap/broker-a/store``, its whole dump, and the file
    recording blocked import attempts."""
    root = tmp_path_factory.mktemp("exportonly")
    tried = root / "tried.txt"
    tried.write_text("")
    store = root / "snap" / "broker-a" / "store"
    r = _rmqstore("generate", "--store", store, "--messages", "1500", "--seed", "5", *SMALL, cwd=root, tried=tried)
    assert r.returncode == 0, r.stderr
    return root, store, tried, _dump(root, store, [], tried)


def _dump(root: Path, store: Path, filters: list[str], tried: Path) -> list[dict]:
    r = _rmqstore(
        "dump-commitlog", "--store", store, *filters, "--format", "jsonl", "--body", "base64", cwd=root, tried=tried
    )
    assert r.returncode in (0, 1), r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def _dataset(out: Path) -> list[dict]:
    """Every row of the dataset under ``out``, file by file: the partition values (not stored
    in the files) from the directory names (``_store``, ``_topic_dir``, percent-escaped as
    hive partitions are), the time columns checked to be UTC milliseconds and read as the
    epoch milliseconds they hold; sorted by physical offset."""
    from urllib.parse import unquote

    rows = []
    for f in sorted(out.rglob("*.parquet")):
        parts = {k: unquote(v) for k, v in (p.split("=", 1) for p in f.relative_to(out).parent.parts)}
        t = pq.read_table(f)
        for name in ("born_timestamp", "store_timestamp"):
            at = t.schema.get_field_index(name)
            assert t.schema.field(at).type == pa.timestamp("ms", tz="UTC"), t.schema.field(at)
            t = t.set_column(at, name, t[name].cast(pa.int64()))
        for r in t.to_pylist():
            rows.append(dict(r, **{"_" + k: v for k, v in parts.items()}))
    return sorted(rows, key=lambda r: r["physical_offset"])


def _same_as_dump(rows: list[dict], dumped: list[dict]) -> None:
    assert [r["physical_offset"] for r in rows] == [d["physical_offset"] for d in dumped]
    for r, d in zip(rows, dumped, strict=True):
        d = dict(d)
        assert r["body"] == base64.b64decode(d.pop("body")) and d.pop("body_encoding") == "base64"
        assert dict(r["properties"]) == d.pop("properties")
        for k, v in d.items():
            assert r[k] == v, (k, r["physical_offset"])


def _filters(dumped: list[dict]) -> dict[str, list[str]]:
    """Filter combinations picked from the store's own records (so each matches some)."""
    topic = collections.Counter(d["topic"] for d in dumped).most_common(1)[0][0]
    tagged = next(d for d in dumped if d["topic"] == topic and d.get("tags"))
    keyed = next(d for d in dumped[len(dumped) // 3 :] if d.get("keys"))
    mid = dumped[len(dumped) // 2]
    t0, t1 = dumped[len(dumped) // 4]["store_timestamp"], dumped[len(dumped) // 2]["store_timestamp"]
    return {
        "none": [],
        "topic": ["-t", topic],
        "topic+queue": ["--topic", topic, "--queue-id", str(tagged["queue_id"])],
        "key": ["--key", keyed["keys"][0]],
        "tag": ["--tag", tagged["tags"]],
        "window": ["--begin", str(t0), "--end", str(t1)],
        "relative window": ["--begin", "-10m", "--now", str(mid["store_timestamp"])],
        "offsets": ["--from-offset", str(dumped[100]["physical_offset"]), "--to-offset", str(mid["physical_offset"])],
        "topic+tag+begin+from": [
            "-t",
            topic,
            "--tag",
            tagged["tags"],
            "--begin",
            str(t0),
            "--from-offset",
            str(dumped[10]["physical_offset"]),
        ],
    }


def test_pyspark_is_not_importable_where_export_runs(work):
    """In the export venv PySpark and pandas are not installed; in the main venv the hook
    every command here runs under refuses them (and records the attempt)."""
    root = work[0]
    if _export_venv():
        import importlib.util

        assert [m for m in BLOCKED if importlib.util.find_spec(m) is not None] == []
    for m in BLOCKED:
        probe = root / f"probe_{m}.txt"
        probe.write_text("")
        (root / f"probe_{m}.py").write_text(f"import {m}\n")
        r = _python(f"probe_{m}", cwd=root, tried=probe)
        assert r.returncode == 1 and "Error" in r.stderr and m in r.stderr, r.stderr
        assert _export_venv() or probe.read_text() == ("pyspark\n" if m == "pyspark" else "")


@pytest.mark.parametrize(
    "name",
    ["none", "topic", "topic+queue", "key", "tag", "window", "relative window", "offsets", "topic+tag+begin+from"],
)
def test_export_is_dump_commitlog_under_the_same_filters(work, name):
    root, store, tried, everything = work
    filters = _filters(everything)[name]
    out = root / f"out-{name.replace(' ', '_').replace('+', '_')}"
    r = _rmqstore(
        "export", "--store", store, "--output", out, "--body", *filters, "--format", "json", cwd=root, tried=tried
    )
    assert r.returncode == 0, r.stderr
    dumped = _dump(root, store, filters, tried)
    assert 0 < len(dumped) and (name == "none" or len(dumped) < len(everything))
    rows = _dataset(out)
    assert json.loads(r.stdout)["rows"] == len(rows)
    _same_as_dump(rows, dumped)
    assert {x["_store"] for x in rows} == {"broker-a"}  # the directory above store/
    assert all(x["_topic_dir"] == x["topic"] for x in rows)
    assert tried.read_text() == ""  # nothing tried to import PySpark


def test_store_name_names_the_partition(work):
    root, store, tried, everything = work
    out = root / "named"
    r = _rmqstore(
        "export",
        "--store",
        store,
        "--store-name",
        "eu-1",
        "--output",
        out,
        "-t",
        everything[0]["topic"],
        cwd=root,
        tried=tried,
    )
    assert r.returncode == 0, r.stderr
    assert [p.name for p in out.iterdir()] == ["store=eu-1"]
    assert {x["_store"] for x in _dataset(out)} == {"eu-1"}
    assert tried.read_text() == ""
