"""Store's jobs (:class:`StoreJobs`, a mixin Store inherits): those that write (expire,
rebuild the consume queues and index, export a dataset) and the whole-store check (verify).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rmqstore_cli.api.base import StoreView, TimeLike, at_ms, check_range
from rmqstore_cli.api.job_records import ExpireAction, ExpireReport, ExportReport, RebuildReport
from rmqstore_cli.api.records import Finding, VerifyReport
from rmqstore_cli.errors import UsageError

if TYPE_CHECKING:
    from rmqstore_cli.pipeline.stores import StoreSpec


class StoreJobs(StoreView):
    """Store's jobs and checks (api/store.py binds each in Store's body)."""

    def expire(
        self,
        reserved_hours: float | None = None,
        *,
        dry_run: bool = True,
        now: TimeLike | None = None,
        disk_ratio: float | None = None,
        max_files: int | None = None,
        pause_ms: int = 0,
        force: bool = False,
    ) -> ExpireReport:
        """The broker's file expiry run once, as ``rmqstore expire``: commit-log files last
        modified ``reserved_hours`` ago or more (default: the broker config's
        ``fileReservedTime``, else 72), oldest first, never the newest (or, past
        ``disk_ratio`` of the partition, the oldest whatever their age), then the
        consume-queue and index files that only point below the commit log's new minimum.

        A dry run (the default here) only reads and lists what would go. Otherwise the
        broker's lock is held while files are deleted, and a live broker holding it is
        refused (:class:`~rmqstore_cli.errors.RefusedError`) unless ``force``; each deletion
        is appended to ``rmqstore-expire.jsonl`` in the store root as it happens. A run that
        had to leave files alone returns with ``completed`` False and the ``problems``."""
        from rmqstore_cli.store.write import expire_run

        check_expire_args(reserved_hours, disk_ratio, max_files)
        at = at_ms(now, self.tz)
        cfg = self.opener.config()
        hours = reserved_hours if reserved_hours is not None else float(cfg.file_reserved_time)
        expire_run.check_lock(cfg, dry_run, force, refuse_hint="stop the broker or work on a snapshot")
        self.engine.warnings.extend(expire_run.check_files(cfg, self.tz))
        try:
            run = expire_run.run(cfg, at, hours, disk_ratio, max_files, pause_ms, dry_run)
        finally:
            if not dry_run:
                self._reopen()
        summary = expire_run.summary(run, cfg)
        lost = expire_run.record(run.journal, summary)
        if lost is not None:
            self.engine.warnings.append(f"this run's deletions are not recorded: {lost}")
        self.engine.warnings.extend(run.plan.notes)
        return ExpireReport([ExpireAction.of(a.as_dict()) for a in run.deleted], summary)

    def rebuild_index(
        self,
        output: str | os.PathLike[str] | None = None,
        *,
        dry_run: bool = False,
        only: str | None = None,
        topics: list[str] | None = None,
        copy_commitlog: bool = False,
        no_backup: bool = False,
        jobs: int = 1,
    ) -> RebuildReport:
        """Regenerate consume queues and index files from the commit log, as the broker's
        dispatch builds them (``rebuild-index``): to ``output`` (a directory outside the store,
        which is only read; its commit log linked, or copied with ``copy_commitlog``), or with
        ``output`` None in place (the old sets kept in ``rmqstore-backup/`` unless
        ``no_backup``; a live broker refused, and the broker's lock held for the swap).
        ``only`` "cq" or "index" rebuilds one set; ``topics`` only those topics' queues.
        ``dry_run`` scans and reports what would be written. Index files are named by their
        first entry's store time in the store's ``tz``. ``jobs``: run the rebuild on this
        many processes (0: every core this process may use, one below 64 MiB of log on disk
        as verify's), one task per commit-log file, then per queue and index file; the same
        files and report as one process."""
        import functools

        from rmqstore_cli.pipeline.local import rebuild_build
        from rmqstore_cli.store.files.lock import refuse_if_live
        from rmqstore_cli.store.write import rebuild_plan

        check_rebuild_args(output, only, topics, copy_commitlog, no_backup)
        if output is None:
            refuse_if_live(self.path)
        cfg = self.opener.config()
        rebuild_plan.refuse_index_disabled(cfg, only)
        opts = rebuild_plan.options(cfg, only, topics, self.tz, dry_run)
        sources = rebuild_plan.check_sizes(cfg, opts, self.opener.sizes, self.opener.broker_conf)
        picked = rebuild_plan.batch_topics_picked(cfg, opts)
        if picked:
            raise UsageError(
                f"{', '.join(picked)}: BatchCQ topics (batchconsumequeue/) are rebuilt only with all the queues"
            )
        out = None if output is None else Path(output)
        try:
            build = functools.partial(rebuild_build, jobs=jobs)
            rep, plan = rebuild_plan.rebuild(cfg, out, opts, no_backup, copy_commitlog, build=build)
        finally:
            if output is None and not dry_run:
                self._reopen()
        return RebuildReport.of(rebuild_plan.summary(self.path, rep, dict(plan, sizes=sources), opts))

    def export(
        self,
        out_dir: str | os.PathLike[str],
        *,
        body: bool = False,
        compression: str = "snappy",
        overwrite: bool = False,
        store_name: str | None = None,
        topic: str | None = None,
        begin: TimeLike | None = None,
        end: TimeLike | None = None,
        queue_id: int | None = None,
        key: str | None = None,
        uniq_key: str | None = None,
        tag: str | None = None,
        from_offset: int | None = None,
        to_offset: int | None = None,
        jobs: int = 1,
    ) -> ExportReport:
        """Write the store's commit-log messages as a Parquet dataset in ``out_dir`` (the
        columns of :meth:`batches`, partitioned ``store=…/topic_dir=…``), as ``rmqstore
        export`` does on its local engine; ``body`` includes message bodies, ``compression``
        is snappy, zstd, lz4, gzip or none. ``store_name`` is the ``store`` column's value
        (default: the broker.conf's brokerName, else the store directory's name, the
        parent's for one named ``store``). Only the messages that pass the filters of
        :meth:`messages` (the same keywords) are written. A non-empty ``out_dir`` is refused
        unless ``overwrite``. ``jobs``: write on this many processes (0: every core, or one
        for commit logs under 64 MiB on disk), the same rows in other files than one process
        writes. The store is only read. Needs pyarrow (the ``export`` extra); a dataset that
        cannot be written is an :class:`~rmqstore_cli.errors.OutputError`."""
        import time

        from rmqstore_cli.pipeline import export_run
        from rmqstore_cli.pipeline.stores import file_tasks

        export_run.require_parquet()
        flt = self.filter(topic, begin, end, queue_id=queue_id, key=key, uniq_key=uniq_key, tag=tag)
        check_range(from_offset, to_offset)
        if compression not in ("snappy", "zstd", "lz4", "gzip", "none"):
            raise UsageError(f"compression {compression!r}: not snappy, zstd, lz4, gzip or none")
        output = Path(out_dir)
        blocker = export_run.output_blocker(output)
        if blocker is not None:
            raise UsageError("a file is where the dataset's directory belongs", path=blocker)
        if output.exists() and any(output.iterdir()) and not overwrite:
            raise UsageError(f"output directory {output} is not empty", hint="overwrite=True replaces it")
        (spec,) = export_run.store_names([self._spec()], None if store_name is None else [store_name])
        tasks = file_tasks([spec], body, flt, from_offset, to_offset)
        t0 = time.monotonic()
        export_run.make_output_dir(output)
        result = export_run.write_local(tasks, output, compression, jobs=jobs)
        s = export_run.summary(output, "local", 1, tasks, result, time.monotonic() - t0)
        return ExportReport(**s, unreadable=list(result["unreadable"]))

    def verify(
        self,
        *,
        crc: bool = True,
        deep: bool = False,
        max_findings: int | None = None,
        broker_version: str | None = None,
        jobs: int = 1,
    ) -> VerifyReport:
        """Check the commit log, consume queues, index, checkpoint, config files and the 5.x
        stores against each other, and predict whether the broker starts on the store
        (``broker_version``: "4.9", "5.3.1" or "5"; else the store's, else 4.9 assumed).
        ``max_findings`` caps the findings kept per check (all are counted in the summary).
        ``jobs``: run the checks on this many processes (0: every core this process may use),
        one task per commit-log file, then per queue and index file; the same summary and
        findings as one process."""
        from rmqstore_cli.pipeline.verify_job import verify_one
        from rmqstore_cli.store.verify import VerifyOptions

        opts = VerifyOptions(crc=crc, deep=deep, max_findings=max_findings, broker_version=broker_version)
        # one store, not a fleet: the findings without ``store``, the summary naming the path
        got = verify_one(self._spec(), opts, jobs=jobs)
        return VerifyReport([Finding.of(f) for f in got["findings"]], got["summary"], got["ok"])

    def _spec(self) -> StoreSpec:
        """This store as a job's plan names one (``pipeline.stores.StoreSpec``, labelled by its
        path): the broker.conf and the sizes it was opened with."""
        from rmqstore_cli.pipeline.stores import StoreSpec

        root = str(self.path)
        conf = None if self.opener.broker_conf is None else str(self.opener.broker_conf)
        return StoreSpec(root, root, conf, tuple(sorted((k, v) for k, v in self.opener.sizes.items() if v is not None)))


def check_expire_args(reserved_hours: float | None, disk_ratio: float | None, max_files: int | None) -> None:
    """Refuse what :meth:`StoreJobs.expire` cannot run with, before anything is read."""
    if disk_ratio is not None and not 0 < disk_ratio <= 1:
        raise UsageError(f"disk_ratio {disk_ratio:g} is not a share of the disk", hint="give a fraction: 0.85")
    if reserved_hours is not None and reserved_hours < 0:
        raise UsageError(f"reserved_hours {reserved_hours:g} is negative")
    if max_files is not None and max_files < 1:
        raise UsageError(f"max_files {max_files}: at least one")


def check_rebuild_args(
    output: str | os.PathLike[str] | None,
    only: str | None,
    topics: list[str] | None,
    copy_commitlog: bool,
    no_backup: bool,
) -> None:
    """Refuse the arguments of :meth:`StoreJobs.rebuild_index` that do not go together, and a
    topic that cannot name a consume-queue directory, before anything is read."""
    from rmqstore_cli.store.write import rebuild_plan

    if only is not None and only not in rebuild_plan.ONLY:
        raise UsageError(f"only={only!r}: not cq or index")
    if topics and only == "index":
        raise UsageError("topics select consume queues; they do not go with only='index'")
    if output is not None and no_backup:
        raise UsageError("no_backup goes with an in-place rebuild")
    if output is None and copy_commitlog:
        raise UsageError("copy_commitlog goes with an output directory")
    refuse_unsafe_topics(topics or [])


def refuse_unsafe_topics(topics: list[str]) -> None:
    """Refuse a topic that cannot name a consume-queue directory (``..``, a path separator, …)."""
    from rmqstore_cli.store.queues.consume_queue import unsafe_topic

    for t in topics:
        if unsafe_topic(t):
            raise UsageError(f"topic {t!r} cannot be a consume-queue directory: {unsafe_topic(t)}")
