"""verify on one store in this process: the full local engine (findings streamed as found), or
the quick look of --sample/--max-bytes (store/verify/quick.py). Split from commands/verify.py."""

from __future__ import annotations

from rmqstore_cli.commands import common


def verify_local(spec, opts, fmt: common.Fmt) -> dict:
    """One store on the local engine: jsonl findings stream out as the scan finds them."""
    import sys

    from rmqstore_cli import reports
    from rmqstore_cli.pipeline.verify_job import commitlog_size, verify_one
    from rmqstore_cli.render import ProgressBar
    from rmqstore_cli.store.verify import CHECKS

    total = commitlog_size(spec) if sys.stderr.isatty() else 0
    stream = reports.finding_line if fmt is common.Fmt.jsonl else None
    with ProgressBar("verifying commit log", total=total or None) as bar:
        result = verify_one(spec, opts, bar.advance, stream)
    reports.verify_one(fmt.value, result, CHECKS, streamed=stream is not None)
    return result


def verify_quick(spec, opts, fmt: common.Fmt, sample: int | None, max_bytes: int | None) -> dict:
    """--sample/--max-bytes: only the records the narrowed walk keeps, each checked on its own
    (store/verify/quick.py); the summary says what was sampled and what it extrapolated."""
    from rmqstore_cli.commands.lines import note

    from rmqstore_cli import reports
    from rmqstore_cli.render import print_summary
    from rmqstore_cli.store.config import StoreConfig
    from rmqstore_cli.store.message_store import MessageStore
    from rmqstore_cli.store.sampling import Narrowing
    from rmqstore_cli.store.verify.quick import quick_verify

    ms = MessageStore.open(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))
    result = quick_verify(ms, Narrowing(sample, max_bytes), opts.crc, opts.max_findings)
    for n in result["summary"]["notes"]:
        note(n)
    if fmt is common.Fmt.table:
        reports.quick_findings(result["findings"])
        print_summary(fmt.value, {k: v for k, v in result["summary"].items() if k != "notes"}, "verify (sampled)")
    else:
        reports.verify_one(fmt.value, result, {}, streamed=False)
    return result
