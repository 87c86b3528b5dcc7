"""The whole-store Verifier's single pass (``Verifier.run``): the reference the verify engine's
tests compare the plan, tasks and join with (pipeline/verify_tasks.py); the commands and the
library run the engine."""

from __future__ import annotations


def verify_store(spec, crc: bool, deep: bool, max_findings: int | None, broker_version: str | None = None) -> dict:
    """One store's (capped) findings, each carrying the store, and its summary, as
    ``verify_stores`` returns them. ``broker_version``: the one recovery is predicted for
    (None: the store's)."""
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.verify import Verifier, VerifyOptions, open_for_verify

    cfg = open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))
    v = Verifier(cfg, VerifyOptions(crc=crc, deep=deep, max_findings=max_findings, broker_version=broker_version))
    findings = [dict(f.as_dict(), store=spec.label) for f in v.run()]
    summary = dict(v.summary, store=spec.label)
    return {"store": spec.label, "findings": findings, "summary": summary, "ok": v.ok}
