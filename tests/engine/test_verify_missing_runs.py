"""verify's missing consume-queue units kept as runs past Verifier.MISSING_CAP (issue 22:
a store whose consumequeue/ is gone made verify keep 32 B per message): the findings are
the exact path's, and the runs stay one per queue however many messages there are."""

from __future__ import annotations

import shutil

import pytest

from rmqstore_cli.store.layout.config import StoreConfig
from rmqstore_cli.store.verify import Verifier, VerifyOptions
from tests.helpers import generate


def findings(store, cap, deep=False):
    Verifier.MISSING_CAP, old = cap, Verifier.MISSING_CAP
    try:
        cfg = StoreConfig.load(
            store,
            None,
            mapped_file_size_commit_log=65536,
            mapped_file_size_consume_queue=2000,
            max_hash_slot_num=64,
            max_index_num=400,
        )
        v = Verifier(cfg, VerifyOptions(crc=False, deep=deep, max_findings=None))
        out = [(f.check, f.file, f.offset, f.detail, f.extra.get("count")) for f in v.run()]
        return out, v
    finally:
        Verifier.MISSING_CAP = old


@pytest.mark.slow
@pytest.mark.parametrize("lost", ["consumequeue", "one-queue-file"])
def test_runs_give_the_exact_findings(tmp_path, lost):
    store = generate(tmp_path / "s", messages=3000)
    if lost == "consumequeue":
        shutil.rmtree(store / "consumequeue")
    else:
        victim = sorted((store / "consumequeue").glob("*/*/0*"))[0]
        victim.unlink()
    exact, v_exact = findings(store, None)
    runs, v_runs = findings(store, 0)
    assert v_exact.missing and v_runs.missing is None  # the second really went by runs
    assert [f for f in exact if f[0].startswith("cq.")] and exact == runs
    if lost == "consumequeue":  # one run per queue, whatever the message count
        assert all(len(r) == 1 for r in v_runs.missing_runs.values())
