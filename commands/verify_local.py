"""verify's runs: every check on this machine or Spark (pipeline/verify_job.py), or the quick
look of --sample/--max-bytes (store/verify/quick.py). Split from commands/verify.py."""

from __future__ import annotations

from rmqstore_cli.commands import common


def verify_local(spec, opts, fmt: common.Fmt, jobs: int) -> dict:
    """One store on ``jobs`` processes of this machine (0: every core), a progress bar on a
    terminal; the findings print when the join has ordered them (the same bytes whatever
    ``jobs``)."""
    import sys

    from rmqstore_cli import reports
    from rmqstore_cli.pipeline.verify_job import commitlog_size, verify_one
    from rmqstore_cli.render import ProgressBar
    from rmqstore_cli.store.verify import CHECKS

    total = commitlog_size(spec) if sys.stderr.isatty() else 0
    with ProgressBar("verifying commit log", total=total or None) as bar:
        result = verify_one(spec, opts, bar.advance, jobs)
    reports.verify_one(fmt.value, result, CHECKS)
    return result


def verify_quick(spec, opts, fmt: common.Fmt, sample: int | None, max_bytes: int | None) -> dict:
    """--sample/--max-bytes: only the records the narrowed walk keeps, each checked on its own
    (store/verify/quick.py); the summary says what was sampled and what it extrapolated."""
    from rmqstore_cli.commands.lines import note

    from rmqstore_cli import reports
    from rmqstore_cli.render import print_summary
    from rmqstore_cli.store.answers.sampling import Narrowing
    from rmqstore_cli.store.layout.config import StoreConfig
    from rmqstore_cli.store.message_store import MessageStore
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


def verify_full(specs: list, opts, fmt: common.Fmt, fleet: bool, spark: tuple | None, jobs: int) -> list[dict]:
    """Every check, on ``jobs`` processes or Spark; one store prints the same whatever the
    engine (its size-inference notes on stderr with the table)."""
    from rmqstore_cli.commands.lines import note

    from rmqstore_cli import reports
    from rmqstore_cli.pipeline.verify_job import verify_many
    from rmqstore_cli.store.verify import CHECKS

    if fleet:
        results = verify_many(specs, opts, spark, fleet, jobs)
        reports.verify_many(fmt.value, results)
        return results
    if spark is None:
        results = [verify_local(specs[0], opts, fmt, jobs)]
    else:
        results = verify_many(specs, opts, spark, fleet, jobs)
        reports.verify_one(fmt.value, results[0], CHECKS)
    for n in results[0]["summary"]["notes"] if fmt is common.Fmt.table else ():
        note(n)
    return results


def finding_cap(cap: int | None, fmt: common.Fmt) -> int:
    """--limit, else 5 of each check in the table and 100 in the JSON formats."""
    from rmqstore_cli import reports

    if cap is not None:
        return cap
    return reports.TABLE_LIMIT if fmt is common.Fmt.table else reports.JSON_LIMIT
