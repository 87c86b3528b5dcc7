"""Checks beside verify's: a unit against its record, the broker-start prediction, the epoch
file against the log, the double-written queues; the findings catalog verify reports in, and
the one extra commit-log walk the timer and batch-queue checks (and dump-timer --overdue) share."""
