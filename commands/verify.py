"""``rmqstore verify``: prove a store consistent, or say exactly where it is not."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rmqstore_cli.commands.common import (
    BrokerConfOpt,
    CommitlogSizeOpt,
    CqSizeOpt,
    Engine,
    EngineOpt,
    Fmt,
    FormatOpt,
    IndexMaxOpt,
    IndexSlotsOpt,
    SparkConfOpt,
    SparkMasterOpt,
    SparkVerboseOpt,
    StoreGlobOpt,
    StoresOpt,
    VerifyBrokerVersion,
    command,
)

EPILOG = """Examples:

  rmqstore verify --store ~/store --broker-conf conf/broker.conf

  rmqstore verify --store /snapshots/broker-a --deep --format jsonl | jq -c 'select(.severity=="error")'

  rmqstore verify --store ~/store --no-crc --max-findings 5

  rmqstore verify --list-checks

  rmqstore verify --store-glob '/snapshots/broker-*/store' --format jsonl      # several stores

  rmqstore verify --store a/store --store b/store --engine spark --spark-master 'local[4]'

With --store-glob (or --store repeated) every finding carries "store", and the summary
holds one entry per store ({"summary": {"stores": [...]}}), however many matched; one
store prints the same whatever the engine.
--engine spark runs one Spark task per commit-log file, then one per queue and per index
file; the findings are the local engine's.

Exit codes: 0 no errors (warnings and info may be listed), 1 errors found (a broker that
would not start on the store is always one), 3 not a store, 5 the output could not be
written (stdout full or closed). Into a pipe whose reader went away (| head -1) the check
still runs silently and the exit code is its answer. A finding rebuild-index repairs
(cq.missing-unit, index.missing: messageIndexEnable=true but no index entry while messages
carry keys) ends with the command that repairs it; so does a file the broker would not load
or whose recovery would delete the files after it (commitlog.file-size, cq.file-size,
commitlog.blank: rmqstore repair --pad, which keeps every good message). config/*.json are
read as ConfigManager#load reads them: config.backup-loaded (warning: the broker runs on the
.bak), config.lost and config.load-fails (errors: an empty table, or no start).
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


def _version(option) -> str | None:
    """--broker-version's value (None: the store's, else 4.9 assumed)."""
    return None if option is None else option.value


TABLE_COLUMNS = [("severity", "severity"), ("file", "file"), ("offset", "offset"), ("detail", "detail")]


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=EPILOG)(verify)


@command(answer=True)
def verify(
    store: StoresOpt = None,
    store_glob: StoreGlobOpt = None,
    broker_conf: BrokerConfOpt = None,
    commitlog_file_size: CommitlogSizeOpt = None,
    cq_file_size: CqSizeOpt = None,
    index_slots: IndexSlotsOpt = None,
    index_max: IndexMaxOpt = None,
    crc: Annotated[bool, typer.Option("--crc/--no-crc", help="Check every body CRC (and __CRC32# properties).")] = True,
    deep: Annotated[
        bool, typer.Option("--deep", help="Also prove every indexed key of every message is in the index.")
    ] = False,
    max_findings: Annotated[
        int | None,
        typer.Option(
            "--max-findings", min=0, help="Show at most N findings per check (all are counted in the summary)."
        ),
    ] = 100,
    list_checks: Annotated[
        bool, typer.Option("--list-checks", help="List every check id, its severity and meaning, and exit.")
    ] = False,
    broker_version: Annotated[
        VerifyBrokerVersion | None,
        typer.Option(
            "--broker-version",
            help="The broker version whose recovery and start-up verify predicts: 4.9, 5.3.1 "
            "(any 5.0-5.3.1) or 5 (5.3.2 and later), when the store cannot tell (5 when "
            "timer files are there; else 4.9 is assumed and said).",
        ),
    ] = None,
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
    from rmqstore_cli.render import Output

    if list_checks:
        from rmqstore_cli.store.verify import CHECKS

        rows = [{"check": c, "severity": sev, "detail": what} for c, (sev, what) in CHECKS.items()]
        out = Output(
            fmt.value, [("check", "check"), ("severity", "severity"), ("detail", "meaning")], title="verify checks"
        )
        for r in rows:
            out.emit(r)
        out.close()
        return
    from rmqstore_cli.commands.common import pick_stores

    sizes = dict(
        mapped_file_size_commit_log=commitlog_file_size,
        mapped_file_size_consume_queue=cq_file_size,
        max_hash_slot_num=index_slots,
        max_index_num=index_max,
    )
    specs = pick_stores(store, store_glob, broker_conf, sizes)
    # a fleet (--store-glob, or --store more than once) prints the fleet's shape even when one
    # store matched: a script's jq path must not depend on how many stores there were today
    fleet = bool(store_glob) or len(store or []) > 1
    if fleet or engine is Engine.spark:
        results = _verify_many(
            specs, engine, spark_master, spark_conf, verbose, crc, deep, max_findings, broker_version, fleet
        )
        if fleet:
            _print_many(results, fmt)
        else:  # one store: the local engine's output, whatever the engine
            _print_one(results[0], fmt)
        sys.stdout.flush()
        if not all(r["ok"] for r in results):
            raise typer.Exit(1)
        return
    _verify_one(specs[0], crc, deep, max_findings, broker_version, fmt)


def _verify_one(spec, crc: bool, deep: bool, max_findings: int | None, broker_version, fmt: Fmt) -> None:
    """One store on the local engine: jsonl findings stream out as the scan finds them."""
    from rmqstore_cli.render import ProgressBar, to_json
    from rmqstore_cli.store.config import StoreConfig
    from rmqstore_cli.store.startup import STARTUP_CHECKS, predict_start
    from rmqstore_cli.store.verify import Verifier, VerifyOptions, open_for_verify

    cfg = open_for_verify(StoreConfig.load(spec.path, spec.broker_conf, **dict(spec.sizes)))
    opts = VerifyOptions(
        crc=crc,
        deep=deep,
        max_findings=max_findings,
        broker_version=None if broker_version is None else broker_version.value,
    )
    total = 0
    if sys.stderr.isatty():
        total = sum(p.stat().st_size for d in cfg.commitlog_dirs if d.is_dir() for p in d.iterdir() if p.is_file())
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
            findings = [f.as_dict() for f in v.run()]
            relevant = [f for f in findings if f["check"] in STARTUP_CHECKS]
    summary = v.summary
    verdict, no_start = predict_start(cfg, _version(broker_version), relevant, summary)
    no_start = [f.as_dict() for f in no_start]  # "would not start" is an error (exit 1)
    if fmt is Fmt.jsonl:
        for f in no_start:
            sys.stdout.write(to_json(f) + "\n")
    findings += no_start
    _print_one({"findings": findings, "summary": summary, "verdict": verdict}, fmt, streamed=fmt is Fmt.jsonl)
    sys.stdout.flush()
    if not v.ok or no_start:
        raise typer.Exit(1)


def _print_one(result: dict, fmt: Fmt, streamed: bool = False) -> None:
    """One store's findings, summary and broker_start line: the same for either engine
    (``streamed``: the jsonl findings are out already)."""
    from rmqstore_cli.render import Output, console, print_summary, safe_markup, safe_text, to_json
    from rmqstore_cli.store.verify import CHECKS

    findings, summary = result["findings"], result["summary"]
    if fmt is Fmt.jsonl:
        for f in () if streamed else findings:
            sys.stdout.write(to_json(f) + "\n")
        sys.stdout.write(to_json({"summary": summary}) + "\n")
        return
    if fmt is Fmt.json:
        sys.stdout.write(to_json({"findings": findings, "summary": summary}) + "\n")
        return
    by_check: dict[str, list] = {}
    for f in findings:
        by_check.setdefault(f["check"], []).append(f)
    for check in sorted(by_check, key=lambda c: list(CHECKS).index(c) if c in CHECKS else 999):
        items = by_check[check]
        count = summary["findings"].get(check, len(items))
        title = f"{check} — {CHECKS[check][1]}" + (f" ({len(items)} of {count} shown)" if count > len(items) else "")
        out = Output("table", TABLE_COLUMNS, title=safe_text(title))
        for f in items:
            out.emit(
                {
                    "severity": f["severity"],
                    "file": f["file"],
                    "offset": "" if f["offset"] is None else f["offset"],
                    "detail": f["detail"],
                }
            )
        out.close()
    print_summary(
        "table",
        {k: summary[k] for k in ("store", "messages", "bytes", "files", "errors", "warnings", "infos")},
        "verify summary",
    )
    if not findings:
        console().print("no findings: the store is consistent")
    console().print(safe_markup(result["verdict"].line()), highlight=False)
    for note in summary["notes"]:
        print(f"rmqstore: note: {safe_text(note)}", file=sys.stderr)


def _verify_many(specs, engine, master, conf, verbose, crc, deep, max_findings, version, fleet: bool) -> list[dict]:
    """Several stores (or Spark): the same Verifier per store, each result with its
    ``broker_start`` verdict; with one store, shaped as the local engine's (no ``store`` in
    the findings, the summary's ``store`` the path as the local engine prints it)."""
    from rmqstore_cli.pipeline.stores import verify_store
    from rmqstore_cli.store.config import StoreConfig
    from rmqstore_cli.store.startup import STARTUP_CHECKS, predict_start
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
    for s, r in zip(specs, results, strict=True):
        if not fleet:
            r["findings"] = [{k: x for k, x in f.items() if k != "store"} for f in r["findings"]]
            r["summary"]["store"] = s.path
        cfg = StoreConfig.load(s.path, s.broker_conf, **dict(s.sizes))
        r["verdict"], no_start = predict_start(
            cfg, _version(version), [f for f in r["findings"] if f["check"] in STARTUP_CHECKS], r["summary"]
        )
        no_start = [f.as_dict() for f in no_start]
        r["findings"] += no_start if not fleet else [dict(f, store=r["store"]) for f in no_start]
        r["ok"] = r["ok"] and not no_start
    return results


def _print_many(results: list[dict], fmt: Fmt) -> None:
    """Several stores: every finding with its store, one summary per store."""
    from rmqstore_cli.render import Output, console, print_summary, safe_markup, safe_text, to_json

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
                out.emit(
                    {
                        k: safe_text(str(f.get(k) if f.get(k) is not None else ""))
                        for k in ("store", "check", "severity", "file", "offset", "detail")
                    }
                )
            out.close()
        for r in results:
            sm = r["summary"]
            print_summary(
                "table",
                {k: sm.get(k) for k in ("store", "messages", "bytes", "files", "errors", "warnings", "infos")},
                "verify summary",
            )
            console().print(safe_markup(f"{sm['store']}: {r['verdict'].line()}"), highlight=False)
