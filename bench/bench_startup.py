"""Start-up wall time of the commands people type (and shells run on TAB) most.

Times whole processes, interpreter start-up included: ``rmqstore --help``, ``--version``,
``decode-msgid`` without and with ``--store``, and the completion requests a shell makes
(a command name, and topics read from ``--store``). Median and min of N runs, in
milliseconds, against ``python -c pass`` as the floor:

    .venv/bin/python bench/bench_startup.py [--runs 30] [--store DIR] [--hyperfine]

Without ``--store`` a small store is generated in a temp dir. ``--hyperfine`` also runs
hyperfine (Debian: apt-get install hyperfine) on the same command lines. Not a test:
prints a table and writes bench/results/startup.json; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchstore

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
RMQ = str(BIN / "rmqstore") if (BIN / "rmqstore").exists() else None


def cases(store: Path, ids: list[str]) -> list[tuple[str, list[str], dict]]:
    rmq = [RMQ] if RMQ else [sys.executable, "-m", "rmqstore_cli"]

    def comp(words: str, cword: int) -> dict[str, str]:
        return {"_RMQSTORE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}

    return [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"], {}),
        ("rmqstore --version", [*rmq, "--version"], {}),
        ("rmqstore --help", [*rmq, "--help"], {}),
        ("rmqstore dump-commitlog --help", [*rmq, "dump-commitlog", "--help"], {}),
        ("decode-msgid ID ID", [*rmq, "decode-msgid", *ids], {}),
        ("decode-msgid ID ID --format jsonl", [*rmq, "decode-msgid", *ids, "--format", "jsonl"], {}),
        ("decode-msgid ID ID --store S", [*rmq, "decode-msgid", *ids, "--store", str(store)], {}),
        (
            "decode-msgid ID ID --store S --format jsonl",
            [*rmq, "decode-msgid", *ids, "--store", str(store), "--format", "jsonl"],
            {},
        ),
        ("TAB: rmqstore dump-c", rmq, comp("rmqstore dump-c", 1)),
        ("TAB: dump-cq --store S <topic>", rmq, comp(f"rmqstore dump-cq --store {store} ", 4)),
    ]


def time_runs(argv: list[str], env: dict, runs: int) -> list[float]:
    e = dict(os.environ, **env)
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--store", type=Path)
    ap.add_argument("--hyperfine", action="store_true")
    a = ap.parse_args()
    tmp = None
    store = a.store
    if store is None:
        tmp = Path(tempfile.mkdtemp(prefix="rmq-startup-"))
        store = tmp / "store"
        benchstore.generate(store, 2000)
    try:
        first = subprocess.run(
            [
                sys.executable,
                "-m",
                "rmqstore_cli",
                "dump-commitlog",
                "--store",
                str(store),
                "--limit",
                "1",
                "--format",
                "jsonl",
            ],
            check=True,
            capture_output=True,
        ).stdout
        m = json.loads(first)
        ids = [m["msg_id"], m["uniq_key"]]
        rows = []
        print(
            f"{'command':48} {'median ms':>10} {'min ms':>8}   ({a.runs} runs, {os.cpu_count()} cores, "
            f"Python {platform.python_version()})"
        )
        for name, argv, env in cases(store, ids):
            time_runs(argv, env, 2)  # warm the page cache and .pyc files
            t = time_runs(argv, env, a.runs)
            rows.append({"command": name, "median_ms": round(statistics.median(t), 1), "min_ms": round(min(t), 1)})
            print(f"{name:48} {statistics.median(t):10.1f} {min(t):8.1f}")
            if a.hyperfine and shutil.which("hyperfine") and not env:
                subprocess.run(
                    ["hyperfine", "-N", "--warmup", "3", "--runs", str(a.runs), "--style", "basic", shlex.join(argv)],
                    check=False,
                )
        res = {
            "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "runs": a.runs,
            "results": rows,
        }
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "startup.json").write_text(json.dumps(res, indent=2) + "\n")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
