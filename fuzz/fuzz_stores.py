#!/usr/bin/env python
"""Long mutated-store fuzz run of every read command; see fuzz/storefuzz.py.

    .venv/bin/python fuzz/fuzz_stores.py --iterations 300 [--seed-start 0] [--timeout 30]

Prints one line per failing case and a summary; ``--record`` appends failing cases to
fuzz/corpus/stores.jsonl (the suite replays them). Memory is capped with RLIMIT_AS so a
runaway allocation is a MemoryError (a failure), not a swapping machine.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import storefuzz  # run as a script (python fuzz/fuzz_stores.py): its own directory is on the path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--seed-start", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--mem-gb", type=float, default=3.0)
    ap.add_argument("--record", action="store_true")
    ap.add_argument("--show-errors", action="store_true", help="list the distinct error lines seen")
    a = ap.parse_args()
    lim = int(a.mem_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    tmp = Path(tempfile.mkdtemp(prefix="rmqfuzz-"))
    gen = storefuzz.generated_store(tmp / "gen" / "store")
    targets = storefuzz.stores(tmp) + [(gen, storefuzz.generated_conf(tmp / "gen" / "broker.conf"))]
    probes = {str(s): storefuzz.probe(s, c) for s, c in targets}
    t0 = time.time()
    runs = Counter()
    codes = Counter()
    failed = []
    errors = Counter()
    for i in range(a.iterations):
        seed = a.seed_start + i
        src, conf = targets[seed % len(targets)]
        res = storefuzz.run_case(src, conf, tmp / "work", seed, probes[str(src)], a.timeout)
        for o in res.outcomes:
            runs[o.command] += 1
            codes[(o.command, o.exit_code)] += 1
            for ln in o.stderr.splitlines():
                if ln.startswith("rmqstore: error:"):
                    errors[re.sub(r"\d+", "N", ln)[:150]] += 1
        if res.failures:
            failed.append(res)
            for o in res.failures:
                print(
                    f"FAIL seed={seed} store={Path(src).parent.name} [{res.mutation}] {o.command}: "
                    f"{o.problem.splitlines()[0]}",
                    flush=True,
                )
            if a.record:
                p = storefuzz.ROOT / "fuzz" / "corpus" / "stores.jsonl"
                p.parent.mkdir(parents=True, exist_ok=True)
                with p.open("a") as fh:
                    fh.write(
                        json.dumps(
                            {
                                "store": Path(src).parent.name,
                                "seed": seed,
                                "mutation": res.mutation,
                                "problem": res.failures[0].problem.splitlines()[0],
                            }
                        )
                        + "\n"
                    )
    dt = time.time() - t0
    print(f"\n{a.iterations} cases ({sum(runs.values())} command runs) in {dt:.0f}s; {len(failed)} failing cases")
    for (cmd, code), n in sorted(codes.items(), key=lambda x: (x[0][0], str(x[0][1]))):
        print(f"  {cmd:20s} exit {code}: {n}")
    if a.show_errors:
        print("\nerror lines (digits as N):")
        for ln, n in errors.most_common():
            print(f"  {n:5d}  {ln}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
