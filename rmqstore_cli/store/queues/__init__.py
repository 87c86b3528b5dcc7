"""The files derived from the commit log, one owner per format: consume queues (file, batch,
RocksDB, compaction) and the hash index."""
