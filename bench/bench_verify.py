"""Benchmark ``rmqstore verify``: messages/s and MB/s with CRC on, against raw zlib.crc32.

Usage (from the project root):

    .venv/bin/python bench/bench_verify.py [--messages 200000] [--big-messages 20000] [--dir /tmp/rmq-bench]

Two stores are generated once (cached in --dir): 256-byte bodies and 16 KiB bodies, both
with the default file sizes. Each is verified in-process on one core (best of --repeat),
with CRC on (the default) and off, and with --deep; the raw speed of ``zlib.crc32`` over
the same body bytes is measured for comparison. Numbers go to stdout as a table and
to bench/results/verify.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import zlib
from pathlib import Path


def _pin_one_core() -> None:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    except (AttributeError, OSError):
        pass


def generate(path: Path, messages: int, body: str) -> Path:
    if (path / "checkpoint").exists():
        return path
    from typer.testing import CliRunner

    from rmqstore_cli.app import app

    t = time.perf_counter()
    r = CliRunner().invoke(
        app,
        [
            "generate",
            "--store",
            str(path),
            "--messages",
            str(messages),
            "--seed",
            "3",
            "--body-size",
            body,
            "--delay-ratio",
            "0.02",
            "--transaction-ratio",
            "0.02",
            "--format",
            "json",
        ],
    )
    if r.exit_code:
        raise SystemExit(r.stdout + r.stderr)
    print(f"generated {path} ({messages} messages, body {body}) in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    return path


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_verify(path: Path, crc: bool, deep: bool = False, compiled: bool = False):
    """One whole ``Verifier.run()``; ``compiled``: store/files/kernels.py's C loops (built at install),
    else the reference loops (``FAST_PATHS.pure``, as ``RMQSTORE_PURE=1``)."""
    from rmqstore_cli.store.files.fastpaths import FAST_PATHS
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.verify import Verifier, VerifyOptions, open_for_verify

    cfg = open_for_verify(StoreConfig.load(path))
    v = Verifier(cfg, VerifyOptions(crc=crc, deep=deep, max_findings=10))
    saved = FAST_PATHS.pure
    FAST_PATHS.pure = not compiled
    t, c = time.perf_counter(), time.process_time()
    try:
        findings = list(v.run())
    finally:
        FAST_PATHS.pure = saved
    dt, cpu = time.perf_counter() - t, time.process_time() - c
    assert v.ok, [f.as_dict() for f in findings[:5]]
    return dt, cpu, v.summary


def body_bytes_crc(path: Path) -> tuple[float, int, float, int]:
    """Raw zlib.crc32 speed over the same bytes: (seconds, calling it once per body; body bytes;
    seconds, one call per file over all its data; data bytes; seconds of the engine's crc32
    — zlib-ng's — once per body)."""
    import struct

    from rmqstore_cli.store.commitlog import CommitLog
    from rmqstore_cli.store.files.crc import crc32 as engine_crc32
    from rmqstore_cli.store.layout.config import StoreConfig

    cl = CommitLog(StoreConfig.load(path))
    bodies, chunks = [], []
    for f in cl.files:
        buf = memoryview(f.buffer())
        pos = 0
        while pos + 8 <= len(buf):
            total, magic = struct.unpack_from(">iI", buf, pos)
            if magic not in (0xDAA320A7, 0xDAA320AB):
                break
            sys_flag = struct.unpack_from(">i", buf, pos + 36)[0]
            at = pos + 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
            n = struct.unpack_from(">i", buf, at)[0]
            if n > 0:
                bodies.append((buf, at + 4, n))
            pos += total
        chunks.append(buf[:pos])
    best, best_one = _crc_speed(zlib.crc32, bodies, chunks)
    body_total = sum(n for _, _, n in bodies)
    data = sum(len(c) for c in chunks)
    return best, body_total, best_one, data, _crc_speed(engine_crc32, bodies, chunks)[0]


def _crc_speed(crc32, bodies, chunks) -> tuple[float, float]:
    """Best seconds of ``crc32`` once per body, and once per file over all its data."""
    best = best_one = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for b, a, n in bodies:
            crc32(b[a : a + n])
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()
        for c in chunks:
            crc32(c)
        best_one = min(best_one, time.perf_counter() - t)
    return best, best_one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--big-messages", type=int, default=20_000)
    ap.add_argument("--dir", default="/tmp/rmq-bench-verify")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    _pin_one_core()
    base = Path(a.dir)
    base.mkdir(parents=True, exist_ok=True)
    stores = {
        "256B": generate(base / f"b256-{a.messages}", a.messages, "256"),
        "16KiB": generate(base / f"b16k-{a.big_messages}", a.big_messages, "16384"),
    }
    results = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "pinned_to_one_core": True,
        "runs": {},
    }
    load = os.getloadavg()
    results["load_average"] = [round(x, 2) for x in load]
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'store':8} {'mode':12} {'msgs':>8} {'MB':>8} {'sec':>7} {'msg/s':>10} {'MB/s':>8}")
    for label, path in stores.items():
        run_verify(path, True)  # warm the page cache and numpy
        run_verify(path, True, compiled=True)
        for mode, crc, deep, comp in (
            ("crc", True, False, False),
            ("no-crc", False, False, False),
            ("crc+deep", True, True, False),
            ("crc compiled", True, False, True),
        ):
            best, best_cpu, summ = 1e9, 1e9, None
            for _ in range(a.repeat):
                dt, cpu, summ = run_verify(path, crc, deep, comp)
                best, best_cpu = min(best, dt), min(best_cpu, cpu)
            data = summ["commitlog_end_offset"] - summ["commitlog_min_offset"]
            row = {
                "messages": summ["messages"],
                "data_bytes": data,
                "seconds": round(best, 4),
                "cpu_seconds": round(best_cpu, 4),
                "messages_per_s": round(summ["messages"] / best),
                "mb_per_s": round(data / best / 1e6, 1),
                "messages_per_cpu_s": round(summ["messages"] / best_cpu),
            }
            results["runs"][f"{label} {mode}"] = row
            print(
                f"{label:8} {mode:12} {row['messages']:>8} {data / 1e6:>8.1f} {best:>7.3f} "
                f"{row['messages_per_s']:>10} {row['mb_per_s']:>8}   (cpu {best_cpu:.3f}s, "
                f"{row['messages_per_cpu_s']} msg/cpu-s)"
            )
        per_body, body_total, one_shot, data_bytes, engine = body_bytes_crc(path)
        results["runs"][f"{label} raw zlib.crc32"] = {
            "per_body_mb_per_s": round(body_total / per_body / 1e6, 1),
            "one_shot_mb_per_s": round(data_bytes / one_shot / 1e6, 1),
            "engine_crc32_per_body_mb_per_s": round(body_total / engine / 1e6, 1),
            "body_bytes": body_total,
        }
        print(
            f"{label:8} raw crc32 per body {body_total / per_body / 1e6:.1f} MB/s of bodies, "
            f"one call over the data {data_bytes / one_shot / 1e6:.1f} MB/s; the engine's crc32 "
            f"(store/files/crc.py) per body {body_total / engine / 1e6:.1f} MB/s"
        )
        for mode in ("crc", "crc compiled"):
            v = results["runs"][f"{label} {mode}"]
            ratio = (v["data_bytes"] / v["seconds"]) / (body_total / per_body)
            v["fraction_of_raw_crc32"] = round(ratio, 3)
            print(f"{label:8} verify ({mode}) runs at {ratio:.0%} of raw per-body crc32 speed over the same bytes")
    results["peak_rss_mib"] = round(peak_rss_mib(), 1)
    print(f"peak RSS of the process: {results['peak_rss_mib']} MiB")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "verify.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
