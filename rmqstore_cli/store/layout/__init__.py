"""What a store directory holds besides its logs and queues: the configuration (with where a
DLedger log lies and a non-default index size), the root's files (checkpoint, config/*.json,
the epoch file, RocksDB config)."""
