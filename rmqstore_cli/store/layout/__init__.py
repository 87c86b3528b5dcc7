"""What a store directory holds besides its logs and queues: the configuration, the root's
files (checkpoint, config/*.json, the epoch file, RocksDB config)."""
