"""Checks beside verify's: a unit against its record, the broker-start prediction, the epoch
file against the log, the double-written queues."""
