"""``rmqstore verify``: prove a store consistent, or say exactly where it is not."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    DEFAULT_STORE,
    Engine,
    EngineOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoresOpt,
    VerifyBrokerVersion,
    command,
)

EPILOG = """Examples:

  rmqstore verify --store ~/store --broker-conf conf/broker.conf

  rmqstore verify --store /snapshots/broker-a --deep --format jsonl | jq -c 'select(.severity=="error")'

  rmqstore verify --store ~/store --no-crc --max-findings 5

  rmqstore verify --list-checks

  rmqstore verify --store '/snapshots/broker-*/store' --format jsonl      # several stores

  rmqstore verify --store a/store --store b/store --engine spark --spark-master 'local[4]'

With several stores (or --engine spark) every finding carries "store", and the summary
holds one entry per store. --engine spark runs one Spark task per commit-log file, then
one per queue and per index file; the findings are the local engine's.

Exit codes: 0 no errors (warnings and info may be listed), 1 errors found, 3 not a store.
A finding rebuild-index repairs (cq.missing-unit, index.missing: messageIndexEnable=true
but no index entry while messages carry keys) ends with the command that repairs it.
With --format jsonl every finding is one line {"check","severity","file","offset","detail",...};
the last line is {"summary": {...}} (messages checked; bytes, the total
size of their records, not of the files; files; findings per check; broker_start).

broker_start predicts whether the broker (--broker-version, else the store's: timer files
mean 5, otherwise 4.9 is assumed) would start on the store, and why not: config files and
their .bak (ConfigManager#load), file sizes (MappedFileQueue#doLoad), an empty last
consume-queue file (5.0-5.3.3 ConsumeQueue#correctMinOffset), a live lock; the table ends
with that verdict in one line. Normal recovery differs by version: 4.9 and 5.3.1 (any
5.0-5.3.1) re-read the last three commit-log files and dispatch nothing; 5 (5.3.2 and later)
starts at the file holding the consume queues' end and dispatches the messages after it.
"""

def broker_start(cfg, version, findings: list[dict], summary: dict):
    """The ``broker_start`` verdict of one store (``store.startup.predict_start``)."""
    from rmqstore_cli.store.startup import predict_start

    return predict_start(cfg, None if version is None else version.value, findings, summary)


TABLE_COLUMNS = [("severity", "severity"), ("file", "file"), ("offset", "offset"), ("detail", "detail")]


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=EPILOG)(verify)


@command
def verify(
    store: StoresOpt = [str(DEFAULT_STORE)],
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    crc: Annotated[bool, typer.Option("--crc/--no-crc", help="Check every body CRC (and __CRC32# properties).")] = True,
    deep: Annotated[bool, typer.Option("--deep", help="Also prove every indexed key of every message is in the index.")] = False,
    max_findings: Annotated[Optional[int], typer.Option(
        "--max-findings", min=0, help="Show at most N findings per check (all are counted in the summary).")] = 100,
    list_checks: Annotated[bool, typer.Option("--list-checks", help="List every check id, its severity and "
                                              "meaning, and exit.")] = False,
    broker_version: Annotated[Optional[VerifyBrokerVersion], typer.Option(
        "--broker-version", help="The broker version whose recovery and start-up verify predicts: 4.9, 5.3.1 "
                                 "(any 5.0-5.3.1) or 5 (5.3.2 and later), when the store cannot tell (5 when "
                                 "timer files are there; else 4.9 is assumed and said).")] = None,
    fmt: FormatOpt = Fmt.table,
    engine: EngineOpt = Engine.local,
    spark_master: SparkMasterOpt = None,
    spark_conf: SparkConfOpt = None,
    verbose: SparkVerboseOpt = False,
) -> None:
    """Check a store's commit log, consume queues, index, checkpoint and abort marker.

    Every record, unit and index entry is checked against the others; damage does not
    stop the scan (it resynchronises on the next record and reports the unreadable bytes).
    Each finding has a stable check id, a severity (error, warning, info), the file
    relative to the store root and the byte offset in it. Broker-normal artefacts
    (duplicate queue offsets after restarts, pre-blank units, expired entries) are info.
    Read-only: no byte of the store changes.
    """
    from rmqstore_cli.commands.common import load_config
    from rmqstore_cli.render import Output, ProgressBar, console, print_summary, safe_text, to_json
    from rmqstore_cli.store.verify import CHECKS, Verifier, VerifyOptions, open_for_verify

    if list_checks:
        rows = [{"check": c, "severity": sev, "detail": what} for c, (sev, what) in CHECKS.items()]
        out = Output(fmt.value, [("check", "check"), ("severity", "severity"), ("detail", "meaning")],
                     title="verify checks")
        for r in rows:
            out.emit(r)
        out.close()
        return
    from rmqstore_cli.pipeline.stores import expand_stores

    sizes = dict(mapped_file_size_commit_log=commitlog_file_size, mapped_file_size_consume_queue=cq_file_size,
                 max_hash_slot_num=index_slots, max_index_num=index_max)
    specs = expand_stores(store, str(broker_conf) if broker_conf else None, sizes)
    if len(specs) > 1 or engine is Engine.spark:
        _verify_many(specs, engine, spark_master, spark_conf, verbose, crc, deep, max_findings, fmt, broker_version)
        return
    store = Path(specs[0].path)
    cfg = open_for_verify(load_config(store, broker_conf, commitlog_file_size, cq_file_size, index_slots, index_max))
    opts = VerifyOptions(crc=crc, deep=deep, max_findings=max_findings,
                         broker_version=None if broker_version is None else broker_version.value)
    total = 0
    if sys.stderr.isatty():
        total = sum(p.stat().st_size for d in cfg.commitlog_dirs if d.is_dir() for p in d.iterdir() if p.is_file())
    from rmqstore_cli.store.startup import STARTUP_CHECKS

    findings = []
    relevant = []  # what broker_start reads, kept even when the findings stream out
    with ProgressBar("verifying commit log", total=total or None) as bar:
        v = Verifier(cfg, opts, bar.advance)
        if fmt is Fmt.jsonl:
            for f in v.run():
                sys.stdout.write(to_json(f.as_dict()) + "\n")
                if f.check in STARTUP_CHECKS:
                    relevant.append(f.as_dict())
        else:
            findings = list(v.run())
            relevant = [f.as_dict() for f in findings if f.check in STARTUP_CHECKS]
    summary = v.summary
    verdict = broker_start(cfg, broker_version, relevant, summary)
    summary["broker_start"] = verdict.as_dict()
    if fmt is Fmt.jsonl:
        sys.stdout.write(to_json({"summary": summary}) + "\n")
    elif fmt is Fmt.json:
        sys.stdout.write(to_json({"findings": [f.as_dict() for f in findings], "summary": summary}) + "\n")
    else:
        by_check: dict[str, list] = {}
        for f in findings:
            by_check.setdefault(f.check, []).append(f)
        for check in sorted(by_check, key=lambda c: (list(CHECKS).index(c) if c in CHECKS else 999)):
            items = by_check[check]
            shown = len(items)
            count = v.counts[check]
            title = f"{check} — {CHECKS[check][1]}" + (f" ({shown} of {count} shown)" if count > shown else "")
            out = Output("table", TABLE_COLUMNS, title=safe_text(title))
            for f in items:
                out.emit({"severity": f.severity, "file": f.file, "offset": "" if f.offset is None else f.offset,
                          "detail": f.detail})
            out.close()
        print_summary("table", {k: summary[k] for k in ("store", "messages", "bytes", "files", "errors", "warnings",
                                                         "infos")}, "verify summary")
        if not findings:
            console().print("no findings: the store is consistent")
        console().print(safe_text(verdict.line()), highlight=False)
        for note in summary["notes"]:
            print(f"rmqstore: note: {note}", file=sys.stderr)
    sys.stdout.flush()
    if not v.ok:
        raise typer.Exit(1)


def _verify_many(specs, engine, master, conf, verbose, crc, deep, max_findings, fmt, version) -> None:
    """Several stores (or Spark): the same Verifier per store; findings carry their store."""
    from rmqstore_cli.pipeline.stores import verify_store
    from rmqstore_cli.render import Output, console, print_summary, safe_text, to_json
    from rmqstore_cli.store.config import StoreConfig
    from rmqstore_cli.store.verify import open_for_verify

    for s in specs:  # a path that is not a store is a clean error before any work
        open_for_verify(StoreConfig.load(s.path, s.broker_conf, **dict(s.sizes)))
    v = None if version is None else version.value
    if engine is Engine.spark:
        try:
            from rmqstore_cli.pipeline import spark as sp
        except ImportError:
            from rmqstore_cli.errors import UsageError

            raise UsageError("the spark engine needs PySpark", hint="pip install 'rmqstore[spark]'") from None
        results = sp.run_job(sp.verify, master, conf, verbose, specs, crc, deep, max_findings, v)
    else:
        results = [verify_store(s, crc, deep, max_findings, v) for s in specs]
    from rmqstore_cli.store.startup import STARTUP_CHECKS

    for s, r in zip(specs, results):
        cfg = StoreConfig.load(s.path, s.broker_conf, **dict(s.sizes))
        r["verdict"] = broker_start(cfg, version, [f for f in r["findings"] if f["check"] in STARTUP_CHECKS],
                                    r["summary"])
        r["summary"]["broker_start"] = r["verdict"].as_dict()
    findings = [f for r in results for f in r["findings"]]
    summaries = [r["summary"] for r in results]
    if fmt is Fmt.jsonl:
        for f in findings:
            sys.stdout.write(to_json(f) + "\n")
        sys.stdout.write(to_json({"summary": {"stores": summaries}}) + "\n")
    elif fmt is Fmt.json:
        sys.stdout.write(to_json({"findings": findings, "summary": {"stores": summaries}}) + "\n")
    else:
        if findings:
            out = Output("table", [("store", "store"), ("check", "check")] + TABLE_COLUMNS, title="verify findings")
            for f in findings:
                out.emit({k: safe_text(str(f.get(k) if f.get(k) is not None else "")) for k in
                          ("store", "check", "severity", "file", "offset", "detail")})
            out.close()
        for r in results:
            sm = r["summary"]
            print_summary("table", {k: sm.get(k) for k in ("store", "messages", "bytes", "files", "errors",
                                                            "warnings", "infos")}, "verify summary")
            console().print(safe_text(f"{sm['store']}: {r['verdict'].line()}"), highlight=False)
    sys.stdout.flush()
    if not all(r["ok"] for r in results):
        raise typer.Exit(1)
