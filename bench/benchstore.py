"""What the benchmark scripts share: the command line run by this interpreter, and a store
written once by ``rmqstore generate`` for them to measure (a sibling module: ``python
bench/bench_x.py`` finds it beside the script).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

#: The checkout the scripts lie in: ``python -m rmqstore_cli`` from there runs its code.
ROOT = Path(__file__).resolve().parent.parent
#: The command line, run by this interpreter (the one the benchmark runs under).
CLI = [sys.executable, "-m", "rmqstore_cli"]


def generate(store: Path, messages: int, *options: str) -> None:
    """``rmqstore generate --store STORE --messages N OPTIONS --format json`` in a child
    process from the checkout's root, its report dropped; a failure ends the benchmark with
    generate's own error line."""
    argv = [*CLI, "generate", "--store", str(store), "--messages", str(messages), *options, "--format", "json"]
    r = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)


def ensure_store(store: Path, messages: int, *options: str) -> float | None:
    """The store at ``store`` made by :func:`generate` unless a finished one is there (its
    ``checkpoint`` written), what an interrupted run left removed first; the seconds the
    generate took, None when the store was already there."""
    if (store / "checkpoint").exists():
        return None
    if store.exists():
        shutil.rmtree(store)
    print(f"generating {messages} messages into {store} ...", file=sys.stderr)
    t = time.perf_counter()
    generate(store, messages, *options)
    return time.perf_counter() - t
