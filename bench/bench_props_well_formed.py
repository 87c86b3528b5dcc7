"""CPU time of batch.props_well_formed (verify's check of suspect PROPERTIES) against the
old count-only test it replaced (which let a value's extra \\x01 hide a dropped pair).

    taskset -c 0 .venv/bin/python bench/bench_props_well_formed.py
"""

import time

from rmqstore_cli.store.records.properties import props_well_formed


def count_only(props: bytes) -> bool:  # the previous test, for comparison
    c2 = props.count(b"\x02")
    pairs = c2 if props.endswith(b"\x02") else c2 + 1
    return (
        props.count(b"\x01") == pairs
        and not props.startswith(b"\x01")
        and b"\x02\x01" not in props
        and b"\x01\x02" not in props
        and b"\x02\x02" not in props
        and not props.endswith(b"\x01")
    )


CASES = {
    "6 pairs, 130 B": b"KEYS\x01order-42 k7\x02UNIQ_KEY\x01AC100A0748FF5FFD2B276CDD6C4D0001\x02WAIT\x01true\x02"
    b"TAGS\x01TagA\x02MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02",
    "60 pairs, 1.3 KB": b"".join(b"PROP%02d\x01value-%02d-xxxxxxxx\x02" % (i, i) for i in range(60)),
}
N = 300_000
for name, p in CASES.items():
    for f in (count_only, props_well_formed, count_only, props_well_formed):
        t0 = time.process_time()
        for _ in range(N):
            f(p)
        print(f"{name:18} {f.__name__:18} {(time.process_time() - t0) / N * 1e9:7.0f} ns/call (CPU)")
